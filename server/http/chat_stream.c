/* chat_stream.c - the model's output split into content, reasoning and tool calls, piece by piece
 * (chat_stream_* in chat.h), by the parser the family table names: plain (Llama 3), tags (<think>,
 * <tool_call> with ChatML's JSON body or Qwen3.5's XML one; Gemma 4's thought channel and
 * <|tool_call> with its own notation) or harmony's channels.
 *
 * Invariant: text is held in `pend` until it is certain (the tail that might begin a tag, the
 * trailing newlines of reasoning, the body of a tool call), so no event is ever taken back. */
#include "chat_internal.h"
#include "jsonw.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

enum stream_state {
    STREAM_CONTENT, STREAM_THINK, STREAM_TOOL,
    STREAM_H_HEADER, /* harmony: a message's header, up to <|message|> */
    STREAM_H_BODY,   /* harmony: its text, up to <|end|> (or the end of the reply) */
};

/* One family's way of splitting its output (the family table's parse column). */
struct chat_parser {
    /* The state a reply starts in, and whether its leading whitespace is dropped. */
    void (*start)(struct chat_stream *s, bool in_think);
    /* Takes len bytes of text and emits what is certain. Returns 0 or -ENOMEM. */
    int (*feed)(struct chat_stream *s, const char *text, size_t len, chat_event_fn fn, void *ctx);
    /* Emits what is left at the end of the reply. */
    void (*finish)(struct chat_stream *s, chat_event_fn fn, void *ctx);
    /* Tags: a <tool_call> body as {"name": ..., "arguments": ...}, or NULL when it is not one. */
    json_t *(*tool_call)(const char *body, size_t n);
    /* Tags: what opens and closes reasoning and a tool call (NULL for the other parsers). */
    const char *think, *think_end, *tool, *tool_end;
};

struct chat_stream {
    const struct chat_parser *parser;
    enum stream_state state;
    bool trim_lead;   /* drop leading whitespace of the text that comes next */
    struct strbuf pend; /* text not yet turned into events */
    int n_tools;
    enum chat_event_kind h_kind; /* harmony: what the current message's text is */
    char *h_name;     /* harmony, h_kind TOOL_CALL: the function's name (after "functions.") */
};

/* ChatML's and Qwen3.5's tags; Gemma 4's reasoning is its thought channel, its calls
 * <|tool_call>call:NAME{...}<tool_call|>. */
#define TAGS_CHATML "<think>", "</think>", "<tool_call>", "</tool_call>"
#define TAGS_GEMMA4 "<|channel>thought", "<channel|>", "<|tool_call>", "<tool_call|>"

struct chat_stream *chat_stream_new(enum chat_family f, bool in_think) {
    struct chat_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->parser = chat_family_ops(f)->parser;
    s->parser->start(s, in_think);
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

/* ---- Gemma 4's call body: call:NAME{key:value,...}, values in its template's notation (strings
 * between <|"|> marks, bare keys, {...} and [...]). */

static const char G4_QUOTE[] = "<|\"|>";

struct g4_reader {
    const char *p, *end;
};

static json_t *g4_value(struct g4_reader *r, int depth);

static void g4_skip_space(struct g4_reader *r) {
    while (r->p < r->end && is_space(*r->p))
        r->p++;
}

static bool g4_eat(struct g4_reader *r, const char *tok) {
    size_t n = strlen(tok);
    g4_skip_space(r);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, tok, n) != 0)
        return false;
    r->p += n;
    return true;
}

/* A key: quoted, or bare up to ':'. NULL when there is none (malloc'd). */
static char *g4_key(struct g4_reader *r) {
    g4_skip_space(r);
    if (g4_eat(r, G4_QUOTE)) {
        const char *q = memmem(r->p, (size_t)(r->end - r->p), G4_QUOTE, 5);
        char *k = q ? strndup(r->p, (size_t)(q - r->p)) : NULL;
        r->p = q ? q + 5 : r->end;
        return k;
    }
    const char *c = memchr(r->p, ':', (size_t)(r->end - r->p));
    if (!c || c == r->p)
        return NULL;
    struct span k = trim_span((struct span){r->p, (size_t)(c - r->p)});
    r->p = c;
    return strndup(k.p, k.n);
}

/* {key:value,...} or [value,...]; NULL when malformed. */
static json_t *g4_container(struct g4_reader *r, bool object, int depth) {
    json_t *c = object ? json_object() : json_array();
    const char *close = object ? "}" : "]";
    if (g4_eat(r, close))
        return c;
    while (c) {
        char *key = object ? g4_key(r) : NULL;
        json_t *v = (!object || key) && (!object || g4_eat(r, ":")) ? g4_value(r, depth + 1)
                                                                    : NULL;
        int rc = !v ? -1 : object ? json_object_set_new(c, key, v) : json_array_append_new(c, v);
        free(key);
        if (rc < 0 || g4_eat(r, close))
            return rc < 0 ? (json_decref(c), NULL) : c;
        if (!g4_eat(r, ",")) {
            json_decref(c);
            return NULL;
        }
    }
    return NULL;
}

/* A scalar up to the next ',', '}' or ']': JSON when it parses as JSON (numbers, true, null),
 * else a string. */
static json_t *g4_scalar(struct g4_reader *r) {
    const char *e = r->p;
    while (e < r->end && *e != ',' && *e != '}' && *e != ']')
        e++;
    struct span t = trim_span((struct span){r->p, (size_t)(e - r->p)});
    r->p = e;
    if (t.n == 0)
        return NULL;
    json_t *v = json_loadb(t.p, t.n, JSON_DECODE_ANY, NULL);
    return v && !json_is_object(v) && !json_is_array(v) ? v : (json_decref(v), json_stringn(t.p, t.n));
}

static json_t *g4_value(struct g4_reader *r, int depth) {
    if (depth > 64)
        return NULL;
    if (g4_eat(r, G4_QUOTE)) {
        const char *q = memmem(r->p, (size_t)(r->end - r->p), G4_QUOTE, 5);
        json_t *s = q ? json_stringn(r->p, (size_t)(q - r->p)) : NULL;
        r->p = q ? q + 5 : r->end;
        return s;
    }
    if (g4_eat(r, "{"))
        return g4_container(r, true, depth);
    if (g4_eat(r, "["))
        return g4_container(r, false, depth);
    return g4_scalar(r);
}

/* "call:NAME{...}" as {"name": NAME, "arguments": {...}}, or NULL when it is not one. */
static json_t *gemma4_tool_call(const char *body, size_t n) {
    struct span b = trim_span((struct span){body, n});
    const char *brace = memchr(b.p, '{', b.n);
    if (b.n < 7 || !starts_with(b.p, "call:") || !brace || brace == b.p + 5)
        return NULL;
    struct g4_reader r = {brace + 1, b.p + b.n};
    json_t *args = g4_container(&r, true, 0);
    g4_skip_space(&r);
    char *name = strndup(b.p + 5, (size_t)(brace - b.p - 5));
    json_t *call = args && name && r.p == r.end ? json_pack("{s:s,s:O}", "name", name,
                                                            "arguments", args) : NULL;
    free(name);
    json_decref(args);
    return call;
}

/* A completed tool call body ({"name": ..., "arguments": {...}}, or Qwen3.5's XML) into an event;
 * a body that is neither becomes content, tags included. Returns 0 or -ENOMEM. */
static int emit_tool_call(struct chat_stream *s, const char *body, size_t n, chat_event_fn fn,
                          void *ctx) {
    json_t *v = s->parser->tool_call(body, n);
    json_t *name = json_object_get(v, "name"), *args = json_object_get(v, "arguments");
    if (!json_is_string(name) || !args) {
        json_decref(v);
        emit_text(CHAT_EVENT_CONTENT, s->parser->tool, strlen(s->parser->tool), fn, ctx);
        emit_text(CHAT_EVENT_CONTENT, body, n, fn, ctx);
        emit_text(CHAT_EVENT_CONTENT, s->parser->tool_end, strlen(s->parser->tool_end), fn, ctx);
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
    const char *p = s->pend.p, *tag_think = s->parser->think, *tag_tool = s->parser->tool;
    size_t n = s->pend.n;
    long think = find_tag(p, n, tag_think), tool = find_tag(p, n, tag_tool);
    if (think >= 0 && (tool < 0 || think < tool)) {
        emit_text(CHAT_EVENT_CONTENT, p, (size_t)think, fn, ctx);
        pend_consume(s, (size_t)think + strlen(tag_think));
        s->state = STREAM_THINK, s->trim_lead = true;
        return 1;
    }
    if (tool >= 0) {
        size_t end = (size_t)tool;
        while (end && is_space(p[end - 1]))
            end--;
        emit_text(CHAT_EVENT_CONTENT, p, end, fn, ctx);
        pend_consume(s, (size_t)tool + strlen(tag_tool));
        s->state = STREAM_TOOL;
        return 1;
    }
    size_t keep = partial_tag(p, n, tag_think);
    size_t keep2 = partial_tag(p, n, tag_tool);
    keep = keep > keep2 ? keep : keep2;
    while (keep < n && is_space(p[n - keep - 1]))
        keep++; /* whitespace before a <tool_call> is dropped: hold it */
    emit_text(CHAT_EVENT_CONTENT, p, n - keep, fn, ctx);
    pend_consume(s, n - keep);
    return 0;
}

static int step_think(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    const char *p = s->pend.p, *tag = s->parser->think_end;
    size_t n = s->pend.n;
    long end = find_tag(p, n, tag);
    if (end >= 0) {
        size_t len = (size_t)end;
        while (len && p[len - 1] == '\n')
            len--;
        emit_text(CHAT_EVENT_REASONING, p, len, fn, ctx);
        pend_consume(s, (size_t)end + strlen(tag));
        s->state = STREAM_CONTENT, s->trim_lead = true;
        return 1;
    }
    size_t keep = partial_tag(p, n, tag);
    while (keep < n && p[n - keep - 1] == '\n')
        keep++;
    emit_text(CHAT_EVENT_REASONING, p, n - keep, fn, ctx);
    pend_consume(s, n - keep);
    return 0;
}

static int step_tool(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    long end = find_tag(s->pend.p, s->pend.n, s->parser->tool_end);
    if (end < 0)
        return 0;
    if (emit_tool_call(s, s->pend.p, (size_t)end, fn, ctx) < 0)
        return -ENOMEM;
    pend_consume(s, (size_t)end + strlen(s->parser->tool_end));
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

/* ---- the table's parsers --------------------------------------------------------------------- */

/* Llama 3: all content, as it comes. */
static void plain_start(struct chat_stream *s, bool in_think) {
    (void)in_think;
    s->state = STREAM_CONTENT;
    s->trim_lead = false;
}

static int plain_feed(struct chat_stream *s, const char *text, size_t len, chat_event_fn fn,
                      void *ctx) {
    (void)s;
    emit_text(CHAT_EVENT_CONTENT, text, len, fn, ctx);
    return 0;
}

/* ChatML and Qwen3.5: <think> and <tool_call> tags. */
static void tags_start(struct chat_stream *s, bool in_think) {
    s->state = in_think ? STREAM_THINK : STREAM_CONTENT;
    s->trim_lead = true;
}

static int tags_feed(struct chat_stream *s, const char *text, size_t len, chat_event_fn fn,
                     void *ctx) {
    strbuf_putn(&s->pend, text, len);
    if (s->pend.oom)
        return -ENOMEM;
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

/* The end of a tagged reply (or a plain one): an unfinished tool call is content, tag included. */
static void tags_finish(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    if (s->state == STREAM_TOOL) {
        emit_text(CHAT_EVENT_CONTENT, s->parser->tool, strlen(s->parser->tool), fn, ctx);
        emit_text(CHAT_EVENT_CONTENT, s->pend.p, s->pend.n, fn, ctx);
    } else {
        emit_text(s->state == STREAM_THINK ? CHAT_EVENT_REASONING : CHAT_EVENT_CONTENT, s->pend.p,
                  s->pend.n, fn, ctx);
    }
    pend_consume(s, s->pend.n);
    s->state = STREAM_CONTENT;
}

/* A ChatML call body: {"name": ..., "arguments": ...} as JSON. */
static json_t *json_tool_call(const char *body, size_t n) {
    json_error_t je;
    return json_loadb(body, n, 0, &je);
}

static void harmony_start(struct chat_stream *s, bool in_think) {
    (void)in_think;
    s->state = STREAM_H_HEADER;
    s->trim_lead = false;
}

static int harmony_feed_text(struct chat_stream *s, const char *text, size_t len,
                             chat_event_fn fn, void *ctx) {
    strbuf_putn(&s->pend, text, len);
    if (s->pend.oom)
        return -ENOMEM;
    return harmony_feed(s, fn, ctx);
}

const struct chat_parser chat_parser_plain = {plain_start, plain_feed, tags_finish, NULL, NULL,
                                              NULL, NULL, NULL};
const struct chat_parser chat_parser_chatml = {tags_start, tags_feed, tags_finish, json_tool_call,
                                               TAGS_CHATML};
const struct chat_parser chat_parser_qwen35 = {tags_start, tags_feed, tags_finish, xml_tool_call,
                                               TAGS_CHATML};
const struct chat_parser chat_parser_gemma4 = {tags_start, tags_feed, tags_finish,
                                               gemma4_tool_call, TAGS_GEMMA4};
const struct chat_parser chat_parser_harmony = {harmony_start, harmony_feed_text, harmony_finish,
                                                NULL, NULL, NULL, NULL, NULL};

/* ---- the stream ----------------------------------------------------------------------------- */

int chat_stream_feed(struct chat_stream *s, const char *text, size_t len, chat_event_fn fn,
                     void *ctx) {
    return s->parser->feed(s, text, len, fn, ctx);
}

int chat_stream_finish(struct chat_stream *s, chat_event_fn fn, void *ctx) {
    s->parser->finish(s, fn, ctx);
    return s->n_tools;
}
