/* stop_text.c - the hold-back of stop strings (see stop_text.h).
 * Invariants: buf[0..len) never contains a whole stop string, and after each push it is exactly
 * the longest tail of the text that is a proper prefix of some stop string (nothing is held that
 * cannot become one); show is never called with nothing. */
#include "stop_text.h"

#include <string.h>

void stop_text_init(struct stop_text *t, const char *const *stops, int n_stop) {
    t->stops = stops;
    t->n_stop = n_stop;
    t->len = 0;
}

/* Length of the longest suffix of buf that is a proper prefix of one of the stop strings. */
static size_t stop_tail(const struct stop_text *t) {
    size_t best = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stops[i]);
        for (size_t k = sl - 1 < t->len ? sl - 1 : t->len; k > best; k--)
            if (memcmp(t->buf + t->len - k, t->stops[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

/* Where the first stop string in buf starts, or len. */
static size_t stop_first(const struct stop_text *t) {
    size_t first = t->len;
    for (int i = 0; i < t->n_stop; i++) {
        const char *at = memmem(t->buf, t->len, t->stops[i], strlen(t->stops[i]));
        if (at && (size_t)(at - t->buf) < first)
            first = (size_t)(at - t->buf);
    }
    return first;
}

bool stop_text_push(struct stop_text *t, const char *text, size_t len, stop_text_fn show,
                    void *ctx) {
    while (len > 0) {
        size_t take = sizeof(t->buf) - t->len < len ? sizeof(t->buf) - t->len : len;
        memcpy(t->buf + t->len, text, take);
        t->len += take;
        text += take;
        len -= take;
        size_t first = stop_first(t);
        if (first < t->len) {
            if (first > 0)
                show(ctx, t->buf, first);
            t->len = 0;
            return true;
        }
        size_t keep = stop_tail(t);
        if (keep == t->len && t->len == sizeof(t->buf))
            keep = 0; /* cannot happen with stop strings shorter than the buffer */
        if (t->len > keep)
            show(ctx, t->buf, t->len - keep);
        memmove(t->buf, t->buf + t->len - keep, keep);
        t->len = keep;
    }
    return false;
}

void stop_text_flush(struct stop_text *t, stop_text_fn show, void *ctx) {
    if (t->len > 0)
        show(ctx, t->buf, t->len);
    t->len = 0;
}
