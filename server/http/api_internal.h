/* api_internal.h - what the API's route files share: the daemon's state and reply helpers. Not
 * for use outside server/http/api*.c. */
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

#endif
