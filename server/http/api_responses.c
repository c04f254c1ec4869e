/* api_responses.c - OpenAI's Responses API: POST /v1/responses, GET and DELETE /v1/responses/{id}.
 * A request's input items (with the stored conversation of previous_response_id before them)
 * become the daemon's one request shape (struct oai_request: chat messages, tools, sampling), run
 * through the model's scheduler like a chat completion, and the generated content, reasoning and
 * tool calls come back as output items: whole, or as the Responses event stream.
 * Invariants: output items are appended in the order the model wrote them, and at most one (the
 * last) is open; a stored response's items are its whole conversation, so the next turn renders
 * the same prefix and the prompt cache prefills only the new input. */
#include "api_responses.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"
#include "jsonw.h"
#include "response_store.h"
#include "strbuf.h"
#include "utf8.h"

#define INVALID "invalid_request_error"
#define MAX_ITEMS 4096               /* input items, with the previous response's */
#define MAX_TEXT_BYTES (1u << 20)    /* one item's text */
#define MAX_TOOLS 128
#define STORE_MAX_COUNT 1000         /* stored responses: how many, their bytes, how long */
#define STORE_MAX_BYTES (64u << 20)
#define STORE_TTL_S 3600.0

/* ---- the store (one per process: one api per daemon) ----------------------------------------- */

static struct response_store *g_store;
static pthread_once_t g_store_once = PTHREAD_ONCE_INIT;

static void store_init(void) {
    g_store = response_store_new(STORE_MAX_COUNT, STORE_MAX_BYTES, STORE_TTL_S);
}

static struct response_store *store(void) {
    pthread_once(&g_store_once, store_init);
    return g_store;
}

/* ---- JSON helpers ---------------------------------------------------------------------------- */

/* A JSON string of s[0..n), invalid UTF-8 as U+FFFD (utf8.h); NULL on no memory. */
static json_t *jstr(const char *s, size_t n) { return utf8_json_string(s, n); }

static json_t *jstr0(const char *s) { return s ? jstr(s, strlen(s)) : json_string(""); }

/* obj[key] = v (stolen); a NULL v or a failure clears *ok. */
static void put(json_t *obj, const char *key, json_t *v, bool *ok) {
    if (!v || json_object_set_new(obj, key, v) < 0)
        *ok = false;
}

static void append(json_t *arr, json_t *v, bool *ok) {
    if (!v || json_array_append_new(arr, v) < 0)
        *ok = false;
}

/* A copy of obj[key], or JSON null when absent. */
static json_t *echo(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v ? json_deep_copy(v) : json_null();
}

/* ---- the request ----------------------------------------------------------------------------- */

/* What a request asks beyond the internal shape. */
struct rreq {
    json_t *body;             /* the request as sent (fields echoed in the response) */
    json_t *items;            /* the conversation's items: the previous response's, then input */
    const char *forced;       /* the function tool_choice forces (in body), or NULL */
    const char *effort;       /* reasoning.effort as sent (in body), or NULL */
    bool summary;             /* reasoning.summary asked for: the reasoning is its summary too */
    bool store;
    bool parallel_calls;      /* parallel_tool_calls (false: the first call only) */
    const char *previous_id;  /* in body, or NULL */
};

static int bad_type(struct oai_error *e, const char *param, const char *want) {
    return oai_fail(e, 400, INVALID, param, "invalid_type", "'%s' must be %s", param, want);
}

/* Every key of obj is known; another is refused with its name (prefix + key). */
static int check_keys(struct oai_error *e, const json_t *obj, const char *prefix,
                      const char *const *known) {
    return oai_check_keys(e, obj, prefix, known, NULL);
}

/* obj[key] when present and not null, else NULL. */
static json_t *field(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static int get_number(struct oai_error *e, const json_t *body, const char *key, double lo,
                      double hi, float *out) {
    json_t *v = field(body, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return bad_type(e, key, "a number");
    double x = json_number_value(v);
    if (x < lo || x > hi)
        return oai_fail(e, 400, INVALID, key, "invalid_value", "'%s' is %g, outside [%g, %g]",
                        key, x, lo, hi);
    *out = (float)x;
    return 0;
}

static int get_string(struct oai_error *e, const json_t *body, const char *key, const char **out) {
    json_t *v = field(body, key);
    *out = NULL;
    if (v && !json_is_string(v))
        return bad_type(e, key, "a string");
    *out = v ? json_string_value(v) : NULL;
    return 0;
}

static int get_bool(struct oai_error *e, const json_t *body, const char *key, bool *out) {
    json_t *v = field(body, key);
    if (v && !json_is_boolean(v))
        return bad_type(e, key, "a boolean");
    if (v)
        *out = json_is_true(v);
    return 0;
}

static char *dup_or_fail(struct oai_error *e, const char *s) {
    char *d = strdup(s);
    if (!d)
        oai_fail(e, 500, "server_error", "", "", "out of memory");
    return d;
}

/* Fields the API defines that sniperd accepts as they are (identifiers, hints), or checks. */
static const char *const KEYS[] = {
    "model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "temperature",
    "top_p", "text", "reasoning", "stream", "stream_options", "store", "previous_response_id",
    "metadata", "parallel_tool_calls", "truncation", "user", "include", "prompt_cache_key",
    "safety_identifier", "service_tier", "background", "max_tool_calls", "top_logprobs",
    "conversation", "prompt", "seed", "client_metadata", NULL};

/* Fields sniperd refuses unless null or their default. */
static int check_unsupported(struct oai_error *e, const json_t *body) {
    static const char *const never[] = {"conversation", "prompt", NULL};
    for (int i = 0; never[i]; i++)
        if (field(body, never[i]))
            return oai_fail(e, 400, INVALID, never[i], "unsupported_parameter",
                            "unsupported parameter: '%s' is not supported by sniperd "
                            "(send the items in 'input', or 'previous_response_id')", never[i]);
    bool background = false;
    if (get_bool(e, body, "background", &background) < 0)
        return -1;
    if (background)
        return oai_fail(e, 400, INVALID, "background", "unsupported_parameter",
                        "'background': true is not supported by sniperd");
    json_t *v = field(body, "top_logprobs");
    if (v && !(json_is_integer(v) && json_integer_value(v) == 0))
        return oai_fail(e, 400, INVALID, "top_logprobs", "unsupported_parameter",
                        "'top_logprobs' is not supported on /v1/responses (use "
                        "/v1/chat/completions)");
    const char *s;
    if (get_string(e, body, "truncation", &s) < 0)
        return -1;
    if (s && strcmp(s, "disabled") != 0)
        return oai_fail(e, 400, INVALID, "truncation", "unsupported_value",
                        "'truncation' must be \"disabled\": a conversation longer than the "
                        "context is refused, never cut");
    if (get_string(e, body, "service_tier", &s) < 0)
        return -1;
    if (s && strcmp(s, "auto") != 0 && strcmp(s, "default") != 0)
        return oai_fail(e, 400, INVALID, "service_tier", "unsupported_value",
                        "'service_tier' must be \"auto\" or \"default\"");
    v = field(body, "client_metadata"); /* Codex's bookkeeping for its own logs */
    if (v && !json_is_object(v))
        return bad_type(e, "client_metadata", "an object");
    v = field(body, "max_tool_calls");
    if (v && !json_is_integer(v))
        return bad_type(e, "max_tool_calls", "an integer");
    static const char *const ids[] = {"user", "prompt_cache_key", "safety_identifier", NULL};
    for (int i = 0; ids[i]; i++)
        if (get_string(e, body, ids[i], &s) < 0)
            return -1;
    return 0;
}

/* include: only "reasoning.encrypted_content" (there is none: reasoning comes back as text). */
static int check_include(struct oai_error *e, const json_t *body) {
    json_t *v = field(body, "include"), *s;
    size_t i;
    if (!v)
        return 0;
    if (!json_is_array(v))
        return bad_type(e, "include", "an array of strings");
    json_array_foreach(v, i, s) {
        if (!json_is_string(s))
            return bad_type(e, "include", "an array of strings");
        if (strcmp(json_string_value(s), "reasoning.encrypted_content") != 0)
            return oai_fail(e, 400, INVALID, "include", "unsupported_value",
                            "include '%.64s' is not supported (only "
                            "\"reasoning.encrypted_content\", which sniperd leaves out: its "
                            "reasoning items carry their text)", json_string_value(s));
    }
    return 0;
}

/* metadata: up to 16 string values (kept with the response). */
static int check_metadata(struct oai_error *e, const json_t *body) {
    json_t *v = field(body, "metadata"), *x;
    const char *k;
    if (!v)
        return 0;
    if (!json_is_object(v) || json_object_size(v) > 16)
        return bad_type(e, "metadata", "an object of up to 16 strings");
    json_object_foreach(v, k, x) {
        if (!json_is_string(x) || strlen(k) > 64 || json_string_length(x) > 512)
            return bad_type(e, "metadata", "an object of up to 16 strings (keys up to 64 "
                                           "bytes, values up to 512)");
    }
    return 0;
}

/* tools: function tools only, re-shaped as chat tools ({"type","function":{...}}) into rq. */
static int parse_tools(struct oai_error *e, const json_t *body, struct oai_request *rq) {
    static const char *const keys[] = {"type", "name", "description", "parameters", "strict",
                                       NULL};
    json_t *v = field(body, "tools"), *t;
    size_t j;
    char param[64];
    if (!v)
        return 0;
    if (!json_is_array(v))
        return bad_type(e, "tools", "an array");
    if (json_array_size(v) > MAX_TOOLS)
        return oai_fail(e, 400, INVALID, "tools", "array_above_max_length",
                        "'tools' has %zu tools, above the limit of %d", json_array_size(v),
                        MAX_TOOLS);
    if (json_array_size(v) == 0)
        return 0;
    json_t *chat = json_array();
    bool ok = chat != NULL;
    json_array_foreach(v, j, t) {
        snprintf(param, sizeof(param), "tools[%zu].type", j);
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t) || !type) {
            json_decref(chat);
            return bad_type(e, param, "a string (tools are objects with a type)");
        }
        if (strcmp(type, "function") != 0) {
            json_decref(chat);
            return oai_fail(e, 400, INVALID, param, "unsupported_value",
                            "tool type '%.64s' is not supported by sniperd (function tools "
                            "only)", type);
        }
        snprintf(param, sizeof(param), "tools[%zu].", j);
        const char *name = json_string_value(json_object_get(t, "name"));
        const json_t *params = field(t, "parameters"), *desc = field(t, "description");
        if (check_keys(e, t, param, keys) < 0 || !name || !oai_valid_name(name, 64) ||
            (params && !json_is_object(params)) || (desc && !json_is_string(desc))) {
            json_decref(chat);
            if (e->status)
                return -1;
            return oai_fail(e, 400, INVALID, param, "invalid_value",
                            "'%sname' must be 1-64 characters of a-z, A-Z, 0-9, _ and -, "
                            "'description' a string, 'parameters' an object", param);
        }
        json_t *fn = json_pack("{s:s}", "name", name);
        if (fn && desc)
            put(fn, "description", json_deep_copy(desc), &ok);
        if (fn && params)
            put(fn, "parameters", json_deep_copy(params), &ok);
        append(chat, fn ? json_pack("{s:s,s:o}", "type", "function", "function", fn) : NULL, &ok);
    }
    rq->tools_json = ok ? jsonw_dumps(chat, JSONW_COMPACT) : NULL;
    json_decref(chat);
    return rq->tools_json ? 0 : oai_fail(e, 500, "server_error", "", "", "out of memory");
}

/* The function named name in tools, or NULL. */
static const json_t *find_tool(const json_t *tools, const char *name) {
    size_t j;
    json_t *t;
    json_array_foreach(tools, j, t) {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n && strcmp(n, name) == 0)
            return t;
    }
    return NULL;
}

/* tool_choice: "none", "auto", "required" or {"type": "function", "name": ...}. A forced call
 * (required with one tool, or a named function) goes to r->forced. */
static int parse_tool_choice(struct oai_error *e, const json_t *body, struct rreq *r,
                             struct oai_request *rq) {
    json_t *v = field(body, "tool_choice"), *tools = field(body, "tools");
    size_t n_tools = json_is_array(tools) ? json_array_size(tools) : 0;
    if (!v)
        return 0;
    const char *choice = json_string_value(v);
    if (json_is_object(v)) {
        static const char *const keys[] = {"type", "name", NULL};
        const char *type = json_string_value(json_object_get(v, "type"));
        if (!type || strcmp(type, "function") != 0)
            return oai_fail(e, 400, INVALID, "tool_choice.type", "unsupported_value",
                            "tool_choice type '%.64s' is not supported (\"function\" only)",
                            type ? type : "");
        if (check_keys(e, v, "tool_choice.", keys) < 0)
            return -1;
        r->forced = json_string_value(json_object_get(v, "name"));
        if (!r->forced || !n_tools || !find_tool(tools, r->forced))
            return oai_fail(e, 400, INVALID, "tool_choice.name", "invalid_value",
                            "tool_choice names '%.64s', which is not a function in 'tools'",
                            r->forced ? r->forced : "");
        choice = "required";
    } else if (!choice || (strcmp(choice, "none") != 0 && strcmp(choice, "auto") != 0 &&
                           strcmp(choice, "required") != 0)) {
        return oai_fail(e, 400, INVALID, "tool_choice", "invalid_value",
                        "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                        "{\"type\": \"function\", \"name\": ...}");
    } else if (strcmp(choice, "required") == 0) {
        if (n_tools != 1)
            return oai_fail(e, 400, INVALID, "tool_choice", "unsupported_value",
                            "tool_choice \"required\" needs exactly one function in 'tools' "
                            "(there are %zu): name the one to call instead", n_tools);
        r->forced = json_string_value(json_object_get(json_array_get(tools, 0), "name"));
    }
    rq->tool_choice = dup_or_fail(e, strcmp(choice, "none") == 0 ? "none" : "auto");
    return rq->tool_choice ? 0 : -1;
}

/* text: {"format": {"type": "text" | "json_object" | "json_schema", ...}, "verbosity"}. Both
 * JSON formats constrain the reply to one JSON object (json_grammar.c); a json_schema's schema
 * must describe an object (its inner constraints are not enforced). */
static int parse_text(struct oai_error *e, const json_t *body, struct oai_request *rq) {
    static const char *const keys[] = {"format", "verbosity", NULL};
    static const char *const schema_keys[] = {"type", "name", "schema", "strict", "description",
                                              NULL};
    json_t *v = field(body, "text");
    if (!v)
        return 0;
    if (!json_is_object(v))
        return bad_type(e, "text", "an object");
    if (check_keys(e, v, "text.", keys) < 0)
        return -1;
    const char *verbosity;
    if (get_string(e, v, "verbosity", &verbosity) < 0)
        return -1;
    if (verbosity && strcmp(verbosity, "medium") != 0)
        return oai_fail(e, 400, INVALID, "text.verbosity", "unsupported_value",
                        "'text.verbosity' must be \"medium\" (sniperd cannot steer length)");
    json_t *f = field(v, "format");
    if (!f)
        return 0;
    const char *type = json_string_value(json_object_get(f, "type"));
    if (!json_is_object(f) || !type)
        return bad_type(e, "text.format", "an object with a type");
    if (strcmp(type, "text") == 0)
        return check_keys(e, f, "text.format.", (const char *const[]){"type", NULL});
    if (strcmp(type, "json_object") == 0) {
        rq->json_object = true;
        return check_keys(e, f, "text.format.", (const char *const[]){"type", NULL});
    }
    if (strcmp(type, "json_schema") != 0)
        return oai_fail(e, 400, INVALID, "text.format.type", "invalid_value",
                        "text.format type '%.64s' is unknown (text, json_object or json_schema)",
                        type);
    if (check_keys(e, f, "text.format.", schema_keys) < 0)
        return -1;
    const json_t *schema = json_object_get(f, "schema");
    if (!json_is_string(json_object_get(f, "name")) || !json_is_object(schema))
        return oai_fail(e, 400, INVALID, "text.format", "missing_required_parameter",
                        "a json_schema format needs 'name' (a string) and 'schema' (an object)");
    const char *st = json_string_value(json_object_get(schema, "type"));
    if (!st || strcmp(st, "object") != 0)
        return oai_fail(e, 400, INVALID, "text.format.schema.type", "unsupported_value",
                        "sniperd's JSON output is one object: the schema's type must be "
                        "\"object\"");
    rq->json_object = true;
    return 0;
}

/* reasoning: {"effort", "summary", "generate_summary"}. gpt-oss writes the effort into its system
 * message; a thinking model (Qwen3) thinks unless the effort is "minimal" or "none". */
static int parse_reasoning(struct oai_error *e, const json_t *body, struct rreq *r,
                           struct oai_request *rq, enum chat_family fam) {
    static const char *const keys[] = {"effort", "summary", "generate_summary", NULL};
    static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", NULL};
    static const char *const summaries[] = {"auto", "concise", "detailed", NULL};
    json_t *v = field(body, "reasoning");
    if (!v)
        return 0;
    if (!json_is_object(v))
        return bad_type(e, "reasoning", "an object");
    if (check_keys(e, v, "reasoning.", keys) < 0)
        return -1;
    const char *effort, *summary, *gen;
    if (get_string(e, v, "effort", &effort) < 0 || get_string(e, v, "summary", &summary) < 0 ||
        get_string(e, v, "generate_summary", &gen) < 0)
        return -1;
    if (effort && !oai_in_list(effort, efforts))
        return oai_fail(e, 400, INVALID, "reasoning.effort", "invalid_value",
                        "'reasoning.effort' must be none, minimal, low, medium or high");
    if ((summary && !oai_in_list(summary, summaries)) || (gen && !oai_in_list(gen, summaries)))
        return oai_fail(e, 400, INVALID, "reasoning.summary", "invalid_value",
                        "'reasoning.summary' must be auto, concise or detailed");
    r->effort = effort;
    r->summary = summary || gen;
    if (effort && (!strcmp(effort, "none") || !strcmp(effort, "minimal")))
        rq->enable_thinking = false;
    if (effort && fam == CHAT_HARMONY)
        rq->reasoning_effort = !strcmp(effort, "high") ? "high" : !strcmp(effort, "medium")
                                                                      ? "medium" : "low";
    return 0;
}

/* The scalar fields: model, stream, store, previous_response_id, limits and sampling. */
static int parse_scalars(struct oai_error *e, const json_t *body, struct rreq *r,
                         struct oai_request *rq) {
    const char *model, *instructions;
    r->store = true;
    r->parallel_calls = true;
    if (get_string(e, body, "model", &model) < 0 || get_bool(e, body, "stream", &rq->stream) < 0 ||
        get_bool(e, body, "store", &r->store) < 0 ||
        get_bool(e, body, "parallel_tool_calls", &r->parallel_calls) < 0 ||
        get_string(e, body, "previous_response_id", &r->previous_id) < 0 ||
        get_string(e, body, "instructions", &instructions) < 0 ||
        get_number(e, body, "temperature", 0, 2, &rq->temperature) < 0 ||
        get_number(e, body, "top_p", 0, 1, &rq->top_p) < 0)
        return -1;
    if (model && !(rq->model = dup_or_fail(e, model)))
        return -1;
    if (instructions && strlen(instructions) > MAX_TEXT_BYTES)
        return oai_fail(e, 400, INVALID, "instructions", "string_above_max_length",
                        "'instructions' is above the limit of %u bytes", MAX_TEXT_BYTES);
    json_t *so = field(body, "stream_options");
    if (so && (!rq->stream || !json_is_object(so) ||
               check_keys(e, so, "stream_options.", (const char *const[]){"include_obfuscation",
                                                                          NULL}) < 0))
        return e->status ? -1 : oai_fail(e, 400, INVALID, "stream_options", "invalid_value",
                                         "'stream_options' is an object, only with 'stream'");
    json_t *m = field(body, "max_output_tokens");
    if (m && (!json_is_integer(m) || json_integer_value(m) < 1 ||
              json_integer_value(m) > (1 << 24)))
        return bad_type(e, "max_output_tokens", "an integer from 1 to 16777216");
    rq->max_tokens = m ? (int32_t)json_integer_value(m) : -1;
    json_t *seed = field(body, "seed"); /* an extension, as in chat completions */
    if (seed && !json_is_integer(seed))
        return bad_type(e, "seed", "an integer");
    rq->has_seed = seed != NULL;
    rq->seed = seed ? (uint64_t)json_integer_value(seed) : 0;
    return 0;
}

/* ---- items into chat messages ---------------------------------------------------------------- */

/* A conversation being turned into chat messages. */
struct conv {
    struct oai_error *e;
    struct chat_message *msgs;  /* their strings malloc'd (oai_request_free frees them) */
    size_t n, cap;
    json_t *calls;              /* tool_calls of the last message when it is an assistant's */
    json_t *names;              /* call_id -> the function's name */
    struct strbuf reasoning;    /* reasoning items not yet given to an assistant message */
};

/* A new message (role static) at the end, or NULL with e. */
static struct chat_message *conv_push(struct conv *cv, const char *role) {
    if (cv->n == cv->cap) {
        size_t cap = cv->cap ? 2 * cv->cap : 16;
        struct chat_message *p = realloc(cv->msgs, cap * sizeof(*p));
        if (!p) {
            oai_fail(cv->e, 500, "server_error", "", "", "out of memory");
            return NULL;
        }
        cv->msgs = p;
        cv->cap = cap;
    }
    struct chat_message *m = &cv->msgs[cv->n++];
    memset(m, 0, sizeof(*m));
    m->role = role;
    return m;
}

/* Serialises the tool calls gathered for the last (assistant) message into it. */
static int conv_flush_calls(struct conv *cv) {
    if (!cv->calls)
        return 0;
    char *s = json_array_size(cv->calls) ? jsonw_dumps(cv->calls, JSONW_COMPACT) : NULL;
    bool empty = json_array_size(cv->calls) == 0;
    json_decref(cv->calls);
    cv->calls = NULL;
    if (empty)
        return 0;
    if (!s)
        return oai_fail(cv->e, 500, "server_error", "", "", "out of memory");
    cv->msgs[cv->n - 1].tool_calls_json = s;
    return 0;
}

/* A new assistant message carrying the pending reasoning. */
static struct chat_message *conv_assistant(struct conv *cv) {
    if (conv_flush_calls(cv) < 0)
        return NULL;
    struct chat_message *m = conv_push(cv, "assistant");
    if (m && cv->reasoning.n) {
        m->reasoning_content = strbuf_take(&cv->reasoning);
        if (!m->reasoning_content)
            return oai_fail(cv->e, 500, "server_error", "", "", "out of memory"), NULL;
    }
    return m;
}

/* The text of content (a string or an array of text parts of the given types) into *out
 * (malloc'd); param names it in errors. */
static int item_text(struct conv *cv, const json_t *content, const char *param,
                     const char *const *types, char **out) {
    struct strbuf b = {0};
    size_t j;
    json_t *part;
    *out = NULL;
    if (json_is_string(content)) {
        strbuf_putn(&b, json_string_value(content), json_string_length(content));
    } else if (json_is_array(content)) {
        json_array_foreach(content, j, part) {
            const char *type = json_string_value(json_object_get(part, "type"));
            const json_t *text = json_object_get(part, "text");
            if (type && strcmp(type, "refusal") == 0)
                text = json_object_get(part, "refusal");
            if (type && !oai_in_list(type, types) && strcmp(type, "refusal") != 0) {
                free(b.p);
                return oai_fail(cv->e, 400, INVALID, param, "unsupported_value",
                                "content part type '%.64s' in '%s[%zu]' is not supported "
                                "(text only)", type, param, j);
            }
            if (!type || !json_is_string(text)) {
                free(b.p);
                return oai_fail(cv->e, 400, INVALID, param, "invalid_value",
                                "'%s[%zu]' must be a text part {\"type\", \"text\"}", param, j);
            }
            strbuf_putn(&b, json_string_value(text), json_string_length(text));
        }
    } else {
        return bad_type(cv->e, param, "a string or an array of text parts");
    }
    if (b.n > MAX_TEXT_BYTES) {
        free(b.p);
        return oai_fail(cv->e, 400, INVALID, param, "string_above_max_length",
                        "'%s' is %zu bytes, above the limit of %u", param, b.n, MAX_TEXT_BYTES);
    }
    *out = strbuf_take(&b);
    return *out ? 0 : oai_fail(cv->e, 500, "server_error", "", "", "out of memory");
}

static int conv_message(struct conv *cv, const json_t *it, const char *path) {
    static const char *const keys[] = {"type", "role", "content", "id", "status", NULL};
    static const char *const in_types[] = {"input_text", "output_text", "text", NULL};
    char param[64];
    const char *role = json_string_value(json_object_get(it, "role"));
    snprintf(param, sizeof(param), "%s.", path);
    if (check_keys(cv->e, it, param, keys) < 0)
        return -1;
    snprintf(param, sizeof(param), "%s.role", path);
    if (!role || !(oai_in_list(role, (const char *const[]){"user", "assistant", "system",
                                                        "developer", NULL})))
        return oai_fail(cv->e, 400, INVALID, param, "invalid_value",
                        "'%s' must be user, assistant, system or developer", param);
    snprintf(param, sizeof(param), "%s.content", path);
    char *text = NULL;
    if (item_text(cv, json_object_get(it, "content"), param, in_types, &text) < 0)
        return -1;
    struct chat_message *m;
    if (strcmp(role, "assistant") == 0)
        m = conv_assistant(cv);
    else if (conv_flush_calls(cv) < 0)
        m = NULL;
    else
        m = conv_push(cv, strcmp(role, "user") == 0 ? "user" : "system");
    if (!m) {
        free(text);
        return -1;
    }
    m->content = text;
    if (strcmp(role, "assistant") == 0 && !(cv->calls = json_array())) /* its calls may follow */
        return oai_fail(cv->e, 500, "server_error", "", "", "out of memory");
    return 0;
}

static int conv_function_call(struct conv *cv, const json_t *it, const char *path) {
    static const char *const keys[] = {"type", "call_id", "name", "arguments", "id", "status",
                                       NULL};
    char param[64];
    snprintf(param, sizeof(param), "%s.", path);
    if (check_keys(cv->e, it, param, keys) < 0)
        return -1;
    const char *id = json_string_value(json_object_get(it, "call_id"));
    const char *name = json_string_value(json_object_get(it, "name"));
    const char *args = json_string_value(json_object_get(it, "arguments"));
    if (!id || !name || !args)
        return oai_fail(cv->e, 400, INVALID, path, "missing_required_parameter",
                        "'%s' needs 'call_id', 'name' and 'arguments' (strings)", path);
    if (strlen(args) > MAX_TEXT_BYTES)
        return oai_fail(cv->e, 400, INVALID, path, "string_above_max_length",
                        "'%s.arguments' is above the limit of %u bytes", path, MAX_TEXT_BYTES);
    if (!cv->calls && (!conv_assistant(cv) || !(cv->calls = json_array())))
        return cv->e->status ? -1 : oai_fail(cv->e, 500, "server_error", "", "", "out of memory");
    if (!cv->calls)
        return oai_fail(cv->e, 500, "server_error", "", "", "out of memory");
    bool ok = true;
    append(cv->calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function",
                                "name", name, "arguments", args), &ok);
    put(cv->names, id, json_string(name), &ok);
    return ok ? 0 : oai_fail(cv->e, 500, "server_error", "", "", "out of memory");
}

static int conv_call_output(struct conv *cv, const json_t *it, const char *path) {
    static const char *const keys[] = {"type", "call_id", "output", "id", "status", NULL};
    static const char *const types[] = {"input_text", "output_text", "text", NULL};
    char param[64];
    snprintf(param, sizeof(param), "%s.", path);
    if (check_keys(cv->e, it, param, keys) < 0)
        return -1;
    const char *id = json_string_value(json_object_get(it, "call_id"));
    snprintf(param, sizeof(param), "%s.call_id", path);
    if (!id)
        return bad_type(cv->e, param, "a string");
    const char *name = json_string_value(json_object_get(cv->names, id));
    if (!name)
        return oai_fail(cv->e, 400, INVALID, param, "invalid_value",
                        "'%s' is '%.64s', which no earlier function_call has", param, id);
    char *text = NULL, *idc = NULL, *namec = NULL;
    snprintf(param, sizeof(param), "%s.output", path);
    if (item_text(cv, json_object_get(it, "output"), param, types, &text) < 0)
        return -1;
    struct chat_message *m = conv_flush_calls(cv) < 0 ? NULL : conv_push(cv, "tool");
    idc = strdup(id);
    namec = strdup(name);
    if (!m || !idc || !namec) {
        free(text), free(idc), free(namec);
        return m ? oai_fail(cv->e, 500, "server_error", "", "", "out of memory") : -1;
    }
    m->content = text;
    m->tool_call_id = idc;
    m->name = namec;
    return 0;
}

/* A reasoning item's text (its reasoning_text content, else its summary) kept for the next
 * assistant message. */
static int conv_reasoning(struct conv *cv, const json_t *it, const char *path) {
    static const char *const keys[] = {"type", "id", "summary", "content", "encrypted_content",
                                       "status", NULL};
    char param[64];
    snprintf(param, sizeof(param), "%s.", path);
    if (check_keys(cv->e, it, param, keys) < 0)
        return -1;
    const json_t *content = field(it, "content"), *summary = field(it, "summary");
    const json_t *parts = content && json_array_size(content) ? content : summary;
    snprintf(param, sizeof(param), "%s.%s", path, parts == content ? "content" : "summary");
    if (!parts)
        return 0;
    char *text = NULL;
    if (item_text(cv, parts, param, (const char *const[]){"reasoning_text", "summary_text",
                                                          NULL}, &text) < 0)
        return -1;
    strbuf_puts(&cv->reasoning, text);
    free(text);
    return 0;
}

/* Turns the items into rq's messages (with instructions first, as a system message). */
static int items_to_messages(struct oai_error *e, const json_t *items, const char *instructions,
                             struct oai_request *rq) {
    struct conv cv = {.e = e, .names = json_object()};
    size_t i;
    json_t *it;
    char path[48];
    int rc = -1;
    if (!cv.names) {
        oai_fail(e, 500, "server_error", "", "", "out of memory");
        goto out;
    }
    if (instructions) {
        struct chat_message *m = conv_push(&cv, "system");
        if (!m || !(m->content = dup_or_fail(e, instructions)))
            goto out;
    }
    json_array_foreach(items, i, it) {
        snprintf(path, sizeof(path), "input[%zu]", i);
        const char *type = json_string_value(json_object_get(it, "type"));
        if (!json_is_object(it)) {
            bad_type(e, path, "an object (an input item)");
            goto out;
        }
        if (!type && json_object_get(it, "role"))
            type = "message";
        if (!type) {
            oai_fail(e, 400, INVALID, path, "missing_required_parameter",
                     "'%s.type' is required", path);
            goto out;
        }
        int r = !strcmp(type, "message")              ? conv_message(&cv, it, path)
                : !strcmp(type, "function_call")        ? conv_function_call(&cv, it, path)
                : !strcmp(type, "function_call_output") ? conv_call_output(&cv, it, path)
                : !strcmp(type, "reasoning")            ? conv_reasoning(&cv, it, path)
                : oai_fail(e, 400, INVALID, path, "unsupported_value",
                           "input item type '%.64s' in '%s' is not supported (message, "
                           "function_call, function_call_output, reasoning)", type, path);
        if (r < 0)
            goto out;
    }
    if (conv_flush_calls(&cv) < 0)
        goto out;
    if (cv.n == 0 || (instructions && cv.n == 1)) {
        oai_fail(e, 400, INVALID, "input", "missing_required_parameter",
                 "'input' has no message to answer");
        goto out;
    }
    rc = 0;
out:
    rq->messages = cv.msgs; /* freed with rq, whole or in part */
    rq->n_messages = cv.n;
    json_decref(cv.calls);
    json_decref(cv.names);
    free(cv.reasoning.p);
    return rc;
}

/* The conversation's items: the stored ones of previous_response_id, then input's. */
static int gather_items(struct oai_error *e, const json_t *body, struct rreq *r) {
    json_t *input = field(body, "input");
    r->items = NULL;
    if (r->previous_id) {
        char *items = NULL;
        int rc = response_store_get(store(), r->previous_id, NULL, &items);
        if (rc == -ENOENT)
            return oai_fail(e, 404, INVALID, "previous_response_id", "previous_response_not_found",
                            "previous response with id '%.64s' not found (never stored, "
                            "deleted, or expired)", r->previous_id);
        if (rc < 0)
            return oai_fail(e, 500, "server_error", "", "", "out of memory");
        r->items = json_loads(items, 0, NULL);
        free(items);
    } else {
        r->items = json_array();
    }
    if (!r->items)
        return oai_fail(e, 500, "server_error", "", "", "out of memory");
    if (!input && !r->previous_id)
        return oai_fail(e, 400, INVALID, "input", "missing_required_parameter",
                        "'input' is required");
    if (json_is_string(input)) {
        if (json_string_length(input) > MAX_TEXT_BYTES)
            return oai_fail(e, 400, INVALID, "input", "string_above_max_length",
                            "'input' is above the limit of %u bytes", MAX_TEXT_BYTES);
        json_t *m = json_pack("{s:s,s:s,s:O}", "type", "message", "role", "user", "content",
                              input);
        if (!m || json_array_append_new(r->items, m) < 0)
            return oai_fail(e, 500, "server_error", "", "", "out of memory");
    } else if (json_is_array(input)) {
        if (json_array_extend(r->items, input) < 0)
            return oai_fail(e, 500, "server_error", "", "", "out of memory");
    } else if (input) {
        return bad_type(e, "input", "a string or an array of items");
    }
    if (json_array_size(r->items) > MAX_ITEMS)
        return oai_fail(e, 400, INVALID, "input", "array_above_max_length",
                        "the conversation has %zu items, above the limit of %d",
                        json_array_size(r->items), MAX_ITEMS);
    return 0;
}

/* Parses and checks the body into r and rq (rq's defaults set here). fam: the model's template
 * family. Returns 0 or -1 with e. */
static int parse_request(struct oai_error *e, const struct http_request *hr, enum chat_family fam,
                         struct rreq *r, struct oai_request *rq) {
    json_error_t je;
    memset(rq, 0, sizeof(*rq));
    rq->chat = true;
    rq->max_tokens = -1;
    rq->temperature = 1.0f;
    rq->top_p = 1.0f;
    rq->repeat_penalty = 1.0f;
    rq->enable_thinking = true;
    r->body = json_loadb(hr->body, hr->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!r->body)
        return oai_fail(e, 400, INVALID, "", "invalid_json",
                        "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                        je.column);
    if (!json_is_object(r->body))
        return oai_fail(e, 400, INVALID, "", "invalid_type", "the body must be a JSON object");
    const json_t *b = r->body;
    const char *instructions = json_string_value(field(b, "instructions"));
    if (check_keys(e, b, "", KEYS) < 0 || check_unsupported(e, b) < 0 ||
        check_include(e, b) < 0 || check_metadata(e, b) < 0 || parse_scalars(e, b, r, rq) < 0 ||
        parse_tools(e, b, rq) < 0 || parse_tool_choice(e, b, r, rq) < 0 ||
        parse_text(e, b, rq) < 0 || parse_reasoning(e, b, r, rq, fam) < 0 ||
        gather_items(e, b, r) < 0 || items_to_messages(e, r->items, instructions, rq) < 0)
        return -1;
    if (rq->json_object && !field(field(b, "reasoning"), "effort"))
        rq->enable_thinking = false; /* the grammar allows no <think> block before the object */
    return 0;
}

/* ---- one response being generated ------------------------------------------------------------ */

enum item_kind { ITEM_NONE, ITEM_MESSAGE, ITEM_REASONING, ITEM_CALL };

struct rcall {
    struct api_call call;      /* the job, its model and reply; call.cs is NULL for a forced
                                * call (all its text is arguments) */
    struct rreq r;
    struct oai_request rq;
    char id[48];
    int64_t created;
    int64_t seq;               /* the next event's sequence_number */
    json_t *output;            /* the finished output items */
    enum item_kind open;       /* the item being written, the last of the output */
    char item_id[64];
    char call_name[72];        /* the open call's function */
    struct strbuf text;        /* its text (message, reasoning) or arguments (call) */
    size_t sent;               /* bytes of text streamed as deltas */
    int n_items, n_calls;
    int32_t reasoning_tokens;
    bool token_reasoned;       /* the token being split gave reasoning */
    char *response;            /* the final response object (JSON), once done */
};

static void rreq_release(struct rreq *r) {
    json_decref(r->body);
    json_decref(r->items);
}

/* The route's state, once the runner released its parts (api_call_ops.free). */
static void rcall_free(void *ctx) {
    struct rcall *c = ctx;
    oai_request_free(&c->rq);
    rreq_release(&c->r);
    json_decref(c->output);
    free(c->text.p);
    free(c->response);
    free(c);
}

/* Sends one event: ev gets "type" and "sequence_number" first (ev is consumed). */
static void emit(struct rcall *c, const char *type, json_t *ev) {
    json_t *o = json_pack("{s:s,s:I}", "type", type, "sequence_number", (json_int_t)c->seq++);
    if (!o || !ev || json_object_update(o, ev) < 0) {
        json_decref(o);
        json_decref(ev);
        return;
    }
    json_decref(ev);
    char *s = jsonw_dumps(o, JSONW_COMPACT);
    json_decref(o);
    if (s)
        api_call_send(&c->call, type, s);
    free(s);
}

/* The open item as it stands (text is the whole of it so far). */
static json_t *item_json(struct rcall *c, const char *status) {
    json_t *text = jstr(c->text.p ? c->text.p : "", c->text.n);
    if (c->open == ITEM_MESSAGE)
        return json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:o,s:[],s:[]}]}", "id", c->item_id, "type",
                         "message", "status", status, "role", "assistant", "content", "type",
                         "output_text", "text", text, "annotations", "logprobs");
    if (c->open == ITEM_REASONING) {
        json_t *summary = json_array();
        if (c->r.summary && summary && text)
            json_array_append_new(summary, json_pack("{s:s,s:O}", "type", "summary_text",
                                                     "text", text));
        return json_pack("{s:s,s:s,s:o,s:[{s:s,s:o}],s:s}", "id", c->item_id, "type",
                         "reasoning", "summary", summary, "content", "type", "reasoning_text",
                         "text", text, "status", status);
    }
    char call_id[72];
    snprintf(call_id, sizeof(call_id), "call_%s", c->item_id + 3);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "id", c->item_id, "type", "function_call",
                     "status", status, "call_id", call_id, "name", c->call_name, "arguments",
                     text);
}

/* The item added (streaming: output_item.added with it empty, and its part). */
static void item_open(struct rcall *c, enum item_kind kind, const char *name) {
    static const char *const prefix[] = {"", "msg", "rs", "fc"};
    c->open = kind;
    c->text.n = 0;
    if (c->text.p)
        c->text.p[0] = '\0';
    c->sent = 0;
    snprintf(c->call_name, sizeof(c->call_name), "%s", name ? name : "");
    snprintf(c->item_id, sizeof(c->item_id), "%s_%s_%d", prefix[kind], c->id + 5, c->n_items++);
    if (!c->call.out)
        return;
    json_t *item = item_json(c, "in_progress");
    if (item && kind == ITEM_MESSAGE)
        json_object_set_new(item, "content", json_array());
    if (item && kind == ITEM_REASONING)
        json_object_set_new(item, "content", json_array());
    int idx = c->n_items - 1;
    emit(c, "response.output_item.added",
         json_pack("{s:i,s:o}", "output_index", idx, "item", item));
    if (kind == ITEM_MESSAGE)
        emit(c, "response.content_part.added",
             json_pack("{s:s,s:i,s:i,s:{s:s,s:s,s:[],s:[]}}", "item_id", c->item_id,
                       "output_index", idx, "content_index", 0, "part", "type", "output_text",
                       "text", "", "annotations", "logprobs"));
    if (kind == ITEM_REASONING) {
        emit(c, "response.content_part.added",
             json_pack("{s:s,s:i,s:i,s:{s:s,s:s}}", "item_id", c->item_id, "output_index", idx,
                       "content_index", 0, "part", "type", "reasoning_text", "text", ""));
        if (c->r.summary)
            emit(c, "response.reasoning_summary_part.added",
                 json_pack("{s:s,s:i,s:i,s:{s:s,s:s}}", "item_id", c->item_id, "output_index",
                           idx, "summary_index", 0, "part", "type", "summary_text", "text", ""));
    }
}

/* Streams the text not sent yet, up to end (a UTF-8 sequence is never split). */
static void item_stream(struct rcall *c, size_t end) {
    if (!c->call.out || end <= c->sent)
        return;
    int idx = c->n_items - 1;
    json_t *d = jstr(c->text.p + c->sent, end - c->sent);
    c->sent = end;
    if (c->open == ITEM_MESSAGE) {
        emit(c, "response.output_text.delta",
             json_pack("{s:s,s:i,s:i,s:o,s:[]}", "item_id", c->item_id, "output_index", idx,
                       "content_index", 0, "delta", d, "logprobs"));
    } else if (c->open == ITEM_REASONING) {
        emit(c, "response.reasoning_text.delta",
             json_pack("{s:s,s:i,s:i,s:O}", "item_id", c->item_id, "output_index", idx,
                       "content_index", 0, "delta", d));
        if (c->r.summary)
            emit(c, "response.reasoning_summary_text.delta",
                 json_pack("{s:s,s:i,s:i,s:O}", "item_id", c->item_id, "output_index", idx,
                           "summary_index", 0, "delta", d));
        json_decref(d);
    } else {
        emit(c, "response.function_call_arguments.delta",
             json_pack("{s:s,s:i,s:o}", "item_id", c->item_id, "output_index", idx, "delta", d));
    }
}

static void item_append(struct rcall *c, const char *text, size_t len) {
    strbuf_putn(&c->text, text, len);
    item_stream(c, c->text.n - utf8_tail(c->text.p, c->text.n));
}

/* Closes the open item: whole into the output (streaming: its done events). */
static void item_close(struct rcall *c, const char *status) {
    if (c->open == ITEM_NONE)
        return;
    item_stream(c, c->text.n);
    json_t *item = item_json(c, status);
    int idx = c->n_items - 1;
    json_t *text = json_object_get(item, "arguments");
    if (c->open == ITEM_MESSAGE)
        text = json_object_get(json_array_get(json_object_get(item, "content"), 0), "text");
    if (c->open == ITEM_REASONING)
        text = json_object_get(json_array_get(json_object_get(item, "content"), 0), "text");
    if (c->call.out && item && c->open == ITEM_MESSAGE) {
        emit(c, "response.output_text.done",
             json_pack("{s:s,s:i,s:i,s:O,s:[]}", "item_id", c->item_id, "output_index", idx,
                       "content_index", 0, "text", text, "logprobs"));
        emit(c, "response.content_part.done",
             json_pack("{s:s,s:i,s:i,s:O}", "item_id", c->item_id, "output_index", idx,
                       "content_index", 0, "part",
                       json_array_get(json_object_get(item, "content"), 0)));
    } else if (c->call.out && item && c->open == ITEM_REASONING) {
        emit(c, "response.reasoning_text.done",
             json_pack("{s:s,s:i,s:i,s:O}", "item_id", c->item_id, "output_index", idx,
                       "content_index", 0, "text", text));
        emit(c, "response.content_part.done",
             json_pack("{s:s,s:i,s:i,s:{s:s,s:O}}", "item_id", c->item_id, "output_index", idx,
                       "content_index", 0, "part", "type", "reasoning_text", "text", text));
        if (c->r.summary) {
            emit(c, "response.reasoning_summary_text.done",
                 json_pack("{s:s,s:i,s:i,s:O}", "item_id", c->item_id, "output_index", idx,
                           "summary_index", 0, "text", text));
            emit(c, "response.reasoning_summary_part.done",
                 json_pack("{s:s,s:i,s:i,s:{s:s,s:O}}", "item_id", c->item_id, "output_index",
                           idx, "summary_index", 0, "part", "type", "summary_text", "text",
                           text));
        }
    } else if (c->call.out && item) {
        emit(c, "response.function_call_arguments.done",
             json_pack("{s:s,s:i,s:s,s:O}", "item_id", c->item_id, "output_index", idx, "name",
                       c->call_name, "arguments", text));
    }
    if (c->call.out && item)
        emit(c, "response.output_item.done",
             json_pack("{s:i,s:O}", "output_index", idx, "item", item));
    if (!item || json_array_append_new(c->output, item) < 0)
        c->call.sum.rc = c->call.sum.rc ? c->call.sum.rc : -ENOMEM;
    c->open = ITEM_NONE;
}

/* A whole tool call the splitter found. */
static void item_call(struct rcall *c, const char *name, const char *arguments) {
    item_close(c, "completed");
    if (c->n_calls++ > 0 && !c->r.parallel_calls)
        return; /* parallel_tool_calls false: the first call only */
    item_open(c, ITEM_CALL, name);
    item_append(c, arguments, strlen(arguments));
    item_close(c, "completed");
}

static void on_event(void *ctx, const struct chat_event *ev) {
    struct rcall *c = ctx;
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        item_call(c, ev->name, ev->arguments);
        return;
    }
    enum item_kind kind = ev->kind == CHAT_EVENT_CONTENT ? ITEM_MESSAGE : ITEM_REASONING;
    if (kind == ITEM_REASONING)
        c->token_reasoned = true;
    if (c->open != kind) {
        item_close(c, "completed");
        item_open(c, kind, NULL);
    }
    item_append(c, ev->text, ev->len);
}

static void on_text(void *ctx, const char *text, size_t len, const struct job_token *tok) {
    struct rcall *c = ctx;
    if (!c->call.cs) { /* a forced call: all the text is its arguments, from the object's brace */
        if (c->open == ITEM_NONE)
            item_open(c, ITEM_CALL, c->r.forced);
        size_t skip = c->text.n ? 0 : strspn(text, " \t\r\n");
        if (skip < len)
            item_append(c, text + skip, len - skip);
        return;
    }
    c->token_reasoned = false;
    api_call_feed(&c->call, text, len);
    if (tok && c->token_reasoned)
        c->reasoning_tokens++;
}

/* The response object in its state now (status: in_progress, completed, incomplete, failed). */
static json_t *response_json(struct rcall *c, const char *status, const char *error) {
    const json_t *b = c->r.body;
    bool ok = true;
    json_t *o = json_object(), *reasoning = json_object(), *text = json_object();
    if (!o || !reasoning || !text) {
        json_decref(o), json_decref(reasoning), json_decref(text);
        return NULL;
    }
    put(o, "id", json_string(c->id), &ok);
    put(o, "object", json_string("response"), &ok);
    put(o, "created_at", json_integer(c->created), &ok);
    put(o, "status", json_string(status), &ok);
    put(o, "background", json_false(), &ok);
    put(o, "error", error ? json_pack("{s:s,s:s}", "code", "server_error", "message", error)
                          : json_null(), &ok);
    put(o, "incomplete_details", strcmp(status, "incomplete") == 0
            ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null(), &ok);
    put(o, "instructions", echo(b, "instructions"), &ok);
    put(o, "max_output_tokens", echo(b, "max_output_tokens"), &ok);
    put(o, "model", jstr0(c->call.pm->id), &ok);
    put(o, "output", json_deep_copy(c->output), &ok);
    put(o, "parallel_tool_calls", json_boolean(c->r.parallel_calls), &ok);
    put(o, "previous_response_id", echo(b, "previous_response_id"), &ok);
    put(reasoning, "effort", c->r.effort ? json_string(c->r.effort) : json_null(), &ok);
    put(reasoning, "summary", echo(field(b, "reasoning"), "summary"), &ok);
    put(o, "reasoning", reasoning, &ok);
    put(o, "store", json_boolean(c->r.store), &ok);
    put(o, "temperature", json_real(c->rq.temperature), &ok);
    json_t *fmt = field(field(b, "text"), "format");
    put(text, "format", fmt ? json_deep_copy(fmt) : json_pack("{s:s}", "type", "text"), &ok);
    put(o, "text", text, &ok);
    json_t *tc = field(b, "tool_choice");
    put(o, "tool_choice", tc ? json_deep_copy(tc) : json_string("auto"), &ok);
    json_t *tools = field(b, "tools");
    put(o, "tools", tools ? json_deep_copy(tools) : json_array(), &ok);
    put(o, "top_p", json_real(c->rq.top_p), &ok);
    put(o, "truncation", json_string("disabled"), &ok);
    put(o, "user", echo(b, "user"), &ok);
    json_t *md = field(b, "metadata");
    put(o, "metadata", md ? json_deep_copy(md) : json_object(), &ok);
    if (strcmp(status, "in_progress") == 0) {
        put(o, "usage", json_null(), &ok);
    } else {
        const struct job_summary *s = &c->call.sum;
        put(o, "usage",
            json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", s->prompt_tokens,
                      "input_tokens_details", "cached_tokens", s->cached_tokens, "output_tokens",
                      s->completion_tokens, "output_tokens_details", "reasoning_tokens",
                      c->reasoning_tokens, "total_tokens",
                      s->prompt_tokens + s->completion_tokens), &ok);
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Keeps a finished response and its conversation for previous_response_id and GET. */
static void keep(struct rcall *c) {
    json_t *items = json_deep_copy(c->r.items);
    char *s = NULL;
    if (items && json_array_extend(items, c->output) == 0)
        s = jsonw_dumps(items, JSONW_COMPACT);
    json_decref(items);
    int rc = s ? response_store_put(store(), c->id, c->response, s) : -ENOMEM;
    if (rc < 0)
        fprintf(stderr, "%s: not stored \"%s\": %s\n", __func__, c->id, strerror(-rc));
    free(s);
}

static void on_done(void *ctx, const struct job_summary *s) {
    struct rcall *c = ctx;
    api_call_finish(&c->call);
    if (!c->call.cs && c->open == ITEM_NONE && s->rc == 0)
        item_open(c, ITEM_CALL, c->r.forced);
    int rc = c->call.sum.rc; /* item_close's -ENOMEM, kept */
    c->call.sum = *s;
    if (!c->call.sum.rc)
        c->call.sum.rc = rc;
    bool length = strcmp(s->finish_reason, "length") == 0;
    item_close(c, length ? "incomplete" : "completed");
    const char *status = c->call.sum.rc < 0 ? "failed" : length ? "incomplete" : "completed";
    char err[128] = "";
    if (c->call.sum.rc < 0)
        snprintf(err, sizeof(err), "generation failed: %s", strerror(-c->call.sum.rc));
    json_t *resp = response_json(c, status, err[0] ? err : NULL);
    c->response = resp ? jsonw_dumps(resp, JSONW_COMPACT) : NULL;
    bool cancelled = strcmp(s->finish_reason, "cancelled") == 0;
    if (c->response && c->r.store && !cancelled && c->call.sum.rc == 0)
        keep(c);
    if (c->call.out) {
        if (!cancelled)
            emit(c, c->call.sum.rc < 0 ? "response.failed" : length ? "response.incomplete"
                                                               : "response.completed",
                 resp ? json_pack("{s:O}", "response", resp) : NULL);
    }
    json_decref(resp);
}

static const struct api_call_ops rcall_ops = {NULL, on_text, on_event, on_done, rcall_free};

/* The text that starts a forced call of fn in family fam's output (after the generation
 * prompt), or NULL when the family has no JSON call syntax to force. */
static char *forced_prefix(enum chat_family fam, const char *fn) {
    char *s = NULL;
    int n = -1;
    if (fam == CHAT_CHATML)
        n = asprintf(&s, "<tool_call>\n{\"name\": \"%s\", \"arguments\": ", fn);
    else if (fam == CHAT_HARMONY)
        n = asprintf(&s, "<|channel|>commentary to=functions.%s <|constrain|>json<|message|>", fn);
    return n < 0 ? NULL : s;
}

/* The prompt's ids: the rendered conversation, then a forced call's opening. */
static int32_t *prompt(struct rcall *c, size_t *n, struct oai_error *e) {
    int32_t *ids = api_prompt_ids(c->call.pm, &c->rq, n, e);
    if (!ids || !c->r.forced)
        return ids;
    char *pre = forced_prefix(c->call.pm->family, c->r.forced);
    if (!pre) {
        free(ids);
        oai_fail(e, 400, INVALID, "tool_choice", "unsupported_value",
                 "forcing a tool call is not supported with this model's chat template (%s)",
                 chat_family_name(c->call.pm->family));
        return NULL;
    }
    size_t m = 0;
    int32_t *more = tokenizer_encode(c->call.pm->tk, pre, strlen(pre), true, &m);
    int32_t *all = more ? realloc(ids, (*n + m) * sizeof(*ids)) : NULL;
    free(pre);
    if (!all) {
        free(more);
        free(ids);
        oai_fail(e, 500, "server_error", "", "", "out of memory");
        return NULL;
    }
    memcpy(all + *n, more, m * sizeof(*more));
    free(more);
    *n += m;
    return all;
}

/* Makes c's job (the prompt checked against the context). Returns 0 or -1 with e. */
static int make_job(struct rcall *c, struct oai_error *e) {
    size_t n = 0;
    int32_t *ids = prompt(c, &n, e);
    if (!ids)
        return -1;
    int32_t max_tokens = 0;
    if (api_max_tokens(c->call.pm, n, c->rq.max_tokens, &max_tokens) < 0) {
        free(ids);
        return oai_fail(e, 400, INVALID, "input", "context_length_exceeded",
                        "this model's context is %d tokens; the input takes %zu and "
                        "max_output_tokens asks for %d more", c->call.pm->n_ctx, n,
                        c->rq.max_tokens > 0 ? c->rq.max_tokens : 0);
    }
    /* the sampler's defaults but for temperature, top_p and the seed (not the OpenAI route's) */
    struct job_params p = {.max_tokens = max_tokens,
                           .json_object = c->rq.json_object || c->r.forced};
    p.sp = sampler_params_default();
    p.sp.temp = c->rq.temperature;
    p.sp.top_p = c->rq.top_p;
    p.sp.seed = c->rq.has_seed ? c->rq.seed : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)c;
    int rc = api_call_job(&c->call, ids, n, &p, !c->r.forced, c->rq.enable_thinking);
    free(ids);
    return rc < 0 ? oai_fail(e, 500, "server_error", "", "", "out of memory") : 0;
}

/* Runs the job: streamed (created and in_progress now, the rest from the engine's thread), or
 * waited for whole; a client that hangs up meanwhile cancels it. */
static void run(struct rcall *c, const struct http_request *hr, struct http_response *out) {
    if (c->rq.stream) {
        if (api_call_stream(&c->call) < 0) {
            api_reply_fail(out, 500, "server_error", "", "", "out of memory");
            return;
        }
        json_t *resp = response_json(c, "in_progress", NULL);
        emit(c, "response.created", resp ? json_pack("{s:O}", "response", resp) : NULL);
        emit(c, "response.in_progress", resp ? json_pack("{s:O}", "response", resp) : NULL);
        json_decref(resp);
    }
    if (api_call_run(&c->call, hr, "text/event-stream", out) < 0)
        api_reply_fail(out, 503, "server_error", "", "queue_full",
                       "the server is busy: too many requests queued; try again shortly");
    else if (c->rq.stream)
        return;
    else if (c->call.sum.rc < 0)
        api_reply_fail(out, 500, "server_error", "", "", strerror(-c->call.sum.rc));
    else if (!c->response)
        api_reply_fail(out, 500, "server_error", "", "", "out of memory");
    else
        api_reply_json(out, 200, strdup(c->response));
}

static void handle_create(struct api *a, const struct http_request *hr,
                          struct http_response *out) {
    struct oai_error e = {0};
    struct rcall *c = calloc(1, sizeof(*c));
    if (!c) {
        api_reply_fail(out, 500, "server_error", "", "", "out of memory");
        return;
    }
    api_call_init(&c->call, a, &rcall_ops, c);
    c->created = (int64_t)time(NULL);
    snprintf(c->id, sizeof(c->id), "resp_%016" PRIxFAST64 "%08x",
             atomic_fetch_add(&a->next_id, 1) ^ ((uint_fast64_t)c->created << 20),
             (unsigned)((uintptr_t)c >> 4));
    c->output = json_array();
    /* the model first: its template decides what reasoning and forced calls become */
    json_t *probe = json_loadb(hr->body, hr->body_len, 0, NULL);
    const char *model = json_string_value(json_object_get(probe, "model"));
    c->call.pm = c->output ? api_model(a, model, &e) : NULL;
    json_decref(probe);
    if (!c->call.pm || parse_request(&e, hr, c->call.pm->family, &c->r, &c->rq) < 0 ||
        make_job(c, &e) < 0) {
        if (!e.status)
            oai_fail(&e, 500, "server_error", "", "", "out of memory");
        api_reply_error(out, &e);
    } else {
        run(c, hr, out);
    }
    api_call_unref(&c->call);
}

/* ---- stored responses ------------------------------------------------------------------------ */

/* The id in /v1/responses/{id}: 1-64 of [A-Za-z0-9_-], else NULL. */
static const char *path_id(const char *path, char *buf, size_t len) {
    const char *id = path + strlen("/v1/responses/");
    size_t n = strlen(id);
    if (n == 0 || n > 64 || n >= len || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                                   "QRSTUVWXYZ0123456789_-") != n)
        return NULL;
    memcpy(buf, id, n + 1);
    return buf;
}

static void handle_stored(const struct http_request *hr, struct http_response *out) {
    char buf[72];
    const char *id = path_id(hr->path, buf, sizeof(buf));
    bool get = strcmp(hr->method, "GET") == 0;
    if (!get && strcmp(hr->method, "DELETE") != 0) {
        api_reply_fail(out, 405, INVALID, "", "method_not_allowed",
                       "this path takes GET and DELETE");
        return;
    }
    char *body = NULL;
    int rc = !id ? -ENOENT : get ? response_store_get(store(), id, &body, NULL)
                                 : response_store_delete(store(), id);
    if (rc == -ENOENT) {
        char msg[160];
        snprintf(msg, sizeof(msg), "no stored response with id '%.64s' (never stored, deleted, or "
                                   "expired)", id ? id : "");
        api_reply_fail(out, 404, INVALID, "response_id", "not_found", msg);
    } else if (rc < 0) {
        api_reply_fail(out, 500, "server_error", "", "", "out of memory");
    } else if (get) {
        api_reply_json(out, 200, body);
    } else {
        json_t *o = json_pack("{s:s,s:s,s:b}", "id", id, "object", "response.deleted", "deleted",
                              1);
        api_reply_json(out, 200, o ? jsonw_dumps(o, JSONW_COMPACT) : NULL);
        json_decref(o);
    }
}

/* ---- routing --------------------------------------------------------------------------------- */

bool api_responses_path(const char *path) {
    return strcmp(path, "/v1/responses") == 0 || strncmp(path, "/v1/responses/", 14) == 0;
}

void api_responses_route(struct api *a, const struct http_request *rq, struct http_response *out) {
    if (strcmp(rq->path, "/v1/responses") != 0)
        handle_stored(rq, out);
    else if (strcmp(rq->method, "POST") != 0)
        api_reply_fail(out, 405, INVALID, "", "method_not_allowed", "this path takes POST");
    else
        handle_create(a, rq, out);
}
