#!/usr/bin/env bash
# The agent CLI (build/sniper) against a fake OpenAI-compatible server and search stub
# (tests/agent/fake_server.py), driven through piped stdin and a pty (tests/agent/pty_drive.py):
# routing to each path, y/n/a prompts, the allowlist, a dangerous command not run without consent,
# timeouts, every slash command, server errors. The real sniperd is not exercised (no HTTP daemon
# yet). Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SNIPER=$PWD/$BUILD/sniper
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); echo "ok     $1"; }
bad() { fail=$((fail + 1)); echo "not ok $1: $2"; }

# start_fake NAME [ARGS...]: starts a fake server; its URL goes to the variable URL_<NAME>.
start_fake() {
    local name=$1; shift
    python3 tests/agent/fake_server.py --port-file "$TMP/$name.port" --rules "$TMP/rules.json" \
        --log "$TMP/$name.log" "$@" &
    PIDS+=($!)
    for _ in $(seq 100); do [ -s "$TMP/$name.port" ] && break; sleep 0.05; done
    printf -v "URL_$name" 'http://127.0.0.1:%s' "$(cat "$TMP/$name.port" 2>/dev/null)"
}

mkdir -p "$TMP/home" "$TMP/files"
touch "$TMP/files/alpha.txt" "$TMP/files/beta.txt"
cat >"$TMP/rules.json" <<JSON
{"rules": [
 {"system": "You route", "user": "weather", "reply": "search"},
 {"system": "You route", "user": "list the files", "reply": "Shell."},
 {"system": "You route", "user": "marker", "reply": "shell"},
 {"system": "You route", "user": "gibberish", "reply": "banana"},
 {"system": "Rewrite the user", "reply": "\"paris weather today\""},
 {"system": "You turn a request", "user": "list the files",
  "reply": "\`\`\`sh\nls -1 $TMP/files\n\`\`\`"},
 {"system": "You turn a request", "user": "redirect marker",
  "reply": "echo hi > $TMP/marker-redirect"},
 {"system": "You turn a request", "user": "pipe marker", "reply": "echo hi | tee $TMP/marker-pipe"},
 {"system": "You turn a request", "user": "find marker",
  "reply": "find $TMP/files -name alpha.txt -delete"},
 {"system": "You turn a request", "user": "make marker", "reply": "\$ touch $TMP/marker"},
 {"user": "I ran:", "reply": "Summary: the command ran."},
 {"any": "web search results", "reply": "It is sunny in Paris [1]."},
 {"user": "break the stream", "stream": true, "mode": "malformed", "reply": "one two three four"},
 {"user": "cut the stream", "stream": true, "mode": "nodone", "reply": "one two three"},
 {"user": "slow please", "delay": 3, "reply": "too late"},
 {"user": "steady stream", "stream": true, "chunk_delay": 0.3, "reply": "s1 s2 s3 s4 s5 s6 FIN"},
 {"user": "server error", "status": 500, "reply": "engine exploded"},
 {"user": "long story", "stream": true, "chunk_delay": 0.1,
  "reply": "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24 w25 w26 w27 w28 w29 w30 w31 w32 w33 w34 w35 w36 w37 w38 w39 w40 END"}
], "default": "Hello from the fake model."}
JSON
start_fake main
start_fake keyed --api-key s3cret
URL=$URL_main
LOG=$TMP/main.log
write_config() {
    cat >"$TMP/agent.json" <<JSON
{"search_url": "$URL/html/", "grades_path": "$TMP/grades.jsonl", "shell_timeout_s": 1,
 "shell_output_bytes": 1000, "timeout_s": 10 $1}
JSON
}
write_config ""

# run_agent ARGS... <input: runs sniper (stdout+stderr into OUT, status into RC), log reset first.
run_agent() {
    : >"$LOG"
    OUT=$(cd "$TMP" && HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" \
          --server "$URL" --model fake-a "$@" 2>&1)
    RC=$?
}
# expect NAME ERE: OUT matches.  expect_not NAME ERE: it does not.
expect() { grep -qE -- "$2" <<<"$OUT" && ok "$1" || bad "$1" "no /$2/ in: $OUT"; }
expect_not() { grep -qE -- "$2" <<<"$OUT" && bad "$1" "/$2/ in: $OUT" || ok "$1"; }
# logq NAME PYTHON-EXPR: the expression holds over L, the requests the fake server received.
logq() {
    local why
    why=$(python3 - "$LOG" "$2" <<'PY' 2>&1
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
chats = [e["body"] for e in L if e["path"] == "/v1/chat/completions"]
routed = [b for b in chats if b["messages"][0]["content"].startswith("You route")]
streamed = [b for b in chats if b.get("stream")]
def last_user(b): return b["messages"][-1]["content"]
assert eval(sys.argv[2]), json.dumps(L)[:1500]
PY
    ) && ok "$1" || bad "$1" "$2: $why"
}
marker_absent() { [ ! -e "$TMP/marker" ] && ok "$1" || bad "$1" "$TMP/marker exists"; rm -f "$TMP/marker"; }
marker_present() { [ -e "$TMP/marker" ] && ok "$1" || bad "$1" "$TMP/marker missing"; rm -f "$TMP/marker"; }
STATS='\[[0-9]+ tokens, [0-9.]+ tok/s, TTFT [0-9]+ ms\]'

# ---- routing: chat, search, shell, fallback ----
run_agent <<<"tell me something nice"
expect "chat: streamed answer" '^Hello from the fake model\.$'
expect "chat: routed as chat" '\[route: chat\]'
expect "chat: tokens, tok/s, TTFT line" "$STATS"
logq "chat: router asked at temperature 0 with a small max_tokens" \
    'len(routed) == 1 and routed[0]["temperature"] == 0 and routed[0]["max_tokens"] <= 8 and not routed[0]["stream"]'
logq "chat: answer requested as a stream with usage" \
    'len(streamed) == 1 and streamed[0]["stream_options"]["include_usage"] and last_user(streamed[0]) == "tell me something nice"'
[ $RC -eq 0 ] && ok "chat: exit status 0" || bad "chat: exit status 0" "rc=$RC"

run_agent <<<"gibberish request"
expect "router: an unexpected word falls back to chat" '\[route: chat\]'
expect "router: fallback answers" 'Hello from the fake model'

run_agent <<<"what is the weather in Paris"
expect "search: routed" '\[route: search\]'
expect "search: rewritten query" '\[search: paris weather today\]'
expect "search: answer cites" 'It is sunny in Paris \[1\]'
expect "search: sources, DuckDuckGo redirect decoded" '^\[1\] Paris weather today - https://example\.com/paris-weather\?d=1$'
expect "search: second source" '^\[2\] Forecast for paris weather today - https://weather\.example\.org/fr/paris$'
logq "search: rewrite prompt carries today's date" \
    "any('$(date +%F)' in b['messages'][0]['content'] and 'Rewrite' in b['messages'][0]['content'] for b in chats)"
logq "search: the query reached the DuckDuckGo stub" \
    'any(e["path"] == "/html/" and e["query"]["q"] == ["paris weather today"] for e in L)'
logq "search: results (title, url, snippet) given to the model" \
    'any("Sunny, 21 degrees & light wind." in m["content"] and "https://example.com/paris-weather?d=1" in m["content"] for b in streamed for m in b["messages"])'

run_agent <<<"/search libuv news"
expect "/search: bypasses the router" '\[search: libuv news\]'
logq "/search: no routing request, no rewrite" 'len(routed) == 0 and len(chats) == 1'

SNIPER_SEARCH_BACKEND=searxng SNIPER_SEARCH_URL=$URL run_agent <<<"/search searx test"
expect "searxng: sources from the JSON API" '^\[1\] SearX result for searx test - http://127\.0\.0\.1:1/a$'
logq "searxng: format=json requested" \
    'any(e["path"] == "/search" and e["query"]["format"] == ["json"] for e in L)'

write_config ', "search_fetch_pages": 2'
SNIPER_SEARCH_BACKEND=searxng SNIPER_SEARCH_URL=$URL run_agent <<<"/search pages"
expect "search pages: an unreachable page is reported" 'could not read http://127\.0\.0\.1:1/a: cannot reach'
expect "search pages: the page read" 'read http://127\.0\.0\.1:[0-9]+/page/1: [0-9]+ bytes of text'
logq "search pages: its text, without script or style, given to the model" \
    'any("Page text: Page heading The page body text." in m["content"] and "secret" not in m["content"] and "color" not in m["content"] for b in streamed for m in b["messages"])'
write_config ""

run_agent <<<"list the files"
expect "shell: routed" '\[route: shell\]'
expect "shell: command shown (code fence stripped)" "^\\\$ ls -1 $TMP/files\$"
expect "shell: read-only runs without asking" '\[read-only: runs without asking\]'
expect "shell: output shown" '^alpha\.txt$'
expect "shell: summarised" 'Summary: the command ran\.'
expect_not "shell: no prompt for a read-only command" 'run it\?'
logq "shell: the output went to the model" 'any("alpha.txt" in last_user(b) and "I ran: ls -1" in last_user(b) for b in streamed)'

# ---- consent: n, y, a, end of input, --yes; the marker proves what ran ----
rm -f "$TMP/marker"
run_agent <<<$'make marker please\nn'
expect "consent n: prompt shown" 'run it\? \[y/n/a\] n'
expect "consent n: not run" '\[not run\]'
marker_absent "consent n: dangerous command did not run"
logq "consent n: no summary request" 'not any("I ran:" in last_user(b) for b in chats)'

run_agent <<<"make marker please"
marker_absent "consent: end of input is no"

run_agent <<<$'make marker please\nmaybe\n'
expect "consent: unclear answer asks again" 'answer y \(run it\), n'
marker_absent "consent: empty answer is no"

run_agent <<<$'make marker please\ny'
marker_present "consent y: command ran"
expect "consent y: summarised" 'Summary: the command ran'

run_agent <<<$'make marker please\na\nmake marker again'
marker_present "consent a: ran, and the second command too"
n=$(grep -c 'run it?' <<<"$OUT")
[ "$n" -eq 1 ] && ok "consent a: asked once for two commands" || bad "consent a: asked once" "$n prompts: $OUT"
expect "consent a: second runs as always" '\[always: runs without asking\]'

run_agent --yes <<<"make marker please"
marker_present "--yes: ran without asking"
expect_not "--yes: no prompt" 'run it\?'

# ---- the allowlist end to end: redirection, pipes to others, find -delete ask ----
run_agent <<<$'redirect marker\nn'
expect "allowlist: a redirection asks" 'run it\?'
[ ! -e "$TMP/marker-redirect" ] && ok "allowlist: redirection not run" || bad "allowlist: redirection not run" "file exists"
run_agent <<<$'pipe marker\nn'
expect "allowlist: a pipe to a non-allowlisted program asks" 'run it\?'
[ ! -e "$TMP/marker-pipe" ] && ok "allowlist: tee not run" || bad "allowlist: tee not run" "file exists"
run_agent <<<$'find marker\nn'
expect "allowlist: find -delete asks" 'run it\?'
[ -e "$TMP/files/alpha.txt" ] && ok "allowlist: find -delete not run" || bad "allowlist: find -delete not run" "alpha.txt gone"

# ---- !command, shell timeout and output cap ----
run_agent <<<"!echo typed-by-user"
expect "!cmd: runs the typed command" '^typed-by-user$'
expect_not "!cmd: no prompt (typed by the user)" 'run it\?'
logq "!cmd: no routing request" 'len(routed) == 0'
start=$SECONDS
run_agent <<<"!sleep 10"
expect "shell timeout: killed" '\[timed out after 1\.0 s: killed\]'
[ $((SECONDS - start)) -lt 6 ] && ok "shell timeout: did not wait for the command" || bad "shell timeout: waited" "$((SECONDS - start)) s"
run_agent <<<"!head -c 5000 /dev/zero | tr '\\0' x"
expect "shell output cap: truncated" '\[output truncated to 1000 bytes\]'
logq "shell output cap: the model saw at most the cap" \
    'all(len(last_user(b)) < 1500 for b in streamed)'

# ---- server errors: down, 401, timeout, malformed streams, 500; the REPL goes on ----
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" --server http://127.0.0.1:1 \
      2>&1 <<<$'hello\n/help'); RC=$?
expect "server down: clear error" 'cannot reach http://127\.0\.0\.1:1/v1/.*is the server running'
expect "server down: the REPL goes on" '/context list'
[ $RC -ne 0 ] && ok "server down: piped session exits non-zero" || bad "server down: exit status" "rc=$RC"
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" --server "$URL_keyed" \
      "hello" 2>&1); RC=$?
expect "401: status, message and hint" 'answered 401.*invalid api key.*--api-key'
[ $RC -eq 1 ] && ok "401: one-shot exits 1" || bad "401: one-shot exits 1" "rc=$RC"
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json SNIPER_API_KEY=s3cret timeout 20 "$SNIPER" \
      --server "$URL_keyed" "hello" 2>&1); RC=$?
expect "401: the right key works" 'Hello from the fake model'
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" --server "$URL_keyed" \
      --api-key s3cret /model 2>&1)
expect "--api-key: sent as a bearer token" 'fake-b'
SNIPER_TIMEOUT=0.5 run_agent --raw <<<$'slow please\nhello'
expect "http timeout: clear error" 'timed out'
expect "http timeout: the next request works" 'Hello from the fake model'
SNIPER_TIMEOUT=0.5 run_agent <<<"slow please"
expect "http timeout: a whole (routing) request is limited too" 'timed out after|timed out:'
SNIPER_TIMEOUT=1 run_agent --raw <<<"steady stream"
expect "http timeout: a stream longer than the limit but never silent completes" 's6 FIN'
run_agent --raw <<<$'break the stream\nhello'
expect "malformed stream: clear error" 'malformed stream from the server: event [0-9]+ is not JSON'
expect "malformed stream: the next request works" 'Hello from the fake model'
run_agent --raw <<<"cut the stream"
expect "stream without [DONE]: clear error" 'ended without \[DONE\]'
run_agent --raw <<<"server error"
expect "500: status and message" 'answered 500 on /v1/chat/completions: engine exploded'

# ---- slash commands ----
run_agent <<<"/"
expect "/: lists the commands" '/agent /raw /search /model /context /bench /stats /cost /good /bad /improve /clear /save /load /system /help /quit'
run_agent <<<"/help"
for c in agent raw search model context bench stats cost good bad improve clear save load system help quit; do
    grep -qE "^  /$c" <<<"$OUT" || bad "/help: /$c" "missing in: $OUT"
done
ok "/help: every command described"
run_agent <<<"/nonsense"
expect "unknown command: clear error" 'unknown command "/nonsense"'
run_agent <<<$'/raw\nlist the files\n/agent\nlist the files'
expect "/raw: announced" 'raw mode'
logq "/raw then /agent: only the second request routed" 'len(routed) == 1'
run_agent <<<$'/model\n/model fake-b\nhello\n/model nosuch'
expect "/model: lists, current marked" '^\* fake-a$'
expect "/model NAME: switches" '^model: fake-b$'
logq "/model NAME: later requests use it" 'any(b["model"] == "fake-b" for b in chats)'
expect "/model: unknown name warned" 'does not list "nosuch"'
run_agent <<<$'/system You are a pirate.\nhello'
logq "/system: the new prompt leads the request" 'streamed[0]["messages"][0]["content"] == "You are a pirate."'
run_agent <<<$'first question\n/clear\nsecond question'
logq "/clear: the history is gone" 'len(streamed[1]["messages"]) == 2'
run_agent <<<$'remember this\n/save '"$TMP"$'/conv.json\n/clear\n/load '"$TMP"$'/conv.json\nand this'
expect "/save: written" 'saved 2 messages'
expect "/load: read" 'loaded 2 messages'
logq "/load: the conversation resumes" 'any(m["content"] == "remember this" for m in streamed[-1]["messages"])'
run_agent <<<"/load $TMP/nosuch.json"
expect "/load: a missing file is a clear error" 'cannot read'
run_agent <<'IN'
context question
/context save ctx-1
/clear
/context list
/context load ctx-1
follow up
/context upload ctx-1
/context download ctx-1
/context delete ctx-1
/context load ctx-1
/context save ../evil
IN
expect "/context save: tokens and bytes" '^save ctx-1: .*tokens=[0-9]+'
logq "/context save: the conversation sent" 'any(e["path"] == "/v1/context/save" and e["body"]["messages"][-1]["content"] == "Hello from the fake model." for e in L)'
expect "/context list" 'name=ctx-1'
expect "/context load: resumes" 'resumed the conversation: 2 messages'
logq "/context load: the next request continues it" 'any(m["content"] == "context question" for m in streamed[-1]["messages"])'
expect "/context upload" '^upload ctx-1:'
expect "/context download: loads" '^download ctx-1:'
logq "/context download: load requested" 'any(e["path"] == "/v1/context/download" and e["body"]["load"] is True for e in L)'
expect "/context delete" '^delete ctx-1: deleted=ctx-1'
expect "/context: server error shown" 'answered 404 on /v1/context/load: no context named ctx-1'
expect "/context: bad names refused before sending" 'bad context name "\.\./evil"'
run_agent <<<"/bench"
expect "/bench: prefill and decode" '^bench: prompt [0-9]+ tokens, prefill [0-9.]+ tok/s \(TTFT [0-9]+ ms\); [0-9]+ tokens generated at [0-9.]+ tok/s$'
logq "/bench: a fixed request at temperature 0" 'streamed[0]["temperature"] == 0 and streamed[0]["max_tokens"] == 128'
run_agent <<<$'hello\n/stats\n/cost'
expect "/stats: session line" '^session: 1 turns, [0-9]+ prompt \+ [0-9]+ completion tokens'
expect "/stats: server stats" '"fake": true'
expect "/cost: priced" 'at \$3\.00 per million input and \$15\.00 per million output tokens a cloud API would have charged \$0\.0[0-9]+'
write_config ', "price_input_per_mtok": 1000000, "price_output_per_mtok": 0'
run_agent <<<$'/cost'
expect "/cost: configurable prices, nothing spent yet" 'charged \$0\.0000'
write_config ""
rm -f "$TMP/grades.jsonl"
run_agent <<<$'/good\nhello\n/good nice\nwhat is the weather in Paris\n/bad wrong city\n/improve'
expect "/good: nothing to grade yet" 'nothing to grade yet'
expect "/good: graded" 'graded good \(chat route\)'
expect "/bad: graded" 'graded bad \(search route\)'
python3 - "$TMP/grades.jsonl" <<'PY' && ok "/good /bad: JSONL log lines" || bad "/good /bad: JSONL log" "$(cat "$TMP/grades.jsonl")"
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
assert [g["grade"] for g in L] == ["good", "bad"], L
assert L[1]["route"] == "search" and L[1]["note"] == "wrong city", L
assert L[0]["request"] == "hello" and L[0]["answer"] == "Hello from the fake model.", L
PY
expect "/improve: by route" '^chat +1 +0 +100%$'
expect "/improve: bad requests listed" '^  - what is the weather in Paris$'
run_agent <<<$'/quit\nhello'
logq "/quit: nothing after it runs" 'len(chats) == 0'
[ $RC -eq 0 ] && ok "/quit: exit status 0" || bad "/quit: exit status 0" "rc=$RC"

# ---- config and the command line ----
echo '{"server": ' >"$TMP/bad.json"
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/bad.json "$SNIPER" /help 2>&1); RC=$?
expect "config: bad JSON is a clear error" 'bad config'
echo '{"sever": "x"}' >"$TMP/bad.json"
OUT=$(HOME=$TMP/home "$SNIPER" --config "$TMP/bad.json" /help 2>&1); RC=$?
expect "config: an unknown key is refused" 'unknown config key "sever"'
[ $RC -eq 2 ] && ok "config: exit status 2" || bad "config: exit status 2" "rc=$RC"
echo "{\"server\": \"$URL/v1/\", \"model\": \"fake-b\"}" >"$TMP/good.json"
OUT=$(HOME=$TMP/home "$SNIPER" --config "$TMP/good.json" /model 2>&1)
expect "config: server (with /v1/) and model from the file" '^\* fake-b$'
mkdir -p "$TMP/home/.config/sniper"
echo "{\"server\": \"$URL\"}" >"$TMP/home/.config/sniper/agent.json"
OUT=$(HOME=$TMP/home "$SNIPER" /model 2>&1)
expect "config: ~/.config/sniper/agent.json read" '^\* fake-a$'
OUT=$(HOME=$TMP/home SNIPER_SERVER=http://127.0.0.1:1 "$SNIPER" /model 2>&1)
expect "config: the environment overrides the file" 'cannot reach http://127\.0\.0\.1:1'
OUT=$(HOME=$TMP/home SNIPER_SERVER=http://127.0.0.1:1 "$SNIPER" --server "$URL" /model 2>&1)
expect "config: --server overrides the environment" 'fake-a'
OUT=$("$SNIPER" --bogus 2>&1); RC=$?
[ $RC -eq 2 ] && ok "cli: unknown option exits 2" || bad "cli: unknown option" "rc=$RC $OUT"

# ---- sniper top: one snapshot of the server's /v1/stats, the live view, errors ----
run_agent top --once
expect "top --once: title and the fake's request count" '^sniper top  http://127\.0\.0\.1:[0-9]+$'
expect "top --once: fields the fake lacks show as -" '^requests   [0-9]+ \(- errors\)'
expect "top --once: every line there" '^transfer   none$'
[ $RC -eq 0 ] && ok "top --once: exit status 0" || bad "top --once: exit status 0" "rc=$RC"
logq "top --once: one GET /v1/stats" 'len(L) == 1 and L[0]["method"] == "GET" and L[0]["path"] == "/v1/stats"'
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" top --once \
      --server "$URL_keyed" 2>&1); RC=$?
expect "top --once: a 401 is one clear line" 'answered 401 on /v1/stats.*--api-key'
[ $RC -eq 1 ] && ok "top --once: an error exits 1" || bad "top --once: an error exits 1" "rc=$RC"
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" top --once \
      --server "$URL_keyed" --api-key s3cret 2>&1); RC=$?
expect "top --once --api-key: the key is sent" '^requests   [0-9]+'
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" top --once \
      --server http://127.0.0.1:1 2>&1); RC=$?
expect "top --once: server down" 'cannot reach http://127\.0\.0\.1:1/v1/stats'
OUT=$(printf q | HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" top \
      --server "$URL" 2>&1); RC=$?
expect "top: q on piped input quits after a frame drawn in place" $'^\e\\[Hsniper top'
[ $RC -eq 0 ] && ok "top: q exits 0" || bad "top: q exits 0" "rc=$RC"
OUT=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 20 "$SNIPER" top --bogus 2>&1); RC=$?
[ $RC -eq 2 ] && ok "top: unknown option exits 2" || bad "top: unknown option exits 2" "rc=$RC $OUT"
for key in q '\x03'; do
    PTY=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 30 python3 tests/agent/pty_top.py \
          "$key" "$SNIPER" top --server "$URL" 2>&1)
    while read -r l; do ok "top pty: ${l#ok }"; done < <(grep -E '^ok ' <<<"$PTY")
    while read -r l; do bad "top pty: ${l#not ok }" "$PTY"; done < <(grep -E '^not ok ' <<<"$PTY")
    grep -qE '^(ok|not ok) ' <<<"$PTY" || bad "top pty: driver ran ($key)" "$PTY"
done

# ---- a terminal: libedit, Ctrl-C cancels the answer, y at the prompt, Ctrl-D leaves ----
rm -f "$TMP/home/.config/sniper/agent.json"
PTY=$(HOME=$TMP/home SNIPER_CONFIG=$TMP/agent.json timeout 30 python3 tests/agent/pty_drive.py \
      "$SNIPER" --server "$URL" --model fake-a 2>&1)
echo "$PTY" | grep -E '^(ok|not ok) ' | sed 's/^/  pty: /'
while read -r l; do ok "pty: ${l#ok }"; done < <(grep -E '^ok ' <<<"$PTY")
while read -r l; do bad "pty: ${l#not ok }" "see above"; done < <(grep -E '^not ok ' <<<"$PTY")
grep -qE '^(ok|not ok) ' <<<"$PTY" || bad "pty: driver ran" "$PTY"
[ -e "$TMP/marker" ] && ok "pty: y at the prompt ran the command" || bad "pty: y ran the command" "no marker"
[ -s "$TMP/home/.local/share/sniper/history" ] && ok "pty: history file written" || bad "pty: history file" "missing"

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
