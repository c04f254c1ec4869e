/* jinja.h - JSON values as the chat templates' Jinja writes them: tojson, str() and truthiness, for
 * the renderers that must produce the template's bytes (chat_*.c, schema_ts.c). Allocation failures
 * set the strbuf's oom flag, reported once by whoever takes the string. */
#ifndef SNIPER_JINJA_H
#define SNIPER_JINJA_H

#include <jansson.h>
#include <stdbool.h>

#include "strbuf.h"

/* Appends v as the templates' tojson writes it (Python's json.dumps, ensure_ascii=False). */
void jinja_put_json(struct strbuf *b, const json_t *v);

/* Appends v as a template's string conversion writes it (Python's str()): strings as they are,
 * objects and arrays as tojson, other scalars as True, False, None, 3, 1.5. */
void jinja_put_str(struct strbuf *b, const json_t *v);

/* Jinja's truthiness of a JSON value (absent, null, false, 0, "", [] and {} are false). */
bool jinja_truthy(const json_t *v);

#endif
