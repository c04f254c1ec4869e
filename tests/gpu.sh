#!/usr/bin/env bash
# sniperd on the GPU (--gpu, --gpu-budget) end to end, on the machine's Vulkan device by number
# (lavapipe in CI): the one-shot mode's logits and tokens equal the CPU's byte for byte (gpt-oss's
# window rings, sinks and MXFP4 experts, gemma4's experts beside its dense FFNs and per-layer
# embeddings included), a budget too small falls back to the CPU, the experts on three levels
# (some in VRAM, the rest on the CPU from RAM or through the expert cache) give the CPU's bytes, a
# bad --gpu is refused, and the daemon's answers and /v1/stats on the GPU (chats of two turns on
# the three levels under a RAM budget, gpt-oss and gemma4, each against the CPU daemon's). What
# the backend refuses (experts on disk without a cache, replayed routing) is
# tests/test_gpu_engine.c's refused case.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
. tests/lib/daemon.sh
daemon_init gpu
passed=0 failed=0
check() { # check NAME CONDITION-EXIT-STATUS [WHY]
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok     $1"
    else failed=$((failed + 1)); echo "FAIL   $1: ${3:-}"; fi
}
mk() { "$BUILD/sniper-mkmodel" --quiet -o "$TMP/$1.gguf" "${@:2}" || fail "sniper-mkmodel $1"; }
mk moe --preset tiny
mk dense --preset tiny-dense --types q4_k_m
mk q35 --preset tiny-qwen35moe
mk oss --preset tiny-gpt-oss
mk ossq --preset tiny-gpt-oss --types mxfp4_moe
mk gemma --preset tiny-gemma4 --types q4_k_m
mk gemmap --preset tiny-gemma4-ple --vocab gemma4
device=$("$BUILD/sniperd" -m "$TMP/moe.gguf" -p hi -n 1 --gpu 0 2>&1 >/dev/null)
if ! grep -q "every step runs on the GPU" <<<"$device"; then
    echo "skip: no usable Vulkan device 0 ($(grep gpu <<<"$device" | head -1)): sniperd on the GPU NOT checked"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi

# one-shot: every prompt row's logits and the greedy tokens, GPU against CPU
for m in moe dense q35 oss ossq gemma gemmap; do
    for dev in none 0; do
        "$BUILD/sniperd" -m "$TMP/$m.gguf" -p "The quick brown fox jumps over the lazy dog" -n 12 \
            --temp 0 --threads 2 --gpu "$dev" --dump-logits "$TMP/$m-$dev.f32" \
            --dump-tokens "$TMP/$m-$dev.json" >"$TMP/$m-$dev.out" 2>"$TMP/$m-$dev.err"
    done
    grep -q "every step runs on the GPU" "$TMP/$m-0.err"
    check "$m: --gpu 0 runs every step on the GPU" $? "$(cat "$TMP/$m-0.err")"
    cmp -s "$TMP/$m-none.f32" "$TMP/$m-0.f32" && cmp -s "$TMP/$m-none.json" "$TMP/$m-0.json" &&
        cmp -s "$TMP/$m-none.out" "$TMP/$m-0.out"
    check "$m: the GPU's logits, tokens and text are the CPU's byte for byte" $?
done

# a budget too small: the CPU, saying so
"$BUILD/sniperd" -m "$TMP/moe.gguf" -p "hello" -n 6 --temp 0 --gpu 0 --gpu-budget 2M \
    >"$TMP/small.out" 2>"$TMP/small.err"
grep -q "would pass the budget.*running on the CPU" "$TMP/small.err" &&
    cmp -s "$TMP/small.out" <("$BUILD/sniperd" -m "$TMP/moe.gguf" -p "hello" -n 6 --temp 0 --gpu none 2>/dev/null)
check "--gpu-budget too small: the CPU, with the budget named" $? "$(cat "$TMP/small.err")"

# the experts on three levels: a budget that holds 3 of a layer's 16 experts (the rest computed on
# the CPU from RAM), and the experts through an expert cache with some or all of them in VRAM (the
# device's memory taken as a discrete card's: SNIPER_GPU_NO_MAP); on unified memory, the expert
# cache's slots read in place by the GPU: the CPU's logits, tokens and text byte for byte
three() { # three NAME ARGS...: the one-shot on the GPU with ARGS, against moe-none's output
    "$BUILD/sniperd" -m "$TMP/moe.gguf" -p "The quick brown fox jumps over the lazy dog" -n 12 \
        --temp 0 --threads 2 --gpu 0 --dump-logits "$TMP/$1.f32" --dump-tokens "$TMP/$1.json" \
        "${@:2}" >"$TMP/$1.out" 2>"$TMP/$1.err"
    cmp -s "$TMP/moe-none.f32" "$TMP/$1.f32" && cmp -s "$TMP/moe-none.json" "$TMP/$1.json" &&
        cmp -s "$TMP/moe-none.out" "$TMP/$1.out"
}
three tier-ram --ctx-size 256 -b 16 --gpu-budget 12M &&
    grep -q "routed experts: 3 of 16 a layer in VRAM.*on the CPU from RAM" "$TMP/tier-ram.err"
check "three levels: 3 of 16 experts in VRAM, the rest from RAM: the CPU's bytes" $? \
    "$(cat "$TMP/tier-ram.err")"
SNIPER_GPU_NO_MAP=1 three tier-ssd --ctx-size 256 -b 16 --gpu-budget 12M --ram-budget 160M &&
    grep -q "routed experts: 3 of 16 a layer in VRAM.*through the expert cache" "$TMP/tier-ssd.err"
check "three levels: 3 of 16 experts in VRAM, the rest through the expert cache: the CPU's bytes" \
    $? "$(cat "$TMP/tier-ssd.err")"
SNIPER_GPU_NO_MAP=1 three tier-all --ram-budget 160M &&
    grep -q "routed experts: all 16 a layer in VRAM" "$TMP/tier-all.err"
check "three levels: every expert in VRAM, read through the expert cache: the CPU's bytes" $? \
    "$(cat "$TMP/tier-all.err")"
three in-place --ctx-size 256 -b 16 --ram-budget 160M &&
    grep -q "routed experts: every one computed by the GPU in the expert cache's slots" \
        "$TMP/in-place.err"
check "unified memory: the expert cache's slots read in place by the GPU: the CPU's bytes" $? \
    "$(cat "$TMP/in-place.err")"

# a --gpu that names nothing usable is refused before anything loads
"$BUILD/sniperd" -m "$TMP/moe.gguf" -p hi -n 1 --gpu 99 >/dev/null 2>"$TMP/bad.err"
rc=$?
[ $rc -eq 2 ] && grep -q "sniperd: --gpu" "$TMP/bad.err"
check "--gpu 99: refused (exit 2) with a message" $? "rc $rc: $(cat "$TMP/bad.err")"
"$BUILD/sniperd" -m "$TMP/moe.gguf" -p hi -n 1 --gpu fast >/dev/null 2>"$TMP/bad2.err"
[ $? -eq 2 ] && grep -q "sniperd: --gpu" "$TMP/bad2.err"
check "--gpu fast: refused with a message" $? "$(cat "$TMP/bad2.err")"

# the daemon: /v1/stats says the GPU, and a greedy completion equals the CPU daemon's
ask() {
    curl -s "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt":"Once upon a time","max_tokens":10,"temperature":0}' |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'
}
serve "$TMP/moe.gguf" gpu-daemon --gpu 0
gport=$port
serve "$TMP/moe.gguf" cpu-daemon --gpu none
cport=$port
on=$(curl -s "http://127.0.0.1:$gport/v1/stats" |
    python3 -c 'import json,sys; g=json.load(sys.stdin)["gpu"]; print(g["on"], g["weights_bytes"] > 0)')
check "daemon: /v1/stats gpu.on with its weights' bytes" "$([ "$on" = "True True" ]; echo $?)" "$on"
a=$(ask "$gport") b=$(ask "$cport")
[ -n "$a" ] && [ "$a" = "$b" ]
check "daemon: the GPU's greedy completion is the CPU's" $? "gpu [$a] cpu [$b]"

chat() { # chat PORT MAX-TOKENS MESSAGES-JSON: the cached prompt tokens, then the reply (JSON)
    curl -s "http://127.0.0.1:$1/v1/chat/completions" -H 'Content-Type: application/json' \
        -d "{\"messages\":$3,\"max_tokens\":$2,\"temperature\":0}" |
        python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["usage"]["prompt_tokens_details"]["cached_tokens"], json.dumps(r["choices"][0]["message"]["content"]))'
}
# gpu_chat NAME MODEL PATTERN MIN-CACHED ARGS...: MODEL served on the GPU (--gpu 0) and on the CPU
# (--gpu none), both with ARGS (the CPU's ignores a --gpu-budget); the GPU daemon's log says
# PATTERN, and a chat of two turns (16 tokens, then 8 after the first's reply) gets the CPU
# daemon's cached prompt tokens and replies on the GPU, the second turn reusing more than
# MIN-CACHED tokens of the first's. The GPU daemon's port is left in $gport.
gpu_chat() {
    local name=$1 model=$2 pattern=$3 min=$4 cport a1 b1 a2 b2 turn1 turn2
    shift 4
    serve "$model" "$name-gpu" --gpu 0 "$@"
    gport=$port
    serve "$model" "$name-cpu" --gpu none "$@"
    cport=$port
    grep -q "$pattern" "$TMP/$name-gpu.err"
    check "$name daemon: the log says \"$pattern\"" $? "$(cat "$TMP/$name-gpu.err")"
    turn1='[{"role":"user","content":"Once upon a time"}]'
    a1=$(chat "$gport" 16 "$turn1") b1=$(chat "$cport" 16 "$turn1")
    turn2="[{\"role\":\"user\",\"content\":\"Once upon a time\"},{\"role\":\"assistant\",\"content\":${a1#* }},{\"role\":\"user\",\"content\":\"and then?\"}]"
    a2=$(chat "$gport" 8 "$turn2") b2=$(chat "$cport" 8 "$turn2")
    [ -n "$a1" ] && [ "$a1" = "$b1" ] && [ -n "$a2" ] && [ "$a2" = "$b2" ] &&
        [ "${a2%% *}" -gt "$min" ]
    check "$name daemon: two turns on the GPU are the CPU's (the second from over $min cached)" $? \
        "gpu [$a1] [$a2] cpu [$b1] [$b2]"
}

# the three levels in the daemon: 3 of 16 experts in VRAM, the rest through the expert cache (its
# chat's replies are short: the greedy completion of ten tokens is compared too, with the CPU
# daemon's above); /v1/stats then says the split and the VRAM slots' hits
SNIPER_GPU_NO_MAP=1 gpu_chat tier "$TMP/moe.gguf" \
    "routed experts: 3 of 16 a layer in VRAM.*through the expert cache" 16 --ram-budget 160M \
    --ctx-size 256 -b 16 --gpu-budget 12M
a=$(ask "$gport")
[ -n "$a" ] && [ "$a" = "$b" ]
check "tier daemon: the three levels' greedy completion is the CPU's" $? \
    "three levels [$a] cpu [$b]"
tiers=$(curl -s "http://127.0.0.1:$gport/v1/stats" | python3 -c 'import json,sys; g=json.load(sys.stdin)["gpu"]
print(g["experts_in_vram"], g["experts_per_layer"], g["vram_hits"] + g["vram_misses"] > 0, g["pairs_on_cpu"] > 0, g["pairs_on_gpu"] > 0, 0 <= g["vram_hit_rate"] <= 1, g["vram_promotions"] >= 0,
      0 <= g["transit_experts"] <= g["transit_pairs"] <= g["pairs_on_gpu"])')
[ "$tiers" = "3 16 True True True True True True" ]
check "tier daemon: /v1/stats says the experts' split and the VRAM slots' hits" $? "$tiers"
metrics=$(curl -s "http://127.0.0.1:$gport/metrics" | python3 -c 'import sys
m = dict(l.split()[:2] for l in sys.stdin if l.startswith("sniper_gpu"))
print(m["sniper_gpu_on"], m["sniper_gpu_experts_in_vram"], m["sniper_gpu_experts_per_layer"],
      int(m["sniper_gpu_expert_hits_total"]) + int(m["sniper_gpu_expert_misses_total"]) > 0,
      int(m["sniper_gpu_pairs_on_cpu_total"]) > 0, int(m["sniper_gpu_pairs_on_gpu_total"]) > 0,
      int(m["sniper_gpu_expert_promotions_total"]) >= 0,
      int(m["sniper_gpu_transit_pairs_total"]) <= int(m["sniper_gpu_pairs_on_gpu_total"]))')
[ "$metrics" = "1 3 16 True True True True True" ]
check "tier daemon: /metrics has the three levels' figures" $? "$metrics"
top=$(HOME=$TMP timeout 20 "$BUILD/sniper" --server "http://127.0.0.1:$gport" top --once 2>&1)
grep -q "^gpu  *weights .* in VRAM" <<<"$top" &&
    grep -q "^vram  *3 of 16 experts a layer, hit rate [0-9.]* %" <<<"$top" &&
    grep -Eq "^pairs  *[1-9][0-9]* on the GPU, [1-9][0-9]* on the CPU" <<<"$top"
check "tier daemon: sniper top shows the GPU and the VRAM slots" $? "$top"

# on unified memory (lavapipe) the daemon's streamed experts are read in place: /v1/stats and
# sniper top say so, every pair on the GPU
gpu_chat in-place "$TMP/moe.gguf" "every one computed by the GPU in the expert cache's slots" 16 \
    --ram-budget 160M --ctx-size 256 -b 16
inplace=$(curl -s "http://127.0.0.1:$gport/v1/stats" | python3 -c 'import json,sys; g=json.load(sys.stdin)["gpu"]
print(g["experts_in_place"], g["experts_in_vram"], g["pairs_on_gpu"] > 0, g["pairs_on_cpu"])')
top=$(HOME=$TMP timeout 20 "$BUILD/sniper" --server "http://127.0.0.1:$gport" top --once 2>&1)
[ "$inplace" = "True 0 True 0" ] &&
    grep -Eq "^experts  *every routed expert computed by the GPU in the expert cache's slots, [1-9]" \
        <<<"$top"
check "in-place daemon: /v1/stats and sniper top say the experts are read in place" $? \
    "$inplace $top"

# gpt-oss: the first turn's 16 tokens of reply wrapped the rings (23 rows at a batch of 8) past the
# window before its end, so the second turn goes back to a checkpoint and its rows
gpu_chat gpt-oss "$TMP/oss.gguf" "every step runs on the GPU" 32 --ctx-size 512 -b 8

# gemma4 (per-layer embeddings, its template): the second turn reuses the first's prompt past the
# window (16) with a batch of 8
gpu_chat gemma4 "$TMP/gemmap.gguf" "every step runs on the GPU" 16 --ctx-size 512 -b 8

echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
