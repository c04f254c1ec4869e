/* cache_policy.c - frecency and LIRS over doubly linked lists of entries, oldest first.
 * Invariants: an entry is on at most one list (one on none links to itself); the waiting list
 * holds dropped entries at its front, then (LIRS) the HIR queue in order; frecency's entry of a
 * looked-up key is on the list of its key's count, each ordered by (stamp, tick); LIRS's main list
 * holds the n_lir LIR entries by last lookup, n_lir <= lir_cap after a resize. Bookkeeping is O(1)
 * per lookup but for the victim's walk past entries that may not go, and the halving (O(entries +
 * keys) every CP_HALVE cycles). */
#include "cache_policy.h"

#include <stdlib.h>

/* Frecency (tools/bench_policy.c replays it on real models' routing): the victim is the entry of
 * the lowest CP_K x count + stamp, counts kept per key up to CP_CMAX and halved every CP_HALVE
 * cycles. One list per count, each ordered by stamp, so the lowest is one of their heads. */
#define CP_CMAX 32
#define CP_K 2
#define CP_HALVE 32
#define CP_HEADS (2 + CP_CMAX + 1)

struct cp_entry {
    int32_t prev, next; /* on one list, or itself */
    int32_t key;        /* of its last lookup or guess */
    bool lir;           /* LIRS: in the LIR set (short reuse distance) */
    int64_t stamp;      /* frecency: cycle of its key's last lookup (or of its guess) */
    uint64_t tick;      /* frecency: tick of the same, to order lookups of one cycle */
};

struct cache_policy {
    enum cache_policy_kind kind;
    int32_t n_entries, n_keys, k_used;
    struct cp_entry *e; /* [n_entries + CP_HEADS]: the entries, then the heads of the lists */
    uint64_t tick;      /* bumped per key looked up */
    uint64_t *klast;    /* [n_keys] tick of the key's last lookup, 0: never */
    uint8_t *count;     /* [n_keys] frecency: lookups of the key, at most CP_CMAX, halved every
                         * CP_HALVE cycles; kept while the key is not held */
    int64_t cycle;      /* lookups whose layer went down: one per decode token or prefill batch */
    int last_il;        /* layer of the last lookup */
    int32_t n_lir, lir_cap;
};

#define CP_MAIN(p) ((p)->n_entries)               /* LIRS's LIR list */
#define CP_WAIT(p) ((p)->n_entries + 1)           /* the waiting list; LIRS's HIR queue */
#define CP_COUNT(p, n) ((p)->n_entries + 2 + (n)) /* frecency: entries whose key's count is n */

/* ---- the lists ------------------------------------------------------------------------------- */

static void cp_unlink(struct cache_policy *p, int32_t s) {
    struct cp_entry *x = &p->e[s];
    p->e[x->prev].next = x->next;
    p->e[x->next].prev = x->prev;
    x->prev = x->next = s;
}

/* Moves entry s to the list with head h: at its newest end, or its oldest (front: true). */
static void cp_move(struct cache_policy *p, int32_t s, int32_t h, bool front) {
    cp_unlink(p, s);
    int32_t before = front ? p->e[h].next : h; /* insert s before this one */
    p->e[s].next = before;
    p->e[s].prev = p->e[before].prev;
    p->e[p->e[before].prev].next = s;
    p->e[before].prev = s;
}

/* Takes entry s out of the LIR set (it stays where it is until moved). */
static void cp_unset_lir(struct cache_policy *p, int32_t s) {
    if (p->e[s].lir) {
        p->e[s].lir = false;
        p->n_lir--;
    }
}

/* The oldest entry of the list with head h that may go, or -1. */
static int32_t cp_oldest(const struct cache_policy *p, int32_t h, cache_policy_can_go_fn can_go,
                         const void *ctx) {
    for (int32_t s = p->e[h].next; s != h; s = p->e[s].next)
        if (can_go(ctx, s))
            return s;
    return -1;
}

/* ---- creation and size ----------------------------------------------------------------------- */

struct cache_policy *cache_policy_new(enum cache_policy_kind kind, int32_t n_entries,
                                      int32_t n_keys, int32_t k_used) {
    if (n_entries < 1 || n_entries > INT32_MAX - CP_HEADS || n_keys < 1 || k_used < 0 ||
        (kind != CACHE_POLICY_FRECENCY && kind != CACHE_POLICY_LIRS))
        return NULL;
    struct cache_policy *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    *p = (struct cache_policy){.kind = kind, .n_entries = n_entries, .n_keys = n_keys,
                               .k_used = k_used};
    p->e = calloc((size_t)n_entries + CP_HEADS, sizeof(*p->e));
    p->klast = calloc((size_t)n_keys, sizeof(*p->klast));
    p->count = calloc((size_t)n_keys, sizeof(*p->count));
    if (!p->e || !p->klast || !p->count) {
        cache_policy_free(p);
        return NULL;
    }
    for (int32_t s = 0; s < n_entries + CP_HEADS; s++)
        p->e[s] = (struct cp_entry){.prev = s, .next = s, .key = -1};
    return p;
}

void cache_policy_free(struct cache_policy *p) {
    if (!p)
        return;
    free(p->e);
    free(p->klast);
    free(p->count);
    free(p);
}

const char *cache_policy_name(const struct cache_policy *p) {
    return p->kind == CACHE_POLICY_LIRS ? "lirs" : "frecency";
}

void cache_policy_resize(struct cache_policy *p, int32_t n_slots) {
    int32_t hir = n_slots / 20 > p->k_used ? n_slots / 20 : p->k_used;
    if (hir > n_slots / 2) /* a cache of a few tokens' experts: half and half */
        hir = n_slots / 2;
    p->lir_cap = n_slots - (hir > 1 ? hir : 1);
    while (p->n_lir > p->lir_cap) {
        const int32_t s = p->e[CP_MAIN(p)].next;
        cp_unset_lir(p, s);
        cp_move(p, s, CP_WAIT(p), false);
    }
}

/* ---- frecency -------------------------------------------------------------------------------- */

/* Entry s goes to the newest end of the list of count n, stamped now. */
static void cp_frecency_place(struct cache_policy *p, int32_t s, int n) {
    p->e[s].stamp = p->cycle;
    p->e[s].tick = p->tick;
    cp_move(p, s, CP_COUNT(p, n), false);
}

/* The ageing: every key's count halves, and the entries of count n join those of n / 2, the two
 * lists merged so that each stays ordered by (stamp, tick). */
static void cp_frecency_halve(struct cache_policy *p) {
    for (int n = 1; n <= CP_CMAX; n++) { /* list n / 2 has given its own entries to n / 4 by now */
        const int32_t to = CP_COUNT(p, n / 2), from = CP_COUNT(p, n);
        int32_t at = p->e[to].next;
        while (p->e[from].next != from) {
            const int32_t s = p->e[from].next;
            const struct cp_entry *x = &p->e[s];
            while (at != to && (p->e[at].stamp < x->stamp ||
                                (p->e[at].stamp == x->stamp && p->e[at].tick < x->tick)))
                at = p->e[at].next;
            cp_unlink(p, s);
            p->e[s].next = at; /* before at */
            p->e[s].prev = p->e[at].prev;
            p->e[p->e[at].prev].next = s;
            p->e[at].prev = s;
        }
    }
    for (int32_t k = 0; k < p->n_keys; k++)
        p->count[k] /= 2;
}

/* The entry that may go of the lowest CP_K x count + stamp (the older tick on a tie), which heads
 * its count's list; -1 when none. */
static int32_t cp_frecency_victim(const struct cache_policy *p, cache_policy_can_go_fn can_go,
                                  const void *ctx) {
    int32_t best = -1;
    int64_t best_score = 0;
    for (int n = 0; n <= CP_CMAX; n++) {
        int32_t s = cp_oldest(p, CP_COUNT(p, n), can_go, ctx);
        if (s < 0)
            continue;
        int64_t score = (int64_t)n * CP_K + p->e[s].stamp;
        if (best < 0 || score < best_score ||
            (score == best_score && p->e[s].tick < p->e[best].tick)) {
            best = s;
            best_score = score;
        }
    }
    return best;
}

/* ---- lookups --------------------------------------------------------------------------------- */

void cache_policy_cycle(struct cache_policy *p, int il) {
    if (il < p->last_il && ++p->cycle % CP_HALVE == 0 && p->kind == CACHE_POLICY_FRECENCY)
        cp_frecency_halve(p);
    p->last_il = il;
}

/* Frecency: the key's count goes up and s is stamped with this cycle, so an expert looked up often
 * outlives one looked up once, by CP_K cycles per lookup (tools/bench_policy.c on real models'
 * routing: 4-16% fewer bytes per token than LRU from one to five tokens' experts,
 * docs/benchmarks.md). LIRS (Jiang and Zhang, SIGMETRICS 2002), in the form that keeps a
 * last-lookup tick per key instead of the recency stack: a key is "in the stack" when its previous
 * lookup is not older than the least recent LIR entry's; LIR entries stay while HIR ones queue for
 * eviction. A LIR entry just moves up; a key in the stack joins the LIR set and the least recent
 * LIR entry drops to the end of the HIR queue; any other key queues as HIR (the first lookups fill
 * the LIR set). In a cache smaller than one token's lookups LRU evicts each expert just before its
 * reuse; LIRS keeps the experts whose reuse distance is short and lets the rest cycle through the
 * queue (tools/bench_policy.c: 31% fewer misses than LRU at 2 GiB). */
void cache_policy_touch(struct cache_policy *p, int32_t s, int32_t key, bool hit) {
    struct cp_entry *x = &p->e[s];
    const uint64_t prev = p->klast[key];
    p->klast[key] = ++p->tick;
    x->key = key;
    if (p->kind == CACHE_POLICY_FRECENCY) {
        uint8_t *n = &p->count[key];
        *n += *n < CP_CMAX;
        cp_frecency_place(p, s, *n);
        return;
    }
    if (x->lir) {
        cp_move(p, s, CP_MAIN(p), false);
        return;
    }
    const int32_t bottom = p->e[CP_MAIN(p)].next;
    const bool in_stack = prev != 0 && p->n_lir > 0 && prev >= p->klast[p->e[bottom].key];
    const bool filling = !hit && p->n_lir < p->lir_cap;
    if (filling || in_stack) {
        x->lir = true;
        p->n_lir++;
        cp_move(p, s, CP_MAIN(p), false);
        if (!filling) {
            cp_unset_lir(p, bottom);
            cp_move(p, bottom, CP_WAIT(p), false);
        }
        return;
    }
    cp_move(p, s, CP_WAIT(p), false);
}

void cache_policy_guess(struct cache_policy *p, int32_t s, int32_t key) {
    p->e[s].key = key;
    if (p->kind == CACHE_POLICY_FRECENCY) {
        const uint8_t n_looked = p->count[key];
        cp_frecency_place(p, s, n_looked < CP_CMAX ? n_looked + 1 : CP_CMAX);
        return;
    }
    cp_move(p, s, CP_WAIT(p), false);
}

void cache_policy_drop(struct cache_policy *p, int32_t s) {
    cp_unset_lir(p, s);
    cp_move(p, s, CP_WAIT(p), true);
}

int32_t cache_policy_victim(struct cache_policy *p, cache_policy_can_go_fn can_go,
                            const void *ctx) {
    int32_t s = cp_oldest(p, CP_WAIT(p), can_go, ctx);
    if (s < 0)
        s = p->kind == CACHE_POLICY_LIRS ? cp_oldest(p, CP_MAIN(p), can_go, ctx)
                                         : cp_frecency_victim(p, can_go, ctx);
    if (s >= 0)
        cache_policy_remove(p, s);
    return s;
}

void cache_policy_move(struct cache_policy *p, int32_t from, int32_t to) {
    struct cp_entry *x = &p->e[to];
    *x = p->e[from];
    if (x->next == from) { /* on no list */
        x->prev = x->next = to;
    } else {
        p->e[x->prev].next = to;
        p->e[x->next].prev = to;
    }
    p->e[from] = (struct cp_entry){.prev = from, .next = from, .key = -1};
}

void cache_policy_remove(struct cache_policy *p, int32_t s) {
    cp_unset_lir(p, s);
    cp_unlink(p, s);
}
