/* schema_ts.c - JSON schemas as TypeScript types, as gpt-oss's chat template writes them (its
 * render_typescript_type macro and the parameter lines of render_tool_namespace), used by the
 * harmony renderer for the developer block's tools. Invariants: the output is the template's, line
 * breaks and indentation included; nesting deeper than SCHEMA_TS_MAX_DEPTH is "any", so a hostile
 * schema cannot recurse without bound. */
#include "schema_ts.h"
#include "jinja.h"

#include <stdlib.h>
#include <string.h>

#define SCHEMA_TS_MAX_DEPTH 16 /* nested schemas deeper than this render as "any" */

static bool str_is(const json_t *v, const char *s) {
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* name is in a schema's "required" list. */
static bool is_required(const json_t *required, const char *name) {
    size_t i;
    json_t *r;
    json_array_foreach(required, i, r) {
        if (str_is(r, name))
            return true;
    }
    return false;
}

/* Characters (code points) of a UTF-8 string: Jinja's |length. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static void put_join(struct strbuf *b, const json_t *arr, const char *sep) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (i)
            strbuf_puts(b, sep);
        jinja_put_str(b, v);
    }
}

static void ts_type(struct strbuf *b, const json_t *spec, int depth);

/* An array's element type: named for the primitives, else the inner type unless it is long. */
static void ts_array(struct strbuf *b, const json_t *spec, int depth) {
    const json_t *items = json_object_get(spec, "items"), *it = json_object_get(items, "type");
    if (!jinja_truthy(items)) {
        strbuf_puts(b, "any[]");
    } else if (str_is(it, "string") || str_is(it, "boolean")) {
        strbuf_puts(b, json_string_value(it));
        strbuf_puts(b, "[]");
    } else if (str_is(it, "number") || str_is(it, "integer")) {
        strbuf_puts(b, "number[]");
    } else {
        struct strbuf inner = {0};
        ts_type(&inner, items, depth + 1);
        const char *t = inner.p ? inner.p : "";
        b->oom |= inner.oom;
        if (strcmp(t, "object | object") == 0 || utf8_chars(t) > 50)
            strbuf_puts(b, "any[]");
        else {
            strbuf_puts(b, t);
            strbuf_puts(b, "[]");
        }
        free(inner.p);
    }
    if (jinja_truthy(json_object_get(spec, "nullable")))
        strbuf_puts(b, " | null");
}

/* oneOf: the variants in turn, each with its description and default (the template's layout,
 * newline and indentation included). */
static void ts_one_of(struct strbuf *b, const json_t *variants, int depth) {
    size_t i;
    json_t *v;
    json_array_foreach(variants, i, v) {
        ts_type(b, v, depth + 1);
        const json_t *desc = json_object_get(v, "description");
        const json_t *def = json_object_get(v, "default");
        if (jinja_truthy(desc)) {
            strbuf_puts(b, "// ");
            jinja_put_str(b, desc);
        }
        if (def) {
            strbuf_puts(b, "                    // default: ");
            jinja_put_json(b, def);
        }
        if (i + 1 < json_array_size(variants))
            strbuf_puts(b, " | \n");
    }
}

/* A nested object: its properties on one line each after a line break and 16 spaces. */
static void ts_object(struct strbuf *b, const json_t *spec, int depth) {
    const json_t *props = json_object_get(spec, "properties");
    const json_t *required = json_object_get(spec, "required");
    const char *key;
    json_t *v;
    size_t k = 0;
    if (!jinja_truthy(props) || !json_is_object(props)) {
        strbuf_puts(b, "object");
        return;
    }
    strbuf_puts(b, "{\n");
    json_object_foreach((json_t *)props, key, v) {
        strbuf_puts(b, key);
        strbuf_puts(b, is_required(required, key) ? ": \n                "
                                                  : "?: \n                ");
        ts_type(b, v, depth + 1);
        if (++k < json_object_size(props))
            strbuf_puts(b, ", ");
    }
    strbuf_puts(b, "}");
}

/* A JSON schema as the template's render_typescript_type writes it. */
static void ts_type(struct strbuf *b, const json_t *spec, int depth) {
    const json_t *type = json_object_get(spec, "type");
    bool nullable = jinja_truthy(json_object_get(spec, "nullable"));
    if (depth > SCHEMA_TS_MAX_DEPTH || !json_is_object(spec)) {
        strbuf_puts(b, "any");
    } else if (str_is(type, "array")) {
        ts_array(b, spec, depth);
    } else if (json_is_array(type) && json_array_size(type) > 0) {
        put_join(b, type, " | ");
    } else if (jinja_truthy(json_object_get(spec, "oneOf"))) {
        ts_one_of(b, json_object_get(spec, "oneOf"), depth);
    } else if (str_is(type, "string")) {
        const json_t *e = json_object_get(spec, "enum");
        if (jinja_truthy(e) && json_is_array(e)) {
            strbuf_puts(b, "\"");
            put_join(b, e, "\" | \"");
            strbuf_puts(b, "\"");
        } else {
            strbuf_puts(b, nullable ? "string | null" : "string");
        }
    } else if (str_is(type, "number") || str_is(type, "integer")) {
        strbuf_puts(b, "number");
    } else if (str_is(type, "boolean")) {
        strbuf_puts(b, "boolean");
    } else if (str_is(type, "object")) {
        ts_object(b, spec, depth);
    } else {
        strbuf_puts(b, "any");
    }
}

void schema_ts_put_param(struct strbuf *b, const char *name, const json_t *spec,
                         const json_t *required) {
    const json_t *desc = json_object_get(spec, "description");
    const json_t *def = json_object_get(spec, "default");
    if (jinja_truthy(desc)) {
        strbuf_puts(b, "// ");
        jinja_put_str(b, desc);
        strbuf_puts(b, "\n");
    }
    strbuf_puts(b, name);
    strbuf_puts(b, is_required(required, name) ? ": " : "?: ");
    ts_type(b, spec, 0);
    /* the template's string concatenations */
    if (def && jinja_truthy(json_object_get(spec, "enum"))) {
        strbuf_puts(b, ", // default: ");
        jinja_put_str(b, def);
    } else if (def && jinja_truthy(json_object_get(spec, "oneOf"))) {
        strbuf_puts(b, "// default: ");
        jinja_put_str(b, def);
    } else if (def) {
        strbuf_puts(b, ", // default: ");
        jinja_put_json(b, def);
    }
    strbuf_puts(b, ",\n");
}
