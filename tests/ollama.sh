#!/usr/bin/env bash
# Ollama's API end to end: tests/ollama/ollama_test.py against the real sniperd (see that file).
set -uo pipefail
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-ollama-py.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/ollama/ollama_test.py" "$BUILD" "$TMP"
