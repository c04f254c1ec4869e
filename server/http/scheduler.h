/* scheduler.h - one engine, one thread that runs it, and a bounded queue of generation jobs in
 * front of it. A job is a prompt's token ids and how to sample; the scheduler reuses the longest
 * prefix the KV cache already holds (the prompt cache), prefills the rest, generates, holds back
 * text that may be the start of a stop string, and reports pieces and the end through callbacks
 * called on its thread.
 *
 *     struct scheduler *s = scheduler_new(engine, tokenizer, 16, err, sizeof(err));
 *     struct job *j = job_new(ids, n, &params, &callbacks, ctx);
 *     if (scheduler_submit(s, j) == -EBUSY) ... 503 ...
 *     job_cancel(j);            // e.g. the client went away: stops within one token
 *     job_release(j);           // the submitter's reference
 *     scheduler_free(s);        // finishes the job running, fails the queued ones */
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
    double prefill_ms, decode_ms;
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

/* Asks the job to stop (thread-safe; it ends with finish_reason "cancelled"). */
void job_cancel(struct job *j);

/* Drops the caller's reference. */
void job_release(struct job *j);

/* Starts the engine thread. queue_max: jobs waiting beyond the running one. */
struct scheduler *scheduler_new(struct engine *e, const struct tokenizer *tk, int queue_max,
                                char *err, size_t err_len);

/* Stops the thread after the running job; queued jobs end with rc -ECANCELED. */
void scheduler_free(struct scheduler *s);

/* Queues j (the scheduler takes its own reference). Returns 0, or -EBUSY when the queue is full. */
int scheduler_submit(struct scheduler *s, struct job *j);

struct scheduler_stats {
    uint64_t jobs_done, jobs_cancelled, prompt_tokens, cached_tokens, completion_tokens;
    double prefill_s, decode_s;
    int queued;
    bool busy;
};
void scheduler_get_stats(struct scheduler *s, struct scheduler_stats *out);

#endif
