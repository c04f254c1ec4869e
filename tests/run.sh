#!/usr/bin/env bash
# Runs every test binary in $BUILD/tests and then every tests/*.sh script, sums their
# "N passed, N failed, N skipped" lines and ends with the total on one line. Exits 1 on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
. tests/lib/summary.sh
export BUILD
# sniperd's default device (--gpu): none in the suite, whose scripts start it hundreds of times
# (the GPU's own tests name their device: test_gpu*, tests/gpu.sh)
export SNIPER_GPU=${SNIPER_GPU:-none}
total_p=0 total_f=0 total_s=0
if [ ! -d ../shared/fixtures ] && [ -z "${SNIPER_FIXTURES:-}" ]; then
    echo "************************************************************************"
    echo "* WARNING: ../shared/fixtures is absent: fixture tests will be SKIPPED *"
    echo "************************************************************************"
fi
run_one() {
    local name=$1; shift
    local log; log=$(mktemp)
    local start=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local p f s
    summary_counts "$log" "$rc"
    if [ "$f" -ne 0 ] || [ "$s" -ne 0 ] || [ -n "${VERBOSE:-}" ]; then
        cat "$log"
    fi
    printf '%-28s %3d passed, %d failed, %d skipped (%ds)\n' "$name" "$p" "$f" "$s" $((SECONDS - start))
    total_p=$((total_p + p)); total_f=$((total_f + f)); total_s=$((total_s + s))
    rm -f "$log"
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for s in tests/*.sh; do
    [ "$s" = tests/run.sh ] && continue
    [ -f "$s" ] || continue
    run_one "$(basename "$s")" bash "$s"
done
echo "$total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" -eq 0 ]
