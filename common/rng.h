/* rng.h - xoshiro256** seeded through splitmix64: a small, fast generator whose stream depends only
 * on the seed, so a seed reproduces the same samples and the same generated models everywhere. */
#ifndef SNIPER_RNG_H
#define SNIPER_RNG_H

#include <stdint.h>

struct rng {
    uint64_t s[4]; /* never all zero: splitmix64 does not yield four zeros in a row */
};

/* Advances *x and returns the next splitmix64 output. */
static inline uint64_t rng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void rng_seed(struct rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix64(&seed);
}

static inline uint64_t rng_rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(struct rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_uniform(struct rng *r) {
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* n pseudo-random token ids below n_vocab from a 32-bit LCG started at seed: cheap, and the same
 * on every machine. */
static inline void rng_lcg_ids(int32_t *ids, int32_t n, int32_t n_vocab, uint32_t seed) {
    for (int32_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
    }
}

/* The benchmark prompt (sniperd --bench-prompt, bench-policy, bench-lossy). */
static inline void rng_bench_ids(int32_t *ids, int32_t n, int32_t n_vocab) {
    rng_lcg_ids(ids, n, n_vocab, 12345);
}

#endif
