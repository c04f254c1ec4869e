/* api.h - sniperd's HTTP API: the OpenAI-compatible routes, health, stats and metrics, on top of
 * the scheduler (server/http/scheduler.h) and the HTTP plumbing (server/http/server.h).
 *
 *     struct api *a = api_new(&cfg);                       // state "loading"
 *     http_server_start(&hcfg, api_handle, a, ...);         // /health answers 503 while loading
 *     api_set_ready(a, model, tokenizer, scheduler, cache); // now it serves
 *     ...
 *     api_free(a);                                          // after http_server_stop */
#ifndef SNIPER_API_H
#define SNIPER_API_H

#include <stdint.h>

#include "expert_cache.h"
#include "s3.h"
#include "model.h"
#include "scheduler.h"
#include "server.h"
#include "tokenizer.h"

struct api_config {
    const char *api_key;     /* NULL or "": no authentication */
    const char *model_alias; /* the id /v1/models reports (default: the model's name) */
    const char *chat_template; /* a chat_family_name(); NULL: detected from the GGUF */
    uint64_t ram_budget;     /* bytes, 0: none (for stats) */
    const char *context_dir; /* where /v1/context keeps contexts (made on the first save) */
    const struct s3_config *s3; /* the object store for upload/download, or NULL (then only the
                                 * environment's SNIPER_S3_* / R2_* settings) */
};

struct api;

/* Returns NULL (a message in err) on no memory. */
struct api *api_new(const struct api_config *cfg, char *err, size_t err_len);
void api_free(struct api *a);

/* Loading progress in [0, 1] for /health (thread-safe). */
void api_set_progress(struct api *a, double progress);

/* Everything is loaded: serve. The objects are borrowed (the cache may be NULL); n_ctx is the
 * engine's context. */
void api_set_ready(struct api *a, const struct model *m, const struct tokenizer *tk,
                   struct scheduler *s, struct expert_cache *c, int32_t n_ctx);

/* The http_handler: routes one request. */
void api_handle(void *ctx, const struct http_request *rq, struct http_response *out);

#endif
