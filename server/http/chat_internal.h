/* chat_internal.h - what the chat_* files share, not for use outside them: the family table
 * (chat.c) that maps each family to its renderer (chat_<family>.c) and its output parser
 * (chat_stream.c), and the small string helpers the renderers use to do what the templates' Jinja
 * and Python do. Renderers append to a strbuf and return 0 or -EINVAL with a message in err. */
#ifndef SNIPER_CHAT_INTERNAL_H
#define SNIPER_CHAT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "chat.h"
#include "strbuf.h"

/* Appends the prompt of msgs[0..n) (already checked: roles known, tool messages after tool calls
 * where the family has them) to b; tools is the parsed tools array or NULL (borrowed). Returns 0,
 * or -EINVAL with a message in err for what the template refuses. */
typedef int (*chat_render_fn)(struct strbuf *b, const struct chat_message *msgs, size_t n,
                              const struct chat_render_opts *opts, const json_t *tools, char *err,
                              size_t err_len);

struct chat_parser; /* how a family's output is split into events (chat_stream.c) */

/* One row of the family table. */
struct chat_family_ops {
    const char *name;          /* chat_family_name's */
    const char *message_start; /* the text that opens every message */
    bool tool_calls;           /* renders assistant tool calls: a tool message must follow one */
    chat_render_fn render;
    const struct chat_parser *parser;
};

/* The row of family f (an unknown f: ChatML's). Static; never NULL. */
const struct chat_family_ops *chat_family_ops(enum chat_family f);

/* The renderers the family table names, one file each; chat_render_fn is their contract. */
int chat_chatml_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                       const struct chat_render_opts *opts, const json_t *tools, char *err,
                       size_t err_len);
int chat_llama3_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                       const struct chat_render_opts *opts, const json_t *tools, char *err,
                       size_t err_len);
int chat_qwen35_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                       const struct chat_render_opts *opts, const json_t *tools, char *err,
                       size_t err_len);
int chat_harmony_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                        const struct chat_render_opts *opts, const json_t *tools, char *err,
                        size_t err_len);
int chat_gemma4_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                       const struct chat_render_opts *opts, const json_t *tools, char *err,
                       size_t err_len);
int chat_gemma4_interleaved_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                                   const struct chat_render_opts *opts, const json_t *tools,
                                   char *err, size_t err_len);

/* The parsers chat_stream.c defines: Llama 3's (all content), ChatML's (<think>, <tool_call> with
 * a JSON body), Qwen3.5's (the same tags, an XML call body), Gemma 4's (its thought channel and
 * <|tool_call>call:NAME{...}) and harmony's (channels). */
extern const struct chat_parser chat_parser_plain, chat_parser_chatml, chat_parser_qwen35,
    chat_parser_gemma4, chat_parser_harmony;

/* Writes the message into err (when err_len > 0). Returns -EINVAL. */
int chat_fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- string helpers ------------------------------------------------------------------------- */

/* A span of a string (Python's slices and strips work on these). */
struct span {
    const char *p;
    size_t n;
};

static inline bool is_role(const struct chat_message *m, const char *role) {
    return m->role && strcmp(m->role, role) == 0;
}

static inline const char *text_of(const char *s) { return s ? s : ""; }

static inline bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static inline bool starts_with(const char *s, const char *pre) {
    return strncmp(s, pre, strlen(pre)) == 0;
}

static inline bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && memcmp(s + n - m, suf, m) == 0;
}

/* The last occurrence of needle in s[0..n), or NULL. */
static inline const char *rfind(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = n; i >= m; i--)
        if (memcmp(s + i - m, needle, m) == 0)
            return s + i - m;
    return NULL;
}

static inline struct span lstrip_nl(struct span s) {
    while (s.n && s.p[0] == '\n')
        s.p++, s.n--;
    return s;
}

static inline struct span rstrip_nl(struct span s) {
    while (s.n && s.p[s.n - 1] == '\n')
        s.n--;
    return s;
}

/* Python's str.strip() on ASCII whitespace (the template's |trim). */
static inline struct span trim_span(struct span r) {
    while (r.n && is_space(r.p[0]))
        r.p++, r.n--;
    while (r.n && is_space(r.p[r.n - 1]))
        r.n--;
    return r;
}

static inline struct span trim_ws(const char *s) { return trim_span((struct span){s, strlen(s)}); }

static inline void put_span(struct strbuf *b, struct span s) { strbuf_putn(b, s.p, s.n); }

#endif
