/* chat.c - the chat template families: which one a GGUF's template is, the table that gives each
 * its renderer (chat_chatml.c, chat_qwen35.c, chat_llama3.c, chat_harmony.c, chat_gemma4.c: both
 * Gemma 4 variants) and its output parser (chat_stream.c), and chat_render's checks and prefix
 * rendering around the renderers.
 *
 * Invariants: chat_render's output is byte for byte what the family's Jinja template renders (with
 * tojson as Hugging Face and llama.cpp define it: keys in their order, ", " and ": " separators,
 * non-ASCII kept); tests/chat/expected.json pins it. Every family has one row in the table. */
#include "chat_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int chat_fail(char *err, size_t err_len, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* ---------------------------------------------------------------------------------------------
 * Families
 * ------------------------------------------------------------------------------------------- */

static const struct chat_family_ops families[CHAT_N_FAMILIES] = {
    [CHAT_CHATML] = {"chatml", "<|im_start|>", true, chat_chatml_render, &chat_parser_chatml},
    [CHAT_LLAMA3] = {"llama3", "<|start_header_id|>", false, chat_llama3_render,
                     &chat_parser_plain},
    [CHAT_QWEN35] = {"qwen35", "<|im_start|>", true, chat_qwen35_render, &chat_parser_qwen35},
    [CHAT_HARMONY] = {"harmony", "<|start|>", true, chat_harmony_render, &chat_parser_harmony},
    [CHAT_GEMMA4] = {"gemma4", "<|turn>", true, chat_gemma4_render, &chat_parser_gemma4},
    [CHAT_GEMMA4_INTERLEAVED] = {"gemma4-interleaved", "<|turn>", true,
                                 chat_gemma4_interleaved_render, &chat_parser_gemma4},
};

const struct chat_family_ops *chat_family_ops(enum chat_family f) {
    return &families[(unsigned)f < CHAT_N_FAMILIES ? f : CHAT_CHATML];
}

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
    /* Gemma 4's: turns opened by <|turn> and closed by <turn|>; the interleaved variant writes
     * tool calls but does not read tool messages itself (llama.cpp tells them apart the same way:
     * only the newer template carries its "OpenAI Chat Completions" scan) */
    if (jinja_template && strstr(jinja_template, "<|turn>") && strstr(jinja_template, "<turn|>"))
        return strstr(jinja_template, "'<|tool_call>call:'") &&
                       !strstr(jinja_template, "{#- OpenAI Chat Completions:")
                   ? CHAT_GEMMA4_INTERLEAVED
                   : CHAT_GEMMA4;
    return CHAT_CHATML;
}

int chat_family_from_name(const char *name) {
    for (int f = 0; name && f < CHAT_N_FAMILIES; f++)
        if (strcmp(name, families[f].name) == 0)
            return f;
    return -1;
}

const char *chat_family_name(enum chat_family f) {
    return chat_family_ops(f)->name;
}

const char *chat_family_message_start(enum chat_family f) {
    return chat_family_ops(f)->message_start;
}

/* ---------------------------------------------------------------------------------------------
 * chat_render
 * ------------------------------------------------------------------------------------------- */

/* Each role is known; where the family renders tool calls, each tool message follows an
 * assistant's tool calls or another tool message. Returns 0 or -EINVAL with err. */
static int check_messages(enum chat_family f, const struct chat_message *msgs, size_t n, char *err,
                          size_t err_len) {
    if (n == 0)
        return chat_fail(err, err_len, "no messages");
    for (size_t i = 0; i < n; i++) {
        const struct chat_message *m = &msgs[i];
        if (!is_role(m, "system") && !is_role(m, "user") && !is_role(m, "assistant") &&
            !is_role(m, "tool"))
            return chat_fail(err, err_len, "messages[%zu]: unknown role '%s'", i,
                             text_of(m->role));
        if (chat_family_ops(f)->tool_calls && is_role(m, "tool") &&
            (i == 0 || !(is_role(&msgs[i - 1], "tool") ||
                         (is_role(&msgs[i - 1], "assistant") && msgs[i - 1].tool_calls_json))))
            return chat_fail(err, err_len,
                             "messages[%zu]: a tool message without a preceding tool call", i);
    }
    return 0;
}

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
        chat_fail(err, err_len, "out of memory");
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
        chat_fail(err, err_len, "the template does not start a message with %s", marker);
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
            chat_fail(err, err_len, "tools: not a JSON array");
            return NULL;
        }
    }
    rc = chat_family_ops(f)->render(&b, msgs, n, opts, tools, err, err_len);
    json_decref(tools);
    if (rc < 0) {
        free(b.p);
        return NULL;
    }
    char *out = strbuf_take(&b);
    if (!out)
        chat_fail(err, err_len, "out of memory");
    return out;
}
