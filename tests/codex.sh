#!/usr/bin/env bash
# Codex CLI (npm "@openai/codex", installed once into $BUILD/npm) against the real sniperd through
# /v1/responses: a model provider whose base URL is the daemon's /v1 with wire API "responses" (a
# temporary CODEX_HOME; update checks and analytics off, so it runs offline), `codex exec` on a
# tiny gpt-oss model scripted to reason "Hm" and answer "OK" (tests/openai_js/scripted_model.py)
# must exit 0 with that answer, and a resumed second turn must too, its prompt from the prompt
# cache; with no network but loopback where a network namespace can be made. Codex's hosted and
# namespaced tools (web_search, multi_agent), which sniperd refuses, are turned off, and its long
# default instructions replaced, so the prompt fits a small context.
# Skipped loudly without node/npm or when the npm registry cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: Codex CLI against /v1/responses is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
. tests/lib/npm.sh
npm_need @openai/codex @openai/codex
# offline for real where the kernel lets us: the daemon and Codex in a network namespace of
# their own, with nothing but loopback
if [ -z "${SNIPER_CODEX_NETNS:-}" ] && unshare -rn true 2>/dev/null; then
    SNIPER_CODEX_NETNS=1 exec unshare -rn bash "$PWD/tests/codex.sh" "$@"
fi
if [ -n "${SNIPER_CODEX_NETNS:-}" ]; then
    ip link set lo up 2>/dev/null
    echo "# no network but loopback (unshare -rn)"
else
    echo "# unshare -rn refused: Codex runs with this machine's network (its update checks off)"
fi
. tests/lib/daemon.sh
daemon_init codex
passed=0 failed=0
check() { # check NAME COND-STATUS WHY
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok     $1"
    else failed=$((failed + 1)); echo "FAIL   $1: $3"; fi
}

"$BUILD/sniper-mkmodel" --quiet --preset tiny-gpt-oss --types f32 --seed 5 -o "$TMP/oss.gguf"
python3 tests/openai_js/scripted_model.py "$TMP/oss.gguf" "$TMP/reason.gguf" \
    $(harmony_ids "$TMP/oss.gguf" '<|channel|>analysis<|message|>Hm<|end|>OK<|return|>') ||
    fail "scripted_model.py"
serve "$TMP/reason.gguf" d --ctx-size 8192 --api-key codex-key

mkdir -p "$TMP/home" "$TMP/work"
echo "You are a terse assistant. Answer in one short sentence." >"$TMP/instructions.md"
cat >"$TMP/home/config.toml" <<TOML
model = "sniper-tiny"
model_provider = "sniper"
model_instructions_file = "$TMP/instructions.md"
project_doc_max_bytes = 0
web_search = "disabled"
check_for_update_on_startup = false
[model_providers.sniper]
name = "sniperd"
base_url = "http://127.0.0.1:$port/v1"
wire_api = "responses"
env_key = "SNIPER_CODEX_KEY"
[analytics]
enabled = false
TOML
codex() {
    CODEX_HOME="$TMP/home" SNIPER_CODEX_KEY=codex-key timeout 300 \
        "$NPM_DIR/node_modules/.bin/codex" exec --skip-git-repo-check -C "$TMP/work" \
        --disable multi_agent --disable goals --disable view_image --disable apps \
        --disable image_generation --disable skill_search --disable shell_tool \
        --disable unified_exec "$@" </dev/null
}
version=$("$NPM_DIR/node_modules/.bin/codex" --version 2>/dev/null)
echo "# $version"
codex "Say hi" >"$TMP/out1" 2>&1
rc=$?
check "codex exec: a turn, exit 0" $(( rc != 0 )) "exit $rc: $(tail -5 "$TMP/out1")"
[ "$(tail -1 "$TMP/out1")" = OK ]
check "codex exec: the answer" $? "$(tail -8 "$TMP/out1")"
grep -qx "Hm" "$TMP/out1"
check "codex exec: the reasoning shown" $? "$(tail -8 "$TMP/out1")"
stats() { curl -s -H "Authorization: Bearer codex-key" "http://127.0.0.1:$port/v1/stats"; }
cached0=$(stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"]["cached"])')
codex resume --last "Again" >"$TMP/out2" 2>&1
rc=$?
check "codex exec resume: a second turn, exit 0" $(( rc != 0 )) "exit $rc: $(tail -5 "$TMP/out2")"
read -r prompt cached < <(stats | python3 -c 'import json,sys; s=json.load(sys.stdin)
print(s["slots"][0]["prompt_tokens"], s["tokens"]["cached"])')
# the second turn resends the whole conversation: all of the first turn's tokens come from the cache
check "codex exec resume: the prompt cache" $(( cached - cached0 < prompt * 8 / 10 )) \
    "prompt $prompt, cached $cached0 -> $cached"
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
