/* route_trace.h - which experts a MoE model routed to, lookup by lookup, and the replay of that
 * routing against expert-cache eviction policies (bench-policy's engine, tested in test_policy.c).
 *
 *     struct route_trace *t = route_trace_read("qwen.route.csv", err, sizeof(err));
 *     struct route_result r;
 *     route_replay(t, ROUTE_FRECENCY, (uint64_t)1000 << 20, 0, &r);   // decode hit rate, bytes
 *     route_trace_free(t);
 *
 * A lookup is what the engine asks the cache for at once: one decode token's experts of a layer, or
 * the union of a prefill batch's experts of a layer. Sizes are bytes, each layer's experts having
 * their own (route traces carry them per layer; a recorded run has the cache's slot size). */
#ifndef SNIPER_ROUTE_TRACE_H
#define SNIPER_ROUTE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct route_lookup {
    int32_t layer;
    int32_t n;      /* distinct experts */
    size_t off;     /* into ids and weights */
    bool decode;    /* a decode token's (else a prefill batch's) */
};

struct route_trace {
    int32_t n_layer, n_expert, n_used; /* n_used: experts a token routes to in each layer */
    uint64_t *expert_bytes;            /* [n_layer] bytes of one expert of each layer */
    struct route_lookup *look;         /* [n_look] in the order the engine made them */
    size_t n_look, cap_look;
    int32_t *ids;                      /* [n_ids] expert ids of all lookups */
    float *weights;                    /* [n_ids] router weight (a prefill union: the largest) */
    size_t n_ids, cap_ids, cap_weights;
    int32_t n_decode_tokens;
};

/* An empty trace of n_layer layers of n_expert experts (n_used per token), every expert of
 * expert_bytes. Returns NULL on bad sizes or no memory. Free with route_trace_free. */
struct route_trace *route_trace_new(int32_t n_layer, int32_t n_expert, int32_t n_used,
                                    uint64_t expert_bytes);

/* Reads a route trace file (the format of ../shared/fixtures/routing: '#' lines with the model's
 * n_layer, n_expert, n_expert_used and every layer's expert_bytes, then the CSV
 * turn,phase,step,layer,slot,expert,weight,residency,expert_bytes; residency and the per-row
 * expert_bytes are ignored). Consecutive rows of one (turn, phase, layer), and in decode one step,
 * make one lookup; a prefill lookup is the union of its batch's experts. Returns the trace (the
 * caller frees it), or NULL with a message naming the file and line in err. */
struct route_trace *route_trace_read(const char *path, char *err, size_t err_len);

/* Appends a lookup of ids[0..n) (distinct, each in range) of layer to t; weights may be NULL.
 * Returns 0, -EINVAL for a bad layer or id, -ENOMEM. */
int route_trace_add(struct route_trace *t, int32_t layer, const int32_t *ids, const float *weights,
                    int32_t n, bool decode);

/* Writes t in the route trace format (one row per expert of each lookup; a prefill lookup is
 * written as step 0 of its layer). Returns 0 or a negative errno. */
int route_trace_write(const struct route_trace *t, const char *path);

/* Bytes of one token's experts: n_used experts of every layer. */
uint64_t route_trace_token_bytes(const struct route_trace *t);

/* Bytes of all experts of all layers. */
uint64_t route_trace_all_bytes(const struct route_trace *t);

/* Frees t and all it owns. Accepts NULL. */
void route_trace_free(struct route_trace *t);

/* ---- replay ---------------------------------------------------------------------------------- */

enum route_policy {
    ROUTE_LRU,      /* the least recently looked up */
    ROUTE_LIRS,     /* LIRS, the expert cache's own (cache_policy.c), for caches below one
                     * token's lookups */
    ROUTE_ARC,      /* ARC (Megiddo and Modha, FAST 2003): recency and frequency lists, adaptive */
    ROUTE_FRECENCY, /* the expert cache's own (cache_policy.c): the lowest 2 x lookups + cycle
                     * of the last lookup, lookups counted up to 32 and halved every 32 cycles (a
                     * cycle: the layers once, one decode token) */
    ROUTE_BELADY,   /* the one looked up again last: knows the future, the bound */
    ROUTE_POLICY_COUNT
};

/* The policy's name as bench-policy prints it. */
const char *route_policy_name(enum route_policy p);

struct route_result {
    uint64_t hits, misses;       /* decode lookups of one expert */
    uint64_t missed_bytes;       /* decode */
    uint64_t prefill_misses;
    double hit_rate;             /* decode hits / decode lookups */
    double bytes_per_token;      /* decode missed bytes / decode tokens */
};

/* Replays t through a cache of cache_bytes under policy p, the cache empty at the start: each
 * lookup pins its resident experts, then reads its misses, evicting unpinned experts until each
 * fits (a lookup larger than the cache goes in groups, as the engine's). With lookahead > 0, an
 * oracle: the resident experts of the next lookahead lookups are evicted only when nothing else
 * can be. Returns 0, -EINVAL when the cache cannot hold one token's experts of the largest layer,
 * -ENOMEM. */
int route_replay(const struct route_trace *t, enum route_policy p, uint64_t cache_bytes,
                 int lookahead, struct route_result *out);

/* ---- three levels: VRAM slots before the RAM cache ------------------------------------------ */

struct route_vram {
    uint64_t pairs_gpu, pairs_cpu; /* decode (token, expert) pairs each side took */
    uint64_t promoted_bytes;       /* experts moved into slots after decode steps */
};

/* Replays t's lookups through VRAM slots of n_slots experts a layer: the GPU's own placement and
 * learning (backend_vulkan_experts.h: frecency, at most VK_TIER_PROMOTE_MAX moves a step, made
 * between steps; a step ends where a lookup's layer is not after the one before). *cpu gets the
 * trace of what the CPU looked up instead (each lookup's experts without a slot, possibly none),
 * for route_replay at a RAM cache's size; the caller frees it. Returns 0, -EINVAL or -ENOMEM. */
int route_replay_vram(const struct route_trace *t, int32_t n_slots, struct route_trace **cpu,
                      struct route_vram *out);

#endif
