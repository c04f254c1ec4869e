/* jsonw.h - a JSON writer for jansson values, in the two spellings sniperd needs: Python's
 * json.dumps(x, ensure_ascii=False) (what chat templates' tojson writes into prompts) and compact
 * (the API's bodies). Keys keep their order; reals are the shortest digits that read back exactly,
 * as Python's repr writes them (non-finite reals, which JSON lacks, as Python: NaN, Infinity).
 *
 *     char *s = jsonw_dumps(v, JSONW_COMPACT);   // free(s)
 *
 * Unlike json_dumps, an allocation failure anywhere gives NULL, never a truncated text. */
#ifndef SNIPER_JSONW_H
#define SNIPER_JSONW_H

#include <jansson.h>

enum jsonw_style {
    JSONW_COMPACT, /* {"a":[1,2.5]} */
    JSONW_PYTHON,  /* {"a": [1, 2.5]} */
};

/* v as JSON text (malloc'd, NUL-terminated; the caller frees it), or NULL on no memory or when v
 * is NULL. */
char *jsonw_dumps(const json_t *v, enum jsonw_style style);

#endif
