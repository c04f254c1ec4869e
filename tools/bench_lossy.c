/* bench_lossy.c - what the lossy speed-ups cost: runs the same tokens with exact routing and with
 * --moe-top-k / --cache-bias settings, experts on disk through the same size of cache, and reports
 * per setting the next-token (top-1) agreement with the exact run, the mean KL divergence of its
 * next-token distribution from the exact one, and the expert bytes it read per token.
 *
 *     build/bench-lossy MODEL [--tokens N] [--slots N] [--threads N]
 *
 * Tokens: N pseudo-random ids (the ids sniperd --bench-prompt uses), fed one at a time (the decode
 * path, where the cache's contents steer --cache-bias). Slots default to a quarter of all experts. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "expert_cache.h"
#include "model.h"
#include "ops.h"
#include "rng.h"

struct setting {
    const char *name;
    int32_t top_k;
    float bias;
};

/* Feeds ids one at a time, logits of each into out [n][n_vocab]; bytes read per token in *bpt. */
static int run(struct model *m, const struct setting *s, int32_t n_slots, int n_threads,
               const int32_t *ids, int32_t n, float *out, double *bpt) {
    char err[512];
    struct engine_params ep = engine_params_default();
    ep.n_threads = n_threads;
    ep.n_ctx = n + 1;
    ep.moe_top_k = s->top_k;
    ep.cache_bias = s->bias;
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    struct expert_cache *c =
        e ? expert_cache_new(m, (size_t)n_slots * expert_cache_slot_bytes(m), NULL, err,
                             sizeof(err))
          : NULL;
    int rc = -EINVAL;
    if (!e || !c) {
        fprintf(stderr, "bench-lossy: %s\n", err);
        goto out;
    }
    engine_set_experts(e, c);
    const size_t V = (size_t)m->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if ((rc = engine_eval(e, 0, &ids[i], 1, out + (size_t)i * V, false)) < 0) {
            fprintf(stderr, "bench-lossy: %s failed: %s\n", s->name, strerror(-rc));
            goto out;
        }
    struct expert_cache_stats st;
    expert_cache_get_stats(c, &st);
    *bpt = (double)st.bytes_read / n;
    rc = 0;
out:
    engine_free(e);
    expert_cache_free(c);
    return rc;
}

/* Softmax of x into p (double), returning nothing; n > 0. */
static void softmax(const float *x, size_t n, double *p) {
    float mx = x[0];
    for (size_t i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (p[i] = exp((double)x[i] - mx));
    for (size_t i = 0; i < n; i++)
        p[i] /= sum;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int32_t n = 128, n_slots = 0;
    int n_threads = 2;
    for (int i = 1; i < argc; i++) {
        bool has = i + 1 < argc;
        if (!strcmp(argv[i], "--tokens") && has)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--slots") && has)
            n_slots = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && has)
            n_threads = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench-lossy MODEL [--tokens N] [--slots N] [--threads N]\n");
            return 2;
        }
    }
    char err[512];
    struct model *m = path && n > 0 ? model_open(path, true, err, sizeof(err)) : NULL;
    if (!m) {
        fprintf(stderr, "bench-lossy: %s\n", path && n > 0 ? err : "pass a moe MODEL and --tokens > 0");
        return 2;
    }
    const int32_t k = m->hp.n_expert_used, L = m->hp.n_layer, E = m->hp.n_expert;
    if (E == 0) {
        fprintf(stderr, "bench-lossy: %s is dense: nothing to route\n", path);
        model_free(m);
        return 2;
    }
    if (n_slots <= 0)
        n_slots = L * E / 4 > E ? L * E / 4 : E;
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t *ids = malloc(sizeof(*ids) * (size_t)n);
    float *want = malloc(sizeof(float) * V * (size_t)n), *got = malloc(sizeof(float) * V * (size_t)n);
    double *p = malloc(sizeof(double) * V), *q = malloc(sizeof(double) * V);
    int rc = 1;
    if (!ids || !want || !got || !p || !q) {
        fprintf(stderr, "bench-lossy: out of memory\n");
        goto out;
    }
    rng_bench_ids(ids, n, (int32_t)V);
    char names[6][48];
    struct setting set[6];
    int n_set = 0;
    snprintf(names[n_set], sizeof(names[0]), "exact (top-%d)", k);
    set[n_set] = (struct setting){names[n_set], 0, 0.0f}, n_set++;
    for (int32_t kk = k - 1; kk >= 1 && n_set < 3; kk = kk > k / 2 ? k / 2 : 0) {
        snprintf(names[n_set], sizeof(names[0]), "--moe-top-k %d", kk);
        set[n_set] = (struct setting){names[n_set], kk, 0.0f}, n_set++;
    }
    const float biases[3] = {0.9f, 0.6f, 0.3f};
    for (int b = 0; b < 3; b++) {
        snprintf(names[n_set], sizeof(names[0]), "--cache-bias %.1f", (double)biases[b]);
        set[n_set] = (struct setting){names[n_set], 0, biases[b]}, n_set++;
    }
    printf("lossy: %s, %d tokens one at a time, %d of %d experts cached (%.1f%%)\n", m->name, n,
           n_slots, L * E, 100.0 * n_slots / (L * E));
    printf("| setting | top-1 agreement | mean KL (nats) | expert MB read/token |\n");
    printf("|---|---|---|---|\n");
    double bpt;
    if (run(m, &set[0], n_slots, n_threads, ids, n, want, &bpt) < 0)
        goto out;
    printf("| %s | 100%% | 0 | %.1f |\n", set[0].name, bpt / 1e6);
    for (int s = 1; s < n_set; s++) {
        if (run(m, &set[s], n_slots, n_threads, ids, n, got, &bpt) < 0)
            goto out;
        int32_t agree = 0;
        double kl = 0.0;
        for (int32_t i = 0; i < n; i++) {
            const float *a = want + (size_t)i * V, *b = got + (size_t)i * V;
            agree += ops_argmax(a, (int64_t)V) == ops_argmax(b, (int64_t)V);
            softmax(a, V, p);
            softmax(b, V, q);
            for (size_t j = 0; j < V; j++)
                if (p[j] > 0)
                    kl += p[j] * (log(p[j]) - log(q[j] > 1e-300 ? q[j] : 1e-300));
        }
        printf("| %s | %.1f%% | %.4f | %.1f |\n", set[s].name, 100.0 * agree / n, kl / n,
               bpt / 1e6);
    }
    rc = 0;
out:
    free(ids);
    free(want);
    free(got);
    free(p);
    free(q);
    model_free(m);
    return rc;
}
