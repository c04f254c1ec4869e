/* api_ollama.c - Ollama's API: /api/version, /api/tags, /api/ps, /api/show, /api/chat and
 * /api/generate. A chat's messages (a generate's system and prompt as two) become the daemon's
 * one request shape (struct oai_request), run through the model's scheduler like a chat
 * completion, and the content, thinking and tool calls come back as Ollama's objects: one, or a
 * stream of them as NDJSON lines ending with the "done" line and its counts. Errors are Ollama's
 * {"error": "..."}; what sniperd cannot do (pull, create, delete, embed) is a 400 that says so.
 * Invariant: a streamed line's text never splits a UTF-8 character. */
#include "api_ollama.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"
#include "clock.h"
#include "jsonw.h"
#include "strbuf.h"
#include "utf8.h"

#define OLLAMA_VERSION "0.12.0"     /* the API version these routes follow */
#define MAX_MESSAGES 4096
#define MAX_TEXT_BYTES (1u << 20)   /* one message's content */

/* ---- replies --------------------------------------------------------------------------------- */

static void reply_error(struct http_response *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply_error(struct http_response *out, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *o = json_pack("{s:s}", "error", msg);
    char *s = o ? jsonw_dumps(o, JSONW_COMPACT) : NULL;
    json_decref(o);
    api_reply_json(out, s ? status : 500, s ? s : strdup("{\"error\":\"out of memory\"}"));
}

/* An oai_error (from the shared checks: model lookup, prompt rendering) in Ollama's shape. */
static void reply_oai(struct http_response *out, const struct oai_error *e) {
    reply_error(out, e->status == 404 ? 404 : e->status, "%s", e->message);
}

static void reply_obj(struct http_response *out, json_t *o) {
    char *s = o ? jsonw_dumps(o, JSONW_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        reply_error(out, 500, "out of memory");
    else
        api_reply_json(out, 200, s);
}

/* ---- JSON helpers ---------------------------------------------------------------------------- */

/* A JSON string of s[0..n), invalid UTF-8 as U+FFFD (utf8.h); NULL on no memory. */
static json_t *jstr(const char *s, size_t n) { return utf8_json_string(s, n); }

/* obj[key] when present and not null, else NULL. */
static json_t *field(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

/* An RFC 3339 UTC time, as Ollama writes created_at and modified_at. */
static void iso_time(time_t t, char *buf, size_t len) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- models ---------------------------------------------------------------------------------- */

/* Ollama's "details" of a model. */
static json_t *details_json(const struct pool_entry_info *in) {
    return json_pack("{s:s,s:s,s:s,s:[s],s:s,s:s}", "parent_model", "", "format", "gguf",
                     "family", in->arch, "families", in->arch, "parameter_size", "",
                     "quantization_level", in->quant);
}

/* One model as /api/tags (ps: /api/ps) lists it; NULL on no memory. */
static json_t *model_json(struct api *a, const struct pool_entry_info *in, bool ps) {
    char when[32], digest[72];
    iso_time(a->started, when, sizeof(when));
    snprintf(digest, sizeof(digest), "%016llx", (unsigned long long)in->fingerprint);
    json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:s,s:o*}", "name", in->id, "model", in->id,
                          "modified_at", when, "size", (json_int_t)in->file_bytes, "digest",
                          digest, "details", details_json(in));
    if (o && ps) {
        json_object_set_new(o, "size_vram", json_integer(0));
        json_object_set_new(o, "context_length", json_integer(in->n_ctx));
        json_object_set_new(o, "expires_at", json_string("0001-01-01T00:00:00Z"));
        json_object_set_new(o, "size", json_integer((json_int_t)in->bytes));
    }
    return o;
}

static void handle_list(struct api *a, bool ps, struct http_response *out) {
    json_t *arr = json_array();
    struct pool_entry_info in;
    for (int i = 0; arr && pool_entry(a->pool, i, &in); i++) {
        if (in.state == POOL_FAILED || (ps && in.state != POOL_READY))
            continue;
        json_array_append_new(arr, model_json(a, &in, ps));
    }
    reply_obj(out, arr ? json_pack("{s:o}", "models", arr) : NULL);
}

/* The entry whose id is name (Ollama's ":latest" tag dropped), or the default for NULL/"" or
 * when the daemon serves one model whatever it is called. Returns its index or -1. */
static int find_model(struct api *a, const char *name, struct pool_entry_info *in) {
    char id[POOL_ID_MAX];
    snprintf(id, sizeof(id), "%s", name ? name : "");
    size_t n = strlen(id);
    if (n > 7 && strcmp(id + n - 7, ":latest") == 0)
        id[n - 7] = '\0';
    int def = pool_default(a->pool);
    for (int i = 0; pool_entry(a->pool, i, in); i++)
        if ((!id[0] || !a->by_name) ? i == def : strcmp(in->id, id) == 0)
            return i;
    return -1;
}

static json_t *body_object(const struct http_request *rq, struct http_response *out) {
    json_error_t je;
    json_t *root = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(root)) {
        reply_error(out, 400, "the body must be a JSON object%s%s", root ? "" : ": ",
                    root ? "" : je.text);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* The model a body names ("model", or the older "name"). */
static const char *body_model(const json_t *body) {
    const char *m = json_string_value(field(body, "model"));
    return m ? m : json_string_value(field(body, "name"));
}

static void handle_show(struct api *a, const struct http_request *rq, struct http_response *out) {
    json_t *body = body_object(rq, out);
    struct pool_entry_info in;
    if (!body)
        return;
    const char *name = body_model(body);
    if (find_model(a, name, &in) < 0) {
        reply_error(out, 404, "model '%.128s' not found", name ? name : "");
    } else {
        char when[32];
        iso_time(a->started, when, sizeof(when));
        json_t *caps = json_pack("[s,s]", "completion", "tools");
        if (caps && (!strcmp(in.arch, "qwen3moe") || !strcmp(in.arch, "gpt-oss") ||
                     !strcmp(in.arch, "qwen35moe") || !strcmp(in.arch, "qwen3")))
            json_array_append_new(caps, json_string("thinking"));
        reply_obj(out, json_pack("{s:s,s:s,s:s,s:s,s:o*,s:{s:s,s:I},s:o*,s:s}", "license", "",
                                 "modelfile", "", "parameters", "", "template", "", "details",
                                 details_json(&in), "model_info", "general.architecture", in.arch,
                                 "general.context_length", (json_int_t)in.n_ctx, "capabilities",
                                 caps, "modified_at", when));
    }
    json_decref(body);
}

/* ---- chat and generate: the request ---------------------------------------------------------- */

/* A message list being built (strings malloc'd: oai_request_free frees them). */
static struct chat_message *push(struct oai_request *rq, size_t *cap, const char *role) {
    if (rq->n_messages == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        struct chat_message *p = realloc(rq->messages, c * sizeof(*p));
        if (!p)
            return NULL;
        rq->messages = p;
        *cap = c;
    }
    struct chat_message *m = &rq->messages[rq->n_messages++];
    memset(m, 0, sizeof(*m));
    m->role = role;
    return m;
}

/* An assistant's tool_calls ([{"function": {"name", "arguments": {...}}}]) in the chat shape, ids
 * call_<i>_<k>; the last call's id goes to *last for the tool messages that answer it. */
static char *tool_calls_json(const json_t *calls, size_t i, char *err, size_t err_len,
                             char *last, size_t last_len) {
    json_t *arr = json_array(), *c;
    size_t k;
    json_array_foreach(calls, k, c) {
        const json_t *fn = json_object_get(c, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const json_t *args = json_object_get(fn, "arguments");
        if (!name || !(json_is_object(args) || json_is_string(args))) {
            snprintf(err, err_len, "messages[%zu].tool_calls[%zu] needs function.name and "
                     "function.arguments (an object)", i, k);
            json_decref(arr);
            return NULL;
        }
        char *a = json_is_string(args) ? strdup(json_string_value(args))
                                       : jsonw_dumps(args, JSONW_COMPACT);
        snprintf(last, last_len, "call_%zu_%zu", i, k);
        json_array_append_new(arr, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", last, "type",
                                             "function", "function", "name", name, "arguments",
                                             a ? a : "{}"));
        free(a);
    }
    char *s = jsonw_dumps(arr, JSONW_COMPACT);
    json_decref(arr);
    if (!s)
        snprintf(err, err_len, "out of memory");
    return s;
}

static char *dup_text(const json_t *v) {
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

/* messages (chat) into rq. Returns 0 or -1 with a message in err. */
static int parse_messages(const json_t *msgs, struct oai_request *rq, char *err, size_t err_len) {
    static const char *const keys[] = {"role", "content", "thinking", "tool_calls", "tool_name",
                                       "images", NULL};
    size_t cap = 0, i;
    json_t *m;
    char last_call[48] = "";
    if (!json_is_array(msgs) || json_array_size(msgs) == 0 ||
        json_array_size(msgs) > MAX_MESSAGES) {
        snprintf(err, err_len, "'messages' must be an array of 1 to %d messages", MAX_MESSAGES);
        return -1;
    }
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role")), *key;
        const json_t *content = field(m, "content"), *v;
        if (!json_is_object(m) || !role ||
            !oai_in_list(role,
                         (const char *const[]){"system", "user", "assistant", "tool", NULL})) {
            snprintf(err, err_len, "messages[%zu] needs a role: system, user, assistant or tool",
                     i);
            return -1;
        }
        json_object_foreach(m, key, v) {
            if (!oai_in_list(key, keys)) {
                snprintf(err, err_len, "unknown field 'messages[%zu].%.64s'", i, key);
                return -1;
            }
        }
        if (field(m, "images") && json_array_size(field(m, "images"))) {
            snprintf(err, err_len, "messages[%zu].images: images are not supported", i);
            return -1;
        }
        if ((content && !json_is_string(content)) ||
            (content && json_string_length(content) > MAX_TEXT_BYTES)) {
            snprintf(err, err_len, "messages[%zu].content must be a string of up to %u bytes", i,
                     MAX_TEXT_BYTES);
            return -1;
        }
        struct chat_message *cm = push(rq, &cap, strcmp(role, "system") == 0 ? "system"
                                                 : strcmp(role, "user") == 0   ? "user"
                                                 : strcmp(role, "tool") == 0   ? "tool"
                                                                               : "assistant");
        if (!cm) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        cm->content = content ? dup_text(content) : strdup("");
        if (strcmp(role, "assistant") == 0) {
            cm->reasoning_content = dup_text(field(m, "thinking"));
            const json_t *tc = field(m, "tool_calls");
            if (tc && json_array_size(tc) &&
                !(cm->tool_calls_json = tool_calls_json(tc, i, err, err_len, last_call,
                                                        sizeof(last_call))))
                return -1;
        }
        if (strcmp(role, "tool") == 0) {
            if (!last_call[0]) {
                snprintf(err, err_len, "messages[%zu] (tool) answers no earlier tool call", i);
                return -1;
            }
            cm->tool_call_id = strdup(last_call);
            cm->name = dup_text(field(m, "tool_name"));
        }
    }
    return 0;
}

/* options: the sampling settings (a name sniperd has no use for is refused, but for the resource
 * hints below, which it sizes itself). Returns 0 or -1 with err. */
static int parse_options(const json_t *o, struct oai_request *rq, char *err, size_t err_len) {
    static const char *const hints[] = {"num_ctx", "num_batch", "num_gpu", "main_gpu",
                                        "num_thread", "use_mmap", "numa", "low_vram",
                                        "num_keep", NULL};
    static const struct {
        const char *name;
        double lo, hi;
    } nums[] = {{"temperature", 0, 2},          {"top_p", 0, 1},
                {"min_p", 0, 1},                {"repeat_penalty", 0.01, 10},
                {"presence_penalty", -2, 2},    {"frequency_penalty", -2, 2},
                {"top_k", 0, 1e9},              {"seed", -9.2e18, 9.2e18},
                {"num_predict", -2, 1 << 24}};
    const char *key;
    json_t *v;
    if (!o)
        return 0;
    if (!json_is_object(o)) {
        snprintf(err, err_len, "'options' must be an object");
        return -1;
    }
    json_object_foreach((json_t *)o, key, v) {
        if (oai_in_list(key, hints) || json_is_null(v))
            continue;
        if (strcmp(key, "stop") == 0) {
            size_t j;
            json_t *s;
            if (!json_is_array(v) || json_array_size(v) > OAI_MAX_STOP) {
                snprintf(err, err_len, "'options.stop' must be an array of up to %d strings",
                         OAI_MAX_STOP);
                return -1;
            }
            json_array_foreach(v, j, s) {
                if (!json_is_string(s) || json_string_length(s) == 0 ||
                    json_string_length(s) > 256) {
                    snprintf(err, err_len, "'options.stop[%zu]' must be 1-256 bytes", j);
                    return -1;
                }
                rq->stop[rq->n_stop++] = strdup(json_string_value(s));
            }
            continue;
        }
        size_t k = 0;
        while (k < sizeof(nums) / sizeof(nums[0]) && strcmp(nums[k].name, key) != 0)
            k++;
        if (k == sizeof(nums) / sizeof(nums[0])) {
            snprintf(err, err_len, "option '%.64s' is not supported by sniperd", key);
            return -1;
        }
        double x = json_number_value(v);
        if (!json_is_number(v) || x < nums[k].lo || x > nums[k].hi) {
            snprintf(err, err_len, "'options.%s' must be a number in [%g, %g]", key, nums[k].lo,
                     nums[k].hi);
            return -1;
        }
        switch (k) {
        case 0: rq->temperature = (float)x; break;
        case 1: rq->top_p = (float)x; break;
        case 2: rq->min_p = (float)x; break;
        case 3: rq->repeat_penalty = (float)x; break;
        case 4: rq->presence_penalty = (float)x; break;
        case 5: rq->frequency_penalty = (float)x; break;
        case 6: rq->top_k = (int32_t)x; break;
        case 7: rq->has_seed = true, rq->seed = (uint64_t)(int64_t)x; break;
        default: rq->max_tokens = x > 0 ? (int32_t)x : -1; break;
        }
    }
    return 0;
}

/* format ("json" or a JSON schema of an object), think (bool or an effort), the options. */
static int parse_common(const json_t *b, enum chat_family fam, struct oai_request *rq, char *err,
                        size_t err_len) {
    const json_t *fmt = field(b, "format"), *think = field(b, "think"), *st = field(b, "stream");
    if (st && !json_is_boolean(st)) {
        snprintf(err, err_len, "'stream' must be a boolean");
        return -1;
    }
    rq->stream = !st || json_is_true(st); /* Ollama streams unless told not to */
    if (fmt) {
        const char *t = json_string_value(json_is_object(fmt) ? field(fmt, "type") : fmt);
        if (!t || (json_is_string(fmt) && strcmp(t, "json") != 0) ||
            (json_is_object(fmt) && strcmp(t, "object") != 0)) {
            snprintf(err, err_len, "'format' must be \"json\" or a JSON schema of an object");
            return -1;
        }
        rq->json_object = true;
        rq->enable_thinking = false;
    }
    if (think) {
        const char *lvl = json_string_value(think);
        if (!json_is_boolean(think) &&
            !(lvl && oai_in_list(lvl, (const char *const[]){"low", "medium", "high", NULL}))) {
            snprintf(err, err_len, "'think' must be true, false, \"low\", \"medium\" or \"high\"");
            return -1;
        }
        rq->enable_thinking = !json_is_false(think);
        if (lvl && fam == CHAT_HARMONY)
            rq->reasoning_effort = !strcmp(lvl, "low") ? "low" : !strcmp(lvl, "high") ? "high"
                                                                                        : "medium";
    }
    const json_t *tools = field(b, "tools");
    if (tools) {
        size_t j;
        json_t *t;
        if (!json_is_array(tools) || json_array_size(tools) > 128) {
            snprintf(err, err_len, "'tools' must be an array of up to 128 tools");
            return -1;
        }
        json_array_foreach(tools, j, t) {
            const char *type = json_string_value(json_object_get(t, "type"));
            if (!type || strcmp(type, "function") != 0 ||
                !json_is_string(json_object_get(json_object_get(t, "function"), "name"))) {
                snprintf(err, err_len, "tools[%zu] must be {\"type\": \"function\", "
                         "\"function\": {\"name\", ...}}", j);
                return -1;
            }
        }
        if (json_array_size(tools) && !(rq->tools_json = jsonw_dumps(tools, JSONW_COMPACT))) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
    }
    return parse_options(field(b, "options"), rq, err, err_len);
}

static const char *const CHAT_KEYS[] = {"model", "messages", "tools", "format", "options",
                                        "stream", "keep_alive", "think", NULL};
static const char *const GENERATE_KEYS[] = {"model", "prompt", "suffix", "system", "template",
                                            "raw", "format", "options", "stream", "keep_alive",
                                            "think", "context", "images", NULL};

/* The body into rq (chat: messages; generate: system and prompt). Returns 0 or -1 with err. */
static int parse_request(const json_t *b, bool chat, enum chat_family fam,
                         struct oai_request *rq, char *err, size_t err_len) {
    const char *key;
    json_t *v;
    memset(rq, 0, sizeof(*rq));
    rq->chat = true;
    rq->max_tokens = -1;
    rq->temperature = 0.8f; /* Ollama's defaults */
    rq->top_p = 0.9f;
    rq->top_k = 40;
    rq->repeat_penalty = 1.0f;
    rq->enable_thinking = true;
    json_object_foreach((json_t *)b, key, v) {
        if (!oai_in_list(key, chat ? CHAT_KEYS : GENERATE_KEYS)) {
            snprintf(err, err_len, "unknown field '%.64s'", key);
            return -1;
        }
    }
    if (parse_common(b, fam, rq, err, err_len) < 0)
        return -1;
    if (chat)
        return parse_messages(field(b, "messages"), rq, err, err_len);
    const json_t *prompt = field(b, "prompt"), *system = field(b, "system");
    if ((prompt && !json_is_string(prompt)) || (system && !json_is_string(system)) ||
        json_string_length(prompt) > MAX_TEXT_BYTES ||
        json_string_length(system) > MAX_TEXT_BYTES) {
        snprintf(err, err_len, "'prompt' and 'system' must be strings of up to %u bytes",
                 MAX_TEXT_BYTES);
        return -1;
    }
    static const char *const refused[] = {"suffix", "template", "context", "images", NULL};
    for (int i = 0; refused[i]; i++) {
        v = field(b, refused[i]);
        if (v && !(json_is_string(v) && json_string_length(v) == 0) &&
            !(json_is_array(v) && json_array_size(v) == 0)) {
            snprintf(err, err_len, "'%s' is not supported by sniperd", refused[i]);
            return -1;
        }
    }
    if (json_is_true(field(b, "raw"))) {
        rq->chat = false;
        rq->prompt = strdup(json_string_value(prompt) ? json_string_value(prompt) : "");
        return rq->prompt ? 0 : (snprintf(err, err_len, "out of memory"), -1);
    }
    size_t cap = 0;
    struct chat_message *m = system ? push(rq, &cap, "system") : NULL;
    if (m)
        m->content = strdup(json_string_value(system));
    m = push(rq, &cap, "user");
    if (m)
        m->content = strdup(prompt ? json_string_value(prompt) : "");
    return m ? 0 : (snprintf(err, err_len, "out of memory"), -1);
}

/* ---- one generation -------------------------------------------------------------------------- */

struct ocall {
    struct api_call call;      /* the job, its model and reply (api_call.c) */
    struct oai_request rq;
    bool chat;                 /* /api/chat (message objects) or /api/generate (response) */
    double start_s;
    struct strbuf content, thinking;
    size_t sent_content, sent_thinking; /* bytes of each streamed */
    json_t *calls;             /* [{"function": {"name", "arguments": {...}}}] */
};

/* The route's state, once the runner released its parts (api_call_ops.free). */
static void ocall_free(void *ctx) {
    struct ocall *c = ctx;
    oai_request_free(&c->rq);
    free(c->content.p);
    free(c->thinking.p);
    json_decref(c->calls);
    free(c);
}

/* One reply object: the text from [from, to) of content and thinking, the calls when given; the
 * done line adds the reason and counts. */
static json_t *reply_json(struct ocall *c, size_t c_from, size_t c_to, size_t t_from, size_t t_to,
                          json_t *calls, const char *done_reason) {
    char when[32];
    iso_time(time(NULL), when, sizeof(when));
    json_t *o = json_pack("{s:s,s:s}", "model", c->call.pm->id, "created_at", when);
    json_t *text = jstr(c->content.p ? c->content.p + c_from : "", c_to - c_from);
    json_t *thought = t_to > t_from ? jstr(c->thinking.p + t_from, t_to - t_from) : NULL;
    if (!o || !text) {
        json_decref(o), json_decref(text), json_decref(thought), json_decref(calls);
        return NULL;
    }
    if (c->chat) {
        json_t *m = json_pack("{s:s,s:o}", "role", "assistant", "content", text);
        if (m && thought)
            json_object_set_new(m, "thinking", thought), thought = NULL;
        if (m && calls)
            json_object_set_new(m, "tool_calls", calls), calls = NULL;
        json_object_set_new(o, "message", m);
    } else {
        json_object_set_new(o, "response", text);
        if (thought)
            json_object_set_new(o, "thinking", thought), thought = NULL;
    }
    json_decref(thought);
    json_decref(calls);
    json_object_set_new(o, "done", json_boolean(done_reason != NULL));
    if (done_reason) {
        const struct job_summary *s = &c->call.sum;
        json_int_t total = (json_int_t)((clock_now_s() - c->start_s) * 1e9);
        json_object_set_new(o, "done_reason", json_string(done_reason));
        json_object_set_new(o, "total_duration", json_integer(total));
        json_object_set_new(o, "load_duration", json_integer(0));
        json_object_set_new(o, "prompt_eval_count", json_integer(s->prompt_tokens));
        json_object_set_new(o, "prompt_eval_duration",
                            json_integer((json_int_t)(s->prefill_ms * 1e6)));
        json_object_set_new(o, "eval_count", json_integer(s->completion_tokens));
        json_object_set_new(o, "eval_duration", json_integer((json_int_t)(s->decode_ms * 1e6)));
    }
    return o;
}

static void send_line(struct ocall *c, json_t *o) {
    char *s = o ? jsonw_dumps(o, JSONW_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return;
    struct strbuf f = {0};
    strbuf_puts(&f, s);
    strbuf_puts(&f, "\n");
    if (!f.oom)
        http_stream_write(c->call.out, f.p, f.n);
    free(f.p);
    free(s);
}

/* Streams the text not sent yet (a UTF-8 character is never split until the end). */
static void flush_text(struct ocall *c, bool all) {
    size_t ce = c->content.n - (all ? 0 : utf8_tail(c->content.p, c->content.n));
    size_t te = c->thinking.n - (all ? 0 : utf8_tail(c->thinking.p, c->thinking.n));
    if (!c->call.out || (ce <= c->sent_content && te <= c->sent_thinking))
        return;
    send_line(c, reply_json(c, c->sent_content, ce, c->sent_thinking, te, NULL, NULL));
    c->sent_content = ce;
    c->sent_thinking = te;
}

static void on_event(void *ctx, const struct chat_event *ev) {
    struct ocall *c = ctx;
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        json_t *args = json_loads(ev->arguments, JSON_DECODE_ANY, NULL);
        if (!json_is_object(args)) {
            json_decref(args);
            args = json_object();
        }
        json_t *call = json_pack("{s:{s:s,s:o}}", "function", "name", ev->name, "arguments",
                                 args);
        if (c->call.out) {
            flush_text(c, true);
            json_t *one = json_array();
            json_array_append(one, call);
            send_line(c, reply_json(c, c->sent_content, c->sent_content, c->sent_thinking,
                                    c->sent_thinking, one, NULL));
        }
        json_array_append_new(c->calls, call);
        return;
    }
    strbuf_putn(ev->kind == CHAT_EVENT_CONTENT ? &c->content : &c->thinking, ev->text, ev->len);
    flush_text(c, false);
}

static void on_done(void *ctx, const struct job_summary *s) {
    struct ocall *c = ctx;
    api_call_finish(&c->call);
    c->call.sum = *s;
    if (c->call.out) {
        flush_text(c, true);
        if (s->rc < 0) {
            json_t *e = json_pack("{s:s}", "error", "generation failed");
            send_line(c, e);
        } else if (strcmp(s->finish_reason, "cancelled") != 0) {
            send_line(c, reply_json(c, c->content.n, c->content.n, 0, 0, NULL,
                                    strcmp(s->finish_reason, "length") == 0 ? "length"
                                                                            : "stop"));
        }
    }
}

static const struct api_call_ops ocall_ops = {NULL, NULL, on_event, on_done, ocall_free};

/* Makes the job (the prompt checked against the context). Returns 0 or -1 with e. */
static int make_job(struct ocall *c, struct oai_error *e) {
    size_t n = 0;
    int32_t *ids = api_prompt_ids(c->call.pm, &c->rq, &n, e);
    if (!ids)
        return -1;
    int32_t max_tokens = 0;
    if (api_max_tokens(c->call.pm, n, c->rq.max_tokens, &max_tokens) < 0) {
        free(ids);
        return oai_fail(e, 400, "invalid_request_error", "", "context_length_exceeded",
                        "this model's context is %d tokens; the prompt takes %zu and "
                        "num_predict asks for %d more", c->call.pm->n_ctx, n,
                        c->rq.max_tokens > 0 ? c->rq.max_tokens : 0);
    }
    const struct job_params p = api_job_params(&c->rq, max_tokens, c);
    int rc = api_call_job(&c->call, ids, n, &p, c->rq.chat, c->rq.enable_thinking);
    free(ids);
    return rc < 0 ? oai_fail(e, 500, "server_error", "", "", "out of memory") : 0;
}

static void run(struct ocall *c, const struct http_request *hr, struct http_response *out) {
    if (c->rq.stream && api_call_stream(&c->call) < 0) {
        reply_error(out, 500, "out of memory");
        return;
    }
    if (api_call_run(&c->call, hr, "application/x-ndjson", out) < 0) {
        reply_error(out, 503, "the server is busy: too many requests queued");
        return;
    }
    if (c->rq.stream)
        return;
    if (c->call.sum.rc < 0) {
        reply_error(out, 500, "generation failed: %s", strerror(-c->call.sum.rc));
        return;
    }
    json_t *calls = json_array_size(c->calls) ? json_deep_copy(c->calls) : NULL;
    reply_obj(out, reply_json(c, 0, c->content.n, 0, c->thinking.n, calls,
                              strcmp(c->call.sum.finish_reason, "length") == 0 ? "length"
                                                                               : "stop"));
}

static void handle_generate(struct api *a, const struct http_request *hr, bool chat,
                            struct http_response *out) {
    struct oai_error e = {0};
    char err[256] = "";
    json_t *body = body_object(hr, out);
    if (!body)
        return;
    struct ocall *c = calloc(1, sizeof(*c));
    if (!c) {
        json_decref(body);
        reply_error(out, 500, "out of memory");
        return;
    }
    api_call_init(&c->call, a, &ocall_ops, c);
    c->chat = chat;
    c->start_s = clock_now_s();
    c->calls = json_array();
    char model[POOL_ID_MAX];
    snprintf(model, sizeof(model), "%s", body_model(body) ? body_model(body) : "");
    size_t n = strlen(model);
    if (n > 7 && strcmp(model + n - 7, ":latest") == 0)
        model[n - 7] = '\0';
    if (!c->calls || !(c->call.pm = api_model(a, model, &e))) {
        if (!e.status)
            oai_fail(&e, 500, "server_error", "", "", "out of memory");
        reply_oai(out, &e);
    } else if (!chat && (!field(body, "prompt") || (json_is_string(field(body, "prompt")) &&
                                                     !json_string_length(field(body, "prompt"))))) {
        /* no prompt: Ollama's way to load a model; it is loaded now */
        reply_obj(out, json_pack("{s:s,s:s,s:s,s:b,s:s}", "model", c->call.pm->id, "created_at",
                                 "1970-01-01T00:00:00Z", "response", "", "done", 1, "done_reason",
                                 "load"));
    } else if (parse_request(body, chat, c->call.pm->family, &c->rq, err, sizeof(err)) < 0) {
        reply_error(out, 400, "%s", err);
    } else if (make_job(c, &e) < 0) {
        reply_oai(out, &e);
    } else {
        run(c, hr, out);
    }
    json_decref(body);
    api_call_unref(&c->call);
}

/* ---- routing --------------------------------------------------------------------------------- */

bool api_ollama_path(const char *path) { return strncmp(path, "/api/", 5) == 0; }

void api_ollama_route(struct api *a, const struct http_request *rq, struct http_response *out) {
    static const char *const refused[] = {"/api/pull", "/api/push", "/api/create", "/api/copy",
                                          "/api/delete", "/api/blobs", NULL};
    const char *p = rq->path;
    bool get = strcmp(rq->method, "GET") == 0, post = strcmp(rq->method, "POST") == 0;
    if (!strcmp(p, "/api/version") && get) {
        reply_obj(out, json_pack("{s:s}", "version", OLLAMA_VERSION));
    } else if ((!strcmp(p, "/api/tags") || !strcmp(p, "/api/ps")) && get) {
        handle_list(a, !strcmp(p, "/api/ps"), out);
    } else if (!strcmp(p, "/api/show") && post) {
        handle_show(a, rq, out);
    } else if ((!strcmp(p, "/api/chat") || !strcmp(p, "/api/generate")) && post) {
        handle_generate(a, rq, !strcmp(p, "/api/chat"), out);
    } else if (!strcmp(p, "/api/embed") || !strcmp(p, "/api/embeddings")) {
        reply_error(out, 400, "embeddings are not supported: sniperd's models are generative "
                              "(no embedding model is served)");
    } else if (oai_in_list(p, refused) || !strncmp(p, "/api/blobs/", 11)) {
        reply_error(out, 400, "not supported: sniperd does not manage models; put GGUF files in "
                              "--models-dir (or serve one with -m)");
    } else if (!strcmp(p, "/api/version") || !strcmp(p, "/api/tags") || !strcmp(p, "/api/ps") ||
               !strcmp(p, "/api/show") || !strcmp(p, "/api/chat") || !strcmp(p, "/api/generate")) {
        reply_error(out, 405, "this path does not take %.16s", rq->method);
    } else {
        reply_error(out, 404, "no such endpoint");
    }
}
