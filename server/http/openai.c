/* openai.c - the OpenAI API's JSON for sniperd: requests parsed and checked field by field (every
 * refusal a 400 naming the field), and the response, chunk and error bodies built with jansson.
 *
 * Invariants: a request that parses is complete and within the limits (the caller checks only the
 * context length, which needs the tokenizer); a JSON null is the same as an absent field; every
 * string sent back is valid UTF-8 (invalid bytes become U+FFFD). */
#include "openai.h"
#include "jsonw.h"
#include "utf8.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID "invalid_request_error"
#define MAX_TOOLS 128

int oai_fail(struct oai_error *e, int status, const char *type, const char *param,
             const char *code, const char *fmt, ...) {
    va_list ap;
    e->status = status;
    snprintf(e->type, sizeof(e->type), "%s", type ? type : INVALID);
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    snprintf(e->code, sizeof(e->code), "%s", code ? code : "");
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return -1;
}

/* A JSON string of s[0..n), invalid UTF-8 as U+FFFD (utf8.h); NULL on no memory. */
static json_t *jstr(const char *s, size_t n) { return utf8_json_string(s, n); }

/* A JSON string, or JSON null for "". */
static json_t *str_or_null(const char *s) { return s && *s ? jstr(s, strlen(s)) : json_null(); }

char *oai_error_json(const struct oai_error *e) {
    json_t *v = json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message",
                          jstr(e->message, strnlen(e->message, sizeof(e->message))),
                          "type", e->type[0] ? e->type : INVALID, "param", str_or_null(e->param),
                          "code", str_or_null(e->code));
    char *s = v ? jsonw_dumps(v, JSONW_COMPACT) : NULL;
    json_decref(v);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Field checks. Each returns 0 (value stored, or absent/null and the default kept) or -1 with e.
 * ------------------------------------------------------------------------------------------- */

/* A field's path ("messages[2].content[0].type") into buf; a too-long one is cut short. */
static void pathf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pathf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

struct parser {
    const struct oai_limits *lim;
    struct oai_request *r;
    struct oai_error *e;
    json_t *root;
};

static int bad_type(struct parser *p, const char *param, const char *want) {
    return oai_fail(p->e, 400, INVALID, param, "invalid_type", "'%s' must be %s", param, want);
}

/* The member key of the body, or NULL when absent or null. */
static json_t *field(struct parser *p, const char *key) {
    json_t *v = json_object_get(p->root, key);
    return json_is_null(v) ? NULL : v;
}

static int get_bool(struct parser *p, const char *key, bool *out) {
    json_t *v = field(p, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return bad_type(p, key, "a boolean");
    *out = json_is_true(v);
    return 0;
}

/* A number in [lo, hi] into *out (kept when absent). */
static int get_float(struct parser *p, const char *key, double lo, double hi, float *out) {
    json_t *v = field(p, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return bad_type(p, key, "a number");
    double x = json_number_value(v);
    if (x < lo)
        return oai_fail(p->e, 400, INVALID, key, "decimal_below_min_value",
                        "'%s' is %g, below the minimum %g", key, x, lo);
    if (x > hi)
        return oai_fail(p->e, 400, INVALID, key, "decimal_above_max_value",
                        "'%s' is %g, above the maximum %g", key, x, hi);
    *out = (float)x;
    return 0;
}

static int get_int(struct parser *p, const char *key, json_int_t lo, json_int_t hi, int32_t *out) {
    json_t *v = field(p, key);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return bad_type(p, key, "an integer");
    json_int_t x = json_integer_value(v);
    if (x < lo)
        return oai_fail(p->e, 400, INVALID, key, "integer_below_min_value",
                        "'%s' is %" JSON_INTEGER_FORMAT ", below the minimum %" JSON_INTEGER_FORMAT,
                        key, x, lo);
    if (x > hi)
        return oai_fail(p->e, 400, INVALID, key, "integer_above_max_value",
                        "'%s' is %" JSON_INTEGER_FORMAT ", above the maximum %" JSON_INTEGER_FORMAT,
                        key, x, hi);
    *out = (int32_t)x;
    return 0;
}

bool oai_in_list(const char *key, const char *const *list) {
    for (; *list; list++)
        if (strcmp(key, *list) == 0)
            return true;
    return false;
}

/* Parameters of the API sniperd does not implement: refused by name (unless null). */
static const char *const UNSUPPORTED[] = {
    "logit_bias", "audio", "modalities", "prediction", "service_tier", "store", "metadata",
    "functions", "function_call", "web_search_options", "safety_identifier",
    "prompt_cache_key", "verbosity", "instructions", "input", NULL};

static const char *const CHAT_KEYS[] = {
    "model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repeat_penalty", "seed", "stop", "logprobs", "top_logprobs", "tools", "tool_choice",
    "response_format", "enable_thinking", "chat_template_kwargs", "n", "user",
    "parallel_tool_calls", "reasoning_effort", NULL};

static const char *const COMPLETION_KEYS[] = {
    "model", "prompt", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k",
    "min_p", "presence_penalty", "frequency_penalty", "repeat_penalty", "seed", "stop", "logprobs",
    "n", "user", "echo", "best_of", "suffix", NULL};

int oai_check_keys(struct oai_error *e, const json_t *obj, const char *prefix,
                   const char *const *known, const char *const *unsupported) {
    const char *key;
    json_t *v;
    char param[64];
    json_object_foreach((json_t *)obj, key, v) {
        if (oai_in_list(key, known))
            continue;
        pathf(param, sizeof(param), "%s%s", prefix, key);
        if (unsupported && oai_in_list(key, unsupported)) {
            if (json_is_null(v))
                continue;
            return oai_fail(e, 400, INVALID, param, "unsupported_parameter",
                            "unsupported parameter: '%s' is not supported by sniperd", param);
        }
        return oai_fail(e, 400, INVALID, param, "unknown_parameter", "unknown parameter: '%s'",
                        param);
    }
    return 0;
}

/* oai_check_keys with this API's UNSUPPORTED list. */
static int check_keys(struct oai_error *e, const json_t *obj, const char *prefix,
                      const char *const *known) {
    return oai_check_keys(e, obj, prefix, known, UNSUPPORTED);
}

static char *dup_checked(struct oai_error *e, const char *s) {
    char *d = strdup(s);
    if (!d)
        oai_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    return d;
}

/* ---------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------- */

static int too_long(struct parser *p, const char *param, size_t n, size_t max) {
    return oai_fail(p->e, 400, INVALID, param, "string_above_max_length",
                    "'%s' is %zu bytes, above the limit of %zu", param, n, max);
}

/* One text part {"type":"text","text":...} appended to *acc. */
static int content_part(struct parser *p, const json_t *part, const char *path, size_t j,
                        char **acc, size_t *n) {
    static const char *const keys[] = {"type", "text", NULL};
    char param[64];
    pathf(param, sizeof(param), "%s[%zu]", path, j);
    if (!json_is_object(part))
        return bad_type(p, param, "an object {\"type\": \"text\", \"text\": ...}");
    const char *type = json_string_value(json_object_get(part, "type"));
    pathf(param, sizeof(param), "%s[%zu].type", path, j);
    if (!type)
        return oai_fail(p->e, 400, INVALID, param, "missing_required_parameter",
                        "'%s' must be a string", param);
    if (strcmp(type, "text") != 0)
        return oai_fail(p->e, 400, INVALID, param, "unsupported_value",
                        "content part type '%.64s' in '%s' is not supported (text only)", type,
                        param);
    pathf(param, sizeof(param), "%s[%zu].", path, j);
    if (check_keys(p->e, part, param, keys) < 0)
        return -1;
    const json_t *text = json_object_get(part, "text");
    pathf(param, sizeof(param), "%s[%zu].text", path, j);
    if (!json_is_string(text))
        return bad_type(p, param, "a string");
    size_t len = json_string_length(text);
    if (*n + len > p->lim->max_message_bytes)
        return too_long(p, path, *n + len, p->lim->max_message_bytes);
    char *grown = realloc(*acc, *n + len + 1);
    if (!grown)
        return oai_fail(p->e, 500, "server_error", NULL, NULL, "out of memory");
    memcpy(grown + *n, json_string_value(text), len + 1);
    *acc = grown;
    *n += len;
    return 0;
}

/* A message's content (a string or an array of text parts, joined) into *out; null or absent
 * leaves *out NULL. */
static int parse_content(struct parser *p, const json_t *v, const char *path, char **out) {
    size_t n = 0, j;
    json_t *part;
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        if (json_string_length(v) > p->lim->max_message_bytes)
            return too_long(p, path, json_string_length(v), p->lim->max_message_bytes);
        *out = dup_checked(p->e, json_string_value(v));
        return *out ? 0 : -1;
    }
    if (!json_is_array(v))
        return bad_type(p, path, "a string or an array of text parts");
    if (json_array_size(v) == 0)
        return oai_fail(p->e, 400, INVALID, path, "empty_array", "'%s' is an empty array", path);
    json_array_foreach(v, j, part) {
        if (content_part(p, part, path, j, out, &n) < 0) {
            free(*out);
            *out = NULL;
            return -1;
        }
    }
    return 0;
}

static int check_tool_call(struct parser *p, const json_t *c, const char *path) {
    static const char *const keys[] = {"id", "type", "function", NULL};
    static const char *const fkeys[] = {"name", "arguments", NULL};
    char param[64], prefix[64];
    if (!json_is_object(c))
        return bad_type(p, path, "an object");
    pathf(prefix, sizeof(prefix), "%s.", path);
    if (check_keys(p->e, c, prefix, keys) < 0)
        return -1;
    pathf(param, sizeof(param), "%s.id", path);
    if (!json_is_string(json_object_get(c, "id")))
        return bad_type(p, param, "a string");
    pathf(param, sizeof(param), "%s.type", path);
    const char *type = json_string_value(json_object_get(c, "type"));
    if (!type || strcmp(type, "function") != 0)
        return oai_fail(p->e, 400, INVALID, param, "invalid_value", "'%s' must be \"function\"",
                        param);
    const json_t *fn = json_object_get(c, "function");
    pathf(param, sizeof(param), "%s.function", path);
    if (!json_is_object(fn))
        return bad_type(p, param, "an object {\"name\", \"arguments\"}");
    pathf(prefix, sizeof(prefix), "%s.function.", path);
    if (check_keys(p->e, fn, prefix, fkeys) < 0)
        return -1;
    pathf(param, sizeof(param), "%s.function.name", path);
    if (!json_is_string(json_object_get(fn, "name")))
        return bad_type(p, param, "a string");
    pathf(param, sizeof(param), "%s.function.arguments", path);
    if (!json_is_string(json_object_get(fn, "arguments")))
        return bad_type(p, param, "a string (JSON text)");
    return 0;
}

/* An assistant's tool_calls, checked and re-serialised into *out. */
static int parse_tool_calls(struct parser *p, const json_t *v, const char *path, char **out) {
    size_t j;
    json_t *c;
    char param[64];
    if (!json_is_array(v))
        return bad_type(p, path, "an array");
    if (json_array_size(v) == 0)
        return oai_fail(p->e, 400, INVALID, path, "empty_array", "'%s' is an empty array", path);
    json_array_foreach(v, j, c) {
        pathf(param, sizeof(param), "%s[%zu]", path, j);
        if (check_tool_call(p, c, param) < 0)
            return -1;
    }
    *out = jsonw_dumps(v, JSONW_COMPACT);
    return *out ? 0 : oai_fail(p->e, 500, "server_error", NULL, NULL, "out of memory");
}

static const char *const ROLE_KEYS_SYSTEM[] = {"role", "content", NULL};
static const char *const ROLE_KEYS_USER[] = {"role", "content", NULL};
static const char *const ROLE_KEYS_ASSISTANT[] = {"role", "content", "reasoning_content",
                                                  "tool_calls", NULL};
static const char *const ROLE_KEYS_TOOL[] = {"role", "content", "tool_call_id", "name", NULL};

/* The role of message m (developer is system) and the keys it may carry; NULL: unknown. */
static const char *message_role(const char *role, const char *const **keys) {
    if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0)
        return *keys = ROLE_KEYS_SYSTEM, "system";
    if (strcmp(role, "user") == 0)
        return *keys = ROLE_KEYS_USER, "user";
    if (strcmp(role, "assistant") == 0)
        return *keys = ROLE_KEYS_ASSISTANT, "assistant";
    if (strcmp(role, "tool") == 0)
        return *keys = ROLE_KEYS_TOOL, "tool";
    return NULL;
}

static int opt_string(struct parser *p, const json_t *m, const char *key, const char *path,
                      char **out) {
    const json_t *v = json_object_get(m, key);
    char param[64];
    if (!v || json_is_null(v))
        return 0;
    pathf(param, sizeof(param), "%s.%s", path, key);
    if (!json_is_string(v))
        return bad_type(p, param, "a string");
    if (json_string_length(v) > p->lim->max_message_bytes)
        return too_long(p, param, json_string_length(v), p->lim->max_message_bytes);
    *out = dup_checked(p->e, json_string_value(v));
    return *out ? 0 : -1;
}

/* The role-specific fields of an assistant or tool message. */
static int message_extras(struct parser *p, const json_t *m, const char *path,
                          struct chat_message *out) {
    char param[64];
    char *s = NULL;
    if (strcmp(out->role, "assistant") == 0) {
        if (opt_string(p, m, "reasoning_content", path, &s) < 0)
            return -1;
        out->reasoning_content = s;
        s = NULL;
        const json_t *tc = json_object_get(m, "tool_calls");
        pathf(param, sizeof(param), "%s.tool_calls", path);
        if (tc && !json_is_null(tc) && parse_tool_calls(p, tc, param, &s) < 0)
            return -1;
        out->tool_calls_json = tc && !json_is_null(tc) ? s : NULL;
    } else if (strcmp(out->role, "tool") == 0) {
        if (opt_string(p, m, "tool_call_id", path, &s) < 0)
            return -1;
        out->tool_call_id = s;
        pathf(param, sizeof(param), "%s.tool_call_id", path);
        if (!s)
            return oai_fail(p->e, 400, INVALID, param, "missing_required_parameter",
                            "'%s' is required", param);
        s = NULL;
        if (opt_string(p, m, "name", path, &s) < 0)
            return -1;
        out->name = s;
    }
    return 0;
}

static int parse_message(struct parser *p, const json_t *m, size_t i, struct chat_message *out) {
    char path[48], param[64];
    const char *const *keys = NULL;
    char *content = NULL;
    pathf(path, sizeof(path), "messages[%zu]", i);
    if (!json_is_object(m))
        return bad_type(p, path, "an object");
    pathf(param, sizeof(param), "%s.role", path);
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role)
        return oai_fail(p->e, 400, INVALID, param, "missing_required_parameter",
                        "'%s' must be a string", param);
    out->role = message_role(role, &keys);
    if (!out->role)
        return oai_fail(p->e, 400, INVALID, param, "invalid_value",
                        "unknown role '%.64s' in '%s' (system, developer, user, assistant or tool)",
                        role, param);
    pathf(param, sizeof(param), "%s.", path);
    if (check_keys(p->e, m, param, keys) < 0)
        return -1;
    pathf(param, sizeof(param), "%s.content", path);
    if (parse_content(p, json_object_get(m, "content"), param, &content) < 0)
        return -1;
    out->content = content;
    if (message_extras(p, m, path, out) < 0)
        return -1;
    if (!content && !out->tool_calls_json)
        return oai_fail(p->e, 400, INVALID, param, "missing_required_parameter",
                        "'%s' is required%s", param,
                        strcmp(out->role, "assistant") == 0 ? " (or tool_calls)" : "");
    return 0;
}

/* A tool message answers the tool calls of the assistant message before it (or of the tool
 * messages that already answer them). */
static int check_tool_order(struct parser *p) {
    const struct chat_message *m = p->r->messages;
    char param[48];
    for (size_t i = 0; i < p->r->n_messages; i++) {
        if (strcmp(m[i].role, "tool") != 0)
            continue;
        if (i > 0 && (strcmp(m[i - 1].role, "tool") == 0 || m[i - 1].tool_calls_json))
            continue;
        pathf(param, sizeof(param), "messages[%zu].role", i);
        return oai_fail(p->e, 400, INVALID, param, "invalid_value",
                        "a 'tool' message (messages[%zu]) must follow an assistant message with "
                        "'tool_calls'", i);
    }
    return 0;
}

static int parse_messages(struct parser *p) {
    json_t *v = field(p, "messages");
    size_t i;
    json_t *m;
    if (!v)
        return oai_fail(p->e, 400, INVALID, "messages", "missing_required_parameter",
                        "'messages' is required");
    if (!json_is_array(v))
        return bad_type(p, "messages", "an array");
    if (json_array_size(v) == 0)
        return oai_fail(p->e, 400, INVALID, "messages", "empty_array",
                        "'messages' must contain at least one message");
    if (json_array_size(v) > p->lim->max_messages)
        return oai_fail(p->e, 400, INVALID, "messages", "array_above_max_length",
                        "'messages' has %zu messages, above the limit of %zu",
                        json_array_size(v), p->lim->max_messages);
    p->r->messages = calloc(json_array_size(v), sizeof(*p->r->messages));
    if (!p->r->messages)
        return oai_fail(p->e, 500, "server_error", NULL, NULL, "out of memory");
    json_array_foreach(v, i, m) {
        p->r->n_messages = i + 1;
        if (parse_message(p, m, i, &p->r->messages[i]) < 0)
            return -1;
    }
    return check_tool_order(p);
}

/* ---------------------------------------------------------------------------------------------
 * Tools
 * ------------------------------------------------------------------------------------------- */

bool oai_valid_name(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-'))
            return false;
    return true;
}

static int check_tool(struct parser *p, const json_t *t, size_t j) {
    static const char *const keys[] = {"type", "function", NULL};
    static const char *const fkeys[] = {"name", "description", "parameters", "strict", NULL};
    char param[64];
    pathf(param, sizeof(param), "tools[%zu]", j);
    if (!json_is_object(t))
        return bad_type(p, param, "an object");
    pathf(param, sizeof(param), "tools[%zu].type", j);
    const char *type = json_string_value(json_object_get(t, "type"));
    if (!type || strcmp(type, "function") != 0)
        return oai_fail(p->e, 400, INVALID, param, "unsupported_value",
                        "'%s' must be \"function\" (the only tool type sniperd supports)", param);
    pathf(param, sizeof(param), "tools[%zu].", j);
    if (check_keys(p->e, t, param, keys) < 0)
        return -1;
    const json_t *fn = json_object_get(t, "function");
    pathf(param, sizeof(param), "tools[%zu].function", j);
    if (!json_is_object(fn))
        return bad_type(p, param, "an object");
    pathf(param, sizeof(param), "tools[%zu].function.", j);
    if (check_keys(p->e, fn, param, fkeys) < 0)
        return -1;
    const char *name = json_string_value(json_object_get(fn, "name"));
    pathf(param, sizeof(param), "tools[%zu].function.name", j);
    if (!name || !oai_valid_name(name, 64))
        return oai_fail(p->e, 400, INVALID, param, "invalid_value",
                        "'%s' must be 1-64 characters of a-z, A-Z, 0-9, _ and -", param);
    const json_t *v = json_object_get(fn, "description");
    pathf(param, sizeof(param), "tools[%zu].function.description", j);
    if (v && !json_is_string(v))
        return bad_type(p, param, "a string");
    v = json_object_get(fn, "parameters");
    pathf(param, sizeof(param), "tools[%zu].function.parameters", j);
    if (v && !json_is_object(v))
        return bad_type(p, param, "an object (a JSON Schema)");
    v = json_object_get(fn, "strict");
    pathf(param, sizeof(param), "tools[%zu].function.strict", j);
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return bad_type(p, param, "a boolean");
    return 0;
}

static bool has_tool(const json_t *tools, const char *name) {
    size_t j;
    json_t *t;
    json_array_foreach(tools, j, t) {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (n && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

static int parse_tools(struct parser *p) {
    json_t *v = field(p, "tools");
    size_t j;
    json_t *t;
    if (!v)
        return 0;
    if (!json_is_array(v))
        return bad_type(p, "tools", "an array");
    if (json_array_size(v) == 0)
        return oai_fail(p->e, 400, INVALID, "tools", "empty_array", "'tools' is an empty array");
    if (json_array_size(v) > MAX_TOOLS)
        return oai_fail(p->e, 400, INVALID, "tools", "array_above_max_length",
                        "'tools' has %zu tools, above the limit of %d", json_array_size(v),
                        MAX_TOOLS);
    json_array_foreach(v, j, t) {
        if (check_tool(p, t, j) < 0)
            return -1;
    }
    p->r->tools_json = jsonw_dumps(v, JSONW_COMPACT);
    return p->r->tools_json ? 0 : oai_fail(p->e, 500, "server_error", NULL, NULL, "out of memory");
}

/* The name of tool_choice {"type":"function","function":{"name":...}}, or NULL with e. */
static const char *tool_choice_function(struct parser *p, const json_t *v) {
    static const char *const keys[] = {"type", "function", NULL};
    static const char *const fkeys[] = {"name", NULL};
    const char *type = json_string_value(json_object_get(v, "type"));
    const json_t *fn = json_object_get(v, "function");
    const char *name = json_string_value(json_object_get(fn, "name"));
    if (!type || strcmp(type, "function") != 0) {
        oai_fail(p->e, 400, INVALID, "tool_choice.type", "invalid_value",
                 "'tool_choice.type' must be \"function\"");
        return NULL;
    }
    if (check_keys(p->e, v, "tool_choice.", keys) < 0 ||
        (json_is_object(fn) && check_keys(p->e, fn, "tool_choice.function.", fkeys) < 0))
        return NULL;
    if (!name)
        oai_fail(p->e, 400, INVALID, "tool_choice.function.name", "missing_required_parameter",
                 "'tool_choice.function.name' must be a string");
    return name;
}

static int parse_tool_choice(struct parser *p) {
    json_t *v = field(p, "tool_choice"), *tools = field(p, "tools");
    const char *choice;
    if (!v)
        return 0;
    if (json_is_string(v)) {
        choice = json_string_value(v);
        if (strcmp(choice, "auto") != 0 && strcmp(choice, "none") != 0 &&
            strcmp(choice, "required") != 0)
            return oai_fail(p->e, 400, INVALID, "tool_choice", "invalid_value",
                            "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                            "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    } else if (json_is_object(v)) {
        choice = tool_choice_function(p, v);
        if (!choice)
            return -1;
        if (tools && !has_tool(tools, choice))
            return oai_fail(p->e, 400, INVALID, "tool_choice.function.name", "invalid_value",
                            "tool_choice names '%.64s', which is not in 'tools'", choice);
    } else {
        return bad_type(p, "tool_choice", "a string or an object");
    }
    if (!tools && strcmp(choice, "auto") != 0 && strcmp(choice, "none") != 0)
        return oai_fail(p->e, 400, INVALID, "tool_choice", "invalid_value",
                        "'tool_choice' requires 'tools'");
    p->r->tool_choice = dup_checked(p->e, choice);
    return p->r->tool_choice ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Sampling, stop, stream, output format
 * ------------------------------------------------------------------------------------------- */

static int parse_sampling(struct parser *p) {
    struct oai_request *r = p->r;
    if (get_float(p, "temperature", 0, 2, &r->temperature) < 0 ||
        get_float(p, "top_p", 0, 1, &r->top_p) < 0 ||
        get_int(p, "top_k", 0, INT32_MAX, &r->top_k) < 0 ||
        get_float(p, "min_p", 0, 1, &r->min_p) < 0 ||
        get_float(p, "presence_penalty", -2, 2, &r->presence_penalty) < 0 ||
        get_float(p, "frequency_penalty", -2, 2, &r->frequency_penalty) < 0 ||
        get_float(p, "repeat_penalty", 0, 10, &r->repeat_penalty) < 0)
        return -1;
    if (r->repeat_penalty <= 0)
        return oai_fail(p->e, 400, INVALID, "repeat_penalty", "decimal_below_min_value",
                        "'repeat_penalty' must be above 0 (1 is off)");
    json_t *seed = field(p, "seed");
    if (seed && !json_is_integer(seed))
        return bad_type(p, "seed", "an integer");
    r->has_seed = seed != NULL;
    r->seed = seed ? (uint64_t)json_integer_value(seed) : 0;
    return 0;
}

static int add_stop(struct parser *p, const json_t *s, const char *param) {
    if (!json_is_string(s))
        return bad_type(p, param, "a string");
    if (json_string_length(s) == 0)
        return oai_fail(p->e, 400, INVALID, param, "invalid_value", "'%s' is empty", param);
    if (json_string_length(s) > p->lim->max_stop_bytes)
        return too_long(p, param, json_string_length(s), p->lim->max_stop_bytes);
    p->r->stop[p->r->n_stop] = dup_checked(p->e, json_string_value(s));
    return p->r->stop[p->r->n_stop++] ? 0 : -1;
}

static int parse_stop(struct parser *p) {
    json_t *v = field(p, "stop"), *s;
    size_t j;
    char param[32];
    if (!v)
        return 0;
    if (json_is_string(v))
        return add_stop(p, v, "stop");
    if (!json_is_array(v))
        return bad_type(p, "stop", "a string or an array of strings");
    if (json_array_size(v) > OAI_MAX_STOP)
        return oai_fail(p->e, 400, INVALID, "stop", "array_above_max_length",
                        "'stop' has %zu strings, above the limit of %d", json_array_size(v),
                        OAI_MAX_STOP);
    json_array_foreach(v, j, s) {
        pathf(param, sizeof(param), "stop[%zu]", j);
        if (add_stop(p, s, param) < 0)
            return -1;
    }
    return 0;
}

static int parse_stream(struct parser *p) {
    static const char *const keys[] = {"include_usage", NULL};
    if (get_bool(p, "stream", &p->r->stream) < 0)
        return -1;
    json_t *so = field(p, "stream_options");
    if (!so)
        return 0;
    if (!p->r->stream)
        return oai_fail(p->e, 400, INVALID, "stream_options", "invalid_value",
                        "'stream_options' is only allowed when 'stream' is true");
    if (!json_is_object(so))
        return bad_type(p, "stream_options", "an object");
    if (check_keys(p->e, so, "stream_options.", keys) < 0)
        return -1;
    json_t *iu = json_object_get(so, "include_usage");
    if (iu && !json_is_boolean(iu) && !json_is_null(iu))
        return bad_type(p, "stream_options.include_usage", "a boolean");
    p->r->include_usage = json_is_true(iu);
    return 0;
}

static int parse_max_tokens(struct parser *p, bool chat) {
    json_t *a = field(p, "max_tokens"), *b = chat ? field(p, "max_completion_tokens") : NULL;
    if (a && b)
        return oai_fail(p->e, 400, INVALID, "max_tokens", "invalid_value",
                        "give 'max_tokens' or 'max_completion_tokens', not both");
    return get_int(p, b ? "max_completion_tokens" : "max_tokens", 1, p->lim->max_tokens,
                   &p->r->max_tokens);
}

/* n (1 only), parallel_tool_calls (true only), user (an opaque identifier). */
static int parse_fixed(struct parser *p) {
    int32_t n = 1;
    bool parallel = true;
    if (get_int(p, "n", 1, INT32_MAX, &n) < 0)
        return -1;
    if (n != 1)
        return oai_fail(p->e, 400, INVALID, "n", "unsupported_value",
                        "'n' must be 1: sniperd generates one choice per request");
    if (get_bool(p, "parallel_tool_calls", &parallel) < 0)
        return -1;
    if (!parallel)
        return oai_fail(p->e, 400, INVALID, "parallel_tool_calls", "unsupported_value",
                        "'parallel_tool_calls': false is not supported");
    json_t *user = field(p, "user");
    if (user && !json_is_string(user))
        return bad_type(p, "user", "a string");
    json_t *model = field(p, "model");
    if (model && !json_is_string(model))
        return bad_type(p, "model", "a string");
    if (model && !(p->r->model = dup_checked(p->e, json_string_value(model))))
        return -1;
    return 0;
}

static int parse_response_format(struct parser *p) {
    static const char *const keys[] = {"type", NULL};
    json_t *v = field(p, "response_format");
    if (!v)
        return 0;
    if (!json_is_object(v))
        return bad_type(p, "response_format", "an object");
    const char *type = json_string_value(json_object_get(v, "type"));
    if (!type)
        return oai_fail(p->e, 400, INVALID, "response_format.type", "missing_required_parameter",
                        "'response_format.type' must be a string");
    if (strcmp(type, "json_schema") == 0)
        return oai_fail(p->e, 400, INVALID, "response_format.type", "unsupported_value",
                        "response_format 'json_schema' is not supported (use 'json_object')");
    if (strcmp(type, "text") != 0 && strcmp(type, "json_object") != 0)
        return oai_fail(p->e, 400, INVALID, "response_format.type", "invalid_value",
                        "response_format type '%.64s' is unknown (text or json_object)", type);
    if (check_keys(p->e, v, "response_format.", keys) < 0)
        return -1;
    p->r->json_object = strcmp(type, "json_object") == 0;
    return 0;
}

/* A reasoning effort at key of obj (param names it): low, medium or high (static strings), NULL
 * when absent or null. Returns 0 or -1 with e. */
static int reasoning_effort(struct parser *p, const json_t *obj, const char *key, const char *param,
                            const char **out) {
    static const char *const levels[] = {"low", "medium", "high", NULL};
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    for (int i = 0; json_is_string(v) && levels[i]; i++)
        if (strcmp(json_string_value(v), levels[i]) == 0)
            *out = levels[i];
    if (!*out)
        return oai_fail(p->e, 400, INVALID, param, "invalid_value",
                        "'%s' must be \"low\", \"medium\" or \"high\"", param);
    return 0;
}

/* reasoning_effort, at the top level or in chat_template_kwargs (they must agree). */
static int parse_reasoning_effort(struct parser *p) {
    const char *top = NULL, *kw = NULL;
    if (reasoning_effort(p, p->root, "reasoning_effort", "reasoning_effort", &top) < 0 ||
        reasoning_effort(p, field(p, "chat_template_kwargs"), "reasoning_effort",
                         "chat_template_kwargs.reasoning_effort", &kw) < 0)
        return -1;
    if (top && kw && top != kw)
        return oai_fail(p->e, 400, INVALID, "reasoning_effort", "invalid_value",
                        "'reasoning_effort' and 'chat_template_kwargs.reasoning_effort' disagree");
    p->r->reasoning_effort = top ? top : kw;
    return 0;
}

static int parse_thinking(struct parser *p) {
    static const char *const keys[] = {"enable_thinking", "reasoning_effort", NULL};
    bool top = true, kw = true;
    json_t *k = field(p, "chat_template_kwargs");
    if (get_bool(p, "enable_thinking", &top) < 0)
        return -1;
    if (k) {
        if (!json_is_object(k))
            return bad_type(p, "chat_template_kwargs", "an object");
        if (check_keys(p->e, k, "chat_template_kwargs.", keys) < 0)
            return -1;
        json_t *et = json_object_get(k, "enable_thinking");
        if (et && !json_is_boolean(et) && !json_is_null(et))
            return bad_type(p, "chat_template_kwargs.enable_thinking", "a boolean");
        kw = !json_is_false(et);
    }
    if (field(p, "enable_thinking") && k && json_is_boolean(json_object_get(k, "enable_thinking")) &&
        top != kw)
        return oai_fail(p->e, 400, INVALID, "enable_thinking", "invalid_value",
                        "'enable_thinking' and 'chat_template_kwargs.enable_thinking' disagree");
    p->r->enable_thinking = top && kw;
    return 0;
}

static int parse_chat_logprobs(struct parser *p) {
    if (get_bool(p, "logprobs", &p->r->logprobs) < 0 ||
        get_int(p, "top_logprobs", 0, 20, &p->r->top_logprobs) < 0)
        return -1;
    if (field(p, "top_logprobs") && !p->r->logprobs)
        return oai_fail(p->e, 400, INVALID, "top_logprobs", "invalid_value",
                        "'top_logprobs' requires 'logprobs': true");
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------------------------- */

static void request_defaults(struct oai_request *r, bool chat) {
    memset(r, 0, sizeof(*r));
    r->chat = chat;
    r->max_tokens = -1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->repeat_penalty = 1.0f;
    r->enable_thinking = true;
}

/* Parses body into p->root: an object, or -1 with e. */
static int load_body(struct parser *p, const char *body, size_t len) {
    json_error_t je;
    p->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!p->root && json_error_code(&je) == json_error_out_of_memory)
        return oai_fail(p->e, 500, "server_error", NULL, NULL, "out of memory");
    if (!p->root)
        return oai_fail(p->e, 400, INVALID, NULL, "invalid_json",
                        "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                        je.column);
    if (!json_is_object(p->root))
        return oai_fail(p->e, 400, INVALID, NULL, "invalid_type",
                        "the body must be a JSON object");
    return 0;
}

static int parse_common(struct parser *p, bool chat) {
    if (check_keys(p->e, p->root, "", chat ? CHAT_KEYS : COMPLETION_KEYS) < 0 ||
        parse_fixed(p) < 0 || parse_stream(p) < 0 || parse_max_tokens(p, chat) < 0 ||
        parse_sampling(p) < 0 || parse_stop(p) < 0)
        return -1;
    return 0;
}

int oai_parse_chat(const char *body, size_t len, const struct oai_limits *lim,
                   struct oai_request *out, struct oai_error *e) {
    struct parser p = {.lim = lim, .r = out, .e = e};
    int rc = -1;
    request_defaults(out, true);
    if (load_body(&p, body, len) < 0 || parse_common(&p, true) < 0 || parse_messages(&p) < 0 ||
        parse_tools(&p) < 0 || parse_tool_choice(&p) < 0 || parse_response_format(&p) < 0 ||
        parse_thinking(&p) < 0 || parse_reasoning_effort(&p) < 0 || parse_chat_logprobs(&p) < 0)
        goto out;
    rc = 0;
out:
    json_decref(p.root);
    if (rc < 0)
        oai_request_free(out);
    return rc;
}

/* The legacy endpoint's prompt: a string, or an array of exactly one string. */
static int parse_prompt(struct parser *p) {
    json_t *v = field(p, "prompt");
    if (!v)
        return oai_fail(p->e, 400, INVALID, "prompt", "missing_required_parameter",
                        "'prompt' is required");
    if (json_is_array(v)) {
        if (json_array_size(v) != 1)
            return oai_fail(p->e, 400, INVALID, "prompt", "unsupported_value",
                            "'prompt' as an array must hold exactly one string (batches are not "
                            "supported)");
        v = json_array_get(v, 0);
        if (json_is_integer(v) || json_is_array(v))
            return oai_fail(p->e, 400, INVALID, "prompt", "unsupported_value",
                            "'prompt' as token ids is not supported (send text)");
    }
    if (!json_is_string(v))
        return bad_type(p, "prompt", "a string");
    if (json_string_length(v) > p->lim->max_message_bytes)
        return too_long(p, "prompt", json_string_length(v), p->lim->max_message_bytes);
    p->r->prompt = dup_checked(p->e, json_string_value(v));
    return p->r->prompt ? 0 : -1;
}

/* echo (false only), best_of (1 only), suffix (none), logprobs (an integer 0..5). */
static int parse_completion_extras(struct parser *p) {
    bool echo = false;
    int32_t best_of = 1, lp = 0;
    json_t *suffix = field(p, "suffix");
    if (get_bool(p, "echo", &echo) < 0 || get_int(p, "best_of", 1, INT32_MAX, &best_of) < 0 ||
        get_int(p, "logprobs", 0, 5, &lp) < 0)
        return -1;
    if (echo)
        return oai_fail(p->e, 400, INVALID, "echo", "unsupported_value",
                        "'echo': true is not supported");
    if (best_of != 1)
        return oai_fail(p->e, 400, INVALID, "best_of", "unsupported_value",
                        "'best_of' must be 1");
    if (suffix && !(json_is_string(suffix) && json_string_length(suffix) == 0))
        return oai_fail(p->e, 400, INVALID, "suffix", "unsupported_value",
                        "'suffix' (insertion) is not supported");
    p->r->logprobs = field(p, "logprobs") != NULL;
    p->r->top_logprobs = lp;
    return 0;
}

int oai_parse_completion(const char *body, size_t len, const struct oai_limits *lim,
                         struct oai_request *out, struct oai_error *e) {
    struct parser p = {.lim = lim, .r = out, .e = e};
    int rc = -1;
    request_defaults(out, false);
    if (load_body(&p, body, len) < 0 || parse_common(&p, false) < 0 || parse_prompt(&p) < 0 ||
        parse_completion_extras(&p) < 0)
        goto out;
    rc = 0;
out:
    json_decref(p.root);
    if (rc < 0)
        oai_request_free(out);
    return rc;
}

void oai_request_free(struct oai_request *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n_messages; i++) {
        struct chat_message *m = &r->messages[i];
        free((char *)m->content);
        free((char *)m->reasoning_content);
        free((char *)m->tool_calls_json);
        free((char *)m->tool_call_id);
        free((char *)m->name);
    }
    free(r->messages);
    free(r->model);
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->tools_json);
    free(r->tool_choice);
    memset(r, 0, sizeof(*r));
}

/* ---------------------------------------------------------------------------------------------
 * Bodies sent back
 * ------------------------------------------------------------------------------------------- */

static json_t *jstr0(const char *s) { return s ? jstr(s, strlen(s)) : json_null(); }

/* Sets obj[key] = v (stolen); a NULL v or a failure clears *ok. */
static void put(json_t *obj, const char *key, json_t *v, bool *ok) {
    if (!v || json_object_set_new(obj, key, v) < 0)
        *ok = false;
}

static void append(json_t *arr, json_t *v, bool *ok) {
    if (!v || json_array_append_new(arr, v) < 0)
        *ok = false;
}

/* A log-probability; -inf (a token the sampler ruled out) as OpenAI writes it: -9999. */
static json_t *jlogprob(float lp) { return json_real(isfinite(lp) ? lp : -9999.0); }

/* A finite real (JSON has no NaN or infinity): others as 0. */
static json_t *jreal(double x) { return json_real(isfinite(x) ? x : 0.0); }

static json_t *token_bytes(const char *tok, bool *ok) {
    json_t *a = json_array();
    for (const unsigned char *c = (const unsigned char *)tok; a && *c; c++)
        append(a, json_integer(*c), ok);
    if (!a)
        *ok = false;
    return a;
}

/* {"token","logprob","bytes"} of one token. */
static json_t *logprob_entry(const char *tok, float lp, bool *ok) {
    json_t *o = json_object();
    if (!o)
        return *ok = false, NULL;
    put(o, "token", jstr0(tok), ok);
    put(o, "logprob", jlogprob(lp), ok);
    put(o, "bytes", token_bytes(tok, ok), ok);
    return o;
}

/* The chat shape of one token: {token, logprob, bytes, top_logprobs: [...]}. */
static json_t *chat_logprob(const struct oai_logprob *l, bool *ok) {
    json_t *o = logprob_entry(l->token, l->logprob, ok), *top = json_array();
    for (int i = 0; top && i < l->n_top && i < 20; i++)
        append(top, logprob_entry(l->top_token[i], l->top_logprob[i], ok), ok);
    if (o)
        put(o, "top_logprobs", top, ok);
    else
        json_decref(top);
    return o;
}

/* {"content": [...]} for n tokens, or null when none were asked for. */
static json_t *chat_logprobs(const struct oai_logprob *l, int32_t n, bool *ok) {
    if (!l)
        return json_null();
    json_t *arr = json_array(), *o = json_object();
    for (int32_t i = 0; arr && i < n; i++)
        append(arr, chat_logprob(&l[i], ok), ok);
    if (o)
        put(o, "content", arr, ok);
    else
        json_decref(arr), *ok = false;
    return o;
}

/* The legacy completions shape: {tokens, token_logprobs, top_logprobs, text_offset}. */
static json_t *text_logprobs(const struct oai_logprob *l, int32_t n, size_t offset, bool *ok) {
    if (!l)
        return json_null();
    json_t *o = json_object(), *toks = json_array(), *lps = json_array(), *tops = json_array(),
           *offs = json_array();
    for (int32_t i = 0; toks && lps && tops && offs && i < n; i++) {
        append(toks, jstr0(l[i].token), ok);
        append(lps, jlogprob(l[i].logprob), ok);
        json_t *t = json_object();
        for (int k = 0; t && k < l[i].n_top && k < 20; k++)
            put(t, l[i].top_token[k], jlogprob(l[i].top_logprob[k]), ok);
        append(tops, t, ok);
        append(offs, json_integer((json_int_t)offset), ok);
        offset += strlen(l[i].token);
    }
    if (!o)
        *ok = false;
    else {
        put(o, "tokens", toks, ok);
        put(o, "token_logprobs", lps, ok);
        put(o, "top_logprobs", tops, ok);
        put(o, "text_offset", offs, ok);
        return o;
    }
    json_decref(toks), json_decref(lps), json_decref(tops), json_decref(offs);
    return NULL;
}

static json_t *tool_call_json(const struct oai_tool_call *c, int index, bool with_index, bool *ok) {
    json_t *o = json_object(), *fn = json_object();
    if (!o || !fn) {
        json_decref(o), json_decref(fn);
        return *ok = false, NULL;
    }
    if (with_index)
        put(o, "index", json_integer(index), ok);
    put(o, "id", jstr0(c->id), ok);
    put(o, "type", json_string("function"), ok);
    put(fn, "name", jstr0(c->name), ok);
    put(fn, "arguments", jstr0(c->arguments ? c->arguments : "{}"), ok);
    put(o, "function", fn, ok);
    return o;
}

static json_t *usage_json(const struct oai_result *res, bool *ok) {
    json_t *u = json_object(), *d = json_object();
    if (!u || !d) {
        json_decref(u), json_decref(d);
        return *ok = false, NULL;
    }
    put(u, "prompt_tokens", json_integer(res->prompt_tokens), ok);
    put(u, "completion_tokens", json_integer(res->completion_tokens), ok);
    put(u, "total_tokens", json_integer((json_int_t)res->prompt_tokens + res->completion_tokens),
        ok);
    put(d, "cached_tokens", json_integer(res->cached_tokens), ok);
    put(u, "prompt_tokens_details", d, ok);
    return u;
}

static double per_second(double n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }

/* llama.cpp's "timings": prompt_n counts the tokens prefilled (the cached ones are cache_n). */
static json_t *timings_json(const struct oai_result *res, bool *ok) {
    json_t *t = json_object();
    int32_t prompt_n = res->prompt_tokens - res->cached_tokens;
    if (!t)
        return *ok = false, NULL;
    put(t, "cache_n", json_integer(res->cached_tokens), ok);
    put(t, "prompt_n", json_integer(prompt_n), ok);
    put(t, "prompt_ms", jreal(res->prefill_ms), ok);
    put(t, "prompt_per_second", jreal(per_second(prompt_n, res->prefill_ms)), ok);
    put(t, "predicted_n", json_integer(res->completion_tokens), ok);
    put(t, "predicted_ms", jreal(res->decode_ms), ok);
    put(t, "predicted_per_second",
        jreal(per_second(res->completion_tokens, res->decode_ms)), ok);
    return t;
}

/* id, object, created, model: the head of every response and chunk. */
static json_t *head_json(const struct oai_request *rq, const struct oai_result *res,
                         const char *object, bool *ok) {
    json_t *o = json_object();
    if (!o)
        return *ok = false, NULL;
    put(o, "id", jstr0(res->id ? res->id : ""), ok);
    put(o, "object", json_string(object), ok);
    put(o, "created", json_integer(res->created), ok);
    put(o, "model", jstr0(res->model ? res->model : rq->model ? rq->model : ""), ok);
    return o;
}

/* The dump of o (consumed), or NULL when o is NULL or something failed on the way. */
static char *finish(json_t *o, bool ok) {
    char *s = o && ok ? jsonw_dumps(o, JSONW_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static json_t *chat_message_json(const struct oai_result *res, bool *ok) {
    json_t *m = json_object();
    if (!m)
        return *ok = false, NULL;
    put(m, "role", json_string("assistant"), ok);
    put(m, "content", jstr0(res->content), ok);
    if (res->reasoning)
        put(m, "reasoning_content", jstr0(res->reasoning), ok);
    if (res->n_tool_calls > 0) {
        json_t *calls = json_array();
        for (int i = 0; calls && i < res->n_tool_calls; i++)
            append(calls, tool_call_json(&res->tool_calls[i], i, false, ok), ok);
        put(m, "tool_calls", calls, ok);
    }
    return m;
}

char *oai_response_json(const struct oai_request *rq, const struct oai_result *res) {
    bool ok = true;
    json_t *o = head_json(rq, res, rq->chat ? "chat.completion" : "text_completion", &ok);
    json_t *choices = json_array(), *c = json_object();
    if (!o || !choices || !c) {
        json_decref(o), json_decref(choices), json_decref(c);
        return NULL;
    }
    if (rq->chat) {
        put(c, "index", json_integer(0), &ok);
        put(c, "message", chat_message_json(res, &ok), &ok);
        put(c, "logprobs", chat_logprobs(res->logprobs, res->completion_tokens, &ok), &ok);
    } else {
        put(c, "text", jstr0(res->content ? res->content : ""), &ok);
        put(c, "index", json_integer(0), &ok);
        put(c, "logprobs", text_logprobs(res->logprobs, res->completion_tokens, 0, &ok), &ok);
    }
    put(c, "finish_reason", jstr0(res->finish_reason), &ok);
    append(choices, c, &ok);
    put(o, "choices", choices, &ok);
    put(o, "usage", usage_json(res, &ok), &ok);
    put(o, "timings", timings_json(res, &ok), &ok);
    return finish(o, ok);
}

static json_t *delta_json(const struct oai_delta *d, bool *ok) {
    json_t *o = json_object();
    if (!o)
        return *ok = false, NULL;
    if (d->role)
        put(o, "role", json_string("assistant"), ok);
    if (d->content)
        put(o, "content", jstr(d->content, d->content_len), ok);
    if (d->reasoning)
        put(o, "reasoning_content", jstr(d->reasoning, d->reasoning_len), ok);
    if (d->tool_call) {
        json_t *calls = json_array();
        if (calls)
            append(calls, tool_call_json(d->tool_call, d->tool_index, true, ok), ok);
        put(o, "tool_calls", calls, ok);
    }
    return o;
}

/* The choice of one chunk: chat {index, delta, logprobs, finish_reason} or completion
 * {text, index, logprobs, finish_reason}. */
static json_t *chunk_choice(const struct oai_request *rq, const struct oai_delta *d, bool *ok) {
    json_t *c = json_object();
    if (!c)
        return *ok = false, NULL;
    if (rq->chat) {
        put(c, "index", json_integer(0), ok);
        put(c, "delta", delta_json(d, ok), ok);
        put(c, "logprobs", d->logprob ? chat_logprobs(d->logprob, 1, ok) : json_null(), ok);
    } else {
        put(c, "text", d->content ? jstr(d->content, d->content_len) : json_string(""), ok);
        put(c, "index", json_integer(0), ok);
        put(c, "logprobs", d->logprob ? text_logprobs(d->logprob, 1, 0, ok) : json_null(), ok);
    }
    put(c, "finish_reason", jstr0(d->finish_reason), ok);
    return c;
}

char *oai_chunk_json(const struct oai_request *rq, const struct oai_result *res,
                     const struct oai_delta *d) {
    bool ok = true;
    json_t *o = head_json(rq, res, rq->chat ? "chat.completion.chunk" : "text_completion", &ok);
    json_t *choices = json_array();
    if (!o || !choices) {
        json_decref(o), json_decref(choices);
        return NULL;
    }
    if (!d->usage_only)
        append(choices, chunk_choice(rq, d, &ok), &ok);
    put(o, "choices", choices, &ok);
    if (d->usage_only) {
        put(o, "usage", usage_json(res, &ok), &ok);
        put(o, "timings", timings_json(res, &ok), &ok);
    } else if (rq->include_usage) {
        put(o, "usage", json_null(), &ok);
    }
    return finish(o, ok);
}
