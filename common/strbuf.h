/* strbuf.h - a growing NUL-terminated string. Appends after a failed allocation are dropped and
 * remembered, so a writer checks once, at the end.
 *
 *     struct strbuf b = {0};
 *     strbuf_puts(&b, "data: ");
 *     strbuf_putn(&b, json, len);
 *     char *s = strbuf_take(&b);      // NULL when memory ran out; the caller frees s */
#ifndef SNIPER_STRBUF_H
#define SNIPER_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
    char *p;   /* NUL-terminated once anything was written; NULL before */
    size_t n;  /* bytes written, without the NUL */
    size_t cap;
    bool oom;  /* an allocation failed: later appends are dropped */
};

void strbuf_putn(struct strbuf *b, const char *s, size_t n);
void strbuf_puts(struct strbuf *b, const char *s);

/* The string (an empty one when nothing was written), taken over by the caller; NULL (and b's
 * memory freed) when an allocation failed. b is left empty. */
char *strbuf_take(struct strbuf *b);

#endif
