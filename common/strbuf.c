/* strbuf.c - see strbuf.h. */
#include "strbuf.h"

#include <stdlib.h>
#include <string.h>

void strbuf_putn(struct strbuf *b, const char *s, size_t n) {
    if (b->oom || n == 0)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void strbuf_puts(struct strbuf *b, const char *s) {
    strbuf_putn(b, s, strlen(s));
}

char *strbuf_take(struct strbuf *b) {
    if (!b->oom && !b->p) {
        b->p = calloc(1, 1);
        b->oom = !b->p;
    }
    char *s = b->oom ? NULL : b->p;
    if (b->oom)
        free(b->p);
    *b = (struct strbuf){0};
    return s;
}
