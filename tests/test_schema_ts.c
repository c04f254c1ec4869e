/* test_schema_ts.c - a function's JSON-schema parameters as gpt-oss's template writes them, with
 * fixed expected lines: description, required or optional, enum and plain defaults, arrays
 * (primitive, nullable, of objects), nested objects, type unions, oneOf, and the depth limit that
 * turns a deeper schema into "any". (test_chat's harmony goldens check whole tool blocks against
 * jinja2's rendering.) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "schema_ts.h"
#include "strbuf.h"

/* The parameter line of name with schema spec_json; required_json is a JSON array or NULL. */
static char *param(const char *name, const char *spec_json, const char *required_json) {
    json_t *spec = json_loads(spec_json, 0, NULL);
    json_t *req = required_json ? json_loads(required_json, 0, NULL) : NULL;
    CHECK_MSG(spec != NULL, "cannot parse %s", spec_json);
    struct strbuf b = {0};
    schema_ts_put_param(&b, name, spec, req);
    json_decref(spec);
    json_decref(req);
    return strbuf_take(&b);
}

static void expect(const char *name, const char *spec, const char *req, const char *want) {
    char *got = param(name, spec, req);
    CHECK_MSG(got && strcmp(got, want) == 0, "%s: got \"%s\", want \"%s\"", name, got ? got : "",
              want);
    free(got);
}

static void test_scalars(void) {
    expect("city", "{\"type\":\"string\",\"description\":\"The city\"}", "[\"city\"]",
           "// The city\ncity: string,\n");
    expect("days", "{\"type\":\"integer\"}", NULL, "days?: number,\n");
    expect("name", "{\"type\":\"string\",\"nullable\":true}", "[\"name\"]",
           "name: string | null,\n");
    expect("exact", "{\"type\":\"boolean\",\"default\":true}", "[]",
           "exact?: boolean, // default: true,\n");
    expect("unit", "{\"type\":\"string\",\"enum\":[\"c\",\"f\"],\"default\":\"c\"}", "[]",
           "unit?: \"c\" | \"f\", // default: c,\n");
    expect("id", "{\"type\":[\"string\",\"null\"]}", "[\"id\"]", "id: string | null,\n");
    expect("blob", "{\"description\":\"\"}", "[\"blob\"]", "blob: any,\n");
}

static void test_arrays_objects(void) {
    expect("tags", "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"nullable\":true}", NULL,
           "tags?: string[] | null,\n");
    expect("ns", "{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", NULL, "ns?: number[],\n");
    expect("any", "{\"type\":\"array\"}", NULL, "any?: any[],\n");
    expect("objs", "{\"type\":\"array\",\"items\":{\"type\":\"object\"}}", NULL,
           "objs?: object[],\n");
    expect("pos",
           "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},"
           "\"y\":{\"type\":\"string\"}},\"required\":[\"x\"]}",
           NULL, "pos?: {\nx: \n                number, y?: \n                string},\n");
}

static void test_one_of(void) {
    expect("v",
           "{\"oneOf\":[{\"type\":\"string\",\"description\":\"a name\"},"
           "{\"type\":\"integer\",\"default\":3}],\"default\":\"x\"}",
           NULL,
           "v?: string// a name | \nnumber                    // default: 3// default: x,\n");
}

/* Objects nested 20 deep: 17 levels are written (0..16), the rest is "any". */
static void test_depth_limit(void) {
    char spec[2048] = "";
    size_t n = 0;
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(spec + n, sizeof(spec) - n,
                              "{\"type\":\"object\",\"properties\":{\"a\":");
    n += (size_t)snprintf(spec + n, sizeof(spec) - n, "{\"type\":\"string\"}");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(spec + n, sizeof(spec) - n, "}}");
    CHECK(n < sizeof(spec));
    char *got = param("deep", spec, NULL);
    int opens = 0;
    for (const char *q = got; q && *q; q++)
        opens += *q == '{';
    CHECK_EQ_INT(opens, 17);
    CHECK(got && strstr(got, "any") && !strstr(got, "string"));
    free(got);
}

static const struct test_case cases[] = {
    {"scalars", test_scalars},
    {"arrays_objects", test_arrays_objects},
    {"one_of", test_one_of},
    {"depth_limit", test_depth_limit},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
