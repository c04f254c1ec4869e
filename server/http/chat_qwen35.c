/* chat_qwen35.c - Qwen3.5's template: ChatML with every content whitespace-trimmed, the tools'
 * instructions in an XML calling format (<function=NAME><parameter=KEY>VALUE</parameter>), a
 * <think> block on every assistant turn after the last user query, and a generation prompt that
 * opens <think> (or closes an empty one with thinking off). Invariant: the output is byte for byte
 * the Jinja template's (tests/chat/expected.json). */
#include "chat_internal.h"
#include "jinja.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

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
        jinja_put_json(b, tool);
    }
    strbuf_puts(b, "\n</tools>");
    strbuf_puts(b, QWEN35_TOOLS_HOWTO);
    if (sys.n) {
        strbuf_puts(b, "\n\n");
        put_span(b, sys);
    }
    strbuf_puts(b, "<|im_end|>\n");
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
        return chat_fail(err, err_len, "tool_calls[%zu]: no function name or arguments object",
                         idx);
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
        jinja_put_str(b, v);
        strbuf_puts(b, "\n</parameter>\n");
    }
    strbuf_puts(b, "</function>\n</tool_call>");
    json_decref(parsed);
    return 0;
}

static int qwen35_tool_calls(struct strbuf *b, const char *calls_json, bool has_content, char *err,
                             size_t err_len) {
    json_t *calls = json_loads(calls_json, 0, NULL);
    int rc = json_is_array(calls) ? 0 : chat_fail(err, err_len, "tool_calls: not a JSON array");
    for (size_t i = 0; rc == 0 && i < json_array_size(calls); i++) {
        const char *lead = i > 0 ? "\n" : has_content ? "\n\n" : "";
        if (!json_is_object(json_array_get(calls, i)))
            rc = chat_fail(err, err_len, "tool_calls[%zu]: not an object", i);
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
            content = lstrip_nl(
                (struct span){last + 8, content.n - (size_t)(last + 8 - content.p)});
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
        return -EINVAL;
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

/* The family's chat_render_fn (chat_internal.h). */
int chat_qwen35_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                       const struct chat_render_opts *opts, const json_t *tools, char *err,
                       size_t err_len) {
    long last_query = qwen35_last_query(msgs, n);
    if (last_query < 0)
        return chat_fail(err, err_len,
                         "no user query in the messages (Qwen3.5's template needs one)");
    qwen35_system(b, msgs, tools);
    for (size_t i = 0; i < n; i++) {
        const struct chat_message *m = &msgs[i];
        if (is_role(m, "system") && i > 0) {
            return chat_fail(err, err_len, "messages[%zu]: a system message must be the first "
                             "(Qwen3.5's template)", i);
        } else if (is_role(m, "user")) {
            strbuf_puts(b, "<|im_start|>user\n");
            put_span(b, trim_ws(text_of(m->content)));
            strbuf_puts(b, "<|im_end|>\n");
        } else if (is_role(m, "assistant")) {
            if (qwen35_assistant(b, m, (long)i > last_query, err, err_len) < 0)
                return -EINVAL;
        } else if (is_role(m, "tool")) {
            qwen35_tool_result(b, msgs, n, i);
        }
    }
    if (opts->add_generation_prompt)
        strbuf_puts(b, opts->enable_thinking ? "<|im_start|>assistant\n<think>\n"
                                             : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    return 0;
}
