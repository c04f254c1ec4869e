#!/usr/bin/env bash
# The one-shot CLI contract of sniperd (checks outside the test suite depend on it): --tokenize,
# -p/-f, --dump-logits, --dump-tokens, greedy output, and clear errors for bad input.
# Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SNIPERD=$BUILD/sniperd
FIX=${SNIPER_FIXTURES:-../shared/fixtures}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); echo "ok     $1"; }
bad() { fail=$((fail + 1)); echo "not ok $1: $2"; }

# check NAME CMD...: the command must succeed
check() {
    local name=$1; shift
    if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}

if [ ! -d "$FIX" ]; then
    echo "SKIP: $FIX is absent: the CLI is NOT checked against llama.cpp's goldens"
    skip=$((skip + 1))
else
    # --tokenize on a vocab-only GGUF and on a model, against llama.cpp's ids
    for g in "$FIX"/golden/tiny-qwen3moe-q8_0__p*.json; do
        want=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["tokens"])))' "$g")
        python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["prompt"])' "$g" >"$TMP/prompt.txt"
        got=$("$SNIPERD" -m "$FIX/models/tiny-qwen3moe-q8_0.gguf" -f "$TMP/prompt.txt" --tokenize 2>&1)
        [ "$got" = "$want" ] && ok "tokenize $(basename "$g")" || bad "tokenize $(basename "$g")" "got [$got] want [$want]"
    done
    got=$("$SNIPERD" -m "$FIX/tokenizer/ggml-vocab-qwen3.gguf" -p "Hello world" --tokenize 2>&1)
    [ "$got" = "9707 1879" ] && ok "tokenize vocab-only qwen3" || bad "tokenize vocab-only qwen3" "$got"

    # --dump-logits and --dump-tokens on the f32 MoE fixture, greedy
    g=$FIX/golden/tiny-qwen3moe-f32__p2-fox.json
    python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["prompt"])' "$g" >"$TMP/fox.txt"
    if "$SNIPERD" -m "$FIX/models/tiny-qwen3moe-f32.gguf" -f "$TMP/fox.txt" -n 8 --temp 0 \
        --kv-type f32 --dump-logits "$TMP/fox.f32" --dump-tokens "$TMP/fox.json" \
        >"$TMP/fox.out" 2>"$TMP/fox.err"; then
        check "dump-logits within 1e-3 of llama.cpp" python3 - "$g" "$TMP/fox.f32" "$FIX/golden" <<'PY'
import array, json, sys
g = json.load(open(sys.argv[1]))
ours = array.array('f'); ours.frombytes(open(sys.argv[2], 'rb').read())
gold = array.array('f'); gold.frombytes(open(sys.argv[3] + '/' + g['logits_file'], 'rb').read())
assert len(ours) == len(gold), (len(ours), len(gold))
d = max(abs(a - b) for a, b in zip(ours, gold))
assert d <= 1e-3, d
PY
        check "dump-tokens matches the greedy goldens" python3 - "$g" "$TMP/fox.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1])); o = json.load(open(sys.argv[2]))
assert o['prompt_tokens'] == g['tokens'], o['prompt_tokens']
assert o['generated_tokens'] == g['greedy_tokens'][:8], (o['generated_tokens'], g['greedy_tokens'][:8])
PY
        grep -q 'timing: .*prompt 47 tokens' "$TMP/fox.err" && ok "timing line" || bad "timing line" "$(cat "$TMP/fox.err")"
    else
        bad "one-shot run" "$(cat "$TMP/fox.err")"
    fi
fi

# the same logits, bit for bit, whichever kernels run (SNIPER_ISA caps them: the scalar reference,
# AVX2, AVX-512), on type mixes that use every block format with a kernel of its own
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/isa-q3.gguf" --preset tiny --types q3_k_m --seed 3
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/isa-mx.gguf" --preset tiny --types mxfp4_moe --seed 3
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/isa-x4.gguf" --preset tiny-dense --types iq4_xs --seed 3
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/isa-q5.gguf" --preset tiny-qwen35 --types q5_1 --seed 3
for m in isa-q3 isa-mx isa-x4 isa-q5; do
    for isa in ref avx2 avx512; do
        SNIPER_ISA=$isa "$SNIPERD" -m "$TMP/$m.gguf" -p "Hello world, again" -n 4 --temp 0 \
            --dump-logits "$TMP/$m-$isa.f32" >/dev/null 2>&1
    done
    if [ -s "$TMP/$m-ref.f32" ] && cmp -s "$TMP/$m-ref.f32" "$TMP/$m-avx2.f32" &&
        cmp -s "$TMP/$m-ref.f32" "$TMP/$m-avx512.f32"; then
        ok "$m: same logits bits under SNIPER_ISA=ref, avx2, avx512"
    else
        bad "$m: same logits bits under SNIPER_ISA=ref, avx2, avx512" "$(ls -l "$TMP/$m"-*.f32)"
    fi
done

# --ram-budget: experts streamed from disk give the same greedy tokens as all in RAM, the
# experts line reports the misses, and a budget below one layer's experts is refused
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/moe.gguf" --preset tiny --types q4_k_m --seed 3
"$SNIPERD" -m "$TMP/moe.gguf" -p "Hello world" -n 12 --temp 0 --dump-tokens "$TMP/ram.json" \
    >/dev/null 2>&1
# the smallest budget that works, plus 2 MiB: a cache of a few experts, so every layer misses and
# evicts (14 to 24 slots, by the machine's resident set: frecency or, under one token's 16 lookups,
# LIRS). The refusal names what the engine will allocate before it does; under the sanitizers the
# check after the load also meets their shadow of those buffers, so 8 MiB more there (slack).
slack=0
[ -n "${SNIPER_CHECK:-}" ] && slack=8
min=$("$SNIPERD" -m "$TMP/moe.gguf" -p hi --ram-budget 8M 2>&1 | sed -nE 's/.*the minimum is ([0-9]+) MiB.*/\1/p')
budget=$(( ${min:-60} + 2 + slack ))
if "$SNIPERD" -m "$TMP/moe.gguf" -p "Hello world" -n 12 --temp 0 --ram-budget "${budget}M" \
    --dump-tokens "$TMP/budget.json" >/dev/null 2>"$TMP/budget.err"; then
    cmp -s "$TMP/ram.json" "$TMP/budget.json" && ok "ram-budget: same tokens" \
        || bad "ram-budget: same tokens" "$(cat "$TMP/ram.json" "$TMP/budget.json")"
    grep -qE '^experts: hits=[0-9]+ misses=[1-9][0-9]* hit_rate=' "$TMP/budget.err" \
        && ok "ram-budget: experts line" || bad "ram-budget: experts line" "$(cat "$TMP/budget.err")"
    grep -qE '^experts-layers: hit_rate=[0-9.]+(,[0-9.]+)+$' "$TMP/budget.err" \
        && ok "ram-budget: per-layer line" || bad "ram-budget: per-layer line" "$(cat "$TMP/budget.err")"
    grep -qE '^experts-decode: tokens=11 hits=[0-9]+ misses=[0-9]+ bytes_read=[0-9]+ io_wait_s=' \
        "$TMP/budget.err" && ok "ram-budget: decode line" || bad "ram-budget: decode line" "$(cat "$TMP/budget.err")"
    grep -qE "^budget: $budget MiB = resident weights.*(io_uring|threads) reads, (frecency|lirs) eviction\), [0-9]+ slots while the KV cache's pages are not in use$" "$TMP/budget.err" \
        && ok "ram-budget: split printed" || bad "ram-budget: split printed" "$(cat "$TMP/budget.err")"
else
    bad "ram-budget run" "$(cat "$TMP/budget.err")"
fi
# the same through the pread threads with prefetch in every step, and a dense model streaming its
# FFN (one layer's worth of RAM for it)
if "$SNIPERD" -m "$TMP/moe.gguf" -p "Hello world" -n 12 --temp 0 --ram-budget "${budget}M"     --io threads --prefetch always --dump-tokens "$TMP/threads.json" >/dev/null 2>"$TMP/threads.err"     && cmp -s "$TMP/ram.json" "$TMP/threads.json" && grep -q "threads reads" "$TMP/threads.err"; then
    ok "ram-budget: threads + prefetch, same tokens"
else
    bad "ram-budget: threads + prefetch, same tokens" "$(cat "$TMP/threads.err")"
fi
# a cache smaller than one token's lookups (24 layers x 4 experts; the minimum budget + 2 MiB holds
# about 40 slots, and the pages of a KV cache of 256 positions about 30 more) evicts by LIRS, and
# streams exactly
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/deep.gguf" --preset tiny --n-layer 24 --types q4_k_m --seed 3
"$SNIPERD" -m "$TMP/deep.gguf" -p "Hello world" -n 12 --temp 0 --dump-tokens "$TMP/deep-ram.json" \
    >/dev/null 2>&1
kmin=$("$SNIPERD" -m "$TMP/deep.gguf" -p hi --ctx-size 256 --ram-budget 8M 2>&1 | sed -nE 's/.*the minimum is ([0-9]+) MiB.*/\1/p')
if [ -n "$kmin" ] && "$SNIPERD" -m "$TMP/deep.gguf" -p "Hello world" -n 12 --temp 0 --ctx-size 256 \
    --ram-budget "$((kmin + 2 + slack))M" --dump-tokens "$TMP/deep-budget.json" >/dev/null 2>"$TMP/deep.err" \
    && cmp -s "$TMP/deep-ram.json" "$TMP/deep-budget.json" \
    && grep -qE "lirs eviction\), [0-9]+ slots while" "$TMP/deep.err"; then
    ok "ram-budget: small cache evicts by LIRS, same tokens"
else
    bad "ram-budget: small cache evicts by LIRS, same tokens" "min=$kmin $(cat "$TMP/deep.err" 2>/dev/null)"
fi
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/dense.gguf" --preset tiny-dense --types q4_k_m --seed 3
# (the minimum is the resident set at the check, which moves by a MiB between runs: 2 MiB over it,
# as the cases above; the first token's FFNs are misses whatever the cache holds)
"$SNIPERD" -m "$TMP/dense.gguf" -p "Hello world" -n 12 --temp 0 --dump-tokens "$TMP/dram.json"     >/dev/null 2>&1
dmin=$("$SNIPERD" -m "$TMP/dense.gguf" -p hi --ram-budget 4M 2>&1 | sed -nE 's/.*the minimum is ([0-9]+) MiB.*/\1/p')
if [ -n "$dmin" ] && "$SNIPERD" -m "$TMP/dense.gguf" -p "Hello world" -n 12 --temp 0     --ram-budget "$((dmin + 2 + slack))M" --dump-tokens "$TMP/dbudget.json" >/dev/null 2>"$TMP/dbudget.err"     && cmp -s "$TMP/dram.json" "$TMP/dbudget.json"     && grep -qE '^experts: hits=[0-9]+ misses=[1-9]' "$TMP/dbudget.err"; then
    ok "ram-budget: dense model streams its FFN, same tokens"
else
    bad "ram-budget: dense model streams its FFN, same tokens" "min=$dmin $(cat "$TMP/dbudget.err" 2>/dev/null)"
fi
# Qwen3.5's hybrid layers: a 64K-token q4_0 KV cache starts and reports its bytes (one attention
# layer of the tiny preset: 2 x 65536 rows of 128 q4_0 values, 72 bytes each = 9.0 MiB), the
# recurrent state is reported, and bad checkpoint settings are refused
"$BUILD/sniper-mkmodel" --quiet -o "$TMP/h35.gguf" --preset tiny-qwen35 --types q8_0 --seed 3
if "$SNIPERD" -m "$TMP/h35.gguf" -p "Hello" -n 2 --temp 0 --ctx-size 65536 --kv-type q4_0 \
    >/dev/null 2>"$TMP/h35.err" &&
    grep -q "^memory: KV cache 9.0 MiB (65536 positions of q4_0 in 1 attention layers), recurrent state [0-9.]* MiB (with 4 checkpoints)" "$TMP/h35.err"; then
    ok "qwen35: 64K q4_0 context starts and reports KV and recurrent state"
else
    bad "qwen35: 64K q4_0 context starts and reports KV and recurrent state" "$(cat "$TMP/h35.err")"
fi
expect_fail() {
    local name=$1 pattern=$2; shift 2
    out=$("$@" 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && echo "$out" | grep -q -- "$pattern"; then ok "$name"
    else bad "$name" "rc=$rc out=$out"; fi
}
expect_fail "checkpoints out of range" "checkpoints" "$SNIPERD" -m "$TMP/h35.gguf" -p hi --checkpoints 0
expect_fail "checkpoint-every not a number" "checkpoint-every" "$SNIPERD" -m "$TMP/h35.gguf" -p hi --checkpoint-every x
expect_fail "ram-budget too small" "the minimum is" "$SNIPERD" -m "$TMP/moe.gguf" -p hi --ram-budget 8M
expect_fail "ram-budget not a size" "wants a size" "$SNIPERD" -m "$TMP/moe.gguf" -p hi --ram-budget lots
expect_fail "prefetch bad value" "wants prefill, always or off" "$SNIPERD" -m "$TMP/moe.gguf" -p hi --prefetch soon
expect_fail "moe-top-k too many" "experts per token" "$SNIPERD" -m "$TMP/moe.gguf" -p hi --moe-top-k 9
expect_fail "cache-bias out of range" "wants a ratio in" "$SNIPERD" -m "$TMP/moe.gguf" -p hi --cache-bias 2
# --route-replay: one-shot benchmarks only; a trace of the model's shape (bench-policy records one)
# drives a budgeted run and says loudly that its text is meaningless; another shape is refused
expect_fail "route-replay refused in the daemon" "never the daemon" "$SNIPERD" -m "$TMP/moe.gguf" --route-replay x.csv
if [ -f "$FIX/routing/qwen.route.csv" ]; then
    expect_fail "route-replay of another shape" "routes 48 layers x 128 experts, the model has 4 layers x 16" \
        "$SNIPERD" -m "$TMP/moe.gguf" -p hi --route-replay "$FIX/routing/qwen.route.csv"
fi
if "$BUILD/bench-policy" "$TMP/moe.gguf" --prompt 8 --gen 6 --threads 1 --write-trace "$TMP/moe.route.csv" \
        >/dev/null 2>&1 &&
    "$SNIPERD" -m "$TMP/moe.gguf" --bench-prompt 8 -n 12 --temp 0 --ram-budget "${budget}M" \
        --route-replay "$TMP/moe.route.csv" >/dev/null 2>"$TMP/replay.err" &&
    grep -q "^route-replay: ROUTING FROM THE TRACE .*MEANINGLESS.* 4 experts a token: 4 from the trace;" \
        "$TMP/replay.err" && grep -q "^experts-decode: tokens=11 " "$TMP/replay.err"; then
    ok "route-replay: a recorded trace drives a budgeted run"
else
    bad "route-replay: a recorded trace drives a budgeted run" "$(cat "$TMP/replay.err")"
fi

# errors: clear message, non-zero exit, no crash
expect_fail "no model" "no model" "$SNIPERD" -p hi
expect_fail "unknown flag" "unknown option" "$SNIPERD" -m x.gguf -p hi --frobnicate 1
expect_fail "bad number" "wants an integer" "$SNIPERD" -m x.gguf -p hi -n lots
expect_fail "missing file" "x.gguf" "$SNIPERD" -m "$TMP/x.gguf" -p hi
printf 'GGUF\003\000\000\000garbage' >"$TMP/bad.gguf"
expect_fail "malformed gguf" "bad.gguf\|truncated\|tensor\|count" "$SNIPERD" -m "$TMP/bad.gguf" -p hi
head -c 100 /dev/urandom >"$TMP/rand.gguf"
expect_fail "not a gguf" "magic" "$SNIPERD" -m "$TMP/rand.gguf" -p hi
expect_fail "unsupported kv type" "not supported" "$SNIPERD" -m x.gguf -p hi --kv-type q2_k

expect_fail "unknown flag points at --help" "see --help" "$SNIPERD" --frobnicate
expect_fail "flag without its value" "wants a value" "$SNIPERD" -m x.gguf --alias
expect_fail "a stray argument" "unexpected argument" "$SNIPERD" x.gguf

# the daemon checks its model before it says it is listening (no "listening" line, then an error)
for m in "$TMP/x.gguf" "$TMP/bad.gguf" "$TMP/rand.gguf"; do
    out=$(timeout 20 "$SNIPERD" -m "$m" --port 0 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 124 ] && echo "$out" | grep -q "$(basename "$m")" \
        && ! echo "$out" | grep -q listening; then ok "daemon: bad model $(basename "$m") refused before listening"
    else bad "daemon: bad model $(basename "$m") refused before listening" "rc=$rc out=$out"; fi
done
# serving a generated model says that its replies are gibberish, once it is listening
"$SNIPERD" -m "$TMP/moe.gguf" --port 0 --threads 1 2>"$TMP/gen.err" &
pid=$!
for _ in $(seq 100); do grep -q "ready" "$TMP/gen.err" && break; sleep 0.1; done
kill "$pid"; wait "$pid" 2>/dev/null
grep -A1 "listening on" "$TMP/gen.err" | grep -q "random, so replies are gibberish; serve a real GGUF with -m" \
    && ok "daemon: a generated model is announced as gibberish" \
    || bad "daemon: a generated model is announced as gibberish" "$(cat "$TMP/gen.err")"

# --help: what both modes take is in one group, the daemon's and the prompt's in theirs
"$SNIPERD" --help >"$TMP/help.txt"
check "help groups the options by mode" python3 - "$TMP/help.txt" <<'PY'
import sys
paras = open(sys.argv[1]).read().split("\n\n")
def para(title):
    found = [p for p in paras if p.startswith(title)]
    assert len(found) == 1, (title, found)
    return found[0]
both, daemon, prompt = para("The model and the engine (both modes)"), para("The daemon"), para("One prompt")
for o in ["--model ", "--threads", "--ctx-size", "--batch", "--kv-type", "--ram-budget", "--prefetch",
          "--io ", "--checkpoints", "--moe-top-k"]:
    assert o in both and o not in daemon and o not in prompt, o
for o in ["--host", "--port", "--api-key", "--queue", "--max-connections", "--read-timeout", "--config"]:
    assert o in daemon and o not in both and o not in prompt, o
for o in ["--prompt", "--n-predict", "--temp", "--seed", "--tokenize", "--dump-logits"]:
    assert o in prompt and o not in both and o not in daemon, o
PY
# the agent's default server is the daemon's default address
dport=$("$SNIPERD" --help | sed -nE 's/.*--port N +\(default ([0-9]+).*/\1/p')
aurl=$("$BUILD/sniper" --help 2>&1 | sed -nE 's/.*default (http:[^ ]+).*/\1/p')
[ -n "$dport" ] && [ "$aurl" = "http://127.0.0.1:$dport" ] && ok "the agent's default server is sniperd's default port" \
    || bad "the agent's default server is sniperd's default port" "sniperd $dport, sniper $aurl"
# `make run` builds the binaries it serves and the agent, not the tests and benchmarks
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n run BUILD="$TMP/mk" >"$TMP/mk.txt" 2>&1
if grep -q -- "-o $TMP/mk/sniperd " "$TMP/mk.txt" && grep -q -- "-o $TMP/mk/sniper-mkmodel " "$TMP/mk.txt" \
    && ! grep -qE -- "-o $TMP/mk/(tests/|bench-)" "$TMP/mk.txt"; then ok "make run builds only what it serves"
else bad "make run builds only what it serves" "$(grep -oE -- "-o $TMP/mk/[^ ]+" "$TMP/mk.txt" | tr '\n' ' ')"; fi

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
