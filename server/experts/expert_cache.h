/* expert_cache.h - the Expert Sniper: routed experts read from the model file on demand into a
 * bounded RAM cache of fixed-size slots keyed (layer, expert), evicting the least recently used.
 *
 *     struct model *m = model_open(path, true, err, n);            // experts stay on disk
 *     struct expert_cache *c = expert_cache_new(m, cache_bytes, 8, err, n);
 *     const uint8_t *mats[8][3];
 *     expert_cache_fetch(c, layer, ids, 8, mats);                  // gate, up, down of each id
 *
 * Slots hold the file's bytes unchanged (direct I/O, aligned superset reads), so computing on a
 * cached expert gives exactly what the all-in-RAM run gives. */
#ifndef SNIPER_EXPERT_CACHE_H
#define SNIPER_EXPERT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct expert_cache;

struct expert_cache_stats {
    uint64_t hits;       /* (layer, expert) lookups found in the cache */
    uint64_t misses;     /* lookups that read from the file */
    uint64_t bytes_read; /* bytes read from the file (aligned supersets) */
    double read_s;       /* seconds the engine waited for reads */
    int32_t n_slots;
    size_t slot_bytes;
};

/* Bytes of one slot for model m: the largest (gate + up + down) of any layer, each padded for
 * aligned direct reads. */
size_t expert_cache_slot_bytes(const struct model *m);

/* A cache of cache_bytes / slot_bytes slots for m (opened with experts on disk; borrowed, must
 * outlive the cache), reading with n_io_threads threads. Returns NULL with a message in err when
 * fewer slots than one layer's experts would fit (the message names the minimum) or on no memory. */
struct expert_cache *expert_cache_new(const struct model *m, size_t cache_bytes, int n_io_threads,
                                      char *err, size_t err_len);

void expert_cache_free(struct expert_cache *c);

/* Makes experts ids[0..n) of layer il resident, reading every miss at once, and sets mats[i] to
 * the gate, up and down matrices of ids[i]. The pointers stay valid until the next call (this
 * call's slots are pinned until then). Returns 0, -EINVAL for a bad layer, id or n, or the read
 * error (-EIO for a short read: the file shrank); a failed read leaves no slot claiming the expert. */
int expert_cache_fetch(struct expert_cache *c, int il, const int32_t *ids, int n,
                       const uint8_t *mats[][3]);

void expert_cache_get_stats(const struct expert_cache *c, struct expert_cache_stats *out);

#endif
