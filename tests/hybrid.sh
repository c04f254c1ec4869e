#!/usr/bin/env bash
# Qwen3.5 hybrid models end to end (tests/hybrid/hybrid_test.py) against the real sniperd.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-hybrid.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 tests/hybrid/hybrid_test.py "$BUILD" "$TMP"
