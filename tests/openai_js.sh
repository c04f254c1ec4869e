#!/usr/bin/env bash
# The official OpenAI JavaScript client (npm "openai", installed once into $BUILD/npm) against the
# real sniperd: tests/openai_js/client_test.mjs on a tiny model, then harmony_test.mjs on two tiny
# gpt-oss models scripted to reply in harmony (tests/openai_js/scripted_model.py: reasoning and
# content; a tool call). Skipped loudly without node/npm or when the npm registry cannot be
# reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: the OpenAI JavaScript client is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
. tests/lib/npm.sh
npm_need openai openai@4
. tests/lib/daemon.sh
daemon_init js

"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
serve "$TMP/m.gguf" m --api-key js-key
base=$port

# gpt-oss: the generation prompt ends with "assistant" (its last token starts each chain)
"$BUILD/sniper-mkmodel" --quiet --preset tiny-gpt-oss --types f32 --seed 5 -o "$TMP/oss.gguf"
ids() { harmony_ids "$TMP/oss.gguf" "$1"; }
reason_ids=$(ids '<|channel|>analysis<|message|>Hm<|end|>OK<|return|>')
tool_ids=$(ids ' to=functions.add<|message|>{}<|call|>')
python3 tests/openai_js/scripted_model.py "$TMP/oss.gguf" "$TMP/reason.gguf" $reason_ids &&
    python3 tests/openai_js/scripted_model.py "$TMP/oss.gguf" "$TMP/tool.gguf" $tool_ids ||
    fail "scripted_model.py"
serve "$TMP/reason.gguf" reason --api-key js-key
reason_port=$port
serve "$TMP/tool.gguf" tool --api-key js-key
tool_port=$port

cp tests/openai_js/*.mjs "$NPM_DIR/"
out=$(node "$NPM_DIR/client_test.mjs" "http://127.0.0.1:$base/v1" js-key;
      node "$NPM_DIR/harmony_test.mjs" "http://127.0.0.1:$reason_port/v1" \
          "http://127.0.0.1:$tool_port/v1" js-key)
echo "$out" | grep -v ' passed, '
echo "$out" | awk '/ passed, / { p += $1; f += $3; n++ }
                  END { if (n != 2) f++  # a client that died before its summary
                        print p + 0 " passed, " f " failed, 0 skipped"; exit (f > 0) }'
