/* jsonw.c - jansson values written as JSON text, compact or as Python's json.dumps writes them.
 * Invariant: the output is complete or NULL (an allocation failure is remembered and reported
 * once at the end, never written around). */
#include "jsonw.h"

#include "strbuf.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wbuf {
    struct strbuf s;
    enum jsonw_style style;
};

static void put(struct wbuf *b, const char *s, size_t n) {
    strbuf_putn(&b->s, s, n);
}

static void puts_(struct wbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Escapes as Python does with ensure_ascii=False: quote, backslash and control characters only
 * (\uXXXX in lower-case hex). */
static void write_string(struct wbuf *b, const char *s, size_t n) {
    size_t run = 0;
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : NULL;
        char u[8];
        if (!esc && c >= 0x20)
            continue;
        put(b, s + run, i - run);
        run = i + 1;
        if (!esc) {
            snprintf(u, sizeof(u), "\\u%04x", c);
            esc = u;
        }
        puts_(b, esc);
    }
    put(b, s + run, n - run);
    put(b, "\"", 1);
}

/* Python's repr of a float: the shortest digits that read back to x, in fixed notation for
 * decimal exponents -4..15 (always with a fraction) and d.ddde+XX otherwise. */
static void write_real(struct wbuf *b, double x) {
    char e[40], digits[24], out[64];
    size_t nd = 0, o = 0;
    if (isnan(x) || isinf(x)) {
        puts_(b, isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity");
        return;
    }
    for (int prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec, x);
        if (strtod(e, NULL) == x)
            break;
    }
    const char *p = e;
    if (*p == '-')
        out[o++] = '-', p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp = atoi(p + 1);
    if (exp >= -4 && exp < 0) {
        snprintf(out + o, sizeof(out) - o, "0.%.*s%s", -exp - 1, "000", digits);
    } else if (exp >= 0 && exp < 16) {
        for (int i = 0; i <= exp; i++)
            out[o++] = (size_t)i < nd ? digits[i] : '0';
        out[o++] = '.';
        for (size_t i = (size_t)exp + 1; i < nd; i++)
            out[o++] = digits[i];
        if ((size_t)exp + 1 >= nd)
            out[o++] = '0';
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        out[o] = '\0';
        if (nd > 1)
            o += (size_t)snprintf(out + o, sizeof(out) - o, ".%s", digits + 1);
        snprintf(out + o, sizeof(out) - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    puts_(b, out);
}

static void write_value(struct wbuf *b, const json_t *v);

static void write_object(struct wbuf *b, const json_t *v) {
    const char *key;
    json_t *item;
    bool first = true;
    put(b, "{", 1);
    json_object_foreach((json_t *)v, key, item) {
        if (!first)
            puts_(b, b->style == JSONW_PYTHON ? ", " : ",");
        first = false;
        write_string(b, key, strlen(key));
        puts_(b, b->style == JSONW_PYTHON ? ": " : ":");
        write_value(b, item);
    }
    put(b, "}", 1);
}

static void write_array(struct wbuf *b, const json_t *v) {
    size_t i;
    json_t *item;
    put(b, "[", 1);
    json_array_foreach(v, i, item) {
        if (i)
            puts_(b, b->style == JSONW_PYTHON ? ", " : ",");
        write_value(b, item);
    }
    put(b, "]", 1);
}

static void write_value(struct wbuf *b, const json_t *v) {
    char num[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: write_object(b, v); break;
    case JSON_ARRAY: write_array(b, v); break;
    case JSON_STRING: write_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        puts_(b, num);
        break;
    case JSON_REAL: write_real(b, json_real_value(v)); break;
    case JSON_TRUE: puts_(b, "true"); break;
    case JSON_FALSE: puts_(b, "false"); break;
    case JSON_NULL: puts_(b, "null"); break;
    }
}

char *jsonw_dumps(const json_t *v, enum jsonw_style style) {
    struct wbuf b = {.style = style};
    if (!v)
        return NULL;
    write_value(&b, v);
    return strbuf_take(&b.s);
}
