/* backend_vulkan_experts.h - the host's half of the GPU's experts on three levels (VRAM, RAM, SSD):
 * which routed experts of each MoE layer hold one of its VRAM slots, how a step's routing splits
 * into the pairs the GPU computes and those the CPU computes where their matrices are (the model
 * image, or the expert cache and the SSD behind it), the CPU's part through block_moe's expert
 * path, and which experts the slots learn to hold. The device's half (the slots' memory, the
 * products, the exchange, the uploads) is backend_vulkan.c's.
 *
 * At engine_use_gpu expert x of every MoE layer takes slot x while x < n_slots. From then on the
 * slots are a cache of each layer's experts under the RAM cache's frecency policy (cache_policy.h:
 * one entry per slot, keys (layer, expert)): a layer's lookup touches the slots its routed experts
 * hit, and up to VK_TIER_PROMOTE_MAX of a step's misses take the slot the policy evicts in their
 * layer. The move happens between steps (vk_tier_promote, before the next step is recorded): the
 * step that missed computes the expert on the CPU, the ones after it on the GPU. Where an expert
 * was computed changes no bit of the logits. Private to server/engine. */
#ifndef SNIPER_BACKEND_VULKAN_EXPERTS_H
#define SNIPER_BACKEND_VULKAN_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine_impl.h"

/* Experts a step may move into VRAM slots, at most: what the uploads between two steps cost is
 * bounded (a Qwen3-30B-A3B Q4_K_M expert, gate, up and down, is about 3 MB). */
#define VK_TIER_PROMOTE_MAX 8

struct cache_policy;

struct vk_tier {
    int32_t n_slots;   /* VRAM slots of each MoE layer, 0 .. n_expert */
    int32_t n_expert, n_layer;
    int32_t k_used;    /* experts a token routes to: pair p is token p / k_used's */
    int32_t *slot_of;  /* [n_layer][n_expert]: expert x's slot in layer il, or -1 (the CPU's) */
    int32_t *held;     /* [n_layer][n_slots]: the expert slot s of layer il holds, or -1 */
    struct cache_policy *policy; /* frecency over entries il n_slots + s; NULL without slots */
    int32_t *mark;     /* [n_expert] the layer lookup that last saw each expert (a union's scratch) */
    int32_t lookup;    /* lookups so far, for mark */
    struct vk_promotion {
        int32_t il, x, slot;   /* expert x of layer il goes into slot */
    } promote[VK_TIER_PROMOTE_MAX];
    int32_t n_promote;
    uint64_t pairs_gpu, pairs_cpu; /* (token, expert) pairs computed on each side so far */
    uint64_t hits, misses;         /* a layer's distinct routed experts found in a slot, or not */
    uint64_t promotions;           /* experts moved into a slot */
    int32_t *count;                /* [n_expert] a transit's scratch: the CPU's pairs per expert */
    uint64_t transit_experts, transit_pairs; /* uploaded for a step (vk_tier_transit) so far */
};

/* A placement of n_slots (0 .. n_expert) VRAM slots per MoE layer (moe[il]; NULL: every layer) of
 * n_layer layers of n_expert experts, k_used a token, expert x in slot x. It needs no engine, so
 * that bench-policy replays route traces through it. Returns it (vk_tier_free frees it) or NULL on
 * bad sizes or no memory. */
struct vk_tier *vk_tier_new(int32_t n_layer, int32_t n_expert, int32_t k_used, const bool *moe,
                            int32_t n_slots);
void vk_tier_free(struct vk_tier *t); /* accepts NULL */

/* The gate, up and down matrices of expert x of layer il in host memory, to fill a slot: the
 * model image's, or read through e's expert cache (waiting for the read; valid until its next
 * lookup). Returns 0 or the lookup's or read's error. */
int vk_tier_expert_mats(struct engine *e, int il, int32_t x, const uint8_t *mats[3]);

/* Splits layer il's routing, ids[n_pairs] (pair p = t k + s: token t's s-th expert), into the
 * pairs whose expert has a slot, written to gpu as three int32 arrays `stride` apart (the slot,
 * the activation row t, the output row p), and the rest, into cpu_sel[n_pairs] (the expert for
 * the CPU's pairs, -1 for the GPU's). Counts both, and learns from the layer's experts (hits,
 * misses, the promotions to make after the step). Returns the GPU's pairs. */
int32_t vk_tier_split(struct vk_tier *t, int il, const int32_t *ids, int32_t n_pairs, int32_t *gpu,
                      size_t stride, int32_t *cpu_sel);

/* Whether uploading one more expert for a step pays (vk_tier_transit): n_chosen experts are
 * uploaded so far, the candidate has `pairs` of the CPU's pairs, and the CPU has cpu_left pairs
 * before it moves. */
typedef bool (*vk_transit_pays_fn)(const void *ctx, int32_t n_chosen, int32_t pairs,
                                   int32_t cpu_left);

/* A step's transit (issue 27: prefill uploads missed experts where that is faster): which of the
 * CPU's pairs of a layer (cpu_sel[n_pairs], after vk_tier_split) an upload of their expert moves
 * to the GPU. Experts are taken by their pair count, the most first (ties: the lower id), each
 * with at least min_pairs pairs, at most max_experts, while pays(ctx, ...) says so. Expert x taken
 * j-th goes to transit slot j (chosen[j] = x); its pairs leave cpu_sel (-1) and are written to
 * gpu as three int32 arrays `stride` apart (the transit slot, the activation row, the output
 * row) in pair order. Counts both (pairs_cpu / pairs_gpu, transit_*). Returns the transit's
 * pairs; *n_chosen gets its experts. */
int32_t vk_tier_transit(struct vk_tier *t, int32_t *cpu_sel, int32_t n_pairs, int32_t min_pairs,
                        int32_t max_experts, vk_transit_pays_fn pays, const void *ctx,
                        int32_t *chosen, int32_t *n_chosen, int32_t *gpu, size_t stride);

/* The CPU's pairs of layer il (cpu_sel) for n_tok tokens whose FFN input rows are x and xn (the
 * residual and its norm, n_embd floats a row, as the device had them): each pair's expert output
 * into out row p (block_moe_experts). Returns 0 or its error. */
int vk_tier_cpu(struct engine *e, int il, int32_t n_tok, const float *x, const float *xn,
                const int32_t *cpu_sel, float *out);

/* Fills slot `slot` of layer il with expert x: the device's half of a promotion (reading the
 * matrices, vk_tier_expert_mats, and writing them). Returns 0 or a negative error. */
typedef int (*vk_tier_fill_fn)(void *ctx, int il, int32_t x, int32_t slot);

/* Between steps: moves the promotions the last step queued into their slots (fill: NULL in a
 * replay, where nothing is written), and the placement follows. Best effort: a promotion whose
 * fill fails leaves its slot empty (no expert maps to it) until the policy fills it again. */
void vk_tier_promote(struct vk_tier *t, vk_tier_fill_fn fill, void *ctx);

#endif
