/* test_sampler.c - the sampler against hand-computed cases: greedy and its tie rule, filters that
 * collapse to greedy, penalties that flip a winner, seeded reproducibility (a golden sequence),
 * the empirical distribution against softmax within DIST_TOL, and NaN/inf logits. */
#include "harness.h"
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_DRAWS 20000
#define DIST_TOL 0.02   /* max |empirical - softmax| over the vocabulary, for N_DRAWS draws */
#define CHI2_3DF 16.27  /* chi-square, 3 degrees of freedom, p = 0.001 */
#define BIG_VOCAB 152064

static struct sampler_params params_plain(float temp) {
    struct sampler_params p = sampler_params_default();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

static struct sampler *sampler_for(const struct sampler_params *p, int32_t n_vocab) {
    struct sampler *s = sampler_new(p, n_vocab);
    CHECK(s != NULL);
    return s;
}

/* Deterministic pseudo-random logits in [-scale, scale) for big-vocabulary cases. */
static void fill_logits(float *l, int32_t n, uint32_t seed, float scale) {
    uint32_t x = seed * 2654435761u + 1;
    for (int32_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = scale * ((float)(x >> 8) / (float)(1u << 24) * 2.0f - 1.0f);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Greedy and the filters that must collapse to it. */

static void test_greedy_argmax(void) {
    struct sampler_params p = params_plain(0.0f);
    const float l[5] = {0.1f, 3.0f, -2.0f, 2.9f, 1.0f};
    struct sampler *s = sampler_for(&p, 5);
    if (!s) return;
    CHECK_EQ_INT(sampler_sample(s, l), 1);
    CHECK_EQ_INT(sampler_sample(s, l), 1);
    sampler_free(s);
}

static void test_greedy_ties_lowest_id(void) {
    struct sampler_params p = params_plain(-1.0f);
    const float l[6] = {0.0f, 1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
    struct sampler *s = sampler_for(&p, 6);
    if (!s) return;
    CHECK_EQ_INT(sampler_sample(s, l), 2);
    sampler_free(s);
}

/* Runs 200 draws with the given filter on a flat-ish big vocabulary; each must be the argmax. */
static void check_filter_is_greedy(struct sampler_params p, const char *what) {
    float *l = malloc(BIG_VOCAB * sizeof(*l));
    CHECK(l != NULL);
    if (!l) return;
    struct sampler_params g = params_plain(0.0f);
    struct sampler *s = sampler_for(&p, BIG_VOCAB), *gs = sampler_for(&g, BIG_VOCAB);
    for (int trial = 0; s && gs && trial < 20; trial++) {
        fill_logits(l, BIG_VOCAB, (uint32_t)trial, 0.5f);
        l[trial * 7001 % BIG_VOCAB] = 0.6f; /* a clear, moving winner */
        int32_t want = sampler_sample(gs, l);
        for (int k = 0; k < 10; k++) {
            int32_t got = sampler_sample(s, l);
            CHECK_MSG(got == want, "%s: trial %d drew %d, argmax %d", what, trial, got, want);
        }
    }
    sampler_free(gs);
    sampler_free(s);
    free(l);
}

static void test_top_k_1_is_greedy(void) {
    float temps[3] = {0.5f, 1.0f, 5.0f};
    for (int i = 0; i < 3; i++) {
        struct sampler_params p = params_plain(temps[i]);
        p.top_k = 1;
        check_filter_is_greedy(p, "top_k 1");
    }
}

static void test_top_p_tiny_is_greedy(void) {
    struct sampler_params p = params_plain(1.5f);
    p.top_p = 1e-6f;
    check_filter_is_greedy(p, "top_p 1e-6");
}

static void test_min_p_1_is_greedy(void) {
    struct sampler_params p = params_plain(3.0f);
    p.min_p = 1.0f;
    check_filter_is_greedy(p, "min_p 1");
}

/* ---------------------------------------------------------------------------------------------
 * Filters that keep a known set: draws must stay inside it and reach all of it. */

/* Draws n times; returns in seen[] how often each of the n_vocab ids came up. */
static void draw_counts(struct sampler *s, const float *l, int32_t n_vocab, int n, int *seen) {
    memset(seen, 0, (size_t)n_vocab * sizeof(*seen));
    for (int i = 0; i < n; i++) {
        int32_t t = sampler_sample(s, l);
        CHECK(t >= 0 && t < n_vocab);
        if (t >= 0 && t < n_vocab) seen[t]++;
    }
}

static void test_filters_keep_known_set(void) {
    /* probabilities 0.5, 0.3, 0.15, 0.05 at temp 1 */
    const float l[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    int seen[4];
    struct sampler_params p = params_plain(1.0f);
    p.top_k = 2; /* keeps 0, 1 */
    struct sampler *s = sampler_for(&p, 4);
    if (s) draw_counts(s, l, 4, 2000, seen);
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] == 0 && seen[3] == 0);
    sampler_free(s);
    p = params_plain(1.0f);
    p.top_p = 0.9f; /* cumulative 0.5, 0.8, 0.95: keeps 0, 1, 2 */
    s = sampler_for(&p, 4);
    if (s) draw_counts(s, l, 4, 2000, seen);
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0 && seen[3] == 0);
    sampler_free(s);
    p = params_plain(1.0f);
    p.min_p = 0.5f; /* prob >= 0.25: keeps 0, 1 */
    s = sampler_for(&p, 4);
    if (s) draw_counts(s, l, 4, 2000, seen);
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] == 0 && seen[3] == 0);
    sampler_free(s);
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Top-p without top-k on a big vocabulary takes the partial-sort path: every draw must have a
 * logit at or above the smallest logit of the nucleus computed here by a full sort. */
static void test_top_p_big_vocab_nucleus(void) {
    float *l = malloc(BIG_VOCAB * sizeof(*l)), *sorted = malloc(BIG_VOCAB * sizeof(*l));
    CHECK(l && sorted);
    struct sampler_params p = params_plain(1.0f);
    p.top_p = 0.5f;
    struct sampler *s = sampler_for(&p, BIG_VOCAB);
    if (l && sorted && s) {
        fill_logits(l, BIG_VOCAB, 7, 8.0f); /* nucleus of a few thousand: several growth steps */
        memcpy(sorted, l, BIG_VOCAB * sizeof(*l));
        qsort(sorted, BIG_VOCAB, sizeof(*sorted), cmp_desc);
        double total = 0.0, cum = 0.0;
        for (int32_t i = 0; i < BIG_VOCAB; i++) total += exp((double)sorted[i] - sorted[0]);
        int32_t keep = 0;
        while (cum < 0.5 * total) cum += exp((double)sorted[keep++] - sorted[0]);
        CHECK(keep > 256 && keep < BIG_VOCAB / 4); /* the case exercises growth, not a full sort */
        int below = 0;
        for (int i = 0; i < 300; i++) below += l[sampler_sample(s, l)] < sorted[keep - 1];
        CHECK_EQ_INT(below, 0);
    }
    sampler_free(s);
    free(sorted);
    free(l);
}

/* ---------------------------------------------------------------------------------------------
 * Penalties: each case has two logits where the penalty flips (or must not flip) the winner. */

static int32_t greedy_after(struct sampler_params p, const float *l, int32_t n,
                            const int32_t *hist, int n_hist) {
    struct sampler *s = sampler_new(&p, n);
    CHECK(s != NULL);
    if (!s) return -1;
    for (int i = 0; i < n_hist; i++) sampler_accept(s, hist[i]);
    int32_t t = sampler_sample(s, l);
    sampler_free(s);
    return t;
}

static void test_repeat_penalty(void) {
    struct sampler_params p = params_plain(0.0f);
    p.repeat_penalty = 1.5f;
    const int32_t h0[1] = {0};
    const float pos[2] = {2.0f, 1.5f}; /* 2.0 / 1.5 = 1.33 < 1.5 */
    CHECK_EQ_INT(greedy_after(p, pos, 2, NULL, 0), 0);
    CHECK_EQ_INT(greedy_after(p, pos, 2, h0, 1), 1);
    const float neg[2] = {-1.0f, -1.2f}; /* -1.0 * 1.5 = -1.5 < -1.2; dividing would keep 0 */
    CHECK_EQ_INT(greedy_after(p, neg, 2, h0, 1), 1);
    const int32_t h000[3] = {0, 0, 0}; /* once per distinct token: 2.0 / 1.5, not / 1.5^3 */
    const float three[3] = {2.0f, 1.2f, 1.0f};
    CHECK_EQ_INT(greedy_after(p, three, 3, h000, 3), 0);
}

static void test_presence_penalty(void) {
    struct sampler_params p = params_plain(0.0f);
    const float l[2] = {2.0f, 1.5f};
    const int32_t h00[2] = {0, 0};
    p.presence_penalty = 0.3f; /* once: 1.7 > 1.5; per count would give 1.4 */
    CHECK_EQ_INT(greedy_after(p, l, 2, h00, 2), 0);
    p.presence_penalty = 0.6f; /* 1.4 < 1.5 */
    CHECK_EQ_INT(greedy_after(p, l, 2, h00, 2), 1);
}

static void test_frequency_penalty(void) {
    struct sampler_params p = params_plain(0.0f);
    p.frequency_penalty = 0.3f;
    const float l[2] = {2.0f, 1.5f};
    const int32_t h00[2] = {0, 0};
    CHECK_EQ_INT(greedy_after(p, l, 2, h00, 1), 0); /* 1.7 */
    CHECK_EQ_INT(greedy_after(p, l, 2, h00, 2), 1); /* 1.4 */
}

static void test_penalty_window_and_reset(void) {
    struct sampler_params p = params_plain(0.0f);
    p.frequency_penalty = 0.3f;
    p.repeat_last_n = 2;
    const float l[3] = {2.0f, 1.9f, 0.0f};
    struct sampler *s = sampler_for(&p, 3);
    if (!s) return;
    sampler_accept(s, 0);
    CHECK_EQ_INT(sampler_sample(s, l), 1); /* 1.7 < 1.9 */
    sampler_accept(s, 1);
    sampler_accept(s, 1);                  /* 0 leaves the window of 2; 1 drops to 1.3 */
    CHECK_EQ_INT(sampler_sample(s, l), 0);
    sampler_accept(s, 0);                  /* window {1, 0}: 1.7 vs 1.6 */
    CHECK_EQ_INT(sampler_sample(s, l), 0);
    sampler_accept(s, 0);                  /* window {0, 0}: 1.4 vs 1.9 */
    CHECK_EQ_INT(sampler_sample(s, l), 1);
    sampler_accept(s, -1);                 /* out of range: ignored */
    sampler_accept(s, 3);
    CHECK_EQ_INT(sampler_sample(s, l), 1);
    sampler_reset(s, 0);
    CHECK_EQ_INT(sampler_sample(s, l), 0);
    sampler_free(s);
}

static void test_penalties_in_sampling_chain(void) {
    struct sampler_params p = params_plain(1.0f);
    p.top_k = 1;
    p.repeat_penalty = 2.0f;
    const float l[3] = {3.0f, 2.0f, 1.0f};
    const int32_t h[1] = {0};
    CHECK_EQ_INT(greedy_after(p, l, 3, h, 1), 1); /* 1.5 < 2.0 before top-k */
}

/* ---------------------------------------------------------------------------------------------
 * Seeds and distributions. */

static void draw_seq(struct sampler *s, const float *l, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = sampler_sample(s, l);
}

static void test_seed_reproducible(void) {
    /* Golden: the first 16 draws for seed 42 over 8 tokens. A change here breaks every
     * user's "same seed, same text" across versions: update only on purpose. */
    static const int32_t golden[16] = {0, 2, 5, 7, 7, 5, 5, 6, 5, 3, 5, 1, 5, 1, 5, 6};
    const float l[8] = {0.5f, 1.0f, 0.2f, 0.9f, -0.3f, 0.7f, 0.0f, 0.4f};
    int32_t a[16], b[16], c[16], d[16];
    struct sampler_params p = params_plain(1.0f);
    p.seed = 42;
    struct sampler *s1 = sampler_for(&p, 8), *s2 = sampler_for(&p, 8);
    if (!s1 || !s2) goto out;
    draw_seq(s1, l, 16, a);
    draw_seq(s2, l, 16, b);
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    for (int i = 0; i < 16; i++) {
        CHECK_MSG(a[i] == golden[i], "draw %d: %d != %d", i, a[i], golden[i]);
    }
    sampler_reset(s1, 42);
    draw_seq(s1, l, 16, c);
    CHECK(memcmp(a, c, sizeof(a)) == 0);
    sampler_reset(s1, 43);
    draw_seq(s1, l, 16, d);
    CHECK(memcmp(a, d, sizeof(a)) != 0);
    if (getenv("SAMPLER_PRINT_GOLDEN")) {
        for (int i = 0; i < 16; i++) printf("%d%s", a[i], i < 15 ? ", " : "\n");
    }
out:
    sampler_free(s2);
    sampler_free(s1);
}

/* Draws N_DRAWS at temp over 4 tokens; checks against softmax(l / temp) by max abs error and
 * chi-square. Returns the empirical probability of the most likely token. */
static double check_distribution(float temp) {
    const float l[4] = {1.0f, 2.0f, 0.5f, -1.0f};
    double want[4], sum = 0.0, chi2 = 0.0, max_err = 0.0;
    int seen[4];
    for (int i = 0; i < 4; i++) sum += want[i] = exp(l[i] / temp);
    for (int i = 0; i < 4; i++) want[i] /= sum;
    struct sampler_params p = params_plain(temp);
    p.seed = 1234;
    struct sampler *s = sampler_for(&p, 4);
    if (!s) return 0.0;
    draw_counts(s, l, 4, N_DRAWS, seen);
    sampler_free(s);
    for (int i = 0; i < 4; i++) {
        double got = (double)seen[i] / N_DRAWS, e = want[i] * N_DRAWS;
        max_err = fmax(max_err, fabs(got - want[i]));
        chi2 += (seen[i] - e) * (seen[i] - e) / e;
    }
    CHECK_MSG(max_err <= DIST_TOL, "temp %g: max abs error %g > %g", temp, max_err, DIST_TOL);
    CHECK_MSG(chi2 <= CHI2_3DF, "temp %g: chi-square %g > %g", temp, chi2, CHI2_3DF);
    return (double)seen[1] / N_DRAWS;
}

static void test_distribution_temp_1(void) {
    check_distribution(1.0f);
}

static void test_temp_2_flattens(void) {
    double p1 = check_distribution(1.0f), p2 = check_distribution(2.0f);
    CHECK_MSG(p2 < p1 - 0.1, "temp 2 top prob %g, temp 1 %g", p2, p1);
}

/* ---------------------------------------------------------------------------------------------
 * Hostile logits and parameters. */

static void test_nan_inf_logits(void) {
    const float nan = NAN, inf = INFINITY;
    const float all_nan[4] = {nan, nan, nan, nan};
    const float all_ninf[4] = {-inf, -inf, -inf, -inf};
    const float one_pinf[4] = {nan, 1.0f, inf, -inf};
    const float two_pinf[4] = {inf, nan, inf, 3.0f};
    const float mixed[4] = {nan, -inf, 0.5f, nan};
    const float temps[3] = {0.0f, 1.0f, 1e-3f};
    for (int t = 0; t < 3; t++) {
        struct sampler_params p = sampler_params_default();
        p.temp = temps[t];
        p.repeat_penalty = 1.3f;
        p.presence_penalty = 0.5f;
        struct sampler *s = sampler_for(&p, 4);
        if (!s) return;
        for (int i = 0; i < 50; i++) {
            int32_t a = sampler_sample(s, all_nan), b = sampler_sample(s, all_ninf);
            CHECK(a >= 0 && a < 4 && b >= 0 && b < 4);
            CHECK_EQ_INT(sampler_sample(s, one_pinf), 2);
            int32_t c = sampler_sample(s, two_pinf);
            CHECK(c == 0 || c == 2);
            CHECK_EQ_INT(sampler_sample(s, mixed), 2);
            sampler_accept(s, a);
        }
        sampler_free(s);
    }
}

static void test_bad_params_rejected(void) {
    struct sampler_params p = sampler_params_default();
    CHECK(sampler_new(&p, 0) == NULL);
    CHECK(sampler_new(&p, -5) == NULL);
    CHECK(sampler_new(NULL, 10) == NULL);
    p.repeat_penalty = 0.0f;
    CHECK(sampler_new(&p, 10) == NULL);
    p = sampler_params_default();
    p.temp = NAN;
    CHECK(sampler_new(&p, 10) == NULL);
    p = sampler_params_default();
    p.repeat_last_n = -1;
    CHECK(sampler_new(&p, 10) == NULL);
    p = sampler_params_default();
    p.frequency_penalty = INFINITY;
    CHECK(sampler_new(&p, 10) == NULL);
    sampler_free(NULL);
}

static const struct test_case cases[] = {
    {"greedy_argmax", test_greedy_argmax},
    {"greedy_ties_lowest_id", test_greedy_ties_lowest_id},
    {"top_k_1_is_greedy", test_top_k_1_is_greedy},
    {"top_p_tiny_is_greedy", test_top_p_tiny_is_greedy},
    {"min_p_1_is_greedy", test_min_p_1_is_greedy},
    {"filters_keep_known_set", test_filters_keep_known_set},
    {"top_p_big_vocab_nucleus", test_top_p_big_vocab_nucleus},
    {"repeat_penalty", test_repeat_penalty},
    {"presence_penalty", test_presence_penalty},
    {"frequency_penalty", test_frequency_penalty},
    {"penalty_window_and_reset", test_penalty_window_and_reset},
    {"penalties_in_sampling_chain", test_penalties_in_sampling_chain},
    {"seed_reproducible", test_seed_reproducible},
    {"distribution_temp_1", test_distribution_temp_1},
    {"temp_2_flattens", test_temp_2_flattens},
    {"nan_inf_logits", test_nan_inf_logits},
    {"bad_params_rejected", test_bad_params_rejected},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
