#!/usr/bin/env bash
# /tokenize and /detokenize (llama-server's shapes) end to end: tests/tokenize/tokenize_test.py
# against the real sniperd.
set -uo pipefail
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-tokenize.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/tokenize/tokenize_test.py" "$BUILD" "$TMP"
