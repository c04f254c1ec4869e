#!/usr/bin/env bash
# The agent against the real daemon: sniperd serves a tiny model, `sniper` streams a chat reply
# through it (raw and routed), /stats and /model read the daemon's endpoints, /context goes
# through them, and `sniper top --once` shows the daemon's /v1/stats.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-e2e.XXXXXX)
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok     $1"; }
bad() { fail=$((fail + 1)); echo "FAIL   $1: $2"; }
"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
HOME=$TMP "$BUILD/sniperd" -m "$TMP/m.gguf" --port 0 --threads 2 2>"$TMP/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$TMP"' EXIT
port=
for _ in $(seq 300); do
    port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$TMP/err")
    grep -q ready "$TMP/err" && [ -n "$port" ] && break
    sleep 0.05
done
agent() { (cd "$TMP" && HOME=$TMP timeout 60 "$OLDPWD/$BUILD/sniper" --server "http://127.0.0.1:$port" "$@" 2>&1); }
out=$(printf 'hello there\n/stats\n/model\n' | agent --raw)
grep -qE '^\[[0-9]+ tokens, [0-9.]+ tok/s, TTFT [0-9]+ ms\]' <<<"$out" && ok "raw chat streams through sniperd" ||
    bad "raw chat streams through sniperd" "$out"
grep -q '"completions": 1' <<<"$out" && ok "/stats reads the daemon's /v1/stats" ||
    bad "/stats reads the daemon's /v1/stats" "$out"
grep -q 'sniper-mkmodel-tiny' <<<"$out" && ok "/model lists the daemon's model" ||
    bad "/model lists the daemon's model" "$out"
out=$(printf 'tell me a story\n' | agent)
grep -qE '^\[[0-9]+ tokens, [0-9.]+ tok/s' <<<"$out" && ok "routed request answered (a random model routes to chat)" ||
    bad "routed request answered (a random model routes to chat)" "$out"
# /context through the daemon's endpoints: save, load (the conversation resumes), list, delete
out=$(printf 'hello there\n/context save demo\n/context list\n/clear\n/context load demo\nand then?\n/context delete demo\n/context list\n' |
    agent --raw)
if grep -qE '^save demo: name=demo tokens=[0-9]+' <<<"$out"; then ok "/context save"; else bad "/context save" "$out"; fi
grep -q 'resumed the conversation: 2 messages' <<<"$out" && ok "/context load resumes the conversation" ||
    bad "/context load resumes the conversation" "$out"
[ "$(grep -cE '^\[[0-9]+ tokens' <<<"$out")" -eq 2 ] && ok "chat goes on after the load" ||
    bad "chat goes on after the load" "$out"
grep -q 'delete demo: name=demo deleted=true' <<<"$out" && ok "/context delete" || bad "/context delete" "$out"
# sniper top --once: one snapshot of the daemon's /v1/stats, every field there, numbers sane
out=$(agent top --once); rc=$?
want=(model uptime requests queue tokens prefill decode memory experts transfer)
missing=$(for f in "${want[@]}"; do grep -qE "^$f +[^ ]" <<<"$out" || echo "$f"; done)
[ $rc -eq 0 ] && [ -z "$missing" ] && ok "top --once: every field" || bad "top --once: every field" "rc=$rc missing: $missing $out"
top_num() { sed -nE "s|$1|\1|p" <<<"$out" | head -n 1; }
completions=$(top_num '^requests +[0-9]+ \(0 errors\), ([0-9]+) completions.*')
decode=$(top_num '^decode +([0-9.]+) tok/s avg$')
prefill=$(top_num '^prefill +([0-9.]+) tok/s avg$')
prompt=$(top_num '^tokens +prompt ([0-9]+) \([0-9]+ cached\).*')
cached=$(top_num '^tokens +prompt [0-9]+ \(([0-9]+) cached\).*')
rss=$(top_num '^memory +RSS ([0-9.]+) MiB, no budget$')
if grep -q "^model      sniper-mkmodel-tiny-qwen3moe, context [0-9]\+ tokens$" <<<"$out" &&
   [ "${completions:-0}" -ge 4 ] && awk -v d="$decode" -v p="$prefill" -v r="$rss" \
       'BEGIN { exit !(d > 0 && d < 1e6 && p > 0 && p < 1e7 && r > 1 && r < 4096) }' &&
   [ "${cached:-x}" -le "${prompt:-0}" ] && grep -qE '^uptime +[0-9]+h [0-9]{2}m [0-9]{2}s$' <<<"$out" &&
   grep -qE '^queue +0 waiting, idle$' <<<"$out" && grep -qE '^experts +all in RAM' <<<"$out" &&
   grep -q '^transfer   none$' <<<"$out"; then
    ok "top --once: the daemon's numbers, sane"
else
    bad "top --once: the daemon's numbers, sane" "completions=$completions decode=$decode prefill=$prefill prompt=$prompt cached=$cached rss=$rss: $out"
fi
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
