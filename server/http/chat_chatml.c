/* chat_chatml.c - ChatML as Qwen3's template writes it (Qwen2.5 and generic ChatML too): a system
 * turn (or the tools' instructions with the system text before them), <|im_start|>ROLE\n...
 * <|im_end|> per message, <think> kept only on the turns after the last user query, tool calls as
 * <tool_call> JSON and tool results wrapped in a user turn. Invariant: the output is byte for byte
 * the Jinja template's (tests/chat/expected.json). */
#include "chat_internal.h"
#include "jinja.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

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

static int chatml_tools_header(struct strbuf *b, const struct chat_message *msgs,
                               const json_t *tools) {
    size_t i;
    json_t *tool;
    strbuf_puts(b, "<|im_start|>system\n");
    if (is_role(&msgs[0], "system")) {
        strbuf_puts(b, text_of(msgs[0].content));
        strbuf_puts(b, "\n\n");
    }
    strbuf_puts(b, "# Tools\n\nYou may call one or more functions to assist with the user "
                   "query.\n\nYou are provided with function signatures within <tools></tools> "
                   "XML tags:\n<tools>");
    json_array_foreach(tools, i, tool) {
        strbuf_puts(b, "\n");
        jinja_put_json(b, tool);
    }
    strbuf_puts(b, "\n</tools>\n\nFor each function call, return a json object with function "
                   "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                   "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
                   "<|im_end|>\n");
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
        return chat_fail(err, err_len, "tool_calls[%zu]: no function name or arguments", idx);
    strbuf_puts(b, "<tool_call>\n{\"name\": \"");
    strbuf_puts(b, json_string_value(name));
    strbuf_puts(b, "\", \"arguments\": ");
    if (json_is_string(args))
        strbuf_putn(b, json_string_value(args), json_string_length(args));
    else
        jinja_put_json(b, args);
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
        return chat_fail(err, err_len, "tool_calls: not a JSON array");
    }
    for (size_t i = 0; i < json_array_size(calls) && rc == 0; i++) {
        if ((i == 0 && has_content) || i > 0)
            strbuf_puts(b, "\n");
        if (!json_is_object(json_array_get(calls, i)))
            rc = chat_fail(err, err_len, "tool_calls[%zu]: not an object", i);
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
        return -EINVAL;
    strbuf_puts(b, "<|im_end|>\n");
    return 0;
}

static void chatml_tool_result(struct strbuf *b, const struct chat_message *msgs, size_t n,
                               size_t i) {
    if (i == 0 || !is_role(&msgs[i - 1], "tool"))
        strbuf_puts(b, "<|im_start|>user");
    strbuf_puts(b, "\n<tool_response>\n");
    strbuf_puts(b, text_of(msgs[i].content));
    strbuf_puts(b, "\n</tool_response>");
    if (i == n - 1 || !is_role(&msgs[i + 1], "tool"))
        strbuf_puts(b, "<|im_end|>\n");
}

/* The family's chat_render_fn (chat_internal.h). */
int chat_chatml_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
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
                return -EINVAL;
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
