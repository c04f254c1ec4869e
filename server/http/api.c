/* api.c - the routes. A completion request is parsed and checked (openai.c), rendered through the
 * model's chat template (chat.c), tokenized, and run by the shared request runner (api_call.c),
 * whose hooks here turn generated text into content, reasoning and tool calls: streamed as SSE
 * chunks, or gathered into one response the connection's thread waits for.
 * Invariant: a call's state is written by the engine's thread only until its done hook ran. */
#include "api.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api_internal.h"
#include "api_ollama.h"
#include "api_responses.h"
#include "api_messages.h"
#include "api_tokenize.h"
#include "chat.h"
#include "openai.h"
#include "procstat.h"
#include "strbuf.h"
#include "webui.h"


/* ---- small helpers --------------------------------------------------------------------------- */

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

void api_reply_error(struct http_response *out, const struct oai_error *e) {
    out->status = e->status;
    out->content_type = "application/json";
    out->body = oai_error_json(e);
}

void api_reply_fail(struct http_response *out, int status, const char *type, const char *param,
                       const char *code, const char *msg) {
    struct oai_error e;
    oai_fail(&e, status, type, param, code, "%s", msg);
    api_reply_error(out, &e);
}

void api_reply_json(struct http_response *out, int status, char *json) {
    out->status = json ? status : 500;
    out->content_type = "application/json";
    out->body = json;
}

/* True when the Authorization header carries the key, compared in constant time. */
static bool authorized(const struct api *a, const char *header) {
    if (!a->key)
        return true;
    const char *prefix = "Bearer ";
    if (!header || strncmp(header, prefix, strlen(prefix)) != 0)
        return false;
    const char *got = header + strlen(prefix);
    size_t n = strlen(a->key), m = strlen(got);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a->key[i] ^ (i < m ? got[i] : 0));
    return diff == 0;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

struct api *api_new(const struct api_config *cfg, char *err, size_t err_len) {
    struct api *a = calloc(1, sizeof(*a));
    (void)err_len; /* the only failure is no memory */
    if (!a) {
        snprintf(err, err_len, "api: out of memory");
        return NULL;
    }
    a->cfg = *cfg;
    a->key = cfg->api_key && cfg->api_key[0] ? strdup(cfg->api_key) : NULL;
    pthread_mutex_init(&a->mu, NULL);
    a->started = time(NULL);
    atomic_init(&a->next_id, 1);
    const char *home = getenv("HOME");
    if (cfg->context_dir && cfg->context_dir[0])
        snprintf(a->context_dir, sizeof(a->context_dir), "%s", cfg->context_dir);
    else
        snprintf(a->context_dir, sizeof(a->context_dir), "%s/.local/share/sniper/contexts",
                 home && home[0] ? home : ".");
    if (cfg->s3)
        a->s3 = *cfg->s3;
    a->s3_ok = s3_config_from_env(&a->s3) == 0;
    if (cfg->upload_on_save && !a->s3_ok)
        fprintf(stderr, "sniperd: warning: --upload-on-save, but no object store is configured "
                        "(s3_* settings or SNIPER_S3_* / R2_*): contexts are saved locally only\n");
    return a;
}

void api_free(struct api *a) {
    if (!a)
        return;
    pthread_mutex_destroy(&a->mu);
    free(a->key);
    free(a);
}

void api_set_progress(struct api *a, double progress) {
    pthread_mutex_lock(&a->mu);
    a->progress = progress;
    pthread_mutex_unlock(&a->mu);
}

void api_set_draining(struct api *a) {
    pthread_mutex_lock(&a->mu);
    a->draining = true;
    pthread_mutex_unlock(&a->mu);
}

void api_set_ready(struct api *a, struct pool *pool, bool by_name) {
    pthread_mutex_lock(&a->mu);
    a->pool = pool;
    a->by_name = by_name;
    a->progress = 1.0;
    a->ready = true;
    pthread_mutex_unlock(&a->mu);
}

struct pool_model *api_model(struct api *a, const char *name, struct oai_error *e) {
    return pool_acquire(a->pool, a->by_name ? name : NULL, e);
}

/* ---- one completion -------------------------------------------------------------------------- */

struct call {
    struct api_call call;     /* the job, its model and reply (api_call.c) */
    struct oai_request rq;
    bool sent_role;
    char id[48];
    int64_t created;
    struct strbuf content, reasoning;
    struct oai_tool_call calls[16];
    char *call_names[16], *call_args[16], call_ids[16][32];
    int n_calls;
    const struct job_token *cur_tok; /* the token whose text is being split (streaming logprobs) */
    struct oai_logprob *lps;  /* non-streaming logprobs; their token texts are malloc'd */
    int n_lps, cap_lps;
};

static void logprob_clear(struct oai_logprob *lp);

/* The route's state, once the runner released its parts (api_call_ops.free). */
static void call_free(void *ctx) {
    struct call *c = ctx;
    oai_request_free(&c->rq);
    free(c->content.p);
    free(c->reasoning.p);
    for (int i = 0; i < c->n_calls; i++) {
        free(c->call_names[i]);
        free(c->call_args[i]);
    }
    for (int i = 0; i < c->n_lps; i++)
        logprob_clear(&c->lps[i]);
    free(c->lps);
    free(c);
}

static void send_frame(struct call *c, char *json) {
    if (!json)
        return;
    api_call_send(&c->call, NULL, json);
    free(json);
}

/* The result so far, as oai_response_json / oai_chunk_json read it. */
static struct oai_result call_result(struct call *c, const char *finish) {
    return (struct oai_result){
        .id = c->id,
        .created = c->created,
        .model = c->call.pm->id,
        .content = c->content.p,
        .reasoning = c->reasoning.p,
        .tool_calls = c->calls,
        .n_tool_calls = c->n_calls,
        .finish_reason = finish,
        .prompt_tokens = c->call.sum.prompt_tokens,
        .completion_tokens = c->call.sum.completion_tokens,
        .cached_tokens = c->call.sum.cached_tokens,
        .prefill_ms = c->call.sum.prefill_ms,
        .decode_ms = c->call.sum.decode_ms,
        /* one entry per completion token (fewer only when memory ran out: then none) */
        .logprobs = c->rq.logprobs && c->n_lps == c->call.sum.completion_tokens ? c->lps : NULL,
    };
}

static char *token_text(const struct tokenizer *tk, int32_t id);

/* Fills lp from t with malloc'd token texts (free with logprob_clear). */
static void logprob_fill(const struct tokenizer *tk, const struct job_token *t,
                         struct oai_logprob *lp) {
    memset(lp, 0, sizeof(*lp));
    lp->token = token_text(tk, t->id);
    lp->logprob = t->logprob;
    for (int k = 0; k < t->n_top && k < 20; k++) {
        lp->top_token[k] = token_text(tk, t->top_id[k]);
        lp->top_logprob[k] = t->top_logprob[k];
        lp->n_top++;
    }
}

static void logprob_clear(struct oai_logprob *lp) {
    free((char *)lp->token);
    for (int k = 0; k < lp->n_top; k++)
        free((char *)lp->top_token[k]);
}

/* A piece of content, reasoning or a tool call: streamed as a chunk, or gathered. */
static void on_event(void *ctx, const struct chat_event *ev) {
    struct call *c = ctx;
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        if (c->n_calls == 16)
            return;
        int i = c->n_calls++;
        c->call_names[i] = strdup(ev->name);
        c->call_args[i] = strdup(ev->arguments);
        char tail[24];
        snprintf(tail, sizeof(tail), "%s", strrchr(c->id, '-') + 1);
        snprintf(c->call_ids[i], sizeof(c->call_ids[i]), "call_%.16s_%d", tail, i);
        c->calls[i] = (struct oai_tool_call){c->call_ids[i], c->call_names[i], c->call_args[i]};
    }
    if (!c->call.out) {
        if (ev->kind == CHAT_EVENT_CONTENT)
            strbuf_putn(&c->content, ev->text, ev->len);
        else if (ev->kind == CHAT_EVENT_REASONING)
            strbuf_putn(&c->reasoning, ev->text, ev->len);
        return;
    }
    struct oai_result res = call_result(c, NULL);
    struct oai_delta d = {.role = !c->sent_role};
    struct oai_logprob lp = {0};
    if (ev->kind == CHAT_EVENT_CONTENT) {
        d.content = ev->text;
        d.content_len = ev->len;
        if (c->rq.logprobs && c->cur_tok) { /* a token's logprob goes with its first text */
            logprob_fill(c->call.pm->tk, c->cur_tok, &lp);
            d.logprob = &lp;
            c->cur_tok = NULL;
        }
    } else if (ev->kind == CHAT_EVENT_REASONING) {
        d.reasoning = ev->text;
        d.reasoning_len = ev->len;
    } else {
        d.tool_call = &c->calls[c->n_calls - 1];
        d.tool_index = c->n_calls - 1;
    }
    c->sent_role = true;
    send_frame(c, oai_chunk_json(&c->rq, &res, &d));
    logprob_clear(&lp);
}

/* A token's text as a NUL-terminated copy. */
static char *token_text(const struct tokenizer *tk, int32_t id) {
    size_t len = 0;
    const char *p = tokenizer_piece(tk, id, &len);
    return strndup(p ? p : "", len);
}

/* Records a token's logprobs (non-streaming). */
static void keep_logprob(struct call *c, const struct job_token *t) {
    if (!t || !c->rq.logprobs || c->call.out)
        return;
    if (c->n_lps == c->cap_lps) {
        int cap = c->cap_lps ? 2 * c->cap_lps : 64;
        struct oai_logprob *p = realloc(c->lps, sizeof(*p) * (size_t)cap);
        if (!p)
            return;
        c->lps = p;
        c->cap_lps = cap;
    }
    logprob_fill(c->call.pm->tk, t, &c->lps[c->n_lps++]);
}

static void on_token(void *ctx, const struct job_token *tok) {
    keep_logprob(ctx, tok);
}

static void on_text(void *ctx, const char *text, size_t len, const struct job_token *tok) {
    struct call *c = ctx;
    c->cur_tok = tok;
    api_call_feed(&c->call, text, len);
}

static void on_done(void *ctx, const struct job_summary *s) {
    struct call *c = ctx;
    c->cur_tok = NULL; /* the last token is gone: what the splitter still holds has no logprob */
    api_call_finish(&c->call);
    const char *finish = s->finish_reason;
    if (c->n_calls > 0 && strcmp(finish, "stop") == 0)
        finish = "tool_calls";
    c->call.sum = *s;
    c->call.sum.finish_reason = finish;
    if (c->call.out) {
        struct oai_result res = call_result(c, finish);
        if (s->rc < 0) {
            struct oai_error e;
            oai_fail(&e, 500, "server_error", "", "", "generation failed: %s", strerror(-s->rc));
            send_frame(c, oai_error_json(&e));
        } else if (strcmp(finish, "cancelled") != 0) {
            struct oai_delta d = {.role = !c->sent_role, .finish_reason = finish};
            send_frame(c, oai_chunk_json(&c->rq, &res, &d));
            if (c->rq.include_usage) {
                struct oai_delta u = {.usage_only = true};
                send_frame(c, oai_chunk_json(&c->rq, &res, &u));
            }
        }
        http_stream_write(c->call.out, "data: [DONE]\n\n", 14);
    }
}

static const struct api_call_ops call_ops = {on_token, on_text, on_event, on_done, call_free};

/* Renders and tokenizes the request's prompt. Returns the ids (malloc'd) or NULL with e set. */
static int32_t *prompt_ids(const struct pool_model *pm, const struct oai_request *rq,
                           bool as_prefix, size_t *n, struct oai_error *e) {
    char err[256] = "";
    char *text = NULL;
    if (rq->chat) {
        bool no_tools = rq->tool_choice && strcmp(rq->tool_choice, "none") == 0;
        struct chat_render_opts o = {.add_generation_prompt = !as_prefix,
                                     .enable_thinking = rq->enable_thinking,
                                     .tools_json = no_tools ? NULL : rq->tools_json,
                                     .as_prefix = as_prefix,
                                     .reasoning_effort = rq->reasoning_effort};
        if (rq->reasoning_effort && pm->family != CHAT_HARMONY) {
            oai_fail(e, 400, "invalid_request_error", "reasoning_effort", "unsupported_parameter",
                     "'reasoning_effort' needs a gpt-oss model (harmony chat format); this "
                     "model's template is %s", chat_family_name(pm->family));
            return NULL;
        }
        text = chat_render(pm->family, rq->messages, rq->n_messages, &o, err, sizeof(err));
        if (!text) {
            oai_fail(e, err[0] ? 400 : 500, err[0] ? "invalid_request_error" : "server_error",
                     "messages", "", "%s", err[0] ? err : "out of memory");
            return NULL;
        }
    } else {
        text = strdup(rq->prompt);
    }
    size_t n_text = 0;
    int32_t *ids = text ? tokenizer_encode(pm->tk, text, strlen(text), true, &n_text) : NULL;
    free(text);
    /* a BOS when the model wants one, unless the template wrote it (Llama 3's does) */
    bool bos = tokenizer_add_bos(pm->tk) && tokenizer_bos(pm->tk) >= 0 &&
               !(n_text > 0 && ids[0] == tokenizer_bos(pm->tk));
    int32_t *all = ids ? malloc((n_text + 1) * sizeof(int32_t)) : NULL;
    if (!all) {
        free(ids);
        oai_fail(e, 500, "server_error", "", "", "out of memory tokenizing the prompt");
        return NULL;
    }
    if (bos)
        all[0] = tokenizer_bos(pm->tk);
    memcpy(all + bos, ids, n_text * sizeof(int32_t));
    free(ids);
    *n = n_text + bos;
    return all;
}

int32_t *api_prompt_ids(const struct pool_model *pm, const struct oai_request *rq, size_t *n,
                        struct oai_error *e) {
    return prompt_ids(pm, rq, false, n, e);
}

int32_t *api_prefix_ids(const struct pool_model *pm, const struct oai_request *rq, size_t *n,
                        struct oai_error *e) {
    return prompt_ids(pm, rq, true, n, e);
}

int api_max_tokens(const struct pool_model *pm, size_t n, int32_t asked, int32_t *out) {
    const int32_t n_ctx = pm->n_ctx;
    int32_t max_tokens = asked > 0 ? asked : n_ctx - (int32_t)n;
    if ((int64_t)n + max_tokens > n_ctx || max_tokens <= 0)
        return -ERANGE;
    *out = max_tokens;
    return 0;
}

struct job_params api_job_params(const struct oai_request *rq, int32_t max_tokens,
                                 const void *salt) {
    struct job_params p = {.max_tokens = max_tokens, .n_stop = rq->n_stop,
                           .logprobs = rq->logprobs, .top_logprobs = rq->top_logprobs,
                           .json_object = rq->json_object};
    p.sp = sampler_params_default();
    p.sp.temp = rq->temperature;
    p.sp.top_p = rq->top_p;
    p.sp.top_k = rq->top_k;
    p.sp.min_p = rq->min_p;
    p.sp.presence_penalty = rq->presence_penalty;
    p.sp.frequency_penalty = rq->frequency_penalty;
    p.sp.repeat_penalty = rq->repeat_penalty;
    p.sp.seed = rq->has_seed ? rq->seed : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)salt;
    for (int i = 0; i < rq->n_stop; i++)
        p.stop[i] = rq->stop[i];
    return p;
}

static void handle_completion(struct api *a, const struct http_request *hr, bool chat,
                              struct http_response *out) {
    struct oai_limits lim = {.max_messages = 1024, .max_message_bytes = 1u << 20,
                             .max_tokens = 1 << 24, .max_stop_bytes = 256};
    struct oai_error e;
    size_t n = 0;
    int32_t *ids = NULL;
    struct call *c = calloc(1, sizeof(*c));
    if (!c) {
        api_reply_fail(out, 500, "server_error", "", "", "out of memory");
        return;
    }
    api_call_init(&c->call, a, &call_ops, c);
    int rc = chat ? oai_parse_chat(hr->body, hr->body_len, &lim, &c->rq, &e)
                  : oai_parse_completion(hr->body, hr->body_len, &lim, &c->rq, &e);
    if (rc < 0) {
        memset(&c->rq, 0, sizeof(c->rq)); /* freed by the parser on failure */
        api_reply_error(out, &e);
        goto done;
    }
    /* what the engine cannot honour yet is refused, never ignored */
    const char *tc = c->rq.tool_choice;
    if (tc && strcmp(tc, "auto") != 0 && strcmp(tc, "none") != 0) {
        oai_fail(&e, 400, "invalid_request_error", "tool_choice", "unsupported_parameter",
                 "tool_choice \"%s\" (forcing a tool call) is not supported yet: use \"auto\" "
                 "or \"none\"", strcmp(tc, "required") == 0 ? "required" : "a named function");
        api_reply_error(out, &e);
        goto done;
    }
    if (!(c->call.pm = api_model(a, c->rq.model, &e)) ||
        !(ids = api_prompt_ids(c->call.pm, &c->rq, &n, &e))) {
        api_reply_error(out, &e);
        goto done;
    }
    int32_t max_tokens = 0;
    if (api_max_tokens(c->call.pm, n, c->rq.max_tokens, &max_tokens) < 0) {
        oai_fail(&e, 400, "invalid_request_error", "messages", "context_length_exceeded",
                 "this model's context is %d tokens; the prompt takes %zu and max_tokens asks "
                 "for %d more", c->call.pm->n_ctx, n, c->rq.max_tokens > 0 ? c->rq.max_tokens : 0);
        api_reply_error(out, &e);
        goto done;
    }
    const struct job_params p = api_job_params(&c->rq, max_tokens, c);
    c->created = (int64_t)time(NULL);
    snprintf(c->id, sizeof(c->id), "%s-%016" PRIxFAST64, chat ? "chatcmpl" : "cmpl",
             atomic_fetch_add(&a->next_id, 1) ^ ((uint_fast64_t)c->created << 20));
    if (api_call_job(&c->call, ids, n, &p, chat, c->rq.enable_thinking) < 0 ||
        (c->rq.stream && api_call_stream(&c->call) < 0)) {
        api_reply_fail(out, 500, "server_error", "", "", "out of memory");
        goto done;
    }
    if (api_call_run(&c->call, hr, "text/event-stream", out) < 0) {
        api_reply_fail(out, 503, "server_error", "", "queue_full",
                       "the server is busy: too many requests queued; try again shortly");
    } else if (c->rq.stream) {
        /* the reply is the stream */
    } else if (c->call.sum.rc < 0) {
        api_reply_fail(out, 500, "server_error", "", "", strerror(-c->call.sum.rc));
    } else {
        struct oai_result res = call_result(c, c->call.sum.finish_reason);
        api_reply_json(out, 200, oai_response_json(&c->rq, &res));
    }
done:
    free(ids);
    api_call_unref(&c->call);
}

/* ---- the other routes ------------------------------------------------------------------------ */

static void handle_health(struct api *a, struct http_response *out) {
    pthread_mutex_lock(&a->mu);
    bool ready = a->ready, draining = a->draining;
    double p = a->progress;
    pthread_mutex_unlock(&a->mu);
    if (draining)
        api_reply_json(out, 503, str_printf("{\"status\":\"draining\"}"));
    else if (ready)
        api_reply_json(out, 200, str_printf("{\"status\":\"ok\"}"));
    else
        api_reply_json(out, 503, str_printf("{\"status\":\"loading\",\"progress\":%.2f}", p));
}

/* One model as /v1/models and /v1/stats list it: OpenAI's fields, then ours. */
static json_t *model_json(struct api *a, const struct pool_entry_info *in) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:b, s:i, s:I, s:I}",
                          "id", in->id, "object", "model", "created", (json_int_t)a->started,
                          "owned_by", "sniper", "state", pool_state_name(in->state),
                          "architecture", in->arch, "quantization", in->quant,
                          "size_bytes", (json_int_t)in->file_bytes,
                          "ram_bytes", (json_int_t)in->bytes, "n_ctx", (int)in->n_ctx,
                          "streamed", in->streamed, "in_use", in->in_use,
                          "loads", (json_int_t)in->loads, "unloads", (json_int_t)in->unloads);
    if (o && in->state == POOL_LOADING)
        json_object_set_new(o, "progress", json_real(in->progress));
    if (o && in->error[0])
        json_object_set_new(o, "error", json_string(in->error));
    if (o && in->last_used_s >= 0)
        json_object_set_new(o, "idle_s", json_real(floor(in->last_used_s * 10) / 10));
    return o;
}

/* The models, as a JSON array (NULL when memory ran out). */
static json_t *models_json(struct api *a) {
    json_t *arr = json_array();
    struct pool_entry_info in;
    for (int i = 0; arr && pool_entry(a->pool, i, &in); i++)
        json_array_append_new(arr, model_json(a, &in));
    return arr;
}

static void handle_models(struct api *a, struct http_response *out) {
    json_t *o = json_pack("{s:s, s:o*}", "object", "list", "data", models_json(a));
    api_reply_json(out, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

/* Figures for /v1/stats and /metrics: the daemon's, and the engine's of the most recently used
 * loaded model (model: "" when none is loaded). */
struct figures {
    char model[POOL_ID_MAX];
    int32_t n_ctx;
    size_t kv_bytes, kv_resident, rec_bytes;
    bool on_gpu;
    size_t gpu_weights, gpu_kv, gpu_act;
    struct engine_gpu_experts gpu_experts;
    uint64_t loads, unloads, pool_budget;
    struct scheduler_stats s;
    struct expert_cache_stats c;
    bool has_cache;
    double uptime;
    uint64_t rss, requests, errors;
    char transfer_kind[16], transfer_name[72]; /* the running upload/download ("" none) */
    uint64_t transfer_done, transfer_total;
};

static void gather(struct api *a, struct figures *f) {
    memset(f, 0, sizeof(*f));
    struct pool_model *pm = pool_acquire_recent(a->pool);
    if (pm) {
        snprintf(f->model, sizeof(f->model), "%s", pm->id);
        f->n_ctx = pm->n_ctx;
        f->kv_bytes = engine_kv_bytes(pm->e);
        f->kv_resident = engine_kv_resident_bytes(pm->e); /* approximate: read while it runs */
        f->rec_bytes = engine_rec_bytes(pm->e);
        f->on_gpu = engine_on_gpu(pm->e);
        engine_gpu_bytes(pm->e, &f->gpu_weights, &f->gpu_kv, &f->gpu_act);
        engine_gpu_experts(pm->e, &f->gpu_experts); /* approximate: read while it runs */
        scheduler_get_stats(pm->sched, &f->s);
        if (pm->cache) {
            expert_cache_get_stats(pm->cache, &f->c); /* approximate: read while it runs */
            f->has_cache = true;
        }
        pool_release(a->pool, pm);
    }
    pool_counts(a->pool, &f->loads, &f->unloads, &f->pool_budget);
    pthread_mutex_lock(&a->mu);
    f->requests = a->requests;
    f->errors = a->errors;
    snprintf(f->transfer_kind, sizeof(f->transfer_kind), "%s", a->transfer_kind);
    snprintf(f->transfer_name, sizeof(f->transfer_name), "%s", a->transfer_name);
    f->transfer_done = atomic_load(&a->transfer.done_bytes);
    f->transfer_total = atomic_load(&a->transfer.total_bytes);
    pthread_mutex_unlock(&a->mu);
    f->uptime = difftime(time(NULL), a->started);
    f->rss = procstat_rss_bytes();
}

static const char *slot_state_name(enum scheduler_slot_state st) {
    return st == SLOT_DECODE ? "decode" : st == SLOT_PREFILL ? "prefill" : "idle";
}

static double ratio(double a, double b) {
    return b > 0 ? a / b : 0.0;
}

/* The slots and the engine's steps as /v1/stats shows them: "slots":[...],"step":{...}. Returns
 * a malloc'd string, NULL when memory ran out. */
static char *stats_slots_json(const struct figures *f) {
    struct strbuf b = {0};
    char item[512];
    strbuf_puts(&b, "\"slots\":[");
    for (int i = 0; i < f->s.n_slots; i++) {
        const struct scheduler_slot_stats *l = &f->s.slot[i];
        int n = snprintf(item, sizeof(item),
                         "%s{\"id\":%d,\"state\":\"%s\",\"cached_tokens\":%d,\"prompt_tokens\":%d,"
                         "\"completion_tokens\":%d,\"decode_tokens_per_s\":%.2f,\"jobs\":%" PRIu64
                         "}", i ? "," : "", i, slot_state_name(l->state), l->cached,
                         l->prompt_tokens, l->completion_tokens, l->decode_tok_s, l->jobs);
        strbuf_putn(&b, item, (size_t)n);
    }
    const double steps = (double)f->s.steps;
    int n = snprintf(item, sizeof(item),
                     "],\"step\":{\"slots_active\":%d,\"steps\":%" PRIu64 ",\"batch_tokens\":%d,"
                     "\"batch_sequences\":%d,\"union_experts\":%.1f,\"avg_batch_tokens\":%.2f,"
                     "\"avg_batch_sequences\":%.2f,"
                     "\"avg_union_experts\":%.1f,\"bytes_read_per_step\":%.0f,"
                     "\"bytes_read_per_token\":%.0f}",
                     f->s.slots_active, f->s.steps, f->s.last_batch_tokens, f->s.last_batch_seqs,
                     f->s.last_union_experts, ratio((double)f->s.step_tokens, steps),
                     ratio((double)f->s.step_seqs, steps),
                     ratio((double)f->s.step_union_experts, (double)f->s.step_moe_layers),
                     ratio((double)f->c.bytes_read, steps),
                     ratio((double)f->c.bytes_read, (double)f->s.step_tokens));
    strbuf_putn(&b, item, (size_t)n);
    return strbuf_take(&b);
}

static void handle_stats(struct api *a, struct http_response *out) {
    struct figures f;
    gather(a, &f);
    uint64_t lookups = f.c.hits + f.c.misses;
    char *slots = stats_slots_json(&f);
    json_t *name = json_string(f.model), *models = models_json(a);
    char *name_json = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
    char *models_text = models ? json_dumps(models, JSON_COMPACT) : NULL;
    json_decref(name);
    json_decref(models);
    if (!slots || !name_json || !models_text) {
        free(slots);
        free(name_json);
        free(models_text);
        api_reply_fail(out, 500, "server_error", "", "", "out of memory");
        return;
    }
    api_reply_json(
        out, 200,
        str_printf("{\"model\":%s,\"replica\":\"%s\",\"uptime_s\":%.0f,\"requests\":%" PRIu64
                   ",\"errors\":%" PRIu64 ",\"completions\":%" PRIu64 ",\"cancelled\":%" PRIu64 ",\"queue\":%d,\"busy\":%s,"
                   "\"tokens\":{\"prompt\":%" PRIu64 ",\"cached\":%" PRIu64 ",\"completion\":%" PRIu64
                   "},\"prefill_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.2f,"
                   "\"rss_bytes\":%" PRIu64 ",\"ram_budget_bytes\":%" PRIu64 ",\"n_ctx\":%d,"
                   "\"kv_bytes\":%zu,\"kv_resident_bytes\":%zu,\"recurrent_state_bytes\":%zu,"
                   "\"experts\":{\"streaming\":%s,\"hits\":%" PRIu64 ",\"misses\":%" PRIu64
                   ",\"hit_rate\":%.4f,\"bytes_read\":%" PRIu64 ",\"read_MBps\":%.1f,"
                   "\"io_wait_s\":%.3f,\"prefetch_used\":%" PRIu64 ",\"prefetch_issued\":%" PRIu64
                   ",\"slots\":%d,\"slot_bytes\":%zu,\"bytes_per_token\":%.0f,\"eviction\":\"%s\"},"
                   "\"transfer\":{\"kind\":\"%s\",\"name\":\"%s\",\"done_bytes\":%" PRIu64
                   ",\"total_bytes\":%" PRIu64 "},\"gpu\":{\"on\":%s,\"weights_bytes\":%zu,"
                   "\"kv_bytes\":%zu,\"activation_bytes\":%zu,\"experts_in_place\":%s,"
                   "\"experts_in_vram\":%d,"
                   "\"experts_per_layer\":%d,\"vram_hits\":%" PRIu64 ",\"vram_misses\":%" PRIu64
                   ",\"vram_hit_rate\":%.4f,\"vram_promotions\":%" PRIu64 ",\"pairs_on_gpu\":%" PRIu64
                   ",\"pairs_on_cpu\":%" PRIu64 ",\"transit_experts\":%" PRIu64
                   ",\"transit_pairs\":%" PRIu64 "},\"parallel\":%d,%s,\"models\":%s,"
                   "\"model_loads\":%" PRIu64 ",\"model_unloads\":%" PRIu64 "}",
                   name_json, a->cfg.replica_id ? a->cfg.replica_id : "", f.uptime, f.requests,
                   f.errors, f.s.jobs_done, f.s.jobs_cancelled, f.s.queued,
                   f.s.busy ? "true" : "false", f.s.prompt_tokens, f.s.cached_tokens,
                   f.s.completion_tokens,
                   f.s.prefill_s > 0 ? (double)(f.s.prompt_tokens - f.s.cached_tokens) / f.s.prefill_s
                                     : 0.0,
                   f.s.decode_s > 0 ? (double)f.s.completion_tokens / f.s.decode_s : 0.0, f.rss,
                   f.pool_budget, f.n_ctx, f.kv_bytes, f.kv_resident, f.rec_bytes, f.has_cache ? "true" : "false",
                   f.c.hits,
                   f.c.misses, lookups ? (double)f.c.hits / (double)lookups : 0.0, f.c.bytes_read,
                   f.c.io_busy_s > 0 ? (double)f.c.bytes_read / f.c.io_busy_s / 1e6 : 0.0,
                   f.c.io_wait_s, f.c.prefetch_used, f.c.prefetch_issued, f.c.n_slots,
                   f.c.slot_bytes,
                   f.s.prompt_tokens + f.s.completion_tokens
                       ? (double)f.c.bytes_read /
                             (double)(f.s.prompt_tokens - f.s.cached_tokens + f.s.completion_tokens)
                       : 0.0,
                   f.c.eviction ? f.c.eviction : "",
                   f.transfer_kind, f.transfer_name, f.transfer_done, f.transfer_total,
                   f.on_gpu ? "true" : "false", f.gpu_weights, f.gpu_kv, f.gpu_act,
                   f.gpu_experts.in_place ? "true" : "false", f.gpu_experts.n_slots,
                   f.gpu_experts.n_expert, f.gpu_experts.hits,
                   f.gpu_experts.misses,
                   f.gpu_experts.hits + f.gpu_experts.misses
                       ? (double)f.gpu_experts.hits /
                             (double)(f.gpu_experts.hits + f.gpu_experts.misses)
                       : 0.0,
                   f.gpu_experts.promotions, f.gpu_experts.pairs_gpu, f.gpu_experts.pairs_cpu,
                   f.gpu_experts.transit_experts, f.gpu_experts.transit_pairs,
                   f.s.n_slots, slots, models_text, f.loads, f.unloads));
    free(slots);
    free(name_json);
    free(models_text);
}

/* A gauge with one sample per slot, labelled slot="i". */
static void metric_per_slot(struct strbuf *b, const char *name, const char *help,
                            const double *v, int n) {
    char line[256];
    int len = snprintf(line, sizeof(line), "# HELP sniper_%s %s\n# TYPE sniper_%s gauge\n", name,
                       help, name);
    strbuf_putn(b, line, (size_t)len);
    for (int i = 0; i < n; i++) {
        len = snprintf(line, sizeof(line), "sniper_%s{slot=\"%d\"} %.17g\n", name, i, v[i]);
        strbuf_putn(b, line, (size_t)len);
    }
}

/* s with Prometheus' label-value escapes (backslash, quote, newline), into out. */
static void label_escape(const char *s, char *out, size_t len) {
    size_t o = 0;
    for (; *s && o + 3 < len; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n')
            out[o++] = '\\';
        out[o++] = *s == '\n' ? 'n' : *s;
    }
    out[o] = '\0';
}

/* Per model: loaded (1) or not, and its loads and unloads. */
static void metric_models(struct api *a, struct strbuf *b) {
    static const char *const head[3] = {
        "# HELP sniper_model_loaded Whether the model is loaded (1) or not (0).\n"
        "# TYPE sniper_model_loaded gauge\n",
        "# HELP sniper_model_loads_total Times the model was loaded.\n"
        "# TYPE sniper_model_loads_total counter\n",
        "# HELP sniper_model_unloads_total Times the model was unloaded for another.\n"
        "# TYPE sniper_model_unloads_total counter\n"};
    const char *names[3] = {"model_loaded", "model_loads_total", "model_unloads_total"};
    char line[512], id[2 * POOL_ID_MAX];
    struct pool_entry_info in;
    for (int k = 0; k < 3; k++) {
        strbuf_puts(b, head[k]);
        for (int i = 0; pool_entry(a->pool, i, &in); i++) {
            uint64_t v = k == 0 ? in.state == POOL_READY : k == 1 ? in.loads : in.unloads;
            label_escape(in.id, id, sizeof(id));
            int n = snprintf(line, sizeof(line), "sniper_%s{model=\"%s\"} %" PRIu64 "\n",
                             names[k], id, v);
            strbuf_putn(b, line, (size_t)n);
        }
    }
}

static void handle_metrics(struct api *a, struct http_response *out) {
    struct figures f;
    gather(a, &f);
    struct strbuf b = {0};
    char line[256];
#define METRIC(name, type, help, fmt, value)                                                     \
    do {                                                                                         \
        int n_ = snprintf(line, sizeof(line), "# HELP sniper_" name " " help "\n# TYPE sniper_"  \
                          name " " type "\nsniper_" name " " fmt "\n", value);                  \
        strbuf_putn(&b, line, (size_t)n_);                                                       \
    } while (0)
    int rn = snprintf(line, sizeof(line),
                      "# HELP sniper_replica_info This replica's id (the label; always 1).\n"
                      "# TYPE sniper_replica_info gauge\nsniper_replica_info{replica=\"%s\"} 1\n",
                      a->cfg.replica_id ? a->cfg.replica_id : "");
    strbuf_putn(&b, line, (size_t)rn);
    METRIC("uptime_seconds", "gauge", "Seconds since start.", "%.0f", f.uptime);
    METRIC("requests_total", "counter", "HTTP requests served.", "%" PRIu64, f.requests);
    METRIC("errors_total", "counter", "Requests answered with an error.", "%" PRIu64, f.errors);
    METRIC("completions_total", "counter", "Generation jobs finished.", "%" PRIu64, f.s.jobs_done);
    METRIC("prompt_tokens_total", "counter", "Prompt tokens received.", "%" PRIu64, f.s.prompt_tokens);
    METRIC("cached_tokens_total", "counter", "Prompt tokens served from the prompt cache.",
           "%" PRIu64, f.s.cached_tokens);
    METRIC("completion_tokens_total", "counter", "Tokens generated.", "%" PRIu64,
           f.s.completion_tokens);
    METRIC("queue_length", "gauge", "Jobs waiting for the engine.", "%d", f.s.queued);
    METRIC("resident_bytes", "gauge", "Resident set size.", "%" PRIu64, f.rss);
    METRIC("expert_hits_total", "counter", "Expert lookups found in the cache.", "%" PRIu64, f.c.hits);
    METRIC("expert_misses_total", "counter", "Expert lookups read from disk.", "%" PRIu64,
           f.c.misses);
    METRIC("expert_read_bytes_total", "counter", "Bytes of experts read from disk.", "%" PRIu64,
           f.c.bytes_read);
    METRIC("expert_io_wait_seconds_total", "counter", "Seconds the engine waited for reads.",
           "%.3f", f.c.io_wait_s);
    METRIC("slots", "gauge", "Slots: requests decoded side by side.", "%d", f.s.n_slots);
    METRIC("slots_active", "gauge", "Slots with a request in the engine's step now.", "%d",
           f.s.slots_active);
    METRIC("steps_total", "counter", "Engine steps run.", "%" PRIu64, f.s.steps);
    METRIC("step_tokens_total", "counter", "Tokens the steps carried (all slots).", "%" PRIu64,
           f.s.step_tokens);
    METRIC("step_sequences_total", "counter", "Sequences the steps carried (summed).", "%" PRIu64,
           f.s.step_seqs);
    METRIC("step_union_experts_total", "counter",
           "Experts the steps' moe layers looked up (each step's union, summed).", "%" PRIu64,
           f.s.step_union_experts);
    METRIC("step_moe_layers_total", "counter", "Moe layers the steps ran.", "%" PRIu64,
           f.s.step_moe_layers);
    METRIC("gpu_on", "gauge", "1 where the model runs on the GPU.", "%d", f.on_gpu ? 1 : 0);
    METRIC("gpu_experts_in_vram", "gauge",
           "Routed experts a layer that VRAM holds (three levels; of gpu_experts_per_layer).", "%d",
           f.gpu_experts.n_slots);
    METRIC("gpu_experts_per_layer", "gauge", "Routed experts a layer has (on the GPU).", "%d",
           f.gpu_experts.n_expert);
    METRIC("gpu_expert_hits_total", "counter", "Routed pairs whose expert VRAM held.", "%" PRIu64,
           f.gpu_experts.hits);
    METRIC("gpu_expert_misses_total", "counter", "Routed pairs whose expert VRAM did not hold.",
           "%" PRIu64, f.gpu_experts.misses);
    METRIC("gpu_expert_promotions_total", "counter", "Experts copied into VRAM slots.", "%" PRIu64,
           f.gpu_experts.promotions);
    METRIC("gpu_pairs_on_gpu_total", "counter", "Routed pairs computed on the GPU.", "%" PRIu64,
           f.gpu_experts.pairs_gpu);
    METRIC("gpu_pairs_on_cpu_total", "counter", "Routed pairs computed on the CPU (three levels).",
           "%" PRIu64, f.gpu_experts.pairs_cpu);
    METRIC("gpu_transit_experts_total", "counter",
           "Missed experts uploaded for a batch's step (three levels).", "%" PRIu64,
           f.gpu_experts.transit_experts);
    METRIC("gpu_transit_pairs_total", "counter",
           "Routed pairs computed on the GPU through those uploads (part of pairs on the GPU).",
           "%" PRIu64, f.gpu_experts.transit_pairs);
#undef METRIC
    double v[3][ENGINE_MAX_SEQ];
    for (int i = 0; i < f.s.n_slots; i++) {
        v[0][i] = (double)f.s.slot[i].state;
        v[1][i] = (double)f.s.slot[i].completion_tokens;
        v[2][i] = f.s.slot[i].decode_tok_s;
    }
    metric_per_slot(&b, "slot_state", "Slot state: 0 idle, 1 reading its prompt, 2 decoding.",
                    v[0], f.s.n_slots);
    metric_per_slot(&b, "slot_completion_tokens",
                    "Tokens the slot's current or last request generated.", v[1], f.s.n_slots);
    metric_per_slot(&b, "slot_decode_tokens_per_second",
                    "Decode speed of the slot's current or last request.", v[2], f.s.n_slots);
    metric_models(a, &b);
    out->status = 200;
    out->content_type = "text/plain; version=0.0.4";
    out->body = strbuf_take(&b);
}

/* The web UI (web/index.html, compiled in). It needs no key: the page itself asks for one. */
static void handle_webui(struct http_response *out) {
    static const char *const headers[] = {
        "Content-Security-Policy", webui_index_html_csp, "X-Content-Type-Options", "nosniff",
        "Referrer-Policy", "no-referrer", "Cache-Control", "no-cache", NULL};
    out->body = malloc(webui_index_html_len + 1);
    if (!out->body) {
        api_reply_fail(out, 500, "server_error", "", "", "out of memory");
        return;
    }
    memcpy(out->body, webui_index_html, webui_index_html_len + 1);
    out->body_len = webui_index_html_len;
    out->status = 200;
    out->content_type = "text/html; charset=utf-8";
    out->headers = headers;
}

/* ---- routing --------------------------------------------------------------------------------- */

static void reply_draining(struct http_response *out) {
    api_reply_fail(out, 503, "server_error", "", "draining",
                   "this server is shutting down; send the request to another replica");
}

void api_handle(void *ctx, const struct http_request *rq, struct http_response *out) {
    struct api *a = ctx;
    static const struct {
        const char *path, *method;
    } routes[] = {{"/health", "GET"},           {"/v1/models", "GET"},
                  {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"},
                  {"/v1/stats", "GET"},         {"/metrics", "GET"},
                  {"/", "GET"},                 {"/index.html", "GET"}};
    int route = -1;
    bool path_known = false;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (strcmp(rq->path, routes[i].path) == 0) {
            path_known = true;
            if (strcmp(rq->method, routes[i].method) == 0)
                route = (int)i;
        }
    pthread_mutex_lock(&a->mu);
    a->requests++;
    bool ready = a->ready, draining = a->draining;
    pthread_mutex_unlock(&a->mu);
    bool context = !strcmp(rq->path, "/v1/context") || !strncmp(rq->path, "/v1/context/", 12);
    bool responses = api_responses_path(rq->path), ollama = api_ollama_path(rq->path);
    if (api_messages_path(rq->path)) {
        api_messages_handle(a, rq, out); /* Anthropic's Messages API, its own errors */
    } else if (api_tokenize_path(rq->path)) {
        api_tokenize_handle(a, rq, out);
    } else if (context || responses || ollama) {
        if (!authorized(a, rq->authorization))
            api_reply_fail(out, 401, "authentication_error", "", "invalid_api_key",
                           "missing or wrong API key: send Authorization: Bearer <key>");
        else if (!ready)
            api_reply_fail(out, 503, "server_error", "", "loading", "the model is still loading");
        else if (draining)
            reply_draining(out);
        else if (responses)
            api_responses_route(a, rq, out);
        else if (ollama)
            api_ollama_route(a, rq, out);
        else
            api_context_route(a, rq, out);
    } else if (route < 0) {
        if (path_known)
            api_reply_fail(out, 405, "invalid_request_error", "", "method_not_allowed",
                           "this path does not take that method");
        else
            api_reply_fail(out, 404, "invalid_request_error", "", "not_found", "no such endpoint");
    } else if (route == 0) {
        handle_health(a, out);
    } else if (route >= 6) {
        handle_webui(out);
    } else if (!authorized(a, rq->authorization)) {
        api_reply_fail(out, 401, "authentication_error", "", "invalid_api_key",
                       "missing or wrong API key: send Authorization: Bearer <key>");
    } else if (!ready) {
        api_reply_fail(out, 503, "server_error", "", "loading", "the model is still loading");
    } else if (route == 1) {
        handle_models(a, out);
    } else if ((route == 2 || route == 3) && draining) {
        reply_draining(out);
    } else if (route == 2 || route == 3) {
        handle_completion(a, rq, route == 2, out);
    } else if (route == 4) {
        handle_stats(a, out);
    } else {
        handle_metrics(a, out);
    }
    if (out->status >= 400) {
        pthread_mutex_lock(&a->mu);
        a->errors++;
        pthread_mutex_unlock(&a->mu);
    }
}
