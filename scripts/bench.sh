#!/usr/bin/env bash
# `make bench`: kernel throughput; end-to-end prefill and decode of the qwen3-30b-a3b preset
# (generated once into models/, ~18.5 GB) with the model in RAM, warm; the device's direct-read
# bandwidth on the model file (build/bench-disk); then one cold run per RAM budget: page cache
# dropped, sniperd inside a cgroup v1 memory cgroup capped at the budget (page cache counted), its
# stderr parsed into decode/prefill tok/s, time to first token, peak RSS, hit rate, bytes read per
# decoded token and the disk-bound limit (the device's direct-read MB/s, measured again before
# each run or the run's own rate if higher, / decode bytes read per token), and the same against
# min(disk-bound, in-RAM decode): no budget decodes faster than the all-in-RAM run. Ends with a Markdown table for docs/benchmarks.md. Benchmarks are not tests: nothing is asserted.
# Each run's exact-engine bound adds to the disk's time the compute no read can overlap (its
# compute-decode line: attention, DeltaNet, norms, routers, output; which experts layer L+1 needs
# is known only after layer L). With LLAMA_BIN=/path/to/llama-completion (built apart from this
# repository) llama.cpp runs on the same file under the same cap right after each budget's runs
# (a prompt of about LLAMA_PROMPT tokens, LLAMA_GEN generated: by default PROMPT and GEN; a context
# of LLAMA_CTX positions, by default sniperd's 4096: llama.cpp's own default is the model's whole
# trained context, whose KV cache alone (5 GiB on gemma4-26b-a4b) outgrows a 4 GiB cap).
#   MODEL=path THREADS=2 PROMPT=64 GEN=32 RUNS=3 BUDGETS="2G 4G 8G unlimited" make bench
#   MODEL=models/qwen3.5-35b-a3b.gguf: a missing model is generated with the preset of its name
#   WARM=0 skips the warm in-RAM runs; DISK_SECS=2 is bench-disk's seconds per queue depth;
#   DROP_CACHES=0 leaves the page cache alone (for trial runs on a machine someone else measures on).
#   HTTP_CLIENTS=1,2,4,8 HTTP_CAPS="unlimited 4G 8G" HTTP_TOKENS=64 HTTP_CTX=1024: the
#   concurrent-clients part (HTTP_CTX positions per slot);
#   LLAMA_SERVER=/path/to/llama-server runs llama-server -np N beside sniperd --parallel N.
# Real routing: the runs above route as the random-weight model does; then the same cold runs
# under REPLAY_BUDGETS route every moe layer as a real model did (sniperd --route-replay, a route
# trace of ../shared/fixtures/routing: Qwen3-30B-A3B's for the qwen3-30b-a3b preset, gpt-oss-120b's
# for gpt-oss-120b, Gemma-4-26B-A4B's for gemma4-26b-a4b; the text is meaningless), the trace's
# decode tokens once through (its decode tokens + 1 generated), and
# each beside bench-policy's replay of the same trace, eviction and slots: the hit rate the run
# should reproduce.
#   REPLAY=path/to/trace.csv (default: the preset's trace when there is one; REPLAY= none)
#   REPLAY_BUDGETS="2G 4G 8G" REPLAY_RUNS=1 REPLAY_TOP_K=trace (experts a token: the trace's, so
#   exactly its routing; 0: the model's, the rest filled from the model's own routers)
# Without root there is no cgroup and no page-cache drop: the budget is sniperd's alone (said so).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/qwen3-30b-a3b.gguf}
PRESET=${PRESET:-$(basename "$MODEL" .gguf)}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-64}
GEN=${GEN:-32}
LLAMA_BIN=${LLAMA_BIN:-}
LLAMA_PROMPT=${LLAMA_PROMPT:-$PROMPT} # llama.cpp thrashes under small caps: fewer tokens keep it
LLAMA_GEN=${LLAMA_GEN:-$GEN}          # to minutes
LLAMA_CTX=${LLAMA_CTX:-4096}          # sniperd's default --ctx-size (min(model's, 4096))
RUNS=${RUNS:-3}
BUDGETS=${BUDGETS:-2G 4G 8G unlimited}
WARM=${WARM:-1}
DISK_SECS=${DISK_SECS:-2}
DROP_CACHES=${DROP_CACHES:-1}
FIXTURES=${SNIPER_FIXTURES:-../shared/fixtures}
case $PRESET in # the traces of ../shared/fixtures/routing whose shapes a preset has
qwen3-30b-a3b) REPLAY_AUTO=$FIXTURES/routing/qwen.route.csv ;;
gpt-oss-120b) REPLAY_AUTO=$FIXTURES/routing/gptoss.route.csv ;;
gemma4-26b-a4b) REPLAY_AUTO=$FIXTURES/routing/gemma.route.csv ;;
*) REPLAY_AUTO= ;;
esac
REPLAY=${REPLAY-$REPLAY_AUTO}
REPLAY_BUDGETS=${REPLAY_BUDGETS:-2G 4G 8G}
REPLAY_RUNS=${REPLAY_RUNS:-1}
REPLAY_TOP_K=${REPLAY_TOP_K:-trace}
CG_ROOT=/sys/fs/cgroup/memory

WORK=$(mktemp -d /tmp/sniper-bench.XXXXXX)
CGROUPS=()

# Removes this script's cgroups (ending what is still inside them: only sniperd runs there) and
# its temporary files. Runs once, at exit.
cleanup() {
    local cg pid
    for cg in "${CGROUPS[@]}"; do
        [ -d "$cg" ] || continue
        for pid in $(cat "$cg/cgroup.procs" 2>/dev/null); do
            kill "$pid" 2>/dev/null || true
        done
        for _ in 1 2 3 4 5; do
            rmdir "$cg" 2>/dev/null && break
            sleep 0.2
        done
        if [ -d "$cg" ]; then echo "bench: could not remove cgroup $cg" >&2; fi
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Bytes of a size such as 512M or 4G (powers of 1024, as sniperd reads --ram-budget).
to_bytes() {
    local n=${1%%[KkMmGgTt]*} u=${1##*[0-9]} mul=1
    case ${u%iB} in
    '') mul=1 ;; [Kk]) mul=1024 ;; [Mm]) mul=$((1 << 20)) ;; [Gg]) mul=$((1 << 30)) ;;
    [Tt]) mul=$((1 << 40)) ;; *) return 1 ;;
    esac
    [[ $n =~ ^[0-9]+$ ]] || return 1
    echo $((n * mul))
}

# The value of key=value in a line of sniperd's stderr, or nothing.
field() {
    sed -nE "s/^(.* )?$2=([^ ]*).*$/\2/p" <<<"$1"
}

# Floating-point arithmetic: calc 'expr' with awk variables passed as name=value after it.
calc() {
    local expr=$1
    shift
    local vars=()
    for v in "$@"; do vars+=(-v "$v"); done
    awk "${vars[@]}" "BEGIN { $expr }"
}

echo "== kernels: one thread, weights in cache and streamed from memory"
"$BUILD/bench-kernels" --secs 0.2

if [ ! -f "$MODEL" ]; then
    free_gb=$(df -Pk "$(dirname "$MODEL")" 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }')
    if [ "${free_gb:-0}" -lt 25 ]; then
        echo "bench: $MODEL is missing and only ${free_gb:-?} GB are free (need 25): skipping"
        exit 0
    fi
    mkdir -p "$(dirname "$MODEL")"
    "$BUILD/sniper-mkmodel" --preset "$PRESET" -o "$MODEL"
fi
SNIPERD=("$BUILD/sniperd" -m "$MODEL" --bench-prompt "$PROMPT" -n "$GEN" --temp 0
    --threads "$THREADS")

# ------------------------------------------------------------------------------------------------
# Warm, in RAM

ram_decode= # best warm in-RAM decode tok/s: the speed no budget can beat (compute-bound)
if [ "$WARM" != 0 ]; then
    echo "== end to end in RAM: $MODEL, $THREADS threads, prompt $PROMPT tokens, $GEN generated"
    echo "   (the first run pulls the file into memory and is not counted)"
    for i in $(seq 0 "$RUNS"); do
        label="run $i"
        [ "$i" -eq 0 ] && label=warm-up
        if "${SNIPERD[@]}" >/dev/null 2>"$WORK/warm.err" && grep -q '^timing' "$WORK/warm.err"; then
            echo "$label: $(grep '^timing' "$WORK/warm.err")"
            d=$(sed -nE 's/^timing: .*generated [0-9]+ tokens in [0-9.]+ s \(([0-9.]+) tok\/s\).*/\1/p' \
                "$WORK/warm.err")
            if [ "$i" -gt 0 ] && [ -n "$d" ] &&
                [ "$(calc 'print (d > r)' d="$d" r="${ram_decode:-0}")" = 1 ]; then
                ram_decode=$d
            fi
        else
            echo "$label: failed: $(tail -1 "$WORK/warm.err")"
        fi
    done
fi

# ------------------------------------------------------------------------------------------------
# The device

echo "== disk: random direct reads of one expert's size from $MODEL, $DISK_SECS s per queue depth"
disk_best=
if "$BUILD/bench-disk" "$MODEL" --secs "$DISK_SECS" >"$WORK/disk.out" 2>"$WORK/disk.err"; then
    disk_best=$(sed -n 's/^disk: best_MBps=//p' "$WORK/disk.out")
fi
cat "$WORK/disk.out" "$WORK/disk.err"
[ -n "$disk_best" ] || echo "bench: no direct-read bandwidth: the disk-bound limits are left out"

# ------------------------------------------------------------------------------------------------
# Cold, under budgets

use_cgroup=0
if [ "$(id -u)" -ne 0 ]; then
    echo "bench: not root: no memory cgroup and no page-cache drop; each budget is sniperd's alone"
elif [ ! -w "$CG_ROOT/cgroup.procs" ] || [ ! -f "$CG_ROOT/memory.limit_in_bytes" ]; then
    echo "bench: no cgroup v1 memory controller at $CG_ROOT: each budget is sniperd's alone"
else
    use_cgroup=1
fi
have_time=0
/usr/bin/time -o /dev/null -f %M true 2>/dev/null && have_time=1 # GNU time (not macOS's)

drop_caches() {
    [ "$(id -u)" -eq 0 ] && [ "$DROP_CACHES" != 0 ] || return 0
    sync
    if [ "$(uname -s)" = Darwin ]; then
        purge 2>/dev/null || echo "bench: could not drop the page cache (purge)"
    else
        echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || echo "bench: could not drop the page cache"
    fi
}

# Creates the cgroup for budget $1 (capped at $2 bytes, or uncapped when empty) and sets CG to its
# path. Returns 1 with a message when it cannot.
cg_make() {
    local cg=$CG_ROOT/sniper-bench-$1
    if [ -d "$cg" ] && ! rmdir "$cg" 2>/dev/null; then
        echo "bench: cgroup $cg exists and is busy" >&2
        return 1
    fi
    mkdir "$cg" || return 1
    CGROUPS+=("$cg")
    CG=$cg
    if [ -n "$2" ]; then
        echo "$2" >"$cg/memory.limit_in_bytes" || return 1
        if [ -f "$cg/memory.memsw.limit_in_bytes" ]; then
            echo "$2" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null ||
                echo "bench: could not cap memory+swap of $cg" >&2
        fi
    fi
}

cg_remove() {
    rmdir "$1" 2>/dev/null || true
}

ROWS=()

# A table row for a run that gave no figures: budget, run, what happened, empty cells.
row_note() {
    ROWS+=("| $1 | $2 | $3 |$(printf ' |%.0s' {1..16})")
}

# One cold run under budget $1 (run $2; $3 = nocg: without a cgroup): prints sniperd's lines and a
# result line, adds a table row. A run the cgroup's OOM killer ends is run again without the cgroup,
# to tell a budget sniperd refuses (it loads its resident weights before checking) from one it
# accepts but overruns.
run_budget() {
    local budget=$1 run=$2 nocg=${3:-} cg= cap= rc=0 cmd=() args=()
    local err=$WORK/run.err
    [ "$budget" = unlimited ] || args=(--ram-budget "$budget")
    if [ "$budget" != unlimited ] && ! cap=$(to_bytes "$budget"); then
        echo "bench: budget \"$budget\" is not a size such as 4G or 512M"
        row_note "$budget" "$run" "not a size"
        return 0
    fi
    echo "== budget $budget, run $run: ${SNIPERD[*]} ${args[*]}"
    # the host's disk drifts from minute to minute: its bandwidth is measured again right before
    # each run (depth 32, pread threads and io_uring), and the limit uses the better of the two
    local dev=$disk_best
    if [ "$budget" != unlimited ] && [ -n "$disk_best" ]; then
        dev=$("$BUILD/bench-disk" "$MODEL" --secs 1 --depth 32 2>/dev/null |
            sed -n 's/^disk: best_MBps=//p')
        dev=${dev:-$disk_best}
        echo "   device now: $dev MB/s"
    fi
    drop_caches
    [ "$have_time" = 1 ] && cmd=(/usr/bin/time -o "$WORK/time" -f %M)
    rm -f "$WORK/time"
    if [ "$use_cgroup" = 1 ] && [ -z "$nocg" ] && cg_make "$budget" "$cap"; then
        cg=$CG
        echo "   in cgroup $cg, cap ${cap:-none} bytes"
        sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
            "${cmd[@]}" "${SNIPERD[@]}" "${args[@]}" >/dev/null 2>"$err" || rc=$?
    else
        [ "$use_cgroup" = 1 ] && echo "   no cgroup for this run: the budget is sniperd's alone"
        "${cmd[@]}" "${SNIPERD[@]}" "${args[@]}" >/dev/null 2>"$err" || rc=$?
    fi
    local cg_peak=- oom=
    if [ -n "$cg" ]; then
        cg_peak=$(($(cat "$cg/memory.max_usage_in_bytes") >> 20))
        oom=$(sed -n 's/^oom_kill //p' "$cg/memory.oom_control" 2>/dev/null || true)
        oom="failcnt=$(cat "$cg/memory.failcnt") oom_kill=${oom:-?}"
        cg_remove "$cg"
    fi
    grep -E '^(budget|timing|experts|experts-decode|experts-layers):' "$err" || true
    local label=$budget timing
    [ -n "$nocg" ] && label="$budget, no cgroup"
    timing=$(grep '^timing:' "$err" | tail -1 || true)
    if [ "$rc" -ne 0 ] || [ -z "$timing" ]; then
        local why
        why=$(grep -m1 'is too small' "$err" || true)
        if [ -n "$why" ]; then
            echo "refused: $why"
            row_note "$label" "$run" \
                "refused: minimum $(sed -nE 's/.*minimum is ([0-9]+ MiB).*/\1/p' <<<"$why")"
        elif [ -n "$cg" ] && [ "$rc" -ge 128 ]; then
            echo "killed by signal $((rc - 128)) under the cgroup's cap ($oom, peak $cg_peak MiB);" \
                "running it again without the cgroup"
            row_note "$label" "$run" "killed under the cap ($oom, peak $cg_peak MiB)"
            run_budget "$budget" "$run" nocg
        else
            why=$(grep -v '^Command \(exited\|terminated\)' "$err" | tail -1 || true)
            echo "failed (exit $rc): ${why:-no output}"
            row_note "$label" "$run" "failed (exit $rc)"
        fi
        return 0
    fi
    local load np tp pps ng dps
    read -r load np tp pps ng dps < <(sed -E 's/^timing: load ([0-9.]+) s, prompt ([0-9]+) tokens in ([0-9.]+) s \(([0-9.]+) tok\/s\), generated ([0-9]+) tokens in [0-9.]+ s \(([0-9.]+) tok\/s\).*/\1 \2 \3 \4 \5 \6/' <<<"$timing")
    local ex dec rss=- hit=- bpt=0 est= mbps=- limit=- ratio=- mbt=- wait= ttft
    ex=$(grep '^experts:' "$err" | tail -1 || true)
    dec=$(grep '^experts-decode:' "$err" | tail -1 || true)
    [ -f "$WORK/time" ] && rss=$(($(tail -1 "$WORK/time" | tr -dc 0-9) >> 10))
    if [ -n "$ex" ]; then
        rss=$(field "$ex" peak_rss_MB)
        hit=$(field "$ex" hit_rate)
        mbps=$(field "$ex" read_MBps)
        if [ -n "$dec" ]; then
            local dt dh dm
            dt=$(field "$dec" tokens) dh=$(field "$dec" hits) dm=$(field "$dec" misses)
            bpt=$(calc 'print (t > 0 ? b / t : 0)' b="$(field "$dec" bytes_read)" t="$dt")
            hit=$(calc 'printf "%.3f", (h + m > 0 ? h / (h + m) : 0)' h="$dh" m="$dm")
            # the device's rate while busy when sniperd says (io_busy_s), else per second waited
            local w
            w=$(field "$dec" io_busy_s)
            [ -n "$w" ] || w=$(field "$dec" io_wait_s)
            mbps=$(calc 'printf "%.1f", (w > 0 ? b / w / 1e6 : 0)' b="$(field "$dec" bytes_read)" w="$w")
            wait=$(calc 'printf "%.0f", (t > 0 ? 1e3 * w / t : 0)' w="$(field "$dec" io_wait_s)" t="$dt")
        else
            bpt=$(calc 'print b / (p + g)' b="$(field "$ex" bytes_read)" p="$np" g="$ng")
            est=" (estimated)"
            hit="$hit (whole run)"
        fi
    fi
    ttft=$(calc 'printf "%.3f", t' t="$tp") # the first token is sampled from the prefill's logits
    # the run's own read rate proves the device could do at least that much during the run
    if [ "$mbps" != - ] && [ "$(calc 'print (m > d)' m="$mbps" d="${dev:-0}")" = 1 ]; then
        dev=$mbps
    fi
    local bound=- bratio=- serial exact=- eratio=-
    serial=$(field "$(grep '^compute-decode:' "$err" | tail -1 || true)" serial_ms_per_token)
    if [ -n "$dev" ] && [ -n "$serial" ]; then
        exact=$(calc 'printf "%.2f", 1 / (b / (m * 1e6) + s / 1e3)' b="$bpt" m="$dev" s="$serial")
        eratio=$(calc 'printf "%.0f%%", 100 * d / x' d="$dps" x="$exact")
    fi
    if [ -n "$dev" ] && [ "$(calc 'print (b > 0)' b="$bpt")" = 1 ]; then
        limit=$(calc 'printf "%.2f", m * 1e6 / b' m="$dev" b="$bpt")
        ratio=$(calc 'printf "%.0f%%", 100 * d / l' d="$dps" l="$limit")
        bound=$limit
        if [ -n "$ram_decode" ] && [ "$(calc 'print (r < l)' r="$ram_decode" l="$limit")" = 1 ]; then
            bound=$ram_decode
        fi
        bratio=$(calc 'printf "%.0f%%", 100 * d / l' d="$dps" l="$bound")
    fi
    [ -n "$ex" ] && mbt=$(calc 'printf "%.1f", b / 1e6' b="$bpt")
    echo "result: decode $dps tok/s, prefill $pps tok/s, first token ${ttft} s, load $load s," \
        "peak RSS $rss MiB, cgroup peak $cg_peak MiB, hit rate $hit," \
        "decode read $mbt MB/token$est at $mbps MB/s${wait:+ (I/O wait $wait ms/token)}," \
        "disk-bound limit $limit tok/s$est (device $dev MB/s), achieved $ratio of it$est;" \
        "bound min(disk, in RAM) $bound tok/s, achieved $bratio;" \
        "exact-engine bound $exact tok/s (serial compute ${serial:-?} ms/token), achieved $eratio"
    if [ -z "$dec" ] && [ -n "$ex" ]; then
        echo "   (no experts-decode line: decode bytes per token estimated as all bytes read /" \
            "(prompt + generated tokens); prefill shares each expert read among a batch's tokens," \
            "so this can undercount decode several times over and overstate the limit)"
    fi
    local e=${est:+ est.}
    ROWS+=("| $label | $run | $dps | $pps | $ttft | $load | $rss | $cg_peak | $hit | $mbt$e | $mbps | $dev | $limit$e | $ratio$e | $bound | $bratio | ${serial:--} | $exact | $eratio |")
}

LROWS=()

# llama.cpp's llama-completion on the same file under budget $1's cap (page cache dropped first;
# it maps the file, so the cap bounds its page cache; --no-repack, since repacking copies the
# weights into anonymous memory that no cap below the model's size holds): prompt and decode
# tok/s from its perf lines into LROWS.
run_llama() {
    local budget=$1 cap= cg= out=$WORK/llama.out rc=0 prompt
    [ "$budget" = unlimited ] || cap=$(to_bytes "$budget") || return 0
    prompt=$(printf 'the %.0s' $(seq 1 "$LLAMA_PROMPT")) # one token each in mkmodel's vocabulary
    local cmd=("$LLAMA_BIN" -m "$MODEL" -t "$THREADS" -c "$LLAMA_CTX" --no-repack -p "$prompt"
        -n "$LLAMA_GEN" --temp 0 -no-cnv)
    echo "== llama.cpp, budget $budget: ${cmd[*]:0:8} -p \"the the ...\" ($LLAMA_PROMPT words)" \
        "-n $LLAMA_GEN --temp 0 -no-cnv"
    drop_caches
    if [ "$use_cgroup" = 1 ] && cg_make "llama-$budget" "$cap"; then
        cg=$CG
        sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "${cmd[@]}" \
            >"$out" 2>&1 </dev/null || rc=$?
        cg_remove "$cg"
    else
        "${cmd[@]}" >"$out" 2>&1 </dev/null || rc=$?
    fi
    local pp tg np
    grep -E 'load time|eval time' "$out" || true
    np=$(sed -nE 's/.*prompt eval time = .* \/ +([0-9]+) tokens.*/\1/p' "$out" | head -1)
    pp=$(sed -nE 's/.*prompt eval time = .* ([0-9.]+) tokens per second.*/\1/p' "$out" | head -1)
    tg=$(sed -nE 's/.* eval time = .* runs .* ([0-9.]+) tokens per second.*/\1/p' "$out" | head -1)
    [ "$rc" -eq 0 ] || echo "llama.cpp failed (exit $rc): $(tail -1 "$out")"
    LROWS+=("| $budget | ${tg:-failed} | ${pp:-failed} | ${np:--} |")
}

for budget in $BUDGETS; do
    for run in $(seq 1 "$RUNS"); do
        run_budget "$budget" "$run"
    done
    [ -n "$LLAMA_BIN" ] && run_llama "$budget"
done

echo
echo "== table ($(date -u '+%Y-%m-%d %H:%M UTC'); $MODEL; $THREADS threads; prompt $PROMPT," \
    "$GEN generated; best direct read ${disk_best:-?} MB/s; $([ "$use_cgroup" = 1 ] &&
    echo "cgroup cap = budget" || echo "no cgroup"))"
echo
echo "| budget | run | decode tok/s | prefill tok/s | first token s | load s | peak RSS MiB |" \
    "cgroup peak MiB | hit rate | decode MB/token | read MB/s | device MB/s | disk-bound tok/s |" \
    "achieved/limit | min(disk, in RAM) tok/s | achieved/min | serial ms/token |" \
    "exact-engine bound tok/s | achieved/exact |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for row in "${ROWS[@]}"; do
    echo "$row"
done
if [ -n "$LLAMA_BIN" ]; then
    echo
    echo "| budget | llama.cpp decode tok/s ($LLAMA_GEN generated) | llama.cpp prefill tok/s |" \
        "prompt tokens |"
    echo "|---|---|---|---|"
    for row in "${LROWS[@]}"; do
        echo "$row"
    done
fi

# ------------------------------------------------------------------------------------------------
# Real routing: the cold runs again, routed by a trace (sniperd --route-replay), each beside
# bench-policy's replay of the same trace at the run's slots and eviction

# bench-policy's decode hit rate (a fraction) for trace $1, $2 slots, policy $3; empty on failure.
policy_hit() {
    "$BUILD/bench-policy" "$1" --slots "$2" 2>/dev/null |
        awk -F'|' -v p="$3" '{ gsub(/ /, "", $4) } $4 == p { gsub(/ /, "", $5); print $5 / 100 }'
}

if [ -n "$REPLAY" ] && [ ! -f "$REPLAY" ]; then
    echo "bench: the route trace $REPLAY is absent: no real-routing rows"
elif [ -n "$REPLAY" ]; then
    r_used=$(sed -nE 's/^#.* n_expert_used=([0-9]+).*/\1/p' "$REPLAY" | head -1)
    r_dec=$(awk -F, '$2 == 1 { print $1 "," $3 }' "$REPLAY" | sort -u | wc -l)
    r_k=$REPLAY_TOP_K
    [ "$r_k" = trace ] && r_k=$r_used
    SAVED=("${SNIPERD[@]}") SAVED_ROWS=("${ROWS[@]}")
    SNIPERD=("$BUILD/sniperd" -m "$MODEL" --bench-prompt "$PROMPT" -n $((r_dec + 1)) --temp 0
        --threads "$THREADS" --route-replay "$REPLAY" --moe-top-k "$r_k")
    ROWS=() PROWS=()
    echo
    echo "== real routing: $REPLAY ($r_used experts a token, $r_dec decode tokens), $r_k routed a" \
        "token (0: the model's)"
    for budget in $REPLAY_BUDGETS; do
        for run in $(seq 1 "$REPLAY_RUNS"); do
            run_budget "$budget" "$run"
            dec=$(grep '^experts-decode:' "$WORK/run.err" | tail -1 || true)
            [ -n "$dec" ] || continue
            slots=$(field "$dec" slots) ev=$(field "$dec" eviction)
            hit=$(calc 'printf "%.3f", h / (h + m)' h="$(field "$dec" hits)" m="$(field "$dec" misses)")
            ph=$(policy_hit "$REPLAY" "$slots" "$ev")
            gap=-
            [ -n "$ph" ] && gap=$(calc 'printf "%+.1f", 100 * (h - p)' h="$hit" p="$ph")
            echo "replay: end-to-end decode hit rate $hit; bench-policy $ev at $slots slots ${ph:-?}"
            PROWS+=("| $budget | $run | $slots | $ev | $hit | ${ph:--} | $gap |")
        done
    done
    echo
    echo "== table, real routing ($(date -u '+%Y-%m-%d %H:%M UTC'); ${SNIPERD[*]:1} under each" \
        "budget; the columns as above)"
    echo
    echo "| budget | run | decode tok/s | prefill tok/s | first token s | load s | peak RSS MiB |" \
        "cgroup peak MiB | hit rate | decode MB/token | read MB/s | device MB/s | disk-bound tok/s |" \
        "achieved/limit | min(disk, in RAM) tok/s | achieved/min | serial ms/token |" \
        "exact-engine bound tok/s | achieved/exact |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        echo "$row"
    done
    echo
    echo "| budget | run | slots at the end | eviction | end-to-end decode hit rate |" \
        "bench-policy's replay (same slots, eviction) | gap, points |"
    echo "|---|---|---|---|---|---|---|"
    for row in "${PROWS[@]}"; do
        echo "$row"
    done
    SNIPERD=("${SAVED[@]}") ROWS=("${SAVED_ROWS[@]}")
fi

# ------------------------------------------------------------------------------------------------
# Concurrent clients: N clients against N slots (sniperd --parallel N), on $MODEL in RAM and under
# each cap of HTTP_CAPS (a memory cgroup, page cache dropped; the budget is --ram-budget minus
# 100 MiB for the HTTP threads), and llama-server -np N on the same file when LLAMA_SERVER names
# one (built apart from this repository; --no-repack under a cap, as above).

HTTP_CLIENTS=${HTTP_CLIENTS:-1,2,4,8}
HTTP_CAPS=${HTTP_CAPS:-unlimited 4G 8G}
HTTP_TOKENS=${HTTP_TOKENS:-64}
HTTP_CTX=${HTTP_CTX:-1024} # positions per slot: eight slots' KV beside a 30B model's weights
LLAMA_SERVER=${LLAMA_SERVER:-}
for cap in $HTTP_CAPS; do
    echo
    echo "== concurrent clients ($HTTP_CLIENTS), $HTTP_TOKENS tokens each, cap $cap (tools/bench_http.py)"
    capargs=() sargs="" largs=""
    if [ "$cap" != unlimited ]; then
        [ "$use_cgroup" = 1 ] && capargs=(--cap "$cap")
        sargs="--ram-budget $(( $(numfmt --from=iec "$cap") / 1048576 - 100 ))M"
        largs="--no-repack"
    fi
    python3 tools/bench_http.py "$BUILD/sniperd" "$MODEL" --clients "$HTTP_CLIENTS" \
        --max-tokens "$HTTP_TOKENS" --ctx "$HTTP_CTX" "${capargs[@]}" --args="$sargs" ||
        echo "bench: the sniperd HTTP benchmark failed"
    if [ -n "$LLAMA_SERVER" ]; then
        python3 tools/bench_http.py --server llama "$LLAMA_SERVER" "$MODEL" \
            --clients "$HTTP_CLIENTS" --max-tokens "$HTTP_TOKENS" --ctx "$HTTP_CTX" "${capargs[@]}" \
            --args="$largs" || echo "bench: the llama-server HTTP benchmark failed"
    fi
done
