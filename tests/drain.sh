#!/usr/bin/env bash
# How sniperd stops: --drain-timeout and a second signal (tests/drain/drain_test.py) against the
# real daemon.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-drain.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 tests/drain/drain_test.py "$BUILD" "$TMP"
