#!/usr/bin/env bash
# arm64.sh - the tests that matter for the CPU (kernels, fidelity, engine, experts, ctxfile,
# tokenizer) cross-built for linux-arm64 into build-arm64/ and run under qemu-user: the NEON twins
# bitwise against the reference, with SDOT and SMMLA (qemu's "max" CPU has both), with SDOT only
# (a Cortex-A76: the run-time detection picks neondot, and the matmul its one-row kernels) and
# without either (a Cortex-A53: plain NEON), then fidelity against the fixtures' goldens and
# streaming as on x86. Models come from the host's sniper-mkmodel ($BUILD; the same bytes).
# Where the cross compiler, qemu or the arm64 libraries are missing it says so and skips
# (scripts/deps.sh installs them). Ends with "N passed, N failed, N skipped", like every test.
set -uo pipefail
cd "$(dirname "$0")/.."
ARM_CC=${ARM64_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
ABUILD=${ARM64_BUILD:-build-arm64}
HOST_BUILD=${BUILD:-build}
TESTS=(test_quant test_quant_simd test_quant_iq test_ops test_fidelity test_engine test_experts
       test_ctxfile test_tokenizer)
# binary[:case]: whole binaries where they are quick, else cases (name substrings) picked for the
# NEON types they run (qemu runs the engine 30-40x slower than the host: the whole set is ~2 min)
RUNS=(test_quant test_quant_simd test_quant_iq test_ops:matmul
      test_fidelity:x256_q3_k_m test_fidelity:x256_mxfp4_moe test_fidelity:dense_q4_1
      test_fidelity:x256_iq2_m
      test_engine:llama_runs test_engine:batch_invariance_moe_q4_k_m
      test_experts:q3_k_m_streaming_is_exact test_experts:dense_streaming_is_exact
      test_experts:bytes_read_exact
      test_ctxfile:exact_q8_0_kv test_ctxfile:hybrid_f16
      test_tokenizer:golden_prompts)

if [ -n "${SNIPER_CHECK:-}" ]; then
    echo "arm64: not under make check (sanitizers do not run in qemu-user); make test runs it"
    echo "0 passed, 0 failed, 0 skipped"
    exit 0
fi
missing=
command -v "$ARM_CC" >/dev/null || missing="$missing $ARM_CC"
command -v "$QEMU" >/dev/null || missing="$missing $QEMU"
# the multiarch libc (libc6:arm64) runs the binaries: qemu with -L on the cross compiler's own
# older libc hangs in the first pthread_create (seen with Debian 12's qemu 7.2)
[ -e /lib/ld-linux-aarch64.so.1 ] || missing="$missing libc6:arm64"
[ -e /usr/lib/aarch64-linux-gnu/libjansson.so ] || missing="$missing arm64-multiarch-libraries"
if [ -n "$missing" ]; then
    echo "SKIP arm64: missing$missing (scripts/deps.sh installs them): arm64 NOT tested"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi

build_log=$(mktemp)
if ! PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
        make -j2 --no-print-directory BUILD="$ABUILD" CC="$ARM_CC" HOSTCC=cc \
        "${TESTS[@]/#/$ABUILD/tests/}" >"$build_log" 2>&1 ||
   ! make --no-print-directory "$HOST_BUILD/sniper-mkmodel" >>"$build_log" 2>&1; then
    tail -n 40 "$build_log"
    rm -f "$build_log"
    echo "arm64: the cross build failed"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
rm -f "$build_log"

. tests/lib/summary.sh
total_p=0 total_f=0 total_s=0
# run_one NAME CPU [CASE]: one test binary (its cases whose names contain CASE) under qemu's CPU
# model; adds its counts to the totals.
run_one() {
    local name=$1 cpu=$2 log; log=$(mktemp)
    shift 2
    local start=$SECONDS
    BUILD="$HOST_BUILD" "$QEMU" -cpu "$cpu" "$ABUILD/tests/$name" "$@" >"$log" 2>&1
    local rc=$?
    local p f s
    summary_counts "$log" "$rc"
    if [ "$f" -ne 0 ] || [ -n "${VERBOSE:-}" ]; then cat "$log"; fi
    grep -E '^  (start-up self-check|dispatch):' "$log"
    printf 'arm64 %-16s %-10s %-28s %3d passed, %d failed, %d skipped (%ds)\n' "$name" "$cpu" \
        "${1:-}" "$p" "$f" "$s" $((SECONDS - start))
    total_p=$((total_p + p)); total_f=$((total_f + f)); total_s=$((total_s + s))
    rm -f "$log"
}

for r in "${RUNS[@]}"; do
    if [ "${r#*:}" != "$r" ]; then run_one "${r%%:*}" max "${r#*:}"; else run_one "$r" max; fi
done
# a CPU without the dot-product extension: the run-time detection must select the plain NEON
# twins, and the start-up self-check passes them (the SDOT cases have nothing to run there)
for c in neon_vs_ref dispatch_picks_simd; do
    run_one test_quant_simd cortex-a53 "$c"
done
for c in neon_bitwise dispatch; do
    run_one test_quant_iq cortex-a53 "$c"
done
# a CPU with SDOT but not i8mm: neondot is selected (no vec_dot_2xn) and the matmul's one-row
# paths give vec_dot's bits there
run_one test_quant_simd cortex-a76 dispatch_picks_simd
run_one test_quant_iq cortex-a76 dispatch
run_one test_ops cortex-a76 matmul
# check_isa CPU WANT: the run-time detection (os_cpu_arm_features) selects WANT for q4_K on CPU
# (dispatch_picks_simd cannot see a detector that never finds SDOT: it asks the same detector)
check_isa() {
    local got
    got=$("$QEMU" -cpu "$1" "$ABUILD/tests/test_quant_simd" self_check_clean 2>&1 |
          sed -n 's/.*q4_K -> \([a-z0-9]*\)$/\1/p')
    if [ "$got" = "$2" ]; then
        total_p=$((total_p + 1))
        echo "arm64 detection on $1: q4_K -> $got"
    else
        total_f=$((total_f + 1))
        echo "arm64 detection on $1: q4_K -> \"$got\", want $2"
    fi
}
check_isa max i8mm
check_isa cortex-a76 neondot
check_isa cortex-a53 neon
echo "$total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" -eq 0 ]
