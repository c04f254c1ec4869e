#!/usr/bin/env bash
# Several models in one daemon (tests/models/models_test.py) against the real sniperd.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-models.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 tests/models/models_test.py "$BUILD" "$TMP"
