/* backend_vulkan_experts.h - the host's half of the GPU's experts on three levels (VRAM, RAM, SSD):
 * which routed experts of each MoE layer hold one of its VRAM slots, how a step's routing splits
 * into the pairs the GPU computes and those the CPU computes where their matrices are (the model
 * image, or the expert cache and the SSD behind it), and the CPU's part through block_moe's expert
 * path. The device's half (the slots' memory, the products, the exchange) is backend_vulkan.c's.
 * The slots are filled once, at engine_use_gpu: expert x of every MoE layer takes slot x while
 * x < n_slots (the first experts that fit). Private to server/engine. */
#ifndef SNIPER_BACKEND_VULKAN_EXPERTS_H
#define SNIPER_BACKEND_VULKAN_EXPERTS_H

#include <stdint.h>

#include "engine_impl.h"

struct vk_tier {
    int32_t n_slots;   /* VRAM slots of each MoE layer, 0 .. n_expert */
    int32_t n_expert;
    int32_t *slot_of;  /* [n_layer][n_expert]: expert x's slot in layer il, or -1 (the CPU's) */
    uint64_t pairs_gpu, pairs_cpu; /* (token, expert) pairs computed on each side so far */
};

/* A placement of n_slots (0 .. n_expert) VRAM slots per MoE layer of e's model. Returns it
 * (vk_tier_free frees it) or NULL on no memory. */
struct vk_tier *vk_tier_new(const struct engine *e, int32_t n_slots);
void vk_tier_free(struct vk_tier *t); /* accepts NULL */

/* The gate, up and down matrices of expert x of layer il in host memory, to fill its slot: the
 * model image's, or read through e's expert cache (waiting for the read; valid until its next
 * lookup). Returns 0 or the lookup's or read's error. */
int vk_tier_expert_mats(struct engine *e, int il, int32_t x, const uint8_t *mats[3]);

/* Splits layer il's routing, ids[n_pairs] (pair p = t k + s: token t's s-th expert), into the
 * pairs whose expert has a slot, written to gpu as three int32 arrays `stride` apart (the slot,
 * the activation row t, the output row p), and the rest, into cpu_sel[n_pairs] (the expert for
 * the CPU's pairs, -1 for the GPU's). Counts both. Returns the GPU's pairs. */
int32_t vk_tier_split(struct vk_tier *t, const struct engine *e, int il, const int32_t *ids,
                      int32_t n_pairs, int32_t *gpu, size_t stride, int32_t *cpu_sel);

/* The CPU's pairs of layer il (cpu_sel) for n_tok tokens whose FFN input rows are x and xn (the
 * residual and its norm, n_embd floats a row, as the device had them): each pair's expert output
 * into out row p (block_moe_experts). Returns 0 or its error. */
int vk_tier_cpu(struct engine *e, int il, int32_t n_tok, const float *x, const float *xn,
                const int32_t *cpu_sel, float *out);

#endif
