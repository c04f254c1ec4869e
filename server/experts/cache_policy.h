/* cache_policy.h - which cached expert goes next: the expert cache's eviction policies, frecency
 * and LIRS, over entries 0 .. n_entries-1 (the cache's slots; bench-policy's replay gives each key
 * an entry of its own) holding keys 0 .. n_keys-1 (layer * n_expert + expert). The daemon's cache
 * (expert_cache.c) and bench-policy's replay (tools/route_trace.c) run this one code, so the
 * replay's tables describe the cache sniperd runs (tests/test_policy.c: lookup for lookup).
 *
 *     struct cache_policy *p = cache_policy_new(CACHE_POLICY_FRECENCY, n_slots, n_keys, k_used);
 *     cache_policy_resize(p, n_slots);             // the cache's size, in entries
 *     cache_policy_cycle(p, il);                   // before each lookup of layer il
 *     int32_t s = cache_policy_victim(p, can_go, ctx);  // an entry the caller may evict, or -1
 *     cache_policy_touch(p, s, key, false);        // key looked up, held by s (a miss)
 *
 * The caller says which entries may go (can_go: not pinned, not being read); the policy keeps
 * their order. An entry is on at most one of its lists; one on none is ignored until placed. */
#ifndef SNIPER_CACHE_POLICY_H
#define SNIPER_CACHE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

enum cache_policy_kind {
    CACHE_POLICY_FRECENCY, /* the lowest 2 x lookups + cycle of the last lookup */
    CACHE_POLICY_LIRS,     /* LIRS, for a cache smaller than one token's lookups */
};

struct cache_policy;

/* May entry e be evicted now (the caller's pins and reads)? ctx is the victim call's. */
typedef bool (*cache_policy_can_go_fn)(const void *ctx, int32_t e);

/* A policy of kind over n_entries entries (all on no list) and n_keys keys (never looked up);
 * k_used: the experts one token looks up in a layer (LIRS's HIR queue holds at least that many).
 * Call cache_policy_resize before the first victim. Returns NULL on bad sizes or no memory; free
 * with cache_policy_free. */
struct cache_policy *cache_policy_new(enum cache_policy_kind kind, int32_t n_entries,
                                      int32_t n_keys, int32_t k_used);

/* Frees p. Accepts NULL. */
void cache_policy_free(struct cache_policy *p);

/* "frecency" or "lirs" (a static string). */
const char *cache_policy_name(const struct cache_policy *p);

/* The cache now holds n_slots entries' worth of experts. LIRS's LIR set is all but the HIR
 * queue's share of them (5%, at least k_used, at most half); LIR entries beyond it drop to the
 * end of the HIR queue, the least recent first. Frecency keeps no size. */
void cache_policy_resize(struct cache_policy *p, int32_t n_slots);

/* Before a lookup of layer il: a lookup whose layer is below the last one's starts a cycle (one per
 * decode token or prefill batch); frecency halves every key's count each 32 cycles. */
void cache_policy_cycle(struct cache_policy *p, int il);

/* Key was looked up and is held by entry e (hit: e held it before the lookup; on a miss e was
 * just chosen as a victim or dropped, and is on no list). Frecency: the key's count goes up and e
 * is stamped with the cycle; LIRS: e joins or stays in the LIR set or queues as HIR. */
void cache_policy_touch(struct cache_policy *p, int32_t e, int32_t key, bool hit);

/* Entry e (on no list) is being read ahead on a guess of key: placed as a lookup would place it,
 * but not counted as one (frecency: its count + 1, stamped now; LIRS: the end of the HIR queue). */
void cache_policy_guess(struct cache_policy *p, int32_t e, int32_t key);

/* Entry e is the first to go: FREE, a failed read, a guess its layer did not want. It leaves the
 * LIR set and goes to the front of the waiting list (LIRS: the HIR queue). */
void cache_policy_drop(struct cache_policy *p, int32_t e);

/* The entry to evict among those can_go(ctx, e) allows: the front of the waiting list (entries
 * dropped, then guesses; LIRS: the HIR queue in order), then frecency's lowest score (the older
 * lookup on a tie) or LIRS's least recent LIR entry. The entry is taken off its list and out of
 * the LIR set (the caller then touches, guesses, drops or moves it). Returns -1 when none may
 * go. */
int32_t cache_policy_victim(struct cache_policy *p, cache_policy_can_go_fn can_go,
                            const void *ctx);

/* Entry to (on no list) takes over entry from's place and state; from is left on no list. */
void cache_policy_move(struct cache_policy *p, int32_t from, int32_t to);

/* Entry e leaves its list and the LIR set (a slot retired); no-op when it is on none. */
void cache_policy_remove(struct cache_policy *p, int32_t e);

#endif
