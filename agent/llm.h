/* llm.h - the OpenAI-compatible API as the agent uses it: chat completions (whole or streamed
 * over SSE, with time to first token and tok/s), the model list, and plain JSON GET/POST for the
 * server's other endpoints (/v1/stats, /v1/context/...). Non-2xx answers become one clear line:
 * the status, the server's error message, and a hint for 401.
 *
 *     struct llm l;  llm_init(&l, "http://127.0.0.1:8080", "model", &http);
 *     struct llm_opts o = LLM_OPTS_DEFAULT;  o.stream = true;
 *     char *answer;  struct llm_stats st;
 *     llm_chat(&l, messages, &o, print_token, NULL, &answer, &st, err, sizeof(err));
 */
#ifndef SNIPER_AGENT_LLM_H
#define SNIPER_AGENT_LLM_H

#include "http_client.h"

#include <jansson.h>
#include <stdbool.h>

struct llm {
    const char *base;             /* borrowed; the server's URL without /v1 */
    char *model;                  /* owned; NULL until set or resolved from /v1/models */
    struct http_client http;      /* copied */
};

struct llm_opts {
    double temperature;   /* < 0: the server's default */
    int max_tokens;       /* 0: the server's default */
    bool stream;
};
#define LLM_OPTS_DEFAULT { .temperature = -1, .max_tokens = 0, .stream = false }

struct llm_stats {
    long prompt_tokens;       /* from the server's usage; 0 when it sent none */
    long completion_tokens;   /* usage, else the count of content pieces streamed */
    double ttft_s;            /* request sent -> first content token */
    double total_s;           /* request sent -> last byte */
    double tok_per_s;         /* completion tokens over the time after the first token */
};

/* Called with each piece of streamed content (not NUL-terminated). */
typedef void (*llm_token_fn)(void *ctx, const char *text, size_t n);

/* Sets up l; model may be NULL. Returns 0 or -ENOMEM. */
int llm_init(struct llm *l, const char *base, const char *model, const struct http_client *hc);
void llm_release(struct llm *l);

/* Sets the model (copied). Returns 0 or -ENOMEM. */
int llm_set_model(struct llm *l, const char *model);

/* Makes sure l->model is set, asking /v1/models for the first id when it is not. Returns 0 or a
 * negative error with err filled. */
int llm_ensure_model(struct llm *l, char *err, size_t err_len);

/* POSTs /v1/chat/completions with messages (borrowed JSON array of {role, content}). On success
 * returns 0, *content (malloc'd, caller frees; may be NULL when not wanted) holds the whole answer
 * and st (may be NULL) its numbers; with o->stream each piece also goes to on_token as it comes.
 * Errors: the http_request() codes, -EPROTO (an HTTP error status, a malformed body or stream,
 * a stream that ended without [DONE]), with err filled. After -ECANCELED *content holds what came
 * before the cancel. */
int llm_chat(struct llm *l, json_t *messages, const struct llm_opts *o, llm_token_fn on_token,
             void *ctx, char **content, struct llm_stats *st, char *err, size_t err_len);

/* The server's models (GET /v1/models) into *models: a new JSON array of its model objects
 * (each with a string "id"; sniperd adds "state", "architecture", "quantization", "size_bytes",
 * "error" ...), caller decrefs. Returns 0 or a negative error with err filled. */
int llm_models(struct llm *l, json_t **models, char *err, size_t err_len);

/* A model object's id (borrowed), or NULL. */
const char *llm_model_id(const json_t *model);

/* GET (body NULL) or POST (body borrowed) a JSON endpoint, path starting with "/v1/". On success
 * returns 0 and *out is a new reference (caller decrefs). Errors as llm_chat(). */
int llm_json(struct llm *l, const char *method, const char *path, json_t *body, json_t **out,
             char *err, size_t err_len);

#endif
