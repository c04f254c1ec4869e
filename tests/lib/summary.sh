# tests/lib/summary.sh - sourced by the suite runners (tests/run.sh, tests/arm64.sh) and by suites that
# run several binaries (tests/o200k.sh, tests/gemma4vocab.sh): reads a test's output for its "N
# passed, N failed, N skipped" line. Not a test itself.

# summary_counts LOG RC: sets p, f and s from LOG's last summary line (0 where there is none); a
# non-zero exit status RC without a counted failure counts as one failure.
summary_counts() {
    local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
    p=0 f=0 s=0
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
        f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
        s=$(echo "$line" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
    fi
    if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
}

# summary_tally TEXT: adds TEXT's last summary line to the running totals tp, tf and ts (set them
# to 0 first); a TEXT without one counts as one failure.
summary_tally() {
    local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$1" | tail -n 1)
    [ -n "$line" ] || { tf=$((tf + 1)); return; }
    tp=$((tp + $(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")))
    tf=$((tf + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
    ts=$((ts + $(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || echo 0)))
}
