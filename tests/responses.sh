#!/usr/bin/env bash
# OpenAI's Responses API end to end: tests/responses/responses_test.py against the real sniperd
# (see that file).
set -uo pipefail
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-responses.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/responses/responses_test.py" "$BUILD" "$TMP"
