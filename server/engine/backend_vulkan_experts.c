/* backend_vulkan_experts.c - the host's half of the GPU's experts on three levels (see
 * backend_vulkan_experts.h): the slots' placement and what they learn, the split of a layer's
 * routing between the GPU and the CPU, and the CPU's part. The CPU computes each pair's expert
 * output exactly as block_moe does (the accumulation contract, ops.h), and the GPU adds the
 * outputs of both sides in the routing's order (gpu_op_moe_sum), so the logits do not depend on
 * the split. Invariant: slot_of and held are inverse maps (held[il][s] = x iff slot_of[il][x] =
 * s), and the policy's entry il n_slots + s is placed (on a list) once its slot was filled. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend_vulkan_experts.h"
#include "cache_policy.h"
#include "expert_cache.h"

/* ---- the placement ---------------------------------------------------------------------------- */

/* Fills the slots with experts 0 .. n_slots - 1 of each MoE layer (moe: NULL for every layer)
 * and places them in the policy (as a guess: counted as no lookup). */
static void tier_place_first(struct vk_tier *t, const bool *moe) {
    for (int il = 0; il < t->n_layer; il++) {
        const bool has = !moe || moe[il];
        for (int32_t x = 0; x < t->n_expert; x++)
            t->slot_of[(size_t)il * (size_t)t->n_expert + (size_t)x] =
                has && x < t->n_slots ? x : -1;
        for (int32_t s = 0; s < t->n_slots; s++) {
            t->held[(size_t)il * (size_t)t->n_slots + (size_t)s] = has ? s : -1;
            if (has && t->policy)
                cache_policy_guess(t->policy, il * t->n_slots + s, il * t->n_expert + s);
        }
    }
}

struct vk_tier *vk_tier_new(int32_t n_layer, int32_t n_expert, int32_t k_used, const bool *moe,
                            int32_t n_slots) {
    const int32_t ne = n_expert > 0 ? n_expert : 1;
    if (n_layer < 1 || k_used < 1)
        return NULL;
    struct vk_tier *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->n_slots = n_slots < 0 ? 0 : n_slots > ne ? ne : n_slots;
    t->n_expert = ne;
    t->n_layer = n_layer;
    t->k_used = k_used;
    const size_t n_keys = (size_t)n_layer * (size_t)ne;
    const size_t n_entries = (size_t)n_layer * (size_t)t->n_slots;
    t->slot_of = calloc(n_keys, sizeof(*t->slot_of));
    t->held = calloc(n_entries ? n_entries : 1, sizeof(*t->held));
    t->mark = calloc((size_t)ne, sizeof(*t->mark));
    t->count = calloc((size_t)ne, sizeof(*t->count));
    if (n_entries > 0 && n_keys <= INT32_MAX && n_entries <= INT32_MAX &&
        (t->policy = cache_policy_new(CACHE_POLICY_FRECENCY, (int32_t)n_entries, (int32_t)n_keys,
                                      k_used)))
        cache_policy_resize(t->policy, (int32_t)n_entries);
    if (!t->slot_of || !t->held || !t->mark || !t->count || (n_entries > 0 && !t->policy)) {
        vk_tier_free(t);
        return NULL;
    }
    tier_place_first(t, moe);
    return t;
}

void vk_tier_free(struct vk_tier *t) {
    if (!t)
        return;
    cache_policy_free(t->policy);
    free(t->slot_of);
    free(t->held);
    free(t->mark);
    free(t->count);
    free(t);
}

int vk_tier_expert_mats(struct engine *e, int il, int32_t x, const uint8_t *mats[3]) {
    const struct model_layer *l = &e->m->layers[il];
    if (e->experts) {
        int rc = expert_cache_begin(e->experts, il, &x, 1);
        return rc < 0 ? rc : expert_cache_get(e->experts, 0, mats, true, NULL);
    }
    if (e->m->experts_on_disk)
        return -EINVAL; /* the matrices are neither in the image nor behind a cache */
    const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
    for (int m = 0; m < 3; m++)
        mats[m] = (const uint8_t *)w[m]->data + (size_t)x * w[m]->mat_stride;
    return 0;
}

/* ---- learning --------------------------------------------------------------------------------- */

struct tier_layer {
    const struct vk_tier *t;
    int il;
};

/* Only a slot of the layer looked up may go. */
static bool tier_can_go(const void *ctx, int32_t entry) {
    const struct tier_layer *c = ctx;
    return entry / c->t->n_slots == c->il;
}

/* Layer il's distinct experts in ids[n_pairs], as a RAM cache's lookup would see them: hits
 * first (their slots touched), then the misses, each queueing a promotion into the slot the
 * policy evicts while the step has room for one. */
static void tier_learn(struct vk_tier *t, int il, const int32_t *ids, int32_t n_pairs) {
    const int32_t *slot = t->slot_of + (size_t)il * (size_t)t->n_expert;
    const struct tier_layer ctx = {t, il};
    t->lookup++;
    if (t->policy)
        cache_policy_cycle(t->policy, il);
    for (int pass = 0; pass < 2; pass++)
        for (int32_t p = 0; p < n_pairs; p++) {
            const int32_t x = ids[p];
            if (x < 0 || x >= t->n_expert || (slot[x] >= 0) != (pass == 0) ||
                t->mark[x] == t->lookup)
                continue;
            t->mark[x] = t->lookup;
            const int32_t key = il * t->n_expert + x;
            if (pass == 0) {
                t->hits++;
                cache_policy_touch(t->policy, il * t->n_slots + slot[x], key, true);
                continue;
            }
            t->misses++;
            const int32_t entry = t->policy && t->n_promote < VK_TIER_PROMOTE_MAX
                                      ? cache_policy_victim(t->policy, tier_can_go, &ctx)
                                      : -1;
            if (entry < 0)
                continue;
            cache_policy_touch(t->policy, entry, key, false);
            t->promote[t->n_promote++] =
                (struct vk_promotion){.il = il, .x = x, .slot = entry - il * t->n_slots};
        }
}

/* Slot s of layer il holds expert x from now on (x -1: nothing). */
static void tier_hold(struct vk_tier *t, int il, int32_t s, int32_t x) {
    int32_t *held = t->held + (size_t)il * (size_t)t->n_slots + (size_t)s;
    int32_t *slot_of = t->slot_of + (size_t)il * (size_t)t->n_expert;
    if (*held >= 0)
        slot_of[*held] = -1;
    if (x >= 0)
        slot_of[x] = s;
    *held = x;
}

void vk_tier_promote(struct vk_tier *t, vk_tier_fill_fn fill, void *ctx) {
    for (int32_t i = 0; i < t->n_promote; i++) {
        const struct vk_promotion *p = &t->promote[i];
        tier_hold(t, p->il, p->slot, -1); /* emptied first: a half-written slot holds nothing */
        if (!fill || fill(ctx, p->il, p->x, p->slot) == 0) {
            tier_hold(t, p->il, p->slot, p->x);
            t->promotions++;
        }
    }
    t->n_promote = 0;
}

/* ---- a layer's exchange ----------------------------------------------------------------------- */

int32_t vk_tier_split(struct vk_tier *t, int il, const int32_t *ids, int32_t n_pairs, int32_t *gpu,
                      size_t stride, int32_t *cpu_sel) {
    const int32_t k = t->k_used, *slot = t->slot_of + (size_t)il * (size_t)t->n_expert;
    int32_t n = 0;
    for (int32_t p = 0; p < n_pairs; p++) {
        const int32_t x = ids[p];
        const int32_t s = x >= 0 && x < t->n_expert ? slot[x] : -1;
        cpu_sel[p] = s >= 0 ? -1 : x;
        if (s < 0)
            continue;
        gpu[n] = s;
        gpu[stride + (size_t)n] = p / k;
        gpu[2 * stride + (size_t)n] = p;
        n++;
    }
    t->pairs_gpu += (uint64_t)n;
    t->pairs_cpu += (uint64_t)(n_pairs - n);
    tier_learn(t, il, ids, n_pairs);
    return n;
}

int32_t vk_tier_transit(struct vk_tier *t, int32_t *cpu_sel, int32_t n_pairs, int32_t min_pairs,
                        int32_t max_experts, vk_transit_pays_fn pays, const void *ctx,
                        int32_t *chosen, int32_t *n_chosen, int32_t *gpu, size_t stride) {
    int32_t cpu_left = 0, n = 0;
    memset(t->count, 0, (size_t)t->n_expert * sizeof(*t->count));
    for (int32_t p = 0; p < n_pairs; p++)
        if (cpu_sel[p] >= 0 && cpu_sel[p] < t->n_expert) {
            t->count[cpu_sel[p]]++;
            cpu_left++;
        }
    *n_chosen = 0;
    while (*n_chosen < max_experts) {
        int32_t best = -1;
        for (int32_t x = 0; x < t->n_expert; x++)
            if (t->count[x] >= min_pairs && (best < 0 || t->count[x] > t->count[best]))
                best = x;
        if (best < 0 || !pays(ctx, *n_chosen, t->count[best], cpu_left))
            break;
        cpu_left -= t->count[best];
        t->count[best] = -1 - *n_chosen; /* taken: its transit slot, encoded below zero */
        chosen[(*n_chosen)++] = best;
    }
    for (int32_t p = 0; p < n_pairs; p++) {
        const int32_t x = cpu_sel[p];
        if (x < 0 || x >= t->n_expert || t->count[x] >= 0)
            continue;
        gpu[n] = -1 - t->count[x];
        gpu[stride + (size_t)n] = p / t->k_used;
        gpu[2 * stride + (size_t)n] = p;
        cpu_sel[p] = -1;
        n++;
    }
    t->pairs_cpu -= (uint64_t)n;
    t->pairs_gpu += (uint64_t)n;
    t->transit_experts += (uint64_t)*n_chosen;
    t->transit_pairs += (uint64_t)n;
    return n;
}

int vk_tier_cpu(struct engine *e, int il, int32_t n_tok, const float *x, const float *xn,
                const int32_t *cpu_sel, float *out) {
    const size_t bytes = (size_t)n_tok * (size_t)e->m->hp.n_embd * sizeof(float);
    memcpy(e->x, x, bytes); /* the lookahead reads x, the experts xn */
    memcpy(e->xn, xn, bytes);
    return block_moe_experts(e, il, cpu_sel, n_tok, out);
}
