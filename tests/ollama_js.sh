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
. tests/lib/daemon.sh
daemon_init ollama

"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
serve "$TMP/m.gguf" m
base=$port
"$BUILD/sniper-mkmodel" --quiet --preset tiny-gpt-oss --types f32 --seed 5 -o "$TMP/oss.gguf"
ids() { harmony_ids "$TMP/oss.gguf" "$1"; }
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
