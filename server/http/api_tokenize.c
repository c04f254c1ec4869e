/* api_tokenize.c - /tokenize ({"content", "add_special", "parse_special", "with_pieces"} ->
 * {"tokens": [ids]} or [{"id", "piece"}]) and /detokenize ({"tokens": [ids]} -> {"content"}), as
 * llama-server answers them, on the model a request names (the default one otherwise).
 * Invariants: ids sent back are the tokenizer's; ids read are checked against the vocabulary;
 * text sent back is valid UTF-8 (a piece that is not is its bytes, as llama-server writes it). */
#include "api_tokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api_internal.h"
#include "api_messages.h"
#include "jsonw.h"
#include "strbuf.h"

#define INVALID "invalid_request_error"

/* Every key of the body is in known; returns the first one that is not, or NULL. */
static const char *unknown_key(const json_t *body, const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        const char *const *k = known;
        while (*k && strcmp(*k, key) != 0)
            k++;
        if (!*k)
            return key;
    }
    return NULL;
}

/* A boolean at key (absent or null: dflt) into *out; false when it is another type. */
static bool get_flag(const json_t *body, const char *key, bool dflt, bool *out) {
    const json_t *v = json_object_get(body, key);
    *out = !v || json_is_null(v) ? dflt : json_is_true(v);
    return !v || json_is_null(v) || json_is_boolean(v);
}

/* A token's piece: a string when it is valid UTF-8, else its bytes. */
static json_t *piece_json(const struct tokenizer *tk, int32_t id) {
    size_t len = 0;
    const char *p = tokenizer_piece(tk, id, &len);
    json_t *s = json_stringn(p ? p : "", len);
    if (s || !p)
        return s;
    json_t *bytes = json_array();
    for (size_t i = 0; bytes && i < len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)p[i]));
    return bytes;
}

static json_t *tokenize(const struct pool_model *pm, const json_t *body, struct oai_error *e) {
    static const char *const keys[] = {"content", "add_special", "parse_special", "with_pieces",
                                       "model", NULL};
    const char *bad = unknown_key(body, keys);
    const json_t *content = json_object_get(body, "content");
    bool add_special, parse_special, with_pieces;
    if (bad) {
        oai_fail(e, 400, INVALID, bad, "unknown_parameter", "unknown parameter: '%.64s'", bad);
        return NULL;
    }
    if (!json_is_string(content)) {
        oai_fail(e, 400, INVALID, "content", "invalid_type", "'content' must be a string");
        return NULL;
    }
    if (!get_flag(body, "add_special", false, &add_special) ||
        !get_flag(body, "parse_special", true, &parse_special) ||
        !get_flag(body, "with_pieces", false, &with_pieces)) {
        oai_fail(e, 400, INVALID, "", "invalid_type",
                 "'add_special', 'parse_special' and 'with_pieces' must be booleans");
        return NULL;
    }
    size_t n = 0;
    int32_t *ids = tokenizer_encode(pm->tk, json_string_value(content), json_string_length(content),
                                    parse_special, &n);
    json_t *tokens = ids ? json_array() : NULL;
    bool bos = add_special && tokenizer_add_bos(pm->tk) && tokenizer_bos(pm->tk) >= 0;
    for (size_t i = 0; tokens && i < n + bos; i++) {
        int32_t id = bos && i == 0 ? tokenizer_bos(pm->tk) : ids[i - bos];
        json_t *t = with_pieces
                        ? json_pack("{s:i, s:o*}", "id", id, "piece", piece_json(pm->tk, id))
                        : json_integer(id);
        if (!t || json_array_append_new(tokens, t) < 0) {
            json_decref(tokens);
            tokens = NULL;
        }
    }
    free(ids);
    json_t *out = tokens ? json_pack("{s:o}", "tokens", tokens) : NULL;
    if (!out)
        oai_fail(e, 500, "server_error", "", "", "out of memory");
    return out;
}

static json_t *detokenize(const struct pool_model *pm, const json_t *body, struct oai_error *e) {
    static const char *const keys[] = {"tokens", "model", NULL};
    const char *bad = unknown_key(body, keys);
    const json_t *tokens = json_object_get(body, "tokens"), *t;
    size_t i;
    if (bad) {
        oai_fail(e, 400, INVALID, bad, "unknown_parameter", "unknown parameter: '%.64s'", bad);
        return NULL;
    }
    if (!json_is_array(tokens)) {
        oai_fail(e, 400, INVALID, "tokens", "invalid_type", "'tokens' must be an array of ids");
        return NULL;
    }
    struct strbuf text = {0};
    struct tokenizer_stream st = {0};
    char piece[1024];
    json_array_foreach(tokens, i, t) {
        json_int_t id = json_is_integer(t) ? json_integer_value(t) : -1;
        if (id < 0 || id >= tokenizer_n_vocab(pm->tk)) {
            free(text.p);
            oai_fail(e, 400, INVALID, "tokens", "invalid_value",
                     "tokens[%zu] is not an id of this model's vocabulary (0..%d)", i,
                     tokenizer_n_vocab(pm->tk) - 1);
            return NULL;
        }
        strbuf_putn(&text, piece, tokenizer_decode_stream(pm->tk, &st, (int32_t)id, piece,
                                                          sizeof(piece)));
    }
    strbuf_putn(&text, piece, tokenizer_stream_flush(&st, piece, sizeof(piece)));
    json_t *out = text.oom ? NULL : json_pack("{s:s%}", "content", text.p ? text.p : "", text.n);
    free(text.p);
    if (!out)
        oai_fail(e, 500, "server_error", "", "", "out of memory");
    return out;
}

bool api_tokenize_path(const char *path) {
    return strcmp(path, "/tokenize") == 0 || strcmp(path, "/detokenize") == 0;
}

void api_tokenize_handle(struct api *a, const struct http_request *rq, struct http_response *out) {
    struct oai_error e;
    json_error_t je;
    json_t *body = NULL, *reply = NULL;
    struct pool_model *pm = NULL;
    pthread_mutex_lock(&a->mu);
    bool ready = a->ready;
    pthread_mutex_unlock(&a->mu);
    if (strcmp(rq->method, "POST") != 0) {
        oai_fail(&e, 405, INVALID, "", "method_not_allowed", "this path takes POST");
        goto fail;
    }
    if (!api_messages_key_ok(a, rq)) {
        oai_fail(&e, 401, "authentication_error", "", "invalid_api_key",
                 "missing or wrong API key: send Authorization: Bearer <key>");
        goto fail;
    }
    if (!ready) {
        oai_fail(&e, 503, "server_error", "", "loading", "the model is still loading");
        goto fail;
    }
    body = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(body)) {
        oai_fail(&e, 400, INVALID, "", "invalid_json", "the body must be a JSON object%s%s",
                 body ? "" : ": ", body ? "" : je.text);
        goto fail;
    }
    const json_t *model = json_object_get(body, "model");
    if (model && !json_is_string(model) && !json_is_null(model)) {
        oai_fail(&e, 400, INVALID, "model", "invalid_type", "'model' must be a string");
        goto fail;
    }
    if (!(pm = api_model(a, json_string_value(model), &e)))
        goto fail;
    reply = strcmp(rq->path, "/tokenize") == 0 ? tokenize(pm, body, &e) : detokenize(pm, body, &e);
    if (!reply)
        goto fail;
    api_reply_json(out, 200, jsonw_dumps(reply, JSONW_COMPACT));
    goto done;
fail:
    api_reply_error(out, &e);
done:
    json_decref(reply);
    json_decref(body);
    if (pm)
        pool_release(a->pool, pm);
}
