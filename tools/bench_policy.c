/* bench_policy.c - which experts to keep: records the routing of a real run, then replays it
 * against eviction policies at several cache sizes and counts the misses each would have read.
 * Replaying one trace makes the comparison exact and free of the host's noise (misses are what the
 * disk pays for; their cost in time is misses x expert bytes / bandwidth).
 *
 *     build/bench-policy MODEL [--prompt N] [--gen N] [--threads N] [--slots N]...
 *
 * The run: N pseudo-random prompt ids (as sniperd --bench-prompt), then --gen greedy tokens, experts
 * on disk through a 4 GiB cache. Policies (each keeps the current lookup's experts pinned):
 *   lru        the least recently used slot (what expert_cache did first)
 *   layer-lru  the slot whose layer comes back last (layers run in a cycle: the layer just used,
 *              then the one before ...), least recently used within the layer
 *   lfu        the fewest lookups (halved every 8 tokens' worth of lookups), then least recent
 *   quota      each layer keeps at most slots / n_layer; a layer at its quota evicts its own least
 *              recently used, otherwise the least recently used slot of a layer over quota
 *   lru-guard  lru while its victim was last used before this layer's previous lookup (a cold
 *              slot); when even the least recent slot was used within the last cycle of layers,
 *              the cache is smaller than a token's experts and lru would throw out each one just
 *              before its reuse: then layer-lru
 *   mru        the most recently used slot (not pinned)
 *   cycle      lru-guard with mru in place of layer-lru: a slot unused for a whole cycle of layers
 *              goes first (least recent first); when there is none, the most recent one, so that
 *              a stable part of the cache survives the cycle instead of all of it churning
 *   lirs       LIRS (Jiang and Zhang, 2002) with a last-lookup tick per key in place of its recency
 *              stack: keys whose reuse distance beats the least recent LIR key's join the LIR set
 *              (kept), the rest queue as HIR (evicted first); 5% of the slots, and at least one
 *              decode lookup's worth, for the queue; expert_cache uses it below one token's lookups
 *   belady     the slot whose next lookup is farthest away (it knows the future: no cache can
 *              miss less; the bound the others are measured against) */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "expert_cache.h"
#include "model.h"
#include "ops.h"
#include "rng.h"

enum policy {
    POL_LRU, POL_LAYER_LRU, POL_LFU, POL_QUOTA, POL_GUARD, POL_MRU, POL_CYCLE, POL_LIRS, POL_BELADY,
    POL_COUNT
};
static const char *const policy_names[POL_COUNT] = {"lru", "layer-lru", "lfu", "quota",
                                                    "lru-guard", "mru", "cycle", "lirs", "belady"};

/* One lookup: layer il wanted ids[0..n) (in the shared id pool at off). */
struct lookup {
    int32_t il, n;
    size_t off;
    bool decode;
};

struct trace {
    struct lookup *look;
    size_t n_look, cap_look;
    int32_t *ids;
    size_t n_ids, cap_ids;
    bool decode; /* phase of the lookups being recorded */
    bool oom;
};

static void trace_route(void *ctx, int il, const int32_t *ids, int32_t n) {
    struct trace *t = ctx;
    if (t->n_look == t->cap_look) {
        size_t cap = t->cap_look ? 2 * t->cap_look : 1024;
        struct lookup *l = realloc(t->look, cap * sizeof(*l));
        if (!l) {
            t->oom = true;
            return;
        }
        t->look = l;
        t->cap_look = cap;
    }
    while (t->n_ids + (size_t)n > t->cap_ids) {
        size_t cap = t->cap_ids ? 2 * t->cap_ids : 65536;
        int32_t *p = realloc(t->ids, cap * sizeof(*p));
        if (!p) {
            t->oom = true;
            return;
        }
        t->ids = p;
        t->cap_ids = cap;
    }
    t->look[t->n_look++] = (struct lookup){il, n, t->n_ids, t->decode};
    memcpy(t->ids + t->n_ids, ids, (size_t)n * sizeof(*ids));
    t->n_ids += (size_t)n;
}

/* ---- the simulated cache --------------------------------------------------------------------- */

struct sim {
    enum policy pol;
    int32_t n_slots, n_layer, n_expert, quota;
    int32_t *key;      /* [n_slots] il * n_expert + e, or -1 */
    uint64_t *used;    /* [n_slots] tick of last lookup */
    uint64_t *pin;     /* [n_slots] lookup that pinned it */
    uint32_t *freq;    /* [n_slots] lookups (lfu) */
    int32_t *where;    /* [n_layer * n_expert] slot or -1 */
    int32_t *per_layer;/* [n_layer] slots held */
    uint64_t *layer_tick; /* [n_layer] tick when the layer's previous lookup began (lru-guard) */
    uint64_t *next_use;   /* [n_slots] access index of the slot's key's next lookup (belady) */
    const uint64_t *next_of; /* [accesses] next access index of the same key, or UINT64_MAX */
    uint64_t access;      /* index of the access being served */
    uint64_t cycle_start; /* that tick for the lookup running now */
    uint64_t tick, lookups;
    /* lirs: per key, not per slot (a key keeps its history while not resident) */
    uint64_t *klast;  /* [keys] tick of the key's last lookup, 0: never */
    uint64_t *kq;     /* [keys] when a resident HIR key last entered the HIR queue */
    bool *klir;       /* [keys] in the LIR set */
    int32_t n_lir, lir_cap;
};

/* Cycle distance from layer il (now) to layer l's next lookup: il itself comes back last. */
static int32_t next_use(const struct sim *s, int32_t l, int32_t il) {
    return l > il ? l - il : s->n_layer - il + l;
}

/* True when slot a is a better victim than slot b for a miss of layer il. */
static bool better_victim(const struct sim *s, int32_t a, int32_t b, int32_t il) {
    if (b < 0)
        return true;
    if (s->key[a] < 0 || s->key[b] < 0)
        return s->key[a] < 0 && s->key[b] >= 0;
    int32_t la = s->key[a] / s->n_expert, lb = s->key[b] / s->n_expert;
    switch (s->pol) {
    case POL_LAYER_LRU:
        if (la != lb)
            return next_use(s, la, il) > next_use(s, lb, il);
        break;
    case POL_LFU:
        if (s->freq[a] != s->freq[b])
            return s->freq[a] < s->freq[b];
        break;
    case POL_QUOTA: {
        /* own layer at quota first, then layers over quota, then anyone */
        bool own = s->per_layer[il] >= s->quota;
        int ra = own && la == il ? 0 : s->per_layer[la] > s->quota ? 1 : 2;
        int rb = own && lb == il ? 0 : s->per_layer[lb] > s->quota ? 1 : 2;
        if (ra != rb)
            return ra < rb;
        break;
    }
    case POL_MRU:
        return s->used[a] > s->used[b];
    case POL_BELADY:
        if (s->next_use[a] != s->next_use[b])
            return s->next_use[a] > s->next_use[b];
        break;
    default:
        break;
    }
    return s->used[a] < s->used[b];
}

/* The tick of the LIR key looked up longest ago: the bottom of LIRS's stack S. A key is in S (its
 * reuse distance is known to be short enough) when its last lookup is not older. */
static uint64_t lirs_bottom(const struct sim *s) {
    uint64_t b = UINT64_MAX;
    for (int32_t k = 0; k < s->n_layer * s->n_expert; k++)
        if (s->klir[k] && s->klast[k] < b)
            b = s->klast[k];
    return b;
}

/* Demotes the LIR key at the bottom of S (it stays resident, at the end of the HIR queue). */
static void lirs_demote_bottom(struct sim *s, int32_t except) {
    int32_t best = -1;
    for (int32_t k = 0; k < s->n_layer * s->n_expert; k++)
        if (s->klir[k] && k != except && (best < 0 || s->klast[k] < s->klast[best]))
            best = k;
    if (best >= 0) {
        s->klir[best] = false;
        s->kq[best] = s->tick;
        s->n_lir--;
    }
}

/* LIRS bookkeeping for a lookup of key (before its klast is updated); hit: it was resident. */
static void lirs_access(struct sim *s, int32_t key, bool hit) {
    if (s->klir[key])
        return;
    bool in_stack = s->klast[key] != 0 && s->klast[key] >= lirs_bottom(s);
    if (!hit && s->n_lir < s->lir_cap) { /* warming up: the first keys are LIR */
        s->klir[key] = true;
        s->n_lir++;
        return;
    }
    if (in_stack) { /* its reuse distance beat the bottom LIR's: swap them */
        s->klir[key] = true;
        s->n_lir++;
        lirs_demote_bottom(s, key);
        return;
    }
    s->kq[key] = s->tick + 1;
}

/* LIRS victim: the front of the HIR queue (resident HIR keys), else the bottom LIR key. */
static int32_t lirs_victim(struct sim *s, uint64_t epoch) {
    int32_t best = -1, lir = -1;
    for (int32_t i = 0; i < s->n_slots; i++) {
        if (s->pin[i] == epoch)
            continue;
        if (s->key[i] < 0)
            return i;
        int32_t k = s->key[i];
        if (!s->klir[k] && (best < 0 || s->kq[k] < s->kq[s->key[best]]))
            best = i;
        if (s->klir[k] && (lir < 0 || s->klast[k] < s->klast[s->key[lir]]))
            lir = i;
    }
    if (best < 0 && lir >= 0) {
        s->klir[s->key[lir]] = false;
        s->n_lir--;
        best = lir;
    }
    return best;
}

static int32_t sim_victim(struct sim *s, int32_t il, uint64_t epoch) {
    int32_t best = -1;
    if (s->pol == POL_LIRS)
        return lirs_victim(s, epoch);
    if (s->pol == POL_GUARD || s->pol == POL_CYCLE) {
        enum policy pol = s->pol;
        s->pol = POL_LRU;
        int32_t lru = sim_victim(s, il, epoch);
        s->pol = pol == POL_GUARD ? POL_LAYER_LRU : POL_MRU;
        if (lru < 0 || s->key[lru] < 0 || s->used[lru] < s->cycle_start)
            best = lru;
        else
            best = sim_victim(s, il, epoch);
        s->pol = pol;
        return best;
    }
    for (int32_t i = 0; i < s->n_slots; i++)
        if (s->pin[i] != epoch && better_victim(s, i, best, il))
            best = i;
    return best;
}

/* Replays the trace; returns misses of the prefill and of the decode lookups. */
static int sim_run(const struct trace *t, enum policy pol, int32_t n_slots, int32_t n_layer,
                   int32_t n_expert, int32_t n_used, uint64_t miss[2]) {
    struct sim s = {.pol = pol, .n_slots = n_slots, .n_layer = n_layer, .n_expert = n_expert};
    s.quota = n_slots / n_layer > 0 ? n_slots / n_layer : 1;
    s.key = malloc(sizeof(*s.key) * (size_t)n_slots);
    s.used = calloc((size_t)n_slots, sizeof(*s.used));
    s.pin = calloc((size_t)n_slots, sizeof(*s.pin));
    s.freq = calloc((size_t)n_slots, sizeof(*s.freq));
    s.where = malloc(sizeof(*s.where) * (size_t)n_layer * (size_t)n_expert);
    s.per_layer = calloc((size_t)n_layer, sizeof(*s.per_layer));
    s.layer_tick = calloc((size_t)n_layer, sizeof(*s.layer_tick));
    s.next_use = calloc((size_t)n_slots, sizeof(*s.next_use));
    const size_t n_keys = (size_t)n_layer * (size_t)n_expert;
    s.klast = calloc(n_keys, sizeof(*s.klast));
    s.kq = calloc(n_keys, sizeof(*s.kq));
    s.klir = calloc(n_keys, sizeof(*s.klir));
    const int32_t hir = n_slots / 20 > n_used ? n_slots / 20 : n_used; /* as expert_cache.c */
    s.lir_cap = n_slots - (hir > 1 ? hir : 1);
    uint64_t *next_of = malloc(sizeof(*next_of) * (t->n_ids ? t->n_ids : 1));
    uint64_t *last = malloc(sizeof(*last) * (size_t)n_layer * (size_t)n_expert);
    s.next_of = next_of;
    int rc = -ENOMEM;
    if (!s.key || !s.used || !s.pin || !s.freq || !s.where || !s.per_layer || !s.layer_tick ||
        !s.next_use || !next_of || !last || !s.klast || !s.kq || !s.klir)
        goto out;
    for (int32_t i = 0; i < n_layer * n_expert; i++)
        last[i] = UINT64_MAX;
    for (size_t k = t->n_look; k-- > 0;) { /* the accesses in order are the trace's ids in order */
        const struct lookup *l = &t->look[k];
        for (int32_t j = l->n; j-- > 0;) {
            size_t a = l->off + (size_t)j;
            int32_t key = l->il * n_expert + t->ids[a];
            next_of[a] = last[key];
            last[key] = a;
        }
    }
    for (int32_t i = 0; i < n_slots; i++)
        s.key[i] = -1;
    for (int32_t i = 0; i < n_layer * n_expert; i++)
        s.where[i] = -1;
    miss[0] = miss[1] = 0;
    const uint64_t halve_every = (uint64_t)8 * (uint64_t)n_layer; /* about 8 decode tokens */
    for (size_t k = 0; k < t->n_look; k++) {
        const struct lookup *l = &t->look[k];
        const uint64_t epoch = k + 1;
        s.cycle_start = s.layer_tick[l->il];
        s.layer_tick[l->il] = s.tick;
        if (++s.lookups % halve_every == 0)
            for (int32_t i = 0; i < n_slots; i++)
                s.freq[i] >>= 1;
        for (int32_t j = 0; j < l->n; j++) {
            s.access = l->off + (size_t)j;
            int32_t key = l->il * n_expert + t->ids[s.access];
            int32_t slot = s.where[key];
            if (pol == POL_LIRS && slot >= 0)
                lirs_access(&s, key, true);
            if (slot < 0) {
                slot = sim_victim(&s, l->il, epoch);
                if (slot < 0) {
                    rc = -ENOSPC;
                    goto out;
                }
                if (s.key[slot] >= 0) {
                    s.where[s.key[slot]] = -1;
                    s.per_layer[s.key[slot] / n_expert]--;
                }
                s.key[slot] = key;
                s.where[key] = slot;
                s.freq[slot] = 0;
                s.per_layer[l->il]++;
                miss[l->decode]++;
                if (pol == POL_LIRS)
                    lirs_access(&s, key, false);
            }
            s.used[slot] = ++s.tick;
            s.klast[key] = s.tick;
            s.next_use[slot] = s.next_of[s.access];
            s.pin[slot] = epoch;
            s.freq[slot]++;
        }
    }
    rc = 0;
out:
    free(s.key);
    free(s.used);
    free(s.pin);
    free(s.freq);
    free(s.where);
    free(s.per_layer);
    free(s.layer_tick);
    free(s.next_use);
    free(s.klast);
    free(s.kq);
    free(s.klir);
    free(next_of);
    free(last);
    return rc;
}

/* ---- the run --------------------------------------------------------------------------------- */

static int record(const char *path, int32_t n_prompt, int32_t n_gen, int n_threads,
                  struct model **out_m, struct trace *t) {
    char err[512];
    struct model *m = model_open(path, true, err, sizeof(err));
    if (!m) {
        fprintf(stderr, "bench-policy: %s\n", err);
        return -1;
    }
    *out_m = m;
    if (m->hp.n_expert == 0) {
        fprintf(stderr, "bench-policy: %s is dense: no routing to record\n", path);
        return -1;
    }
    struct engine_params ep = engine_params_default();
    ep.n_threads = n_threads;
    ep.n_ctx = n_prompt + n_gen + 1;
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    struct expert_cache *c = e ? expert_cache_new(m, (size_t)4 << 30, NULL, err, sizeof(err)) : NULL;
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_prompt > 0 ? n_prompt : 1));
    int rc = -1;
    if (!e || !c || !logits || !ids) {
        fprintf(stderr, "bench-policy: %s\n", e && c ? "out of memory" : err);
        goto out;
    }
    engine_set_experts(e, c);
    engine_set_route_observer(e, trace_route, t);
    rng_bench_ids(ids, n_prompt, m->hp.n_vocab); /* the ids sniperd --bench-prompt uses */
    if ((rc = engine_eval(e, 0, ids, n_prompt, logits, false)) < 0)
        goto out;
    t->decode = true;
    for (int32_t g = 0; g < n_gen; g++) {
        int32_t best = ops_argmax(logits, m->hp.n_vocab);
        if ((rc = engine_eval(e, 0, &best, 1, logits, false)) < 0)
            goto out;
    }
    rc = t->oom ? -ENOMEM : 0;
out:
    if (rc < 0 && e && c)
        fprintf(stderr, "bench-policy: the run failed: %s\n", strerror(-rc));
    free(ids);
    free(logits);
    engine_free(e);
    expert_cache_free(c);
    return rc;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int32_t n_prompt = 64, n_gen = 64, slots[16], n_sizes = 0;
    int n_threads = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--prompt") && has)
            n_prompt = atoi(argv[++i]);
        else if (!strcmp(a, "--gen") && has)
            n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && has)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--slots") && has && n_sizes < 16)
            slots[n_sizes++] = atoi(argv[++i]);
        else if (a[0] != '-' && !path)
            path = a;
        else {
            fprintf(stderr, "usage: bench-policy MODEL [--prompt N] [--gen N] [--threads N] "
                            "[--slots N]...\n");
            return 2;
        }
    }
    if (!path || n_prompt < 1 || n_gen < 1) {
        fprintf(stderr, "bench-policy: pass a moe MODEL, --prompt >= 1 and --gen >= 1\n");
        return 2;
    }
    struct model *m = NULL;
    struct trace t = {0};
    int rc = record(path, n_prompt, n_gen, n_threads, &m, &t);
    if (rc == 0) {
        const int32_t L = m->hp.n_layer, E = m->hp.n_expert;
        const double slot_mb = (double)expert_cache_slot_bytes(m) / 1e6;
        if (n_sizes == 0) { /* an eighth, a quarter and half of all experts */
            for (int32_t k = 0; k < 3; k++)
                slots[n_sizes++] = L * E / (8 >> k) > E ? L * E / (8 >> k) : E;
        }
        printf("policy: %s, prompt %d + %d generated, %zu lookups, slot %.2f MB\n", m->name,
               n_prompt, n_gen, t.n_look, slot_mb);
        printf("| slots | %% of experts | policy | prefill misses | decode misses | decode MB/token |\n");
        printf("|---|---|---|---|---|---|\n");
        for (int32_t k = 0; k < n_sizes && rc == 0; k++) {
            if (slots[k] < E || slots[k] > L * E) {
                fprintf(stderr, "bench-policy: --slots %d: want %d..%d\n", slots[k], E, L * E);
                rc = -1;
                break;
            }
            for (int p = 0; p < POL_COUNT; p++) {
                uint64_t miss[2];
                if ((rc = sim_run(&t, (enum policy)p, slots[k], L, E, m->hp.n_expert_used, miss)) < 0) {
                    fprintf(stderr, "bench-policy: replay failed: %s\n", strerror(-rc));
                    break;
                }
                printf("| %d | %.1f | %s | %llu | %llu | %.1f |\n", slots[k],
                       100.0 * slots[k] / (L * E), policy_names[p], (unsigned long long)miss[0],
                       (unsigned long long)miss[1], (double)miss[1] * slot_mb / n_gen);
            }
        }
    }
    free(t.look);
    free(t.ids);
    model_free(m);
    return rc == 0 ? 0 : 1;
}
