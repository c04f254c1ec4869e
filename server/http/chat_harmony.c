/* chat_harmony.c - gpt-oss's harmony format, as the chat template of its GGUFs renders it, with the
 * messages as llama.cpp hands them over: reasoning_content as the template's "thinking" (an
 * assistant message with reasoning and tool calls then loses its content), arguments as objects. A
 * system block (date, reasoning effort, channels), the first system message and the tools (as
 * TypeScript, schema_ts.c) in a developer block, then <|start|>ROLE...<|message|>TEXT<|end|> per
 * message; earlier replies keep only their final channel, a tool call is a commentary message. */
#include "chat_internal.h"
#include "jinja.h"
#include "schema_ts.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The tools as the namespace "functions" of TypeScript function types. Returns 0 or -EINVAL
 * (err). */
static int harmony_tools(struct strbuf *b, const json_t *tools, char *err, size_t err_len) {
    size_t i;
    json_t *tool;
    strbuf_puts(b, "# Tools\n\n## functions\n\nnamespace functions {\n\n");
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        const json_t *name = json_object_get(fn, "name");
        const json_t *params = json_object_get(fn, "parameters");
        const json_t *props = json_object_get(params, "properties");
        if (!json_is_string(name))
            return chat_fail(err, err_len, "tools[%zu]: no function name", i);
        strbuf_puts(b, "// ");
        if (json_object_get(fn, "description"))
            jinja_put_str(b, json_object_get(fn, "description"));
        strbuf_puts(b, "\ntype ");
        strbuf_puts(b, json_string_value(name));
        if (!jinja_truthy(props) || !json_is_object(props)) {
            strbuf_puts(b, " = () => any;\n\n");
            continue;
        }
        strbuf_puts(b, " = (_: {\n");
        const char *key;
        json_t *spec;
        json_object_foreach((json_t *)props, key, spec) {
            schema_ts_put_param(b, key, spec, json_object_get(params, "required"));
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
        return -EINVAL;
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
 * for the tool messages after it). Returns 0 or -EINVAL (err). */
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
        return chat_fail(err, err_len,
                         "messages[%zu].tool_calls[0]: no function name or arguments", i);
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
    jinja_put_json(b, parsed ? parsed : args);
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
        return chat_fail(err, err_len,
                         "messages[%zu]: a tool message without a preceding tool call", i);
    json_t *s = json_string(text_of(m->content));
    strbuf_puts(b, "<|start|>functions.");
    strbuf_puts(b, name);
    strbuf_puts(b, " to=assistant<|channel|>commentary<|message|>");
    if (s)
        jinja_put_json(b, s);
    else
        b->oom = true;
    strbuf_puts(b, "<|end|>");
    json_decref(s);
    return 0;
}

/* The family's chat_render_fn (chat_internal.h). */
int chat_harmony_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
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
            rc = chat_fail(err, err_len, "messages[%zu]: channel markers in an assistant message "
                           "(put the analysis in reasoning_content and the answer in content)", i);
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
