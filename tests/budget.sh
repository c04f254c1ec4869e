#!/usr/bin/env bash
# A RAM budget too small for the slots is refused, not overrun, inside a memory cgroup
# (tests/budget/budget_test.py) against the real sniperd.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-budget.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 tests/budget/budget_test.py "$BUILD" "$TMP"
