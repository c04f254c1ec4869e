/* test_token_logits.c - logprobs against values worked out by hand (log-softmax, the best
 * alternatives best first with ties to the lower id, fewer tokens than asked for), and the JSON
 * mask on a generated model's vocabulary: forbidden tokens at -inf, allowed ones copied bit for
 * bit, the end of generation only once the object closed, special tokens never, the grammar left
 * as it was. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json_grammar.h"
#include "model.h"
#include "token_logits.h"
#include "tokenizer.h"

static void test_logprob_values(void) {
    const float logits[4] = {1.0f, 2.0f, 3.0f, 0.0f};
    int32_t top_id[20] = {-1, -1, -1, -1};
    float top_lp[20] = {0};
    int n = -1;
    /* log(e^1 + e^2 + e^3 + e^0) = 3.4401897 */
    float lp = token_logits_logprob(logits, 4, 0, 2, top_id, top_lp, &n);
    CHECK_NEAR(lp, -2.4401897, 1e-6);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(top_id[0], 2);
    CHECK_EQ_INT(top_id[1], 1);
    CHECK_EQ_INT(top_id[2], -1); /* nothing written past n */
    CHECK_NEAR(top_lp[0], -0.4401897, 1e-6);
    CHECK_NEAR(top_lp[1], -1.4401897, 1e-6);
    /* more alternatives than tokens: all of them, in order */
    lp = token_logits_logprob(logits, 4, 3, 20, top_id, top_lp, &n);
    CHECK_NEAR(lp, -3.4401897, 1e-6);
    CHECK_EQ_INT(n, 4);
    const int32_t order[4] = {2, 1, 0, 3};
    for (int k = 0; k < 4; k++)
        CHECK_EQ_INT(top_id[k], order[k]);
    /* none asked for */
    lp = token_logits_logprob(logits, 4, 2, 0, top_id, top_lp, &n);
    CHECK_NEAR(lp, -0.4401897, 1e-6);
    CHECK_EQ_INT(n, 0);
}

static void test_logprob_ties(void) {
    const float logits[5] = {-1.5f, 4.25f, 4.25f, 0.5f, -30.0f};
    int32_t top_id[3];
    float top_lp[3];
    int n = 0;
    float lp = token_logits_logprob(logits, 5, 4, 3, top_id, top_lp, &n);
    CHECK_NEAR(lp, -34.9564091, 1e-5);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(top_id[0], 1); /* the tie: the lower id first */
    CHECK_EQ_INT(top_id[1], 2);
    CHECK_EQ_INT(top_id[2], 3);
    CHECK_NEAR(top_lp[0], -0.7064091, 1e-6);
    CHECK(top_lp[0] == top_lp[1]);
    CHECK_NEAR(top_lp[2], -4.4564091, 1e-6);
    /* the best comes last in the vocabulary: it still goes first */
    const float late[5] = {0.0f, 0.0f, 0.0f, 0.0f, 9.0f};
    token_logits_logprob(late, 5, 0, 2, top_id, top_lp, &n);
    CHECK_EQ_INT(top_id[0], 4);
    CHECK_EQ_INT(top_id[1], 0);
}

/* The mask on a generated model's vocabulary: before the object only pieces starting with
 * whitespace or '{' pass, after it the end of generation does. */
static void test_json_mask(void) {
    static char path[1024];
    char err[256] = "";
    if (test_make_model(path, sizeof(path), "logits.gguf", "--preset tiny --seed 3") < 0)
        return;
    struct model *m = model_load(path, err, sizeof(err));
    struct tokenizer *tk = m ? tokenizer_new(m->gguf, err, sizeof(err)) : NULL;
    CHECK_MSG(tk != NULL, "%s", err);
    if (!tk)
        goto out;
    const int32_t V = tokenizer_n_vocab(tk);
    float *logits = malloc(sizeof(float) * (size_t)V), *masked = malloc(sizeof(float) * (size_t)V);
    for (int32_t v = 0; v < V; v++)
        logits[v] = (float)((v * 7919) % 1000) / 100.0f - 5.0f;
    const int32_t open = tokenizer_find(tk, "{"), close = tokenizer_find(tk, "}");
    const int32_t eos = tokenizer_eos(tk);
    CHECK(open >= 0 && close >= 0 && eos >= 0);
    struct json_grammar g, before;
    json_grammar_init(&g);
    before = g;
    int32_t allowed = token_logits_json_mask(tk, &g, logits, V, masked);
    CHECK(memcmp(&g, &before, sizeof(g)) == 0); /* tried on copies only */
    int32_t counted = 0;
    for (int32_t v = 0; v < V; v++) {
        size_t len = 0;
        const char *p = tokenizer_piece(tk, v, &len);
        bool ok = !isinf(masked[v]);
        counted += ok;
        if (ok) {
            CHECK_MSG(masked[v] == logits[v], "token %d: allowed but not copied", v);
            CHECK_MSG(!tokenizer_is_special(tk, v) && len > 0 &&
                          (p[0] == '{' || p[0] == ' ' || p[0] == '\n' || p[0] == '\t' ||
                           p[0] == '\r'),
                      "token %d \"%.*s\" allowed before the object", v, (int)len, p);
        }
    }
    CHECK_EQ_INT(allowed, counted);
    CHECK(!isinf(masked[open]));
    CHECK(isinf(masked[close]) && masked[close] < 0);
    CHECK(isinf(masked[eos])); /* the object is not closed yet */
    /* the object closed: the end of generation is allowed, '{' no longer */
    CHECK(json_grammar_feed(&g, "{}", 2));
    allowed = token_logits_json_mask(tk, &g, logits, V, masked);
    CHECK(!isinf(masked[eos]) && masked[eos] == logits[eos]);
    CHECK(isinf(masked[open]));
    CHECK(allowed >= 1);
    for (int32_t v = 0; v < V; v++)
        if (tokenizer_is_special(tk, v) && !tokenizer_is_eog(tk, v))
            CHECK_MSG(isinf(masked[v]), "special token %d allowed", v);
    free(logits);
    free(masked);
out:
    tokenizer_free(tk);
    model_free(m);
}

static const struct test_case cases[] = {
    {"logprob_values", test_logprob_values},
    {"logprob_ties", test_logprob_ties},
    {"json_mask", test_json_mask},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
