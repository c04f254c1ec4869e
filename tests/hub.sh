#!/usr/bin/env bash
# `sniper pull` and `sniperd -m hf:...` against a local stand-in for the Hugging Face hub
# (tests/hub/hub_server.py: the model API's file list with sizes and sha256s, resolve/main/FILE
# redirected to a CDN route with ranges) over models made by sniper-mkmodel: a whole file, a split
# model, a download cut midway and resumed, a checksum that fails twice, a gated repo (401, then
# with HF_TOKEN), a missing repo and quantization (the quantizations listed), a disk that fills
# (a 1 MiB tmpfs, as root), offline from the cache, no network, the progress bar in tmux.
# Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SNIPER=$(pwd)/$BUILD/sniper
TMP=$(mktemp -d /tmp/sniper-hub.XXXXXX)
HUB=$TMP/hub/repos
pass=0 fail=0 skip=0 srv=
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null
    mountpoint -q "$TMP/full" 2>/dev/null && umount "$TMP/full"
    tmux kill-session -t "sniper-hub-$$" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT
ok() { pass=$((pass + 1)); echo "ok     $1"; }
bad() { fail=$((fail + 1)); echo "not ok $1: $2"; }
expect() { # NAME COND-EXIT-STATUS MESSAGE
    if [ "$2" -eq 0 ]; then ok "$1"; else bad "$1" "$3"; fi
}

# the repos: test/tiny (Q8_0 whole, Q4_K_M in three shards), gated/tiny, test/badsum
mk() { "$BUILD/sniper-mkmodel" --quiet -o "$1" "${@:2}" || bad "mkmodel $1" "failed"; }
mkdir -p "$HUB/test/tiny" "$HUB/gated/tiny" "$HUB/test/badsum"
mk "$HUB/test/tiny/tiny-Q8_0.gguf" --preset tiny --types q8_0 --seed 3
mk "$HUB/test/tiny/tiny-Q4_K_M.gguf" --preset tiny --types q4_k_m --seed 4 --split-max-size 2M
cp "$HUB/test/tiny/tiny-Q8_0.gguf" "$HUB/gated/tiny/"
cp "$HUB/test/tiny/tiny-Q8_0.gguf" "$HUB/test/badsum/"
python3 tests/hub/hub_server.py "$HUB" >"$TMP/port" 2>"$TMP/server.err" &
srv=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
export HF_ENDPOINT="http://127.0.0.1:$(cat "$TMP/port")" HF_TOKEN= HF_HUB_OFFLINE=
export SNIPER_MODELS_DIR=$TMP/models
LOG=$TMP/hub/requests.log
M=$SNIPER_MODELS_DIR/test/tiny

# a whole file: the path printed, the bytes the hub's, no part left
out=$("$SNIPER" pull test/tiny:q8_0 2>"$TMP/err")
expect "pull a whole file" $? "$(cat "$TMP/err")"
[ "$out" = "$M/tiny-Q8_0.gguf" ] && cmp -s "$out" "$HUB/test/tiny/tiny-Q8_0.gguf" &&
    [ ! -e "$out.part" ] && ok "whole file: path, bytes" || bad "whole file: path, bytes" "$out"
grep -q "tiny-Q8_0.gguf: 100%" "$TMP/err" && ok "plain progress lines off a terminal" ||
    bad "plain progress lines off a terminal" "$(cat "$TMP/err")"

# a split model: every shard, the first's path printed, and sniperd loads it by name
out=$("$SNIPER" pull test/tiny:Q4_K_M 2>"$TMP/err")
expect "pull a split model" $? "$(cat "$TMP/err")"
same=0
for k in 1 2 3; do
    cmp -s "$M/tiny-Q4_K_M-0000$k-of-00003.gguf" "$HUB/test/tiny/tiny-Q4_K_M-0000$k-of-00003.gguf" || same=1
done
[ "$out" = "$M/tiny-Q4_K_M-00001-of-00003.gguf" ] && [ $same -eq 0 ] && ok "split: every shard" ||
    bad "split: every shard" "$out"
"$BUILD/sniperd" -m "hf:test/tiny:Q4_K_M" -p "hello" -n 2 --temp 0 >"$TMP/gen" 2>"$TMP/err"
expect "sniperd -m hf:test/tiny:Q4_K_M" $? "$(tail -3 "$TMP/err")"
n=$(grep -c "tiny-Q4_K_M" "$LOG")
[ "$n" -eq 3 ] && ok "a cached model is not fetched again" || bad "a cached model is not fetched again" "$n requests"

# resume: the first attempt is cut after 1 MB (the part kept), the second asks for the rest
rm -rf "$SNIPER_MODELS_DIR"
curl -s -X POST -d '{"cut_after": 1000000}' "$HF_ENDPOINT/_control" >/dev/null
"$SNIPER" pull test/tiny:Q8_0 >/dev/null 2>"$TMP/err"
st=$?
[ $st -ne 0 ] && grep -q "pull again to resume" "$TMP/err" && [ ! -e "$M/tiny-Q8_0.gguf" ] &&
    [ "$(stat -c %s "$M/tiny-Q8_0.gguf.part" 2>/dev/null)" = 1000000 ] &&
    ok "a cut download keeps its part" || bad "a cut download keeps its part" "$st $(cat "$TMP/err")"
"$SNIPER" pull test/tiny:Q8_0 >/dev/null 2>"$TMP/err"
expect "pull resumes" $? "$(cat "$TMP/err")"
tail -1 "$LOG" | grep -q "tiny-Q8_0.gguf bytes=1000000-" && cmp -s "$M/tiny-Q8_0.gguf" "$HUB/test/tiny/tiny-Q8_0.gguf" &&
    ok "resumed with a range, bytes the hub's" || bad "resumed with a range, bytes the hub's" "$(tail -2 "$LOG")"

# checksum: a wrong sha256 twice: refused, removed, fetched exactly twice
"$SNIPER" pull test/badsum >/dev/null 2>"$TMP/err"
st=$?
n=$(grep -c "^test/badsum/" "$LOG")
[ $st -ne 0 ] && grep -q "failed its checksum twice" "$TMP/err" && [ "$n" -eq 2 ] &&
    [ -z "$(ls "$SNIPER_MODELS_DIR/test/badsum")" ] && ok "checksum mismatch: retried once, removed" ||
    bad "checksum mismatch: retried once, removed" "$st $n $(cat "$TMP/err")"

# gated: 401 names HF_TOKEN; with the token it comes
"$SNIPER" pull gated/tiny:Q8_0 >/dev/null 2>"$TMP/err"
st=$?
[ $st -ne 0 ] && grep -q "HTTP 401" "$TMP/err" && grep -q "HF_TOKEN" "$TMP/err" &&
    ok "gated: 401 says HF_TOKEN" || bad "gated: 401 says HF_TOKEN" "$(cat "$TMP/err")"
HF_TOKEN=secret "$SNIPER" pull gated/tiny:Q8_0 >/dev/null 2>"$TMP/err"
expect "gated: with HF_TOKEN" $? "$(cat "$TMP/err")"

# 404: the repo; a quantization the repo lacks lists those it has; no quantization picks Q4_K_M
"$SNIPER" pull test/nope >/dev/null 2>"$TMP/err"
st=$?
[ $st -ne 0 ] && grep -q 'repo "test/nope" not found' "$TMP/err" && ok "404 repo" ||
    bad "404 repo" "$(cat "$TMP/err")"
"$SNIPER" pull test/tiny:IQ2_XS >/dev/null 2>"$TMP/err"
st=$?
[ $st -ne 0 ] && grep -q 'no file for quantization "IQ2_XS".*it has: Q4_K_M, Q8_0' "$TMP/err" &&
    ok "404 quantization lists the repo's" || bad "404 quantization lists the repo's" "$(cat "$TMP/err")"
out=$("$SNIPER" pull test/tiny 2>"$TMP/err")
[ "$out" = "$M/tiny-Q4_K_M-00001-of-00003.gguf" ] && ok "no quantization: Q4_K_M" ||
    bad "no quantization: Q4_K_M" "$out $(cat "$TMP/err")"
"$SNIPER" pull 'test/../x' >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "not a model name" "$TMP/err" && ok "a malformed name" ||
    bad "a malformed name" "$(cat "$TMP/err")"

# offline and no network: the cache answers; what it lacks is named
out=$(HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_OFFLINE=1 "$SNIPER" pull test/tiny:Q8_0 2>"$TMP/err")
[ "$out" = "$M/tiny-Q8_0.gguf" ] && ok "offline: from the cache" || bad "offline: from the cache" "$(cat "$TMP/err")"
HF_ENDPOINT=http://127.0.0.1:9 "$SNIPER" pull test/other:Q8_0 >/dev/null 2>"$TMP/err"
st=$?
[ $st -ne 0 ] && grep -q "cannot reach the hub" "$TMP/err" && grep -q "not in the cache" "$TMP/err" &&
    ok "no network: named" || bad "no network: named" "$(cat "$TMP/err")"

# disk full: a 1 MiB tmpfs; the part kept, the message says how much more is needed
mkdir -p "$TMP/full"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1m tmpfs "$TMP/full" 2>/dev/null; then
    SNIPER_MODELS_DIR=$TMP/full "$SNIPER" pull test/tiny:Q8_0 >/dev/null 2>"$TMP/err"
    st=$?
    part=$TMP/full/test/tiny/tiny-Q8_0.gguf.part
    [ $st -ne 0 ] && grep -q "disk full writing .*bytes (.*) more are needed" "$TMP/err" && [ -s "$part" ] &&
        [ ! -e "$TMP/full/test/tiny/tiny-Q8_0.gguf" ] && ok "disk full: part kept, bytes needed" ||
        bad "disk full: part kept, bytes needed" "$st $(cat "$TMP/err")"
    umount "$TMP/full"
else
    echo "SKIP: cannot mount a tmpfs (not root?): disk full NOT checked"
    skip=$((skip + 1))
fi

# the progress bar on a terminal (tmux): percentage, bar, sizes, rate; the final state stays
if command -v tmux >/dev/null; then
    rm -f "$M/tiny-Q8_0.gguf"
    tmux new-session -d -s "sniper-hub-$$" -x 160 -y 10 \
        "env HF_ENDPOINT=$HF_ENDPOINT SNIPER_MODELS_DIR=$SNIPER_MODELS_DIR $SNIPER pull test/tiny:Q8_0; echo pulled-\$?; sleep 30"
    for _ in $(seq 200); do
        tmux capture-pane -p -t "sniper-hub-$$" >"$TMP/pane" 2>/dev/null
        grep -q "pulled-" "$TMP/pane" && break
        sleep 0.05
    done
    grep -qE 'tiny-Q8_0.gguf \[#{24}\] 100% [0-9.]+ MB / [0-9.]+ MB, [0-9.]+ [kMG]?B/s' "$TMP/pane" &&
        grep -q "pulled-0" "$TMP/pane" && ok "progress bar in tmux" || bad "progress bar in tmux" "$(cat "$TMP/pane")"
else
    echo "SKIP: no tmux: the progress bar NOT checked"
    skip=$((skip + 1))
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
