#!/usr/bin/env bash
# The official Anthropic JavaScript client (npm "@anthropic-ai/sdk", installed once into
# $BUILD/npm) against the real sniperd's /v1/messages: tests/anthropic_js/sdk_test.mjs on a random
# tiny model and on one scripted to think, answer and call a tool
# (tests/openai_js/scripted_model.py). Skipped loudly without node/npm or when the npm registry
# cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: the Anthropic JavaScript client is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
. tests/lib/npm.sh
npm_need @anthropic-ai/sdk @anthropic-ai/sdk@1
. tests/lib/daemon.sh
daemon_init anthropic

"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
serve "$TMP/m.gguf" m --api-key js-key
random_port=$port

# ChatML (the tiny preset's template): both generation prompts (thinking on: "assistant\n";
# off: "<think>\n\n</think>\n\n") end with "\n", which starts "<think>Hm</think>OK<|im_end|>"; a
# forced call's opening ends with '"arguments": ', whose last token starts "{}"
"$BUILD/sniper-mkmodel" --quiet --preset tiny --types f32 --seed 5 -o "$TMP/f32.gguf"
tok() { "$BUILD/sniperd" -m "$TMP/f32.gguf" --tokenize -p "$1" 2>/dev/null; }
nl=$(tok $'\n')
space=$(tok ' ')
reply=$(tok '<think>Hm</think>OK<|im_end|>')
args=$(tok '{}')
[ "$(tok '{"name": "get_weather", "arguments": ' | awk '{print $NF}')" = "$space" ] ||
    fail "the forced call's opening does not end with the space token"
python3 tests/openai_js/scripted_model.py "$TMP/f32.gguf" "$TMP/scripted.gguf" $space $args \
    $nl $reply || fail "scripted_model.py"
serve "$TMP/scripted.gguf" scripted --api-key js-key
scripted_port=$port

cp tests/openai_js/check.mjs tests/anthropic_js/*.mjs "$NPM_DIR/"
node "$NPM_DIR/sdk_test.mjs" "http://127.0.0.1:$random_port" "http://127.0.0.1:$scripted_port" \
    js-key
