/* test_utf8.c - generated text into JSON strings: the incomplete tail held back for the next
 * piece (and nothing else), invalid bytes as U+FFFD one by one, and pieces split at the tail
 * joined into the whole text's string. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "utf8.h"

static void test_tail(void) {
    static const struct {
        const char *s;
        size_t tail;
    } cases[] = {
        {"", 0}, {"abc", 0}, {"a\xc3", 1}, {"a\xc3\xa9", 0}, {"\xe2\x82", 2}, {"\xe2\x82\xac", 0},
        {"\xf0\x9f\x98", 3}, {"\xf0\x9f\x98\x80", 0}, {"\x80", 0}, {"a\x80\x80", 0},
        {"\xff", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_MSG(utf8_tail(cases[i].s, strlen(cases[i].s)) == cases[i].tail,
                  "case %zu: tail %zu, want %zu", i, utf8_tail(cases[i].s, strlen(cases[i].s)),
                  cases[i].tail);
}

static void test_json_string(void) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"h\xc3\xa9llo", "h\xc3\xa9llo"},
        {"a\xff" "b", "a\xef\xbf\xbd" "b"},
        {"\xc3", "\xef\xbf\xbd"},                       /* cut short */
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},       /* overlong */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *v = utf8_json_string(cases[i].in, strlen(cases[i].in));
        CHECK_MSG(v && strcmp(json_string_value(v), cases[i].out) == 0, "case %zu", i);
        json_decref(v);
    }
}

/* Pieces released up to their tail join into the whole text. */
static void test_pieces(void) {
    const char *text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80!";
    size_t n = strlen(text);
    for (size_t cut = 0; cut <= n; cut++) {
        size_t ready = cut - utf8_tail(text, cut);
        json_t *a = utf8_json_string(text, ready), *b = utf8_json_string(text + ready, n - ready);
        char joined[64];
        snprintf(joined, sizeof(joined), "%s%s", json_string_value(a), json_string_value(b));
        CHECK_MSG(strcmp(joined, text) == 0, "cut at %zu", cut);
        json_decref(a);
        json_decref(b);
    }
}

static const struct test_case cases[] = {
    {"tail", test_tail},
    {"json_string", test_json_string},
    {"pieces", test_pieces},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
