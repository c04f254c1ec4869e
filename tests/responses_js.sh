#!/usr/bin/env bash
# OpenAI's Responses API through the official OpenAI JavaScript client (npm "openai", installed
# once into $BUILD/npm): tests/openai_js/responses_test.mjs against the real sniperd on a tiny model
# and on a tiny gpt-oss model scripted to reason (tests/openai_js/scripted_model.py). Skipped
# loudly without node/npm or when the npm registry cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: the Responses API through the OpenAI client is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
. tests/lib/npm.sh
npm_need openai openai@4
. tests/lib/daemon.sh
daemon_init rjs

"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
serve "$TMP/m.gguf" m --api-key js-key
base=$port
"$BUILD/sniper-mkmodel" --quiet --preset tiny-gpt-oss --types f32 --seed 5 -o "$TMP/oss.gguf"
ids() { harmony_ids "$TMP/oss.gguf" "$1"; }
python3 tests/openai_js/scripted_model.py "$TMP/oss.gguf" "$TMP/reason.gguf" \
    $(ids '<|channel|>analysis<|message|>Hm<|end|>OK<|return|>') || fail "scripted_model.py"
serve "$TMP/reason.gguf" reason --api-key js-key

cp tests/openai_js/*.mjs "$NPM_DIR/"
node "$NPM_DIR/responses_test.mjs" "http://127.0.0.1:$base/v1" "http://127.0.0.1:$port/v1" js-key
