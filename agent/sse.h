/* sse.h - an incremental parser of Server-Sent Events (the text/event-stream format): bytes go in
 * in pieces of any size, each complete event's data comes out once. Only the data field matters
 * to an OpenAI stream; event:, id:, retry: and comment lines are skipped. Lines end with LF, CRLF
 * or CR; several data lines of one event are joined with LF; a blank line ends the event.
 *
 *     struct sse_parser p;
 *     sse_init(&p, on_event, ctx);
 *     sse_feed(&p, bytes, n);  ... sse_release(&p);
 */
#ifndef SNIPER_AGENT_SSE_H
#define SNIPER_AGENT_SSE_H

#include <stdbool.h>
#include <stddef.h>

/* One event's data (NUL-terminated, borrowed until the callback returns). Returns 0 to go on,
 * non-zero to stop parsing (sse_feed then returns that value). */
typedef int (*sse_event_fn)(void *ctx, const char *data, size_t n);

struct sse_parser {
    sse_event_fn on_event;
    void *ctx;
    char *line;          /* the line being read (without its ending) */
    size_t line_bytes, line_cap;
    char *data;          /* the event's data so far */
    size_t data_bytes, data_cap;
    bool has_data;       /* a data: line was seen in this event */
    bool after_cr;       /* the last byte was CR: an LF right after it is part of that ending */
    size_t n_events;     /* events dispatched so far */
};

/* Lines longer than this are refused (a malicious or broken server). */
#define SSE_MAX_LINE_BYTES ((size_t)1 << 22)

void sse_init(struct sse_parser *p, sse_event_fn on_event, void *ctx);

/* Parses n bytes. Returns 0, the callback's non-zero value, -ENOMEM, or -E2BIG (a line over
 * SSE_MAX_LINE_BYTES). */
int sse_feed(struct sse_parser *p, const char *bytes, size_t n);

/* True when bytes of an unfinished event are pending (the stream ended mid-event). */
bool sse_pending(const struct sse_parser *p);

/* Frees the buffers; accepts NULL. */
void sse_release(struct sse_parser *p);

#endif
