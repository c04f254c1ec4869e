/* api_internal.h - what the API's route files share: the daemon's state, reply helpers, the
 * prompt and job parameters, and the one request runner (struct api_call, api_call.c) each route
 * hands its hooks to. Not for use outside server/http/api*.c. */
#ifndef SNIPER_API_INTERNAL_H
#define SNIPER_API_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "api.h"
#include "chat.h"
#include "openai.h"
#include "pool.h"
#include "s3.h"
#include "scheduler.h"
#include "server.h"

struct api {
    struct api_config cfg;
    char *key;
    pthread_mutex_t mu; /* guards the fields below */
    double progress;
    bool ready;
    bool draining;      /* api_set_draining: new work is refused */
    struct pool *pool;  /* the models served (borrowed) */
    bool by_name;       /* several models: a request's "model" picks one (unknown: 404); one
                         * model (-m): any name gets it, as OpenAI clients send their own */
    time_t started;
    uint64_t requests, errors;
    atomic_uint_fast64_t next_id;
    /* contexts (api_context.c) */
    char context_dir[1024];
    struct s3_config s3;
    bool s3_ok;
    struct s3_progress transfer;  /* the running upload or download */
    char transfer_kind[16];       /* "upload", "download", or "" (none: guarded by mu) */
    char transfer_name[72];
};

/* Routes /v1/context, /v1/context/... (api_context.c): true when the path was one of them (out
 * filled), false otherwise. */
bool api_context_route(struct api *a, const struct http_request *rq, struct http_response *out);

/* Replies: an OpenAI error (from e, or built from the parts), or a JSON body taken over. */
void api_reply_error(struct http_response *out, const struct oai_error *e);
void api_reply_fail(struct http_response *out, int status, const char *type, const char *param,
                    const char *code, const char *msg);
void api_reply_json(struct http_response *out, int status, char *json);

/* The model a request names (NULL or "": the default), held until pool_release; NULL with e set
 * (404 unknown, 503 still loading ...). */
struct pool_model *api_model(struct api *a, const char *name, struct oai_error *e);

/* Renders (chat: through pm's template) and tokenizes a request's prompt. Returns the ids
 * (malloc'd, *n of them) or NULL with e set. */
int32_t *api_prompt_ids(const struct pool_model *pm, const struct oai_request *rq, size_t *n,
                        struct oai_error *e);

/* The same for a conversation to be continued later (a saved context): the messages rendered as
 * the prefix of any request that adds a turn to them (no generation prompt). */
int32_t *api_prefix_ids(const struct pool_model *pm, const struct oai_request *rq, size_t *n,
                        struct oai_error *e);

/* The tokens a job may generate after a prompt of n on pm: asked when given (> 0), else the
 * context's room. Returns 0 with *out, or -ERANGE when the prompt and that do not fit. */
int api_max_tokens(const struct pool_model *pm, size_t n, int32_t asked, int32_t *out);

/* A job's parameters from an OpenAI-shaped request (/v1/chat/completions and Ollama's routes):
 * its sampling, stop strings (borrowed from rq until job_new copies them), logprobs and JSON
 * constraint; without a seed in rq, one from the time and salt. */
struct job_params api_job_params(const struct oai_request *rq, int32_t max_tokens,
                                 const void *salt);

/* ---- one call: the request runner every route shares (api_call.c) ----------------------------
 *
 *     api_call_init(&c->call, a, &ops, c);                  // c: the route's state, call inside
 *     c->call.pm = api_model(a, name, &e);                  // then the prompt's ids
 *     api_call_job(&c->call, ids, n, &params, chat, rq->enable_thinking);
 *     if (stream) api_call_stream(&c->call);                // then the route's first events
 *     if (api_call_run(&c->call, hr, "text/event-stream", out) == -EBUSY) ... 503 ...
 *     if (!stream) ... the reply from c->call.sum and what the hooks gathered ...
 *     api_call_unref(&c->call);                             // the handler's reference */

/* What a route does with its job's output. The hooks run on the engine's thread, in order; ctx
 * is the route's state given to api_call_init. */
struct api_call_ops {
    void (*token)(void *ctx, const struct job_token *tok);  /* each token (may be NULL) */
    /* the job's visible text (NULL: api_call_feed, into the splitter or as content) */
    void (*text)(void *ctx, const char *text, size_t len, const struct job_token *tok);
    chat_event_fn event;                                     /* content, reasoning, a tool call */
    /* The job ended: the route finishes its output (api_call_finish), sets call.sum for the
     * handler and, streaming, writes its last events; the runner then closes the stream. */
    void (*done)(void *ctx, const struct job_summary *s);
    void (*free)(void *ctx);  /* the route's state, after the runner released its parts */
};

struct api_call {
    struct api *api;
    struct pool_model *pm;      /* the model, held until the last reference goes (route sets) */
    struct job *job;
    struct http_stream *out;    /* streaming: the reply's body (api_call_stream), else NULL */
    struct chat_stream *cs;     /* the output splitter, or NULL (text is content) */
    struct job_summary sum;     /* the job's end as the done hook set it, once api_call_run
                                 * returned (not streaming) */
    const struct api_call_ops *ops;
    void *ctx;
    atomic_int refs;
    pthread_mutex_t mu;         /* guards done */
    pthread_cond_t cv;
    bool done;
};

/* Initialises ac (embedded in the route's state ctx) with one reference, the handler's. ops is
 * borrowed for the call's life (a static table). */
void api_call_init(struct api_call *ac, struct api *a, const struct api_call_ops *ops, void *ctx);

/* Drops a reference; the last releases the job, the model and the splitter, then calls
 * ops->free(ctx). */
void api_call_unref(struct api_call *ac);

/* Makes ac's job over ids[0..n) (copied) with p (its stop strings copied), and with split the
 * splitter of ac->pm's template (thinking: the Qwen3.5 generation prompt opens <think>).
 * Returns 0 or -ENOMEM. */
int api_call_job(struct api_call *ac, const int32_t *ids, size_t n, const struct job_params *p,
                 bool split, bool thinking);

/* Text into the splitter (its events to ops->event), or one content event without a splitter. */
void api_call_feed(struct api_call *ac, const char *text, size_t len);

/* The splitter's held-back text as its last events (nothing without a splitter). */
void api_call_finish(struct api_call *ac);

/* Makes the reply a stream: ac->out, for the route's first events before api_call_run.
 * Returns 0 or -ENOMEM. */
int api_call_stream(struct api_call *ac);

/* Writes one SSE event into the stream: "event: EVENT" (when not NULL), "data: DATA" (one line,
 * borrowed). Nothing is sent when memory runs out. */
void api_call_send(struct api_call *ac, const char *event, const char *data);

/* Submits the job. Streaming: out becomes the stream (content_type, a static string) and 0 comes
 * back at once. Otherwise waits for the job's end (ac->sum set), cancelling it when the client
 * hr hangs up, and returns 0. -EBUSY when the queue is full: nothing was sent, the stream is
 * dropped (ac->out NULL) and the route replies. */
int api_call_run(struct api_call *ac, const struct http_request *hr, const char *content_type,
                 struct http_response *out);

#endif
