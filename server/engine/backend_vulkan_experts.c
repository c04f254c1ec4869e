/* backend_vulkan_experts.c - the host's half of the GPU's experts on three levels (see
 * backend_vulkan_experts.h): the slots' placement, the split of a layer's routing between the
 * GPU and the CPU, and the CPU's part. The CPU computes each pair's expert output exactly as
 * block_moe does (the accumulation contract, ops.h), and the GPU adds the outputs of both sides
 * in the routing's order (gpu_op_moe_sum), so the logits do not depend on the split. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend_vulkan_experts.h"
#include "expert_cache.h"

struct vk_tier *vk_tier_new(const struct engine *e, int32_t n_slots) {
    const struct model_hparams *hp = &e->m->hp;
    const int32_t ne = hp->n_expert > 0 ? hp->n_expert : 1;
    struct vk_tier *t = calloc(1, sizeof(*t));
    if (!t || !(t->slot_of = calloc((size_t)hp->n_layer * (size_t)ne, sizeof(*t->slot_of)))) {
        free(t);
        return NULL;
    }
    t->n_slots = n_slots < 0 ? 0 : n_slots > ne ? ne : n_slots;
    t->n_expert = ne;
    for (size_t i = 0; i < (size_t)hp->n_layer * (size_t)ne; i++) {
        const int32_t x = (int32_t)(i % (size_t)ne);
        t->slot_of[i] = x < t->n_slots ? x : -1;
    }
    return t;
}

void vk_tier_free(struct vk_tier *t) {
    if (!t)
        return;
    free(t->slot_of);
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

int32_t vk_tier_split(struct vk_tier *t, const struct engine *e, int il, const int32_t *ids,
                      int32_t n_pairs, int32_t *gpu, size_t stride, int32_t *cpu_sel) {
    const int32_t k = e->k_used, *slot = t->slot_of + (size_t)il * (size_t)t->n_expert;
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
    return n;
}

int vk_tier_cpu(struct engine *e, int il, int32_t n_tok, const float *x, const float *xn,
                const int32_t *cpu_sel, float *out) {
    const size_t bytes = (size_t)n_tok * (size_t)e->m->hp.n_embd * sizeof(float);
    memcpy(e->x, x, bytes); /* the lookahead reads x, the experts xn */
    memcpy(e->xn, xn, bytes);
    return block_moe_experts(e, il, cpu_sel, n_tok, out);
}
