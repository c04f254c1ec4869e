/* json_grammar.h - an incremental check that generated text is (the start of) one JSON object,
 * byte by byte: what response_format {"type":"json_object"} constrains sampling with. A token is
 * allowed when its bytes keep the text a prefix of valid JSON; the end of generation only once the
 * object is complete.
 *
 *     struct json_grammar g;
 *     json_grammar_init(&g);
 *     struct json_grammar t = g;                         // try a token on a copy
 *     if (json_grammar_feed(&t, piece, len)) ... allowed ...
 *     json_grammar_feed(&g, chosen, len);                // then advance the real state
 *     if (json_grammar_done(&g)) ... stop ...
 *
 * RFC 8259 syntax (strings, escapes with \u and four hex digits, numbers, true/false/null, nesting
 * up to JSON_GRAMMAR_DEPTH); whitespace is allowed where JSON allows it and after the object. */
#ifndef SNIPER_JSON_GRAMMAR_H
#define SNIPER_JSON_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_GRAMMAR_DEPTH 64

struct json_grammar {
    uint8_t mode;                      /* what the next byte may be (json_grammar.c) */
    uint8_t sub;                       /* position inside a number, literal or \u escape */
    uint8_t lit;                       /* which literal (true, false, null) */
    bool key;                          /* the string being read is an object key */
    uint8_t depth;
    char stack[JSON_GRAMMAR_DEPTH];    /* '{' or '[' per open container */
};

void json_grammar_init(struct json_grammar *g);

/* Feeds n bytes; false when they cannot continue valid JSON (g is then unusable). */
bool json_grammar_feed(struct json_grammar *g, const char *s, size_t n);

/* True once the top-level object is closed. */
bool json_grammar_done(const struct json_grammar *g);

#endif
