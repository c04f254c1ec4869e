/* sampler.h - turns a row of logits into the next token: greedy, or penalties -> top-k -> top-p ->
 * min-p -> temperature -> a draw from a seeded generator, in llama.cpp's order.
 *
 *     struct sampler_params p = sampler_params_default();
 *     p.temp = 0.7f; p.seed = 42;
 *     struct sampler *s = sampler_new(&p, n_vocab);
 *     int32_t tok = sampler_sample(s, logits);   // logits is read, not changed
 *     sampler_accept(s, tok);                    // feeds the penalties' history
 *
 * Allocates only in sampler_new: sampling in the token loop does not allocate. */
#ifndef SNIPER_SAMPLER_H
#define SNIPER_SAMPLER_H

#include <stdint.h>

struct sampler_params {
    float temp;              /* <= 0: greedy (penalties first, then argmax, lowest id on ties) */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off; llama.cpp's: divide positive logits, multiply negative */
    int32_t repeat_last_n;   /* how many recent tokens the penalties look at; 0: off */
    float presence_penalty;  /* 0: off; subtracted once from each token seen */
    float frequency_penalty; /* 0: off; subtracted count times */
    uint64_t seed;
};

/* temp 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalties (repeat_last_n 64), seed 0. */
struct sampler_params sampler_params_default(void);

/* Returns a new sampler for a vocabulary of n_vocab, or NULL (bad params, no memory). */
struct sampler *sampler_new(const struct sampler_params *p, int32_t n_vocab);

void sampler_free(struct sampler *s);

/* Picks the next token from logits[n_vocab] (not modified). Returns the id. */
int32_t sampler_sample(struct sampler *s, const float *logits);

/* Appends tok to the history the penalties read. */
void sampler_accept(struct sampler *s, int32_t tok);

/* Forgets the history and reseeds with seed. */
void sampler_reset(struct sampler *s, uint64_t seed);

#endif
