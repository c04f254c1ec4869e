#!/usr/bin/env bash
# The HTTP API end to end: tests/http/http_test.py against the real sniperd (see that file).
set -uo pipefail
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-http.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/http/http_test.py" "$BUILD" "$TMP"
