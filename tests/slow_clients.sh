#!/usr/bin/env bash
# Slow and hostile clients against the real sniperd: tests/http/slow_clients.py (see that file),
# with a 2-second read deadline to keep it short.
set -uo pipefail
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-slow.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/http/slow_clients.py" "$BUILD" "$TMP" 2
