#!/usr/bin/env bash
# Anthropic's Messages API end to end: tests/messages/messages_test.py against the real sniperd
# (shapes, events, the prompt cache, stop sequences, keys, and hostile requests).
set -uo pipefail
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-messages.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/messages/messages_test.py" "$BUILD" "$TMP"
