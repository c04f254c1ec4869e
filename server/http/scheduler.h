/* scheduler.h - one engine, one thread that runs it, its slots, and a bounded queue of generation
 * jobs in front of them. The engine has n_seq sequences; each is a slot that runs one job at a
 * time. Every engine step batches the decode token of each decoding slot with a chunk of the
 * prompts being read (continuous batching: a job joins and leaves between steps), so the weights
 * and, under a RAM budget, the union of the step's experts are read once for all of them. A job is
 * a prompt's token ids and how to sample; a new job goes to the idle slot whose cache holds the
 * longest reusable prefix of its prompt (then the least recently used), which prefills only the
 * rest; the slot generates, holds back text that may be the start of a stop string, and reports
 * pieces and the end through callbacks called on the engine thread. A job's output does not depend
 * on the other jobs sharing its steps.
 *
 *     struct scheduler *s = scheduler_new(engine, tokenizer, 16, err, sizeof(err));
 *     struct job *j = job_new(ids, n, &params, &callbacks, ctx);
 *     if (scheduler_submit(s, j) == -EBUSY) ... 503 ...
 *     job_cancel(j);            // e.g. the client went away: its slot is free within one step
 *     job_release(j);           // the submitter's reference
 *     scheduler_free(s);        // finishes the jobs running, fails the queued ones */
#ifndef SNIPER_SCHEDULER_H
#define SNIPER_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "sampler.h"
#include "tokenizer.h"

#define JOB_MAX_STOP 4
#define JOB_MAX_TOP 20

struct job_params {
    struct sampler_params sp;
    int32_t max_tokens;          /* > 0 */
    const char *stop[JOB_MAX_STOP]; /* copied by job_new */
    int n_stop;
    int top_logprobs;            /* 0..JOB_MAX_TOP alternatives per token when logprobs */
    bool logprobs;
    bool json_object;            /* only tokens that keep the text a prefix of one JSON object;
                                  * the job ends when the object closes (json_grammar.h) */
};

/* One generated token as the callbacks see it. */
struct job_token {
    int32_t id;
    float logprob;               /* log-softmax of the raw logits (when logprobs) */
    int n_top;
    int32_t top_id[JOB_MAX_TOP];
    float top_logprob[JOB_MAX_TOP];
};

struct job_summary {
    int rc;                      /* 0, or the engine's error (-EIO: an expert read failed ...) */
    const char *finish_reason;   /* "stop" (end of generation or a stop string), "length",
                                  * "cancelled" or "error" */
    int32_t prompt_tokens, completion_tokens, cached_tokens;
    double queue_ms;             /* from submit to a slot */
    double prefill_ms, decode_ms;
    int slot;                    /* the slot that ran it, -1 for none */
};

struct job_callbacks {
    /* Every generated token (not the end of generation), before its text; may be NULL. */
    void (*token)(void *ctx, const struct job_token *tok);
    /* Visible text (stop strings removed); tok is the token that completed it, or NULL when the
     * text is released later (held back for a possible stop string). */
    void (*text)(void *ctx, const char *text, size_t len, const struct job_token *tok);
    /* Called once, last. */
    void (*done)(void *ctx, const struct job_summary *s);
};

struct job;
struct scheduler;

/* A job for prompt ids[0..n) (copied). Returns NULL on no memory. The caller holds one reference. */
struct job *job_new(const int32_t *ids, size_t n, const struct job_params *p,
                    const struct job_callbacks *cb, void *ctx);

/* Asks the job to stop (thread-safe; it ends with finish_reason "cancelled" within one step). */
void job_cancel(struct job *j);

/* Drops the caller's reference. */
void job_release(struct job *j);

/* Starts the engine thread over e's engine_n_seq(e) sequences, one slot each (e and tk are
 * borrowed and must outlive the scheduler). queue_max: jobs waiting beyond the running ones.
 * Returns the scheduler or NULL with a message in err. */
struct scheduler *scheduler_new(struct engine *e, const struct tokenizer *tk, int queue_max,
                                char *err, size_t err_len);

/* Stops the thread after the running jobs; queued jobs end with rc -ECANCELED. */
void scheduler_free(struct scheduler *s);

/* Queues j (the scheduler takes its own reference). Returns 0, or -EBUSY when the queue is full. */
int scheduler_submit(struct scheduler *s, struct job *j);

/* Runs fn(ctx, s) on the engine thread, in queue order, between steps, once a slot is idle, and
 * waits for it: the way to touch the engine (contexts: save, load) without racing generation.
 * Returns fn's result, -EBUSY when the queue is full, or -ENOMEM. Inside fn only, these may be
 * used: */
int scheduler_call(struct scheduler *s, int (*fn)(void *ctx, struct scheduler *s), void *ctx);
struct engine *scheduler_engine(struct scheduler *s);
/* The engine sequence of the call's slot: the least recently used idle slot, or the one the last
 * scheduler_prefill chose. */
int32_t scheduler_call_seq(struct scheduler *s);
/* Makes an idle slot hold exactly ids[0..n) in its cache: the one with the longest reusable
 * prefix (whose length goes to *cached), which becomes the call's slot. Returns 0, -ENOSPC or the
 * engine's error. */
int scheduler_prefill(struct scheduler *s, const int32_t *ids, size_t n, int32_t *cached);
/* Records that the call's slot's cache now holds ids[0..n) (after importing it). */
void scheduler_set_cached(struct scheduler *s, const int32_t *ids, int32_t n);

enum scheduler_slot_state { SLOT_IDLE, SLOT_PREFILL, SLOT_DECODE };

/* One slot as /v1/stats shows it. */
struct scheduler_slot_stats {
    enum scheduler_slot_state state;
    int32_t cached;              /* tokens in its cache */
    int32_t prompt_tokens;       /* of its running (or last) job */
    int32_t completion_tokens;   /* generated so far by it */
    double decode_tok_s;         /* its decode speed (tokens after the first / seconds) */
    uint64_t jobs;               /* jobs it ran */
};

struct scheduler_stats {
    uint64_t jobs_done, jobs_cancelled, prompt_tokens, cached_tokens, completion_tokens;
    double prefill_s, decode_s;  /* summed over jobs (they overlap with parallel slots) */
    int queued;
    bool busy;                   /* a slot is running a job */
    int n_slots;
    int slots_active;            /* sequences in the step now */
    struct scheduler_slot_stats slot[ENGINE_MAX_SEQ];
    /* steps: cumulative counts, and the last step's batch (tokens, sequences) and the average
     * number of experts its moe layers looked up (the union of its tokens' choices) */
    uint64_t steps, step_tokens, step_seqs, step_union_experts, step_moe_layers;
    int32_t last_batch_tokens, last_batch_seqs;
    double last_union_experts;
    double busy_s;               /* seconds with at least one slot active */
};
void scheduler_get_stats(struct scheduler *s, struct scheduler_stats *out);

#endif
