#!/usr/bin/env bash
# Ollama's API through the official Ollama JavaScript client (npm "ollama", installed once into
# $BUILD/npm): tests/ollama_js/ollama_test.mjs against the real sniperd on a tiny model and on two
# tiny gpt-oss models scripted to think and to call a tool (tests/openai_js/scripted_model.py).
# Skipped loudly without node/npm or when the npm registry cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: the Ollama API through the ollama client is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
. tests/lib/npm.sh
npm_need ollama ollama
TMP=$(mktemp -d /tmp/sniper-ollama.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL   $1"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# Serves model $1 (log $TMP/$2.err); sets port.
serve() {
    "$BUILD/sniperd" -m "$1" --port 0 --threads 2 2>"$TMP/$2.err" &
    pids+=($!)
    port=
    for _ in $(seq 300); do
        port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$TMP/$2.err")
        grep -q "ready" "$TMP/$2.err" && [ -n "$port" ] && return 0
        sleep 0.05
    done
    fail "sniperd did not start on $1: $(cat "$TMP/$2.err")"
}

"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
serve "$TMP/m.gguf" m
base=$port
"$BUILD/sniper-mkmodel" --quiet --preset tiny-gpt-oss --types f32 --seed 5 -o "$TMP/oss.gguf"
tok() { "$BUILD/sniperd" -m "$TMP/oss.gguf" --tokenize -p "$1" 2>/dev/null; }
n_head=$(tok '<|start|>assistant' | wc -w)
ids() { tok "<|start|>assistant$1" | cut -d' ' -f"$n_head"-; }
python3 tests/openai_js/scripted_model.py "$TMP/oss.gguf" "$TMP/reason.gguf" \
    $(ids '<|channel|>analysis<|message|>Hm<|end|>OK<|return|>') &&
    python3 tests/openai_js/scripted_model.py "$TMP/oss.gguf" "$TMP/tool.gguf" \
    $(ids ' to=functions.add<|message|>{}<|call|>') || fail "scripted_model.py"
serve "$TMP/reason.gguf" reason
reason_port=$port
serve "$TMP/tool.gguf" tool

cp tests/openai_js/check.mjs tests/ollama_js/ollama_test.mjs "$NPM_DIR/"
node "$NPM_DIR/ollama_test.mjs" "http://127.0.0.1:$base" "http://127.0.0.1:$reason_port" \
    "http://127.0.0.1:$port"
