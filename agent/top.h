/* top.h - `sniper top`: sniperd's /v1/stats as a terminal dashboard (model, uptime, requests,
 * queue, tokens, prefill and decode tok/s, RSS against the budget, the expert cache, reads, I/O
 * wait, a running transfer), redrawn in place every interval with ANSI (cursor home, clear to the
 * end) until q or Ctrl-C; or one snapshot (--once) for scripts.
 *
 *     struct top_opts o = { .llm = &l, .server = url, .once = false, .interval_s = 1,
 *                           .cancel = &flag, .out = stdout, .in_fd = 0 };
 *     if (top_run(&o, err, sizeof(err)) < 0) fprintf(stderr, "sniper: %s\n", err);
 */
#ifndef SNIPER_AGENT_TOP_H
#define SNIPER_AGENT_TOP_H

#include "llm.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

/* Rates between two snapshots (the live view has them; the first frame and --once do not). */
struct top_rates {
    bool valid;
    double prefill_tps;   /* prompt tokens prefilled (not cached) per second */
    double decode_tps;    /* completion tokens per second */
    double read_MBps;     /* expert bytes read per second, 1e6 bytes */
};

struct top_opts {
    struct llm *llm;                 /* borrowed: where /v1/stats is asked */
    const char *server;              /* borrowed: shown in the title */
    bool once;                       /* one snapshot, plain lines, then return */
    double interval_s;               /* between frames (> 0) */
    volatile sig_atomic_t *cancel;   /* borrowed; non-zero ends the live view (Ctrl-C) */
    FILE *out;                       /* where frames go */
    int in_fd;                       /* keys (q) are read from it when it is a terminal; -1: none */
};

/* Prints one frame for the stats object s (borrowed; missing fields show as "-"), each line ending
 * with eol ("\n", or "\x1b[K\n" to clear what a longer previous frame left). r may be NULL. */
void top_print(FILE *f, const json_t *s, const struct top_rates *r, const char *server,
               const char *eol);

/* The rates between snapshots prev and now taken dt_s seconds apart (both borrowed). */
struct top_rates top_rates_between(const json_t *prev, const json_t *now, double dt_s);

/* Runs the dashboard. --once: fetches and prints one snapshot; returns 0, or a negative error
 * (llm_json's) with err filled. Live: redraws every interval until q, Q, end of input on the
 * terminal or the cancel flag; a failed fetch is shown in the frame and retried; the terminal's
 * mode and cursor are restored before it returns 0 (or -errno when the terminal cannot be set). */
int top_run(const struct top_opts *o, char *err, size_t err_len);

#endif
