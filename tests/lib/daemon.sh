# tests/lib/daemon.sh - sourced by the test scripts that run sniperd on models they make:
# daemon_init NAME makes $TMP (/tmp/sniper-NAME.XXXXXX) and, on exit, stops every daemon serve
# started and removes $TMP (KEEP_TMP keeps it); serve starts one and sets $port; harmony_ids gives
# a scripted gpt-oss reply's ids; fail ends the script as one failed test. Not a test itself
# (tests/run.sh runs tests/*.sh only). Needs $BUILD.

daemon_init() {
    TMP=$(mktemp -d "/tmp/sniper-$1.XXXXXX")
    pids=()
    trap daemon_cleanup EXIT
}

daemon_cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"
}

fail() { echo "FAIL   $1"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# serve MODEL LOG [OPTION...]: sniperd on MODEL (stderr in $TMP/LOG.err), any port, 2 threads and
# the options given; returns once it is ready, with its port in $port (fail when it does not start).
serve() {
    local model=$1 log=$TMP/$2.err
    shift 2
    "$BUILD/sniperd" -m "$model" --port 0 --threads 2 "$@" 2>"$log" &
    pids+=($!)
    port=
    for _ in $(seq 300); do
        port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$log")
        grep -q "ready" "$log" && [ -n "$port" ] && return 0
        sleep 0.05
    done
    fail "sniperd did not start on $model: $(cat "$log")"
}

# harmony_ids MODEL TEXT: the ids of TEXT as gpt-oss MODEL writes it after its generation prompt
# (from the prompt's last token, "assistant", which starts each chain of scripted_model.py).
harmony_ids() {
    local n
    n=$("$BUILD/sniperd" -m "$1" --tokenize -p '<|start|>assistant' 2>/dev/null | wc -w)
    "$BUILD/sniperd" -m "$1" --tokenize -p "<|start|>assistant$2" 2>/dev/null | cut -d' ' -f"$n"-
}
