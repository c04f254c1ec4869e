#!/usr/bin/env bash
# Parallel slots end to end (tests/parallel/parallel_test.py) against the real sniperd.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-parallel.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 tests/parallel/parallel_test.py "$BUILD" "$TMP"
