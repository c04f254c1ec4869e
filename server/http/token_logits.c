/* token_logits.c - logprobs and the JSON-object mask (see token_logits.h).
 * Invariants: the log-sum-exp is taken in double over exp(logit - max) and rounded to float once,
 * so the numbers the API reports do not depend on the batch or the thread; the mask tries each
 * token on a copy of the grammar and never advances g. */
#include "token_logits.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

float token_logits_logprob(const float *logits, int32_t n_vocab, int32_t id, int n_top,
                           int32_t *top_id, float *top_logprob, int *n_out) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)(logits[i] - mx));
    const float lse = mx + (float)log(sum);
    /* the n_top best in one pass: an insertion into a short sorted list (ties: lower id first) */
    int n = 0;
    for (int32_t i = 0; i < n_vocab && n_top > 0; i++) {
        if (n == n_top && logits[i] <= logits[top_id[n_top - 1]])
            continue;
        int k = n < n_top ? n++ : n_top - 1;
        for (; k > 0 && logits[top_id[k - 1]] < logits[i]; k--)
            top_id[k] = top_id[k - 1];
        top_id[k] = i;
    }
    for (int k = 0; k < n; k++)
        top_logprob[k] = logits[top_id[k]] - lse;
    *n_out = n;
    return logits[id] - lse;
}

int32_t token_logits_json_mask(const struct tokenizer *tk, const struct json_grammar *g,
                               const float *logits, int32_t n_vocab, float *masked) {
    const bool done = json_grammar_done(g);
    int32_t allowed = 0;
    for (int32_t v = 0; v < n_vocab; v++) {
        bool ok;
        if (tokenizer_is_eog(tk, v)) {
            ok = done;
        } else if (tokenizer_is_special(tk, v)) {
            ok = false;
        } else {
            size_t len = 0;
            const char *piece = tokenizer_piece(tk, v, &len);
            struct json_grammar t = *g;
            ok = piece && len > 0 && json_grammar_feed(&t, piece, len);
        }
        masked[v] = ok ? logits[v] : -INFINITY;
        allowed += ok;
    }
    return allowed;
}
