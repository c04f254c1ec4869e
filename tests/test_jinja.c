/* test_jinja.c - JSON values as the templates' Jinja writes them, with fixed expected texts:
 * tojson (keys in their order, ", " and ": ", non-ASCII kept), str() (True, False, None, numbers,
 * strings bare, containers as tojson) and truthiness (null, false, 0, "", [] and {} are false). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jinja.h"
#include "strbuf.h"

static json_t *parse(const char *text) {
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    CHECK_MSG(v != NULL, "cannot parse %s", text);
    return v;
}

static void expect(void (*put)(struct strbuf *, const json_t *), const char *in, const char *want) {
    json_t *v = parse(in);
    struct strbuf b = {0};
    put(&b, v);
    char *got = strbuf_take(&b);
    CHECK_MSG(got && strcmp(got, want) == 0, "%s: got \"%s\", want \"%s\"", in, got ? got : "",
              want);
    free(got);
    json_decref(v);
}

static void test_put_json(void) {
    expect(jinja_put_json, "{\"b\":1,\"a\":[true,null,\"\xc3\xa9\"]}",
           "{\"b\": 1, \"a\": [true, null, \"\xc3\xa9\"]}");
    expect(jinja_put_json, "{\"x\":{\"y\":[]},\"z\":\"q\\\"\"}",
           "{\"x\": {\"y\": []}, \"z\": \"q\\\"\"}");
    expect(jinja_put_json, "0.25", "0.25");
    expect(jinja_put_json, "\"tab\\there\"", "\"tab\\there\"");
}

static void test_put_str(void) {
    expect(jinja_put_str, "\"plain \xc3\xa9\"", "plain \xc3\xa9");
    expect(jinja_put_str, "true", "True");
    expect(jinja_put_str, "false", "False");
    expect(jinja_put_str, "null", "None");
    expect(jinja_put_str, "-7", "-7");
    expect(jinja_put_str, "1.5", "1.5");
    expect(jinja_put_str, "[1,\"a\"]", "[1, \"a\"]");
    expect(jinja_put_str, "{\"k\":\"v\"}", "{\"k\": \"v\"}");
}

static void test_truthy(void) {
    static const char *const falsy[] = {"null", "false", "0", "0.0", "\"\"", "[]", "{}"};
    static const char *const truthy[] = {"true", "1", "-2", "0.5", "\"a\"", "[0]", "{\"a\":0}"};
    CHECK(!jinja_truthy(NULL));
    for (size_t i = 0; i < sizeof(falsy) / sizeof(falsy[0]); i++) {
        json_t *v = parse(falsy[i]);
        CHECK_MSG(!jinja_truthy(v), "%s is true", falsy[i]);
        json_decref(v);
    }
    for (size_t i = 0; i < sizeof(truthy) / sizeof(truthy[0]); i++) {
        json_t *v = parse(truthy[i]);
        CHECK_MSG(jinja_truthy(v), "%s is false", truthy[i]);
        json_decref(v);
    }
}

static const struct test_case cases[] = {
    {"put_json", test_put_json},
    {"put_str", test_put_str},
    {"truthy", test_truthy},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
