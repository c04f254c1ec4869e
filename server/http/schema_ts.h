/* schema_ts.h - a function's JSON-schema parameters as the TypeScript lines gpt-oss's chat
 * template writes in its tools namespace:
 *
 *     // the city's name        (description, when there is one)
 *     location: string,         ("?:" when not required; ", // default: ..." when it has one)
 *
 * Used by chat_harmony.c; the output is the template's, byte for byte. */
#ifndef SNIPER_SCHEMA_TS_H
#define SNIPER_SCHEMA_TS_H

#include <jansson.h>

#include "strbuf.h"

/* Appends the parameter `name` of schema spec (borrowed) as its comment and type line; required is
 * the function's "required" array (or NULL). */
void schema_ts_put_param(struct strbuf *b, const char *name, const json_t *spec,
                         const json_t *required);

#endif
