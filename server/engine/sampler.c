/* sampler.c - next-token selection in llama.cpp's chain order: penalties -> top-k -> top-p ->
 * min-p -> temperature -> a draw from xoshiro256** (seeded through splitmix64).
 * Invariants: every buffer is sized in sampler_new, so sampler_sample never allocates; counts[t]
 * is the number of times t occurs in the history ring; logits are sanitized on load (NaN -> -inf,
 * +inf -> FLT_MAX), so the id returned is always in [0, n_vocab). Greedy (temp <= 0) also sees the
 * penalties, as llama.cpp's greedy chain does. */
#include "sampler.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "rng.h"

/* A candidate token: its id, its (penalized) logit, and exp(logit - max) once top-p set it. */
struct cand {
    int32_t id;
    float logit;
    float w;
};

struct sampler {
    struct sampler_params p;
    int32_t n_vocab;
    struct cand *cand; /* (n_vocab) working set, rebuilt by every sample */
    int32_t *hist;     /* (repeat_last_n) ring of the last accepted tokens */
    int32_t n_hist;    /* tokens in the ring, <= repeat_last_n */
    int32_t hist_head; /* index of the oldest token once the ring is full */
    int32_t *counts;   /* (n_vocab) occurrences of each token in the ring */
    struct rng rng;    /* xoshiro256** state */
};


/* ---------------------------------------------------------------------------------------------
 * Lifetime and history. */

/* Returns the defaults documented in sampler.h, by value. */
struct sampler_params sampler_params_default(void) {
    struct sampler_params p = {
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .seed = 0,
    };
    return p;
}

static bool params_valid(const struct sampler_params *p) {
    return !isnan(p->temp) && !isnan(p->top_p) && !isnan(p->min_p) &&
           isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f && p->repeat_last_n >= 0 &&
           isfinite(p->presence_penalty) && isfinite(p->frequency_penalty);
}

/* Returns a sampler owning every buffer it will need (free with sampler_free), or NULL on bad
 * params (NaN, repeat_penalty <= 0, negative repeat_last_n, n_vocab <= 0) or no memory.
 * p is copied, not kept. */
struct sampler *sampler_new(const struct sampler_params *p, int32_t n_vocab) {
    if (!p || n_vocab <= 0 || !params_valid(p)) {
        return NULL;
    }
    struct sampler *s = calloc(1, sizeof(*s));
    if (!s) {
        goto err;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = calloc((size_t)n_vocab, sizeof(*s->cand));
    s->counts = calloc((size_t)n_vocab, sizeof(*s->counts));
    s->hist = calloc(p->repeat_last_n > 0 ? (size_t)p->repeat_last_n : 1, sizeof(*s->hist));
    if (!s->cand || !s->counts || !s->hist) {
        goto err;
    }
    rng_seed(&s->rng, p->seed);
    return s;
err:
    sampler_free(s);
    return NULL;
}

/* Frees s and its buffers; accepts NULL. */
void sampler_free(struct sampler *s) {
    if (!s) {
        return;
    }
    free(s->hist);
    free(s->counts);
    free(s->cand);
    free(s);
}

/* Records tok in the penalty window (evicting the oldest when full). Ids outside [0, n_vocab)
 * are ignored: they could never be penalized anyway. */
void sampler_accept(struct sampler *s, int32_t tok) {
    assert(s);
    int32_t cap = s->p.repeat_last_n;
    if (cap <= 0 || tok < 0 || tok >= s->n_vocab) {
        return;
    }
    if (s->n_hist < cap) {
        s->hist[s->n_hist++] = tok; /* hist_head stays 0 until the ring is full */
    } else {
        s->counts[s->hist[s->hist_head]]--;
        s->hist[s->hist_head] = tok;
        s->hist_head = (s->hist_head + 1) % cap;
    }
    s->counts[tok]++;
}

/* Empties the history in O(ring) and restarts the generator at seed: the draws that follow
 * repeat those of a fresh sampler_new with that seed. */
void sampler_reset(struct sampler *s, uint64_t seed) {
    assert(s);
    for (int32_t i = 0; i < s->n_hist; i++) {
        s->counts[s->hist[i]] = 0;
    }
    s->n_hist = 0;
    s->hist_head = 0;
    s->p.seed = seed;
    rng_seed(&s->rng, seed);
}

/* ---------------------------------------------------------------------------------------------
 * The chain, one step per function, each working on s->cand[0..n). */

static float logit_sanitize(float x) {
    if (isnan(x)) {
        return -INFINITY;
    }
    return x > FLT_MAX ? FLT_MAX : x;
}

static void cand_load(struct sampler *s, const float *logits) {
    for (int32_t i = 0; i < s->n_vocab; i++) {
        s->cand[i].id = i;
        s->cand[i].logit = logit_sanitize(logits[i]);
    }
}

static float penalize(const struct sampler_params *p, float x, int32_t count) {
    x = x > 0.0f ? x / p->repeat_penalty : x * p->repeat_penalty;
    x -= (float)count * p->frequency_penalty + p->presence_penalty;
    return logit_sanitize(x);
}

/* Needs cand indexed by id. Each distinct token of the ring is penalized once: its count is
 * negated as a "done" mark while walking the ring and restored afterwards, so the cost is
 * O(ring), not O(vocab). */
static void apply_penalties(struct sampler *s) {
    const struct sampler_params *p = &s->p;
    if (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) {
        return;
    }
    for (int32_t i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if (s->counts[t] > 0) {
            s->cand[t].logit = penalize(p, s->cand[t].logit, s->counts[t]);
            s->counts[t] = -s->counts[t];
        }
    }
    for (int32_t i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if (s->counts[t] < 0) {
            s->counts[t] = -s->counts[t];
        }
    }
}

/* The total order of the chain: higher logit first, lower id on ties. */
static bool cand_better(const struct cand *a, const struct cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int32_t cand_argmax(const struct cand *c, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (cand_better(&c[i], &c[best])) {
            best = i;
        }
    }
    return best;
}

/* Drops the -inf candidates (zero probability) keeping order; returns the new count. */
static int32_t cand_drop_impossible(struct cand *c, int32_t n) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].logit > -INFINITY) {
            c[m++] = c[i];
        }
    }
    return m;
}

/* Min-heap on cand_better: the root is the worst of h[0..n). */
static void heap_sift_down(struct cand *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_better(&h[w], &h[l])) {
            w = l;
        }
        if (r < n && cand_better(&h[w], &h[r])) {
            w = r;
        }
        if (w == i) {
            return;
        }
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* Leaves the k best of c[0..n) in c[0..k) (in heap order) in O(n log k). The heap lives in
 * c[0..k) itself: entries past k are only read after the heap is built. */
static void cand_select_top(struct cand *c, int32_t n, int32_t k) {
    assert(k > 0 && k <= n);
    for (int32_t i = k / 2 - 1; i >= 0; i--) {
        heap_sift_down(c, k, i);
    }
    for (int32_t i = k; i < n; i++) {
        if (cand_better(&c[i], &c[0])) {
            c[0] = c[i];
            heap_sift_down(c, k, 0);
        }
    }
}

static void cand_swap(struct cand *a, struct cand *b) {
    struct cand t = *a;
    *a = *b;
    *b = t;
}

/* Index of the median of c[i], c[j], c[k] under cand_better. */
static int32_t cand_median3(const struct cand *c, int32_t i, int32_t j, int32_t k) {
    if (cand_better(&c[i], &c[j])) { /* i > j */
        return cand_better(&c[j], &c[k]) ? j : cand_better(&c[i], &c[k]) ? k : i;
    }
    return cand_better(&c[i], &c[k]) ? i : cand_better(&c[j], &c[k]) ? k : j;
}

/* Moves the best m of c[0..n) to c[0..m) (unordered), m the smallest count whose weights sum
 * to >= target, and returns m (at least 1). A quickselect on mass: expected O(n), no sort.
 * Invariant: c[0..lo) is kept, the cut lies in [lo, hi), target is what [lo, ...) must add. */
static int32_t cand_select_mass(struct cand *c, int32_t n, double target) {
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        cand_swap(&c[cand_median3(c, lo, lo + (hi - lo) / 2, hi - 1)], &c[hi - 1]);
        const struct cand *pv = &c[hi - 1];
        int32_t mid = lo;
        double mass = 0.0;
        for (int32_t i = lo; i < hi - 1; i++) {
            if (cand_better(&c[i], pv)) {
                mass += c[i].w;
                cand_swap(&c[i], &c[mid++]);
            }
        }
        cand_swap(&c[mid], &c[hi - 1]); /* the pivot: best of c[mid..hi) */
        if (mass >= target) {
            hi = mid;
            continue;
        }
        target -= mass + c[mid].w;
        lo = mid + 1;
        if (target <= 0.0) {
            break;
        }
    }
    return lo; /* lo == hi only when rounding left the range just short of target */
}

/* Top-p on c[0..n): keeps the smallest set of best candidates whose softmax mass is >= p (at
 * least one); returns its size. Candidates lighter than (1 - p) * total / n are dropped before
 * the select: all of them together weigh less than 1 - p, so the nucleus never needs one, and on
 * a peaked distribution this leaves the select a few hundred candidates instead of the vocab. */
static int32_t cand_top_p(struct cand *c, int32_t n, float p) {
    float max = c[cand_argmax(c, n)].logit;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) {
        c[i].w = expf(c[i].logit - max);
        total += c[i].w;
    }
    float light = (float)((1.0 - (double)p) * total / n);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].w >= light) {
            c[m++] = c[i];
        }
    }
    double target = (double)p * total;
    return cand_select_mass(c, m, target > DBL_MIN ? target : DBL_MIN);
}

/* Min-p: keeps (in order) the candidates with prob >= min_p * max prob; the best always stays. */
static int32_t cand_min_p(struct cand *c, int32_t n, float min_p) {
    float max = c[cand_argmax(c, n)].logit;
    float cut = min_p >= 1.0f ? max : max + logf(min_p);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].logit >= cut) {
            c[m++] = c[i];
        }
    }
    return m;
}

/* Softmax at temperature temp and one draw; (l - max) / temp rather than l / temp keeps
 * FLT_MAX logits finite (the -inf a -FLT_MAX - FLT_MAX gives weighs 0). Returns the drawn id. */
static int32_t cand_draw(struct cand *c, int32_t n, float temp, struct rng *rng) {
    float max = c[cand_argmax(c, n)].logit;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        c[i].logit = expf((c[i].logit - max) / temp);
        sum += c[i].logit; /* the rounded weight, so the walk below sums to the same total */
    }
    double r = rng_uniform(rng) * sum;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].logit > 0.0f) {
            last = i;
            r -= c[i].logit;
            if (r < 0.0) {
                return c[i].id;
            }
        }
    }
    return c[last].id; /* rounding: r ran past the end; take the last possible one */
}

/* Reads logits[n_vocab] (borrowed for the call); returns an id in [0, n_vocab). */
int32_t sampler_sample(struct sampler *s, const float *logits) {
    assert(s && logits);
    const struct sampler_params *p = &s->p;
    cand_load(s, logits);
    apply_penalties(s);
    if (p->temp <= 0.0f) {
        return s->cand[cand_argmax(s->cand, s->n_vocab)].id;
    }
    int32_t n = cand_drop_impossible(s->cand, s->n_vocab);
    if (n == 0) {
        return 0; /* every logit -inf or NaN: nothing to prefer, any valid id will do */
    }
    if (p->top_k > 0 && p->top_k < n) {
        cand_select_top(s->cand, n, p->top_k);
        n = p->top_k;
    }
    if (p->top_p < 1.0f) {
        n = cand_top_p(s->cand, n, p->top_p);
    }
    if (p->min_p > 0.0f) {
        n = cand_min_p(s->cand, n, p->min_p);
    }
    return cand_draw(s->cand, n, p->temp, &s->rng);
}
