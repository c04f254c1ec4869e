/* backend_vulkan.c - the engine's steps on a Vulkan device (engine v3's second backend; the CPU's
 * blocks are the first). engine_use_gpu uploads the weights, sizes the activations for n_batch
 * tokens and gives every sequence its K and V rows (and a recurrent model's states and
 * checkpoints) in device memory; from then on engine_step hands each step to engine_vk_step,
 * which records the layers' ops (gpu_ops.h) and sends them to the device every VK_FLUSH_LAYERS
 * layers (gpu_flush), so the device works while the host records the rest; it waits once, at
 * the logits. Routing runs on the device too (gpu_op_route: block_moe's arithmetic); the chosen
 * experts come back for the statistics. Every op follows the accumulation contract (ops.h,
 * quant.h), so the logits are the CPU's bit for bit.
 *
 * The sequences' bookkeeping (n_past, truncation, the prefix reuse, which checkpoint slot holds
 * which position) stays on the host; only their rows move: a context's export reads them back, an
 * import writes them, and a checkpoint's recurrent state and window rows are copied on the device
 * as the host decides. A window layer's rows are a ring, as the host's (sequence.h). Supported
 * here: attention layers (full, gated, or over a sliding window with sinks; each in its own head
 * shape), DeltaNet layers, dense and routed FFNs (shared experts, biases, fused gate_up), every
 * weight type with kernels, and gemma4's layers (backend_vulkan_gemma4.c); a dense FFN streamed
 * from disk and replayed routing stay on the CPU, and engine_use_gpu says so. Routed experts
 * that VRAM does not hold (the budget, or streamed through an expert cache) are computed on the
 * CPU, layer by layer (vk_moe_exchange; the host's half in backend_vulkan_experts.c), and added on
 * the device in the routing's order: the same bits (not for gemma4's fused gate_up experts yet). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_vulkan_experts.h"
#include "backend_vulkan_impl.h"
#include "clock.h"
#include "engine_impl.h"
#include "err.h"
#include "expert_cache.h"
#include "gpu.h"
#include "gpu_ops.h"
#include "quant.h"
#include "threadpool.h"

/* ---- device memory ---------------------------------------------------------------------------- */

/* Room for one more buffer in v->bufs. */
static bool vk_grow(struct engine_vk *v, char *err, size_t err_len) {
    int cap = v->cap_bufs ? 2 * v->cap_bufs : 256;
    struct gpu_buf **b = realloc(v->bufs, (size_t)cap * sizeof(*b));
    if (!b) {
        err_set(err, err_len, "gpu: out of memory");
        return false;
    }
    v->bufs = b;
    v->cap_bufs = cap;
    return true;
}

static struct gpu_buf *vk_buf(struct engine_vk *v, size_t bytes, char *err, size_t err_len) {
    if (v->n_bufs == v->cap_bufs && !vk_grow(v, err, err_len))
        return NULL;
    struct gpu_buf *b = gpu_buf_new(v->dev, bytes ? bytes : 4, err, err_len);
    if (b)
        v->bufs[v->n_bufs++] = b;
    return b;
}

/* A mapped host buffer, freed with the others. */
struct gpu_buf *vk_host(struct engine_vk *v, size_t bytes, char *err, size_t err_len) {
    if (v->n_bufs == v->cap_bufs && !vk_grow(v, err, err_len))
        return NULL;
    struct gpu_buf *b = gpu_buf_new_host(v->dev, bytes, err, err_len);
    if (b)
        v->bufs[v->n_bufs++] = b;
    return b;
}

/* Uploads n bytes at p into a new buffer; *addr gets its address (0 when p is NULL). */
static int vk_upload(struct engine_vk *v, const void *p, size_t n, uint64_t *addr, char *err,
                     size_t err_len) {
    *addr = 0;
    if (!p)
        return 0;
    struct gpu_buf *b = vk_buf(v, n, err, err_len);
    if (!b)
        return -ENOMEM;
    int rc = gpu_buf_write(v->dev, b, 0, p, n);
    if (rc < 0) {
        err_set(err, err_len, "gpu: upload failed: %s", gpu_error(v->dev));
        return rc;
    }
    *addr = gpu_buf_addr(b);
    v->weight_bytes += n;
    return 0;
}

int vk_weight(struct engine_vk *v, const struct weight *w, uint64_t *addr, char *err,
              size_t err_len) {
    if (w->data && !gpu_ops_has_type(&v->ops, w->type)) {
        err_set(err, err_len, "gpu: no kernels for weight type %s", qtype_name(w->type));
        return -ENOTSUP;
    }
    return vk_upload(v, w->data, w->data ? (size_t)w->n_mat * w->mat_bytes : 0, addr, err,
                     err_len);
}

int vk_floats(struct engine_vk *v, const float *p, int64_t n, uint64_t *addr, char *err,
              size_t err_len) {
    return vk_upload(v, p, (size_t)n * sizeof(float), addr, err, err_len);
}

int vk_area(struct engine_vk *v, struct vk_area *a, size_t bytes, char *err, size_t err_len) {
    a->buf = vk_buf(v, bytes, err, err_len);
    if (!a->buf)
        return -ENOMEM;
    a->addr = gpu_buf_addr(a->buf);
    v->act_bytes += bytes;
    return 0;
}

/* The experts' gate and up matrices: apart, or fused (gemma4: one upload of ffn_gate_up_exps,
 * each expert's gate rows then its up rows; the halves' addresses F rows apart, the experts
 * mat_stride apart). */
static int vk_gate_up_exps(struct engine_vk *v, const struct model_layer *l, struct vk_layer *d,
                           char *err, size_t err_len) {
    int rc;
    if (!l->ffn_gate_up_exps.data)
        return (rc = vk_weight(v, &l->ffn_gate_exps, &d->gate_exps, err, err_len)) ? rc
               : vk_weight(v, &l->ffn_up_exps, &d->up_exps, err, err_len);
    if ((rc = vk_weight(v, &l->ffn_gate_up_exps, &d->gate_exps, err, err_len)) < 0)
        return rc;
    d->up_exps = d->gate_exps + l->ffn_gate_exps.mat_bytes;
    return 0;
}

/* Layer il's tensors, in its own head shape, but its routed experts' matrices (vk_experts_upload,
 * vk_slots_fill). */
static int vk_layer_upload(struct engine_vk *v, const struct model *m, int il, char *err,
                           size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    const struct model_layer *l = &m->layers[il];
    struct vk_layer *d = &v->layers[il];
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, NE = hp->n_expert;
    const int64_t q_dim = (int64_t)hp->n_head * l->head_dim;
    const int64_t kv_dim = (int64_t)l->n_head_kv * l->head_dim;
    int rc;
    if ((rc = vk_floats(v, l->attn_norm, E, &d->attn_norm, err, err_len)) ||
        (rc = vk_weight(v, &l->wq, &d->wq, err, err_len)) ||
        (rc = vk_weight(v, &l->wk, &d->wk, err, err_len)) ||
        (rc = vk_weight(v, &l->wv, &d->wv, err, err_len)) ||
        (rc = vk_weight(v, &l->wo, &d->wo, err, err_len)) ||
        (rc = vk_floats(v, l->attn_q_norm, l->head_dim, &d->q_norm, err, err_len)) ||
        (rc = vk_floats(v, l->attn_k_norm, l->head_dim, &d->k_norm, err, err_len)) ||
        (rc = vk_floats(v, l->bq, q_dim, &d->bq, err, err_len)) ||
        (rc = vk_floats(v, l->bk, kv_dim, &d->bk, err, err_len)) ||
        (rc = vk_floats(v, l->bv, kv_dim, &d->bv, err, err_len)) ||
        (rc = vk_floats(v, l->bo, E, &d->bo, err, err_len)) ||
        (rc = vk_floats(v, l->attn_sinks, hp->n_head, &d->sinks, err, err_len)) ||
        (rc = vk_floats(v, l->ffn_norm, E, &d->ffn_norm, err, err_len)))
        return rc;
    if (l->ffn == MODEL_FFN_MOE &&
        ((rc = vk_weight(v, &l->ffn_gate_inp, &d->router, err, err_len)) ||
         (rc = vk_floats(v, l->ffn_gate_inp_b, NE, &d->router_b, err, err_len)) ||
         (rc = vk_floats(v, l->ffn_gate_exps_b, NE * F, &d->gate_exps_b, err, err_len)) ||
         (rc = vk_floats(v, l->ffn_up_exps_b, NE * F, &d->up_exps_b, err, err_len)) ||
         (rc = vk_floats(v, l->ffn_down_exps_b, NE * E, &d->down_exps_b, err, err_len)) ||
         (rc = vk_weight(v, &l->ffn_gate_inp_shexp, &d->shexp_inp, err, err_len)) ||
         (rc = vk_weight(v, &l->ffn_gate_shexp, &d->gate_shexp, err, err_len)) ||
         (rc = vk_weight(v, &l->ffn_up_shexp, &d->up_shexp, err, err_len)) ||
         (rc = vk_weight(v, &l->ffn_down_shexp, &d->down_shexp, err, err_len))))
        return rc;
    if (l->ffn == MODEL_FFN_DENSE &&
        ((rc = vk_weight(v, &l->ffn_gate, &d->gate, err, err_len)) ||
         (rc = vk_weight(v, &l->ffn_up, &d->up, err, err_len)) ||
         (rc = vk_weight(v, &l->ffn_down, &d->down, err, err_len))))
        return rc;
    return 0;
}

/* Every MoE layer's routed experts' matrices, whole (every expert in VRAM). */
static int vk_experts_upload(struct engine_vk *v, const struct model *m, char *err,
                             size_t err_len) {
    int rc = 0;
    for (int il = 0; rc == 0 && il < m->hp.n_layer; il++) {
        const struct model_layer *l = &m->layers[il];
        struct vk_layer *d = &v->layers[il];
        if (l->ffn == MODEL_FFN_MOE &&
            ((rc = vk_gate_up_exps(v, l, d, err, err_len)) ||
             (rc = vk_weight(v, &l->ffn_down_exps, &d->down_exps, err, err_len))))
            return rc;
    }
    return rc;
}

/* Device bytes of one slot in every MoE layer (an expert's gate, up and down matrices). */
static size_t vk_slot_row_bytes(const struct model *m) {
    size_t n = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct model_layer *l = &m->layers[il];
        if (l->ffn == MODEL_FFN_MOE)
            n += l->ffn_gate_exps.mat_bytes + l->ffn_up_exps.mat_bytes +
                 l->ffn_down_exps.mat_bytes;
    }
    return n;
}

static size_t vk_max(size_t a, size_t b) { return a > b ? a : b; }
static size_t vk_min(size_t a, size_t b) { return a < b ? a : b; }

/* Experts a layer's transit uploads for one step, at most (vk_transit). */
#define VK_TRANSIT_MAX 128

/* Bytes one task of a staging copy takes (vk_stage). */
#define VK_STAGE_CHUNK ((size_t)256 << 10)

/* A staging copy on the engine's threads: matrices src[k] of n[k] bytes into dst[k]. */
struct vk_stage_copy {
    uint8_t *dst[3];
    const uint8_t *src[3];
    size_t n[3];
};

static int64_t vk_stage_tasks(size_t n) {
    return (int64_t)((n + VK_STAGE_CHUNK - 1) / VK_STAGE_CHUNK);
}

static void vk_stage_task(void *ctx, int64_t task, int thread) {
    const struct vk_stage_copy *c = ctx;
    (void)thread;
    int k = 0;
    while (k < 2 && task >= vk_stage_tasks(c->n[k]))
        task -= vk_stage_tasks(c->n[k++]);
    const size_t at = (size_t)task * VK_STAGE_CHUNK;
    memcpy(c->dst[k] + at, c->src[k] + at, vk_min(VK_STAGE_CHUNK, c->n[k] - at));
}

/* Copies c's matrices in chunks across e's thread pool (the caller's thread taking part). */
static void vk_stage(struct engine *e, const struct vk_stage_copy *c) {
    threadpool_run(e->tp, vk_stage_tasks(c->n[0]) + vk_stage_tasks(c->n[1]) +
                              vk_stage_tasks(c->n[2]), vk_stage_task, (void *)c);
}

/* Measures what a transit's expert costs on each side: staging into the mapped buffer on the
 * engine's threads (the host's), and the copy into device memory (the device's). */
static int vk_transit_measure(struct engine *e, struct engine_vk *v) {
    /* the gate run into the up run: copies of the sizes a step makes */
    const size_t n = vk_min(v->transit_off[1], v->transit_off[2] - v->transit_off[1]);
    uint8_t *h = gpu_buf_host(v->h_transit);
    memset(h, 0, n);
    const struct vk_stage_copy c = {{h + v->transit_off[1], NULL, NULL}, {h, NULL, NULL},
                                    {n, 0, 0}};
    double t0 = clock_now_s();
    vk_stage(e, &c);
    const double staged = clock_now_s() - t0;
    t0 = clock_now_s();
    if (gpu_begin(v->dev) < 0)
        return -EIO;
    gpu_copy(v->dev, v->transit_bufs[0], 0, v->h_transit, 0, n);
    if (gpu_submit(v->dev) < 0)
        return -EIO;
    const double uploaded = clock_now_s() - t0;
    v->stage_bps = (double)n / (staged > 1e-9 ? staged : 1e-9);
    v->upload_bps = (double)n / (uploaded > 1e-9 ? uploaded : 1e-9);
    return 0;
}

/* A list of up to n_batch k pairs sent to the device: *dev the products' [3][B K] int32 (matrix,
 * activation row, output row) and their group table over n_ids matrices, *host what the host
 * writes there ([3][B K] int32, mapped). */
static int vk_pair_lists(struct engine *e, struct engine_vk *v, struct vk_area *dev,
                         struct gpu_buf **host, int32_t n_ids, char *err, size_t err_len) {
    const size_t BK = (size_t)e->p.n_batch * (size_t)e->k_used;
    int rc = vk_area(v, dev, 4 * BK * 4 + gpu_pair_groups_bytes((int32_t)BK, n_ids), err,
                     err_len);
    if (rc < 0)
        return rc;
    return (*host = vk_host(v, 3 * BK * 4, err, err_len)) ? 0 : -ENOMEM;
}

/* Records the copies of a pair list's first n pairs (vk_pair_lists) to the device, and a
 * barrier. */
static void vk_pairs_send(struct engine *e, const struct vk_area *dev, struct gpu_buf *host,
                          int32_t n) {
    const size_t BK = (size_t)e->p.n_batch * (size_t)e->k_used;
    for (size_t a = 0; a < 3; a++)
        gpu_copy(e->vk->dev, dev->buf, a * BK * 4, host, a * BK * 4, (size_t)n * 4);
    vk_sync(e->vk);
}

/* A batch's transit (vk_transit): its device slots and host staging, n_transit experts of the
 * widest MoE layer's sizes (VK_TRANSIT_MAX, at most a sixteenth of the budget's room) with their
 * bias rows where the experts have biases, and the speeds it decides by. None where
 * engine_params.gpu_transit is -1, steps are of one token, or the room holds fewer than two. */
static int vk_transit_buffers(struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const struct model *m = e->m;
    const size_t B = (size_t)e->p.n_batch;
    size_t widest[6] = {0, 0, 0, 0, 0, 0}; /* the three matrices, then their bias rows */
    if (e->p.gpu_transit < 0 || B < 2)
        return 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct model_layer *l = &m->layers[il];
        if (l->ffn != MODEL_FFN_MOE)
            continue;
        const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
        const float *b[3] = {l->ffn_gate_exps_b, l->ffn_up_exps_b, l->ffn_down_exps_b};
        for (int k = 0; k < 3; k++) {
            widest[k] = vk_max(widest[k], w[k]->mat_bytes);
            if (b[k])
                widest[3 + k] = vk_max(widest[3 + k], (size_t)w[k]->n_out * sizeof(float));
        }
    }
    /* at most a sixteenth of the room left, so that the slots keep the most of it; none where
     * that holds fewer than two experts */
    const uint64_t used = gpu_used_bytes(v->dev), budget = gpu_budget_bytes(v->dev);
    const uint64_t room = budget > used ? budget - used : 0;
    size_t per = 0;
    for (int k = 0; k < 6; k++)
        per += widest[k];
    int32_t n = m->hp.n_expert < VK_TRANSIT_MAX ? m->hp.n_expert : VK_TRANSIT_MAX;
    if (per > 0 && room / 16 / per < (uint64_t)n)
        n = (int32_t)(room / 16 / per);
    if (n < 2)
        return 0;
    size_t host = 0;
    for (int k = 0; k < 6; k++) {
        v->transit_off[k] = host;
        host += (size_t)n * widest[k];
        if (widest[k] && !(v->transit_bufs[k] = vk_buf(v, (size_t)n * widest[k], err, err_len)))
            return -ENOMEM;
        v->act_bytes += (size_t)n * widest[k];
    }
    int rc = vk_pair_lists(e, v, &v->transit_pairs, &v->h_transit_pairs, n, err, err_len);
    if (rc < 0)
        return rc;
    if (!(v->h_transit = vk_host(v, host, err, err_len)))
        return -ENOMEM;
    if (!(v->transit_x = calloc((size_t)n, sizeof(*v->transit_x)))) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    if ((rc = vk_transit_measure(e, v)) < 0) {
        err_set(err, err_len, "gpu: the transit's upload failed: %s", gpu_error(v->dev));
        return rc;
    }
    v->n_transit = n;
    return 0;
}

/* The exchange's buffers for n_batch tokens (tier_pairs, h_rows, h_tier_pairs, h_exp, cpu_sel). */
static int vk_tier_buffers(struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const size_t B = (size_t)e->p.n_batch, K = (size_t)e->k_used, D = (size_t)e->m->hp.n_embd;
    /* the slots are at most the experts */
    int rc = vk_pair_lists(e, v, &v->tier_pairs, &v->h_tier_pairs, v->tier->n_expert, err,
                           err_len);
    if (rc < 0)
        return rc;
    if (!(v->h_rows = vk_host(v, 2 * B * D * 4, err, err_len)) ||
        !(v->h_exp = vk_host(v, B * K * D * 4, err, err_len)))
        return -ENOMEM;
    if (!(v->cpu_sel = calloc(B * K, sizeof(*v->cpu_sel)))) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    return vk_transit_buffers(e, v, err, err_len);
}

/* Writes one expert's matrices into slot `slot` of layer il of model m. Returns 0 or -EIO. */
static int vk_slot_write(struct engine_vk *v, const struct model *m, int il, int32_t slot,
                         const uint8_t *const mats[3]) {
    const struct model_layer *l = &m->layers[il];
    const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
    for (int k = 0; k < 3; k++)
        if (gpu_buf_write(v->dev, v->slot_bufs[(size_t)il * 3 + (size_t)k],
                          (size_t)slot * w[k]->mat_bytes, mats[k], w[k]->mat_bytes) < 0)
            return -EIO;
    return 0;
}

/* vk_tier_upload_fn for a promotion: ctx is the engine. */
/* A placement of n_slots VRAM slots in each of e's model's MoE layers, or NULL on no memory. */
static struct vk_tier *vk_tier_of(const struct engine *e, int32_t n_slots) {
    const struct model_hparams *hp = &e->m->hp;
    bool *moe = calloc((size_t)hp->n_layer, sizeof(*moe));
    if (!moe)
        return NULL;
    for (int il = 0; il < hp->n_layer; il++)
        moe[il] = e->m->layers[il].ffn == MODEL_FFN_MOE;
    struct vk_tier *t = vk_tier_new(hp->n_layer, hp->n_expert, e->k_used, moe, n_slots);
    free(moe);
    return t;
}

static int vk_slot_promote(void *ctx, int il, int32_t x, int32_t slot) {
    struct engine *e = ctx;
    const uint8_t *mats[3];
    int rc = vk_tier_expert_mats(e, il, x, mats);
    return rc < 0 ? rc : vk_slot_write(e->vk, e->m, il, slot, mats);
}

/* 0 when the device has kernels for the types of MoE layer il's gate, up and down experts of m,
 * else -ENOTSUP with the type named in err. */
static int vk_expert_types(const struct engine_vk *v, int il, const struct model *m, char *err,
                           size_t err_len) {
    const struct model_layer *l = &m->layers[il];
    const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
    for (int k = 0; k < 3; k++)
        if (!gpu_ops_has_type(&v->ops, w[k]->type)) {
            err_set(err, err_len, "gpu: no kernels for weight type %s", qtype_name(w[k]->type));
            return -ENOTSUP;
        }
    return 0;
}

/* Layer il's slots: its gate, up and down matrices for n_slots experts each, filled with the
 * experts the placement gives them (from the image, or read through the expert cache). */
static int vk_slots_fill(struct engine *e, struct engine_vk *v, int il, char *err,
                         size_t err_len) {
    const struct model_layer *l = &e->m->layers[il];
    const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
    uint64_t *addr[3] = {&v->layers[il].gate_exps, &v->layers[il].up_exps,
                         &v->layers[il].down_exps};
    struct gpu_buf **b = v->slot_bufs + (size_t)il * 3;
    const int32_t n = v->tier->n_slots;
    if (vk_expert_types(v, il, e->m, err, err_len) < 0)
        return -ENOTSUP;
    for (int m = 0; m < 3; m++) {
        if (!(b[m] = vk_buf(v, (size_t)n * w[m]->mat_bytes, err, err_len)))
            return -ENOMEM;
        *addr[m] = gpu_buf_addr(b[m]);
        v->slot_bytes += (size_t)n * w[m]->mat_bytes;
        v->weight_bytes += (size_t)n * w[m]->mat_bytes;
    }
    for (int32_t slot = 0; slot < n; slot++) {
        const int32_t x = v->tier->held[(size_t)il * (size_t)n + (size_t)slot];
        const uint8_t *mats[3];
        int rc = x < 0 ? 0 : vk_tier_expert_mats(e, il, x, mats);
        if (rc < 0) {
            err_set(err, err_len, "gpu: expert %d of layer %d could not be read for its slot: %s",
                    x, il, strerror(-rc));
            return rc;
        }
        if (x >= 0 && (rc = vk_slot_write(v, e->m, il, slot, mats)) < 0) {
            err_set(err, err_len, "gpu: upload failed: %s", gpu_error(v->dev));
            return rc;
        }
    }
    return 0;
}

/* Whether a MoE layer of m keeps its experts' gate and up as one fused tensor (gemma4): the three
 * levels' slots do not take those yet. */
static bool vk_fused_experts(const struct model *m) {
    for (int il = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].ffn_gate_up_exps.tensor)
            return true;
    return false;
}

/* On unified memory with the experts streamed: the expert cache's slots move into a host-visible
 * arena the kernels address, where the SSD's reads land and the GPU computes every routed expert
 * in place (vk_moe_cached): nothing is copied, and the CPU computes none. Returns 0, 1 where the
 * device will not map that much memory in one buffer (the three levels instead), or an error. */
static int vk_cache_place(struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const struct model *m = e->m;
    const size_t NE = (size_t)m->hp.n_expert;
    for (int il = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].ffn == MODEL_FFN_MOE && vk_expert_types(v, il, m, err, err_len) < 0)
            return -ENOTSUP;
    const size_t bytes = expert_cache_mem_bytes(e->experts);
    struct gpu_buf *arena = vk_host(v, bytes + EXPERT_IO_ALIGN, err, err_len);
    if (!arena)
        return 1;
    int rc = vk_pair_lists(e, v, &v->tier_pairs, &v->h_tier_pairs, (int32_t)NE, err, err_len);
    if (rc < 0)
        return rc;
    if (!(v->h_mats = vk_host(v, 3 * NE * 8, err, err_len)))
        return -ENOMEM;
    v->cache_pos = malloc(NE * sizeof(*v->cache_pos));
    v->cache_union = malloc(NE * sizeof(*v->cache_union));
    if (!v->cache_pos || !v->cache_union) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    uint8_t *host = gpu_buf_host(arena);
    const size_t pad = (EXPERT_IO_ALIGN - (uintptr_t)host % EXPERT_IO_ALIGN) % EXPERT_IO_ALIGN;
    if ((rc = expert_cache_rehome(e->experts, host + pad, bytes)) < 0) {
        err_set(err, err_len, "gpu: the expert cache could not move into device memory: %s",
                strerror(-rc));
        return rc;
    }
    v->cache = e->experts;
    v->arena_host = host + pad;
    v->arena_dev = gpu_buf_addr(arena) + pad;
    v->arena_bytes = bytes;
    return 0;
}

/* The routed experts after everything else is placed: every one in VRAM where the engine asks
 * for all (gpu_expert_slots 0), the model image holds them and the budget leaves room; otherwise
 * the three levels, with as many slots per MoE layer as asked and the room allows (0 too: every
 * routed expert on the CPU). */
static int vk_experts_place(struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const struct model *m = e->m;
    const int32_t ne = m->hp.n_expert, ask = e->p.gpu_expert_slots;
    if (ne <= 0)
        return 0;
    const uint64_t used = gpu_used_bytes(v->dev), budget = gpu_budget_bytes(v->dev);
    const size_t per = vk_slot_row_bytes(m);
    const uint64_t room = budget > used ? budget - used : 0;
    int32_t n = ask == 0 ? ne : ask < 0 ? 0 : ask < ne ? ask : ne;
    const bool image = !m->experts_on_disk && !e->experts;
    if (image && n == ne && (per == 0 || room >= (uint64_t)per * (uint64_t)ne))
        return vk_experts_upload(v, m, err, err_len);
    if (e->experts && gpu_get_info(v->dev)->unified && !vk_fused_experts(m)) {
        int rc = vk_cache_place(e, v, err, err_len);
        if (rc <= 0)
            return rc;
    }
    if (vk_fused_experts(m)) {
        err_set(err, err_len, "gpu: the experts do not fit in VRAM, and their fused gate_up is not "
                              "on three levels yet");
        return -ENOSPC;
    }
    if (!(v->tier = vk_tier_of(e, 0))) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    int rc = vk_tier_buffers(e, v, err, err_len); /* first: the slots take what is left */
    if (rc < 0)
        return rc;
    const uint64_t left = budget > gpu_used_bytes(v->dev) ? budget - gpu_used_bytes(v->dev) : 0;
    if (per > 0 && left / per < (uint64_t)n)
        n = (int32_t)(left / per);
    vk_tier_free(v->tier);
    if (!(v->tier = vk_tier_of(e, n)) ||
        !(v->slot_bufs = calloc((size_t)m->hp.n_layer * 3, sizeof(*v->slot_bufs)))) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    for (int il = 0; rc == 0 && n > 0 && il < m->hp.n_layer; il++)
        if (m->layers[il].ffn == MODEL_FFN_MOE)
            rc = vk_slots_fill(e, v, il, err, err_len);
    return rc;
}

/* Why the model cannot run on the GPU here, or NULL. */
static const char *vk_unsupported(const struct engine *e) {
    const struct model *m = e->m;
    if (vk_fused_experts(m) && (m->experts_on_disk || e->experts || e->p.gpu_expert_slots != 0))
        return "its experts' fused gate_up is not on three levels (VRAM, RAM, SSD) yet";
    if (m->experts_on_disk && m->hp.n_expert <= 0)
        return "its dense FFN streams from disk";
    if (m->experts_on_disk && !e->experts)
        return "its experts are on disk and no expert cache is attached";
    if (e->replay)
        return "routing is replayed";
    return NULL;
}

/* The widest FFN row of any layer (gemma4's layers differ): dense, shared expert, routed. */
static size_t vk_ff_max(const struct model *m) {
    const struct model_hparams *hp = &m->hp;
    size_t f = vk_max(vk_max((size_t)hp->n_ff, (size_t)hp->n_ff_exp), (size_t)hp->n_ff_shexp);
    for (int il = 0; il < hp->n_layer; il++)
        f = vk_max(f, vk_max((size_t)m->layers[il].ffn_gate.n_out,
                             (size_t)m->layers[il].ffn_gate_shexp.n_out));
    return f;
}

/* Each sequence's checkpoint slots for its window layers' rows (v->tails stays NULL for a model
 * without window layers): the rings' last rows at a checkpoint, which a rollback past what the
 * rings still hold puts back (engine_vk_rec_checkpoint, engine_vk_rec_follow). */
static int vk_tails_new(const struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const struct sequence *s0 = e->seqs[0];
    const size_t n = (size_t)e->p.n_seq * (size_t)s0->shape.n_checkpoints;
    if (s0->n_swa_layer == 0 || n == 0)
        return 0;
    if (!(v->tails = calloc(n, sizeof(*v->tails)))) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(v->tails[i] = vk_buf(v, s0->tail_bytes, err, err_len)))
            return -ENOMEM;
        v->kv_bytes += s0->tail_bytes;
    }
    return 0;
}

/* The activations for n_batch tokens, the sequences' rows, the logits' rows. */
static int vk_activations(struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const struct model_hparams *hp = &e->m->hp;
    const size_t B = (size_t)e->p.n_batch, K = (size_t)e->k_used, D = (size_t)hp->n_embd;
    const size_t F = vk_ff_max(e->m);
    const size_t Q = 2 * (size_t)e->q_dim, KV = (size_t)e->kv_dim;
    const size_t wide = vk_max(vk_max(D, F), Q); /* an act row is at most 4 bytes an element */
    const size_t NE = (size_t)(hp->n_expert > 0 ? hp->n_expert : 1);
    v->logit_rows = e->p.n_batch < 16 ? e->p.n_batch : 16;
    int rc;
    if ((rc = vk_area(v, &v->x, B * D * 4, err, err_len)) ||
        (rc = vk_area(v, &v->xn, B * D * 4, err, err_len)) ||
        (rc = vk_area(v, &v->y, B * D * 4, err, err_len)) ||
        (rc = vk_area(v, &v->q, B * Q * 4, err, err_len)) ||
        (rc = vk_area(v, &v->k, B * KV * 4, err, err_len)) ||
        (rc = vk_area(v, &v->v, B * KV * 4, err, err_len)) ||
        (rc = vk_area(v, &v->heads, B * Q * 4, err, err_len)) ||
        (rc = vk_area(v, &v->act_in, B * (wide * 4 + 64), err, err_len)) ||
        (rc = vk_area(v, &v->act_up, B * (wide * 4 + 64), err, err_len)) ||
        (rc = vk_area(v, &v->act_hid, B * K * (wide * 4 + 64), err, err_len)) ||
        (rc = vk_area(v, &v->g, vk_max(B * K * F, B * NE) * 4, err, err_len)) ||
        (rc = vk_area(v, &v->u, B * K * F * 4, err, err_len)) ||
        (rc = vk_area(v, &v->d, B * K * D * 4, err, err_len)) ||
        (rc = vk_area(v, &v->router, B * NE * 4, err, err_len)) ||
        (rc = vk_area(v, &v->shexp, B * D * 4, err, err_len)) ||
        (rc = vk_area(v, &v->shexp_gate, B * 4, err, err_len)) ||
        (rc = vk_area(v, &v->rope_cs, B * (size_t)hp->n_rot * 4, err, err_len)) ||
        (rc = vk_area(v, &v->logits, (size_t)v->logit_rows * (size_t)hp->n_vocab * 4, err,
                      err_len)) ||
        (rc = vk_area(v, &v->attn, gpu_attn_scratch_bytes(e->p.n_batch, hp->n_head, e->p.n_ctx),
                      err, err_len)) ||
        (rc = vk_area(v, &v->pairs, 4 * B * K * 4 + gpu_pair_groups_bytes((int32_t)(B * K),
                                                                          (int32_t)NE),
                      err, err_len)))
        return rc;
    if (!(v->h_in = vk_host(v, B * (D + (size_t)hp->n_rot) * 4, err, err_len)) ||
        !(v->h_routes = vk_host(v, (size_t)hp->n_layer * B * K * 4, err, err_len)) ||
        !(v->h_logits = vk_host(v, (size_t)v->logit_rows * (size_t)hp->n_vocab * 4, err, err_len)))
        return -ENOMEM;
    const struct sequence *s0 = e->seqs[0];
    const int32_t n_kv = s0->shape.n_kv_layer;
    v->kv = calloc((size_t)e->p.n_seq * (size_t)(n_kv > 0 ? n_kv : 1), sizeof(*v->kv));
    if (!v->kv) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    for (int32_t s = 0; s < e->p.n_seq; s++)
        for (int32_t il = 0; il < n_kv; il++) {
            const size_t bytes = 2 * (size_t)s0->rows[il] * s0->kv_row_bytes;
            struct gpu_buf *b = vk_buf(v, bytes, err, err_len);
            if (!b)
                return -ENOMEM;
            v->kv[(size_t)s * (size_t)n_kv + (size_t)il] = b;
            v->kv_bytes += bytes;
        }
    return vk_tails_new(e, v, err, err_len);
}

/* ---- the recurrent layers' memory (qwen35*) ------------------------------------------------- */

static void vk_rec_free(struct vk_rec *r) {
    if (!r)
        return;
    free(r->layers);
    free(r->state);
    free(r->ckpt);
    free(r);
}

/* Layer il's DeltaNet tensors. */
static int vk_dn_upload(struct engine_vk *v, const struct engine *e, int il, char *err,
                        size_t err_len) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    struct vk_dn_layer *d = &v->rec->layers[il];
    const int64_t Hv = hp->ssm_dt_rank;
    int rc;
    if ((rc = vk_weight(v, &l->ssm_qkv, &d->qkv, err, err_len)) ||
        (rc = vk_weight(v, &l->ssm_z, &d->z, err, err_len)) ||
        (rc = vk_weight(v, &l->ssm_beta, &d->beta, err, err_len)) ||
        (rc = vk_weight(v, &l->ssm_alpha, &d->alpha, err, err_len)) ||
        (rc = vk_weight(v, &l->ssm_out, &d->out, err, err_len)) ||
        (rc = vk_floats(v, l->ssm_conv1d, (int64_t)e->conv_ch * hp->ssm_d_conv, &d->conv1d, err,
                        err_len)) ||
        (rc = vk_floats(v, l->ssm_dt_bias, Hv, &d->dt_bias, err, err_len)) ||
        (rc = vk_floats(v, l->ssm_a, Hv, &d->a, err, err_len)) ||
        (rc = vk_floats(v, l->ssm_norm, hp->ssm_d_state, &d->norm, err, err_len)))
        return rc;
    return 0;
}

/* The recurrent layers' tensors, scratch, and every sequence's state and checkpoint slots (v->rec
 * stays NULL for a model without recurrent layers). The new buffers are zero: the state of a
 * sequence with no tokens. */
static int vk_rec_new(struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const struct sequence *s0 = e->seqs[0];
    if (!sequence_is_recurrent(s0))
        return 0;
    const struct model_hparams *hp = &e->m->hp;
    const size_t B = (size_t)e->p.n_batch, C = (size_t)e->conv_ch, V = (size_t)e->ssm_v_dim;
    const size_t Hv = (size_t)hp->ssm_dt_rank, n_seq = (size_t)e->p.n_seq;
    struct vk_rec *r = calloc(1, sizeof(*r));
    if (!r) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    v->rec = r;
    r->n_ckpt = s0->shape.n_checkpoints;
    r->state_bytes = s0->rec_floats * sizeof(float);
    if (!(r->layers = calloc((size_t)hp->n_layer, sizeof(*r->layers))) ||
        !(r->state = calloc(n_seq, sizeof(*r->state))) ||
        !(r->ckpt = calloc(n_seq * (size_t)(r->n_ckpt > 0 ? r->n_ckpt : 1), sizeof(*r->ckpt)))) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    for (int il = 0; rc == 0 && il < hp->n_layer; il++)
        if (e->m->layers[il].mixer == MODEL_MIXER_DELTANET)
            rc = vk_dn_upload(v, e, il, err, err_len);
    if (rc < 0 || (rc = vk_area(v, &r->qkv, B * C * 4, err, err_len)) ||
        (rc = vk_area(v, &r->conv, B * C * 4, err, err_len)) ||
        (rc = vk_area(v, &r->z, B * V * 4, err, err_len)) ||
        (rc = vk_area(v, &r->beta, B * Hv * 4, err, err_len)) ||
        (rc = vk_area(v, &r->gate, B * Hv * 4, err, err_len)))
        return rc;
    for (size_t i = 0; i < n_seq * (size_t)(r->n_ckpt + 1); i++) {
        struct gpu_buf *b = vk_buf(v, r->state_bytes, err, err_len);
        if (!b)
            return -ENOMEM;
        if (i < n_seq)
            r->state[i] = b;
        else
            r->ckpt[i - n_seq] = b;
        v->kv_bytes += r->state_bytes;
    }
    return 0;
}

void engine_vk_free(struct engine_vk *v) {
    if (!v)
        return;
    /* the expert cache's slots go back to memory of its own before the arena goes */
    if (v->cache && expert_cache_rehome(v->cache, NULL, 0) < 0)
        fprintf(stderr, "gpu: the expert cache could not leave device memory: out of memory\n");
    for (int i = 0; i < v->n_bufs; i++)
        gpu_buf_free(v->dev, v->bufs[i]);
    gpu_ops_release(&v->ops);
    free(v->bufs);
    free(v->layers);
    free(v->kv);
    free(v->tails);
    free(v->cpu_sel);
    free(v->cache_pos);
    free(v->cache_union);
    free(v->slot_bufs);
    free(v->transit_x);
    free(v->trace_rows);
    vk_tier_free(v->tier);
    vk_rec_free(v->rec);
    vk_gemma4_free(v->g4);
    free(v);
}

int engine_use_gpu(struct engine *e, struct gpu *g, char *err, size_t err_len) {
    const char *why = vk_unsupported(e);
    if (why) {
        err_set(err, err_len, "gpu: the model stays on the CPU: %s", why);
        return -ENOTSUP;
    }
    struct engine_vk *v = calloc(1, sizeof(*v));
    if (!v || !(v->layers = calloc((size_t)e->m->hp.n_layer, sizeof(*v->layers)))) {
        free(v);
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    v->dev = g;
    const char *prof = getenv("SNIPER_GPU_PROFILE");
    v->profile = prof && (strcmp(prof, "1") == 0 || strcmp(prof, "2") == 0);
    v->stamp_steps = v->profile && prof[0] == '2';
    int rc = gpu_ops_init(&v->ops, g, err, err_len);
    if (rc < 0) {
        free(v->layers);
        free(v);
        return rc;
    }
    const struct model *m = e->m;
    for (int il = 0; rc == 0 && il < m->hp.n_layer; il++)
        rc = vk_layer_upload(v, m, il, err, err_len);
    if (rc == 0)
        rc = vk_floats(v, m->output_norm, m->hp.n_embd, &v->output_norm, err, err_len);
    if (rc == 0)
        rc = vk_weight(v, &m->output, &v->output, err, err_len);
    if (rc == 0)
        rc = vk_activations(e, v, err, err_len);
    if (rc == 0)
        rc = vk_rec_new(e, v, err, err_len);
    if (rc == 0 && m->hp.arch == MODEL_ARCH_GEMMA4)
        rc = vk_gemma4_new(e, v, err, err_len);
    if (rc == 0)
        rc = vk_experts_place(e, v, err, err_len);
    if (rc < 0) {
        engine_vk_free(v);
        return rc;
    }
    /* the sequences' rows now live on the device: what the host held is gone from the model's
     * point of view */
    for (int32_t s = 0; s < e->p.n_seq; s++)
        sequence_reset(e->seqs[s]);
    if (e->vk && v->cache)
        e->vk->cache = NULL; /* the cache moved on into v's arena: not back out of it */
    engine_vk_free(e->vk);
    e->vk = v;
    return 0;
}

void engine_gpu_bytes(const struct engine *e, size_t *weights, size_t *kv, size_t *act) {
    const struct engine_vk *v = e->vk;
    *weights = v ? v->weight_bytes : 0;
    *kv = v ? v->kv_bytes : 0;
    *act = v ? v->act_bytes : 0;
}

void engine_gpu_experts(const struct engine *e, struct engine_gpu_experts *out) {
    const struct engine_vk *v = e->vk;
    const struct vk_tier *t = v ? v->tier : NULL;
    const int32_t ne = e->m->hp.n_expert;
    *out = (struct engine_gpu_experts){
        .n_expert = ne,
        .n_slots = !v || v->cache ? 0 : t ? t->n_slots : ne,
        .exchange = t != NULL,
        .cached = (t != NULL || (v && v->cache)) && e->experts != NULL,
        .in_place = v && v->cache,
        .slot_bytes = v ? v->slot_bytes : 0,
        .pairs_gpu = t ? t->pairs_gpu : v ? v->cache_pairs : 0,
        .pairs_cpu = t ? t->pairs_cpu : 0,
        .hits = t ? t->hits : 0,
        .misses = t ? t->misses : 0,
        .promotions = t ? t->promotions : 0,
        .transit_experts = t ? t->transit_experts : 0,
        .transit_pairs = t ? t->transit_pairs : 0,
    };
}

bool engine_on_gpu(const struct engine *e) { return e->vk != NULL; }

bool engine_vk_device_failed(const struct engine *e) { return e->vk && !e->vk->cpu_failed; }

/* ---- the step --------------------------------------------------------------------------------- */

/* Names the ops recorded from now on, for the profile. */
void vk_label(struct engine_vk *v, const char *label) {
    v->label = label;
}

/* Writes a timestamp for the profile, its interval going to the current label. */
static void vk_stamp(struct engine_vk *v) {
    int i = gpu_stamp(v->dev);
    if (i >= 0)
        v->stamp_label[i] = v->label;
}

/* Records a barrier: what follows sees what was recorded before. */
void vk_sync(struct engine_vk *v) {
    if (gpu_barrier(v->dev) && v->profile && !v->stamp_steps)
        vk_stamp(v);
}

/* Starts a recording (and its first timestamp). Returns 0 or -EIO. */
int vk_begin(struct engine_vk *v) {
    if (gpu_begin(v->dev) < 0)
        return -EIO;
    vk_label(v, "(start)");
    if (v->profile)
        vk_stamp(v);
    return 0;
}

/* Submits the recording and adds its timestamps' intervals to the profile. Returns 0 or -EIO. */
int vk_submit(struct engine_vk *v) {
    if (gpu_submit(v->dev) < 0)
        return -EIO;
    const double *ns = v->stamp_ns;
    const int n = v->profile ? gpu_stamps_read(v->dev, v->stamp_ns, GPU_STAMPS) : 0;
    for (int i = 1; i < n; i++) {
        int k = 0;
        while (k < 32 && v->prof[k].label && v->prof[k].label != v->stamp_label[i])
            k++;
        if (k == 32)
            continue;
        v->prof[k].label = v->stamp_label[i];
        v->prof[k].ns += ns[i] - ns[i - 1];
        v->prof[k].n++;
    }
    return 0;
}

/* Forgets the quantized rows made from x (x's rows are about to change). */
static void vk_quant_forget_src(struct engine_vk *v, uint64_t x) {
    if (v->quant[1].src == x)
        v->quant[1].src = 0;
    if (v->quant[0].src == x) {
        v->quant[0] = v->quant[1];
        v->quant[1].src = 0;
    }
}

/* Notes that dst holds n_tok rows from x quantized for products with weights of type wtype,
 * stride bytes apart (what vk_quantize looks for), as the newest of the two; whatever dst held
 * or was made from x before is forgotten. */
static void vk_quant_remember(struct engine_vk *v, uint64_t x, enum qtype wtype, int32_t n_tok,
                              uint64_t dst, size_t stride) {
    vk_quant_forget_src(v, x);
    if (v->quant[0].src && v->quant[0].dst != dst)
        v->quant[1] = v->quant[0];
    else if (v->quant[1].dst == dst)
        v->quant[1].src = 0;
    v->quant[0] = (struct vk_quant_rows){.src = x, .dst = dst,
                                         .fmt = quant_kernels(wtype)->vec_dot_type,
                                         .rows = n_tok, .stride = stride};
}

/* Quantizes n_tok rows of n floats at x (x_stride apart) into w's activation format in dst,
 * unless the same rows are there already; *stride gets the rows' bytes apart. */
static int vk_quantize(struct engine_vk *v, enum qtype wtype, uint64_t x, size_t x_stride,
                       int64_t n, int32_t n_tok, uint64_t dst, size_t *stride) {
    const enum qtype fmt = quant_kernels(wtype)->vec_dot_type;
    for (int i = 0; i < 2; i++) {
        const struct vk_quant_rows *r = &v->quant[i];
        if (r->src == x && r->fmt == fmt && r->rows == n_tok && r->dst == dst) {
            *stride = r->stride;
            return 0;
        }
    }
    vk_sync(v); /* products recorded before may still read dst */
    vk_label(v, "quantize");
    int rc = gpu_op_quantize(&v->ops, wtype, x, x_stride, dst, stride, n, n_tok);
    if (rc < 0)
        return rc;
    vk_sync(v);
    vk_quant_remember(v, x, wtype, n_tok, dst, *stride);
    return 0;
}

/* The buffer of v that holds device address addr, or NULL. */
static const struct gpu_buf *vk_buf_at(const struct engine_vk *v, uint64_t addr) {
    for (int i = 0; i < v->n_bufs; i++) {
        const uint64_t a = gpu_buf_addr(v->bufs[i]);
        if (addr >= a && addr - a < gpu_buf_bytes(v->bufs[i]))
            return v->bufs[i];
    }
    return NULL;
}

/* Room for `bytes` of trace rows (a trace's first step grows it; trace mode only). */
static int vk_trace_room(struct engine_vk *v, size_t bytes) {
    if (bytes <= v->trace_cap)
        return 0;
    float *p = realloc(v->trace_rows, bytes);
    if (!p)
        return -ENOMEM;
    v->trace_rows = p;
    v->trace_cap = bytes;
    return 0;
}

int vk_trace(struct engine *e, const char *op, uint64_t addr, int32_t n_rows, int64_t n,
             size_t stride) {
    struct engine_vk *v = e->vk;
    if (!e->trace_fn || n_rows <= 0)
        return 0;
    const struct gpu_buf *b = vk_buf_at(v, addr);
    const size_t bytes = ((size_t)(n_rows - 1) * stride + (size_t)n) * sizeof(float);
    if (!b)
        return -EINVAL;
    const size_t off = (size_t)(addr - gpu_buf_addr(b));
    if (bytes > gpu_buf_bytes(b) - off)
        return -EINVAL;
    int rc = vk_trace_room(v, bytes);
    if (rc < 0)
        return rc;
    vk_sync(v);
    if (vk_submit(v) < 0)
        return -EIO;
    rc = gpu_buf_read(v->dev, b, off, v->trace_rows, bytes);
    if (vk_begin(v) < 0 || rc < 0)
        return -EIO;
    e->trace_fn(e->trace_ctx, e->trace_il, op, v->trace_rows, n_rows, n, stride);
    return 0;
}

int vk_trace_d(struct engine *e, const char *op, uint64_t addr, int32_t n_tok) {
    const size_t D = (size_t)e->m->hp.n_embd;
    return vk_trace(e, op, addr, n_tok, (int64_t)D, D);
}

int vk_experts_trace(struct engine *e, int32_t n_tok, bool out) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd, F = (size_t)e->m->hp.n_ff_exp;
    const int32_t P = n_tok * e->k_used;
    int rc;
    if ((rc = vk_trace(e, "moe_up", v->u.addr, P, (int64_t)F, F)) < 0 ||
        (rc = vk_trace(e, "moe_act", v->g.addr, P, (int64_t)F, F)) < 0)
        return rc;
    return out ? vk_trace(e, "moe_out", v->d.addr, P, (int64_t)D, D) : 0;
}

/* Forgets the quantized rows (their sources are about to change). */
void vk_quant_forget(struct engine_vk *v) {
    v->quant[0].src = v->quant[1].src = 0;
}

/* out rows (out_stride floats apart) = w (at dev) times n_tok rows of x, plus the bias b (0:
 * none; in the product's kernel). The product is not followed by a barrier: the caller records
 * one before a use. */
int vk_matmul(struct engine_vk *v, const char *what, const struct weight *w, uint64_t dev,
              uint64_t x, size_t x_stride, uint64_t out, size_t out_stride, uint64_t b,
              int32_t n_tok) {
    size_t as = x_stride * sizeof(float);
    uint64_t act = x; /* F32 weights take the float rows as they are: no copy */
    int rc = 0;
    if (w->type != QTYPE_F32) {
        act = v->act_in.addr;
        rc = vk_quantize(v, w->type, x, x_stride, w->n_in, n_tok, act, &as);
    }
    vk_label(v, what);
    if (rc < 0)
        return rc;
    return gpu_op_matmul_bias(&v->ops, w->type, dev, w->row_bytes, w->n_in, w->n_out, act, as,
                              out, out_stride, b, n_tok);
}

static struct gpu_buf *vk_kv_buf(const struct engine *e, int32_t seq, int32_t kv_il) {
    return e->vk->kv[(size_t)seq * (size_t)e->seqs[0]->shape.n_kv_layer + (size_t)kv_il];
}

/* The K and V rows of sequence seq's attention layer kv_il. */
static uint64_t vk_k_rows(const struct engine *e, int32_t seq, int32_t kv_il) {
    return gpu_buf_addr(vk_kv_buf(e, seq, kv_il));
}

static uint64_t vk_v_rows(const struct engine *e, int32_t seq, int32_t kv_il) {
    const struct sequence *s = e->seqs[0];
    return vk_k_rows(e, seq, kv_il) + (uint64_t)s->rows[kv_il] * s->kv_row_bytes;
}

/* The gated attention's output gate: heads *= sigmoid(gate), the gate rows in place in q
 * (block_attn.c's split_gate and its product). */
static int vk_gate(struct engine *e, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const int32_t hd = e->m->hp.head_dim;
    vk_label(v, "attn_gate");
    int rc = gpu_op_sigmoid_mul(&v->ops, v->heads.addr, (size_t)hd, v->q.addr + (uint64_t)hd * 4,
                                2 * (size_t)hd, hd, n_tok * e->m->hp.n_head);
    vk_sync(v);
    return rc;
}

/* The trace points of layer il's q (not a gated layer's: its rows interleave the gate), k and v
 * rows, named q_op, k_op, v_op (NULL: not traced), k and v where the layer keeps KV: block_attn's
 * qkv_trace. */
static int vk_qkv_trace(struct engine *e, int il, int32_t n_tok, const char *q_op,
                        const char *k_op, const char *v_op) {
    struct engine_vk *v = e->vk;
    const struct model_layer *l = &e->m->layers[il];
    const size_t Q = (size_t)e->m->hp.n_head * (size_t)l->head_dim;
    const size_t KV = (size_t)l->n_head_kv * (size_t)l->head_dim;
    int rc = 0;
    if (l->mixer != MODEL_MIXER_ATTN_GATED)
        rc = vk_trace(e, q_op, v->q.addr, n_tok, (int64_t)Q, Q);
    if (rc == 0 && l->kv_src < 0 && k_op)
        rc = vk_trace(e, k_op, v->k.addr, n_tok, (int64_t)KV, KV);
    if (rc == 0 && l->kv_src < 0 && v_op)
        rc = vk_trace(e, v_op, v->v.addr, n_tok, (int64_t)KV, KV);
    return rc;
}

/* q/k head norms (v's without a weight where the layer has it: gemma4; where the layer has no
 * attn_v, v is K's projection normalised, read before k is normalised in place), then RoPE by the
 * layer's table: block_attn's qk_rope_store before the store. A layer reading another's KV
 * prepares only its queries. */
static int vk_qk_prep(struct engine *e, int il, size_t QS, size_t QH, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_layer *d = &v->layers[il];
    const size_t KV = (size_t)l->n_head_kv * (size_t)l->head_dim;
    const int32_t hd = l->head_dim, nkv = n_tok * l->n_head_kv;
    const bool own_kv = l->kv_src < 0;
    int rc = 0;
    vk_label(v, "qk_norm");
    if (own_kv && l->v_norm && !l->wv.data) {
        if ((rc = gpu_op_rms_norm(&v->ops, v->k.addr, (size_t)hd, 0, v->v.addr, (size_t)hd, hd,
                                  hp->rms_eps, nkv)) < 0)
            return rc;
        vk_sync(v); /* k is normalised in place next */
    } else if (own_kv && !l->wv.data) {
        return -ENOTSUP; /* V as K's projection without its norm: no model has it */
    }
    if ((d->q_norm && (rc = gpu_op_rms_norm(&v->ops, v->q.addr, QH, d->q_norm, v->q.addr, QH, hd,
                                            hp->rms_eps, n_tok * hp->n_head)) < 0) ||
        (own_kv && d->k_norm &&
         (rc = gpu_op_rms_norm(&v->ops, v->k.addr, (size_t)hd, d->k_norm, v->k.addr, (size_t)hd,
                               hd, hp->rms_eps, nkv)) < 0) ||
        (own_kv && l->v_norm && l->wv.data &&
         (rc = gpu_op_rms_norm(&v->ops, v->v.addr, (size_t)hd, 0, v->v.addr, (size_t)hd, hd,
                               hp->rms_eps, nkv)) < 0))
        return rc;
    if (d->q_norm || d->k_norm || l->v_norm)
        vk_sync(v);
    if (e->trace_fn && (rc = vk_qkv_trace(e, il, n_tok, "q_norm", "k_norm", "v_norm")) < 0)
        return rc;
    const bool neox = hp->rope == MODEL_ROPE_NEOX;
    const uint64_t cs = l->swa && hp->n_rot_swa > 0 ? v->rope_cs_swa.addr : v->rope_cs.addr;
    vk_label(v, "rope");
    if ((rc = gpu_op_rope(&v->ops, neox, v->q.addr, QS, QH, hp->n_head, cs, l->n_rot, n_tok)) < 0 ||
        (own_kv && (rc = gpu_op_rope(&v->ops, neox, v->k.addr, KV, (size_t)hd, l->n_head_kv, cs,
                                     l->n_rot, n_tok)) < 0))
        return rc;
    vk_sync(v);
    return e->trace_fn ? vk_qkv_trace(e, il, n_tok, "q_rope", "k_rope", NULL) : 0;
}

/* Whether layer il's prologue (head norms, RoPE, the KV store) runs as one kernel
 * (vk_prep_fused): heads of at most 512 floats, whole Q8_0 / Q4_0 blocks, and V rows the layer
 * has (its projection, or K's normalised). */
static bool vk_prep_fits(const struct engine *e, const struct model_layer *l) {
    return gpu_attn_prep_takes(e->p.kv_type, l->head_dim) &&
           (l->kv_src >= 0 || l->wv.data || l->v_norm);
}

/* vk_qk_prep and the KV store in one dispatch per segment (gpu_op_attn_prep): the same steps,
 * one barrier instead of three. */
static int vk_prep_fused(struct engine *e, int il, size_t QS, size_t QH) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_layer *d = &v->layers[il];
    const struct sequence *s0 = e->seqs[0];
    const size_t KV = (size_t)l->n_head_kv * (size_t)l->head_dim;
    const int32_t kv_il = e->kv_layer[il];
    const bool own_kv = l->kv_src < 0;
    const uint64_t cs = l->swa && hp->n_rot_swa > 0 ? v->rope_cs_swa.addr : v->rope_cs.addr;
    const enum gpu_v_norm vn = !l->v_norm ? GPU_V_AS_IS : l->wv.data ? GPU_V_NORM : GPU_V_FROM_K;
    int rc = 0;
    vk_label(v, "attn_prep");
    for (int32_t i = 0; rc == 0 && i < e->n_seg; i++) { /* the segments' tokens differ */
        const struct engine_seg *sg = &e->seg[i];
        const uint64_t f = (uint64_t)sg->first;
        const struct gpu_attn_prep a = {
            .kv_type = e->p.kv_type, .neox = hp->rope == MODEL_ROPE_NEOX,
            .q = v->q.addr + f * QS * 4, .q_tok_stride = QS, .q_head_stride = QH,
            .k = v->k.addr + f * KV * 4, .v = v->v.addr + f * KV * 4, .kv_stride = KV,
            .q_norm = d->q_norm, .k_norm = own_kv ? d->k_norm : 0, .v_norm = vn,
            .cs = cs + f * (uint64_t)l->n_rot * 4, .n_rot = l->n_rot,
            .k_rows = own_kv ? vk_k_rows(e, sg->seq, kv_il) : 0,
            .v_rows = own_kv ? vk_v_rows(e, sg->seq, kv_il) : 0,
            .row_bytes = s0->kv_row_bytes, .ring_rows = s0->rows[kv_il],
            .pos0 = e->tok_pos[sg->first], .n_head = hp->n_head,
            .n_head_kv = own_kv ? l->n_head_kv : 0, .head_dim = l->head_dim, .n_tok = sg->n,
            .eps = hp->rms_eps,
        };
        rc = gpu_op_attn_prep(&v->ops, &a);
    }
    return rc;
}

/* y = attention(xn) of layer il, in the layer's head shape: its q, k, v rows packed (n_head and
 * n_head_kv heads of its head size a token; the buffers are the widest layer's), the cache's rows
 * the widest layer's with the layer's heads from their start: block_attn's steps. */
int vk_attn(struct engine *e, int il, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_layer *d = &v->layers[il];
    const int32_t hd = l->head_dim, kv_il = e->kv_layer[il];
    const size_t D = (size_t)hp->n_embd, Q = (size_t)hp->n_head * (size_t)hd;
    const size_t KV = (size_t)l->n_head_kv * (size_t)hd;
    /* gated: wq's rows hold per head the query, then the gate (vk_gate reads them in place) */
    const bool gated = l->mixer == MODEL_MIXER_ATTN_GATED, own_kv = l->kv_src < 0;
    const size_t QS = gated ? 2 * Q : Q, QH = gated ? 2 * (size_t)hd : (size_t)hd;
    int rc;
    const uint64_t xn = v->xn.addr;
    if ((rc = vk_matmul(v, "attn_qkv", &l->wq, d->wq, xn, D, v->q.addr, QS, d->bq, n_tok)) < 0 ||
        (own_kv && (rc = vk_matmul(v, "attn_qkv", &l->wk, d->wk, xn, D, v->k.addr, KV, d->bk,
                                   n_tok)) < 0) ||
        (own_kv && l->wv.data &&
         (rc = vk_matmul(v, "attn_qkv", &l->wv, d->wv, xn, D, v->v.addr, KV, d->bv, n_tok)) < 0))
        return rc;
    vk_sync(v);
    if (e->trace_fn && (rc = vk_qkv_trace(e, il, n_tok, "q", "k", l->wv.data ? "v" : NULL)) < 0)
        return rc;
    const struct sequence *s0 = e->seqs[0];
    /* the per-op trace reads the norms and RoPE apart: the three ops then, not the fused one */
    const bool fused = !e->trace_fn && vk_prep_fits(e, l);
    if (fused) {
        if ((rc = vk_prep_fused(e, il, QS, QH)) < 0)
            return rc;
    } else if ((rc = vk_qk_prep(e, il, QS, QH, n_tok)) < 0) {
        return rc;
    }
    for (int32_t i = 0; own_kv && !fused && i < e->n_seg; i++) {
        const struct engine_seg *sg = &e->seg[i];
        const int32_t pos0 = e->tok_pos[sg->first];
        const uint64_t ko = (uint64_t)sg->first * KV * 4;
        vk_label(v, "kv_store");
        if ((rc = gpu_op_kv_store(&v->ops, e->p.kv_type, v->k.addr + ko, KV,
                                  vk_k_rows(e, sg->seq, kv_il), s0->kv_row_bytes,
                                  s0->rows[kv_il], pos0, (int64_t)KV, sg->n)) < 0 ||
            (rc = gpu_op_kv_store(&v->ops, e->p.kv_type, v->v.addr + ko, KV,
                                  vk_v_rows(e, sg->seq, kv_il), s0->kv_row_bytes,
                                  s0->rows[kv_il], pos0, (int64_t)KV, sg->n)) < 0)
            return rc;
    }
    vk_sync(v);
    for (int32_t i = 0; i < e->n_seg; i++) {
        const struct engine_seg *sg = &e->seg[i];
        const struct gpu_attn a = {
            .kv_type = e->p.kv_type,
            .q = v->q.addr + (uint64_t)sg->first * QS * 4, .q_tok_stride = QS,
            .q_head_stride = QH,
            .k = vk_k_rows(e, sg->seq, kv_il), .v = vk_v_rows(e, sg->seq, kv_il),
            .row_bytes = s0->kv_row_bytes, .ring_rows = s0->rows[kv_il],
            .out = v->heads.addr + (uint64_t)sg->first * Q * 4, .out_stride = Q,
            .sinks = d->sinks, .scratch = v->attn.addr,
            .n_head = hp->n_head, .n_head_kv = l->n_head_kv, .head_dim = hd,
            .pos0 = e->tok_pos[sg->first], .n_tok = sg->n, .window = l->swa ? hp->n_swa : 0,
            .scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hd),
        };
        vk_label(v, "attention");
        if ((rc = gpu_op_attn(&v->ops, &a)) < 0)
            return rc;
        vk_sync(v); /* the segments share the scratch */
    }
    if ((gated && (rc = vk_gate(e, n_tok)) < 0) ||
        (rc = vk_trace(e, "attn", v->heads.addr, n_tok, (int64_t)Q, Q)) < 0 ||
        (rc = vk_matmul(v, "attn_out", &l->wo, d->wo, v->heads.addr, Q, v->y.addr, D, d->bo,
                        n_tok)) < 0)
        return rc;
    return vk_trace(e, "attn_out", v->y.addr, n_tok, (int64_t)D, D);
}

/* y = Gated DeltaNet(xn) of layer il: block_deltanet's steps (deltanet.h), each sequence's
 * state in its device buffer. */
static int vk_deltanet(struct engine *e, int il, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct vk_rec *r = v->rec;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_dn_layer *d = &r->layers[il];
    const size_t D = (size_t)hp->n_embd, C = (size_t)e->conv_ch, V = (size_t)e->ssm_v_dim;
    const int32_t Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank, Dk = hp->ssm_d_state;
    const int32_t K = hp->ssm_d_conv, rec_il = e->rec_layer[il];
    const size_t conv_off = (size_t)rec_il * (e->seqs[0]->shape.conv_floats +
                                              e->seqs[0]->shape.ssm_floats) * 4;
    const uint64_t ssm_off = conv_off + e->seqs[0]->shape.conv_floats * 4;
    int rc;
    const uint64_t xn = v->xn.addr;
    if ((rc = vk_matmul(v, "ssm_in", &l->ssm_qkv, d->qkv, xn, D, r->qkv.addr, C, 0, n_tok)) < 0 ||
        (rc = vk_matmul(v, "ssm_in", &l->ssm_z, d->z, xn, D, r->z.addr, V, 0, n_tok)) < 0 ||
        (rc = vk_matmul(v, "ssm_in", &l->ssm_beta, d->beta, xn, D, r->beta.addr, (size_t)Hv, 0,
                        n_tok)) < 0 ||
        (rc = vk_matmul(v, "ssm_in", &l->ssm_alpha, d->alpha, xn, D, r->gate.addr, (size_t)Hv, 0,
                        n_tok)) < 0)
        return rc;
    vk_sync(v);
    vk_label(v, "deltanet");
    if ((rc = gpu_op_deltanet_gates(&v->ops, r->beta.addr, r->gate.addr, d->dt_bias, d->a, Hv,
                                    n_tok)) < 0)
        return rc;
    for (int32_t i = 0; i < e->n_seg; i++) { /* the segments' sequences differ: no barrier */
        const struct engine_seg *sg = &e->seg[i];
        const uint64_t row0 = (uint64_t)sg->first * C * 4;
        if ((rc = gpu_op_deltanet_conv(&v->ops, r->qkv.addr + row0, C,
                                       gpu_buf_addr(r->state[sg->seq]) + conv_off, d->conv1d,
                                       r->conv.addr + row0, C, (int32_t)C, K, sg->n)) < 0)
            return rc;
    }
    vk_sync(v);
    if ((rc = gpu_op_l2_norm(&v->ops, r->conv.addr, C, 2 * Hk, Dk, hp->rms_eps, n_tok)) < 0)
        return rc;
    vk_sync(v);
    for (int32_t i = 0; i < e->n_seg; i++) {
        const struct engine_seg *sg = &e->seg[i];
        const struct gpu_deltanet dn = {
            .S = gpu_buf_addr(r->state[sg->seq]) + ssm_off,
            .conv = r->conv.addr + (uint64_t)sg->first * C * 4, .conv_stride = C,
            .gate = r->gate.addr + (uint64_t)sg->first * (uint64_t)Hv * 4,
            .beta = r->beta.addr + (uint64_t)sg->first * (uint64_t)Hv * 4,
            .n_hk = Hk, .n_hv = Hv, .d = Dk, .n_tok = sg->n,
            .scale = 1.0f / sqrtf((float)Dk),
        };
        if ((rc = gpu_op_deltanet_recur(&v->ops, &dn)) < 0)
            return rc;
    }
    vk_sync(v);
    const uint64_t heads = r->conv.addr + (uint64_t)2 * (uint64_t)Hk * (uint64_t)Dk * 4;
    if ((rc = gpu_op_gated_norm(&v->ops, heads, C, r->z.addr, V, d->norm, Hv, Dk, hp->rms_eps,
                                n_tok)) < 0)
        return rc;
    vk_sync(v);
    return vk_matmul(v, "ssm_out", &l->ssm_out, d->out, heads, C, v->y.addr, D, 0, n_tok);
}

/* y = layer il's mixer (xn). */
static int vk_mixer(struct engine *e, int il, int32_t n_tok) {
    return e->m->layers[il].mixer == MODEL_MIXER_DELTANET ? vk_deltanet(e, il, n_tok)
                                                          : vk_attn(e, il, n_tok);
}

/* g rows = act(g, u rows) (the model's activation: SwiGLU, gpt-oss's clamped one, GeGLU), n_rows
 * rows of F floats apart, then quantized for the product with `next` (NULL: none) into dst: one
 * kernel where the activation and the format allow (gpu_op_swiglu_quantize), else the two;
 * vk_quantize then finds them. Ends with a barrier. */
static int vk_act_rows(struct engine *e, uint64_t g, uint64_t u, size_t F, int32_t n_rows,
                       const struct weight *next, uint64_t dst, size_t *stride) {
    struct engine_vk *v = e->vk;
    const enum model_act act = e->m->hp.act;
    const bool oai = act == MODEL_ACT_SWIGLU_OAI;
    int rc;
    vk_quant_forget_src(v, g); /* g's rows change here */
    vk_label(v, act == MODEL_ACT_GEGLU ? "geglu" : "swiglu");
    if (act != MODEL_ACT_GEGLU && next && gpu_quant_out_takes(next->type, (int64_t)F)) {
        const struct gpu_quant_out q = {.wtype = next->type, .dst = dst, .stride = stride};
        if ((rc = gpu_op_swiglu_quantize(&v->ops, oai, g, g, u, F, (int64_t)F, n_rows, &q)) < 0)
            return rc;
        vk_quant_remember(v, g, next->type, n_rows, dst, *stride);
        vk_sync(v);
        return 0;
    }
    rc = act == MODEL_ACT_GEGLU
             ? gpu_op_geglu(&v->ops, g, F, g, F, u, F, v->gelu_table, (int64_t)F, n_rows)
             : gpu_op_swiglu(&v->ops, oai, g, g, u, (int64_t)F * n_rows);
    if (rc < 0)
        return rc;
    vk_sync(v);
    return next ? vk_quantize(v, next->type, g, F, (int64_t)F, n_rows, dst, stride) : 0;
}

/* out = down(act(gate xn) * up xn) for n_tok rows, the matrices resident (vk_act_rows). */
int vk_swiglu(struct engine *e, const struct weight *gate, uint64_t dg, const struct weight *up,
              uint64_t du, const struct weight *down, uint64_t dd, uint64_t out, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd, F = (size_t)gate->n_out;
    int rc;
    if ((rc = vk_matmul(v, "ffn_gate_up", gate, dg, v->xn.addr, D, v->g.addr, F, 0, n_tok)) < 0 ||
        (rc = vk_matmul(v, "ffn_gate_up", up, du, v->xn.addr, D, v->u.addr, F, 0, n_tok)) < 0)
        return rc;
    vk_sync(v);
    size_t stride = 0;
    if ((rc = vk_trace(e, "ffn_gate", v->g.addr, n_tok, (int64_t)F, F)) < 0 ||
        (rc = vk_trace(e, "ffn_up", v->u.addr, n_tok, (int64_t)F, F)) < 0 ||
        (rc = vk_act_rows(e, v->g.addr, v->u.addr, F, n_tok,
                          down->type == QTYPE_F32 ? NULL : down, v->act_in.addr, &stride)) < 0 ||
        (rc = vk_trace(e, "ffn_act", v->g.addr, n_tok, (int64_t)F, F)) < 0 ||
        (rc = vk_matmul(v, "ffn_down", down, dd, v->g.addr, F, out, D, 0, n_tok)) < 0)
        return rc;
    return vk_trace(e, "ffn_down", out, n_tok, (int64_t)D, D);
}

/* Layer il's router product on the input rows `in` and the routing (gpu_op_route: block_moe's
 * arithmetic) into the (expert, token, slot) pairs; the experts chosen go to h_routes too, for the
 * statistics, the route observer and the three levels' exchange. */
int vk_route(struct engine *e, int il, uint64_t in, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_layer *d = &v->layers[il];
    const size_t D = (size_t)hp->n_embd, NE = (size_t)hp->n_expert;
    const int32_t K = e->k_used;
    int rc = vk_matmul(v, "router", &l->ffn_gate_inp, d->router, in, D, v->router.addr, NE, 0,
                       n_tok);
    if (rc < 0)
        return rc;
    vk_sync(v);
    vk_label(v, "route");
    const uint64_t log = gpu_buf_addr(v->h_routes) + (uint64_t)il * (uint64_t)e->p.n_batch * K * 4;
    if ((rc = vk_trace(e, "router", v->router.addr, n_tok, (int64_t)NE, NE)) < 0 ||
        (rc = gpu_op_route(&v->ops, v->router.addr, d->router_b,
                           hp->gating == MODEL_GATING_SOFTMAX, (int32_t)NE, K, v->pairs.addr, log,
                           n_tok)) < 0)
        return rc;
    vk_sync(v);
    return vk_trace(e, "moe_weights", v->pairs.addr + (uint64_t)n_tok * K * 12, n_tok, K,
                    (size_t)K);
}

/* Adds the experts' bias rows (bias: [n_expert][n rows], 0: none) to n_rows rows of y, row r the
 * expert bias_ids[r]'s, after a barrier: the biases of a product whose matrices are slots, not
 * the experts themselves (the three levels), which therefore cannot add them as it stores. */
static int vk_bias_rows(struct engine_vk *v, uint64_t y, size_t F, uint64_t bias,
                        uint64_t bias_ids, int32_t n_rows) {
    if (!bias)
        return 0;
    vk_sync(v);
    return gpu_op_add_id(&v->ops, y, F, bias, bias_ids, (int64_t)F, n_rows);
}

/* The routed experts' products of layer il for n_pairs pairs from the expert input rows xn (device
 * int32 arrays: ids, each pair's matrix among the gate, up and down matrices at mats[] (the
 * layer's experts, its slots or a transit's), n_mats of them, mat_stride apart: a fused
 * gate_up's halves are twice their own bytes apart; act, its activation row; out, its output row
 * t k + s), grouped through table where a type takes tiles: gate and up into g and u, the
 * activation (vk_act_rows), down into d's row of each pair. The biases (gpt-oss) are added as
 * the products store, where ids are the experts (bias_ids == ids); with slots, over all n_tok k
 * rows after them (bias_ids: the routing's experts); rows no pair writes hold nothing of use. */
/* Where the pairs' matrices are: gate, up and down (w), n_mats of each, the weights' mat_stride
 * apart, and their bias rows (b; 0: none): by the same index, added as the products store, where
 * the ids index them (vk_experts_pairs' bias_ids == ids); else by the routing's experts, after the
 * products (the slots': b are then the layer's experts' own). */
struct vk_expert_mats {
    uint64_t w[3], b[3];
    bool table; /* w[] are tables of each matrix's address (the expert cache's slots) */
};

/* Layer il's routed experts, whole in VRAM or as its slots (the same fields), with their biases. */
static struct vk_expert_mats vk_layer_mats(const struct vk_layer *d) {
    return (struct vk_expert_mats){{d->gate_exps, d->up_exps, d->down_exps},
                                   {d->gate_exps_b, d->up_exps_b, d->down_exps_b}, false};
}

static int vk_experts_pairs(struct engine *e, int il, const struct vk_expert_mats *mats,
                            uint64_t xn, int32_t n_tok, uint64_t ids, uint64_t act, uint64_t out,
                            int32_t n_pairs, int32_t n_mats, uint64_t table,
                            uint64_t bias_ids) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const size_t D = (size_t)hp->n_embd, F = (size_t)hp->n_ff_exp;
    const int32_t P = n_tok * e->k_used;
    const bool own = bias_ids == ids; /* the matrices are the experts: biases in the products */
    const size_t ms = mats->table ? 0 : 1; /* a table's matrices: mat_bytes 0 (gpu_ops.h) */
    size_t sg = 0, su = 0, sd = 0;
    const struct weight *wg = &l->ffn_gate_exps, *wu = &l->ffn_up_exps, *wd = &l->ffn_down_exps;
    int rc;
    /* the pairs grouped by expert for the tiled products, where one of the three types takes
     * tiles */
    struct gpu_pair_groups grp = {0};
    const bool *tiled = v->ops.tile_taken;
    if (tiled[wg->type] || tiled[wu->type] || tiled[wd->type]) {
        if ((rc = gpu_op_group_pairs(&v->ops, ids, n_mats, n_pairs, table, &grp)) < 0)
            return rc;
        vk_sync(v);
    }
    if ((rc = vk_quantize(v, wg->type, xn, D, (int64_t)D, n_tok, v->act_in.addr, &sg)) < 0)
        return rc;
    uint64_t au = v->act_in.addr;
    su = sg;
    if (quant_kernels(wu->type)->vec_dot_type != quant_kernels(wg->type)->vec_dot_type) {
        au = v->act_up.addr;
        if ((rc = gpu_op_quantize(&v->ops, wu->type, xn, D, au, &su, (int64_t)D, n_tok)) < 0)
            return rc;
        vk_sync(v);
    }
    vk_label(v, "experts_gate_up");
    if ((rc = gpu_op_matmul_grouped_bias(&v->ops, wg->type, mats->w[0], ms * wg->mat_stride,
                                         wg->row_bytes, wg->n_in, wg->n_out, ids, v->act_in.addr,
                                         sg, act, v->g.addr, F, out, n_pairs, &grp,
                                         own ? mats->b[0] : 0)) < 0 ||
        (rc = gpu_op_matmul_grouped_bias(&v->ops, wu->type, mats->w[1], ms * wu->mat_stride,
                                         wu->row_bytes, wu->n_in, wu->n_out, ids, au, su, act,
                                         v->u.addr, F, out, n_pairs, &grp,
                                         own ? mats->b[1] : 0)) < 0)
        return rc;
    if (!own && ((rc = vk_bias_rows(v, v->g.addr, F, mats->b[0], bias_ids, P)) < 0 ||
                 (rc = vk_bias_rows(v, v->u.addr, F, mats->b[1], bias_ids, P)) < 0))
        return rc;
    vk_sync(v);
    if ((rc = vk_act_rows(e, v->g.addr, v->u.addr, F, P, wd, v->act_hid.addr, &sd)) < 0)
        return rc;
    vk_label(v, "experts_down");
    if ((rc = gpu_op_matmul_grouped_bias(&v->ops, wd->type, mats->w[2], ms * wd->mat_stride,
                                         wd->row_bytes, wd->n_in, wd->n_out, ids, v->act_hid.addr,
                                         sd, out, v->d.addr, D, out, n_pairs, &grp,
                                         own ? mats->b[2] : 0)) < 0)
        return rc;
    if (!own && (rc = vk_bias_rows(v, v->d.addr, D, mats->b[2], bias_ids, P)) < 0)
        return rc;
    vk_sync(v);
    return 0;
}

/* The routed experts of layer il over the pairs vk_route wrote, every expert in VRAM, from the
 * expert input rows xn: pair p's output in v->d's row p. */
int vk_experts(struct engine *e, int il, uint64_t xn, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const int32_t K = e->k_used, P = n_tok * K;
    const uint64_t a_ids = v->pairs.addr, a_act = a_ids + (uint64_t)P * 4,
                   a_out = a_act + (uint64_t)P * 4;
    const struct vk_expert_mats mats = vk_layer_mats(&v->layers[il]);
    return vk_experts_pairs(e, il, &mats, xn, n_tok, a_ids, a_act, a_out, P, e->m->hp.n_expert,
                            a_ids + (uint64_t)e->p.n_batch * K * 16, a_ids);
}

/* The shared expert's output into shexp and its gate's logit into shexp_gate, when layer il has
 * one: *shexp and *gate get their addresses (0: none). */
static int vk_shared_expert(struct engine *e, int il, int32_t n_tok, uint64_t *shexp,
                            uint64_t *gate) {
    struct engine_vk *v = e->vk;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_layer *d = &v->layers[il];
    const size_t D = (size_t)e->m->hp.n_embd;
    int rc;
    *shexp = *gate = 0;
    if (!d->up_shexp)
        return 0;
    if ((rc = vk_swiglu(e, &l->ffn_gate_shexp, d->gate_shexp, &l->ffn_up_shexp, d->up_shexp,
                        &l->ffn_down_shexp, d->down_shexp, v->shexp.addr, n_tok)) < 0 ||
        (rc = vk_matmul(v, "shexp_gate", &l->ffn_gate_inp_shexp, d->shexp_inp, v->xn.addr, D,
                        v->shexp_gate.addr, 1, 0, n_tok)) < 0)
        return rc;
    *shexp = v->shexp.addr;
    *gate = v->shexp_gate.addr;
    return 0;
}

/* Records the copies of the CPU's pairs' expert rows (h_exp) into d: runs of consecutive pairs
 * in one copy each. */
static void vk_tier_rows_back(struct engine_vk *v, int32_t n_pairs, size_t D) {
    const size_t row = D * sizeof(float);
    for (int32_t p = 0; p < n_pairs;) {
        if (v->cpu_sel[p] < 0) {
            p++;
            continue;
        }
        int32_t q = p;
        while (q < n_pairs && v->cpu_sel[q] >= 0)
            q++;
        gpu_copy(v->dev, v->d.buf, (size_t)p * row, v->h_exp, (size_t)p * row,
                 (size_t)(q - p) * row);
        p = q;
    }
}

/* What vk_transit's choice weighs (vk_transit_pays): the engine's measured speeds, the layer's
 * bytes an expert, and the mode (engine_params.gpu_transit). */
struct vk_transit_cost {
    const struct engine_vk *v;
    double expert_bytes;
    int32_t mode;
};

/* Whether one more expert's upload shortens the exchange: the host stages the uploads (memcpy)
 * and then computes the pairs left, the device uploads them (its products over a few pairs are
 * short beside that), and the exchange lasts the longer of the two (mode 1: always). */
static bool vk_transit_pays(const void *ctx, int32_t n_chosen, int32_t pairs, int32_t cpu_left) {
    const struct vk_transit_cost *c = ctx;
    const struct engine_vk *v = c->v;
    if (c->mode > 0)
        return true;
    if (v->transit_pair_s <= 0)
        return false; /* no batch's exchange measured the CPU yet */
    const double stage = c->expert_bytes / v->stage_bps, upload = c->expert_bytes / v->upload_bps;
    const double host = n_chosen * stage + cpu_left * v->transit_pair_s;
    const double dev = n_chosen * upload;
    const double host2 = (n_chosen + 1) * stage + (cpu_left - pairs) * v->transit_pair_s;
    const double dev2 = (n_chosen + 1) * upload;
    return (host2 > dev2 ? host2 : dev2) < (host > dev ? host : dev);
}

/* A batch's transit of layer il, after the slots' products were sent: the CPU's pairs whose
 * expert is worth uploading (vk_tier_transit: two pairs or more, vk_transit_pays) leave cpu_sel;
 * their experts' matrices are staged (from the model image, or through the expert cache) and
 * copied into the transit slots, and their products recorded and sent. Returns the pairs it
 * moved (0: none), an op's or a
 * read's error (the recording goes on: the caller ends it), or -EIO. */
static int vk_transit(struct engine *e, int il, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct model_layer *l = &e->m->layers[il];
    const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
    const size_t B = (size_t)e->p.n_batch, K = (size_t)e->k_used;
    const struct vk_transit_cost cost = {
        v, (double)(w[0]->mat_bytes + w[1]->mat_bytes + w[2]->mat_bytes), e->p.gpu_transit};
    int32_t n_x = 0;
    const int32_t n = vk_tier_transit(v->tier, v->cpu_sel, n_tok * e->k_used, 2, v->n_transit,
                                      vk_transit_pays, &cost, v->transit_x, &n_x,
                                      gpu_buf_host(v->h_transit_pairs), B * K);
    if (n == 0)
        return 0;
    uint8_t *h = gpu_buf_host(v->h_transit);
    const float *bias[3] = {l->ffn_gate_exps_b, l->ffn_up_exps_b, l->ffn_down_exps_b};
    for (int32_t j = 0; j < n_x; j++) {
        struct vk_stage_copy c;
        int rc = vk_tier_expert_mats(e, il, v->transit_x[j], c.src);
        if (rc < 0)
            return rc;
        for (int k = 0; k < 3; k++) {
            c.dst[k] = h + v->transit_off[k] + (size_t)j * w[k]->mat_bytes;
            c.n[k] = w[k]->mat_bytes;
        }
        vk_stage(e, &c); /* before the next lookup, which may take the cache's slot */
        for (int k = 0; k < 3; k++) /* the expert's bias rows: the image's, always in RAM */
            if (bias[k])
                memcpy(h + v->transit_off[3 + k] + (size_t)j * w[k]->n_out * sizeof(float),
                       bias[k] + (size_t)v->transit_x[j] * (size_t)w[k]->n_out,
                       (size_t)w[k]->n_out * sizeof(float));
    }
    vk_label(v, "transit");
    struct vk_expert_mats mats = {{0, 0, 0}, {0, 0, 0}, false};
    for (int k = 0; k < 3; k++) {
        gpu_copy(v->dev, v->transit_bufs[k], 0, v->h_transit, v->transit_off[k],
                 (size_t)n_x * w[k]->mat_bytes);
        mats.w[k] = gpu_buf_addr(v->transit_bufs[k]);
        if (bias[k]) {
            gpu_copy(v->dev, v->transit_bufs[3 + k], 0, v->h_transit, v->transit_off[3 + k],
                     (size_t)n_x * w[k]->n_out * sizeof(float));
            mats.b[k] = gpu_buf_addr(v->transit_bufs[3 + k]);
        }
    }
    const uint64_t tp = v->transit_pairs.addr;
    vk_pairs_send(e, &v->transit_pairs, v->h_transit_pairs, n);
    /* the biases by transit slot, added as the products store (the ids are the slots): the
     * slots' products before them added theirs to every row, these rows' included, which these
     * products then overwrite */
    int rc = vk_experts_pairs(e, il, &mats, v->xn.addr, n_tok, tp, tp + B * K * 4,
                              tp + 2 * B * K * 4, n, n_x, tp + 4 * B * K * 4, tp);
    if (rc < 0)
        return rc;
    return gpu_flush(v->dev) < 0 ? -EIO : n;
}

/* The three levels' exchange of layer il, after the routing: sends the FFN's rows and the routes
 * to the host and waits; records the products of the pairs whose expert has a VRAM slot and the
 * shared expert and sends them; the CPU computes the other pairs meanwhile (vk_tier_cpu); their
 * rows go into d, and the weighted sum adds both sides' in the routing's order, as block_moe.
 * Returns 0, an op's or the CPU's error (the recording then ended), or -EIO (the device failed,
 * nothing recording). */
static int vk_moe_exchange(struct engine *e, int il, int32_t n_tok, uint64_t a_ids, uint64_t a_w) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd, B = (size_t)e->p.n_batch, K = (size_t)e->k_used;
    const int32_t P = n_tok * e->k_used;
    const size_t rows = (size_t)n_tok * D * 4;
    vk_label(v, "exchange");
    gpu_copy(v->dev, v->h_rows, 0, v->x.buf, 0, rows);
    gpu_copy(v->dev, v->h_rows, B * D * 4, v->xn.buf, 0, rows);
    const double t0 = vk_profile_clock(v);
    if (vk_submit(v) < 0 || vk_begin(v) < 0)
        return -EIO;
    const double t1 = vk_profile_clock(v);
    const int32_t *ids = (const int32_t *)gpu_buf_host(v->h_routes) + (size_t)il * B * K;
    int32_t *gp = gpu_buf_host(v->h_tier_pairs);
    const int32_t n_gpu = vk_tier_split(v->tier, il, ids, P, gp, B * K, v->cpu_sel);
    const uint64_t tp = v->tier_pairs.addr;
    int rc = 0;
    if (n_gpu > 0) {
        vk_pairs_send(e, &v->tier_pairs, v->h_tier_pairs, n_gpu);
        const struct vk_expert_mats mats = vk_layer_mats(&v->layers[il]);
        rc = vk_experts_pairs(e, il, &mats, v->xn.addr, n_tok, tp, tp + B * K * 4,
                              tp + 2 * B * K * 4, n_gpu, v->tier->n_slots, tp + 4 * B * K * 4,
                              a_ids);
    }
    uint64_t shexp = 0, gate = 0;
    if (rc == 0)
        rc = vk_shared_expert(e, il, n_tok, &shexp, &gate);
    if (rc == 0 && gpu_flush(v->dev) < 0)
        return -EIO;
    int32_t cpu_pairs = P - n_gpu; /* less the transit's */
    if (rc == 0 && v->n_transit > 0 && n_tok > 1) {
        if ((rc = vk_transit(e, il, n_tok)) == -EIO)
            return rc;
        cpu_pairs -= rc > 0 ? rc : 0;
        rc = rc > 0 ? 0 : rc;
    }
    v->cpu_failed = rc < 0; /* a transit's read, or an op's error: ends the step below */
    const float *x = gpu_buf_host(v->h_rows);
    if (rc == 0) {
        const double t2 = clock_now_s();
        rc = vk_tier_cpu(e, il, n_tok, x, x + B * D, v->cpu_sel, gpu_buf_host(v->h_exp));
        const double t3 = clock_now_s();
        v->cpu_failed = rc < 0;
        v->host_xwait += t1 - t0;
        v->host_xcpu += t3 - t2;
        if (rc == 0 && n_tok > 1 && cpu_pairs > 0) /* what the next transit weighs */
            v->transit_pair_s = (t3 - t2) / cpu_pairs;
    }
    if (rc < 0) {
        gpu_submit(v->dev); /* ends the recording; the error is the op's or the CPU's */
        return rc;
    }
    vk_sync(v);
    vk_label(v, "exchange");
    vk_tier_rows_back(v, P, D);
    v->moe_sum = (struct gpu_moe_rows){v->d.addr, a_w, shexp, gate, e->k_used};
    return 0;
}

static int vk_moe_sum_record(struct engine *e, int32_t n_tok);

/* Layer il's distinct routed experts (the routing the device sent, ids[n_pairs]) into
 * v->cache_union, first use first; v->cache_pos[x] their places. Returns how many. */
static int32_t vk_cache_union(struct engine_vk *v, int32_t n_expert, const int32_t *ids,
                              int32_t n_pairs) {
    int32_t n = 0;
    for (int32_t x = 0; x < n_expert; x++)
        v->cache_pos[x] = -1;
    for (int32_t p = 0; p < n_pairs; p++)
        if (v->cache_pos[ids[p]] < 0) {
            v->cache_pos[ids[p]] = n;
            v->cache_union[n++] = ids[p];
        }
    return n;
}

/* The experts cache_union[g0 .. g0 + n) of layer il into the expert cache (read from the SSD
 * where missing, waited for), their matrices' device addresses into h_mats. Returns 0 or the
 * lookup's or a read's error. */
static int vk_cache_lookup(struct engine *e, int il, int32_t g0, int32_t n) {
    struct engine_vk *v = e->vk;
    const size_t NE = (size_t)e->m->hp.n_expert;
    uint64_t *tbl = gpu_buf_host(v->h_mats);
    int rc = expert_cache_begin(v->cache, il, v->cache_union + g0, n);
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        const uint8_t *mats[3];
        if ((rc = expert_cache_get(v->cache, i, mats, true, NULL)) < 0)
            break;
        const size_t x = (size_t)v->cache_union[g0 + i];
        for (size_t k = 0; k < 3; k++) {
            if (mats[k] < v->arena_host || mats[k] >= v->arena_host + v->arena_bytes)
                return -EFAULT; /* a matrix outside the memory the kernels address */
            tbl[k * NE + x] = v->arena_dev + (uint64_t)(mats[k] - v->arena_host);
        }
    }
    return rc;
}

/* Layer il's routed experts on unified memory (vk_cache_place): the routing comes to the host,
 * each group of as many distinct experts as the cache holds is looked up (the SSD's reads landing
 * in the slots the kernels read), and the group's pairs run on the GPU over the matrices in place
 * (a group after the first waits for the one before: its slots may be evicted by the next lookup).
 * A read that fails fails the step and leaves the device alone (cpu_failed). */
static int vk_moe_cached(struct engine *e, int il, int32_t n_tok, uint64_t a_w) {
    struct engine_vk *v = e->vk;
    const size_t B = (size_t)e->p.n_batch, K = (size_t)e->k_used, NE = (size_t)e->m->hp.n_expert;
    const int32_t P = n_tok * e->k_used;
    vk_label(v, "exchange");
    v->cpu_failed = false;
    if (vk_submit(v) < 0 || vk_begin(v) < 0)
        return -EIO;
    const int32_t *ids = (const int32_t *)gpu_buf_host(v->h_routes) + (size_t)il * B * K;
    const int32_t n_union = vk_cache_union(v, (int32_t)NE, ids, P);
    const int32_t group = expert_cache_n_slots(v->cache);
    const uint64_t tm = gpu_buf_addr(v->h_mats), tp = v->tier_pairs.addr;
    struct vk_expert_mats mats = vk_layer_mats(&v->layers[il]);
    for (int k = 0; k < 3; k++)
        mats.w[k] = tm + (uint64_t)k * NE * 8;
    mats.table = true;
    int32_t *gp = gpu_buf_host(v->h_tier_pairs);
    int rc = 0;
    for (int32_t g0 = 0; rc == 0 && g0 < n_union; g0 += group) {
        const int32_t n = n_union - g0 < group ? n_union - g0 : group;
        if (g0 > 0 && (vk_submit(v) < 0 || vk_begin(v) < 0))
            return -EIO;
        if ((rc = vk_cache_lookup(e, il, g0, n)) < 0) {
            v->cpu_failed = true;
            break;
        }
        int32_t np = 0;
        for (int32_t p = 0; p < P; p++) {
            const int32_t at = v->cache_pos[ids[p]];
            if (at >= g0 && at < g0 + n) {
                gp[np] = ids[p];
                gp[B * K + (size_t)np] = p / e->k_used;
                gp[2 * B * K + (size_t)np] = p;
                np++;
            }
        }
        vk_pairs_send(e, &v->tier_pairs, v->h_tier_pairs, np);
        rc = vk_experts_pairs(e, il, &mats, v->xn.addr, n_tok, tp, tp + B * K * 4,
                              tp + 2 * B * K * 4, np, (int32_t)NE, tp + 4 * B * K * 4, tp);
        v->cache_pairs += (uint64_t)np;
    }
    uint64_t shexp = 0, gate = 0;
    if (rc == 0)
        rc = vk_shared_expert(e, il, n_tok, &shexp, &gate);
    if (rc < 0) {
        gpu_submit(v->dev); /* ends the recording; the error is the op's or the read's */
        return rc;
    }
    v->moe_sum = (struct gpu_moe_rows){v->d.addr, a_w, shexp, gate, e->k_used};
    return 0;
}

/* The routed experts of layer il: the routing (vk_route), the experts' products over the pairs
 * (vk_experts); on three levels, the exchange with the CPU (vk_moe_exchange). Their weighted sum
 * with the shared expert's is left in v->moe_sum for the residual's norm (vk_residual) or the
 * last layer's add (vk_moe_sum_record). */
static int vk_moe(struct engine *e, int il, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const int32_t K = e->k_used, P = n_tok * K;
    const uint64_t a_ids = v->pairs.addr, a_w = a_ids + (uint64_t)P * 12;
    int rc;
    if ((rc = vk_route(e, il, v->xn.addr, n_tok)) < 0)
        return rc;
    if (v->tier)
        return vk_moe_exchange(e, il, n_tok, a_ids, a_w);
    if (v->cache)
        return vk_moe_cached(e, il, n_tok, a_w);
    if ((rc = vk_experts(e, il, v->xn.addr, n_tok)) < 0 ||
        (e->trace_fn && (rc = vk_experts_trace(e, n_tok, true)) < 0))
        return rc;
    uint64_t shexp = 0, shexp_gate = 0;
    if ((rc = vk_shared_expert(e, il, n_tok, &shexp, &shexp_gate)) < 0)
        return rc;
    v->moe_sum = (struct gpu_moe_rows){v->d.addr, a_w, shexp, shexp_gate, K};
    if (!e->trace_fn)
        return 0; /* the residual's norm adds it (vk_residual) */
    /* the per-op trace reads the sum before the residual's add: recorded here, apart */
    if ((rc = vk_moe_sum_record(e, n_tok)) < 0)
        return rc;
    return vk_trace_d(e, "moe_sum", v->y.addr, n_tok); /* with a shared expert: not the CPU's */
}

/* Records the MoE layer's weighted sum that vk_moe left (none: nothing) into y, and a barrier. */
static int vk_moe_sum_record(struct engine *e, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct gpu_moe_rows m = v->moe_sum;
    if (m.k == 0)
        return 0;
    v->moe_sum.k = 0;
    vk_sync(v);
    vk_label(v, "moe_sum");
    return gpu_op_moe_sum(&v->ops, v->y.addr, m.d, m.w, m.k, e->m->hp.n_embd, m.shexp,
                          m.shexp_gate, n_tok);
}

/* xn rows = rmsnorm(x rows) * w, x first += r rows (r 0: no add) or the experts' weighted sum of
 * m (NULL: none; instead of r), n_tok rows of D floats; where the product after it, with weight
 * `next` (NULL: none), takes quantized rows, the same kernel writes them to act_in too, and
 * vk_quantize finds them there. */
static int vk_norm(struct engine *e, uint64_t x, uint64_t r, const struct gpu_moe_rows *m,
                   uint64_t w, const struct weight *next, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd;
    const float eps = e->m->hp.rms_eps;
    const uint64_t xn = v->xn.addr;
    vk_quant_forget(v);
    if (!next || !gpu_quant_out_takes(next->type, (int64_t)D))
        return m   ? gpu_op_moe_add_rms_norm(&v->ops, x, D, m, w, xn, D, (int64_t)D, eps, n_tok,
                                             NULL)
               : r ? gpu_op_add_rms_norm(&v->ops, x, D, r, w, xn, D, (int64_t)D, eps, n_tok)
                   : gpu_op_rms_norm(&v->ops, x, D, w, xn, D, (int64_t)D, eps, n_tok);
    size_t stride = 0;
    const struct gpu_quant_out q = {.wtype = next->type, .dst = v->act_in.addr, .stride = &stride};
    int rc = m ? gpu_op_moe_add_rms_norm(&v->ops, x, D, m, w, xn, D, (int64_t)D, eps, n_tok, &q)
               : gpu_op_rms_norm_quantize(&v->ops, x, D, r, w, xn, D, (int64_t)D, eps, n_tok, &q);
    if (rc == 0)
        vk_quant_remember(v, v->xn.addr, next->type, n_tok, v->act_in.addr, stride);
    return rc;
}

/* The first product of layer il's mixer (ffn false) or FFN: the weight whose input rows a norm
 * before it may quantize (vk_norm). */
static const struct weight *vk_first_product(const struct engine *e, int il, bool ffn) {
    const struct model_layer *l = &e->m->layers[il];
    if (!ffn)
        return l->mixer == MODEL_MIXER_DELTANET ? &l->ssm_qkv : &l->wq;
    if (l->ffn != MODEL_FFN_MOE)
        return &l->ffn_gate;
    return l->ffn_gate_inp.type != QTYPE_F32 ? &l->ffn_gate_inp : &l->ffn_gate_exps;
}

/* x += y over the batch (or the MoE layer's weighted sum vk_moe left, never written to y), then
 * xn = rmsnorm(x) * w, quantized for `next` (vk_norm). */
int vk_residual(struct engine *e, uint64_t w, const struct weight *next, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct gpu_moe_rows m = v->moe_sum;
    v->moe_sum.k = 0;
    vk_sync(v);
    vk_label(v, "residual_norm");
    return vk_norm(e, v->x.addr, v->y.addr, m.k ? &m : NULL, w, next, n_tok);
}

/* The logits rows the step asks for (engine_output's rows), logit_rows at a time. */
int vk_output(struct engine *e) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const struct weight *w = &e->m->output;
    const size_t D = (size_t)hp->n_embd, V = (size_t)hp->n_vocab;
    int rc = 0;
    for (int32_t o = 0; rc == 0 && o < e->n_out; o++)
        for (int32_t r = 0; rc == 0 && r < e->out[o].n; r += v->logit_rows) {
            const int32_t n = e->out[o].n - r < v->logit_rows ? e->out[o].n - r : v->logit_rows;
            const uint64_t src = v->x.addr + (uint64_t)(e->out[o].row + r) * D * 4;
            if ((rc = vk_begin(v)) < 0)
                return -EIO;
            vk_label(v, "rms_norm");
            if ((rc = vk_norm(e, src, 0, NULL, v->output_norm, w, n)) < 0)
                break;
            vk_sync(v);
            if ((rc = vk_matmul(v, "output", w, v->output, v->xn.addr, D, v->logits.addr, V, 0, n)) < 0)
                break;
            vk_sync(v);
            vk_label(v, "logits_copy");
            gpu_copy(v->dev, v->h_logits, 0, v->logits.buf, 0, (size_t)n * V * 4);
            if (vk_submit(v) < 0)
                return -EIO;
            memcpy(e->out[o].dst + (size_t)r * V, gpu_buf_host(v->h_logits), (size_t)n * V * 4);
        }
    if (rc < 0)
        gpu_submit(v->dev); /* ends the recording; the error is the op's */
    return rc;
}

/* After a step: each MoE layer's union of experts (the routes the device wrote to h_routes) for
 * the statistics and the route observer (block_moe_union). */
void vk_route_stats(struct engine *e, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const int32_t K = e->k_used, P = n_tok * K;
    const int32_t *routes = gpu_buf_host(e->vk->h_routes);
    int32_t *seen = e->moe.exp_n;
    for (int il = 0; il < hp->n_layer; il++) {
        if (e->m->layers[il].ffn != MODEL_FFN_MOE)
            continue;
        const int32_t *r = routes + (size_t)il * (size_t)e->p.n_batch * (size_t)K;
        memset(seen, 0, (size_t)hp->n_expert * sizeof(*seen));
        for (int32_t i = 0; i < P; i++)
            if (r[i] >= 0 && r[i] < hp->n_expert)
                seen[r[i]] = 1;
        block_moe_union(e, il);
    }
}

/* Records the step's inputs' copies to device memory: x and the RoPE table, through h_in. */
void vk_inputs(struct engine *e, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd;
    const size_t xb = (size_t)n_tok * D * 4, rb = (size_t)n_tok * (size_t)e->m->hp.n_rot * 4;
    const size_t roff = (size_t)e->p.n_batch * D * 4;
    memcpy(gpu_buf_host(v->h_in), e->x, xb);
    memcpy((uint8_t *)gpu_buf_host(v->h_in) + roff, e->rope_cs, rb);
    vk_label(v, "upload");
    gpu_copy(v->dev, v->x.buf, 0, v->h_in, 0, xb);
    gpu_copy(v->dev, v->rope_cs.buf, 0, v->h_in, roff, rb);
}

/* The end of a step whose layers were recorded since t0 (vk_profile_clock) with result rc: the last
 * part sent and waited for, the experts' statistics, the logits (vk_output), and the host's times
 * in the profile. Returns rc's error, -EIO, or vk_output's result. */
int vk_step_end(struct engine *e, int rc, int32_t n_tok, double t0) {
    struct engine_vk *v = e->vk;
    if (rc == -EIO)
        return rc;
    const double t1 = v->profile ? clock_now_s() : 0.0;
    if (v->stamp_steps) {
        vk_label(v, "step (device)");
        gpu_barrier(v->dev);
        vk_stamp(v);
    }
    int src = vk_submit(v);
    if (rc < 0)
        return rc;
    if (src < 0)
        return -EIO;
    if (e->m->hp.n_expert > 0)
        vk_route_stats(e, n_tok);
    const double t2 = v->profile ? clock_now_s() : 0.0;
    rc = vk_output(e);
    uint64_t nd, nb;
    gpu_counts(v->dev, &nd, &nb);
    v->count_dispatches += nd - v->count_d0;
    v->count_barriers += nb - v->count_b0;
    v->count_steps++;
    if (v->profile) {
        v->host_between += v->host_end > 0.0 ? t0 - v->host_end : 0.0;
        v->host_record += t1 - t0;
        v->host_wait += t2 - t1;
        v->host_end = clock_now_s();
        v->host_output += v->host_end - t2;
        v->host_steps++;
    }
    return rc;
}

/* The profile's clock in seconds (0 without the profile): a step's start, an exchange's phases. */
double vk_profile_clock(const struct engine_vk *v) {
    return v->profile ? clock_now_s() : 0.0;
}

/* The profile's clock at a step's start (0 without the profile); the device's counts then. */
double vk_step_start(struct engine_vk *v) {
    gpu_counts(v->dev, &v->count_d0, &v->count_b0);
    v->moe_sum.k = 0; /* a failed step's */
    return vk_profile_clock(v);
}

/* A step is sent to the device every this many layers (and after the first), so that it works
 * on the first layers while the host records the rest (gpu_flush). */
#define VK_FLUSH_LAYERS 4

int engine_vk_step(struct engine *e, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    int rc;
    if (v->g4)
        return vk_gemma4_step(e, n_tok);
    const double t0 = vk_step_start(v);
    v->cpu_failed = false;
    if (v->tier && v->tier->n_promote > 0) /* the last step's: before this one reads the slots */
        vk_tier_promote(v->tier, vk_slot_promote, e);
    if (vk_begin(v) < 0)
        return -EIO;
    vk_inputs(e, n_tok); /* made on the host, where engine.c traced them */
    vk_sync(v);
    vk_label(v, "rms_norm");
    rc = vk_norm(e, v->x.addr, 0, NULL, v->layers[0].attn_norm, vk_first_product(e, 0, false),
                 n_tok);
    e->trace_il = 0;
    if (rc == 0)
        rc = vk_trace_d(e, "attn_norm", v->xn.addr, n_tok);
    for (int il = 0; rc == 0 && il < hp->n_layer; il++) {
        const struct model_layer *l = &e->m->layers[il];
        const struct vk_layer *d = &v->layers[il];
        vk_sync(v);
        if ((rc = vk_mixer(e, il, n_tok)) < 0 ||
            (rc = vk_residual(e, d->ffn_norm, vk_first_product(e, il, true), n_tok)) < 0 ||
            (rc = vk_trace_d(e, "x_attn", v->x.addr, n_tok)) < 0 ||
            (rc = vk_trace_d(e, "ffn_norm", v->xn.addr, n_tok)) < 0)
            break;
        vk_sync(v);
        rc = l->ffn == MODEL_FFN_MOE
                 ? vk_moe(e, il, n_tok)
                 : vk_swiglu(e, &l->ffn_gate, d->gate, &l->ffn_up, d->up, &l->ffn_down, d->down,
                             v->y.addr, n_tok);
        if (rc < 0)
            break;
        const uint64_t next = il + 1 < hp->n_layer ? v->layers[il + 1].attn_norm : 0;
        if (!next) {
            if ((rc = vk_moe_sum_record(e, n_tok)) < 0)
                break;
            vk_sync(v);
            vk_label(v, "residual_add");
            if ((rc = gpu_op_add(&v->ops, v->x.addr, D, v->y.addr, D, (int64_t)D, n_tok)) == 0)
                rc = vk_trace_d(e, "x_ffn", v->x.addr, n_tok);
        } else if ((rc = vk_residual(e, next, vk_first_product(e, il + 1, false), n_tok)) == 0 &&
                   (rc = vk_trace_d(e, "x_ffn", v->x.addr, n_tok)) == 0) {
            e->trace_il = il + 1;
            if ((rc = vk_trace_d(e, "attn_norm", v->xn.addr, n_tok)) == 0 &&
                il % VK_FLUSH_LAYERS == 0 && gpu_flush(v->dev) < 0)
                return -EIO; /* nothing is recording, what was sent has finished */
        }
    }
    return vk_step_end(e, rc, n_tok, t0);
}

/* ---- the sequences' rows ---------------------------------------------------------------------- */

/* The ring row of position first + done of layer kv_il, and how many of the n - done positions
 * from it lie before the ring's end (a full layer's rows are its positions). */
static int32_t vk_ring_run(const struct sequence *s0, int32_t kv_il, int32_t first, int32_t done,
                           int32_t n, int32_t *row) {
    const int32_t rows = s0->rows[kv_il];
    *row = (first + done) % rows;
    return n - done < rows - *row ? n - done : rows - *row;
}

/* Reads positions first .. first+n-1 of sequence seq's layer kv_il (at most its rows; a full
 * layer's from its start) into k and v (either may be NULL), or writes them from, around a
 * window layer's ring. */
static int vk_kv_move(const struct engine *e, int32_t seq, int32_t kv_il, int32_t first,
                      int32_t n, void *k, void *vr, bool write) {
    struct engine_vk *v = e->vk;
    const struct sequence *s0 = e->seqs[0];
    const size_t rb = s0->kv_row_bytes, vbase = (size_t)s0->rows[kv_il] * rb;
    struct gpu_buf *b = vk_kv_buf(e, seq, kv_il);
    if (n <= 0)
        return 0;
    if (first < 0 || n > s0->rows[kv_il] || (!s0->swa[kv_il] && first + n > s0->rows[kv_il]))
        return -EINVAL;
    int rc = 0;
    for (int32_t done = 0, row = 0, run = 0; rc == 0 && done < n; done += run) {
        run = vk_ring_run(s0, kv_il, first, done, n, &row);
        const size_t off = (size_t)row * rb, at = (size_t)done * rb, len = (size_t)run * rb;
        if (k)
            rc = write ? gpu_buf_write(v->dev, b, off, (uint8_t *)k + at, len)
                       : gpu_buf_read(v->dev, b, off, (uint8_t *)k + at, len);
        if (rc == 0 && vr)
            rc = write ? gpu_buf_write(v->dev, b, vbase + off, (uint8_t *)vr + at, len)
                       : gpu_buf_read(v->dev, b, vbase + off, (uint8_t *)vr + at, len);
    }
    return rc < 0 ? -EIO : 0;
}

int engine_vk_kv_read(const struct engine *e, int32_t seq, int32_t kv_il, int32_t first,
                      int32_t n, void *k, void *v) {
    return vk_kv_move(e, seq, kv_il, first, n, k, v, false);
}

int engine_vk_kv_write(const struct engine *e, int32_t seq, int32_t kv_il, int32_t first,
                       int32_t n, const void *k, const void *v) {
    return vk_kv_move(e, seq, kv_il, first, n, (void *)k, (void *)v, true);
}

void engine_gpu_profile(struct engine *e, FILE *out) {
    struct engine_vk *v = e->vk;
    double total = 0;
    for (int k = 0; v && k < 32 && v->prof[k].label; k++)
        total += v->prof[k].ns;
    for (int k = 0; v && k < 32 && v->prof[k].label; k++)
        fprintf(out, "  %-16s %10.3f ms %6.1f%% %8llu intervals\n", v->prof[k].label,
                v->prof[k].ns * 1e-6, total > 0 ? 100.0 * v->prof[k].ns / total : 0.0,
                (unsigned long long)v->prof[k].n);
    if (v && total > 0)
        fprintf(out, "  %-16s %10.3f ms\n", "(all)", total * 1e-6);
    if (v && v->host_steps) {
        const double n = (double)v->host_steps * 1e-3;
        fprintf(out, "  host, per step: recording %.3f ms, waiting %.3f ms, logits %.3f ms, between "
                "steps %.3f ms (%llu steps)\n", v->host_record / n, v->host_wait / n,
                v->host_output / n, v->host_between / n, (unsigned long long)v->host_steps);
        if (v->host_xcpu > 0.0)
            fprintf(out, "  host, per step, within the recording: exchanges' waits %.3f ms, the "
                    "CPU's experts %.3f ms\n", v->host_xwait / n, v->host_xcpu / n);
    }
    if (v && v->count_steps) {
        const double n = (double)v->count_steps, nl = n * (double)e->m->hp.n_layer;
        fprintf(out, "  device, per step: %.1f dispatches, %.1f barriers (%.1f, %.1f a layer; the "
                "logits' included)\n", (double)v->count_dispatches / n,
                (double)v->count_barriers / n, (double)v->count_dispatches / nl,
                (double)v->count_barriers / nl);
    }
    if (v) {
        v->count_dispatches = v->count_barriers = v->count_steps = 0;
        memset(v->prof, 0, sizeof(v->prof));
        v->host_record = v->host_wait = v->host_output = v->host_between = v->host_end = 0.0;
        v->host_xwait = v->host_xcpu = 0.0;
        v->host_steps = 0;
    }
}

/* ---- the sequences' recurrent state ----------------------------------------------------------- */

/* Sequence seq's checkpoint slot at position pos, or -1. */
static int32_t vk_ckpt_at(const struct engine *e, int32_t seq, int32_t pos) {
    const struct sequence *s = e->seqs[seq];
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        if (s->ckpt[i].pos == pos)
            return i;
    return -1;
}

/* Records the copies between sequence seq's window rings and its checkpoint slot i of position
 * pos (sequence.c's ckpt_tail: per window layer the K rows, then the V rows, of the n_swa - 1
 * positions before pos, oldest first); to_ring: from the slot into the rings. */
static void vk_tail_copy(const struct engine *e, int32_t seq, int32_t i, int32_t pos,
                         bool to_ring) {
    struct engine_vk *v = e->vk;
    const struct sequence *s0 = e->seqs[0];
    const size_t rb = s0->kv_row_bytes, half = (size_t)(s0->shape.n_swa - 1) * rb;
    struct gpu_buf *tail = v->tails[(size_t)seq * (size_t)s0->shape.n_checkpoints + (size_t)i];
    size_t at = 0; /* the layer's K rows in the slot; its V rows half on */
    for (int32_t il = 0; il < s0->shape.n_kv_layer; il++) {
        if (!s0->swa[il])
            continue;
        struct gpu_buf *ring = vk_kv_buf(e, seq, il);
        const size_t vbase = (size_t)s0->rows[il] * rb;
        const int32_t first = sequence_kv_first(s0, il, pos), n = pos - first;
        for (int32_t done = 0, row = 0, run = 0; done < n; done += run) {
            run = vk_ring_run(s0, il, first, done, n, &row);
            const size_t off = (size_t)row * rb, t = at + (size_t)done * rb, len = (size_t)run * rb;
            if (to_ring) {
                gpu_copy(v->dev, ring, off, tail, t, len);
                gpu_copy(v->dev, ring, vbase + off, tail, t + half, len);
            } else {
                gpu_copy(v->dev, tail, t, ring, off, len);
                gpu_copy(v->dev, tail, t + half, ring, vbase + off, len);
            }
        }
        at += 2 * half;
    }
}

/* Ends a recording of copies: 0, -EIO (a lost device) or -EINVAL. */
static int vk_copies_submit(struct engine_vk *v) {
    int rc = gpu_submit(v->dev);
    return rc == -EIO ? -EIO : rc < 0 ? -EINVAL : 0;
}

int engine_vk_rec_checkpoint(struct engine *e, int32_t seq) {
    struct engine_vk *v = e->vk;
    if (!v || (!v->rec && !v->tails))
        return 0;
    const int32_t pos = e->seqs[seq]->n_past, i = vk_ckpt_at(e, seq, pos);
    if (i < 0)
        return 0;
    if (gpu_begin(v->dev) < 0)
        return -EIO;
    if (v->rec)
        gpu_copy(v->dev, v->rec->ckpt[(size_t)seq * (size_t)v->rec->n_ckpt + (size_t)i], 0,
                 v->rec->state[seq], 0, v->rec->state_bytes);
    if (v->tails)
        vk_tail_copy(e, seq, i, pos, false);
    return vk_copies_submit(v);
}

int engine_vk_rec_follow(struct engine *e, int32_t seq) {
    struct engine_vk *v = e->vk;
    if (!v || (!v->rec && !v->tails))
        return 0;
    const int32_t pos = e->seqs[seq]->n_past, i = vk_ckpt_at(e, seq, pos);
    if (v->rec && i < 0 && pos != 0)
        return -EINVAL; /* the host restored a state that no slot holds: a bookkeeping bug */
    if (!v->rec && i < 0)
        return 0; /* cut back in place: the rings hold the window before pos already */
    if (gpu_begin(v->dev) < 0)
        return -EIO;
    if (v->rec && i < 0)
        gpu_zero(v->dev, v->rec->state[seq]);
    else if (v->rec)
        gpu_copy(v->dev, v->rec->state[seq], 0,
                 v->rec->ckpt[(size_t)seq * (size_t)v->rec->n_ckpt + (size_t)i], 0,
                 v->rec->state_bytes);
    if (v->tails && i >= 0)
        vk_tail_copy(e, seq, i, pos, true);
    return vk_copies_submit(v);
}

int engine_vk_state_move(const struct engine *e, int32_t seq, void *buf, size_t n, bool write) {
    struct engine_vk *v = e->vk;
    if (!v->rec || n != v->rec->state_bytes)
        return n == 0 ? 0 : -EINVAL;
    int rc = write ? gpu_buf_write(v->dev, v->rec->state[seq], 0, buf, n)
                   : gpu_buf_read(v->dev, v->rec->state[seq], 0, buf, n);
    return rc < 0 ? -EIO : 0;
}
