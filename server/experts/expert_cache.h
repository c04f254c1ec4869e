/* expert_cache.h - the Expert Sniper: routed experts read from the model file on demand into a
 * bounded RAM cache of fixed-size slots keyed (layer, expert), evicting by frecency (the lowest
 * 2 x recent lookups + layer cycle of the last one; in a cache smaller than one token's lookups,
 * by LIRS: cache_policy.h).
 * For a dense model each layer's FFN (gate, up, down) is the layer's one "expert", so files larger
 * than the budget stream the same way.
 *
 *     struct model *m = model_open(path, true, err, n);            // experts stay on disk
 *     struct expert_cache *c = expert_cache_new(m, cache_bytes, NULL, err, n);
 *     expert_cache_begin(c, layer, ids, n_ids);                    // misses start reading
 *     expert_cache_prefetch(c, layer + 1, guess, n_guess);         // next layer's likely experts
 *     const uint8_t *mats[3];
 *     bool ready;
 *     expert_cache_get(c, i, mats, false, &ready);                 // ready: ids[i] is here
 *     expert_cache_get(c, j, mats, true, NULL);                    // waits for ids[j]
 *
 * Slots hold the file's bytes unchanged (direct I/O, aligned superset reads), so computing on a
 * cached expert gives exactly what the all-in-RAM run gives, whatever was prefetched or evicted. */
#ifndef SNIPER_EXPERT_CACHE_H
#define SNIPER_EXPERT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "expert_io.h"
#include "model.h"

struct expert_cache;

struct expert_cache_options {
    enum expert_io_kind io; /* default io_uring */
    int io_depth;           /* reads in flight (default 32) */
    size_t grow_bytes;      /* the most bytes expert_cache_set_bytes may grow it to (0: none
                             * beyond its size at creation); only address space until then */
    struct contention *contention; /* the reads' waits' monitor (expert_io_new): the engine's
                                    * pool's, borrowed until expert_cache_free (which does not
                                    * use it); NULL: their own */
};

struct expert_cache_stats {
    uint64_t hits;            /* lookups found in the cache (or already on their way: prefetched) */
    uint64_t misses;          /* lookups that had to be read on demand */
    uint64_t bytes_read;      /* bytes read from the file (aligned supersets), prefetches included */
    uint64_t prefetch_issued; /* experts read ahead on a guess */
    uint64_t prefetch_used;   /* of those, looked up before they were evicted */
    double io_wait_s;         /* seconds the engine blocked waiting for reads */
    double io_busy_s;         /* seconds with at least one read in flight */
    int32_t n_slots;
    size_t slot_bytes;
    const char *backend;      /* "io_uring" or "threads" */
    const char *eviction;     /* "frecency", or "lirs" in a cache smaller than one token's lookups */
};

/* Bytes of one slot for model m: the largest (gate + up + down) of any layer, each padded for
 * aligned direct reads. */
size_t expert_cache_slot_bytes(const struct model *m);

/* Experts per layer as the cache counts them: the model's routed experts, or 1 (dense FFN). */
int expert_cache_experts_per_layer(const struct model *m);

/* The fewest slots a cache for m may have: one token's experts of a layer (1 for a dense FFN).
 * A batch that routes to more experts of a layer than the cache holds looks them up in groups
 * (each begin releases the previous group's pins). */
int expert_cache_min_slots(const struct model *m);

/* Slots of c in use now. */
int expert_cache_n_slots(const struct expert_cache *c);

/* A cache of cache_bytes / slot_bytes slots for m (opened with experts on disk; borrowed, must
 * outlive the cache), their pages touched now. opt may be NULL (defaults). Returns NULL with a
 * message in err when fewer than expert_cache_min_slots would fit (the message names the minimum)
 * or on no memory. */
struct expert_cache *expert_cache_new(const struct model *m, size_t cache_bytes,
                                      const struct expert_cache_options *opt, char *err,
                                      size_t err_len);

/* Resizes c, between lookups, to bytes / slot_bytes slots, at least expert_cache_min_slots and at
 * most what opt->grow_bytes (or the size at creation) allowed. Shrinking evicts what the policy
 * would evict next (waiting for guesses still being read) and gives the pages back to the system
 * before it returns; growing touches the new slots. Returns the slots now. The last lookup's
 * matrices must not be used after it. */
int expert_cache_set_bytes(struct expert_cache *c, size_t bytes);

/* Bytes of c's slots, the retired ones and those it may grow into included. */
size_t expert_cache_mem_bytes(const struct expert_cache *c);

/* Moves c's slots, between lookups, into mem (bytes >= expert_cache_mem_bytes, aligned for direct
 * I/O: a GPU's host-visible memory, where its kernels read the experts in place), or with mem
 * NULL back into memory of its own. Waits for reads in flight first; the slots keep their
 * experts. Lent memory is never given back to the system (a shrink keeps its pages: releasing
 * them would map fresh pages over the lender's mapping) and must outlive c or the next rehome.
 * Returns 0, -EINVAL (too small or misaligned), -ENOMEM. */
int expert_cache_rehome(struct expert_cache *c, uint8_t *mem, size_t bytes);

/* Waits for reads in flight, then frees. Accepts NULL. */
void expert_cache_free(struct expert_cache *c);

/* Starts a lookup of experts ids[0..n) (distinct) of layer il: hits are pinned, every miss gets a
 * slot and its reads are submitted at once. The pins hold until the next begin. Returns 0,
 * -EINVAL for a bad layer, id or n. */
int expert_cache_begin(struct expert_cache *c, int il, const int32_t *ids, int n);

/* The gate, up and down matrices of ids[i] of the current lookup (with wait, after its reads):
 * returns 0 with *ready true and mats set when they are resident, 0 with *ready false when they
 * are still being read and !wait; or the read error (-EIO for a short read: the file shrank),
 * -EINVAL for a bad i, with *ready false. ready may be NULL when wait. The matrices are the
 * cache's, valid until the next lookup or resize. A failed read leaves no slot claiming the
 * expert. */
int expert_cache_get(struct expert_cache *c, int i, const uint8_t *mats[3], bool wait,
                     bool *ready);

/* Blocks until one read in flight finishes (its expert is then READY, or failed: get says which).
 * True when one did, false when no read was in flight. Lets a caller compute each expert as it
 * arrives. */
bool expert_cache_wait(struct expert_cache *c);

/* Best effort: starts reading those of ids[0..n) of layer il that are neither resident nor on their
 * way, into slots not pinned by the current lookup. Returns how many reads it started. */
int expert_cache_prefetch(struct expert_cache *c, int il, const int32_t *ids, int n);

/* True when expert e of layer il is in the cache or on its way (a lookup would not read it). */
bool expert_cache_resident(const struct expert_cache *c, int il, int32_t e);

void expert_cache_get_stats(const struct expert_cache *c, struct expert_cache_stats *out);

/* Lookups of layer il that hit and missed. */
void expert_cache_layer_stats(const struct expert_cache *c, int il, uint64_t *hits,
                              uint64_t *misses);

#endif
