/* test_agent_sse.c - the SSE parser (agent/sse.c): events split at every byte, CRLF and CR line
 * endings, multi-line data, comments and other fields skipped, a callback that stops, overlong
 * lines refused. */
#include "harness.h"
#include "sse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct events {
    char got[8][64];
    int n;
    int stop_at;   /* return 1 from the callback at this event (0: never) */
};

static int collect(void *ctx, const char *data, size_t n) {
    struct events *e = ctx;
    if (e->n < 8)
        snprintf(e->got[e->n], sizeof(e->got[0]), "%.*s", (int)n, data);
    e->n++;
    return e->stop_at && e->n == e->stop_at ? 1 : 0;
}

static const char STREAM[] =
    ": a comment\n"
    "event: message\n"
    "id: 7\n"
    "data: {\"a\":1}\n"
    "\n"
    "data:no-space\r\n"
    "\r\n"
    "data: line one\n"
    "data: line two\n"
    "\n"
    "data: cr ending\r"
    "\r"
    "data\n"
    "\n"
    "retry: 100\n"
    "\n"
    "data: [DONE]\n"
    "\n";

static void check_stream(struct events *e) {
    CHECK_EQ_INT(e->n, 6);
    CHECK_STR(e->got[0], "{\"a\":1}");
    CHECK_STR(e->got[1], "no-space");
    CHECK_STR(e->got[2], "line one\nline two");
    CHECK_STR(e->got[3], "cr ending");
    CHECK_STR(e->got[4], "");
    CHECK_STR(e->got[5], "[DONE]");
}

static void test_whole(void) {
    struct events e = { 0 };
    struct sse_parser p;
    sse_init(&p, collect, &e);
    CHECK_EQ_INT(sse_feed(&p, STREAM, strlen(STREAM)), 0);
    check_stream(&e);
    CHECK(!sse_pending(&p));
    sse_release(&p);
}

static void test_byte_at_a_time(void) {
    struct events e = { 0 };
    struct sse_parser p;
    sse_init(&p, collect, &e);
    for (size_t i = 0; i < strlen(STREAM); i++)
        CHECK_EQ_INT(sse_feed(&p, STREAM + i, 1), 0);
    check_stream(&e);
    sse_release(&p);
}

static void test_pending_and_stop(void) {
    struct events e = { .stop_at = 2 };
    struct sse_parser p;
    sse_init(&p, collect, &e);
    const char s[] = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
    CHECK_EQ_INT(sse_feed(&p, s, strlen(s)), 1);   /* the callback's value comes back */
    CHECK_EQ_INT(e.n, 2);
    sse_release(&p);

    struct events f = { 0 };
    sse_init(&p, collect, &f);
    CHECK_EQ_INT(sse_feed(&p, "data: half", 10), 0);
    CHECK(sse_pending(&p));
    CHECK_EQ_INT(f.n, 0);
    sse_release(&p);
}

static void test_overlong_line(void) {
    struct events e = { 0 };
    struct sse_parser p;
    size_t n = SSE_MAX_LINE_BYTES + 10;
    char *big = malloc(n);
    memset(big, 'x', n);
    sse_init(&p, collect, &e);
    CHECK_EQ_INT(sse_feed(&p, big, n), -E2BIG);
    sse_release(&p);
    sse_release(NULL);
    free(big);
}

static const struct test_case cases[] = {
    { "whole", test_whole },
    { "byte_at_a_time", test_byte_at_a_time },
    { "pending_and_stop", test_pending_and_stop },
    { "overlong_line", test_overlong_line },
    { 0 },
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
