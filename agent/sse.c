/* sse.c - see sse.h. State between calls: the partial line, the partial event's data, and whether
 * the last byte was a CR (so a CRLF split across two feeds is one line ending). */
#include "sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sse_init(struct sse_parser *p, sse_event_fn on_event, void *ctx) {
    memset(p, 0, sizeof(*p));
    p->on_event = on_event;
    p->ctx = ctx;
}

/* Grows *buf to hold need bytes. Returns 0 or -ENOMEM. */
static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *b = realloc(*buf, c);
    if (!b)
        return -ENOMEM;
    *buf = b;
    *cap = c;
    return 0;
}

/* A blank line: hands the event to the callback and starts the next one. */
static int sse_dispatch(struct sse_parser *p) {
    if (!p->has_data)
        return 0;
    p->has_data = false;
    size_t n = p->data_bytes;
    p->data_bytes = 0;
    p->n_events++;
    return p->on_event(p->ctx, p->data, n);
}

/* One complete line (in p->line, without its ending). */
static int sse_line(struct sse_parser *p) {
    const char *l = p->line;
    size_t n = p->line_bytes;
    p->line_bytes = 0;
    if (n == 0)
        return sse_dispatch(p);
    const char *colon = memchr(l, ':', n);
    size_t name_bytes = colon ? (size_t)(colon - l) : n;
    if (name_bytes != 4 || memcmp(l, "data", 4) != 0)
        return 0;    /* a comment (":...") or a field other than data */
    const char *v = colon ? colon + 1 : l + n;
    size_t vn = (size_t)(l + n - v);
    if (vn > 0 && *v == ' ')
        v++, vn--;
    size_t extra = p->has_data ? 1 : 0;
    if (grow(&p->data, &p->data_cap, p->data_bytes + extra + vn + 1) < 0)
        return -ENOMEM;
    if (extra)
        p->data[p->data_bytes++] = '\n';
    memcpy(p->data + p->data_bytes, v, vn);
    p->data_bytes += vn;
    p->data[p->data_bytes] = '\0';
    p->has_data = true;
    return 0;
}

int sse_feed(struct sse_parser *p, const char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = bytes[i];
        if (c == '\n' && p->after_cr) {
            p->after_cr = false;
            continue;
        }
        p->after_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            int rc = sse_line(p);
            if (rc != 0)
                return rc;
            continue;
        }
        if (p->line_bytes >= SSE_MAX_LINE_BYTES)
            return -E2BIG;
        if (grow(&p->line, &p->line_cap, p->line_bytes + 1) < 0)
            return -ENOMEM;
        p->line[p->line_bytes++] = c;
    }
    return 0;
}

bool sse_pending(const struct sse_parser *p) {
    return p->line_bytes > 0 || p->has_data;
}

void sse_release(struct sse_parser *p) {
    if (!p)
        return;
    free(p->line);
    free(p->data);
    memset(p, 0, sizeof(*p));
}
