/* token_logits.h - what the scheduler reads off a step's logits besides the sample: a token's
 * log-probability with the best alternatives (the API's logprobs), and the logits masked to the
 * tokens the JSON-object constraint allows (response_format json_object). Pure functions of the
 * logits, the tokenizer and the grammar's state: no allocation, nothing kept. */
#ifndef SNIPER_TOKEN_LOGITS_H
#define SNIPER_TOKEN_LOGITS_H

#include <stdint.h>

#include "json_grammar.h"
#include "tokenizer.h"

/* The log-softmax of logits[0..n_vocab) at id, computed in float after a double sum as the API has
 * always reported it; the n_top (>= 0) most likely tokens go into top_id[0..*n_out) and their
 * log-probabilities into top_logprob, best first, ties to the lower id (*n_out = min(n_top,
 * n_vocab)). */
float token_logits_logprob(const float *logits, int32_t n_vocab, int32_t id, int n_top,
                           int32_t *top_id, float *top_logprob, int *n_out);

/* Copies logits[0..n_vocab) into masked with every token set to -INFINITY whose bytes would break
 * the JSON object g has read so far (the end of generation is allowed only once the object is
 * closed; other special tokens and empty pieces never). Returns how many tokens remain allowed. */
int32_t token_logits_json_mask(const struct tokenizer *tk, const struct json_grammar *g,
                               const float *logits, int32_t n_vocab, float *masked);

#endif
