/* expert_cache.c - slots of (layer, expert) experts read from the model file with direct I/O.
 * Invariants: where[key] is the slot holding or reading key, or -1, and slot.key names it back;
 * a slot is READY only after all three of its reads succeeded, and a failed one goes back to FREE
 * (its key forgotten); slots pinned by the current lookup (pin == epoch) and slots still being read
 * are never chosen as victims; every active slot (index < n_active) is on one of the policy's lists
 * (cache_policy.c: FREE slots and unused guesses first to go), the retired ones (see
 * expert_cache_set_bytes) on none. */
#include "clock.h"
#include "expert_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cache_policy.h"
#include "err.h"
#include "fault.h"
#include "os.h"

#define EC_MAX_LOOKUP 1024 /* experts one lookup may ask for */

enum ec_state { EC_FREE, EC_READING, EC_READY };

struct ec_slot {
    int32_t key;        /* il * n_expert + e, or -1 */
    int8_t state;       /* enum ec_state */
    int8_t reading;     /* reads still in flight */
    bool prefetched;    /* read ahead on a guess and not looked up since */
    int rc;             /* first error of its last reads */
    uint64_t pin;       /* epoch of the lookup that pinned it */
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
    bool mem_lent; /* mem is a caller's (expert_cache_rehome): neither advised nor given back */
    int32_t *where;        /* [n_layer * n_expert] */
    struct ec_slot *slots; /* [n_slots] */
    uint64_t epoch;
    int32_t lookup[EC_MAX_LOOKUP]; /* slots of the current lookup's ids */
    int32_t lookup_n;
    int32_t guessed[EC_MAX_LOOKUP]; /* slots the last prefetch filled, for layer guessed_layer */
    int32_t guessed_n, guessed_layer;
    struct expert_io *io;
    struct cache_policy *policy; /* its entries are the slots: LIRS in caches smaller than one
                                  * token's lookups, frecency in the others */
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

/* Matrix k (0 gate, 1 up, 2 down) of layer il: the stacked experts, or the dense FFN's. Where gate
 * and up are one fused tensor (gemma4's ffn_gate_up_exps) matrix 0 is an expert's whole fused
 * slice, read as one, and matrix 1 NULL: the up half is inside it (ec_load). */
static const struct weight *ec_weight(const struct model *m, int il, int k) {
    const struct model_layer *l = &m->layers[il];
    const bool fused = l->ffn_gate_up_exps.tensor != NULL;
    if (m->hp.n_expert > 0)
        return k == 0 ? (fused ? &l->ffn_gate_up_exps : &l->ffn_gate_exps)
             : k == 1 ? (fused ? NULL : &l->ffn_up_exps)
                      : &l->ffn_down_exps;
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
            b += ec_weight(m, il, k) ? ec_region_bytes(ec_weight(m, il, k)->mat_bytes) : 0;
        best = b > best ? b : best;
    }
    return best;
}

/* bytes of the cache's own memory: address space, its pages touched as slots are used; NULL when
 * the system gives none. */
static uint8_t *ec_map(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- creation and size ----------------------------------------------------------------------- */

#define EC_HUGE_PAGE ((uintptr_t)2 << 20)

/* Huge pages for the whole 2 MiB ranges below the end of n_active slots, none past it. khugepaged
 * collapses a range that has a single page present (max_ptes_none 511 by default), so the range
 * around the end, its retired slots given back, would be filled again behind the cache's back:
 * up to 2 MiB past the budget (seen: the peak resident set 1.1-1.7 MiB over in 1 of 20 runs). */
static void ec_advise_huge(struct expert_cache *c, int32_t n_active) {
    if (c->mem_lent)
        return;
    const uintptr_t base = (uintptr_t)c->mem, end = base + (size_t)n_active * c->slot_bytes;
    const uintptr_t cut = (end & ~(EC_HUGE_PAGE - 1)) > base ? (end & ~(EC_HUGE_PAGE - 1)) : base;
    if (cut > base)
        os_pages_huge(c->mem, cut - base, true);
    if (cut < base + c->mem_bytes)
        os_pages_huge((uint8_t *)cut, base + c->mem_bytes - cut, false);
}

/* Slot s holds nothing (retired, or about to be placed). */
static void ec_clear(struct expert_cache *c, int32_t s) {
    c->slots[s] = (struct ec_slot){.key = -1};
}

/* Slot s (on no list) joins the active ones: its pages touched (see expert_cache_new), FREE and
 * the first to go. */
static void ec_activate(struct expert_cache *c, int32_t s) {
    memset(c->mem + (size_t)s * c->slot_bytes, 0, c->slot_bytes);
    ec_clear(c, s);
    cache_policy_drop(c->policy, s);
}

/* The reads of m's experts: one file, or each shard of a split model its own (expert_io). */
static struct expert_io *ec_io_new(const struct model *m, const struct expert_cache_options *o,
                                   int max_queued, char *err, size_t err_len) {
    const struct gguf *g = m->gguf;
    const char **paths = calloc(g->n_shards, sizeof(*paths));
    if (!paths) {
        err_set(err, err_len, "expert_cache: out of memory");
        return NULL;
    }
    for (uint32_t i = 0; i < g->n_shards; i++)
        paths[i] = g->shards[i].path;
    struct expert_io *io = expert_io_new(paths, (int)g->n_shards, o->io,
                                         o->io_depth > 0 ? o->io_depth : 32, max_queued,
                                         o->contention, err, err_len);
    free(paths);
    return io;
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
    if (!(c->mem = fault_hit(FAULT_ALLOC) ? NULL : ec_map(c->mem_bytes)))
        goto oom;
    ec_advise_huge(c, c->n_active);
    size_t n_keys = (size_t)c->n_layer * (size_t)c->n_expert;
    c->where = malloc(n_keys * sizeof(*c->where));
    c->slots = calloc(n_slots, sizeof(*c->slots));
    c->layer_hits = calloc((size_t)c->n_layer, sizeof(*c->layer_hits));
    c->layer_misses = calloc((size_t)c->n_layer, sizeof(*c->layer_misses));
    const int64_t per_token =
        (int64_t)c->n_layer * (m->hp.n_expert_used > 0 ? m->hp.n_expert_used : 1);
    const bool lirs = m->hp.n_expert > 0 && c->n_active < per_token;
    c->policy = cache_policy_new(lirs ? CACHE_POLICY_LIRS : CACHE_POLICY_FRECENCY, c->n_slots,
                                 (int32_t)n_keys, m->hp.n_expert_used);
    if (!c->where || !c->slots || !c->layer_hits || !c->layer_misses || !c->policy)
        goto oom;
    struct expert_cache_options o = {.io = EXPERT_IO_URING, .io_depth = 32};
    if (opt)
        o = *opt;
    /* room for every read one lookup and one prefetch can queue */
    int max_queued = 3 * 2 * (c->n_expert < EC_MAX_LOOKUP ? c->n_expert : EC_MAX_LOOKUP);
    c->io = ec_io_new(m, &o, max_queued, err, err_len);
    if (!c->io) {
        expert_cache_free(c);
        return NULL;
    }
    for (size_t i = 0; i < n_keys; i++)
        c->where[i] = -1;
    /* the active slots are touched now, like the KV cache: the budget is held from the start, and
     * the first requests do not pay for page faults (in a VM, often the host's too) in the middle
     * of their reads */
    for (int32_t s = c->n_active - 1; s >= 0; s--)
        ec_activate(c, s);
    for (int32_t s = c->n_active; s < c->n_slots; s++)
        ec_clear(c, s);
    cache_policy_resize(c->policy, c->n_active);
    c->epoch = 1;
    c->stats.n_slots = c->n_active;
    c->stats.slot_bytes = slot;
    c->stats.backend = expert_io_backend(c->io);
    c->stats.eviction = cache_policy_name(c->policy);
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
    if (c->mem && !c->mem_lent)
        munmap(c->mem, c->mem_bytes);
    free(c->where);
    free(c->slots);
    free(c->layer_hits);
    free(c->layer_misses);
    cache_policy_free(c->policy);
    free(c);
}

/* ---- reads ----------------------------------------------------------------------------------- */

/* A read finished: tag = slot * 3 + matrix. The slot is READY after its last success; after a
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
    cache_policy_drop(c->policy, s);
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

/* The policy may evict slot s (ctx: the cache): neither pinned by the current lookup nor being
 * read. */
static bool ec_evictable(const void *ctx, int32_t s) {
    const struct expert_cache *c = ctx;
    return c->slots[s].pin != c->epoch && c->slots[s].state != EC_READING;
}

/* The slot to evict: the policy's victim among the evictable slots, taken off the policy's lists.
 * With wait, waits for reads when all candidates are busy; without (a prefetch guess never waits),
 * takes only what is free now. Returns -1 when there is none. */
static int32_t ec_victim(struct expert_cache *c, bool wait) {
    for (;;) {
        const int32_t s = cache_policy_victim(c->policy, ec_evictable, c);
        if (s >= 0)
            return s;
        if (!wait || expert_io_outstanding(c->io) == 0 || ec_reap(c, true) != 1)
            return -1;
    }
}

/* Submits one read, reaping finished ones while the queue is full. */
static int ec_submit(struct expert_cache *c, uint64_t tag, uint8_t *dst, int shard, uint64_t off,
                     uint64_t len, uint64_t need, bool urgent) {
    int rc;
    while ((rc = expert_io_submit(c->io, tag, dst, shard, off, len, need, urgent)) == -EAGAIN)
        if (ec_reap(c, true) != 1)
            return -EAGAIN;
    return rc;
}

/* Claims a victim slot for expert e of layer il and submits its three reads; a guess (prefetch) is
 * placed by the policy now, a lookup's miss is touched by its caller. Returns the slot, or -1 when
 * no slot can be had. */
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
    x->reading = ec_weight(c->m, il, 1) ? 3 : 2; /* fused gate_up: two reads */
    x->rc = 0;
    x->prefetched = prefetch;
    c->where[key] = s;
    if (prefetch)
        cache_policy_guess(c->policy, s, key);
    uint8_t *base = c->mem + (size_t)s * c->slot_bytes;
    size_t region = 0;
    for (int k = 0; k < 3; k++) {
        const struct weight *w = ec_weight(c->m, il, k);
        if (!w) { /* the up half of the fused slice read as matrix 0 */
            x->mat[1] = x->mat[0] + c->m->layers[il].ffn_gate_exps.mat_bytes;
            continue;
        }
        uint64_t off = w->tensor->data_off + (uint64_t)e * w->mat_stride;
        uint64_t start = off & ~(uint64_t)(EXPERT_IO_ALIGN - 1);
        uint64_t end = align_up(off + w->mat_bytes, EXPERT_IO_ALIGN);
        x->mat[k] = base + region + (off - start);
        c->stats.bytes_read += end - start;
        int rc = ec_submit(c, (uint64_t)s * 3 + (uint64_t)k, base + region,
                           (int)w->tensor->shard, start, end - start, off + w->mat_bytes - start,
                           !prefetch);
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
    cache_policy_cycle(c->policy, il);
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
        cache_policy_touch(c->policy, s, il * c->n_expert + ids[i], hit);
        c->slots[s].pin = c->epoch;
        c->lookup[c->lookup_n++] = s;
    }
    /* guesses for this layer that it did not want are the first to go: a wrong guess must not
     * push out experts that were looked up */
    for (int32_t j = 0; il == c->guessed_layer && j < c->guessed_n; j++) {
        struct ec_slot *x = &c->slots[c->guessed[j]];
        if (x->prefetched && x->key / c->n_expert == il) {
            x->prefetched = false;
            cache_policy_drop(c->policy, c->guessed[j]);
        }
    }
    c->guessed_n = 0;
    return 0;
}

int expert_cache_get(struct expert_cache *c, int i, const uint8_t *mats[3], bool wait,
                     bool *ready) {
    bool here = false;
    int rc = 0;
    if (i < 0 || i >= c->lookup_n) {
        rc = -EINVAL;
        goto out;
    }
    struct ec_slot *x = &c->slots[c->lookup[i]];
    if (x->state == EC_READING)
        ec_reap_finished(c);
    while (x->state == EC_READING && wait)
        if (ec_reap(c, true) != 1) {
            rc = -EIO;
            goto out;
        }
    if (x->state == EC_READING)
        goto out;
    if (x->state != EC_READY) {
        rc = x->rc < 0 ? x->rc : -EIO;
        goto out;
    }
    for (int k = 0; k < 3; k++)
        mats[k] = x->mat[k];
    here = true;
out:
    if (ready)
        *ready = here;
    return rc;
}

bool expert_cache_wait(struct expert_cache *c) {
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
 * (its bytes, key, state and place in the policy), so that the active slots stay 0 .. n_active-1
 * and the cache loses what the policy would have evicted next. t's pages go back to the system. */
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
        *x = c->slots[t];
        cache_policy_move(c->policy, t, v);
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
        cache_policy_remove(c->policy, t);
    }
    ec_clear(c, t);
    if (!c->mem_lent)
        os_pages_release(c->mem + (size_t)t * c->slot_bytes, c->slot_bytes);
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
    ec_advise_huge(c, (int32_t)want); /* before the pages go: none collapsed back in between */
    while (c->n_active > (int32_t)want)
        ec_retire_last(c);
    while (c->n_active < (int32_t)want)
        ec_activate(c, c->n_active++);
    cache_policy_resize(c->policy, c->n_active);
    c->stats.n_slots = c->n_active;
    return c->n_active;
}

size_t expert_cache_mem_bytes(const struct expert_cache *c) {
    return c->mem_bytes;
}

int expert_cache_rehome(struct expert_cache *c, uint8_t *mem, size_t bytes) {
    if (mem && (bytes < c->mem_bytes || (uintptr_t)mem % EXPERT_IO_ALIGN))
        return -EINVAL;
    uint8_t *to = mem ? mem : ec_map(c->mem_bytes);
    if (!to)
        return -ENOMEM;
    while (expert_io_outstanding(c->io) > 0) /* no read may land in the old memory */
        ec_reap(c, true);
    uint8_t *from = c->mem;
    for (int32_t s = 0; s < c->n_slots; s++) { /* the experts held; free slots are read over */
        const size_t at = (size_t)s * c->slot_bytes;
        if (c->slots[s].state == EC_READY)
            memcpy(to + at, from + at, c->slot_bytes);
        for (int k = 0; k < 3; k++)
            if (c->slots[s].mat[k])
                c->slots[s].mat[k] = to + (c->slots[s].mat[k] - from);
    }
    if (!c->mem_lent)
        munmap(from, c->mem_bytes);
    c->mem = to;
    c->mem_lent = mem != NULL;
    ec_advise_huge(c, c->n_active);
    return 0;
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
