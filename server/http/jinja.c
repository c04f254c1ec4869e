/* jinja.c - JSON values as the chat templates' Jinja writes them (see jinja.h).
 * Invariant: jinja_put_json is Hugging Face's and llama.cpp's tojson (jsonw's JSONW_PYTHON: keys in
 * their order, ", " and ": ", non-ASCII kept); jinja_put_str is Python's str() of the value. */
#include "jinja.h"
#include "jsonw.h"

#include <stdio.h>
#include <stdlib.h>

void jinja_put_json(struct strbuf *b, const json_t *v) {
    char *s = jsonw_dumps(v, JSONW_PYTHON);
    if (!s) {
        b->oom = true;
        return;
    }
    strbuf_puts(b, s);
    free(s);
}

void jinja_put_str(struct strbuf *b, const json_t *v) {
    char num[64];
    if (json_is_string(v))
        strbuf_putn(b, json_string_value(v), json_string_length(v));
    else if (json_is_object(v) || json_is_array(v))
        jinja_put_json(b, v);
    else if (json_is_boolean(v))
        strbuf_puts(b, json_is_true(v) ? "True" : "False");
    else if (json_is_null(v))
        strbuf_puts(b, "None");
    else if (json_is_integer(v)) {
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        strbuf_puts(b, num);
    } else
        jinja_put_json(b, v); /* a real: Python's repr, as tojson writes it */
}

bool jinja_truthy(const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v))
        return false;
    if (json_is_string(v))
        return json_string_length(v) > 0;
    if (json_is_array(v))
        return json_array_size(v) > 0;
    if (json_is_object(v))
        return json_object_size(v) > 0;
    if (json_is_integer(v))
        return json_integer_value(v) != 0;
    return !json_is_real(v) || json_real_value(v) != 0.0;
}
