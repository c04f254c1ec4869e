/* chat_gemma4.c - Gemma 4's chat template (google-gemma-4-31B-it): turns as <|turn>ROLE\n...<turn|>\n
 * (the assistant's role "model"), a system turn that opens with <|think|> when thinking is on and
 * holds the first system message and the tools (<|tool>declaration:NAME{...}<tool|>), tool calls as
 * <|tool_call>call:NAME{key:value,...}<tool_call|> with the tool messages that follow rendered in
 * the same model turn (<|tool_response>response:NAME{value:...}<tool_response|>), and a generation
 * prompt that closes an empty thought channel when thinking is off. Values are written in the
 * template's own notation (format_argument): strings between <|"|> marks, keys sorted as dictsort
 * sorts them. Invariant: the output is byte for byte the Jinja template's (tests/chat/expected.json),
 * with the messages as sniperd hands them over (arguments as objects, bos_token empty). The
 * interleaved variant (google-gemma-4-31B-it-interleaved, at the end) shares the values and the
 * declarations and takes tool results on the calling model turn, as llama.cpp hands them to it. */
#include "chat_internal.h"
#include "jinja.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char G4_QUOTE[] = "<|\"|>";

/* ---- values in the template's notation ------------------------------------------------------ */

struct g4_key {
    const char *key;
    const json_t *value;
    size_t order; /* position in the object: dictsort's sort is stable */
};

static int g4_key_cmp(const void *a, const void *b) {
    const struct g4_key *x = a, *y = b;
    int c = strcasecmp(x->key, y->key); /* dictsort: case-insensitive by default */
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* The members of obj sorted as Jinja's dictsort sorts them (malloc'd, *n of them), or NULL when
 * obj is empty or memory ran out (b's oom flag then set). */
static struct g4_key *g4_sorted(struct strbuf *b, const json_t *obj, size_t *n) {
    const char *key;
    json_t *v;
    size_t i = 0;
    *n = json_object_size(obj);
    struct g4_key *k = *n ? calloc(*n, sizeof(*k)) : NULL;
    if (*n && !k) {
        b->oom = true;
        *n = 0;
        return NULL;
    }
    json_object_foreach((json_t *)obj, key, v) {
        k[i] = (struct g4_key){key, v, i};
        i++;
    }
    if (k)
        qsort(k, *n, sizeof(*k), g4_key_cmp);
    return k;
}

static void g4_quoted(struct strbuf *b, const char *s) {
    strbuf_puts(b, G4_QUOTE);
    strbuf_puts(b, s);
    strbuf_puts(b, G4_QUOTE);
}

static void g4_quoted_value(struct strbuf *b, const json_t *v) {
    strbuf_puts(b, G4_QUOTE);
    jinja_put_str(b, v);
    strbuf_puts(b, G4_QUOTE);
}

/* The template's format_argument: strings quoted, booleans true/false, objects as {key:value}
 * (keys quoted when escape_keys), arrays as [a,b], anything else as Python's str(). */
static void g4_argument(struct strbuf *b, const json_t *v, bool escape_keys) {
    if (json_is_string(v)) {
        g4_quoted_value(b, v);
    } else if (json_is_boolean(v)) {
        strbuf_puts(b, json_is_true(v) ? "true" : "false");
    } else if (json_is_object(v)) {
        size_t n;
        struct g4_key *k = g4_sorted(b, v, &n);
        strbuf_puts(b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i)
                strbuf_puts(b, ",");
            if (escape_keys)
                g4_quoted(b, k[i].key);
            else
                strbuf_puts(b, k[i].key);
            strbuf_puts(b, ":");
            g4_argument(b, k[i].value, escape_keys);
        }
        strbuf_puts(b, "}");
        free(k);
    } else if (json_is_array(v)) {
        strbuf_puts(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                strbuf_puts(b, ",");
            g4_argument(b, json_array_get(v, i), escape_keys);
        }
        strbuf_puts(b, "]");
    } else {
        jinja_put_str(b, v);
    }
}

/* Python's str() of v (lists as ['a', 1]), for `| upper` of a value that is not a string. */
static void g4_py_str(struct strbuf *b, const json_t *v) {
    if (!json_is_array(v)) {
        jinja_put_str(b, v);
        return;
    }
    strbuf_puts(b, "[");
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        strbuf_puts(b, i ? ", " : "");
        if (json_is_string(e))
            strbuf_puts(b, "'");
        g4_py_str(b, e);
        if (json_is_string(e))
            strbuf_puts(b, "'");
    }
    strbuf_puts(b, "]");
}

/* `v | upper` (an absent value is ""), malloc'd; NULL when memory ran out. */
static char *g4_upper(const json_t *v) {
    struct strbuf t = {0};
    strbuf_puts(&t, "");
    if (v)
        g4_py_str(&t, v);
    char *s = strbuf_take(&t);
    for (char *p = s; p && *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return s;
}

/* The template's comma: one before every field after the first. */
static void g4_comma(struct strbuf *b, bool *add_comma) {
    if (*add_comma)
        strbuf_puts(b, ",");
    *add_comma = true;
}

/* required:[<|"|>a<|"|>,...] of a list (each item as str()). */
static void g4_required(struct strbuf *b, const json_t *list) {
    strbuf_puts(b, "required:[");
    for (size_t i = 0; i < json_array_size(list); i++) {
        if (i)
            strbuf_puts(b, ",");
        g4_quoted_value(b, json_array_get(list, i));
    }
    strbuf_puts(b, "]");
}

/* ---- tool declarations (format_function_declaration, format_parameters) --------------------- */

static void g4_parameters(struct strbuf *b, const json_t *props, bool il);

static bool g4_standard_key(const char *k) {
    static const char *const keys[] = {"description", "type", "properties", "required",
                                       "nullable"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(k, keys[i]) == 0)
            return true;
    return false;
}

/* An array parameter's items:{...}, each member by its kind (il: the interleaved template's
 * parameters inside). */
static void g4_items(struct strbuf *b, const json_t *items, bool il) {
    size_t n;
    struct g4_key *k = g4_sorted(b, items, &n);
    bool first = true;
    strbuf_puts(b, "items:{");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = k[i].value;
        if (json_is_null(v))
            continue;
        strbuf_puts(b, first ? "" : ",");
        first = false;
        if (strcmp(k[i].key, "properties") == 0) {
            strbuf_puts(b, "properties:{");
            if (json_is_object(v))
                g4_parameters(b, v, il);
            strbuf_puts(b, "}");
        } else if (strcmp(k[i].key, "required") == 0) {
            g4_required(b, v);
        } else if (strcmp(k[i].key, "type") == 0) {
            strbuf_puts(b, "type:");
            json_t *up = json_is_array(v) ? json_array() : NULL;
            for (size_t j = 0; up && j < json_array_size(v); j++) {
                char *s = g4_upper(json_array_get(v, j));
                json_array_append_new(up, json_string(s ? s : ""));
                free(s);
            }
            char *s = up ? NULL : g4_upper(v);
            if (up)
                g4_argument(b, up, true);
            else
                g4_quoted(b, s ? s : "");
            json_decref(up);
            free(s);
        } else {
            strbuf_puts(b, k[i].key);
            strbuf_puts(b, ":");
            g4_argument(b, v, true);
        }
    }
    strbuf_puts(b, "}");
    free(k);
}

/* The comma before an object's or an array's fields: the standard template's counted one; the
 * interleaved template writes one whatever came before, and counts none. */
static void g4_field_comma(struct strbuf *b, bool il, bool *add_comma) {
    if (il)
        strbuf_puts(b, ",");
    else
        g4_comma(b, add_comma);
}

static void g4_nullable(struct strbuf *b, const json_t *value, bool *add_comma) {
    if (jinja_truthy(json_object_get(value, "nullable"))) {
        g4_comma(b, add_comma);
        strbuf_puts(b, "nullable:true");
    }
}

/* An OBJECT parameter's properties:{...} (its properties, else the parameter's own members) and
 * required:[...] when it has one. */
static void g4_object_fields(struct strbuf *b, const json_t *value, bool il, bool *add_comma) {
    const json_t *props = json_object_get(value, "properties");
    g4_field_comma(b, il, add_comma);
    strbuf_puts(b, "properties:{");
    g4_parameters(b, json_is_object(props) ? props : value, il);
    strbuf_puts(b, "}");
    if (jinja_truthy(json_object_get(value, "required"))) {
        g4_field_comma(b, il, add_comma);
        g4_required(b, json_object_get(value, "required"));
    }
}

/* One parameter's {...}: description, enum or items by type, nullable, an object's properties and
 * required, then its type. The interleaved template (il) writes nullable right after the
 * description and an object's fields in place of an array's. */
static void g4_parameter(struct strbuf *b, const json_t *value, bool il) {
    const json_t *desc = json_object_get(value, "description");
    const json_t *items = json_object_get(value, "items");
    char *type = g4_upper(json_object_get(value, "type"));
    const char *t = type ? type : "";
    bool add_comma = false;
    strbuf_puts(b, ":{");
    if (jinja_truthy(desc)) {
        strbuf_puts(b, "description:");
        g4_quoted_value(b, desc);
        add_comma = true;
    }
    if (il)
        g4_nullable(b, value, &add_comma);
    if (strcmp(t, "STRING") == 0 && jinja_truthy(json_object_get(value, "enum"))) {
        g4_comma(b, &add_comma);
        strbuf_puts(b, "enum:");
        g4_argument(b, json_object_get(value, "enum"), true);
    } else if (il && strcmp(t, "OBJECT") == 0) {
        g4_object_fields(b, value, il, &add_comma);
    } else if (strcmp(t, "ARRAY") == 0 && json_is_object(items) && json_object_size(items)) {
        g4_field_comma(b, il, &add_comma);
        g4_items(b, items, il);
    }
    if (!il) {
        g4_nullable(b, value, &add_comma);
        if (strcmp(t, "OBJECT") == 0)
            g4_object_fields(b, value, il, &add_comma);
    }
    g4_comma(b, &add_comma);
    strbuf_puts(b, "type:");
    g4_quoted(b, t);
    strbuf_puts(b, "}");
    free(type);
}

/* format_parameters: every property that is not a schema keyword, as NAME:{...}, by dictsort
 * (il: the interleaved template's). */
static void g4_parameters(struct strbuf *b, const json_t *props, bool il) {
    size_t n;
    struct g4_key *k = g4_sorted(b, props, &n);
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (g4_standard_key(k[i].key))
            continue;
        strbuf_puts(b, first ? "" : ",");
        first = false;
        strbuf_puts(b, k[i].key);
        g4_parameter(b, k[i].value, il);
    }
    free(k);
}

/* declaration:NAME{description:...,parameters:{...},response:{...}} of one OpenAI tool, trimmed
 * as the template trims it (il: the interleaved template's parameters). Returns 0 or -EINVAL
 * (err) for a tool without a function name. */
static int g4_declaration(struct strbuf *b, const json_t *tool, size_t idx, bool il, char *err,
                          size_t err_len) {
    const json_t *fn = json_object_get(tool, "function");
    const json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description");
    const json_t *params = json_object_get(fn, "parameters");
    if (!json_is_string(name))
        return chat_fail(err, err_len, "tools[%zu]: no function name", idx);
    struct strbuf d = {0};
    strbuf_puts(&d, "declaration:");
    strbuf_puts(&d, json_string_value(name));
    strbuf_puts(&d, "{description:");
    strbuf_puts(&d, G4_QUOTE);
    if (desc)
        jinja_put_str(&d, desc);
    strbuf_puts(&d, G4_QUOTE);
    if (jinja_truthy(params)) {
        strbuf_puts(&d, ",parameters:{");
        if (jinja_truthy(json_object_get(params, "properties"))) {
            strbuf_puts(&d, "properties:{");
            g4_parameters(&d, json_object_get(params, "properties"), il);
            strbuf_puts(&d, "},");
        }
        if (jinja_truthy(json_object_get(params, "required"))) {
            g4_required(&d, json_object_get(params, "required"));
            strbuf_puts(&d, ",");
        }
        if (jinja_truthy(json_object_get(params, "type"))) {
            char *t = g4_upper(json_object_get(params, "type"));
            strbuf_puts(&d, "type:");
            g4_quoted(&d, t ? t : "");
            strbuf_puts(&d, "}");
            free(t);
        }
    }
    if (json_object_get(fn, "response")) {
        const json_t *r = json_object_get(fn, "response");
        char *t = g4_upper(json_object_get(r, "type"));
        strbuf_puts(&d, ",response:{");
        if (jinja_truthy(json_object_get(r, "description"))) {
            strbuf_puts(&d, "description:");
            g4_quoted_value(&d, json_object_get(r, "description"));
            strbuf_puts(&d, ",");
        }
        if (t && strcmp(t, "OBJECT") == 0)
            strbuf_puts(&d, "type:<|\"|>OBJECT<|\"|>}");
        free(t);
    }
    strbuf_puts(&d, "}");
    b->oom |= d.oom;
    put_span(b, trim_span((struct span){d.p ? d.p : "", d.n}));
    free(d.p);
    return 0;
}

/* ---- messages -------------------------------------------------------------------------------- */

/* The system turn: <|think|> when thinking is on, the first system message, the tools (il: as the
 * interleaved template declares them). Returns 0 or -EINVAL. */
static int g4_system(struct strbuf *b, const struct chat_message *msgs,
                     const struct chat_render_opts *opts, const json_t *tools, bool il, char *err,
                     size_t err_len) {
    bool has_sys = is_role(&msgs[0], "system");
    if (!opts->enable_thinking && !jinja_truthy(tools) && !has_sys)
        return 0;
    strbuf_puts(b, "<|turn>system\n");
    if (opts->enable_thinking)
        strbuf_puts(b, "<|think|>\n");
    if (has_sys)
        put_span(b, trim_ws(text_of(msgs[0].content)));
    for (size_t i = 0; jinja_truthy(tools) && i < json_array_size(tools); i++) {
        strbuf_puts(b, "<|tool>");
        if (g4_declaration(b, json_array_get(tools, i), i, il, err, err_len) < 0)
            return -EINVAL;
        strbuf_puts(b, "<tool|>");
    }
    strbuf_puts(b, "<turn|>\n");
    return 0;
}

/* An object's members as key:value, by dictsort's order, comma-separated (the template's
 * arguments and results). */
static void g4_members(struct strbuf *b, const json_t *obj) {
    size_t n;
    struct g4_key *k = g4_sorted(b, obj, &n);
    for (size_t j = 0; j < n; j++) {
        strbuf_puts(b, j ? "," : "");
        strbuf_puts(b, k[j].key);
        strbuf_puts(b, ":");
        g4_argument(b, k[j].value, false);
    }
    free(k);
}

/* <|tool_call>call:NAME{key:value,...}<tool_call|> for each call; arguments are a JSON object
 * (or a JSON text of one, as the OpenAI API carries them; a text that is no object is written as
 * it is, as the template writes a string). Returns 0 or -EINVAL. */
static int g4_tool_calls(struct strbuf *b, const json_t *calls, char *err, size_t err_len) {
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const json_t *fn = json_object_get(json_array_get(calls, i), "function");
        const json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        json_t *parsed = json_is_string(args) ? json_loads(json_string_value(args), 0, NULL) : NULL;
        if (!json_is_string(name)) {
            json_decref(parsed);
            return chat_fail(err, err_len, "tool_calls[%zu]: no function name", i);
        }
        strbuf_puts(b, "<|tool_call>call:");
        strbuf_puts(b, json_string_value(name));
        strbuf_puts(b, "{");
        const json_t *obj = json_is_object(parsed) ? parsed : json_is_object(args) ? args : NULL;
        if (obj) {
            g4_members(b, obj);
        } else if (json_is_string(args)) {
            strbuf_puts(b, json_string_value(args));
        }
        strbuf_puts(b, "}<tool_call|>");
        json_decref(parsed);
    }
    return 0;
}

/* The tool messages right after msgs[i] (an assistant's calls), each as
 * <|tool_response>response:NAME{value:<|"|>TEXT<|"|>}<tool_response|>, NAME the call's its
 * tool_call_id names (else the message's name, else "unknown"). Returns how many. */
static size_t g4_tool_responses(struct strbuf *b, const struct chat_message *msgs, size_t n,
                                size_t i, const json_t *calls) {
    size_t k = i + 1;
    for (; k < n && is_role(&msgs[k], "tool"); k++) {
        const char *name = msgs[k].name ? msgs[k].name : "unknown";
        for (size_t j = 0; msgs[k].tool_call_id && j < json_array_size(calls); j++) {
            const json_t *c = json_array_get(calls, j);
            const char *id = json_string_value(json_object_get(c, "id"));
            const char *fn = json_string_value(
                json_object_get(json_object_get(c, "function"), "name"));
            if (id && fn && strcmp(id, msgs[k].tool_call_id) == 0)
                name = fn;
        }
        strbuf_puts(b, "<|tool_response>response:");
        strbuf_puts(b, name);
        strbuf_puts(b, "{value:");
        g4_quoted(b, text_of(msgs[k].content));
        strbuf_puts(b, "}<tool_response|>");
    }
    return k - i - 1;
}

/* The template's strip_thinking: every <|channel>...<channel|> block cut out, then trimmed. */
static void g4_strip_thinking(struct strbuf *b, const char *s) {
    struct strbuf t = {0};
    strbuf_puts(&t, "");
    for (;;) {
        const char *end = strstr(s, "<channel|>");
        size_t part = end ? (size_t)(end - s) : strlen(s);
        const char *open = memmem(s, part, "<|channel>", 10);
        strbuf_putn(&t, s, open ? (size_t)(open - s) : part);
        if (!end)
            break;
        s = end + 10;
    }
    b->oom |= t.oom;
    put_span(b, trim_span((struct span){t.p ? t.p : "", t.n}));
    free(t.p);
}

/* The nearest message before i that is not a tool message is an assistant's. */
static bool g4_after_assistant(const struct chat_message *msgs, size_t first, size_t i) {
    for (size_t j = i; j-- > first;)
        if (!is_role(&msgs[j], "tool"))
            return is_role(&msgs[j], "assistant");
    return false;
}

enum g4_last { G4_LAST_NONE, G4_LAST_TOOL_CALL, G4_LAST_TOOL_RESPONSE };

/* One message that is not a tool message (those are rendered with the calls they answer). Sets
 * *last to what the message ended with. Returns 0 or -EINVAL. */
static int g4_message(struct strbuf *b, const struct chat_message *msgs, size_t n, size_t first,
                      size_t i, long last_user, enum g4_last *last, char *err, size_t err_len) {
    const struct chat_message *m = &msgs[i];
    bool model = is_role(m, "assistant");
    json_t *calls = m->tool_calls_json ? json_loads(m->tool_calls_json, 0, NULL) : NULL;
    if (m->tool_calls_json && !json_is_array(calls)) {
        json_decref(calls);
        return chat_fail(err, err_len, "messages[%zu]: tool_calls: not a JSON array", i);
    }
    bool has_calls = json_array_size(calls) > 0;
    *last = G4_LAST_NONE;
    if (!(model && g4_after_assistant(msgs, first, i))) {
        strbuf_puts(b, "<|turn>");
        strbuf_puts(b, model ? "model" : m->role);
        strbuf_puts(b, "\n");
    }
    if (m->reasoning_content && *m->reasoning_content && (long)(i - first) > last_user &&
        has_calls) {
        strbuf_puts(b, "<|channel>thought\n");
        strbuf_puts(b, m->reasoning_content);
        strbuf_puts(b, "\n<channel|>");
    }
    size_t n_responses = 0;
    if (has_calls) {
        int rc = g4_tool_calls(b, calls, err, err_len);
        if (rc == 0)
            n_responses = g4_tool_responses(b, msgs, n, i, calls);
        json_decref(calls);
        if (rc < 0)
            return rc;
        *last = n_responses ? G4_LAST_TOOL_RESPONSE : G4_LAST_TOOL_CALL;
    } else {
        json_decref(calls);
    }
    if (model)
        g4_strip_thinking(b, text_of(m->content));
    else
        put_span(b, trim_ws(text_of(m->content)));
    if (*last == G4_LAST_TOOL_CALL)
        strbuf_puts(b, "<|tool_response>");
    else if (!(n_responses && !*text_of(m->content)))
        strbuf_puts(b, "<turn|>\n");
    return 0;
}

/* The family's chat_render_fn (chat_internal.h). */
int chat_gemma4_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                       const struct chat_render_opts *opts, const json_t *tools, char *err,
                       size_t err_len) {
    size_t first = is_role(&msgs[0], "system") ? 1 : 0;
    long last_user = -1;
    enum g4_last last = G4_LAST_NONE;
    if (g4_system(b, msgs, opts, tools, false, err, err_len) < 0)
        return -EINVAL;
    for (size_t i = first; i < n; i++)
        if (is_role(&msgs[i], "user"))
            last_user = (long)(i - first);
    for (size_t i = first; i < n; i++) {
        if (is_role(&msgs[i], "tool"))
            continue;
        if (g4_message(b, msgs, n, first, i, last_user, &last, err, err_len) < 0)
            return -EINVAL;
    }
    if (opts->add_generation_prompt && last == G4_LAST_NONE) {
        strbuf_puts(b, "<|turn>model\n");
        if (!opts->enable_thinking)
            strbuf_puts(b, "<|channel>thought\n<channel|>");
    }
    return 0;
}

/* ---- the interleaved variant (google-gemma-4-31B-it-interleaved) ----------------------------- */

/* One message of the interleaved template's loop. That template reads tool results from the
 * assistant message that made the calls (tool_responses), so the messages are handed to it as
 * llama.cpp hands them (common/chat.cpp, convert_tool_responses_gemma4): an assistant's tool
 * calls, the tool messages right after them and the content of a reply right after those (an
 * assistant message without calls, with content) become one message; the calling message's own
 * content is dropped, as llama.cpp drops it. */
struct g4i_msg {
    const struct chat_message *m; /* the message (with calls: the assistant's that made them) */
    json_t *calls;                /* its tool calls, a non-empty array (owned), or NULL */
    size_t first_result;          /* with calls: its results are msgs[first_result..+n_results) */
    size_t n_results;
    const char *content; /* with calls: the reply's content, or NULL when there is none */
};

static void g4i_free(struct g4i_msg *v, size_t n) {
    for (size_t i = 0; v && i < n; i++)
        json_decref(v[i].calls);
    free(v);
}

/* msgs[first..n) as the interleaved template's messages (malloc'd, *n_out of them; free with
 * g4i_free), or NULL with err: out of memory, or tool_calls that are not a JSON array. */
static struct g4i_msg *g4i_messages(const struct chat_message *msgs, size_t n, size_t first,
                                    size_t *n_out, char *err, size_t err_len) {
    struct g4i_msg *v = calloc(n, sizeof(*v));
    size_t k = 0;
    if (!v) {
        chat_fail(err, err_len, "out of memory");
        return NULL;
    }
    for (size_t i = first; i < n; k++) {
        const struct chat_message *m = &msgs[i++];
        v[k].m = m;
        if (!is_role(m, "assistant") || !m->tool_calls_json)
            continue;
        json_t *calls = json_loads(m->tool_calls_json, 0, NULL);
        if (!json_is_array(calls)) {
            json_decref(calls);
            chat_fail(err, err_len, "messages[%zu]: tool_calls: not a JSON array", i - 1);
            g4i_free(v, k);
            return NULL;
        }
        if (json_array_size(calls) == 0) {
            json_decref(calls);
            continue;
        }
        v[k].calls = calls;
        v[k].first_result = i;
        for (; i < n && is_role(&msgs[i], "tool"); i++)
            v[k].n_results++;
        json_t *next_calls = i < n && msgs[i].tool_calls_json
                                 ? json_loads(msgs[i].tool_calls_json, 0, NULL) : NULL;
        if (i < n && is_role(&msgs[i], "assistant") && json_array_size(next_calls) == 0 &&
            *text_of(msgs[i].content))
            v[k].content = msgs[i++].content;
        json_decref(next_calls);
    }
    *n_out = k;
    return v;
}

/* <|tool_response>response:NAME{...}<tool_response|> of one result: a text that parses as a JSON
 * object as its members (key:value by dictsort), any other JSON value or text as {value:...}. */
static void g4i_result(struct strbuf *b, const char *name, const char *text) {
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    strbuf_puts(b, "<|tool_response>response:");
    strbuf_puts(b, name);
    strbuf_puts(b, "{");
    if (json_is_object(v)) {
        g4_members(b, v);
    } else {
        strbuf_puts(b, "value:");
        if (v)
            g4_argument(b, v, false);
        else
            g4_quoted(b, text);
    }
    strbuf_puts(b, "}<tool_response|>");
    json_decref(v);
}

/* The results of message g: the name of the call at the same position (llama.cpp pairs them by
 * order), else the result's tool_call_id, else "". */
static void g4i_results(struct strbuf *b, const struct chat_message *msgs,
                        const struct g4i_msg *g) {
    for (size_t j = 0; j < g->n_results; j++) {
        const struct chat_message *r = &msgs[g->first_result + j];
        const json_t *fn = json_object_get(json_array_get(g->calls, j), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || !*name)
            name = text_of(r->tool_call_id);
        g4i_result(b, name, text_of(r->content));
    }
}

/* One message of the loop (idx its position, last_user the last user message's); *last says what
 * it ended with, and on entry what the message before it did. Returns 0 or -EINVAL. */
static int g4i_message(struct strbuf *b, const struct chat_message *msgs, const struct g4i_msg *g,
                       long idx, long last_user, enum g4_last *last, char *err, size_t err_len) {
    bool model = is_role(g->m, "assistant");
    if (!(*last == G4_LAST_TOOL_RESPONSE && g->calls)) {
        strbuf_puts(b, "<|turn>");
        strbuf_puts(b, model ? "model" : g->m->role);
        strbuf_puts(b, "\n");
    }
    *last = G4_LAST_NONE;
    const char *content = g->calls ? g->content : text_of(g->m->content);
    if (g->calls) {
        if (g->m->reasoning_content && *g->m->reasoning_content && idx > last_user) {
            strbuf_puts(b, "<|channel>thought\n");
            strbuf_puts(b, g->m->reasoning_content);
            strbuf_puts(b, "<channel|>");
        }
        if (g4_tool_calls(b, g->calls, err, err_len) < 0)
            return -EINVAL;
        *last = G4_LAST_TOOL_CALL;
        if (g->n_results) {
            g4i_results(b, msgs, g);
            *last = G4_LAST_TOOL_RESPONSE;
        }
    }
    if (content && model)
        g4_strip_thinking(b, content);
    else if (content)
        put_span(b, trim_ws(content));
    if (!(g->n_results && !(content && *content)))
        strbuf_puts(b, "<turn|>\n");
    return 0;
}

/* The interleaved variant's chat_render_fn (chat_internal.h). */
int chat_gemma4_interleaved_render(struct strbuf *b, const struct chat_message *msgs, size_t n,
                                   const struct chat_render_opts *opts, const json_t *tools,
                                   char *err, size_t err_len) {
    size_t first = is_role(&msgs[0], "system") ? 1 : 0, n_loop = 0;
    long last_user = -1;
    enum g4_last last = G4_LAST_NONE;
    int rc = 0;
    if (g4_system(b, msgs, opts, tools, true, err, err_len) < 0)
        return -EINVAL;
    struct g4i_msg *v = g4i_messages(msgs, n, first, &n_loop, err, err_len);
    if (!v)
        return -EINVAL;
    for (size_t i = 0; i < n_loop; i++)
        if (is_role(v[i].m, "user"))
            last_user = (long)i;
    for (size_t i = 0; i < n_loop && rc == 0; i++)
        rc = g4i_message(b, msgs, &v[i], (long)i, last_user, &last, err, err_len);
    if (rc == 0 && opts->add_generation_prompt) {
        if (last != G4_LAST_TOOL_RESPONSE)
            strbuf_puts(b, "<|turn>model\n");
        if (!opts->enable_thinking)
            strbuf_puts(b, "<|channel>thought\n<channel|>");
    }
    g4i_free(v, n_loop);
    return rc;
}
