/* json_grammar.c - a pushdown automaton over bytes for one JSON object.
 * Invariant: after every accepted byte, the text so far is a prefix of some valid JSON object;
 * mode says what may come next, stack[0..depth) the containers still open. */
#include "json_grammar.h"

#include <string.h>

enum {
    M_START,     /* whitespace, then '{' */
    M_OBJ_FIRST, /* after '{': a key or '}' */
    M_OBJ_KEY,   /* after ',' in an object: a key */
    M_COLON,     /* after a key */
    M_VALUE,     /* a value */
    M_ARR_FIRST, /* after '[': a value or ']' */
    M_AFTER,     /* after a value in a container: ',' or its closer */
    M_STR,       /* inside a string */
    M_ESC,       /* after a backslash */
    M_HEX,       /* inside \uXXXX (sub: digits read) */
    M_NUM,       /* inside a number (sub: enum below) */
    M_LIT,       /* inside true / false / null (sub: bytes read) */
    M_DONE,      /* the object is closed: whitespace only */
};

/* Where a number is: which bytes may follow, and whether it may end here. */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const literals[3] = {"true", "false", "null"};

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

void json_grammar_init(struct json_grammar *g) {
    memset(g, 0, sizeof(*g));
    g->mode = M_START;
}

bool json_grammar_done(const struct json_grammar *g) {
    return g->mode == M_DONE;
}

/* A value ended: back to its container, or done at the top. */
static void value_end(struct json_grammar *g) {
    g->mode = g->depth == 0 ? M_DONE : M_AFTER;
}

static bool push(struct json_grammar *g, char c) {
    if (g->depth == JSON_GRAMMAR_DEPTH)
        return false;
    g->stack[g->depth++] = c;
    g->mode = c == '{' ? M_OBJ_FIRST : M_ARR_FIRST;
    return true;
}

static bool pop(struct json_grammar *g, char closer) {
    if (g->depth == 0 || g->stack[g->depth - 1] != (closer == '}' ? '{' : '['))
        return false;
    g->depth--;
    value_end(g);
    return true;
}

/* The first byte of a value. */
static bool value_start(struct json_grammar *g, char c) {
    if (c == '{' || c == '[')
        return push(g, c);
    if (c == '"') {
        g->mode = M_STR;
        g->key = false;
        return true;
    }
    if (c == '-' || is_digit(c)) {
        g->mode = M_NUM;
        g->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
        return true;
    }
    for (uint8_t i = 0; i < 3; i++)
        if (c == literals[i][0]) {
            g->mode = M_LIT;
            g->lit = i;
            g->sub = 1;
            return true;
        }
    return false;
}

/* One byte of a number; a byte that cannot continue it ends it (when it may end) and is then
 * read as what follows the value. */
static bool number_byte(struct json_grammar *g, char c, bool *again) {
    switch (g->sub) {
    case N_MINUS:
        if (!is_digit(c))
            return false;
        g->sub = c == '0' ? N_ZERO : N_INT;
        return true;
    case N_ZERO:
    case N_INT:
    case N_FRAC:
        if (is_digit(c) && g->sub != N_ZERO)
            return true;
        if (c == '.' && g->sub != N_FRAC) {
            g->sub = N_DOT;
            return true;
        }
        if (c == 'e' || c == 'E') {
            g->sub = N_E;
            return true;
        }
        break;
    case N_DOT:
        if (!is_digit(c))
            return false;
        g->sub = N_FRAC;
        return true;
    case N_E:
        if (c == '+' || c == '-') {
            g->sub = N_ESIGN;
            return true;
        }
        /* fall through */
    case N_ESIGN:
        if (!is_digit(c))
            return false;
        g->sub = N_EXP;
        return true;
    case N_EXP:
        if (is_digit(c))
            return true;
        break;
    }
    value_end(g); /* a complete number ends before c */
    *again = true;
    return true;
}

static bool feed_byte(struct json_grammar *g, char c) {
    bool again;
    do {
        again = false;
        switch (g->mode) {
        case M_START:
            if (is_ws(c))
                return true;
            return c == '{' && push(g, c);
        case M_OBJ_FIRST:
        case M_OBJ_KEY:
            if (is_ws(c))
                return true;
            if (c == '}' && g->mode == M_OBJ_FIRST)
                return pop(g, c);
            if (c != '"')
                return false;
            g->mode = M_STR;
            g->key = true;
            return true;
        case M_COLON:
            if (is_ws(c))
                return true;
            if (c != ':')
                return false;
            g->mode = M_VALUE;
            return true;
        case M_ARR_FIRST:
            if (c == ']')
                return pop(g, c);
            /* fall through */
        case M_VALUE:
            if (is_ws(c))
                return true;
            return value_start(g, c);
        case M_AFTER:
            if (is_ws(c))
                return true;
            if (c == ',') {
                g->mode = g->stack[g->depth - 1] == '{' ? M_OBJ_KEY : M_VALUE;
                return true;
            }
            return (c == '}' || c == ']') && pop(g, c);
        case M_STR:
            if (c == '"') {
                if (g->key)
                    g->mode = M_COLON;
                else
                    value_end(g);
                return true;
            }
            if (c == '\\') {
                g->mode = M_ESC;
                return true;
            }
            return (unsigned char)c >= 0x20;
        case M_ESC:
            if (c == 'u') {
                g->mode = M_HEX;
                g->sub = 0;
                return true;
            }
            if (!strchr("\"\\/bfnrt", c) || c == '\0')
                return false;
            g->mode = M_STR;
            return true;
        case M_HEX:
            if (!is_hex(c))
                return false;
            if (++g->sub == 4)
                g->mode = M_STR;
            return true;
        case M_NUM:
            if (!number_byte(g, c, &again))
                return false;
            break;
        case M_LIT:
            if (c != literals[g->lit][g->sub])
                return false;
            if (literals[g->lit][++g->sub] == '\0')
                value_end(g);
            return true;
        case M_DONE:
            return is_ws(c);
        }
    } while (again);
    return true;
}

bool json_grammar_feed(struct json_grammar *g, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!feed_byte(g, s[i]))
            return false;
    return true;
}
