#!/usr/bin/env bash
# Gemma 4 through the daemon (tests/gemma4/gemma4_test.py): its template, end of turn, tool calls,
# slots, prompt cache, logprobs, JSON mode and contexts on tiny-gemma4 with a Gemma 4-style
# vocabulary, against the real sniperd.
set -uo pipefail
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-gemma4.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/gemma4/gemma4_test.py" "$BUILD" "$TMP"
