/* api.h - sniperd's HTTP API: the OpenAI-compatible routes, health, stats and metrics, on top of
 * the models served (server/http/pool.h), their schedulers and the HTTP plumbing
 * (server/http/server.h).
 *
 *     struct api *a = api_new(&cfg);                       // state "loading"
 *     http_server_start(&hcfg, api_handle, a, ...);         // /health answers 503 while loading
 *     api_set_ready(a, pool, by_name);                     // now it serves
 *     ...
 *     api_free(a);                                          // after http_server_stop */
#ifndef SNIPER_API_H
#define SNIPER_API_H

#include <stdint.h>

#include "pool.h"
#include "s3.h"
#include "server.h"

struct api_config {
    const char *api_key;     /* NULL or "": no authentication */
    uint64_t ram_budget;     /* bytes, 0: none (for stats) */
    const char *context_dir; /* where /v1/context keeps contexts (made on the first save) */
    const struct s3_config *s3; /* the object store for upload/download, or NULL (then only the
                                 * environment's SNIPER_S3_* / R2_* settings) */
    const char *replica_id;  /* this daemon among its replicas ([A-Za-z0-9._-], checked by the
                              * caller): /v1/stats "replica", /metrics sniper_replica_info */
    bool upload_on_save;     /* a saved context is also put to the store, when one is set */
};

struct api;

/* Returns NULL (a message in err) on no memory. */
struct api *api_new(const struct api_config *cfg, char *err, size_t err_len);
void api_free(struct api *a);

/* Loading progress in [0, 1] for /health (thread-safe). */
void api_set_progress(struct api *a, double progress);

/* Serve the models of pool (borrowed; it must outlive the serving). by_name: several models, a
 * request's "model" picks one and an unknown name is a 404; otherwise every request gets the
 * default model whatever it names. */
void api_set_ready(struct api *a, struct pool *pool, bool by_name);

/* Draining (SIGTERM): /health answers 503 {"status":"draining"} so balancers move on, and new
 * requests get 503 (code "draining"); what is running goes on. Stats and metrics still answer. */
void api_set_draining(struct api *a);

/* The http_handler: routes one request. */
void api_handle(void *ctx, const struct http_request *rq, struct http_response *out);

#endif
