/* test_json_grammar.c - the JSON object automaton: valid objects are accepted whole and byte by
 * byte and end "done"; every proper prefix is accepted and not done; invalid texts are refused at
 * the first byte that breaks them. */
#include <string.h>

#include "harness.h"
#include "json_grammar.h"

static const char *const valid[] = {
    "{}",
    " {\n} ",
    "{\"a\":1}",
    "{\"a\": -0.5e+10, \"b\": [1, 2.25, -3E2, 0], \"c\": {\"d\": null}}",
    "{\"s\": \"x\\\"y\\\\z\\n\\u00e9\\uD83D\\uDE00 \xc3\xa9\"}",
    "{\"t\": true, \"f\": false, \"n\": null, \"e\": [], \"o\": {}}",
    "{\"deep\": [[[[[[{\"x\": [0]}]]]]]]}",
    "{\"k\":\"v\"}\n\n",
};

static const char *const invalid[] = {
    "[]", "\"x\"", "1", "{,}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":1.}",
    "{\"a\":.5}", "{\"a\":-}", "{\"a\":1e}", "{\"a\":tru}x", "{\"a\":nul}", "{a:1}",
    "{\"a\":\"\\x\"}", "{\"a\":\"\\u12G4\"}", "{\"a\":[1,]}", "{\"a\":[1 2]}", "{\"a\":1]",
    "{\"a\":\"line\nbreak\"}", "{} {}", "{\"a\":1}x", "{\"a\":+1}",
};

static void test_valid(void) {
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        struct json_grammar g;
        json_grammar_init(&g);
        size_t n = strlen(valid[i]);
        bool ok = true;
        for (size_t k = 0; k < n && ok; k++) {
            ok = json_grammar_feed(&g, valid[i] + k, 1);
            /* a proper prefix that does not yet close the object is not done */
            size_t closing = strrchr(valid[i], '}') - valid[i];
            if (ok && k < closing)
                CHECK_MSG(!json_grammar_done(&g), "\"%s\" done after %zu bytes", valid[i], k + 1);
        }
        CHECK_MSG(ok && json_grammar_done(&g), "valid \"%s\" refused or not done", valid[i]);
        json_grammar_init(&g);
        CHECK(json_grammar_feed(&g, valid[i], n) && json_grammar_done(&g));
    }
}

static void test_invalid(void) {
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        struct json_grammar g;
        json_grammar_init(&g);
        bool ok = json_grammar_feed(&g, invalid[i], strlen(invalid[i]));
        CHECK_MSG(!ok || !json_grammar_done(&g), "invalid \"%s\" accepted", invalid[i]);
    }
}

static void test_depth_limit(void) {
    struct json_grammar g;
    json_grammar_init(&g);
    CHECK(json_grammar_feed(&g, "{\"a\":", 5));
    bool ok = true;
    for (int i = 0; i < JSON_GRAMMAR_DEPTH + 1 && ok; i++)
        ok = json_grammar_feed(&g, "[", 1);
    CHECK(!ok);
}

static const struct test_case cases[] = {
    {"valid", test_valid},
    {"invalid", test_invalid},
    {"depth_limit", test_depth_limit},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
