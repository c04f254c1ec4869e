/* expert_cache.c - slots of (layer, expert) experts read from the model file with direct I/O.
 * Invariants: where[key] is the slot holding or reading key, or -1, and slot.key names it back;
 * a slot is READY only after all three of its reads succeeded, and a failed one goes back to FREE
 * (its key forgotten); slots pinned by the current lookup (pin == epoch) and slots still being read
 * are never chosen as victims; every active slot (index < n_active) is on exactly one list, each
 * ordered oldest first, and the retired ones (see expert_cache_set_bytes) on none. The
 * waiting list holds FREE slots and unused guesses, first to go (with LIRS it is the HIR queue,
 * FREE slots at its front). Frecency: a looked-up slot is on the list of its key's count, ordered
 * by (stamp, tick); LIRS: the main list holds the LIR slots (by last lookup), n_lir of them. */
#include "clock.h"
#include "expert_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "err.h"
#include "fault.h"

#define EC_MAX_LOOKUP 1024 /* experts one lookup may ask for */

enum ec_state { EC_FREE, EC_READING, EC_READY };

struct ec_slot {
    int32_t key;        /* il * n_expert + e, or -1 */
    int8_t state;       /* enum ec_state */
    int8_t reading;     /* reads still in flight */
    bool prefetched;    /* read ahead on a guess and not looked up since */
    int rc;             /* first error of its last reads */
    uint64_t pin;       /* epoch of the lookup that pinned it */
    bool lir;           /* LIRS: in the LIR set (short reuse distance) */
    int64_t stamp;      /* frecency: cycle of its key's last lookup (or of its guess) */
    uint64_t tick;      /* frecency: tick of the same, to order lookups of one cycle */
    int32_t prev, next; /* on one list (see the invariants) */
    const uint8_t *mat[3];
};

struct expert_cache {
    const struct model *m;
    int32_t n_layer, n_expert, n_slots;
    int32_t n_active;  /* slots in use: 0 .. n_active-1; the rest are retired, their pages given
                        * back (expert_cache_set_bytes) */
    size_t slot_bytes;
    uint8_t *mem; /* [n_slots][slot_bytes], touched for the active slots */
    size_t mem_bytes;
    int32_t *where;        /* [n_layer * n_expert] */
    struct ec_slot *slots; /* [n_slots + EC_HEADS]: then the heads of the lists */
    uint64_t epoch;
    int32_t lookup[EC_MAX_LOOKUP]; /* slots of the current lookup's ids */
    int32_t lookup_n;
    int32_t guessed[EC_MAX_LOOKUP]; /* slots the last prefetch filled, for layer guessed_layer */
    int32_t guessed_n, guessed_layer;
    struct expert_io *io;
    /* LIRS in caches smaller than one token's lookups, frecency in the others (see ec_touch) */
    bool lirs;
    int32_t n_lir, lir_cap;
    uint64_t tick;   /* bumped per expert looked up */
    uint64_t *klast; /* [n_layer * n_expert] tick of the key's last lookup, 0: never */
    uint8_t *count;  /* [n_layer * n_expert] frecency: lookups of the key, at most EC_CMAX, halved
                      * every EC_HALVE cycles; kept while the key is not resident */
    int64_t cycle;   /* lookups whose layer went down: one per decode token or prefill batch */
    int32_t last_il; /* layer of the last lookup */
    uint64_t *layer_hits, *layer_misses;
    struct expert_cache_stats stats;
};

static size_t align_up(size_t x, size_t a) {
    return (x + a - 1) & ~(a - 1);
}

int expert_cache_experts_per_layer(const struct model *m) {
    return m->hp.n_expert > 0 ? m->hp.n_expert : 1;
}

int expert_cache_min_slots(const struct model *m) {
    return m->hp.n_expert > 0 ? m->hp.n_expert_used : 1;
}

int expert_cache_n_slots(const struct expert_cache *c) {
    return c->n_active;
}

/* Matrix k (0 gate, 1 up, 2 down) of layer il: the stacked experts, or the dense FFN's. */
static const struct weight *ec_weight(const struct model *m, int il, int k) {
    const struct model_layer *l = &m->layers[il];
    if (m->hp.n_expert > 0)
        return k == 0 ? &l->ffn_gate_exps : k == 1 ? &l->ffn_up_exps : &l->ffn_down_exps;
    return k == 0 ? &l->ffn_gate : k == 1 ? &l->ffn_up : &l->ffn_down;
}

/* A region holds a matrix read as an aligned superset: up to EXPERT_IO_ALIGN - 1 bytes before it
 * and the tail rounded up. */
static size_t ec_region_bytes(size_t mat_bytes) {
    return align_up(mat_bytes + EXPERT_IO_ALIGN, EXPERT_IO_ALIGN);
}

size_t expert_cache_slot_bytes(const struct model *m) {
    size_t best = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        size_t b = 0;
        for (int k = 0; k < 3; k++)
            b += ec_region_bytes(ec_weight(m, il, k)->mat_bytes);
        best = b > best ? b : best;
    }
    return best;
}

/* ---- the lists ------------------------------------------------------------------------------- */

/* Frecency (tools/bench_policy.c replays it on real models' routing): the victim is the slot with
 * the lowest EC_K x count + stamp, counts kept per key up to EC_CMAX and halved every EC_HALVE
 * cycles. One list per count, each ordered by stamp, so the lowest is one of their heads. */
#define EC_CMAX 32
#define EC_K 2
#define EC_HALVE 32
#define EC_MAIN(c) ((c)->n_slots)                  /* LIRS's LIR list */
#define EC_WAIT(c) ((c)->n_slots + 1)              /* the waiting list; LIRS's HIR queue */
#define EC_COUNT(c, n) ((c)->n_slots + 2 + (n))    /* frecency: slots whose key's count is n */
#define EC_HEADS (2 + EC_CMAX + 1)

static void list_unlink(struct expert_cache *c, int32_t s) {
    struct ec_slot *x = &c->slots[s];
    c->slots[x->prev].next = x->next;
    c->slots[x->next].prev = x->prev;
}

/* Moves slot s to the list with head h: at its newest end, or its oldest (front: true). */
static void list_move(struct expert_cache *c, int32_t s, int32_t h, bool front) {
    list_unlink(c, s);
    int32_t before = front ? c->slots[h].next : h; /* insert s before this one */
    c->slots[s].next = before;
    c->slots[s].prev = c->slots[before].prev;
    c->slots[c->slots[before].prev].next = s;
    c->slots[before].prev = s;
}

/* Takes slot s out of the LIR set (it stays where it is until moved). */
static void ec_unset_lir(struct expert_cache *c, int32_t s) {
    if (c->slots[s].lir) {
        c->slots[s].lir = false;
        c->n_lir--;
    }
}

/* ---- creation and size ----------------------------------------------------------------------- */

/* LIRS's LIR set: the active slots but the HIR queue's (5% of them, and at least a decode lookup's
 * misses, so that those never have to evict LIR slots). Slots beyond a smaller cap drop to the end
 * of the HIR queue, the least recent first. */
static void ec_set_lir_cap(struct expert_cache *c) {
    const int32_t used = c->m->hp.n_expert_used;
    int32_t hir = c->n_active / 20 > used ? c->n_active / 20 : used;
    if (hir > c->n_active / 2) /* a cache of a few tokens' experts: half and half */
        hir = c->n_active / 2;
    c->lir_cap = c->n_active - (hir > 1 ? hir : 1);
    while (c->n_lir > c->lir_cap) {
        const int32_t s = c->slots[EC_MAIN(c)].next;
        ec_unset_lir(c, s);
        list_move(c, s, EC_WAIT(c), false);
    }
}

/* Slot s holds nothing and is on no list (retired, or about to be placed). */
static void ec_clear(struct expert_cache *c, int32_t s) {
    c->slots[s] = (struct ec_slot){.key = -1, .prev = s, .next = s};
}

/* Slot s joins the active ones: its pages touched (see expert_cache_new), FREE at the front of the
 * waiting list. */
static void ec_activate(struct expert_cache *c, int32_t s) {
    memset(c->mem + (size_t)s * c->slot_bytes, 0, c->slot_bytes);
    ec_clear(c, s);
    list_move(c, s, EC_WAIT(c), true);
}

struct expert_cache *expert_cache_new(const struct model *m, size_t cache_bytes,
                                      const struct expert_cache_options *opt, char *err,
                                      size_t err_len) {
    const int32_t per_layer = expert_cache_experts_per_layer(m), min = expert_cache_min_slots(m);
    size_t slot = expert_cache_slot_bytes(m);
    size_t n_active = cache_bytes / slot, n_slots = n_active;
    if (n_active < (size_t)min) {
        err_set(err, err_len,
                "expert_cache: %zu MiB hold %zu experts, fewer than one token's %d of a layer: the "
                "cache needs at least %zu MiB",
                cache_bytes >> 20, n_active, min, ((size_t)min * slot + (1u << 20) - 1) >> 20);
        return NULL;
    }
    if (opt && opt->grow_bytes / slot > n_slots)
        n_slots = opt->grow_bytes / slot;
    if (n_slots > (size_t)m->hp.n_layer * (size_t)per_layer)
        n_slots = (size_t)m->hp.n_layer * (size_t)per_layer;
    if (n_active > n_slots)
        n_active = n_slots;
    struct expert_cache *c = calloc(1, sizeof(*c));
    if (!c)
        goto oom;
    c->m = m;
    c->n_layer = m->hp.n_layer;
    c->n_expert = per_layer;
    c->n_slots = (int32_t)n_slots;
    c->n_active = (int32_t)n_active;
    c->slot_bytes = slot;
    c->mem_bytes = n_slots * slot;
    c->mem = fault_hit(FAULT_ALLOC) ? MAP_FAILED
                                    : mmap(NULL, c->mem_bytes, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (c->mem == MAP_FAILED) {
        c->mem = NULL;
        goto oom;
    }
    madvise(c->mem, c->mem_bytes, MADV_HUGEPAGE);
    size_t n_keys = (size_t)c->n_layer * (size_t)c->n_expert;
    c->where = malloc(n_keys * sizeof(*c->where));
    c->slots = calloc(n_slots + EC_HEADS, sizeof(*c->slots));
    c->layer_hits = calloc((size_t)c->n_layer, sizeof(*c->layer_hits));
    c->layer_misses = calloc((size_t)c->n_layer, sizeof(*c->layer_misses));
    c->klast = calloc(n_keys, sizeof(*c->klast));
    c->count = calloc(n_keys, sizeof(*c->count));
    if (!c->where || !c->slots || !c->layer_hits || !c->layer_misses || !c->klast || !c->count)
        goto oom;
    struct expert_cache_options o = {.io = EXPERT_IO_URING, .io_depth = 32};
    if (opt)
        o = *opt;
    /* room for every read one lookup and one prefetch can queue */
    int max_queued = 3 * 2 * (c->n_expert < EC_MAX_LOOKUP ? c->n_expert : EC_MAX_LOOKUP);
    c->io = expert_io_new(m->path, o.io, o.io_depth > 0 ? o.io_depth : 32, max_queued,
                          o.contention, err, err_len);
    if (!c->io) {
        expert_cache_free(c);
        return NULL;
    }
    for (size_t i = 0; i < n_keys; i++)
        c->where[i] = -1;
    const int64_t per_token = (int64_t)c->n_layer * (m->hp.n_expert_used > 0 ? m->hp.n_expert_used : 1);
    c->lirs = m->hp.n_expert > 0 && c->n_active < per_token;
    for (int32_t h = EC_MAIN(c); h < c->n_slots + EC_HEADS; h++)
        c->slots[h].prev = c->slots[h].next = h;
    /* the active slots are touched now, like the KV cache: the budget is held from the start, and
     * the first requests do not pay for page faults (in a VM, often the host's too) in the middle
     * of their reads */
    for (int32_t s = c->n_active - 1; s >= 0; s--)
        ec_activate(c, s);
    for (int32_t s = c->n_active; s < c->n_slots; s++)
        ec_clear(c, s);
    ec_set_lir_cap(c);
    c->epoch = 1;
    c->stats.n_slots = c->n_active;
    c->stats.slot_bytes = slot;
    c->stats.backend = expert_io_backend(c->io);
    c->stats.eviction = c->lirs ? "lirs" : "frecency";
    return c;
oom:
    err_set(err, err_len, "expert_cache: out of memory for %zu slots of %zu bytes", n_slots, slot);
    expert_cache_free(c);
    return NULL;
}

void expert_cache_free(struct expert_cache *c) {
    if (!c)
        return;
    expert_io_free(c->io); /* first: it waits for reads into mem */
    if (c->mem)
        munmap(c->mem, c->mem_bytes);
    free(c->where);
    free(c->slots);
    free(c->layer_hits);
    free(c->layer_misses);
    free(c->klast);
    free(c->count);
    free(c);
}

/* ---- reads ----------------------------------------------------------------------------------- */

/* A read finished: tag = slot * 3 + matrix. The slot is READY after its third success; after a
 * failure it is FREE again (first in line for reuse) and remembers the error. */
static void ec_complete(struct expert_cache *c, uint64_t tag, int rc) {
    int32_t s = (int32_t)(tag / 3);
    struct ec_slot *x = &c->slots[s];
    if (rc < 0 && x->rc == 0)
        x->rc = rc;
    if (--x->reading > 0)
        return;
    if (x->rc == 0) {
        x->state = EC_READY;
        return;
    }
    c->where[x->key] = -1;
    x->key = -1;
    x->state = EC_FREE;
    x->prefetched = false;
    ec_unset_lir(c, s);
    list_move(c, s, EC_WAIT(c), true);
}

/* Waits for one read to finish (or only takes finished ones when !wait). Returns 1 if one did. */
static int ec_reap(struct expert_cache *c, bool wait) {
    uint64_t tag;
    int rc;
    double t0 = wait ? clock_now_s() : 0.0;
    int got = expert_io_reap(c->io, wait, &tag, &rc);
    if (wait)
        c->stats.io_wait_s += clock_now_s() - t0;
    if (got == 1)
        ec_complete(c, tag, rc);
    return got;
}

static void ec_reap_finished(struct expert_cache *c) {
    while (ec_reap(c, false) == 1)
        ;
}

static bool ec_evictable(const struct expert_cache *c, int32_t s) {
    return c->slots[s].pin != c->epoch && c->slots[s].state != EC_READING;
}

/* The oldest evictable slot of the list with head h, or -1. */
static int32_t ec_oldest(const struct expert_cache *c, int32_t h) {
    for (int32_t s = c->slots[h].next; s != h; s = c->slots[s].next)
        if (ec_evictable(c, s))
            return s;
    return -1;
}

/* Frecency's victim: the evictable slot of the lowest EC_K x count + stamp (the older tick on a
 * tie), which heads its count's list; -1 when none. */
static int32_t ec_frecency_victim(const struct expert_cache *c) {
    int32_t best = -1;
    int64_t best_score = 0;
    for (int n = 0; n <= EC_CMAX; n++) {
        int32_t s = ec_oldest(c, EC_COUNT(c, n));
        if (s < 0)
            continue;
        int64_t score = (int64_t)n * EC_K + c->slots[s].stamp;
        if (best < 0 || score < best_score ||
            (score == best_score && c->slots[s].tick < c->slots[best].tick)) {
            best = s;
            best_score = score;
        }
    }
    return best;
}

/* The slot to evict, among those neither pinned by the current lookup nor being read: the front
 * of the waiting list (FREE slots, unused guesses; with LIRS then the HIR slots in queue order),
 * then frecency's victim, or LIRS's least recent LIR slot. With wait, waits for reads when all
 * candidates are busy; without (a prefetch guess never waits), takes only what is free now.
 * Returns -1 when there is none. */
static int32_t ec_victim(struct expert_cache *c, bool wait) {
    for (;;) {
        int32_t s = ec_oldest(c, EC_WAIT(c));
        if (s < 0)
            s = c->lirs ? ec_oldest(c, EC_MAIN(c)) : ec_frecency_victim(c);
        if (s >= 0) {
            ec_unset_lir(c, s);
            return s;
        }
        if (!wait || expert_io_outstanding(c->io) == 0 || ec_reap(c, true) != 1)
            return -1;
    }
}

/* Frecency: slot s goes to the newest end of the list of count n, stamped now. */
static void ec_frecency_place(struct expert_cache *c, int32_t s, int n) {
    c->slots[s].stamp = c->cycle;
    c->slots[s].tick = c->tick;
    list_move(c, s, EC_COUNT(c, n), false);
}

/* Frecency's ageing: every key's count halves, and the slots of count n join those of n / 2, the
 * two lists merged so that each stays ordered by (stamp, tick). Once per EC_HALVE cycles: O(slots
 * + keys), a fraction of a step per lookup. */
static void ec_frecency_halve(struct expert_cache *c) {
    for (int n = 1; n <= EC_CMAX; n++) { /* list n / 2 has given its own slots to n / 4 by now */
        const int32_t to = EC_COUNT(c, n / 2), from = EC_COUNT(c, n);
        int32_t at = c->slots[to].next;
        while (c->slots[from].next != from) {
            const int32_t s = c->slots[from].next;
            const struct ec_slot *x = &c->slots[s];
            while (at != to && (c->slots[at].stamp < x->stamp ||
                                (c->slots[at].stamp == x->stamp && c->slots[at].tick < x->tick)))
                at = c->slots[at].next;
            list_unlink(c, s);
            c->slots[s].next = at; /* before at */
            c->slots[s].prev = c->slots[at].prev;
            c->slots[c->slots[at].prev].next = s;
            c->slots[at].prev = s;
        }
    }
    for (size_t k = 0; k < (size_t)c->n_layer * (size_t)c->n_expert; k++)
        c->count[k] /= 2;
}

/* A lookup of slot s's key (hit: it was resident). Frecency: the key's count goes up and s is
 * stamped with this cycle, so an expert looked up often outlives one looked up once, by EC_K
 * cycles per lookup (tools/bench_policy.c on real models' routing: 4-16% fewer bytes per token
 * than LRU from one to five tokens' experts, docs/benchmarks.md). LIRS (Jiang and
 * Zhang, SIGMETRICS 2002), in the form that keeps a last-lookup tick per key instead of the
 * recency stack: a key is "in the stack" when its previous lookup is not older than the least
 * recent LIR slot's; LIR slots stay resident while HIR ones queue for eviction. A LIR slot just
 * moves up; a key in the stack joins the LIR set and the least recent LIR slot drops to the end of
 * the HIR queue; any other key queues as HIR (the first lookups fill the LIR set). In a cache
 * smaller than one token's lookups LRU evicts each expert just before its reuse; LIRS keeps the
 * experts whose reuse distance is short and lets the rest cycle through the queue
 * (tools/bench_policy.c: 31% fewer misses than LRU at 2 GiB). */
static void ec_touch(struct expert_cache *c, int32_t s, bool hit) {
    struct ec_slot *x = &c->slots[s];
    uint64_t prev = c->klast[x->key];
    c->klast[x->key] = ++c->tick;
    if (!c->lirs) {
        uint8_t *n = &c->count[x->key];
        *n += *n < EC_CMAX;
        ec_frecency_place(c, s, *n);
        return;
    }
    if (x->lir) {
        list_move(c, s, EC_MAIN(c), false);
        return;
    }
    int32_t bottom = c->slots[EC_MAIN(c)].next;
    bool in_stack = prev != 0 && c->n_lir > 0 && prev >= c->klast[c->slots[bottom].key];
    bool filling = !hit && c->n_lir < c->lir_cap;
    if (filling || in_stack) {
        x->lir = true;
        c->n_lir++;
        list_move(c, s, EC_MAIN(c), false);
        if (!filling) {
            ec_unset_lir(c, bottom);
            list_move(c, bottom, EC_WAIT(c), false);
        }
        return;
    }
    list_move(c, s, EC_WAIT(c), false);
}

/* Submits one read, reaping finished ones while the queue is full. */
static int ec_submit(struct expert_cache *c, uint64_t tag, uint8_t *dst, uint64_t off,
                     uint64_t len, uint64_t need, bool urgent) {
    int rc;
    while ((rc = expert_io_submit(c->io, tag, dst, off, len, need, urgent)) == -EAGAIN)
        if (ec_reap(c, true) != 1)
            return -EAGAIN;
    return rc;
}

/* Claims a victim slot for expert e of layer il and submits its three reads. Returns the slot, or
 * -1 when no slot can be had. */
static int32_t ec_load(struct expert_cache *c, int il, int32_t e, bool prefetch) {
    int32_t s = ec_victim(c, !prefetch);
    if (s < 0)
        return -1;
    struct ec_slot *x = &c->slots[s];
    if (x->key >= 0)
        c->where[x->key] = -1;
    const int32_t key = il * c->n_expert + e;
    x->key = key;
    x->state = EC_READING;
    x->reading = 3;
    x->rc = 0;
    x->prefetched = prefetch;
    c->where[key] = s;
    list_move(c, s, EC_WAIT(c), false);
    uint8_t *base = c->mem + (size_t)s * c->slot_bytes;
    size_t region = 0;
    for (int k = 0; k < 3; k++) {
        const struct weight *w = ec_weight(c->m, il, k);
        uint64_t off = w->tensor->data_off + (uint64_t)e * w->mat_bytes;
        uint64_t start = off & ~(uint64_t)(EXPERT_IO_ALIGN - 1);
        uint64_t end = align_up(off + w->mat_bytes, EXPERT_IO_ALIGN);
        x->mat[k] = base + region + (off - start);
        c->stats.bytes_read += end - start;
        int rc = ec_submit(c, (uint64_t)s * 3 + (uint64_t)k, base + region, start, end - start,
                           off + w->mat_bytes - start, !prefetch);
        if (rc < 0) /* cannot happen with the queue sized for a lookup and a prefetch */
            ec_complete(c, (uint64_t)s * 3 + (uint64_t)k, rc);
        region += ec_region_bytes(w->mat_bytes);
    }
    return s;
}

/* ---- lookups --------------------------------------------------------------------------------- */

int expert_cache_begin(struct expert_cache *c, int il, const int32_t *ids, int n) {
    if (il < 0 || il >= c->n_layer || n < 0 || n > EC_MAX_LOOKUP || n > c->n_active)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->n_expert)
            return -EINVAL;
    if (il < c->last_il && ++c->cycle % EC_HALVE == 0 && !c->lirs)
        ec_frecency_halve(c);
    c->last_il = il;
    c->epoch++;
    c->lookup_n = 0;
    ec_reap_finished(c);
    for (int i = 0; i < n; i++) { /* the lookup's residents first: its misses must not evict them */
        int32_t s = c->where[il * c->n_expert + ids[i]];
        if (s >= 0)
            c->slots[s].pin = c->epoch;
    }
    for (int i = 0; i < n; i++) {
        int32_t s = c->where[il * c->n_expert + ids[i]];
        const bool hit = s >= 0;
        if (hit) {
            struct ec_slot *x = &c->slots[s];
            c->stats.hits++;
            c->layer_hits[il]++;
            if (x->prefetched) {
                x->prefetched = false;
                c->stats.prefetch_used++;
            }
        } else {
            s = ec_load(c, il, ids[i], false);
            if (s < 0)
                return -ENOSPC; /* n <= n_active and pins are this lookup's: cannot happen */
            c->stats.misses++;
            c->layer_misses[il]++;
        }
        ec_touch(c, s, hit);
        c->slots[s].pin = c->epoch;
        c->lookup[c->lookup_n++] = s;
    }
    /* guesses for this layer that it did not want are the first to go: a wrong guess must not
     * push out experts that were looked up */
    for (int32_t j = 0; il == c->guessed_layer && j < c->guessed_n; j++) {
        struct ec_slot *x = &c->slots[c->guessed[j]];
        if (x->prefetched && x->key / c->n_expert == il) {
            x->prefetched = false;
            list_move(c, c->guessed[j], EC_WAIT(c), true);
        }
    }
    c->guessed_n = 0;
    return 0;
}

int expert_cache_get(struct expert_cache *c, int i, const uint8_t *mats[3], bool wait) {
    if (i < 0 || i >= c->lookup_n)
        return -EINVAL;
    struct ec_slot *x = &c->slots[c->lookup[i]];
    if (x->state == EC_READING)
        ec_reap_finished(c);
    while (x->state == EC_READING && wait)
        if (ec_reap(c, true) != 1)
            return -EIO;
    if (x->state == EC_READING)
        return 0;
    if (x->state != EC_READY)
        return x->rc < 0 ? x->rc : -EIO;
    for (int k = 0; k < 3; k++)
        mats[k] = x->mat[k];
    return 1;
}

int expert_cache_wait(struct expert_cache *c) {
    return expert_io_outstanding(c->io) > 0 && ec_reap(c, true) == 1;
}

int expert_cache_prefetch(struct expert_cache *c, int il, const int32_t *ids, int n) {
    if (il < 0 || il >= c->n_layer)
        return 0;
    int started = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->n_expert || c->where[il * c->n_expert + ids[i]] >= 0)
            continue;
        int32_t s = ec_load(c, il, ids[i], true);
        if (s < 0)
            break;
        if (!c->lirs) { /* placed as a lookup now would be, uncounted until it is looked up */
            const uint8_t n_looked = c->count[il * c->n_expert + ids[i]];
            ec_frecency_place(c, s, n_looked < EC_CMAX ? n_looked + 1 : EC_CMAX);
        }
        if (c->guessed_layer != il)
            c->guessed_n = 0;
        c->guessed_layer = il;
        if (c->guessed_n < EC_MAX_LOOKUP)
            c->guessed[c->guessed_n++] = s;
        started++;
    }
    c->stats.prefetch_issued += (uint64_t)started;
    return started;
}

/* ---- resizing -------------------------------------------------------------------------------- */

/* The last active slot t is retired: the policy's victim gives up its expert and takes over t's
 * (its bytes, key, state and place on its list), so that the active slots stay 0 .. n_active-1 and
 * the cache loses what the policy would have evicted next. t's pages go back to the system. */
static void ec_retire_last(struct expert_cache *c) {
    const int32_t t = c->n_active - 1;
    while (c->slots[t].state == EC_READING) /* a guess still being read */
        if (ec_reap(c, true) != 1)
            break;
    const int32_t v = ec_victim(c, true);
    if (v >= 0 && v != t) {
        struct ec_slot *x = &c->slots[v];
        if (x->key >= 0)
            c->where[x->key] = -1;
        list_unlink(c, v);
        *x = c->slots[t];
        c->slots[x->prev].next = v;
        c->slots[x->next].prev = v;
        if (x->key >= 0)
            c->where[x->key] = v;
        uint8_t *from = c->mem + (size_t)t * c->slot_bytes, *to = c->mem + (size_t)v * c->slot_bytes;
        if (x->state == EC_READY)
            memcpy(to, from, c->slot_bytes);
        for (int k = 0; k < 3; k++)
            x->mat[k] = x->mat[k] ? to + (x->mat[k] - from) : NULL;
    } else {
        if (c->slots[t].key >= 0)
            c->where[c->slots[t].key] = -1;
        ec_unset_lir(c, t);
        list_unlink(c, t);
    }
    ec_clear(c, t);
    madvise(c->mem + (size_t)t * c->slot_bytes, c->slot_bytes, MADV_DONTNEED);
    c->n_active--;
}

int expert_cache_set_bytes(struct expert_cache *c, size_t bytes) {
    const int32_t min = expert_cache_min_slots(c->m);
    size_t want = bytes / c->slot_bytes;
    want = want < (size_t)min ? (size_t)min : want > (size_t)c->n_slots ? (size_t)c->n_slots : want;
    if ((int32_t)want == c->n_active)
        return c->n_active;
    c->epoch++; /* between lookups: the last one's pins and guesses are let go */
    c->lookup_n = 0;
    c->guessed_n = 0;
    while (c->n_active > (int32_t)want)
        ec_retire_last(c);
    while (c->n_active < (int32_t)want)
        ec_activate(c, c->n_active++);
    ec_set_lir_cap(c);
    c->stats.n_slots = c->n_active;
    return c->n_active;
}

bool expert_cache_resident(const struct expert_cache *c, int il, int32_t e) {
    return il >= 0 && il < c->n_layer && e >= 0 && e < c->n_expert &&
           c->where[il * c->n_expert + e] >= 0;
}

void expert_cache_get_stats(const struct expert_cache *c, struct expert_cache_stats *out) {
    *out = c->stats;
    out->io_busy_s = expert_io_busy_s(c->io);
}

void expert_cache_layer_stats(const struct expert_cache *c, int il, uint64_t *hits,
                              uint64_t *misses) {
    bool ok = il >= 0 && il < c->n_layer;
    *hits = ok ? c->layer_hits[il] : 0;
    *misses = ok ? c->layer_misses[il] : 0;
}
