#!/usr/bin/env bash
# `make bench`: kernel throughput, then end-to-end prefill and decode of the qwen3-30b-a3b preset
# (generated once into models/, ~18.5 GB) with the model in RAM. Prints the raw timing lines; the
# results and the commands that made them go to docs/benchmarks.md. Benchmarks are not tests.
#   MODEL=path THREADS=2 PROMPT=64 GEN=32 RUNS=3 make bench
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/qwen3-30b-a3b.gguf}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-64}
GEN=${GEN:-32}
RUNS=${RUNS:-3}

echo "== kernels: one thread, weights in cache and streamed from memory"
"$BUILD/bench-kernels" --secs 0.2

if [ ! -f "$MODEL" ]; then
    free_gb=$(df -BG --output=avail "$(dirname "$MODEL")" 2>/dev/null | tail -1 | tr -dc 0-9)
    if [ "${free_gb:-0}" -lt 25 ]; then
        echo "bench: $MODEL is missing and only ${free_gb:-?} GB are free (need 25): skipping"
        exit 0
    fi
    mkdir -p "$(dirname "$MODEL")"
    "$BUILD/sniper-mkmodel" --preset qwen3-30b-a3b -o "$MODEL"
fi

echo "== end to end: $MODEL, $THREADS threads, prompt $PROMPT tokens, $GEN generated"
echo "   (the first run pulls the file into the page cache and is not counted)"
for i in $(seq 0 "$RUNS"); do
    line=$("$BUILD/sniperd" -m "$MODEL" --bench-prompt "$PROMPT" -n "$GEN" --temp 0 \
        --threads "$THREADS" 2>&1 >/dev/null | grep '^timing')
    [ "$i" -eq 0 ] && echo "warm-up: $line" || echo "run $i: $line"
done
