/* chat.c - chat templates (ChatML as Qwen3's template writes it, Qwen3.5's, Llama 3, gpt-oss's
 * harmony) and the splitter of the model's output into content, reasoning and tool calls.
 *
 * Invariants: chat_render's output is byte for byte what the family's Jinja template renders (with
 * tojson as Hugging Face and llama.cpp define it: keys in their order, ", " and ": " separators,
 * non-ASCII kept); tests/chat/expected.json pins it. The stream splitter never emits text that
 * could still turn out to be the start of a tag. */
#include "chat.h"
#include "jsonw.h"
#include "strbuf.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------------
 * A growable string; an allocation failure is remembered and reported once at the end.
 * ------------------------------------------------------------------------------------------- */

/* Appends v as the templates' tojson writes it (Python's json.dumps, ensure_ascii=False). */
static void sb_put_json(struct strbuf *b, const json_t *v) {
    char *s = jsonw_dumps(v, JSONW_PYTHON);
    if (!s) {
        b->oom = true;
        return;
    }
    strbuf_puts(b, s);
    free(s);
}

static int fail(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t err_len, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Family
 * ------------------------------------------------------------------------------------------- */

enum chat_family chat_family_detect(const char *jinja_template) {
    if (jinja_template && strstr(jinja_template, "<|start_header_id|>") &&
        strstr(jinja_template, "<|eot_id|>"))
        return CHAT_LLAMA3;
    /* gpt-oss's: messages on channels (llama.cpp detects it by the same marker) */
    if (jinja_template && strstr(jinja_template, "<|channel|>"))
        return CHAT_HARMONY;
    /* Qwen3.5's: XML-style tool calls, and a generation prompt that opens <think> */
    if (jinja_template && strstr(jinja_template, "<|im_start|>") &&
        strstr(jinja_template, "<function=") && strstr(jinja_template, "'<think>\\n'"))
        return CHAT_QWEN35;
    return CHAT_CHATML;
}

int chat_family_from_name(const char *name) {
    for (int f = 0; name && f < CHAT_N_FAMILIES; f++)
        if (strcmp(name, chat_family_name((enum chat_family)f)) == 0)
            return f;
    return -1;
}

const char *chat_family_name(enum chat_family f) {
    return f == CHAT_LLAMA3    ? "llama3"
           : f == CHAT_QWEN35  ? "qwen35"
           : f == CHAT_HARMONY ? "harmony"
                               : "chatml";
}

const char *chat_family_message_start(enum chat_family f) {
    return f == CHAT_LLAMA3    ? "<|start_header_id|>"
           : f == CHAT_HARMONY ? "<|start|>"
                               : "<|im_start|>";
}

/* ---------------------------------------------------------------------------------------------
 * Checks common to both families
 * ------------------------------------------------------------------------------------------- */

static bool is_role(const struct chat_message *m, const char *role) {
    return m->role && strcmp(m->role, role) == 0;
}

static const char *text_of(const char *s) { return s ? s : ""; }

/* Each role is known; with tool calling (ChatML), each tool message follows an assistant's tool
 * calls or another tool message. Returns 0 or -1 with err. */
static int check_messages(enum chat_family f, const struct chat_message *msgs, size_t n, char *err,
                          size_t err_len) {
    if (n == 0)
        return fail(err, err_len, "no messages");
    for (size_t i = 0; i < n; i++) {
        const struct chat_message *m = &msgs[i];
        if (!is_role(m, "system") && !is_role(m, "user") && !is_role(m, "assistant") &&
            !is_role(m, "tool"))
            return fail(err, err_len, "messages[%zu]: unknown role '%s'", i, text_of(m->role));
        if (f != CHAT_LLAMA3 && is_role(m, "tool") &&
            (i == 0 || !(is_role(&msgs[i - 1], "tool") ||
                         (is_role(&msgs[i - 1], "assistant") && msgs[i - 1].tool_calls_json))))
            return fail(err, err_len, "messages[%zu]: a tool message without a preceding tool call",
                        i);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * ChatML as Qwen3's template writes it
 * ------------------------------------------------------------------------------------------- */

static bool starts_with(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && memcmp(s + n - m, suf, m) == 0;
}

/* The last occurrence of needle in s[0..n), or NULL. */
static const char *rfind(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = n; i >= m; i--)
        if (memcmp(s + i - m, needle, m) == 0)
            return s + i - m;
    return NULL;
}

/* A span of a string (Python's slices and strips work on these). */
struct span {
    const char *p;
    size_t n;
};

static struct span lstrip_nl(struct span s) {
    while (s.n && s.p[0] == '\n')
        s.p++, s.n--;
    return s;
}

static struct span rstrip_nl(struct span s) {
    while (s.n && s.p[s.n - 1] == '\n')
        s.n--;
    return s;
}

/* A user message that is really a tool response (the template's multi-step rule). */
static bool is_tool_response(const char *content) {
    return starts_with(content, "<tool_response>") && ends_with(content, "</tool_response>");
}

/* The index of the last real user query (the template's ns.last_query_index). */
static size_t last_query_index(const struct chat_message *msgs, size_t n) {
    for (size_t i = n; i-- > 0;)
        if (is_role(&msgs[i], "user") && !is_tool_response(text_of(msgs[i].content)))
            return i;
    return n - 1;
}

static int chatml_tools_header(struct strbuf *b, const struct chat_message *msgs, const json_t *tools) {
    size_t i;
    json_t *tool;
    strbuf_puts(b, "<|im_start|>system\n");
    if (is_role(&msgs[0], "system")) {
        strbuf_puts(b, text_of(msgs[0].content));
        strbuf_puts(b, "\n\n");
    }
    strbuf_puts(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n"
               "<tools>");
    json_array_foreach(tools, i, tool) {
        strbuf_puts(b, "\n");
        sb_put_json(b, tool);
    }
    strbuf_puts(b, "\n</tools>\n\nFor each function call, return a json object with function name and "
               "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
               "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
    return 0;
}

/* One assistant tool call as <tool_call>{"name": ..., "arguments": ...}</tool_call>. */
static int chatml_tool_call(struct strbuf *b, const json_t *call, size_t idx, char *err,
                            size_t err_len) {
    const json_t *fn = json_object_get(call, "function");
    if (json_is_object(fn) && json_object_size(fn) > 0)
        call = fn;
    const json_t *name = json_object_get(call, "name");
    const json_t *args = json_object_get(call, "arguments");
    if (!json_is_string(name) || !args)
        return fail(err, err_len, "tool_calls[%zu]: no function name or arguments", idx);
    strbuf_puts(b, "<tool_call>\n{\"name\": \"");
    strbuf_puts(b, json_string_value(name));
    strbuf_puts(b, "\", \"arguments\": ");
    if (json_is_string(args))
        strbuf_putn(b, json_string_value(args), json_string_length(args));
    else
        sb_put_json(b, args);
    strbuf_puts(b, "}\n</tool_call>");
    return 0;
}

static int chatml_tool_calls(struct strbuf *b, const char *calls_json, bool has_content, char *err,
                             size_t err_len) {
    json_error_t je;
    json_t *calls = json_loads(calls_json, 0, &je);
    int rc = 0;
    if (!json_is_array(calls)) {
        json_decref(calls);
        return fail(err, err_len, "tool_calls: not a JSON array");
    }
    for (size_t i = 0; i < json_array_size(calls) && rc == 0; i++) {
        if ((i == 0 && has_content) || i > 0)
            strbuf_puts(b, "\n");
        if (!json_is_object(json_array_get(calls, i)))
            rc = fail(err, err_len, "tool_calls[%zu]: not an object", i);
        else
            rc = chatml_tool_call(b, json_array_get(calls, i), i, err, err_len);
    }
    json_decref(calls);
    return rc;
}

/* The assistant turn: reasoning kept (in <think>) only after the last user query. */
static int chatml_assistant(struct strbuf *b, const struct chat_message *msgs, size_t n, size_t i,
                            size_t last_query, char *err, size_t err_len) {
    const struct chat_message *m = &msgs[i];
    const char *raw = text_of(m->content);
    struct span content = {raw, strlen(raw)}, reasoning = {"", 0};
    if (m->reasoning_content) {
        reasoning = (struct span){m->reasoning_content, strlen(m->reasoning_content)};
    } else if (strstr(raw, "</think>")) {
        const char *last_end = rfind(raw, content.n, "</think>");
        content = lstrip_nl((struct span){last_end + 8, strlen(last_end + 8)});
        struct span before = rstrip_nl((struct span){raw, (size_t)(strstr(raw, "</think>") - raw)});
        const char *open = rfind(before.p, before.n, "<think>");
        if (open)
            before = (struct span){open + 7, before.n - (size_t)(open + 7 - before.p)};
        reasoning = lstrip_nl(before);
    }
    bool has_content = content.n > 0; /* the template's `content`, before the lstrip below */
    strbuf_puts(b, "<|im_start|>assistant\n");
    if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
        struct span r = rstrip_nl(lstrip_nl(reasoning));
        strbuf_puts(b, "<think>\n");
        strbuf_putn(b, r.p, r.n);
        strbuf_puts(b, "\n</think>\n\n");
        content = lstrip_nl(content);
    }
    strbuf_putn(b, content.p, content.n);
    if (m->tool_calls_json &&
        chatml_tool_calls(b, m->tool_calls_json, has_content, err, err_len) < 0)
        return -1;
    strbuf_puts(b, "<|im_end|>\n");
    return 0;
}

static void chatml_tool_result(struct strbuf *b, const struct chat_message *msgs, size_t n, size_t i) {
    if (i == 0 || !is_role(&msgs[i - 1], "tool"))
        strbuf_puts(b, "<|im_start|>user");
    strbuf_puts(b, "\n<tool_response>\n");
    strbuf_puts(b, text_of(msgs[i].content));
    strbuf_puts(b, "\n</tool_response>");
    if (i == n - 1 || !is_role(&msgs[i + 1], "tool"))
        strbuf_puts(b, "<|im_end|>\n");
}

static int chatml_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                         const struct chat_render_opts *opts, const json_t *tools, char *err,
                         size_t err_len) {
    if (tools && json_array_size(tools) > 0)
        chatml_tools_header(b, msgs, tools);
    else if (is_role(&msgs[0], "system")) {
        strbuf_puts(b, "<|im_start|>system\n");
        strbuf_puts(b, text_of(msgs[0].content));
        strbuf_puts(b, "<|im_end|>\n");
    }
    size_t last_query = last_query_index(msgs, n);
    for (size_t i = 0; i < n; i++) {
        const struct chat_message *m = &msgs[i];
        if (is_role(m, "user") || (is_role(m, "system") && i > 0)) {
            strbuf_puts(b, "<|im_start|>");
            strbuf_puts(b, m->role);
            strbuf_puts(b, "\n");
            strbuf_puts(b, text_of(m->content));
            strbuf_puts(b, "<|im_end|>\n");
        } else if (is_role(m, "assistant")) {
            if (chatml_assistant(b, msgs, n, i, last_query, err, err_len) < 0)
                return -1;
        } else if (is_role(m, "tool")) {
            chatml_tool_result(b, msgs, n, i);
        }
    }
    if (opts->add_generation_prompt) {
        strbuf_puts(b, "<|im_start|>assistant\n");
        if (!opts->enable_thinking)
            strbuf_puts(b, "<think>\n\n</think>\n\n");
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Llama 3, from Meta's published prompt format: <|begin_of_text|>, then per message
 * <|start_header_id|>role<|end_header_id|>\n\n + content (whitespace-trimmed) + <|eot_id|>.
 * Tool results use Llama 3.1's "ipython" role; tools and assistant tool calls are not supported.
 * ------------------------------------------------------------------------------------------- */

static bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static void llama3_header(struct strbuf *b, const char *role) {
    strbuf_puts(b, "<|start_header_id|>");
    strbuf_puts(b, role);
    strbuf_puts(b, "<|end_header_id|>\n\n");
}

static int llama3_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                         const struct chat_render_opts *opts, const json_t *tools, char *err,
                         size_t err_len) {
    if (tools && json_array_size(tools) > 0)
        return fail(err, err_len, "tools are not supported with the llama3 chat template");
    strbuf_puts(b, "<|begin_of_text|>");
    for (size_t i = 0; i < n; i++) {
        const struct chat_message *m = &msgs[i];
        if (m->tool_calls_json)
            return fail(err, err_len,
                        "messages[%zu]: tool calls are not supported with the llama3 template", i);
        const char *c = text_of(m->content);
        size_t len = strlen(c);
        while (len && is_space(c[len - 1]))
            len--;
        while (len && is_space(*c))
            c++, len--;
        llama3_header(b, is_role(m, "tool") ? "ipython" : m->role);
        strbuf_putn(b, c, len);
        strbuf_puts(b, "<|eot_id|>");
    }
    if (opts->add_generation_prompt)
        llama3_header(b, "assistant");
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Qwen3.5's template: ChatML with every content whitespace-trimmed, the tools' instructions in an
 * XML calling format, a <think> block on every assistant turn after the last user query, and a
 * generation prompt that opens <think> (or closes an empty one with thinking off).
 * ------------------------------------------------------------------------------------------- */

/* Python's str.strip() on ASCII whitespace (the template's |trim). */
static struct span trim_span(struct span r) {
    while (r.n && is_space(r.p[0]))
        r.p++, r.n--;
    while (r.n && is_space(r.p[r.n - 1]))
        r.n--;
    return r;
}

static struct span trim_ws(const char *s) { return trim_span((struct span){s, strlen(s)}); }

static void put_span(struct strbuf *b, struct span s) { strbuf_putn(b, s.p, s.n); }

static const char QWEN35_TOOLS_HOWTO[] =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...>"
    "</function> block must be nested within <tool_call></tool_call> XML tags\n- Required "
    "parameters MUST be specified\n- You may provide optional reasoning for your function call in "
    "natural language BEFORE the function call, but NOT after\n- If there is no function call "
    "available, answer the question like normal with your current knowledge and do not tell the "
    "user about function calls\n</IMPORTANT>";

static void qwen35_system(struct strbuf *b, const struct chat_message *msgs, const json_t *tools) {
    bool has_sys = is_role(&msgs[0], "system");
    struct span sys = trim_ws(has_sys ? text_of(msgs[0].content) : "");
    if (!tools || json_array_size(tools) == 0) {
        if (has_sys) {
            strbuf_puts(b, "<|im_start|>system\n");
            put_span(b, sys);
            strbuf_puts(b, "<|im_end|>\n");
        }
        return;
    }
    size_t i;
    json_t *tool;
    strbuf_puts(b, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n"
               "<tools>");
    json_array_foreach(tools, i, tool) {
        strbuf_puts(b, "\n");
        sb_put_json(b, tool);
    }
    strbuf_puts(b, "\n</tools>");
    strbuf_puts(b, QWEN35_TOOLS_HOWTO);
    if (sys.n) {
        strbuf_puts(b, "\n\n");
        put_span(b, sys);
    }
    strbuf_puts(b, "<|im_end|>\n");
}

/* A JSON value as a template's string conversion writes it (Python's str()): strings as they
 * are, objects and arrays as tojson, other scalars as True, False, None, 3, 1.5. */
static void put_py_str(struct strbuf *b, const json_t *v) {
    char num[64];
    if (json_is_string(v))
        strbuf_putn(b, json_string_value(v), json_string_length(v));
    else if (json_is_object(v) || json_is_array(v))
        sb_put_json(b, v);
    else if (json_is_boolean(v))
        strbuf_puts(b, json_is_true(v) ? "True" : "False");
    else if (json_is_null(v))
        strbuf_puts(b, "None");
    else if (json_is_integer(v)) {
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        strbuf_puts(b, num);
    } else
        sb_put_json(b, v); /* a real: Python's repr, as tojson writes it */
}

/* One tool call as <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...; arguments
 * are a JSON object (or a JSON text of one, as the OpenAI API carries them). */
static int qwen35_tool_call(struct strbuf *b, const json_t *call, size_t idx, const char *lead,
                            char *err, size_t err_len) {
    const json_t *fn = json_object_get(call, "function");
    if (json_is_object(fn) && json_object_size(fn) > 0)
        call = fn;
    const json_t *name = json_object_get(call, "name"), *args = json_object_get(call, "arguments");
    json_t *parsed = NULL;
    if (json_is_string(args))
        args = parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
    if (!json_is_string(name) || !json_is_object(args)) {
        json_decref(parsed);
        return fail(err, err_len, "tool_calls[%zu]: no function name or arguments object", idx);
    }
    const char *key;
    const json_t *v;
    strbuf_puts(b, lead);
    strbuf_puts(b, "<tool_call>\n<function=");
    strbuf_puts(b, json_string_value(name));
    strbuf_puts(b, ">\n");
    json_object_foreach((json_t *)args, key, v) {
        strbuf_puts(b, "<parameter=");
        strbuf_puts(b, key);
        strbuf_puts(b, ">\n");
        put_py_str(b, v);
        strbuf_puts(b, "\n</parameter>\n");
    }
    strbuf_puts(b, "</function>\n</tool_call>");
    json_decref(parsed);
    return 0;
}

static int qwen35_tool_calls(struct strbuf *b, const char *calls_json, bool has_content, char *err,
                             size_t err_len) {
    json_t *calls = json_loads(calls_json, 0, NULL);
    int rc = json_is_array(calls) ? 0 : fail(err, err_len, "tool_calls: not a JSON array");
    for (size_t i = 0; rc == 0 && i < json_array_size(calls); i++) {
        const char *lead = i > 0 ? "\n" : has_content ? "\n\n" : "";
        if (!json_is_object(json_array_get(calls, i)))
            rc = fail(err, err_len, "tool_calls[%zu]: not an object", i);
        else
            rc = qwen35_tool_call(b, json_array_get(calls, i), i, lead, err, err_len);
    }
    json_decref(calls);
    return rc;
}

/* The assistant turn: reasoning from the field or from <think> in the content, always in a
 * <think> block after the last user query, dropped before it. */
static int qwen35_assistant(struct strbuf *b, const struct chat_message *m, bool after_query,
                            char *err, size_t err_len) {
    struct span content = trim_ws(text_of(m->content)), reasoning = {"", 0};
    if (m->reasoning_content) {
        reasoning = (struct span){m->reasoning_content, strlen(m->reasoning_content)};
    } else {
        const char *end = memmem(content.p, content.n, "</think>", 8);
        if (end) {
            const char *last = rfind(content.p, content.n, "</think>");
            struct span before = rstrip_nl((struct span){content.p, (size_t)(end - content.p)});
            const char *open = rfind(before.p, before.n, "<think>");
            if (open)
                before = (struct span){open + 7, before.n - (size_t)(open + 7 - before.p)};
            reasoning = lstrip_nl(before);
            content = lstrip_nl((struct span){last + 8, content.n - (size_t)(last + 8 - content.p)});
        }
    }
    strbuf_puts(b, "<|im_start|>assistant\n");
    if (after_query) {
        strbuf_puts(b, "<think>\n");
        put_span(b, trim_span(reasoning));
        strbuf_puts(b, "\n</think>\n\n");
    }
    put_span(b, content);
    bool has_content = trim_span(content).n > 0;
    if (m->tool_calls_json &&
        qwen35_tool_calls(b, m->tool_calls_json, has_content, err, err_len) < 0)
        return -1;
    strbuf_puts(b, "<|im_end|>\n");
    return 0;
}

static void qwen35_tool_result(struct strbuf *b, const struct chat_message *msgs, size_t n,
                               size_t i) {
    if (i > 0 && !is_role(&msgs[i - 1], "tool"))
        strbuf_puts(b, "<|im_start|>user");
    strbuf_puts(b, "\n<tool_response>\n");
    put_span(b, trim_ws(text_of(msgs[i].content)));
    strbuf_puts(b, "\n</tool_response>");
    if (i == n - 1 || !is_role(&msgs[i + 1], "tool"))
        strbuf_puts(b, "<|im_end|>\n");
}

/* The last user message that is not a tool response, or -1 (the template refuses that). */
static long qwen35_last_query(const struct chat_message *msgs, size_t n) {
    for (size_t i = n; i-- > 0;) {
        if (!is_role(&msgs[i], "user"))
            continue;
        struct span c = trim_ws(text_of(msgs[i].content));
        bool wrapped = c.n >= 32 && starts_with(c.p, "<tool_response>") &&
                       memcmp(c.p + c.n - 16, "</tool_response>", 16) == 0;
        if (!wrapped)
            return (long)i;
    }
    return -1;
}

static int qwen35_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                         const struct chat_render_opts *opts, const json_t *tools, char *err,
                         size_t err_len) {
    long last_query = qwen35_last_query(msgs, n);
    if (last_query < 0)
        return fail(err, err_len, "no user query in the messages (Qwen3.5's template needs one)");
    qwen35_system(b, msgs, tools);
    for (size_t i = 0; i < n; i++) {
        const struct chat_message *m = &msgs[i];
        if (is_role(m, "system") && i > 0) {
            return fail(err, err_len, "messages[%zu]: a system message must be the first "
                        "(Qwen3.5's template)", i);
        } else if (is_role(m, "user")) {
            strbuf_puts(b, "<|im_start|>user\n");
            put_span(b, trim_ws(text_of(m->content)));
            strbuf_puts(b, "<|im_end|>\n");
        } else if (is_role(m, "assistant")) {
            if (qwen35_assistant(b, m, (long)i > last_query, err, err_len) < 0)
                return -1;
        } else if (is_role(m, "tool")) {
            qwen35_tool_result(b, msgs, n, i);
        }
    }
    if (opts->add_generation_prompt)
        strbuf_puts(b, opts->enable_thinking ? "<|im_start|>assistant\n<think>\n"
                                             : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * gpt-oss's harmony format, as the chat template of its GGUFs renders it, with the messages as
 * llama.cpp hands them over: reasoning_content as the template's "thinking" (an assistant message
 * with reasoning and tool calls then loses its content), arguments as objects. A system block
 * (date, reasoning effort, channels), the first system message and the tools (as TypeScript) in a
 * developer block, then <|start|>ROLE...<|message|>TEXT<|end|> per message; earlier replies keep
 * only their final channel, a tool call is a commentary message to functions.NAME.
 * ------------------------------------------------------------------------------------------- */

#define HARMONY_MAX_DEPTH 16 /* nested schemas deeper than this render as "any" */

/* Jinja's truthiness of a JSON value (absent, null, false, 0, "", [] and {} are false). */
static bool truthy(const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v))
        return false;
    if (json_is_string(v))
        return json_string_length(v) > 0;
    if (json_is_array(v))
        return json_array_size(v) > 0;
    if (json_is_object(v))
        return json_object_size(v) > 0;
    if (json_is_integer(v))
        return json_integer_value(v) != 0;
    return !json_is_real(v) || json_real_value(v) != 0.0;
}

static bool str_is(const json_t *v, const char *s) {
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* name is in a schema's "required" list. */
static bool is_required(const json_t *required, const char *name) {
    size_t i;
    json_t *r;
    json_array_foreach(required, i, r) {
        if (str_is(r, name))
            return true;
    }
    return false;
}

/* Characters (code points) of a UTF-8 string: Jinja's |length. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static void put_join(struct strbuf *b, const json_t *arr, const char *sep) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (i)
            strbuf_puts(b, sep);
        put_py_str(b, v);
    }
}

static void ts_type(struct strbuf *b, const json_t *spec, int depth);

/* An array's element type: named for the primitives, else the inner type unless it is long. */
static void ts_array(struct strbuf *b, const json_t *spec, int depth) {
    const json_t *items = json_object_get(spec, "items"), *it = json_object_get(items, "type");
    if (!truthy(items)) {
        strbuf_puts(b, "any[]");
    } else if (str_is(it, "string") || str_is(it, "boolean")) {
        strbuf_puts(b, json_string_value(it));
        strbuf_puts(b, "[]");
    } else if (str_is(it, "number") || str_is(it, "integer")) {
        strbuf_puts(b, "number[]");
    } else {
        struct strbuf inner = {0};
        ts_type(&inner, items, depth + 1);
        const char *t = inner.p ? inner.p : "";
        b->oom |= inner.oom;
        if (strcmp(t, "object | object") == 0 || utf8_chars(t) > 50)
            strbuf_puts(b, "any[]");
        else {
            strbuf_puts(b, t);
            strbuf_puts(b, "[]");
        }
        free(inner.p);
    }
    if (truthy(json_object_get(spec, "nullable")))
        strbuf_puts(b, " | null");
}

/* oneOf: the variants in turn, each with its description and default (the template's layout,
 * newline and indentation included). */
static void ts_one_of(struct strbuf *b, const json_t *variants, int depth) {
    size_t i;
    json_t *v;
    json_array_foreach(variants, i, v) {
        ts_type(b, v, depth + 1);
        const json_t *desc = json_object_get(v, "description"), *def = json_object_get(v, "default");
        if (truthy(desc)) {
            strbuf_puts(b, "// ");
            put_py_str(b, desc);
        }
        if (def) {
            strbuf_puts(b, "                    // default: ");
            sb_put_json(b, def);
        }
        if (i + 1 < json_array_size(variants))
            strbuf_puts(b, " | \n");
    }
}

/* A nested object: its properties on one line each after a line break and 16 spaces. */
static void ts_object(struct strbuf *b, const json_t *spec, int depth) {
    const json_t *props = json_object_get(spec, "properties");
    const json_t *required = json_object_get(spec, "required");
    const char *key;
    json_t *v;
    size_t k = 0;
    if (!truthy(props) || !json_is_object(props)) {
        strbuf_puts(b, "object");
        return;
    }
    strbuf_puts(b, "{\n");
    json_object_foreach((json_t *)props, key, v) {
        strbuf_puts(b, key);
        strbuf_puts(b, is_required(required, key) ? ": \n                "
                                                  : "?: \n                ");
        ts_type(b, v, depth + 1);
        if (++k < json_object_size(props))
            strbuf_puts(b, ", ");
    }
    strbuf_puts(b, "}");
}

/* A JSON schema as the template's render_typescript_type writes it. */
static void ts_type(struct strbuf *b, const json_t *spec, int depth) {
    const json_t *type = json_object_get(spec, "type");
    bool nullable = truthy(json_object_get(spec, "nullable"));
    if (depth > HARMONY_MAX_DEPTH || !json_is_object(spec)) {
        strbuf_puts(b, "any");
    } else if (str_is(type, "array")) {
        ts_array(b, spec, depth);
    } else if (json_is_array(type) && json_array_size(type) > 0) {
        put_join(b, type, " | ");
    } else if (truthy(json_object_get(spec, "oneOf"))) {
        ts_one_of(b, json_object_get(spec, "oneOf"), depth);
    } else if (str_is(type, "string")) {
        const json_t *e = json_object_get(spec, "enum");
        if (truthy(e) && json_is_array(e)) {
            strbuf_puts(b, "\"");
            put_join(b, e, "\" | \"");
            strbuf_puts(b, "\"");
        } else {
            strbuf_puts(b, nullable ? "string | null" : "string");
        }
    } else if (str_is(type, "number") || str_is(type, "integer")) {
        strbuf_puts(b, "number");
    } else if (str_is(type, "boolean")) {
        strbuf_puts(b, "boolean");
    } else if (str_is(type, "object")) {
        ts_object(b, spec, depth);
    } else {
        strbuf_puts(b, "any");
    }
}

/* One parameter line of a function's type: its description, name, type, default. */
static void harmony_param(struct strbuf *b, const char *name, const json_t *spec,
                          const json_t *required) {
    const json_t *desc = json_object_get(spec, "description"), *def = json_object_get(spec, "default");
    if (truthy(desc)) {
        strbuf_puts(b, "// ");
        put_py_str(b, desc);
        strbuf_puts(b, "\n");
    }
    strbuf_puts(b, name);
    strbuf_puts(b, is_required(required, name) ? ": " : "?: ");
    ts_type(b, spec, 0);
    if (def && truthy(json_object_get(spec, "enum"))) { /* the template's string concatenations */
        strbuf_puts(b, ", // default: ");
        put_py_str(b, def);
    } else if (def && truthy(json_object_get(spec, "oneOf"))) {
        strbuf_puts(b, "// default: ");
        put_py_str(b, def);
    } else if (def) {
        strbuf_puts(b, ", // default: ");
        sb_put_json(b, def);
    }
    strbuf_puts(b, ",\n");
}

/* The tools as the namespace "functions" of TypeScript function types. Returns 0 or -1 (err). */
static int harmony_tools(struct strbuf *b, const json_t *tools, char *err, size_t err_len) {
    size_t i;
    json_t *tool;
    strbuf_puts(b, "# Tools\n\n## functions\n\nnamespace functions {\n\n");
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        const json_t *name = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
        const json_t *props = json_object_get(params, "properties");
        if (!json_is_string(name))
            return fail(err, err_len, "tools[%zu]: no function name", i);
        strbuf_puts(b, "// ");
        if (json_object_get(fn, "description"))
            put_py_str(b, json_object_get(fn, "description"));
        strbuf_puts(b, "\ntype ");
        strbuf_puts(b, json_string_value(name));
        if (!truthy(props) || !json_is_object(props)) {
            strbuf_puts(b, " = () => any;\n\n");
            continue;
        }
        strbuf_puts(b, " = (_: {\n");
        const char *key;
        json_t *spec;
        json_object_foreach((json_t *)props, key, spec) {
            harmony_param(b, key, spec, json_object_get(params, "required"));
        }
        strbuf_puts(b, "}) => any;\n\n");
    }
    strbuf_puts(b, "} // namespace functions");
    return 0;
}

/* YYYY-MM-DD: opts' date, or today's (local time, as the template's strftime_now). */
static const char *harmony_date(const struct chat_render_opts *opts, char buf[16]) {
    if (opts->date)
        return opts->date;
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || strftime(buf, 16, "%Y-%m-%d", &tm) == 0)
        snprintf(buf, 16, "1970-01-01");
    return buf;
}

static void harmony_system(struct strbuf *b, const struct chat_render_opts *opts, bool tools) {
    char date[16];
    strbuf_puts(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
                   "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ");
    strbuf_puts(b, harmony_date(opts, date));
    strbuf_puts(b, "\n\nReasoning: ");
    strbuf_puts(b, opts->reasoning_effort ? opts->reasoning_effort : "medium");
    strbuf_puts(b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included "
                   "for every message.");
    if (tools)
        strbuf_puts(b, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    strbuf_puts(b, "<|end|>");
}

/* The first system message's instructions and the tools, when there are any. */
static int harmony_developer(struct strbuf *b, const char *instructions, const json_t *tools,
                             char *err, size_t err_len) {
    bool has_tools = tools && json_array_size(tools) > 0;
    if (!(instructions && *instructions) && !has_tools)
        return 0;
    strbuf_puts(b, "<|start|>developer<|message|>");
    if (instructions && *instructions) {
        strbuf_puts(b, "# Instructions\n\n");
        strbuf_puts(b, instructions);
        strbuf_puts(b, "\n\n");
    }
    if (has_tools && harmony_tools(b, tools, err, err_len) < 0)
        return -1;
    strbuf_puts(b, "<|end|>");
    return 0;
}

static void harmony_message(struct strbuf *b, const char *header, const char *text,
                            const char *end) {
    strbuf_puts(b, header);
    strbuf_puts(b, text);
    strbuf_puts(b, end);
}

/* Text the model's channel markers would break: the template refuses it in a reply. */
static bool has_channel_marker(const char *s) {
    return s && (strstr(s, "<|channel|>analysis<|message|>") ||
                 strstr(s, "<|channel|>final<|message|>"));
}

/* A later assistant message without tool calls: the template then drops this call's analysis. */
static bool final_follows(const struct chat_message *msgs, size_t n, size_t i) {
    for (size_t k = i + 1; k < n; k++)
        if (is_role(&msgs[k], "assistant") && !msgs[k].tool_calls_json)
            return true;
    return false;
}

/* An assistant message with tool calls: its analysis unless a final answer follows, then its
 * first call (the template renders one) to functions.NAME. *name gets the call's name (malloc'd,
 * for the tool messages after it). Returns 0 or -1 (err). */
static int harmony_tool_call(struct strbuf *b, const struct chat_message *msgs, size_t n, size_t i,
                             char **name, char *err, size_t err_len) {
    const struct chat_message *m = &msgs[i];
    json_t *calls = json_loads(m->tool_calls_json, 0, NULL);
    const json_t *call = json_array_get(calls, 0), *fn = json_object_get(call, "function");
    if (json_is_object(fn))
        call = fn;
    const json_t *fname = json_object_get(call, "name"), *args = json_object_get(call, "arguments");
    if (!json_is_string(fname) || !args) {
        json_decref(calls);
        return fail(err, err_len, "messages[%zu].tool_calls[0]: no function name or arguments", i);
    }
    /* llama.cpp passes reasoning_content as "thinking" and then drops the content */
    const char *analysis = m->reasoning_content ? m->reasoning_content : m->content;
    if (analysis && *analysis && !final_follows(msgs, n, i))
        harmony_message(b, "<|start|>assistant<|channel|>analysis<|message|>", analysis, "<|end|>");
    strbuf_puts(b, "<|start|>assistant to=functions.");
    strbuf_puts(b, json_string_value(fname));
    strbuf_puts(b, "<|channel|>commentary json<|message|>");
    json_t *parsed = json_is_string(args) ? json_loads(json_string_value(args), JSON_DECODE_ANY,
                                                       NULL) : NULL;
    sb_put_json(b, parsed ? parsed : args);
    strbuf_puts(b, "<|call|>");
    free(*name);
    *name = strdup(json_string_value(fname));
    if (!*name)
        b->oom = true;
    json_decref(parsed);
    json_decref(calls);
    return 0;
}

/* A tool's result, addressed from functions.NAME (the last call's) and written as a JSON string. */
static int harmony_tool_result(struct strbuf *b, const struct chat_message *m, size_t i,
                               const char *name, char *err, size_t err_len) {
    if (!name)
        return fail(err, err_len, "messages[%zu]: a tool message without a preceding tool call", i);
    json_t *s = json_string(text_of(m->content));
    strbuf_puts(b, "<|start|>functions.");
    strbuf_puts(b, name);
    strbuf_puts(b, " to=assistant<|channel|>commentary<|message|>");
    if (s)
        sb_put_json(b, s);
    else
        b->oom = true;
    strbuf_puts(b, "<|end|>");
    json_decref(s);
    return 0;
}

static int harmony_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                          const struct chat_render_opts *opts, const json_t *tools, char *err,
                          size_t err_len) {
    bool first_sys = is_role(&msgs[0], "system");
    char *call_name = NULL;
    int rc = 0;
    harmony_system(b, opts, tools && json_array_size(tools) > 0);
    rc = harmony_developer(b, first_sys ? text_of(msgs[0].content) : NULL, tools, err, err_len);
    for (size_t i = first_sys; rc == 0 && i < n; i++) {
        const struct chat_message *m = &msgs[i];
        bool calls = m->tool_calls_json != NULL;
        if (is_role(m, "user")) {
            harmony_message(b, "<|start|>user<|message|>", text_of(m->content), "<|end|>");
        } else if (is_role(m, "tool")) {
            rc = harmony_tool_result(b, m, i, call_name, err, err_len);
        } else if (!is_role(m, "assistant")) {
            continue; /* later system messages: the template renders only the first */
        } else if (has_channel_marker(calls && m->reasoning_content ? NULL : m->content) ||
                   has_channel_marker(m->reasoning_content)) {
            rc = fail(err, err_len, "messages[%zu]: channel markers in an assistant message (put "
                      "the analysis in reasoning_content and the answer in content)", i);
        } else if (calls) {
            rc = harmony_tool_call(b, msgs, n, i, &call_name, err, err_len);
        } else if (i == n - 1 && !opts->add_generation_prompt) {
            if (m->reasoning_content)
                harmony_message(b, "<|start|>assistant<|channel|>analysis<|message|>",
                                m->reasoning_content, "<|end|>");
            harmony_message(b, "<|start|>assistant<|channel|>final<|message|>", text_of(m->content),
                            "<|return|>");
        } else {
            harmony_message(b, "<|start|>assistant<|channel|>final<|message|>", text_of(m->content),
                            "<|end|>");
            free(call_name);
            call_name = NULL;
        }
    }
    free(call_name);
    if (rc == 0 && opts->add_generation_prompt)
        strbuf_puts(b, "<|start|>assistant");
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * chat_render
 * ------------------------------------------------------------------------------------------- */

static char *render(enum chat_family f, const struct chat_message *msgs, size_t n,
                    const struct chat_render_opts *opts, char *err, size_t err_len);

/* as_prefix: render with a sentinel user turn after the messages and cut where that turn starts. */
static char *render_prefix(enum chat_family f, const struct chat_message *msgs, size_t n,
                           const struct chat_render_opts *opts, char *err, size_t err_len) {
    static const char sentinel[] = "\x01sniper-continuation\x01";
    struct chat_render_opts o = *opts;
    o.as_prefix = false;
    o.add_generation_prompt = false;
    struct chat_message *m = calloc(n + 1, sizeof(*m));
    if (!m) {
        fail(err, err_len, "out of memory");
        return NULL;
    }
    memcpy(m, msgs, n * sizeof(*m));
    m[n] = (struct chat_message){.role = "user", .content = sentinel};
    char *text = render(f, m, n + 1, &o, err, err_len);
    free(m);
    const char *marker = chat_family_message_start(f);
    char *end = text ? strstr(text, sentinel) : NULL, *cut = NULL;
    for (char *p = text; end && (p = strstr(p, marker)) && p < end; p++)
        cut = p; /* the last message start before the sentinel: the sentinel turn's */
    if (text && !cut) {
        fail(err, err_len, "the template does not start a message with %s", marker);
        free(text);
        return NULL;
    }
    if (cut)
        *cut = '\0';
    return text;
}

char *chat_render(enum chat_family f, const struct chat_message *msgs, size_t n,
                  const struct chat_render_opts *opts, char *err, size_t err_len) {
    if (opts && opts->as_prefix)
        return render_prefix(f, msgs, n, opts, err, err_len);
    return render(f, msgs, n, opts, err, err_len);
}

static char *render(enum chat_family f, const struct chat_message *msgs, size_t n,
                    const struct chat_render_opts *opts, char *err, size_t err_len) {
    static const struct chat_render_opts defaults = {.add_generation_prompt = true,
                                                     .enable_thinking = true};
    struct strbuf b = {0};
    json_t *tools = NULL;
    json_error_t je;
    int rc;
    if (!opts)
        opts = &defaults;
    if (check_messages(f, msgs, n, err, err_len) < 0)
        return NULL;
    if (opts->tools_json) {
        tools = json_loads(opts->tools_json, 0, &je);
        if (!json_is_array(tools)) {
            json_decref(tools);
            fail(err, err_len, "tools: not a JSON array");
            return NULL;
        }
    }
    if (f == CHAT_LLAMA3)
        rc = llama3_render(&b, msgs, n, opts, tools, err, err_len);
    else if (f == CHAT_QWEN35)
        rc = qwen35_render(&b, msgs, n, opts, tools, err, err_len);
    else if (f == CHAT_HARMONY)
        rc = harmony_render(&b, msgs, n, opts, tools, err, err_len);
    else
        rc = chatml_render(&b, msgs, n, opts, tools, err, err_len);
    json_decref(tools);
    if (rc < 0) {
        free(b.p);
        return NULL;
    }
    char *out = strbuf_take(&b);
    if (!out)
        fail(err, err_len, "out of memory");
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * The output splitter. Text is held in `pend` until it is certain: the tail that might begin a
 * tag, the trailing newlines of reasoning (dropped before </think>), the body of a tool call.
 * ------------------------------------------------------------------------------------------- */

enum stream_state {
    STREAM_CONTENT, STREAM_THINK, STREAM_TOOL,
    STREAM_H_HEADER, /* harmony: a message's header, up to <|message|> */
    STREAM_H_BODY,   /* harmony: its text, up to <|end|> (or the end of the reply) */
};

struct chat_stream {
    enum chat_family family;
    enum stream_state state;
    bool trim_lead;   /* drop leading whitespace of the text that comes next */
    struct strbuf pend; /* text not yet turned into events */
    int n_tools;
    enum chat_event_kind h_kind; /* harmony: what the current message's text is */
    char *h_name;     /* harmony, h_kind TOOL_CALL: the function's name (after "functions.") */
};

static const char TAG_THINK[] = "<think>", TAG_THINK_END[] = "</think>";
static const char TAG_TOOL[] = "<tool_call>", TAG_TOOL_END[] = "</tool_call>";

struct chat_stream *chat_stream_new(enum chat_family f, bool in_think) {
    struct chat_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->family = f;
    s->state = f == CHAT_HARMONY ? STREAM_H_HEADER
               : in_think && f != CHAT_LLAMA3 ? STREAM_THINK : STREAM_CONTENT;
    s->trim_lead = f != CHAT_LLAMA3 && f != CHAT_HARMONY;
    return s;
}

void chat_stream_free(struct chat_stream *s) {
    if (!s)
        return;
    free(s->pend.p);
    free(s->h_name);
    free(s);
}

static void emit_text(enum chat_event_kind kind, const char *p, size_t n, chat_event_fn fn,
                      void *ctx) {
    if (n == 0)
        return;
    struct chat_event ev = {.kind = kind, .text = p, .len = n};
    fn(ctx, &ev);
}

/* Drops the first n bytes of pend. */
static void pend_consume(struct chat_stream *s, size_t n) {
    if (n == 0)
        return;
    memmove(s->pend.p, s->pend.p + n, s->pend.n - n);
    s->pend.n -= n;
    if (s->pend.p)
        s->pend.p[s->pend.n] = '\0';
}

/* The first occurrence of tag in s[0..n), or -1. */
static long find_tag(const char *s, size_t n, const char *tag) {
    size_t m = strlen(tag);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, tag, m) == 0)
            return (long)i;
    return -1;
}

/* The length of the longest tail of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    size_t m = strlen(tag);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

/* Skips leading whitespace in pend while trim_lead is on. Returns false when pend ran out. */
static bool trim_leading(struct chat_stream *s) {
    size_t i = 0;
    if (!s->trim_lead)
        return true;
    while (i < s->pend.n && is_space(s->pend.p[i]))
        i++;
    pend_consume(s, i);
    if (s->pend.n == 0)
        return false;
    s->trim_lead = false;
    return true;
}

/* A parameter's text as a JSON value: what parses as JSON (numbers, true, objects ...) is that
 * value, anything else a string. */
static json_t *xml_param_value(const char *p, size_t n) {
    json_t *v = json_loadb(p, n, JSON_DECODE_ANY, NULL);
    return v ? v : json_stringn(p, n);
}

/* Qwen3.5's call body, "\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...</function>\n",
 * as {"name": NAME, "arguments": {K: V ...}}, or NULL when it is not one. */
static json_t *xml_tool_call(const char *body, size_t n) {
    struct span b = trim_span((struct span){body, n});
    const char *end = b.p + b.n, *p = b.p;
    if (b.n < 22 || !starts_with(p, "<function=") || memcmp(end - 11, "</function>", 11) != 0)
        return NULL;
    const char *gt = memchr(p, '>', (size_t)(end - p));
    json_t *args = json_object(), *call = NULL;
    if (!gt || !args)
        goto out;
    char *name = strndup(p + 10, (size_t)(gt - p - 10));
    for (p = gt + 1; name && args;) {
        while (p < end && is_space(*p))
            p++;
        if ((size_t)(end - p) == 11) { /* "</function>" */
            call = json_pack("{s:s,s:O}", "name", name, "arguments", args);
            break;
        }
        const char *close = memmem(p, (size_t)(end - p), "</parameter>", 12);
        const char *kgt = memchr(p, '>', (size_t)(end - p));
        if (!starts_with(p, "<parameter=") || !close || !kgt || kgt > close)
            break;
        struct span v = {kgt + 1, (size_t)(close - kgt - 1)};
        if (v.n && v.p[0] == '\n')
            v.p++, v.n--;
        if (v.n && v.p[v.n - 1] == '\n')
            v.n--;
        char *key = strndup(p + 11, (size_t)(kgt - p - 11));
        if (!key || json_object_set_new(args, key, xml_param_value(v.p, v.n)) < 0) {
            free(key);
            break;
        }
        free(key);
        p = close + 12;
    }
    free(name);
out:
    json_decref(args);
    return call;
}

/* A completed tool call body ({"name": ..., "arguments": {...}}, or Qwen3.5's XML) into an event;
 * a body that is neither becomes content, tags included. Returns 0 or -ENOMEM. */
static int emit_tool_call(struct chat_stream *s, const char *body, size_t n, chat_event_fn fn,
                          void *ctx) {
    json_error_t je;
    json_t *v = s->family == CHAT_QWEN35 ? xml_tool_call(body, n) : json_loadb(body, n, 0, &je);
    json_t *name = json_object_get(v, "name"), *args = json_object_get(v, "arguments");
    if (!json_is_string(name) || !args) {
        json_decref(v);
        emit_text(CHAT_EVENT_CONTENT, TAG_TOOL, strlen(TAG_TOOL), fn, ctx);
        emit_text(CHAT_EVENT_CONTENT, body, n, fn, ctx);
        emit_text(CHAT_EVENT_CONTENT, TAG_TOOL_END, strlen(TAG_TOOL_END), fn, ctx);
        return 0;
    }
    char *a = json_is_string(args) ? strdup(json_string_value(args))
                                   : jsonw_dumps(args, JSONW_COMPACT);
    if (!a) {
        json_decref(v);
        return -ENOMEM;
    }
    struct chat_event ev = {.kind = CHAT_EVENT_TOOL_CALL, .name = json_string_value(name),
                            .arguments = a, .index = s->n_tools++};
    fn(ctx, &ev);
    free(a);
    json_decref(v);
    return 0;
}

/* Content: emit up to the next tag (switching state) or up to a possible partial tag. Returns
 * 1 to go on, 0 when more input is needed. */
static int step_content(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    const char *p = s->pend.p;
    size_t n = s->pend.n;
    long think = find_tag(p, n, TAG_THINK), tool = find_tag(p, n, TAG_TOOL);
    if (think >= 0 && (tool < 0 || think < tool)) {
        emit_text(CHAT_EVENT_CONTENT, p, (size_t)think, fn, ctx);
        pend_consume(s, (size_t)think + strlen(TAG_THINK));
        s->state = STREAM_THINK, s->trim_lead = true;
        return 1;
    }
    if (tool >= 0) {
        size_t end = (size_t)tool;
        while (end && is_space(p[end - 1]))
            end--;
        emit_text(CHAT_EVENT_CONTENT, p, end, fn, ctx);
        pend_consume(s, (size_t)tool + strlen(TAG_TOOL));
        s->state = STREAM_TOOL;
        return 1;
    }
    size_t keep = partial_tag(p, n, TAG_THINK);
    size_t keep2 = partial_tag(p, n, TAG_TOOL);
    keep = keep > keep2 ? keep : keep2;
    while (keep < n && is_space(p[n - keep - 1]))
        keep++; /* whitespace before a <tool_call> is dropped: hold it */
    emit_text(CHAT_EVENT_CONTENT, p, n - keep, fn, ctx);
    pend_consume(s, n - keep);
    return 0;
}

static int step_think(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    const char *p = s->pend.p;
    size_t n = s->pend.n;
    long end = find_tag(p, n, TAG_THINK_END);
    if (end >= 0) {
        size_t len = (size_t)end;
        while (len && p[len - 1] == '\n')
            len--;
        emit_text(CHAT_EVENT_REASONING, p, len, fn, ctx);
        pend_consume(s, (size_t)end + strlen(TAG_THINK_END));
        s->state = STREAM_CONTENT, s->trim_lead = true;
        return 1;
    }
    size_t keep = partial_tag(p, n, TAG_THINK_END);
    while (keep < n && p[n - keep - 1] == '\n')
        keep++;
    emit_text(CHAT_EVENT_REASONING, p, n - keep, fn, ctx);
    pend_consume(s, n - keep);
    return 0;
}

static int step_tool(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    long end = find_tag(s->pend.p, s->pend.n, TAG_TOOL_END);
    if (end < 0)
        return 0;
    if (emit_tool_call(s, s->pend.p, (size_t)end, fn, ctx) < 0)
        return -ENOMEM;
    pend_consume(s, (size_t)end + strlen(TAG_TOOL_END));
    s->state = STREAM_CONTENT, s->trim_lead = true;
    return 1;
}

/* ---- harmony: the reply is messages, each a header up to <|message|> (the first continues the
 * prompt's "<|start|>assistant") and a text up to <|end|>; <|return|> and <|call|> end the reply
 * (the scheduler stops there and does not pass them on, but they end a text when they come). */

#define HARMONY_MAX_HEADER 256 /* longer without <|message|>: not a header, it is content */

static const char H_MESSAGE[] = "<|message|>";
static const char *const H_ENDS[] = {"<|end|>", "<|return|>", "<|call|>"};

/* What a header says the text is: a call (recipient functions.NAME), reasoning (the analysis
 * channel) or content (final, a commentary preamble, anything else). */
static int harmony_header(struct chat_stream *s, const char *h, size_t n) {
    const char *to = memmem(h, n, "to=", 3), *ch = memmem(h, n, "<|channel|>", 11);
    free(s->h_name);
    s->h_name = NULL;
    s->h_kind = CHAT_EVENT_CONTENT;
    if (to) {
        const char *r = to + 3, *end = h + n, *e = r;
        while (e < end && !is_space(*e) && *e != '<')
            e++;
        if (e - r > 10 && memcmp(r, "functions.", 10) == 0) {
            s->h_name = strndup(r + 10, (size_t)(e - r - 10));
            s->h_kind = CHAT_EVENT_TOOL_CALL;
            return s->h_name ? 0 : -ENOMEM;
        }
    } else if (ch && (size_t)(h + n - ch) >= 19 && memcmp(ch + 11, "analysis", 8) == 0) {
        s->h_kind = CHAT_EVENT_REASONING;
    }
    return 0;
}

static int harmony_step_header(struct chat_stream *s) {
    long at = find_tag(s->pend.p, s->pend.n, H_MESSAGE);
    if (at < 0 && s->pend.n <= HARMONY_MAX_HEADER)
        return 0;
    if (at < 0) { /* no harmony header: the text is content */
        s->h_kind = CHAT_EVENT_CONTENT;
        s->state = STREAM_H_BODY;
        return 1;
    }
    if (harmony_header(s, s->pend.p, (size_t)at) < 0)
        return -ENOMEM;
    pend_consume(s, (size_t)at + strlen(H_MESSAGE));
    s->state = STREAM_H_BODY;
    return 1;
}

/* A call's arguments: the text as compact JSON when it is JSON, else as it is. */
static int harmony_emit_call(struct chat_stream *s, const char *body, size_t n, chat_event_fn fn,
                             void *ctx) {
    json_t *v = json_loadb(body, n, JSON_DECODE_ANY, NULL);
    char *args = v ? jsonw_dumps(v, JSONW_COMPACT) : strndup(body, n);
    json_decref(v);
    if (!args)
        return -ENOMEM;
    struct chat_event ev = {.kind = CHAT_EVENT_TOOL_CALL, .name = s->h_name, .arguments = args,
                            .index = s->n_tools++};
    fn(ctx, &ev);
    free(args);
    return 0;
}

static int harmony_step_body(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    const char *p = s->pend.p;
    size_t n = s->pend.n, keep = 0, tag_len = 0;
    long at = -1;
    for (size_t i = 0; i < sizeof(H_ENDS) / sizeof(H_ENDS[0]); i++) {
        long k = find_tag(p, n, H_ENDS[i]);
        if (k >= 0 && (at < 0 || k < at))
            at = k, tag_len = strlen(H_ENDS[i]);
        size_t part = partial_tag(p, n, H_ENDS[i]);
        keep = part > keep ? part : keep;
    }
    if (at < 0) { /* stream what cannot be an end tag; a call waits for all of its arguments */
        if (s->h_kind != CHAT_EVENT_TOOL_CALL) {
            emit_text(s->h_kind, p, n - keep, fn, ctx);
            pend_consume(s, n - keep);
        }
        return 0;
    }
    if (s->h_kind == CHAT_EVENT_TOOL_CALL) {
        if (harmony_emit_call(s, p, (size_t)at, fn, ctx) < 0)
            return -ENOMEM;
    } else {
        emit_text(s->h_kind, p, (size_t)at, fn, ctx);
    }
    pend_consume(s, (size_t)at + tag_len);
    s->state = STREAM_H_HEADER;
    return 1;
}

static int harmony_feed(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    int rc = 1;
    while (rc > 0)
        rc = s->state == STREAM_H_HEADER ? harmony_step_header(s) : harmony_step_body(s, fn, ctx);
    return rc;
}

/* The end of a harmony reply: a call ends with its arguments (<|call|> ended the generation), a
 * header that never reached <|message|> is content, so nothing is lost. */
static void harmony_finish(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    if (s->state == STREAM_H_BODY && s->h_kind == CHAT_EVENT_TOOL_CALL)
        harmony_emit_call(s, s->pend.p, s->pend.n, fn, ctx); /* no memory: the call is lost */
    else
        emit_text(s->state == STREAM_H_BODY ? s->h_kind : CHAT_EVENT_CONTENT, s->pend.p,
                  s->pend.n, fn, ctx);
    pend_consume(s, s->pend.n);
    s->state = STREAM_H_HEADER;
}

int chat_stream_feed(struct chat_stream *s, const char *text, size_t len, chat_event_fn fn,
                     void *ctx) {
    if (s->family == CHAT_LLAMA3) {
        emit_text(CHAT_EVENT_CONTENT, text, len, fn, ctx);
        return 0;
    }
    strbuf_putn(&s->pend, text, len);
    if (s->pend.oom)
        return -ENOMEM;
    if (s->family == CHAT_HARMONY)
        return harmony_feed(s, fn, ctx);
    for (int rc = 1; rc > 0;) {
        if (s->state != STREAM_TOOL && !trim_leading(s))
            return 0;
        rc = s->state == STREAM_CONTENT ? step_content(s, fn, ctx)
             : s->state == STREAM_THINK ? step_think(s, fn, ctx)
                                        : step_tool(s, fn, ctx);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int chat_stream_finish(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    if (s->family == CHAT_HARMONY) {
        harmony_finish(s, fn, ctx);
        return s->n_tools;
    }
    if (s->state == STREAM_TOOL) {
        emit_text(CHAT_EVENT_CONTENT, TAG_TOOL, strlen(TAG_TOOL), fn, ctx);
        emit_text(CHAT_EVENT_CONTENT, s->pend.p, s->pend.n, fn, ctx);
    } else {
        emit_text(s->state == STREAM_THINK ? CHAT_EVENT_REASONING : CHAT_EVENT_CONTENT, s->pend.p,
                  s->pend.n, fn, ctx);
    }
    pend_consume(s, s->pend.n);
    s->state = STREAM_CONTENT;
    return s->n_tools;
}
