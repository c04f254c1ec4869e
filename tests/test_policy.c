/* test_policy.c - bench-policy's engine (tools/route_trace.c): the route traces of
 * ../shared/fixtures/routing read and replayed with its authors' counting rules (their published
 * LRU and Belady hit rates reproduced to the digit), malformed traces refused with the line named,
 * a recorded trace written and read back, the expert cache's policies (cache_policy.c) by hand
 * (LIRS's sets as they fill, reorder and shrink; frecency's ageing and its guesses), and the
 * replay of frecency/lirs agreeing with the real expert cache lookup for lookup, so that its
 * tables describe the cache sniperd runs, and the three levels' replay (VRAM slots before it). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_policy.h"
#include "expert_cache.h"
#include "harness.h"
#include "model.h"
#include "route_trace.h"

#define MIB ((uint64_t)1 << 20)

static struct route_trace *fixture_trace(const char *name) {
    const char *dir = test_fixtures_dir();
    char path[4096], err[512] = "";
    if (!dir) {
        test_skip("../shared/fixtures is absent: the real routing traces are NOT checked");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/routing/%s", dir, name);
    struct route_trace *t = route_trace_read(path, err, sizeof(err));
    CHECK_MSG(t != NULL, "%s", err);
    return t;
}

static double replay_rate(const struct route_trace *t, enum route_policy p, uint64_t mib) {
    struct route_result r;
    int rc = route_replay(t, p, mib * MIB, 0, &r);
    CHECK_MSG(rc == 0, "%s at %llu MiB: %d", route_policy_name(p), (unsigned long long)mib, rc);
    return rc == 0 ? 100.0 * r.hit_rate : -1.0;
}

/* The Qwen trace's authors published decode hit rates of LRU and Belady for one global cache (the
 * fixtures' README); ours, with the prefill warming the cache and a layer's lookup pinning its
 * resident experts, round to the same tenths. */
static void test_published_rates(void) {
    struct route_trace *t = fixture_trace("qwen.route.csv");
    if (!t)
        return;
    CHECK(t->n_layer == 48 && t->n_expert == 128 && t->n_used == 6);
    CHECK_EQ_INT(t->n_decode_tokens, 128);
    CHECK_EQ_INT(t->n_look, 48 + 128 * 48);
    CHECK_EQ_INT(t->expert_bytes[0], 3059712);
    CHECK_EQ_INT(t->expert_bytes[6], 2654208);
    CHECK_NEAR((double)route_trace_token_bytes(t) / MIB, 784.69, 0.01);
    static const struct {
        uint64_t mib;
        double lru, belady;
    } pub[] = {{1000, 37.7, 62.7}, {2000, 56.5, 79.4}, {4000, 80.3, 92.7}, {8000, 96.0, 97.1}};
    for (size_t i = 0; i < sizeof(pub) / sizeof(pub[0]); i++) {
        CHECK_NEAR(round(10 * replay_rate(t, ROUTE_LRU, pub[i].mib)) / 10, pub[i].lru, 1e-9);
        CHECK_NEAR(round(10 * replay_rate(t, ROUTE_BELADY, pub[i].mib)) / 10, pub[i].belady, 1e-9);
    }
    /* below one token's experts LRU evicts each expert just before its reuse */
    CHECK(replay_rate(t, ROUTE_LRU, 500) == 0.0);
    struct route_result r;
    CHECK_EQ_INT(route_replay(t, ROUTE_LRU, 5 * MIB, 0, &r), -EINVAL); /* not one token's layer */
    route_trace_free(t);
}

/* Belady bounds every policy; the other two traces read with their shapes. */
static void test_belady_bounds(void) {
    static const struct {
        const char *name;
        int32_t n_layer, n_used, n_tokens;
    } traces[] = {{"qwen.route.csv", 48, 6, 128},
                  {"gemma.route.csv", 30, 6, 128},
                  {"gptoss.route.csv", 36, 2, 64}};
    for (size_t i = 0; i < 3; i++) {
        struct route_trace *t = fixture_trace(traces[i].name);
        if (!t)
            return;
        CHECK_EQ_INT(t->n_layer, traces[i].n_layer);
        CHECK_EQ_INT(t->n_used, traces[i].n_used);
        CHECK_EQ_INT(t->n_decode_tokens, traces[i].n_tokens);
        for (uint64_t mib = 500; mib <= 4000; mib *= 2) {
            double bound = replay_rate(t, ROUTE_BELADY, mib);
            for (int p = 0; p < ROUTE_BELADY; p++)
                CHECK_MSG(replay_rate(t, (enum route_policy)p, mib) <= bound, "%s %s %llu MiB",
                          traces[i].name, route_policy_name((enum route_policy)p),
                          (unsigned long long)mib);
        }
        route_trace_free(t);
    }
}

/* ---- malformed traces -------------------------------------------------------------------------- */

static const char HEAD[] = "# route_trace v1\n"
                           "# model=x arch=qwen3moe n_layer=2 n_expert=4 n_expert_used=2\n"
                           "# layer=0 expert_bytes=100 dense_bytes=7\n"
                           "# layer=1 expert_bytes=200 dense_bytes=7\n";
static const char COLS[] = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n";

static struct route_trace *read_text(const char *text, char *err, size_t err_len) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/trace.csv", test_tmpdir());
    CHECK(test_write_file(path, text, strlen(text)) == 0);
    return route_trace_read(path, err, err_len);
}

static void expect_refused(const char *text, const char *want, int line) {
    char err[512] = "", at[32];
    struct route_trace *t = read_text(text, err, sizeof(err));
    snprintf(at, sizeof(at), "line %d", line);
    CHECK_MSG(t == NULL && strstr(err, want) && strstr(err, at), "want \"%s\" at %s, got: %s",
              want, at, t ? "(accepted)" : err);
    route_trace_free(t);
}

static void test_malformed(void) {
    char buf[2048], err[256];
    /* a good one first: two prefill rows of layer 0 join, decode rows are per step */
    snprintf(buf, sizeof(buf), "%s%s0,0,0,0,0,1,0.6,0,100\n0,0,1,0,0,1,0.7,0,0\n"
                               "0,0,1,0,1,2,0.3,0,100\n0,1,2,0,0,3,0.5,1,0\n0,1,2,0,1,0,0.5,0,0\n"
                               "0,1,2,1,0,3,0.9,0,200\n0,1,2,1,1,1,0.1,0,200\n",
             HEAD, COLS);
    struct route_trace *t = read_text(buf, err, sizeof(err));
    CHECK_MSG(t != NULL, "%s", err);
    if (t) {
        CHECK_EQ_INT(t->n_look, 3);
        CHECK(t->look[0].n == 2 && !t->look[0].decode && t->look[1].decode);
        CHECK(t->ids[0] == 1 && t->ids[1] == 2 && t->weights[0] == 0.7f);
        CHECK_EQ_INT(t->expert_bytes[1], 200);
        CHECK_EQ_INT(t->n_decode_tokens, 1);
    }
    route_trace_free(t);
    expect_refused("route_trace v1\n", "not a route trace", 1);
    expect_refused("# route_trace v1\n# n_layer=2 n_expert=4\n", "no columns line", 2);
    snprintf(buf, sizeof(buf), "# route_trace v1\n# n_layer=2 n_expert=4 n_expert_used=2\n"
                               "# layer=0 expert_bytes=100\n%s", COLS);
    expect_refused(buf, "no expert_bytes for layer 1", 4);
    snprintf(buf, sizeof(buf), "# route_trace v1\n# n_layer=0 n_expert=4 n_expert_used=2\n");
    expect_refused(buf, "bad n_layer", 2);
    snprintf(buf, sizeof(buf), "%s# layer=1 expert_bytes=300\n", HEAD);
    expect_refused(buf, "layer 1 given twice", 5);
    snprintf(buf, sizeof(buf), "%sturn,phase,step,layer,slot,expert,weight\n", HEAD);
    expect_refused(buf, "want the columns", 5);
    snprintf(buf, sizeof(buf), "%s%s", HEAD, COLS);
    expect_refused(buf, "no lookups", 5);
    snprintf(buf, sizeof(buf), "%s%s0,0,0,0,0,1,0.6,0\n", HEAD, COLS);
    expect_refused(buf, "8 columns, want 9", 6);
    snprintf(buf, sizeof(buf), "%s%s0,0,0,0,0,1,0.6,0,1,5\n", HEAD, COLS);
    expect_refused(buf, "10 columns, want 9", 6);
    snprintf(buf, sizeof(buf), "%s%s0,0,0,0,0,1,0.6,0,100\n0,0,0,2,0,1,0.6,0,100\n", HEAD, COLS);
    expect_refused(buf, "layer '2' out of range", 7);
    snprintf(buf, sizeof(buf), "%s%s0,1,0,0,0,4,0.6,0,100\n", HEAD, COLS);
    expect_refused(buf, "expert '4' out of range", 6);
    snprintf(buf, sizeof(buf), "%s%s0,1,0,0,0,-1,0.6,0,100\n", HEAD, COLS);
    expect_refused(buf, "expert '-1' out of range", 6);
    snprintf(buf, sizeof(buf), "%s%s0,1,0,0,2,1,0.6,0,100\n", HEAD, COLS);
    expect_refused(buf, "slot '2' out of range", 6);
    snprintf(buf, sizeof(buf), "%s%s0,1,0,0,0,1,nan,0,100\n", HEAD, COLS);
    expect_refused(buf, "bad weight 'nan'", 6);
    snprintf(buf, sizeof(buf), "%s%s0,2,0,0,0,1,0.5,0,100\n", HEAD, COLS);
    expect_refused(buf, "phase '2' out of range", 6);
    snprintf(buf, sizeof(buf), "%s%s0,1,0,0,0,1,0.5,0,100\n0,1,0,0,1,1,0.5,0,100\n", HEAD, COLS);
    expect_refused(buf, "expert 1 twice in decode step 0", 7);
    snprintf(buf, sizeof(buf), "%s%s0,1,0,0,0,1x,0.5,0,100\n", HEAD, COLS);
    expect_refused(buf, "expert '1x'", 6);
    char path[4096];
    snprintf(path, sizeof(path), "%s/absent.csv", test_tmpdir());
    CHECK(route_trace_read(path, err, sizeof(err)) == NULL && strstr(err, "cannot open"));
}

/* A recorded trace written and read back gives the same lookups (a prefill batch's union too). */
static void test_write_read(void) {
    struct route_trace *t = route_trace_new(3, 8, 2, 4096), *u = NULL;
    CHECK(t != NULL && route_trace_new(0, 8, 2, 1) == NULL && route_trace_new(3, 8, 9, 1) == NULL);
    if (!t)
        return;
    const int32_t batch[5] = {7, 0, 3, 5, 1}, tok[2] = {6, 2};
    for (int32_t l = 0; l < 3; l++)
        CHECK(route_trace_add(t, l, batch, NULL, 5, false) == 0);
    for (int g = 0; g < 4; g++)
        for (int32_t l = 0; l < 3; l++)
            CHECK(route_trace_add(t, l, tok, NULL, 2, true) == 0);
    CHECK(route_trace_add(t, 3, tok, NULL, 2, true) == -EINVAL);
    const int32_t bad = 8;
    CHECK(route_trace_add(t, 0, &bad, NULL, 1, true) == -EINVAL);
    char path[4096], err[512] = "";
    snprintf(path, sizeof(path), "%s/written.csv", test_tmpdir());
    CHECK(route_trace_write(t, path) == 0);
    u = route_trace_read(path, err, sizeof(err));
    CHECK_MSG(u != NULL, "%s", err);
    if (u) {
        CHECK(u->n_look == t->n_look && u->n_ids == t->n_ids);
        CHECK_EQ_INT(u->n_decode_tokens, 4);
        CHECK(memcmp(u->ids, t->ids, sizeof(*t->ids) * t->n_ids) == 0);
        for (size_t k = 0; k < t->n_look && k < u->n_look; k++)
            CHECK(u->look[k].layer == t->look[k].layer && u->look[k].n == t->look[k].n &&
                  u->look[k].decode == t->look[k].decode);
        CHECK_EQ_INT(u->expert_bytes[2], 4096);
    }
    route_trace_free(u);
    route_trace_free(t);
}

/* ---- the policy by hand ----------------------------------------------------------------------- */

static bool any_may_go(const void *ctx, int32_t e) {
    (void)ctx;
    (void)e;
    return true;
}

static bool all_but(const void *ctx, int32_t e) {
    return e != *(const int32_t *)ctx;
}

/* Takes victims until none is left and checks their order against want[0..n). */
static void check_drain(struct cache_policy *p, const int32_t *want, int n, const char *what) {
    int got = 0;
    for (int32_t v; (v = cache_policy_victim(p, any_may_go, NULL)) >= 0; got++)
        CHECK_MSG(got < n && v == want[got], "%s: victim %d is entry %d, want %d", what, got, v,
                  got < n ? want[got] : -1);
    CHECK_MSG(got == n, "%s: %d victims, want %d", what, got, n);
}

/* LIRS over 10 entries (2 experts a token: the HIR queue 2, the LIR set 8): the first 8 keys fill
 * the LIR set, the next queue as HIR; a HIR key looked up again while its last lookup is newer
 * than the least recent LIR key's joins the LIR set and pushes that one to the HIR queue; a
 * dropped entry goes first, an entry that may not go is passed over; shrunk to 6 entries (LIR set
 * 4) the least recent LIR entries join the end of the queue (looked up again there, one stays
 * HIR); a moved entry takes the other's place. */
static void test_lirs_by_hand(void) {
    struct cache_policy *p = cache_policy_new(CACHE_POLICY_LIRS, 10, 100, 2);
    CHECK(p != NULL && cache_policy_new(CACHE_POLICY_LIRS, 0, 100, 2) == NULL);
    if (!p)
        return;
    CHECK_STR(cache_policy_name(p), "lirs");
    cache_policy_resize(p, 10);
    for (int32_t e = 0; e < 10; e++) /* LIR 0..7, HIR 8, 9 */
        cache_policy_touch(p, e, e, false);
    cache_policy_touch(p, 0, 0, true); /* LIR by recency: 1..7, 0 */
    cache_policy_touch(p, 8, 8, true); /* in the stack: LIR 2..7, 0, 8; HIR 9, 1 */
    cache_policy_drop(p, 5);           /* first to go: 5, 9, 1; LIR 2, 3, 4, 6, 7, 0, 8 */
    const int32_t keep = 9;
    CHECK_EQ_INT(cache_policy_victim(p, all_but, &keep), 5);
    CHECK_EQ_INT(cache_policy_victim(p, all_but, &keep), 1);
    cache_policy_resize(p, 6);         /* HIR 9, 2, 3, 4; LIR 6, 7, 0, 8 */
    cache_policy_move(p, 6, 5);        /* LIR 5, 7, 0, 8 */
    cache_policy_touch(p, 3, 3, true); /* HIR now, older than 5's key 6: to the end of the queue */
    static const int32_t order[] = {9, 2, 4, 3, 5, 7, 0, 8};
    check_drain(p, order, 8, "lirs");
    cache_policy_free(p);
}

/* Lookups of layers 1 then 0 until the policy has seen `to` cycles (a layer below the last one's
 * starts a cycle). */
static void advance(struct cache_policy *p, int *cycle, int to) {
    for (; *cycle < to; ++*cycle) {
        cache_policy_cycle(p, 1);
        cache_policy_cycle(p, 0);
    }
}

/* Frecency's ageing: entry 0's key looked up ten times in cycle 0 (score 2 x 10 + 0 = 20) outlives
 * entry 1's looked up once in cycle 15 (2 x 1 + 15 = 17) until cycle 32 halves the counts (2 x 5 +
 * 0 = 10 against 2 x 0 + 15). */
static void check_frecency_halving(int cycles, int32_t first) {
    struct cache_policy *p = cache_policy_new(CACHE_POLICY_FRECENCY, 2, 8, 1);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_STR(cache_policy_name(p), "frecency");
    cache_policy_resize(p, 2);
    int cycle = 0;
    cache_policy_cycle(p, 0);
    for (int i = 0; i < 10; i++)
        cache_policy_touch(p, 0, 0, i > 0);
    advance(p, &cycle, 15);
    cache_policy_touch(p, 1, 1, false);
    advance(p, &cycle, cycles);
    const int32_t order[2] = {first, 1 - first};
    char what[64];
    snprintf(what, sizeof(what), "frecency after %d cycles", cycles);
    check_drain(p, order, 2, what);
    cache_policy_free(p);
}

/* A guess is placed as its key's next lookup would be (count + 1, this cycle: 2 + 1 = 3, after a
 * key looked up once in cycle 0, 2 + 0, and before one looked up once later in cycle 1, 2 + 1),
 * but not counted: once looked up its key's count is 1 (2 + 0, before a key looked up in cycle 1,
 * where a counted guess would make it 2 x 2 + 0 = 4). */
static void test_frecency_by_hand(void) {
    check_frecency_halving(31, 1);
    check_frecency_halving(32, 0);
    struct cache_policy *p = cache_policy_new(CACHE_POLICY_FRECENCY, 3, 8, 1);
    CHECK(p != NULL);
    if (!p)
        return;
    cache_policy_resize(p, 3);
    int cycle = 0;
    cache_policy_cycle(p, 0);
    cache_policy_touch(p, 0, 0, false);
    advance(p, &cycle, 1);
    cache_policy_guess(p, 1, 1);
    cache_policy_touch(p, 2, 2, false);
    static const int32_t placed[] = {0, 1, 2};
    check_drain(p, placed, 3, "frecency's guess placed");
    cache_policy_free(p);
    p = cache_policy_new(CACHE_POLICY_FRECENCY, 2, 8, 1);
    CHECK(p != NULL);
    if (!p)
        return;
    cache_policy_resize(p, 2);
    cycle = 0;
    cache_policy_cycle(p, 0);
    cache_policy_guess(p, 0, 0);
    cache_policy_touch(p, 0, 0, true);
    advance(p, &cycle, 1);
    cache_policy_touch(p, 1, 1, false);
    static const int32_t counted[] = {0, 1};
    check_drain(p, counted, 2, "frecency's guess uncounted");
    cache_policy_free(p);
}

/* ---- the replay is the cache ------------------------------------------------------------------- */

/* n_cycles cycles of lookups (each layer once, n_used distinct experts), drawn mostly from a few
 * hot experts per layer that drift every 40 cycles, the rest uniform: frequency and recency both
 * matter, and more than EC_HALVE cycles pass. */
static struct route_trace *skewed_trace(const struct model *m, int n_cycles) {
    const int32_t L = m->hp.n_layer, E = m->hp.n_expert, K = m->hp.n_expert_used;
    struct route_trace *t = route_trace_new(L, E, K, expert_cache_slot_bytes(m));
    uint32_t x = 12345;
    for (int c = 0; t && c < n_cycles; c++)
        for (int32_t l = 0; l < L; l++) {
            int32_t ids[64], n = 0;
            while (n < K) {
                x = x * 1664525u + 1013904223u;
                uint32_t r = x >> 8;
                int32_t e = r % 4 < 3 ? (int32_t)((r / 4 % 5 + (uint32_t)(c / 40) + (uint32_t)l) % (uint32_t)E)
                                      : (int32_t)(r / 4 % (uint32_t)E);
                bool dup = false;
                for (int32_t i = 0; i < n; i++)
                    dup |= ids[i] == e;
                if (!dup)
                    ids[n++] = e;
            }
            CHECK(route_trace_add(t, l, ids, NULL, n, true) == 0);
        }
    return t;
}

/* Feeds t's lookups to a real cache of n_slots and to the replay of policy p at the same bytes:
 * the same hits and misses, lookup for lookup. */
static void check_replay_is_cache(const char *args, int n_slots, enum route_policy p,
                                  const char *eviction) {
    char path[1024], err[256] = "";
    if (test_make_model(path, sizeof(path), "policy.gguf", args) < 0)
        return;
    struct model *m = model_open(path, true, err, sizeof(err));
    CHECK_MSG(m != NULL, "%s", err);
    if (!m)
        return;
    struct expert_cache_options o = {.io = EXPERT_IO_URING, .io_depth = 4};
    const size_t slot = expert_cache_slot_bytes(m);
    struct expert_cache *c = expert_cache_new(m, slot * (size_t)n_slots, &o, err, sizeof(err));
    struct route_trace *t = skewed_trace(m, 150);
    CHECK_MSG(c != NULL && t != NULL, "%s", err);
    if (!c || !t)
        goto out;
    struct expert_cache_stats st;
    expert_cache_get_stats(c, &st);
    CHECK_STR(st.eviction, eviction);
    for (size_t k = 0; k < t->n_look; k++) {
        const struct route_lookup *l = &t->look[k];
        CHECK_EQ_INT(expert_cache_begin(c, l->layer, t->ids + l->off, l->n), 0);
        for (int32_t i = 0; i < l->n; i++) {
            const uint8_t *mats[3];
            bool ready = false;
            CHECK_EQ_INT(expert_cache_get(c, i, mats, true, &ready), 0);
            CHECK(ready);
        }
    }
    struct route_result r;
    CHECK_EQ_INT(route_replay(t, p, (uint64_t)slot * (uint64_t)n_slots, 0, &r), 0);
    expert_cache_get_stats(c, &st);
    fprintf(stderr, "  %d slots, %s: cache %llu hits, replay %llu\n", n_slots, eviction,
            (unsigned long long)st.hits, (unsigned long long)r.hits);
    CHECK(st.hits == r.hits && st.misses == r.misses);
    CHECK(st.hits > 0 && st.misses > (uint64_t)n_slots);
    struct route_result lru;
    CHECK_EQ_INT(route_replay(t, ROUTE_LRU, (uint64_t)slot * (uint64_t)n_slots, 0, &lru), 0);
    CHECK_MSG(lru.hits != r.hits, "the sequence does not tell %s from lru", eviction);
out:
    route_trace_free(t);
    expert_cache_free(c);
    model_free(m);
}

static void test_replay_is_cache(void) {
    /* 4 layers x 4 experts a token = 16: 20 slots is frecency's, 12 (below a token) LIRS's */
    check_replay_is_cache("--preset tiny --types q4_k_m --seed 17", 20, ROUTE_FRECENCY, "frecency");
    check_replay_is_cache("--preset tiny --types q4_k_m --seed 17", 12, ROUTE_LIRS, "lirs");
}

/* Three levels (route_replay_vram): VRAM slots learn a hot set and serve it from the step after
 * its misses (the GPU's own placement code), the CPU's trace holds exactly what they missed, and
 * no slots or all slots leave the CPU everything or nothing. */
static void test_three_levels(void) {
    enum { L = 2, E = 8, K = 2, T = 5 };
    struct route_trace *t = route_trace_new(L, E, K, 4096);
    CHECK(t != NULL);
    if (!t)
        return;
    const int32_t hot[L][K] = {{5, 6}, {7, 3}};
    for (int tok = 0; tok < T; tok++)
        for (int l = 0; l < L; l++)
            CHECK(route_trace_add(t, l, hot[l], NULL, K, true) == 0);
    struct route_trace *cpu = NULL;
    struct route_vram v;
    /* 2 slots a layer hold experts 0 and 1 at first: the first token misses its 4 pairs, and the
     * 4 experts move into slots before the second */
    CHECK(route_replay_vram(t, 2, &cpu, &v) == 0 && cpu != NULL);
    CHECK_MSG(v.pairs_gpu == (uint64_t)L * K * (T - 1) && v.pairs_cpu == (uint64_t)L * K &&
                  v.promoted_bytes == (uint64_t)L * K * 4096,
              "gpu %llu cpu %llu promoted %llu", (unsigned long long)v.pairs_gpu,
              (unsigned long long)v.pairs_cpu, (unsigned long long)v.promoted_bytes);
    CHECK(cpu && cpu->n_look == (size_t)L * T && cpu->look[0].n == K && cpu->look[L].n == 0 &&
          cpu->n_decode_tokens == T);
    route_trace_free(cpu);
    cpu = NULL;
    /* no slots: the CPU's trace is the trace, and replays as it does */
    struct route_result a, b;
    CHECK(route_replay_vram(t, 0, &cpu, &v) == 0 && v.pairs_gpu == 0 &&
          v.pairs_cpu == (uint64_t)L * K * T && v.promoted_bytes == 0);
    CHECK(cpu && route_replay(cpu, ROUTE_FRECENCY, 8 * 4096, 0, &a) == 0 &&
          route_replay(t, ROUTE_FRECENCY, 8 * 4096, 0, &b) == 0 && a.hits == b.hits &&
          a.misses == b.misses);
    route_trace_free(cpu);
    cpu = NULL;
    /* every expert in a slot: nothing for the CPU */
    CHECK(route_replay_vram(t, E, &cpu, &v) == 0 && v.pairs_cpu == 0 &&
          v.pairs_gpu == (uint64_t)L * K * T && v.promoted_bytes == 0);
    for (size_t k = 0; cpu && k < cpu->n_look; k++)
        CHECK(cpu->look[k].n == 0);
    route_trace_free(cpu);
    route_trace_free(t);
    /* the Qwen trace: every decode pair lands on one side */
    struct route_trace *q = fixture_trace("qwen.route.csv");
    if (!q)
        return;
    CHECK(route_replay_vram(q, 54, &cpu, &v) == 0);
    CHECK(v.pairs_gpu + v.pairs_cpu == (uint64_t)q->n_decode_tokens * 48 * 6 && v.pairs_gpu > 0 &&
          v.pairs_cpu > 0);
    route_trace_free(cpu);
    route_trace_free(q);
}

static const struct test_case cases[] = {
    {"published_rates", test_published_rates},
    {"belady_bounds", test_belady_bounds},
    {"malformed", test_malformed},
    {"write_read", test_write_read},
    {"lirs_by_hand", test_lirs_by_hand},
    {"frecency_by_hand", test_frecency_by_hand},
    {"replay_is_cache", test_replay_is_cache},
    {"three_levels", test_three_levels},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
