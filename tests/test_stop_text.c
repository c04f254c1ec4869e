/* test_stop_text.c - the hold-back of stop strings, with fixed expected texts: a stop string split
 * across pieces, one inside a UTF-8 sequence, one at the very start, several stops (the earliest
 * wins, the longest possible start is held), a false start released, the flush at the end, and
 * texts longer than the buffer. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "stop_text.h"

/* What show received: the text in order and the number of calls. */
struct shown {
    char text[16384];
    size_t len;
    int calls;
    int empty_calls;
};

static void show(void *ctx, const char *text, size_t len) {
    struct shown *w = ctx;
    w->calls++;
    w->empty_calls += len == 0;
    if (w->len + len < sizeof(w->text)) {
        memcpy(w->text + w->len, text, len);
        w->len += len;
        w->text[w->len] = '\0';
    }
}

/* Pushes the pieces in turn; checks which push reported the stop (-1: none), what was shown after
 * each push and, after a final flush when no stop came, the whole text. */
struct step {
    const char *piece;
    const char *shown_after; /* everything shown so far, after this push */
};

static void check_pushes(const char *name, const char *const *stops, int n_stop,
                         const struct step *steps, int n_steps, int stop_at,
                         const char *after_flush) {
    static struct stop_text t;
    struct shown w = {0};
    stop_text_init(&t, stops, n_stop);
    int stopped = -1;
    for (int i = 0; i < n_steps && stopped < 0; i++) {
        if (stop_text_push(&t, steps[i].piece, strlen(steps[i].piece), show, &w))
            stopped = i;
        CHECK_MSG(strcmp(w.text, steps[i].shown_after) == 0,
                  "%s: after piece %d shown \"%s\", want \"%s\"", name, i, w.text,
                  steps[i].shown_after);
    }
    CHECK_MSG(stopped == stop_at, "%s: stop at piece %d, want %d", name, stopped, stop_at);
    if (stopped >= 0)
        CHECK_MSG(t.len == 0, "%s: %zu bytes still held after the stop", name, t.len);
    stop_text_flush(&t, show, &w);
    CHECK_MSG(strcmp(w.text, after_flush) == 0, "%s: after the flush \"%s\", want \"%s\"", name,
              w.text, after_flush);
    CHECK_MSG(w.empty_calls == 0, "%s: show called %d times with nothing", name, w.empty_calls);
    CHECK_EQ_INT(t.len, 0);
}

static void test_no_stops(void) {
    const struct step s[] = {{"abc", "abc"}, {"", "abc"}, {"def", "abcdef"}};
    check_pushes("no stops", NULL, 0, s, 3, -1, "abcdef");
}

static void test_split_across_pieces(void) {
    const char *stops[] = {"END"};
    const struct step s[] = {{"hello E", "hello "}, {"N", "hello "}, {"D more", "hello "}};
    check_pushes("split", stops, 1, s, 3, 2, "hello ");
}

static void test_false_start_released(void) {
    const char *stops[] = {"END"};
    const struct step s[] = {{"xE", "x"}, {"Nx", "xENx"}, {"EN", "xENx"}};
    check_pushes("false start", stops, 1, s, 3, -1, "xENxEN"); /* the flush shows "EN" */
}

static void test_stop_at_start(void) {
    const char *stops[] = {"END"};
    const struct step s[] = {{"END rest", ""}};
    check_pushes("at start", stops, 1, s, 1, 0, "");
    const struct step s2[] = {{"E", ""}, {"ND", ""}};
    check_pushes("at start, split", stops, 1, s2, 2, 1, "");
}

static void test_several_stops(void) {
    /* the earliest occurrence wins whatever the order of the list */
    const char *ab[] = {"foo", "ba"}, *ba[] = {"ba", "foo"};
    const struct step s[] = {{"xxbfoo ba", "xxb"}};
    check_pushes("earliest, first listed", ab, 2, s, 1, 0, "xxb");
    check_pushes("earliest, second listed", ba, 2, s, 1, 0, "xxb");
    /* the longest tail that may begin any of them is held: "ab" (abc), not only "b" (bcd) */
    const char *two[] = {"bcd", "abc"};
    const struct step s2[] = {{"zab", "z"}, {"cd", "z"}};
    check_pushes("longest held, completes", two, 2, s2, 2, 1, "z");
    const struct step s3[] = {{"zab", "z"}, {"x", "zabx"}};
    check_pushes("longest held, released", two, 2, s3, 2, -1, "zabx");
    /* the second stop completes while the first is still a possible start */
    const char *nest[] = {"abcd", "bc"};
    const struct step s4[] = {{"xab", "x"}, {"c", "xa"}};
    check_pushes("inner stop", nest, 2, s4, 2, 1, "xa");
}

static void test_utf8(void) {
    const char *stops[] = {"\xc3\xa9"}; /* é */
    /* the stop's first byte arrives alone: held, never shown as half a character */
    const struct step s[] = {{"caf\xc3", "caf"}, {"\xa9!", "caf"}};
    check_pushes("split inside é", stops, 1, s, 2, 1, "caf");
    /* è shares é's first byte: held until the second byte shows it is not the stop */
    const struct step s2[] = {{"\xc3", ""}, {"\xa8", "\xc3\xa8"}};
    check_pushes("è after a held byte", stops, 1, s2, 2, -1, "\xc3\xa8");
    /* a multibyte stop after multibyte text */
    const char *word[] = {"\xe2\x80\x94stop"}; /* —stop */
    const struct step s3[] = {{"\xc3\xa9t\xc3\xa9\xe2\x80", "\xc3\xa9t\xc3\xa9"},
                              {"\x94st", "\xc3\xa9t\xc3\xa9"},
                              {"op", "\xc3\xa9t\xc3\xa9"}};
    check_pushes("multibyte stop", word, 1, s3, 3, 2, "\xc3\xa9t\xc3\xa9");
}

/* Texts longer than the buffer go through in buffer-sized chunks; a stop inside one is found. */
static void test_long_text(void) {
    static char text[6001], want[6001];
    const char *stops[] = {"ab"};
    memset(text, 'a', 6000);
    text[6000] = '\0';
    memcpy(want, text, sizeof(want));
    static struct stop_text t;
    static struct shown w;
    stop_text_init(&t, stops, 1);
    CHECK(!stop_text_push(&t, text, 6000, show, &w));
    CHECK_EQ_INT(w.len, 5999); /* the last 'a' may begin "ab" */
    CHECK_EQ_INT(t.len, 1);
    CHECK(stop_text_push(&t, "b", 1, show, &w));
    CHECK_EQ_INT(w.len, 5999);
    text[5000] = 'b'; /* "ab" at 4999, past the first 4096-byte chunk */
    memset(&w, 0, sizeof(w));
    stop_text_init(&t, stops, 1);
    CHECK(stop_text_push(&t, text, 6000, show, &w));
    CHECK_EQ_INT(w.len, 4999);
    CHECK(memcmp(w.text, want, 4999) == 0);
}

static const struct test_case cases[] = {
    {"no_stops", test_no_stops},
    {"split_across_pieces", test_split_across_pieces},
    {"false_start_released", test_false_start_released},
    {"stop_at_start", test_stop_at_start},
    {"several_stops", test_several_stops},
    {"utf8", test_utf8},
    {"long_text", test_long_text},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
