/* llm.c - see llm.h. A stream is accepted only when every data event is JSON (or [DONE]) and
 * [DONE] arrives; otherwise the caller hears "malformed stream" rather than half an answer
 * presented as whole. */
#include "clock.h"
#include "llm.h"
#include "err.h"
#include "sse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int llm_init(struct llm *l, const char *base, const char *model, const struct http_client *hc) {
    memset(l, 0, sizeof(*l));
    l->base = base;
    l->http = *hc;
    return llm_set_model(l, model);
}

void llm_release(struct llm *l) {
    if (!l)
        return;
    free(l->model);
    l->model = NULL;
}

int llm_set_model(struct llm *l, const char *model) {
    char *m = NULL;
    if (model && !(m = strdup(model)))
        return -ENOMEM;
    free(l->model);
    l->model = m;
    return 0;
}

/* A non-2xx response as one line: status, the server's message, a hint. Returns -EPROTO. */
static int status_error(const struct http_response *r, const char *path, char *err,
                        size_t err_len) {
    json_t *root = json_loads(r->body ? r->body : "", JSON_ALLOW_NUL, NULL);
    json_t *e = json_object_get(root, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    if (!msg)
        msg = json_string_value(e);
    char body[200];
    snprintf(body, sizeof(body), "%.160s", r->body ? r->body : "");
    for (char *c = body; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    const char *hint = r->status == 401 ? " (wrong or missing API key: use --api-key or "
                                          "SNIPER_API_KEY)" : "";
    err_set(err, err_len, "server answered %ld on %s: %s%s", r->status, path,
            msg ? msg : (body[0] ? body : "(no message)"), hint);
    json_decref(root);
    return -EPROTO;
}

/* base + path into a fresh string, or NULL. */
static char *llm_url(const struct llm *l, const char *path) {
    char *u;
    return asprintf(&u, "%s%s", l->base, path) < 0 ? NULL : u;
}

int llm_json(struct llm *l, const char *method, const char *path, json_t *body, json_t **out,
             char *err, size_t err_len) {
    struct http_response r = { 0 };
    char *url = llm_url(l, path);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    int rc = -ENOMEM;
    *out = NULL;
    if (!url || (body && !text)) {
        err_set(err, err_len, "out of memory");
        goto out;
    }
    if ((rc = http_request(&l->http, method, url, text, NULL, NULL, &r, err, err_len)) < 0)
        goto out;
    if (r.status < 200 || r.status >= 300) {
        rc = status_error(&r, path, err, err_len);
        goto out;
    }
    json_error_t jerr;
    if (r.body[strspn(r.body, " \t\r\n")] == '\0') {
        *out = json_object();    /* 204 No Content and the like */
    } else if (!(*out = json_loads(r.body, JSON_ALLOW_NUL, &jerr))) {
        err_set(err, err_len, "malformed JSON from %s: %s", path, jerr.text);
        rc = -EPROTO;
    }
out:
    http_response_release(&r);
    free(text);
    free(url);
    return rc;
}

int llm_models(struct llm *l, json_t **models, char *err, size_t err_len) {
    json_t *root = NULL;
    int rc = llm_json(l, "GET", "/v1/models", NULL, &root, err, err_len);
    *models = NULL;
    if (rc < 0)
        return rc;
    json_t *data = json_object_get(root, "data");
    if (!json_is_array(data)) {
        err_set(err, err_len, "malformed /v1/models answer: no \"data\" array");
        json_decref(root);
        return -EPROTO;
    }
    *models = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(data, i, m) {
        if (json_is_string(json_object_get(m, "id")))
            json_array_append(*models, m);
    }
    json_decref(root);
    return 0;
}

const char *llm_model_id(const json_t *model) {
    return json_string_value(json_object_get(model, "id"));
}

int llm_ensure_model(struct llm *l, char *err, size_t err_len) {
    if (l->model)
        return 0;
    json_t *models = NULL;
    int rc = llm_models(l, &models, err, err_len);
    const json_t *pick = NULL; /* the first that did not fail to load (sniperd's default) */
    for (size_t i = 0; rc == 0 && i < json_array_size(models) && !pick; i++) {
        const char *state = json_string_value(json_object_get(json_array_get(models, i), "state"));
        if (!state || strcmp(state, "failed") != 0)
            pick = json_array_get(models, i);
    }
    if (rc == 0 && !pick) {
        err_set(err, err_len, "the server lists no usable models; pick one with --model");
        rc = -EPROTO;
    }
    if (rc == 0)
        rc = llm_set_model(l, llm_model_id(pick));
    json_decref(models);
    return rc;
}

/* ---- chat completions ---- */

struct chat_stream {
    struct sse_parser sse;
    llm_token_fn on_token;
    void *ctx;
    char *text;              /* the answer so far */
    size_t text_bytes, text_cap;
    long n_pieces;
    json_t *usage;           /* the last usage object seen (owned) */
    double t0, t_first, t_last;
    bool done;               /* [DONE] seen */
    char bad[160];           /* why the stream is malformed; "" when it is not */
};

static int stream_append(struct chat_stream *s, const char *p, size_t n) {
    if (s->text_bytes + n + 1 > s->text_cap) {
        size_t cap = s->text_cap ? s->text_cap : 1024;
        while (cap < s->text_bytes + n + 1)
            cap *= 2;
        char *t = realloc(s->text, cap);
        if (!t)
            return -ENOMEM;
        s->text = t;
        s->text_cap = cap;
    }
    memcpy(s->text + s->text_bytes, p, n);
    s->text_bytes += n;
    s->text[s->text_bytes] = '\0';
    return 0;
}

/* One SSE event of a chat stream. Returns 0, or 1 to stop on a malformed event. A model may
 * generate a NUL byte (sent as \\u0000): it is accepted, and the piece ends there. */
static int stream_event(void *ctx, const char *data, size_t n) {
    struct chat_stream *s = ctx;
    if (n == 6 && memcmp(data, "[DONE]", 6) == 0) {
        s->done = true;
        return 0;
    }
    json_error_t jerr;
    json_t *root = json_loadb(data, n, JSON_ALLOW_NUL, &jerr);
    if (!json_is_object(root)) {
        snprintf(s->bad, sizeof(s->bad), "event %zu is not JSON (%.100s)", s->sse.n_events,
                 root ? "not an object" : jerr.text);
        json_decref(root);
        return 1;
    }
    json_t *e = json_object_get(root, "error");
    if (e) {
        const char *msg = json_string_value(json_object_get(e, "message"));
        snprintf(s->bad, sizeof(s->bad), "server error in stream: %.120s", msg ? msg : "?");
        json_decref(root);
        return 1;
    }
    if (json_is_object(json_object_get(root, "usage"))) {
        json_decref(s->usage);
        s->usage = json_incref(json_object_get(root, "usage"));
    }
    json_t *delta = json_object_get(json_array_get(json_object_get(root, "choices"), 0), "delta");
    const char *piece = json_string_value(json_object_get(delta, "content"));
    int rc = 0;
    if (piece && *piece) {
        double t = clock_now_s();
        if (!s->n_pieces)
            s->t_first = t;
        s->t_last = t;
        s->n_pieces++;
        rc = stream_append(s, piece, strlen(piece)) < 0 ? 1 : 0;
        if (rc)
            snprintf(s->bad, sizeof(s->bad), "out of memory");
        else if (s->on_token)
            s->on_token(s->ctx, piece, strlen(piece));
    }
    json_decref(root);
    return rc;
}

static int stream_chunk(void *ctx, const char *data, size_t n) {
    struct chat_stream *s = ctx;
    int rc = sse_feed(&s->sse, data, n);
    if (rc < 0 && !s->bad[0])
        snprintf(s->bad, sizeof(s->bad), "a line too long or out of memory");
    return rc;
}

/* Fills st from the stream's timings and usage. */
static void stream_stats(const struct chat_stream *s, double t_end, struct llm_stats *st) {
    memset(st, 0, sizeof(*st));
    st->total_s = t_end - s->t0;
    st->prompt_tokens = (long)json_integer_value(json_object_get(s->usage, "prompt_tokens"));
    st->completion_tokens =
        (long)json_integer_value(json_object_get(s->usage, "completion_tokens"));
    if (st->completion_tokens <= 0)
        st->completion_tokens = s->n_pieces;
    if (s->n_pieces) {
        st->ttft_s = s->t_first - s->t0;
        double decode = t_end - s->t_first;
        st->tok_per_s = st->completion_tokens > 1 && decode > 1e-6
                            ? (double)(st->completion_tokens - 1) / decode
                            : st->completion_tokens / (st->total_s > 1e-6 ? st->total_s : 1e-6);
    }
}

/* The request body for messages and o (a new reference) or NULL. */
static json_t *chat_body(const struct llm *l, json_t *messages, const struct llm_opts *o) {
    json_t *b = json_pack("{s:s, s:O, s:b}", "model", l->model, "messages", messages,
                          "stream", o->stream);
    if (!b)
        return NULL;
    if (o->temperature >= 0)
        json_object_set_new(b, "temperature", json_real(o->temperature));
    if (o->max_tokens > 0)
        json_object_set_new(b, "max_tokens", json_integer(o->max_tokens));
    if (o->stream)
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    return b;
}

/* The whole (non-streamed) answer in r into *content and st. Returns 0 or -EPROTO/-ENOMEM. */
static int chat_parse_whole(const struct http_response *r, double t0, char **content,
                            struct llm_stats *st, char *err, size_t err_len) {
    json_error_t jerr;
    json_t *root = json_loads(r->body, JSON_ALLOW_NUL, &jerr);
    json_t *msg = json_object_get(json_array_get(json_object_get(root, "choices"), 0), "message");
    const char *text = json_string_value(json_object_get(msg, "content"));
    int rc = 0;
    if (!text) {
        err_set(err, err_len, "malformed answer from /v1/chat/completions: %s",
                root ? "no choices[0].message.content" : jerr.text);
        rc = -EPROTO;
    } else if (content && !(*content = strdup(text))) {
        rc = -ENOMEM;
    }
    if (rc == 0 && st) {
        json_t *u = json_object_get(root, "usage");
        memset(st, 0, sizeof(*st));
        st->total_s = st->ttft_s = clock_now_s() - t0;
        st->prompt_tokens = (long)json_integer_value(json_object_get(u, "prompt_tokens"));
        st->completion_tokens = (long)json_integer_value(json_object_get(u, "completion_tokens"));
        st->tok_per_s = st->completion_tokens / (st->total_s > 1e-6 ? st->total_s : 1e-6);
    }
    json_decref(root);
    return rc;
}

int llm_chat(struct llm *l, json_t *messages, const struct llm_opts *o, llm_token_fn on_token,
             void *ctx, char **content, struct llm_stats *st, char *err, size_t err_len) {
    struct chat_stream s = { .on_token = on_token, .ctx = ctx };
    struct http_response r = { 0 };
    char *url = NULL, *text = NULL;
    json_t *body = NULL;
    int rc;
    if (content)
        *content = NULL;
    if ((rc = llm_ensure_model(l, err, err_len)) < 0)
        return rc;
    rc = -ENOMEM;
    sse_init(&s.sse, stream_event, &s);
    if (!(body = chat_body(l, messages, o)) || !(text = json_dumps(body, JSON_COMPACT)) ||
        !(url = llm_url(l, "/v1/chat/completions"))) {
        err_set(err, err_len, "out of memory");
        goto out;
    }
    s.t0 = clock_now_s();
    rc = http_request(&l->http, "POST", url, text, o->stream ? stream_chunk : NULL, &s, &r, err,
                      err_len);
    if (rc == -ECANCELED && s.bad[0]) {
        err_set(err, err_len, "malformed stream from the server: %s", s.bad);
        rc = -EPROTO;
    }
    if (rc == 0 && (r.status < 200 || r.status >= 300))
        rc = status_error(&r, "/v1/chat/completions", err, err_len);
    else if (rc == 0 && !o->stream)
        rc = chat_parse_whole(&r, s.t0, content, st, err, err_len);
    else if (rc == 0 && !s.done) {
        err_set(err, err_len, "malformed stream from the server: it ended without [DONE]%s",
                sse_pending(&s.sse) ? " in the middle of an event" : "");
        rc = -EPROTO;
    }
    if (o->stream && st)
        stream_stats(&s, clock_now_s(), st);
    if (o->stream && content && (rc == 0 || rc == -ECANCELED || rc == -EPROTO)) {
        *content = s.text ? s.text : strdup("");
        s.text = NULL;
    }
out:
    sse_release(&s.sse);
    json_decref(s.usage);
    free(s.text);
    http_response_release(&r);
    json_decref(body);
    free(text);
    free(url);
    return rc;
}
