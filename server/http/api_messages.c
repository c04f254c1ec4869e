/* api_messages.c - Anthropic's Messages API over the daemon's one request path: a request's
 * system, messages (text, thinking, tool_use, tool_result blocks), tools and tool_choice become a
 * struct oai_request (chat messages in the OpenAI shape chat.c renders), run as a scheduler job,
 * and the model's output, split by chat.c into text, reasoning and tool calls, comes back as
 * content blocks: a whole message, or Anthropic's SSE events. Errors are Anthropic's
 * {"type":"error","error":{"type","message"}}. A forced tool call is a prompt that already opens
 * the call (the template's own syntax), with JSON arguments constrained by the grammar. */
#include "api_messages.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "api_internal.h"
#include "jsonw.h"
#include "strbuf.h"
#include "utf8.h"

#define INVALID "invalid_request_error"
#define MSG_MAX_MESSAGES 1024
#define MSG_MAX_TEXT_BYTES (1u << 20) /* one text, tool input or tool result */
#define MSG_MAX_TOOLS 128
#define MSG_MAX_STOP_BYTES 256
#define BILLING "x-anthropic-billing-header:" /* a system block for Anthropic's billing */
#define MSG_MAX_BLOCKS 64             /* content blocks of one reply (more text joins the last) */

/* ---- errors ---------------------------------------------------------------------------------- */

/* Anthropic's error type for an HTTP status. */
static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : INVALID;
    }
}

/* A JSON string of s[0..n), invalid UTF-8 as U+FFFD (utf8.h); NULL on no memory. */
static json_t *jstr(const char *s, size_t n) { return utf8_json_string(s, n); }

/* {"type":"error","error":{"type","message"}} of e (malloc'd), NULL on no memory. */
static char *error_json(const struct oai_error *e) {
    json_t *v = json_pack("{s:s, s:{s:s, s:o}}", "type", "error", "error", "type",
                          error_type(e->status), "message",
                          jstr(e->message, strnlen(e->message, sizeof(e->message))));
    char *s = v ? jsonw_dumps(v, JSONW_COMPACT) : NULL;
    json_decref(v);
    return s;
}

static void reply_error(struct http_response *out, const struct oai_error *e) {
    out->status = e->status;
    out->content_type = "application/json";
    out->body = error_json(e);
    if (!out->body)
        out->status = 500;
}

/* Fills e with status and a printf-style message (an OpenAI-shaped struct: its param and code stay
 * empty, error_json writes only the message). Returns -1. */
static int fail(struct oai_error *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct oai_error *e, int status, const char *fmt, ...) {
    va_list ap;
    memset(e, 0, sizeof(*e));
    e->status = status;
    snprintf(e->type, sizeof(e->type), "%s", error_type(status));
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return -1;
}

static void reply_fail(struct http_response *out, int status, const char *msg) {
    struct oai_error e;
    fail(&e, status, "%s", msg);
    reply_error(out, &e);
}

/* ---- the request: Anthropic's JSON into struct oai_request ----------------------------------- */

struct msg_request {
    struct oai_request rq; /* the one internal shape: messages, tools, sampling, stop */
    char *forced_tool;     /* the tool the reply must call (tool_choice "tool", or "any" with one
                            * tool), or NULL */
    bool force_any;        /* tool_choice "any" among several tools: the model names one */
    bool one_call;         /* tool_choice.disable_parallel_tool_use: the first call only */
    bool thinking;         /* thinking {"type": "enabled" / "adaptive"} */
    const char *effort;    /* output_config.effort as harmony's reasoning effort (low, medium,
                            * high; static), or NULL */
};

struct parser {
    json_t *root;
    struct msg_request *r;
    struct oai_error *e;
    size_t cap;            /* r->rq.messages' room */
    const json_t *uses;    /* the tool_use blocks of the assistant message just read, or NULL */
};

static const char *const MESSAGES_KEYS[] = {
    "model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
    "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "context_management",
    "output_config", NULL};
static const char *const COUNT_KEYS[] = {"model", "messages", "system", "tools", "tool_choice",
                                         "thinking", "context_management", "output_config", NULL};

static int check_keys(struct parser *p, const json_t *obj, const char *where,
                      const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (!oai_in_list(key, known))
            return fail(p->e, 400, "%s%s: Extra inputs are not permitted (sniperd does not "
                        "support '%.64s')", where, key, key);
    }
    return 0;
}

static int oom(struct parser *p) { return fail(p->e, 500, "out of memory"); }

/* The next chat message slot (zeroed), or NULL with e. */
static struct chat_message *next_message(struct parser *p, const char *role) {
    struct oai_request *rq = &p->r->rq;
    if (rq->n_messages == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        struct chat_message *m = realloc(rq->messages, cap * sizeof(*m));
        if (!m)
            return oom(p), NULL;
        rq->messages = m;
        p->cap = cap;
    }
    struct chat_message *m = &rq->messages[rq->n_messages++];
    memset(m, 0, sizeof(*m));
    m->role = role;
    return m;
}

/* Appends a string value to *acc (joined by sep), within the text limit. */
static int append_text(struct parser *p, struct strbuf *acc, const json_t *s, const char *sep,
                       const char *path) {
    if (!json_is_string(s))
        return fail(p->e, 400, "%s: Input should be a valid string", path);
    if (acc->n + json_string_length(s) > MSG_MAX_TEXT_BYTES)
        return fail(p->e, 400, "%s: the text is longer than %u bytes", path, MSG_MAX_TEXT_BYTES);
    if (acc->n && sep)
        strbuf_puts(acc, sep);
    strbuf_putn(acc, json_string_value(s), json_string_length(s));
    return acc->oom ? oom(p) : 0;
}

/* A string or an array of text blocks (system, tool_result content) joined into *out (malloc'd;
 * NULL when absent). */
static int text_of(struct parser *p, const json_t *v, const char *path, char **out) {
    struct strbuf acc = {0};
    char where[96];
    size_t j;
    json_t *b;
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        if (append_text(p, &acc, v, NULL, path) < 0)
            goto fail;
    } else if (json_is_array(v)) {
        json_array_foreach(v, j, b) {
            snprintf(where, sizeof(where), "%s.%zu", path, j);
            const char *type = json_string_value(json_object_get(b, "type"));
            if (!json_is_object(b) || !type) {
                fail(p->e, 400, "%s: expected a content block with a 'type'", where);
                goto fail;
            }
            if (strcmp(type, "text") != 0) {
                fail(p->e, 400, "%s.type: '%.64s' blocks are not supported here (text only)",
                     where, type);
                goto fail;
            }
            snprintf(where, sizeof(where), "%s.%zu.text", path, j);
            const char *t = json_string_value(json_object_get(b, "text"));
            if (strcmp(path, "system") == 0 && t && strncmp(t, BILLING, strlen(BILLING)) == 0)
                continue; /* Claude Code's, new each call: it would end the cached prefix */
            if (append_text(p, &acc, json_object_get(b, "text"), "\n", where) < 0)
                goto fail;
        }
    } else {
        fail(p->e, 400, "%s: Input should be a valid string or a list of text blocks", path);
        goto fail;
    }
    *out = strbuf_take(&acc);
    return *out ? 0 : oom(p);
fail:
    free(acc.p);
    return -1;
}

/* The name of the tool_use with id in the assistant message just read, or NULL. */
static const char *use_name(const json_t *uses, const char *id) {
    size_t j;
    json_t *u;
    json_array_foreach(uses, j, u) {
        if (strcmp(json_string_value(json_object_get(u, "id")), id) == 0)
            return json_string_value(json_object_get(json_object_get(u, "function"), "name"));
    }
    return NULL;
}

/* A tool_result block into a "tool" message. */
static int tool_result(struct parser *p, const json_t *b, const char *where) {
    char path[128];
    const char *id = json_string_value(json_object_get(b, "tool_use_id"));
    if (!id)
        return fail(p->e, 400, "%s.tool_use_id: Field required", where);
    const char *name = p->uses ? use_name(p->uses, id) : NULL;
    if (!name)
        return fail(p->e, 400, "%s: unexpected `tool_use_id` found in `tool_result` blocks: "
                    "%.64s. Each `tool_result` block must have a corresponding `tool_use` block "
                    "in the previous message.", where, id);
    struct chat_message *m = next_message(p, "tool");
    if (!m)
        return -1;
    char *content = NULL;
    snprintf(path, sizeof(path), "%s.content", where);
    if (text_of(p, json_object_get(b, "content"), path, &content) < 0)
        return -1;
    m->content = content ? content : strdup("");
    m->tool_call_id = strdup(id);
    m->name = strdup(name);
    return m->content && m->tool_call_id && m->name ? 0 : oom(p);
}

/* Flushes the user text gathered so far as a user message. */
static int flush_user(struct parser *p, struct strbuf *text) {
    if (!text->p)
        return 0;
    char *s = strbuf_take(text);
    struct chat_message *m = s ? next_message(p, "user") : NULL;
    if (!m) {
        free(s);
        return s ? -1 : oom(p);
    }
    m->content = s;
    return 0;
}

/* A content block's type (where: the block's path); NULL with e when it has none. */
static const char *block_type(struct parser *p, const json_t *b, const char *where) {
    const char *type = json_string_value(json_object_get(b, "type"));
    if (!json_is_object(b) || !type)
        fail(p->e, 400, "%s: expected a content block with a 'type'", where);
    return type;
}

/* A block's text field key appended to *acc, joined by newlines (where: the block's path). */
static int append_block(struct parser *p, struct strbuf *acc, const json_t *b, const char *key,
                        const char *where) {
    char path[128];
    snprintf(path, sizeof(path), "%s.%s", where, key);
    return append_text(p, acc, json_object_get(b, key), "\n", path);
}

/* A user message's content blocks: text runs become user messages, tool_result blocks tool
 * messages, in order. */
static int user_blocks(struct parser *p, const json_t *content, const char *path) {
    struct strbuf text = {0};
    char where[96];
    size_t j;
    json_t *b;
    json_array_foreach(content, j, b) {
        snprintf(where, sizeof(where), "%s.%zu", path, j);
        const char *type = block_type(p, b, where);
        if (!type)
            goto fail;
        if (strcmp(type, "text") == 0) {
            if (append_block(p, &text, b, "text", where) < 0)
                goto fail;
        } else if (strcmp(type, "tool_result") == 0) {
            if (flush_user(p, &text) < 0 || tool_result(p, b, where) < 0)
                goto fail;
        } else if (strcmp(type, "image") == 0 || strcmp(type, "document") == 0) {
            fail(p->e, 400, "%s.type: '%s' blocks are not supported (sniperd's models read "
                 "text only)", where, type);
            goto fail;
        } else {
            fail(p->e, 400, "%s.type: unknown content block type '%.64s' in a user message "
                 "(text or tool_result)", where, type);
            goto fail;
        }
    }
    return flush_user(p, &text);
fail:
    free(text.p);
    return -1;
}

/* One tool_use block appended to calls as {"id","type":"function","function":{"name",
 * "arguments": JSON text}}. */
static int tool_use(struct parser *p, const json_t *b, const char *where, json_t *calls) {
    const char *id = json_string_value(json_object_get(b, "id"));
    const char *name = json_string_value(json_object_get(b, "name"));
    const json_t *input = json_object_get(b, "input");
    if (!id || !name)
        return fail(p->e, 400, "%s: a tool_use block needs 'id' and 'name' strings", where);
    if (!json_is_object(input))
        return fail(p->e, 400, "%s.input: Input should be a valid dictionary", where);
    char *args = jsonw_dumps(input, JSONW_COMPACT);
    json_t *c = args ? json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                 "function", "name", name, "arguments", args) : NULL;
    free(args);
    if (!c || json_array_append_new(calls, c) < 0)
        return oom(p);
    return 0;
}

/* An assistant message's content blocks: text joined, thinking as reasoning, tool_use as the
 * message's tool calls (which the next user message's tool_result blocks answer). */
static int assistant_blocks(struct parser *p, const json_t *content, const char *path,
                            struct chat_message *m, json_t *calls) {
    struct strbuf text = {0}, thought = {0};
    char where[96];
    size_t j;
    json_t *b;
    json_array_foreach(content, j, b) {
        snprintf(where, sizeof(where), "%s.%zu", path, j);
        const char *type = block_type(p, b, where);
        if (!type)
            goto fail;
        if (strcmp(type, "text") == 0) {
            if (append_block(p, &text, b, "text", where) < 0)
                goto fail;
        } else if (strcmp(type, "thinking") == 0) {
            if (append_block(p, &thought, b, "thinking", where) < 0)
                goto fail;
        } else if (strcmp(type, "redacted_thinking") == 0) {
            continue; /* opaque to any model but the one that wrote it */
        } else if (strcmp(type, "tool_use") == 0) {
            if (tool_use(p, b, where, calls) < 0)
                goto fail;
        } else {
            fail(p->e, 400, "%s.type: unknown content block type '%.64s' in an assistant "
                 "message (text, thinking, redacted_thinking or tool_use)", where, type);
            goto fail;
        }
    }
    m->content = text.p ? strbuf_take(&text) : NULL;
    m->reasoning_content = thought.p ? strbuf_take(&thought) : NULL;
    if (json_array_size(calls) > 0 && !(m->tool_calls_json = jsonw_dumps(calls, JSONW_COMPACT)))
        return oom(p);
    if (!m->content && !m->tool_calls_json)
        m->content = strdup("");
    return m->content || m->tool_calls_json ? 0 : oom(p);
fail:
    free(text.p);
    free(thought.p);
    return -1;
}

static int parse_message(struct parser *p, const json_t *msg, size_t i, size_t n, json_t **uses) {
    char path[48];
    snprintf(path, sizeof(path), "messages.%zu", i);
    if (!json_is_object(msg))
        return fail(p->e, 400, "%s: Input should be a valid dictionary", path);
    const char *role = json_string_value(json_object_get(msg, "role"));
    const json_t *content = json_object_get(msg, "content");
    if (!role || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0 &&
                  strcmp(role, "system") != 0))
        return fail(p->e, 400, "%s.role: Input should be 'user', 'assistant' or 'system'", path);
    bool user = role[0] == 'u';
    if (i == 0 && !user)
        return fail(p->e, 400, "messages: the first message must use the \"user\" role");
    if (i + 1 == n && role[0] == 'a')
        return fail(p->e, 400, "messages: the last message must not use the \"assistant\" role "
                    "(continuing a prefilled assistant reply is not supported)");
    if (role[0] == 's') { /* a system message within the conversation (Claude Code's beta) */
        char *text = NULL;
        snprintf(path, sizeof(path), "messages.%zu.content", i);
        if (text_of(p, content, path, &text) < 0)
            return -1;
        struct chat_message *m = text ? next_message(p, "system") : NULL;
        if (!m) {
            free(text);
            return text ? -1 : fail(p->e, 400, "%s: Field required", path);
        }
        m->content = text;
        p->uses = NULL;
        return 0;
    }
    char where[64];
    snprintf(where, sizeof(where), "%s.", path);
    static const char *const keys[] = {"role", "content", NULL};
    if (check_keys(p, msg, where, keys) < 0)
        return -1;
    snprintf(where, sizeof(where), "%s.content", path);
    if (json_is_string(content)) {
        struct strbuf s = {0};
        if (append_text(p, &s, content, NULL, where) < 0)
            return -1;
        struct chat_message *m = next_message(p, user ? "user" : "assistant");
        if (!m || !(m->content = strbuf_take(&s))) {
            free(s.p);
            return m ? oom(p) : -1;
        }
    } else if (!json_is_array(content) || json_array_size(content) == 0) {
        return fail(p->e, 400, "%s: Input should be a string or a non-empty list of content "
                    "blocks", where);
    } else if (user) {
        if (user_blocks(p, content, where) < 0)
            return -1;
    } else {
        struct chat_message *m = next_message(p, "assistant");
        json_t *calls = json_array();
        if (!m || !calls || assistant_blocks(p, content, where, m, calls) < 0) {
            json_decref(calls);
            return m && !calls ? oom(p) : -1;
        }
        json_decref(*uses);
        *uses = calls;
        p->uses = calls;
        return 0;
    }
    p->uses = NULL; /* tool_result blocks answer only the assistant message just before */
    return 0;
}

static int parse_messages(struct parser *p) {
    const json_t *v = json_object_get(p->root, "messages");
    json_t *uses = NULL, *m;
    size_t i, n = json_array_size(v);
    if (!json_is_array(v) || n == 0)
        return fail(p->e, 400, "messages: Field required (a non-empty list of messages)");
    if (n > MSG_MAX_MESSAGES)
        return fail(p->e, 400, "messages: %zu messages, above the limit of %d", n,
                    MSG_MAX_MESSAGES);
    int rc = 0;
    json_array_foreach(v, i, m) {
        if ((rc = parse_message(p, m, i, n, &uses)) < 0)
            break;
    }
    json_decref(uses);
    p->uses = NULL;
    return rc;
}

static int parse_system(struct parser *p) {
    char *s = NULL;
    if (text_of(p, json_object_get(p->root, "system"), "system", &s) < 0)
        return -1;
    if (!s)
        return 0;
    struct chat_message *m = next_message(p, "system");
    if (!m) {
        free(s);
        return -1;
    }
    m->content = s;
    return 0;
}

/* tools: client tools {name, description, input_schema} as OpenAI function tools. */
static int parse_tools(struct parser *p) {
    static const char *const keys[] = {"name", "description", "input_schema", "cache_control",
                                       "type", NULL};
    const json_t *v = json_object_get(p->root, "tools");
    json_t *t, *out;
    size_t j;
    char where[48];
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return fail(p->e, 400, "tools: Input should be a valid list");
    if (json_array_size(v) > MSG_MAX_TOOLS)
        return fail(p->e, 400, "tools: %zu tools, above the limit of %d", json_array_size(v),
                    MSG_MAX_TOOLS);
    if (json_array_size(v) == 0)
        return 0;
    if (!(out = json_array()))
        return oom(p);
    json_array_foreach(v, j, t) {
        snprintf(where, sizeof(where), "tools.%zu", j);
        const char *type = json_string_value(json_object_get(t, "type"));
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *schema = json_object_get(t, "input_schema");
        json_t *desc = json_object_get(t, "description");
        int rc = 0;
        if (!json_is_object(t))
            rc = fail(p->e, 400, "%s: Input should be a valid dictionary", where);
        else if (type && strcmp(type, "custom") != 0)
            rc = fail(p->e, 400, "%s.type: '%.64s' tools (run by Anthropic's servers) are not "
                      "supported: only client tools with an input_schema", where, type);
        else if (!name || !oai_valid_name(name, 128))
            rc = fail(p->e, 400, "%s.name: must be 1-128 characters of a-z, A-Z, 0-9, _ and -",
                      where);
        else if (!json_is_object(schema))
            rc = fail(p->e, 400, "%s.input_schema: Field required (a JSON Schema object)", where);
        else if (desc && !json_is_string(desc))
            rc = fail(p->e, 400, "%s.description: Input should be a valid string", where);
        else {
            snprintf(where, sizeof(where), "tools.%zu.", j);
            rc = check_keys(p, t, where, keys);
        }
        json_t *fn = rc < 0 ? NULL : json_pack("{s:s, s:{s:s, s:O}}", "type", "function",
                                               "function", "name", name, "parameters", schema);
        if (fn && desc)
            json_object_set(json_object_get(fn, "function"), "description", desc);
        if (rc == 0 && (!fn || json_array_append_new(out, fn) < 0))
            rc = oom(p);
        if (rc < 0) {
            json_decref(out);
            return -1;
        }
    }
    p->r->rq.tools_json = jsonw_dumps(out, JSONW_COMPACT);
    json_decref(out);
    return p->r->rq.tools_json ? 0 : oom(p);
}

/* The name of the only tool, or of the tool named, checked against tools. */
static const char *tool_named(const json_t *tools, const char *name) {
    size_t j;
    json_t *t;
    json_array_foreach(tools, j, t) {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n && (!name || strcmp(n, name) == 0))
            return n;
    }
    return NULL;
}

/* tool_choice {"type": auto | any | tool (with name) | none, "disable_parallel_tool_use"}. */
static int parse_tool_choice(struct parser *p) {
    static const char *const keys[] = {"type", "name", "disable_parallel_tool_use", NULL};
    const json_t *v = json_object_get(p->root, "tool_choice"), *tools;
    tools = json_object_get(p->root, "tools");
    if (!v || json_is_null(v))
        return 0;
    const char *type = json_string_value(json_object_get(v, "type"));
    const json_t *dp = json_object_get(v, "disable_parallel_tool_use");
    if (!json_is_object(v) || !type)
        return fail(p->e, 400, "tool_choice: expected {\"type\": \"auto\" | \"any\" | \"tool\" "
                    "| \"none\"}");
    if (check_keys(p, v, "tool_choice.", keys) < 0)
        return -1;
    if (dp && !json_is_boolean(dp))
        return fail(p->e, 400, "tool_choice.disable_parallel_tool_use: Input should be a valid "
                    "boolean");
    p->r->one_call = json_is_true(dp);
    if (strcmp(type, "auto") == 0)
        return 0;
    if (strcmp(type, "none") == 0)
        return (p->r->rq.tool_choice = strdup("none")) ? 0 : oom(p);
    if (strcmp(type, "any") != 0 && strcmp(type, "tool") != 0)
        return fail(p->e, 400, "tool_choice.type: Input should be 'auto', 'any', 'tool' or "
                    "'none'");
    if (json_array_size(tools) == 0)
        return fail(p->e, 400, "tool_choice: '%s' needs 'tools'", type);
    const char *name = NULL;
    if (type[0] == 't') {
        const char *want = json_string_value(json_object_get(v, "name"));
        if (!want)
            return fail(p->e, 400, "tool_choice.name: Field required");
        if (!(name = tool_named(tools, want)))
            return fail(p->e, 400, "tool_choice.name: '%.64s' is not in 'tools'", want);
    } else if (json_array_size(tools) == 1) {
        name = tool_named(tools, NULL);
    }
    p->r->force_any = !name;
    p->r->one_call = true; /* a forced call is one call */
    if (name && !(p->r->forced_tool = strdup(name)))
        return oom(p);
    return 0;
}

/* thinking {"type": "enabled", "budget_tokens"} | {"type": "disabled"} | {"type": "adaptive"}:
 * the model's thinking switch (the budget is checked as Anthropic does; max_tokens bounds it). */
static int parse_thinking(struct parser *p, int32_t max_tokens) {
    static const char *const keys[] = {"type", "budget_tokens", NULL};
    const json_t *v = json_object_get(p->root, "thinking");
    if (!v || json_is_null(v))
        return 0;
    const char *type = json_string_value(json_object_get(v, "type"));
    const json_t *budget = json_object_get(v, "budget_tokens");
    if (!json_is_object(v) || !type)
        return fail(p->e, 400, "thinking: expected {\"type\": \"enabled\", \"budget_tokens\": N} "
                    "or {\"type\": \"disabled\"}");
    if (check_keys(p, v, "thinking.", keys) < 0)
        return -1;
    if (strcmp(type, "disabled") == 0 || strcmp(type, "adaptive") == 0) {
        p->r->thinking = type[0] == 'a';
        return 0;
    }
    if (strcmp(type, "enabled") != 0)
        return fail(p->e, 400, "thinking.type: Input should be 'enabled', 'disabled' or "
                    "'adaptive'");
    if (!json_is_integer(budget) || json_integer_value(budget) < 1024)
        return fail(p->e, 400, "thinking.budget_tokens: an integer of at least 1024 is required");
    if (max_tokens > 0 && json_integer_value(budget) >= max_tokens)
        return fail(p->e, 400, "`max_tokens` must be greater than `thinking.budget_tokens`");
    p->r->thinking = true;
    return 0;
}

/* context_management (its edits clear old thinking or tool results once a context grows past a
 * threshold: the daemon keeps the whole context, its prompt cache reuses it) and output_config
 * (effort: a gpt-oss model's reasoning effort; no effect on a thinking switch). */
static int parse_config(struct parser *p) {
    static const char *const cm_keys[] = {"edits", NULL}, *const oc_keys[] = {"effort", NULL};
    static const char *const efforts[] = {"low", "medium", "high", "high", NULL};
    static const char *const names[] = {"low", "medium", "high", "max", NULL};
    const json_t *cm = json_object_get(p->root, "context_management"), *e;
    const json_t *oc = json_object_get(p->root, "output_config");
    size_t j;
    if (cm && !json_is_null(cm)) {
        if (!json_is_object(cm) || check_keys(p, cm, "context_management.", cm_keys) < 0)
            return json_is_object(cm) ? -1 : fail(p->e, 400, "context_management: Input should "
                                                  "be a valid dictionary");
        json_array_foreach(json_object_get(cm, "edits"), j, e) {
            const char *type = json_string_value(json_object_get(e, "type"));
            if (!type || strncmp(type, "clear_", 6) != 0)
                return fail(p->e, 400, "context_management.edits.%zu.type: unknown edit", j);
        }
    }
    if (!oc || json_is_null(oc))
        return 0;
    if (!json_is_object(oc))
        return fail(p->e, 400, "output_config: Input should be a valid dictionary");
    if (check_keys(p, oc, "output_config.", oc_keys) < 0)
        return -1;
    const char *effort = json_string_value(json_object_get(oc, "effort"));
    for (int i = 0; effort && names[i]; i++)
        if (strcmp(effort, names[i]) == 0)
            p->r->effort = efforts[i];
    if (json_object_get(oc, "effort") && !p->r->effort)
        return fail(p->e, 400, "output_config.effort: Input should be 'low', 'medium', 'high' "
                    "or 'max'");
    return 0;
}

/* A number in [lo, hi] at key into *out (kept when absent). */
static int get_number(struct parser *p, const char *key, double lo, double hi, float *out) {
    const json_t *v = json_object_get(p->root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi)
        return fail(p->e, 400, "%s: Input should be a number in [%g, %g]", key, lo, hi);
    *out = (float)json_number_value(v);
    return 0;
}

/* model, max_tokens, stream, sampling, stop_sequences, metadata. */
static int parse_params(struct parser *p, bool count) {
    struct oai_request *rq = &p->r->rq;
    const json_t *v = json_object_get(p->root, "model");
    if (!json_is_string(v))
        return fail(p->e, 400, "model: Field required (a string)");
    if (!(rq->model = strdup(json_string_value(v))))
        return oom(p);
    rq->max_tokens = -1;
    if (!count) {
        v = json_object_get(p->root, "max_tokens");
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1 << 24)
            return fail(p->e, 400, "max_tokens: Field required (an integer from 1)");
        rq->max_tokens = (int32_t)json_integer_value(v);
        v = json_object_get(p->root, "stream");
        if (v && !json_is_boolean(v) && !json_is_null(v))
            return fail(p->e, 400, "stream: Input should be a valid boolean");
        rq->stream = json_is_true(v);
    }
    int32_t top_k = 0;
    v = json_object_get(p->root, "top_k");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return fail(p->e, 400, "top_k: Input should be a non-negative integer");
        top_k = (int32_t)json_integer_value(v);
    }
    rq->top_k = top_k;
    if (get_number(p, "temperature", 0, 1, &rq->temperature) < 0 ||
        get_number(p, "top_p", 0, 1, &rq->top_p) < 0)
        return -1;
    v = json_object_get(p->root, "metadata");
    if (v && !json_is_object(v) && !json_is_null(v))
        return fail(p->e, 400, "metadata: Input should be a valid dictionary");
    v = json_object_get(p->root, "stop_sequences");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > OAI_MAX_STOP)
        return fail(p->e, 400, "stop_sequences: a list of at most %d strings (sniperd's limit)",
                    OAI_MAX_STOP);
    size_t j;
    json_t *s;
    json_array_foreach(v, j, s) {
        if (!json_is_string(s) || json_string_length(s) == 0 ||
            json_string_length(s) > MSG_MAX_STOP_BYTES)
            return fail(p->e, 400, "stop_sequences.%zu: a non-empty string of at most %d bytes",
                        j, MSG_MAX_STOP_BYTES);
        if (!(rq->stop[rq->n_stop++] = strdup(json_string_value(s))))
            return oom(p);
    }
    return 0;
}

static void msg_request_free(struct msg_request *r) {
    oai_request_free(&r->rq);
    free(r->forced_tool);
    memset(r, 0, sizeof(*r));
}

/* Parses a /v1/messages body (count: a count_tokens body) into r. Returns 0, or -1 with e (r
 * freed). */
static int msg_request_parse(const char *body, size_t len, bool count, struct msg_request *r,
                             struct oai_error *e) {
    json_error_t je;
    struct parser p = {.r = r, .e = e};
    int rc = -1;
    memset(r, 0, sizeof(*r));
    r->rq.chat = true;
    r->rq.temperature = 1.0f;
    r->rq.top_p = 1.0f;
    r->rq.repeat_penalty = 1.0f;
    p.root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!p.root) {
        fail(e, 400, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
             je.column);
        goto out;
    }
    if (!json_is_object(p.root)) {
        fail(e, 400, "the body must be a JSON object");
        goto out;
    }
    if (check_keys(&p, p.root, "", count ? COUNT_KEYS : MESSAGES_KEYS) < 0 ||
        parse_params(&p, count) < 0 || parse_system(&p) < 0 || parse_messages(&p) < 0 ||
        parse_tools(&p) < 0 || parse_tool_choice(&p) < 0 ||
        parse_thinking(&p, r->rq.max_tokens) < 0 || parse_config(&p) < 0)
        goto out;
    if (r->thinking && (r->forced_tool || r->force_any)) {
        fail(e, 400, "Thinking may not be enabled when tool_choice forces tool use.");
        goto out;
    }
    r->rq.enable_thinking = r->thinking;
    rc = 0;
out:
    json_decref(p.root);
    if (rc < 0)
        msg_request_free(r);
    return rc;
}

/* ---- the prompt: rendered as the OpenAI path renders it, plus an opened forced call ---------- */

/* How a forced tool call opens in family f's syntax, and how it closes (the text fed to the
 * splitter after the arguments when the grammar ended them). */
struct forced_call {
    char *open;  /* malloc'd */
    const char *close;
    bool json;   /* the arguments (or, forced to any tool, {"name","arguments"}) are one JSON
                  * object: the grammar constrains them and ends the job */
};

static int forced_call(enum chat_family f, const char *name, struct forced_call *fc,
                       struct oai_error *e) {
    int n = -1;
    memset(fc, 0, sizeof(*fc));
    switch (f) {
    case CHAT_CHATML:
        n = name ? asprintf(&fc->open, "<tool_call>\n{\"name\": \"%s\", \"arguments\": ", name)
                 : asprintf(&fc->open, "<tool_call>\n");
        fc->close = name ? "}\n</tool_call>" : "\n</tool_call>";
        fc->json = true;
        break;
    case CHAT_QWEN35:
        n = name ? asprintf(&fc->open, "<tool_call>\n<function=%s>\n", name)
                 : asprintf(&fc->open, "<tool_call>\n<function=");
        fc->close = "";
        break;
    case CHAT_GEMMA4: /* arguments in its template's notation: no JSON grammar */
    case CHAT_GEMMA4_INTERLEAVED:
        n = name ? asprintf(&fc->open, "<|tool_call>call:%s{", name)
                 : asprintf(&fc->open, "<|tool_call>call:");
        fc->close = "";
        break;
    case CHAT_HARMONY:
        n = name ? asprintf(&fc->open, " to=functions.%s<|channel|>commentary json<|message|>",
                            name)
                 : asprintf(&fc->open, " to=functions.");
        fc->close = "";
        fc->json = name != NULL;
        break;
    default:
        return fail(e, 400, "tool_choice: this model's chat template (%s) has no tool calls",
                    chat_family_name(f));
    }
    return n < 0 ? fail(e, 500, "out of memory") : 0;
}

/* The prompt's ids (malloc'd, *n of them), with the forced call's opening when fc is given, or
 * NULL with e. */
static int32_t *prompt_ids(const struct pool_model *pm, const struct msg_request *r,
                           const struct forced_call *fc, size_t *n, struct oai_error *e) {
    int32_t *ids = api_prompt_ids(pm, &r->rq, n, e);
    if (!ids || !fc || !fc->open)
        return ids;
    size_t m = 0;
    int32_t *more = tokenizer_encode(pm->tk, fc->open, strlen(fc->open), true, &m);
    int32_t *all = more ? realloc(ids, (*n + m) * sizeof(*ids)) : NULL;
    if (!all) {
        free(more);
        free(ids);
        fail(e, 500, "out of memory");
        return NULL;
    }
    memcpy(all + *n, more, m * sizeof(*ids));
    free(more);
    *n += m;
    return all;
}

/* ---- one call: the job's output as content blocks -------------------------------------------- */

enum block_kind { BLOCK_TEXT, BLOCK_THINKING, BLOCK_TOOL_USE };

struct block {
    enum block_kind kind;
    struct strbuf text;  /* text, thinking, or the tool's input (JSON text) */
    char *name;          /* tool_use: the tool */
    char id[48];         /* tool_use: toolu_... */
};

struct call {
    struct api_call call;     /* the job, its model and reply (api_call.c) */
    struct msg_request r;
    struct forced_call fc;
    char id[48];
    int32_t n_prompt;
    struct block blocks[MSG_MAX_BLOCKS];
    int n_blocks;
    bool open;                /* blocks[n_blocks - 1] is still being written (streaming) */
    int n_calls;
    struct strbuf raw;        /* the generated text, when stop sequences must be told apart */
    const char *stop_reason;
    const char *stop_sequence;
};

/* The route's state, once the runner released its parts (api_call_ops.free). */
static void call_free(void *ctx) {
    struct call *c = ctx;
    msg_request_free(&c->r);
    free(c->fc.open);
    for (int i = 0; i < c->n_blocks; i++) {
        free(c->blocks[i].text.p);
        free(c->blocks[i].name);
    }
    free(c->raw.p);
    free(c);
}

/* Sends one SSE event: "event: TYPE\ndata: JSON\n\n" (v consumed; type is its "type"). */
static void send_event(struct call *c, json_t *v) {
    char *json = v ? jsonw_dumps(v, JSONW_COMPACT) : NULL;
    const char *type = json_string_value(json_object_get(v, "type"));
    if (json && type)
        api_call_send(&c->call, type, json);
    free(json);
    json_decref(v);
}

/* A block as the message's content lists it, or as content_block_start opens it (empty). */
static json_t *block_json(const struct block *b, bool empty) {
    const char *t = b->text.p ? b->text.p : "";
    size_t n = empty ? 0 : b->text.n;
    switch (b->kind) {
    case BLOCK_TEXT:
        return json_pack("{s:s, s:o}", "type", "text", "text", jstr(t, n));
    case BLOCK_THINKING:
        return json_pack("{s:s, s:o, s:s}", "type", "thinking", "thinking", jstr(t, n),
                         "signature", "");
    default: {
        json_t *input = empty ? json_object() : json_loads(t, 0, NULL);
        return json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", b->id, "name",
                         b->name, "input", input ? input : json_object());
    }
    }
}

/* Closes the open block (streaming: content_block_stop). */
static void block_close(struct call *c) {
    if (!c->open)
        return;
    c->open = false;
    if (c->call.out)
        send_event(c, json_pack("{s:s, s:i}", "type", "content_block_stop", "index",
                                c->n_blocks - 1));
}

/* Opens a block of kind (streaming: content_block_start); NULL when there is no room. */
static struct block *block_open(struct call *c, enum block_kind kind) {
    block_close(c);
    if (c->n_blocks == MSG_MAX_BLOCKS)
        return NULL;
    struct block *b = &c->blocks[c->n_blocks++];
    b->kind = kind;
    c->open = true;
    return b;
}

/* A delta of text or thinking to the open block of its kind (opened when needed). */
static void block_text(struct call *c, enum block_kind kind, const char *text, size_t len) {
    struct block *b = c->open && c->blocks[c->n_blocks - 1].kind == kind
                          ? &c->blocks[c->n_blocks - 1] : NULL;
    if (!b && (b = block_open(c, kind)) && c->call.out)
        send_event(c, json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index",
                                c->n_blocks - 1, "content_block", block_json(b, true)));
    if (!b) /* no room: the text joins the last block */
        b = &c->blocks[c->n_blocks - 1];
    if (!c->call.out) {
        strbuf_putn(&b->text, text, len);
        return;
    }
    bool thinking = kind == BLOCK_THINKING;
    send_event(c, json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index",
                            (int)(b - c->blocks), "delta", "type",
                            thinking ? "thinking_delta" : "text_delta",
                            thinking ? "thinking" : "text", jstr(text, len)));
}

/* A whole tool call: a tool_use block (streamed as start, one input_json_delta, stop). Arguments
 * that are not a JSON object are text. */
static void block_tool(struct call *c, const char *name, const char *arguments) {
    json_t *input = json_loads(arguments, 0, NULL);
    bool object = json_is_object(input);
    json_decref(input);
    if (!object) {
        block_text(c, BLOCK_TEXT, arguments, strlen(arguments));
        return;
    }
    if ((c->r.one_call && c->n_calls > 0) || c->n_blocks == MSG_MAX_BLOCKS)
        return;
    struct block *b = block_open(c, BLOCK_TOOL_USE);
    b->name = strdup(name);
    strbuf_puts(&b->text, arguments);
    char id[sizeof(b->id)];
    snprintf(id, sizeof(id), "toolu_%.24s_%d", c->id + 4, c->n_calls++);
    memcpy(b->id, id, sizeof(id));
    if (!c->call.out)
        return;
    send_event(c, json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index",
                            c->n_blocks - 1, "content_block", block_json(b, true)));
    send_event(c, json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index",
                            c->n_blocks - 1, "delta", "type", "input_json_delta",
                            "partial_json", jstr(arguments, strlen(arguments))));
    block_close(c);
}

static void on_event(void *ctx, const struct chat_event *ev) {
    struct call *c = ctx;
    if (ev->kind == CHAT_EVENT_TOOL_CALL)
        block_tool(c, ev->name, ev->arguments);
    else if (ev->len > 0)
        block_text(c, ev->kind == CHAT_EVENT_REASONING ? BLOCK_THINKING : BLOCK_TEXT, ev->text,
                   ev->len);
}

static void on_token(void *ctx, const struct job_token *tok) {
    struct call *c = ctx;
    if (c->r.rq.n_stop == 0 || !tok)
        return;
    size_t len = 0;
    const char *p = tokenizer_piece(c->call.pm->tk, tok->id, &len);
    if (p)
        strbuf_putn(&c->raw, p, len);
}

/* Anthropic's stop_reason for the job's end (and which stop sequence, if one). */
static const char *stop_reason(struct call *c, const struct job_summary *s) {
    if (strcmp(s->finish_reason, "length") == 0)
        return "max_tokens";
    if (c->n_calls > 0)
        return "tool_use";
    const char *first = NULL;
    for (int i = 0; c->raw.p && i < c->r.rq.n_stop; i++) {
        const char *at = strstr(c->raw.p, c->r.rq.stop[i]);
        if (at && (!first || at < first)) {
            first = at;
            c->stop_sequence = c->r.rq.stop[i];
        }
    }
    return c->stop_sequence ? "stop_sequence" : "end_turn";
}

/* usage: input_tokens counts what was prefilled; the prompt cache's reuse is cache_read. */
static json_t *usage_json(const struct job_summary *s) {
    return json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", s->prompt_tokens - s->cached_tokens,
                     "cache_creation_input_tokens", 0, "cache_read_input_tokens",
                     s->cached_tokens, "output_tokens", s->completion_tokens);
}

/* The message object: whole (done) or as message_start opens it. */
static json_t *message_json(struct call *c, bool done) {
    json_t *content = json_array();
    for (int i = 0; done && content && i < c->n_blocks; i++)
        json_array_append_new(content, block_json(&c->blocks[i], false));
    struct job_summary start = {.prompt_tokens = c->n_prompt};
    return json_pack("{s:s, s:s, s:s, s:s, s:o*, s:s?, s:s?, s:o*}", "id", c->id, "type",
                     "message", "role", "assistant", "model", c->call.pm->id, "content", content,
                     "stop_reason", done ? c->stop_reason : NULL, "stop_sequence",
                     done ? c->stop_sequence : NULL, "usage",
                     usage_json(done ? &c->call.sum : &start));
}

static void on_done(void *ctx, const struct job_summary *s) {
    struct call *c = ctx;
    bool ended = s->rc == 0 && strcmp(s->finish_reason, "cancelled") != 0;
    if (ended && c->fc.close)
        api_call_feed(&c->call, c->fc.close, strlen(c->fc.close));
    api_call_finish(&c->call);
    block_close(c);
    c->call.sum = *s;
    c->stop_reason = stop_reason(c, s);
    if (c->call.out) {
        if (s->rc < 0) {
            send_event(c, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
                                    "api_error", "message", strerror(-s->rc)));
        } else if (ended) {
            send_event(c, json_pack("{s:s, s:{s:s, s:s?}, s:o*}", "type", "message_delta",
                                    "delta", "stop_reason", c->stop_reason, "stop_sequence",
                                    c->stop_sequence, "usage", usage_json(s)));
            send_event(c, json_pack("{s:s}", "type", "message_stop"));
        }
    }
}

static const struct api_call_ops call_ops = {on_token, NULL, on_event, on_done, call_free};

/* ---- the routes ------------------------------------------------------------------------------ */

static bool key_equal(const char *key, const char *got) {
    size_t n = strlen(key), m = got ? strlen(got) : 0;
    unsigned char diff = (unsigned char)(n != m || !got);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(key[i] ^ (i < m ? got[i] : 0));
    return diff == 0;
}

bool api_messages_key_ok(const struct api *a, const struct http_request *rq) {
    const char *bearer = rq->authorization;
    if (!a->key)
        return true;
    if (bearer && strncmp(bearer, "Bearer ", 7) == 0 && key_equal(a->key, bearer + 7))
        return true;
    return rq->api_key && key_equal(a->key, rq->api_key);
}

/* The job's parameters for r. */
static struct job_params job_params_of(const struct call *c, int32_t max_tokens) {
    struct job_params p = {.max_tokens = max_tokens, .n_stop = c->r.rq.n_stop,
                           .json_object = c->fc.json};
    p.sp = sampler_params_default();
    p.sp.temp = c->r.rq.temperature;
    p.sp.top_p = c->r.rq.top_p;
    p.sp.top_k = c->r.rq.top_k;
    p.sp.seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)c;
    for (int i = 0; i < c->r.rq.n_stop; i++)
        p.stop[i] = c->r.rq.stop[i];
    return p;
}

/* Parses the request and builds its prompt: c->r, c->call.pm, c->fc, the ids (malloc'd, *n). */
static int32_t *call_prepare(struct call *c, const struct http_request *hr, bool count, size_t *n,
                             struct oai_error *e) {
    if (msg_request_parse(hr->body, hr->body_len, count, &c->r, e) < 0)
        return NULL;
    struct oai_error oe; /* the shared code's errors, OpenAI-typed: retyped by status */
    if (!(c->call.pm = api_model(c->call.api, c->r.rq.model, &oe))) {
        fail(e, oe.status, "%s", oe.message);
        return NULL;
    }
    if (c->call.pm->family == CHAT_HARMONY)
        c->r.rq.reasoning_effort = c->r.effort;
    if ((c->r.forced_tool || c->r.force_any) &&
        forced_call(c->call.pm->family, c->r.forced_tool, &c->fc, e) < 0)
        return NULL;
    int32_t *ids = prompt_ids(c->call.pm, &c->r, c->fc.open ? &c->fc : NULL, n, &oe);
    if (!ids)
        fail(e, oe.status, "%s", oe.message);
    return ids;
}

static void handle_messages(struct api *a, const struct http_request *hr, bool count,
                            struct http_response *out) {
    struct oai_error e;
    size_t n = 0;
    int32_t *ids = NULL;
    struct call *c = calloc(1, sizeof(*c));
    if (!c) {
        reply_fail(out, 500, "out of memory");
        return;
    }
    api_call_init(&c->call, a, &call_ops, c);
    if (!(ids = call_prepare(c, hr, count, &n, &e))) {
        reply_error(out, &e);
        goto done;
    }
    if (count) {
        json_t *v = json_pack("{s:I}", "input_tokens", (json_int_t)n);
        api_reply_json(out, 200, v ? jsonw_dumps(v, JSONW_COMPACT) : NULL);
        json_decref(v);
        goto done;
    }
    /* max_tokens is a cap (Claude Code asks for 64,000): the context's room bounds it */
    const int32_t n_ctx = c->call.pm->n_ctx;
    if ((int64_t)n >= n_ctx) {
        fail(&e, 400, "prompt is too long: %zu tokens > %d maximum (this model's context)", n,
             n_ctx - 1);
        reply_error(out, &e);
        goto done;
    }
    const int32_t room = n_ctx - (int32_t)n;
    const int32_t max_tokens = c->r.rq.max_tokens < room ? c->r.rq.max_tokens : room;
    c->n_prompt = (int32_t)n;
    snprintf(c->id, sizeof(c->id), "msg_%016" PRIxFAST64 "%08x",
             atomic_fetch_add(&a->next_id, 1) ^ ((uint_fast64_t)time(NULL) << 20),
             (unsigned)(uintptr_t)c);
    const struct job_params p = job_params_of(c, max_tokens);
    if (api_call_job(&c->call, ids, n, &p, true, c->r.rq.enable_thinking) < 0 ||
        (c->r.rq.stream && api_call_stream(&c->call) < 0)) {
        reply_fail(out, 500, "out of memory");
        goto done;
    }
    if (c->fc.open) /* the splitter reads the call's opening as if the model had written it */
        api_call_feed(&c->call, c->fc.open, strlen(c->fc.open));
    if (c->call.out) {
        send_event(c, json_pack("{s:s, s:o*}", "type", "message_start", "message",
                                message_json(c, false)));
        send_event(c, json_pack("{s:s}", "type", "ping"));
    }
    if (api_call_run(&c->call, hr, "text/event-stream", out) < 0) {
        reply_fail(out, 503, "Overloaded: too many requests queued; try again shortly");
    } else if (c->r.rq.stream) {
        /* the reply is the stream */
    } else if (c->call.sum.rc < 0) {
        fail(&e, 500, "generation failed: %s", strerror(-c->call.sum.rc));
        reply_error(out, &e);
    } else {
        json_t *m = message_json(c, true);
        api_reply_json(out, 200, m ? jsonw_dumps(m, JSONW_COMPACT) : NULL);
        json_decref(m);
    }
done:
    free(ids);
    api_call_unref(&c->call);
}

bool api_messages_path(const char *path) {
    return strcmp(path, "/v1/messages") == 0 || strcmp(path, "/v1/messages/count_tokens") == 0;
}

void api_messages_handle(struct api *a, const struct http_request *rq, struct http_response *out) {
    pthread_mutex_lock(&a->mu);
    bool ready = a->ready, draining = a->draining;
    pthread_mutex_unlock(&a->mu);
    if (strcmp(rq->method, "POST") != 0)
        reply_fail(out, 405, "this path takes POST");
    else if (!api_messages_key_ok(a, rq))
        reply_fail(out, 401, "invalid x-api-key: send the daemon's key as x-api-key or "
                   "Authorization: Bearer");
    else if (!ready)
        reply_fail(out, 503, "the model is still loading");
    else if (draining)
        reply_fail(out, 503, "this server is shutting down; send the request to another replica");
    else
        handle_messages(a, rq, strcmp(rq->path, "/v1/messages/count_tokens") == 0, out);
}
