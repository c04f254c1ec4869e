/* chat_llama3.c - Llama 3, from Meta's published prompt format: <|begin_of_text|>, then per message
 * <|start_header_id|>role<|end_header_id|>\n\n + content (whitespace-trimmed) + <|eot_id|>. Tool
 * results use Llama 3.1's "ipython" role; tools and assistant tool calls are refused, never
 * dropped. */
#include "chat_internal.h"

#include <jansson.h>
#include <string.h>

static void llama3_header(struct strbuf *b, const char *role) {
    strbuf_puts(b, "<|start_header_id|>");
    strbuf_puts(b, role);
    strbuf_puts(b, "<|end_header_id|>\n\n");
}

/* The family's chat_render_fn (chat_internal.h). */
int chat_llama3_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                       const struct chat_render_opts *opts, const json_t *tools, char *err,
                       size_t err_len) {
    if (tools && json_array_size(tools) > 0)
        return chat_fail(err, err_len, "tools are not supported with the llama3 chat template");
    strbuf_puts(b, "<|begin_of_text|>");
    for (size_t i = 0; i < n; i++) {
        const struct chat_message *m = &msgs[i];
        if (m->tool_calls_json)
            return chat_fail(err, err_len,
                             "messages[%zu]: tool calls are not supported with the llama3 template",
                             i);
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
