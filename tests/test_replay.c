/* test_replay.c - sniperd --route-replay (server/engine/replay.c, block_moe.c's routing): a replayed
 * run's experts, seen through the engine's route observer, are the trace's layer by layer (the
 * prefill step its union, decode tokens its tokens in order, cycling); where the trace routes fewer
 * experts than the model, the rest are the model's own best; a trace of another shape is refused
 * with both shapes named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "harness.h"
#include "model.h"
#include "replay.h"
#include "route_trace.h"

#define N_LAYER 4    /* the tiny preset: 4 layers of 16 experts, 4 a token */
#define N_EXPERT 16
#define K 4
#define N_PROMPT 8
#define MAX_STEPS 32

/* What the route observer saw: each step's experts of each layer (ascending). */
struct seen {
    int32_t ids[MAX_STEPS][N_LAYER][N_EXPERT];
    int32_t n[MAX_STEPS][N_LAYER];
    int step, last_il;
};

static void observe(void *ctx, int il, const int32_t *ids, int32_t n) {
    struct seen *s = ctx;
    if (il <= s->last_il)
        s->step++;
    s->last_il = il;
    if (s->step < MAX_STEPS && n <= N_EXPERT) {
        memcpy(s->ids[s->step][il], ids, sizeof(*ids) * (size_t)n);
        s->n[s->step][il] = n;
    }
}

static int cmp_int(const void *a, const void *b) {
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* True when ids[0..n) sorted equals want[0..n_want) (ascending). */
static bool same_set(const int32_t *ids, int32_t n, const int32_t *want, int32_t n_want) {
    int32_t s[N_EXPERT];
    if (n != n_want || n > N_EXPERT)
        return false;
    memcpy(s, ids, sizeof(*s) * (size_t)n);
    qsort(s, (size_t)n, sizeof(*s), cmp_int);
    return memcmp(s, want, sizeof(*s) * (size_t)n) == 0;
}

static const char *tiny_model(void) {
    static char path[1024];
    if (!path[0] && test_make_model(path, sizeof(path), "replay.gguf", "--preset tiny --seed 5") < 0)
        path[0] = '\0';
    return path[0] ? path : NULL;
}

/* Runs the tiny model (experts resident) on N_PROMPT fixed ids in one step, then n_dec decode steps
 * of fixed ids, routing from r (NULL: the model's own), into s. Returns 0 or -1 after a failure. */
static int run(const char *path, struct replay *r, int n_dec, struct seen *s) {
    char err[512] = "";
    struct model *m = model_open(path, false, err, sizeof(err));
    CHECK_MSG(m != NULL, "%s", err);
    if (!m)
        return -1;
    struct engine_params ep = engine_params_default();
    ep.n_threads = 1;
    ep.n_ctx = 64;
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int rc = -1;
    CHECK_MSG(e != NULL && logits != NULL, "%s", err);
    if (!e || !logits)
        goto out;
    memset(s, 0, sizeof(*s));
    s->step = -1;
    s->last_il = 1 << 30;
    engine_set_route_observer(e, observe, s);
    engine_set_route_replay(e, r);
    int32_t ids[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        ids[i] = 3 + 7 * i;
    rc = engine_eval(e, 0, ids, N_PROMPT, logits, false);
    for (int d = 0; rc == 0 && d < n_dec; d++) {
        int32_t tok = 11 + 5 * d;
        rc = engine_eval(e, 0, &tok, 1, logits, false);
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(s->step, n_dec);
out:
    free(logits);
    engine_free(e);
    model_free(m);
    return rc == 0 ? 0 : -1;
}

/* A trace of the tiny shape routing n_used a token: a prefill union of 10 experts per layer and
 * n_tok decode tokens of distinct pseudo-random experts, written to name; the trace is returned. */
static struct route_trace *write_trace(const char *name, int32_t n_used, int32_t n_tok,
                                       char *path, size_t path_len) {
    struct route_trace *t = route_trace_new(N_LAYER, N_EXPERT, n_used, 1000);
    CHECK(t != NULL);
    if (!t)
        return NULL;
    uint32_t x = 12345;
    for (int32_t l = 0; l < N_LAYER; l++) {
        int32_t u[10];
        for (int32_t i = 0; i < 10; i++)
            u[i] = (i * 3 + l) % N_EXPERT; /* 3 is prime to 16: distinct */
        CHECK_EQ_INT(route_trace_add(t, l, u, NULL, 10, false), 0);
    }
    for (int32_t d = 0; d < n_tok; d++)
        for (int32_t l = 0; l < N_LAYER; l++) {
            int32_t sel[K], n = 0;
            float w[K];
            while (n < n_used) {
                x = x * 1664525u + 1013904223u;
                int32_t e = (int32_t)((x >> 8) % N_EXPERT);
                bool dup = false;
                for (int32_t i = 0; i < n; i++)
                    dup |= sel[i] == e;
                if (!dup) {
                    w[n] = 1.0f / (float)(n + 1);
                    sel[n++] = e;
                }
            }
            CHECK_EQ_INT(route_trace_add(t, l, sel, w, n, true), 0);
        }
    snprintf(path, path_len, "%s/%s", test_tmpdir(), name);
    CHECK_EQ_INT(route_trace_write(t, path), 0);
    return t;
}

/* The trace routes the model's k: every layer of every step sees exactly the trace's experts. */
static void test_observed_is_trace(void) {
    const char *model = tiny_model();
    char path[1024], err[512] = "";
    struct route_trace *t = model ? write_trace("k4.route.csv", K, 5, path, sizeof(path)) : NULL;
    struct replay *r = t ? replay_open(path, N_LAYER, N_EXPERT, err, sizeof(err)) : NULL;
    struct seen *s = calloc(1, sizeof(*s));
    CHECK_MSG(!t || r != NULL, "%s", err);
    if (!r || !s || run(model, r, 12, s) < 0)
        goto out;
    CHECK_EQ_INT(replay_n_used(r), K);
    CHECK_EQ_INT(replay_n_decode_tokens(r), 5);
    for (int32_t l = 0; l < N_LAYER; l++) { /* prefill: 8 tokens x 4 cover the 10 of the union */
        const struct route_lookup *lk = &t->look[l];
        int32_t want[N_EXPERT];
        memcpy(want, t->ids + lk->off, sizeof(*want) * (size_t)lk->n);
        qsort(want, (size_t)lk->n, sizeof(*want), cmp_int);
        CHECK_MSG(same_set(s->ids[0][l], s->n[0][l], want, lk->n), "prefill layer %d", l);
    }
    for (int d = 0; d < 12; d++) /* decode token d is the trace's d % 5 */
        for (int32_t l = 0; l < N_LAYER; l++) {
            const struct route_lookup *lk = &t->look[N_LAYER + (size_t)(d % 5) * N_LAYER + l];
            int32_t want[K];
            CHECK_EQ_INT(lk->layer, l);
            memcpy(want, t->ids + lk->off, sizeof(want));
            qsort(want, K, sizeof(*want), cmp_int);
            CHECK_MSG(same_set(s->ids[1 + d][l], s->n[1 + d][l], want, K), "decode %d layer %d",
                      d, l);
        }
out:
    free(s);
    replay_free(r);
    route_trace_free(t);
}

/* The trace routes 2 of the model's 4: the other 2 are the model's own best. Layer 0's input does
 * not depend on any routing, so a trace of 2 of the model's own 4 there gives back exactly its 4. */
static void test_fill_from_model(void) {
    const char *model = tiny_model();
    struct seen *own = calloc(1, sizeof(*own)), *s = calloc(1, sizeof(*s));
    struct route_trace *t = route_trace_new(N_LAYER, N_EXPERT, 2, 1000);
    struct replay *r = NULL;
    char path[1024], err[512] = "";
    CHECK(own && s && t);
    if (!model || !own || !s || !t || run(model, NULL, 6, own) < 0)
        goto out;
    for (int32_t l = 0; l < N_LAYER; l++) { /* prefill: 2 of the model's own union */
        CHECK_EQ_INT(route_trace_add(t, l, own->ids[0][l], NULL, 2, false), 0);
    }
    for (int d = 0; d < 6; d++)
        for (int32_t l = 0; l < N_LAYER; l++) { /* the model's 4 experts' last two, ascending */
            const int32_t *ids = own->ids[1 + d][l] + 2;
            CHECK_EQ_INT(route_trace_add(t, l, ids, NULL, 2, true), 0);
        }
    snprintf(path, sizeof(path), "%s/k2.route.csv", test_tmpdir());
    CHECK_EQ_INT(route_trace_write(t, path), 0);
    r = replay_open(path, N_LAYER, N_EXPERT, err, sizeof(err));
    CHECK_MSG(r != NULL, "%s", err);
    if (!r || run(model, r, 6, s) < 0)
        goto out;
    for (int d = 0; d < 6; d++) {
        CHECK_MSG(same_set(s->ids[1 + d][0], s->n[1 + d][0], own->ids[1 + d][0], K),
                  "decode %d: layer 0 is not the model's own 4", d);
        for (int32_t l = 1; l < N_LAYER; l++) { /* elsewhere: the trace's 2 and 2 more */
            CHECK_EQ_INT(s->n[1 + d][l], K);
            int32_t hit = 0;
            for (int32_t i = 0; i < s->n[1 + d][l]; i++)
                hit += s->ids[1 + d][l][i] == own->ids[1 + d][l][2] ||
                       s->ids[1 + d][l][i] == own->ids[1 + d][l][3];
            CHECK_MSG(hit == 2, "decode %d layer %d lacks the trace's experts", d, l);
        }
    }
out:
    replay_free(r);
    route_trace_free(t);
    free(own);
    free(s);
}

/* A trace of another shape is refused, both shapes named; so is one without decode tokens. */
static void test_shape_refused(void) {
    char path[1024], err[512] = "";
    struct route_trace *t = write_trace("shape.route.csv", K, 2, path, sizeof(path));
    if (!t)
        return;
    struct replay *r = replay_open(path, N_LAYER, 2 * N_EXPERT, err, sizeof(err));
    CHECK(r == NULL);
    CHECK_MSG(strstr(err, "4 layers x 16 experts") && strstr(err, "4 layers x 32 experts"), "%s",
              err);
    replay_free(r);
    r = replay_open(path, N_LAYER + 1, N_EXPERT, err, sizeof(err));
    CHECK(r == NULL);
    CHECK_MSG(strstr(err, "4 layers x 16 experts") && strstr(err, "5 layers x 16 experts"), "%s",
              err);
    replay_free(r);
    route_trace_free(t);
    t = route_trace_new(N_LAYER, N_EXPERT, K, 1000); /* prefill only */
    int32_t u[K] = {1, 2, 3, 4};
    for (int32_t l = 0; t && l < N_LAYER; l++)
        CHECK_EQ_INT(route_trace_add(t, l, u, NULL, K, false), 0);
    snprintf(path, sizeof(path), "%s/nodecode.route.csv", test_tmpdir());
    CHECK(t && route_trace_write(t, path) == 0);
    r = replay_open(path, N_LAYER, N_EXPERT, err, sizeof(err));
    CHECK(r == NULL);
    CHECK_MSG(strstr(err, "no decode tokens"), "%s", err);
    replay_free(r);
    route_trace_free(t);
    const char *dir = test_fixtures_dir(); /* the real Qwen trace: right shape, then wrong */
    if (!dir) {
        test_skip("../shared/fixtures is absent: the Qwen trace's shape is NOT checked");
        return;
    }
    static const struct {
        const char *name;
        int32_t n_layer, n_used, n_decode;
    } traces[] = {{"gemma", 30, 6, 128}, {"gptoss", 36, 2, 64}, {"qwen", 48, 6, 128}};
    for (size_t i = 0; i < sizeof(traces) / sizeof(traces[0]); i++) {
        snprintf(path, sizeof(path), "%s/routing/%s.route.csv", dir, traces[i].name);
        r = replay_open(path, traces[i].n_layer, 128, err, sizeof(err));
        CHECK_MSG(r != NULL, "%s", err);
        CHECK(r && replay_n_used(r) == traces[i].n_used &&
              replay_n_decode_tokens(r) == traces[i].n_decode);
        replay_free(r);
    }
    r = replay_open(path, 48, 64, err, sizeof(err));
    CHECK(r == NULL);
    CHECK_MSG(strstr(err, "48 layers x 128 experts") && strstr(err, "48 layers x 64 experts"),
              "%s", err);
    replay_free(r);
}

static const struct test_case cases[] = {
    {"observed_is_trace", test_observed_is_trace},
    {"fill_from_model", test_fill_from_model},
    {"shape_refused", test_shape_refused},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
