/* backend_vulkan_gemma4.c - Gemma 4's step on a Vulkan device (engine_vk_step hands a gemma4
 * model's steps here): engine.c's engine_mixer / engine_ffn for arch_gemma4.c's layers, op for op
 * in the CPU's order, so the logits are the CPU's bit for bit. The attention is backend_vulkan.c's
 * vk_attn in each layer's own head shape (window layers: their ring, their RoPE table; shared-KV
 * layers: an earlier layer's rows); here: the post-attention and post-FFN norms, the dense GeGLU
 * and, in a layer with experts, its routed experts beside it (the router on its own input, the
 * experts on theirs, a scale per expert, their norms), the per-layer embeddings (E2B, E4B) and the
 * layer output scale.
 * The per-layer inputs of a step's tokens (block_ple_inputs: the table's rows, read from disk
 * under a budget, and the projection of the embedding) are made on the host with x and sent with
 * it, as the RoPE tables are: the table is most of an E2B / E4B file and stays off the device.
 * The logits are soft-capped on the host (engine.c). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_vulkan_impl.h"
#include "engine_impl.h"
#include "err.h"
#include "gpu.h"
#include "gpu_ops.h"
#include "ops.h"

/* A layer's gemma4 tensors in device memory (0: the layer has none). */
struct vk_g4_layer {
    uint64_t attn_post_norm, ffn_post_norm;          /* [n_embd] */
    uint64_t post_norm_1, pre_norm_2, post_norm_2;   /* [n_embd] the dense half's, the experts' */
    uint64_t router_scale, down_exps_s;              /* [n_embd], [n_expert] */
    uint64_t ple_gate, ple_out, ple_post_norm;       /* per-layer embedding: matrices, [n_embd] */
};

struct vk_gemma4 {
    struct vk_g4_layer *layers;  /* [n_layer] */
    struct vk_area router_x;     /* [B][n_embd] a router's input */
    struct vk_area xe;           /* [B][n_embd] the experts' input */
    struct vk_area ple;          /* [B][n_layer P] the step's per-layer inputs (from the host) */
    struct vk_area ple_g;        /* [B][P] a layer's gated per-layer input */
    struct gpu_buf *h_in;        /* mapped: the window RoPE rows, then the per-layer inputs */
    size_t ple_off;              /* bytes of h_in before the per-layer inputs */
};

/* ---- set-up ----------------------------------------------------------------------------------- */

void vk_gemma4_free(struct vk_gemma4 *g) {
    if (!g)
        return;
    free(g->layers);
    free(g);
}

/* Layer il's gemma4 tensors. */
static int g4_layer_upload(struct engine_vk *v, const struct model *m, int il, char *err,
                           size_t err_len) {
    const struct model_layer *l = &m->layers[il];
    struct vk_g4_layer *d = &v->g4->layers[il];
    const int64_t E = m->hp.n_embd;
    int rc;
    if ((rc = vk_floats(v, l->attn_post_norm, E, &d->attn_post_norm, err, err_len)) ||
        (rc = vk_floats(v, l->ffn_post_norm, E, &d->ffn_post_norm, err, err_len)) ||
        (rc = vk_floats(v, l->ffn_post_norm_1, E, &d->post_norm_1, err, err_len)) ||
        (rc = vk_floats(v, l->ffn_pre_norm_2, E, &d->pre_norm_2, err, err_len)) ||
        (rc = vk_floats(v, l->ffn_post_norm_2, E, &d->post_norm_2, err, err_len)) ||
        (rc = vk_floats(v, l->ffn_gate_inp_s, E, &d->router_scale, err, err_len)) ||
        (rc = vk_floats(v, l->ffn_down_exps_s, m->hp.n_expert, &d->down_exps_s, err, err_len)) ||
        (rc = vk_weight(v, &l->ple_gate, &d->ple_gate, err, err_len)) ||
        (rc = vk_weight(v, &l->ple_out, &d->ple_out, err, err_len)) ||
        (rc = vk_floats(v, l->ple_post_norm, E, &d->ple_post_norm, err, err_len)))
        return rc;
    return 0;
}

/* GeGLU's table: ops_gelu_f16_table's 65,536 halves, made here with the CPU's formula. */
static int g4_gelu_table(struct engine_vk *v, char *err, size_t err_len) {
    uint16_t *t = malloc(65536 * sizeof(*t));
    if (!t) {
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    ops_gelu_f16_table(t);
    int rc = vk_floats(v, (const float *)t, 65536 / 2, &v->gelu_table, err, err_len);
    free(t);
    return rc;
}

int vk_gemma4_new(struct engine *e, struct engine_vk *v, char *err, size_t err_len) {
    const struct model *m = e->m;
    const struct model_hparams *hp = &m->hp;
    const size_t B = (size_t)e->p.n_batch, D = (size_t)hp->n_embd;
    const size_t P = (size_t)hp->n_embd_per_layer, LP = P * (size_t)hp->n_layer;
    const size_t rot = (size_t)hp->n_rot_swa;
    struct vk_gemma4 *g = calloc(1, sizeof(*g));
    if (!g || !(g->layers = calloc((size_t)hp->n_layer, sizeof(*g->layers)))) {
        free(g);
        err_set(err, err_len, "gpu: out of memory");
        return -ENOMEM;
    }
    v->g4 = g;
    int rc = g4_gelu_table(v, err, err_len);
    for (int il = 0; rc == 0 && il < hp->n_layer; il++)
        rc = g4_layer_upload(v, m, il, err, err_len);
    g->ple_off = B * rot * 4;
    if (rc < 0 || (rc = vk_area(v, &g->router_x, B * D * 4, err, err_len)) ||
        (rc = vk_area(v, &g->xe, B * D * 4, err, err_len)) ||
        (rc = vk_area(v, &v->rope_cs_swa, B * rot * 4, err, err_len)) ||
        (rc = vk_area(v, &g->ple, B * LP * 4, err, err_len)) ||
        (rc = vk_area(v, &g->ple_g, B * P * 4, err, err_len)))
        return rc;
    if (!(g->h_in = vk_host(v, g->ple_off + B * LP * 4, err, err_len)))
        return -ENOMEM;
    return 0;
}

/* ---- the layer's parts ------------------------------------------------------------------------ */

/* y = rmsnorm(y) * w in place (w 0: nothing): a norm after a block; the trace point op. */
static int g4_post_norm(struct engine *e, uint64_t w, int32_t n_tok, const char *op) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd;
    if (!w)
        return 0;
    vk_sync(v);
    vk_label(v, "post_norm");
    int rc = gpu_op_rms_norm(&v->ops, v->y.addr, D, w, v->y.addr, D, (int64_t)D,
                             e->m->hp.rms_eps, n_tok);
    return rc < 0 ? rc : vk_trace_d(e, op, v->y.addr, n_tok);
}

/* x += y (engine_add_y); the trace point op. */
static int g4_add_y(struct engine *e, int32_t n_tok, const char *op) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd;
    vk_sync(v);
    vk_label(v, "residual_add");
    vk_quant_forget(v);
    int rc = gpu_op_add(&v->ops, v->x.addr, D, v->y.addr, D, (int64_t)D, n_tok);
    return rc < 0 ? rc : vk_trace_d(e, op, v->x.addr, n_tok);
}

/* out = rmsnorm(x) * w (w 0: no weight) for the batch, into an activation area. */
static int g4_norm(struct engine *e, uint64_t w, uint64_t out, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const size_t D = (size_t)e->m->hp.n_embd;
    vk_sync(v);
    vk_label(v, "rms_norm");
    vk_quant_forget(v);
    return gpu_op_rms_norm(&v->ops, v->x.addr, D, w, out, D, (int64_t)D, e->m->hp.rms_eps, n_tok);
}

/* The routed experts beside the dense half (block_moe's gemma4 steps): the router on x normalised
 * without a weight, times 1 / sqrt(n_embd), times its scale; the dense GeGLU on xn into shexp and
 * its post_norm_1; the experts on x normalised by pre_norm_2, each expert's output times its
 * scale, their weighted sum normalised by post_norm_2; y = shexp + y. */
static int g4_moe(struct engine *e, int il, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    struct vk_gemma4 *g = v->g4;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_layer *d = &v->layers[il];
    const struct vk_g4_layer *d4 = &g->layers[il];
    const size_t D = (size_t)hp->n_embd;
    const int32_t K = e->k_used, P = n_tok * K;
    const uint64_t a_ids = v->pairs.addr, a_w = a_ids + (uint64_t)P * 12;
    int rc;
    if (!d4->router_scale || !d->up_shexp)
        return -ENOTSUP; /* arch_gemma4.c loads both with every router */
    if ((rc = g4_norm(e, 0, g->router_x.addr, n_tok)) < 0)
        return rc;
    vk_sync(v);
    vk_label(v, "router_input");
    if ((rc = gpu_op_scale(&v->ops, g->router_x.addr, D, g->router_x.addr, D,
                           1.0f / sqrtf((float)hp->n_embd), d4->router_scale, (int64_t)D,
                           n_tok)) < 0 ||
        (rc = vk_trace_d(e, "router_in", g->router_x.addr, n_tok)) < 0)
        return rc;
    vk_sync(v);
    if ((rc = vk_route(e, il, g->router_x.addr, n_tok)) < 0 ||
        (rc = vk_swiglu(e, &l->ffn_gate_shexp, d->gate_shexp, &l->ffn_up_shexp, d->up_shexp,
                        &l->ffn_down_shexp, d->down_shexp, v->shexp.addr, n_tok)) < 0 ||
        (rc = g4_norm(e, d4->pre_norm_2, g->xe.addr, n_tok)) < 0)
        return rc;
    vk_sync(v);
    vk_label(v, "post_norm");
    if (d4->post_norm_1 &&
        (rc = gpu_op_rms_norm(&v->ops, v->shexp.addr, D, d4->post_norm_1, v->shexp.addr, D,
                              (int64_t)D, hp->rms_eps, n_tok)) < 0)
        return rc;
    if (e->trace_fn && ((d4->post_norm_1 &&
                         (rc = vk_trace_d(e, "post_norm_1", v->shexp.addr, n_tok)) < 0) ||
                        (d4->pre_norm_2 &&
                         (rc = vk_trace_d(e, "experts_in", g->xe.addr, n_tok)) < 0)))
        return rc;
    if ((rc = vk_experts(e, il, g->xe.addr, n_tok)) < 0 ||
        (e->trace_fn && (rc = vk_experts_trace(e, n_tok, false)) < 0))
        return rc;
    vk_sync(v);
    vk_label(v, "experts_scale");
    if ((d4->down_exps_s && (rc = gpu_op_scale_id(&v->ops, v->d.addr, D, d4->down_exps_s, a_ids,
                                                  (int64_t)D, P)) < 0) ||
        (rc = vk_trace(e, "moe_out", v->d.addr, P, (int64_t)D, D)) < 0)
        return rc;
    vk_sync(v);
    vk_label(v, "moe_sum");
    if ((rc = gpu_op_moe_sum(&v->ops, v->y.addr, v->d.addr, a_w, K, (int64_t)D, 0, 0, n_tok)) < 0 ||
        (rc = vk_trace_d(e, "moe_sum", v->y.addr, n_tok)) < 0 ||
        (rc = g4_post_norm(e, d4->post_norm_2, n_tok, "post_norm_2")) < 0)
        return rc;
    vk_sync(v);
    vk_label(v, "shexp_add");
    rc = gpu_op_add(&v->ops, v->y.addr, D, v->shexp.addr, D, (int64_t)D, n_tok);
    return rc < 0 ? rc : vk_trace_d(e, "shexp_add", v->y.addr, n_tok);
}

/* y = the per-layer embedding's block of layer il (block_ple): ple_out(gelu(ple_gate x) * the
 * layer's slice of the token's per-layer input). */
static int g4_ple(struct engine *e, int il, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    struct vk_gemma4 *g = v->g4;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_g4_layer *d4 = &g->layers[il];
    const size_t D = (size_t)e->m->hp.n_embd, P = (size_t)e->m->hp.n_embd_per_layer;
    const size_t LP = P * (size_t)e->m->hp.n_layer;
    int rc;
    vk_sync(v);
    vk_quant_forget(v); /* x changed since a product last read it */
    if ((rc = vk_matmul(v, "ple_gate", &l->ple_gate, d4->ple_gate, v->x.addr, D, g->ple_g.addr, P,
                        0, n_tok)) < 0 ||
        (rc = vk_trace(e, "ple_gate", g->ple_g.addr, n_tok, (int64_t)P, P)) < 0)
        return rc;
    vk_sync(v);
    vk_label(v, "geglu");
    if ((rc = gpu_op_geglu(&v->ops, g->ple_g.addr, P, g->ple_g.addr, P,
                           g->ple.addr + (uint64_t)il * P * 4, LP, v->gelu_table, (int64_t)P,
                           n_tok)) < 0 ||
        (rc = vk_trace(e, "ple_act", g->ple_g.addr, n_tok, (int64_t)P, P)) < 0)
        return rc;
    vk_sync(v);
    if ((rc = vk_matmul(v, "ple_out", &l->ple_out, d4->ple_out, g->ple_g.addr, P, v->y.addr, D, 0,
                        n_tok)) < 0)
        return rc;
    return vk_trace_d(e, "ple_out", v->y.addr, n_tok);
}

/* Layer il on the batch: x += post_norm(attention(attn_norm x)); x += post_norm(ffn(ffn_norm x));
 * x += ple_post_norm(ple(x)); x *= the layer's output scale (engine_mixer, engine_ffn). On entry
 * xn = attn_norm(x) was recorded last, with no barrier after it. */
static int g4_layer(struct engine *e, int il, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct model_layer *l = &e->m->layers[il];
    const struct vk_layer *d = &v->layers[il];
    const struct vk_g4_layer *d4 = &v->g4->layers[il];
    const size_t D = (size_t)e->m->hp.n_embd;
    int rc;
    /* the q, k, v products read xn: an F32 weight's product reads the rows as they are, with no
     * quantize (and its barriers) before it, so without this one a device that overlaps
     * dispatches (the H100; never lavapipe) reads rows the norm has not written yet */
    vk_sync(v);
    if ((rc = vk_attn(e, il, n_tok)) < 0 ||
        (rc = g4_post_norm(e, d4->attn_post_norm, n_tok, "attn_post_norm")) < 0 ||
        (rc = vk_residual(e, d->ffn_norm, NULL, n_tok)) < 0 ||
        (rc = vk_trace_d(e, "x_attn", v->x.addr, n_tok)) < 0 ||
        (rc = vk_trace_d(e, "ffn_norm", v->xn.addr, n_tok)) < 0)
        return rc;
    vk_sync(v);
    rc = l->ffn == MODEL_FFN_MOE
             ? g4_moe(e, il, n_tok)
             : vk_swiglu(e, &l->ffn_gate, d->gate, &l->ffn_up, d->up, &l->ffn_down, d->down,
                         v->y.addr, n_tok);
    if (rc < 0 || (rc = g4_post_norm(e, d4->ffn_post_norm, n_tok, "ffn_post_norm")) < 0 ||
        (rc = g4_add_y(e, n_tok, "x_ffn")) < 0)
        return rc;
    if (d4->ple_gate && ((rc = g4_ple(e, il, n_tok)) < 0 ||
                         (rc = g4_post_norm(e, d4->ple_post_norm, n_tok, "ple_post_norm")) < 0 ||
                         (rc = g4_add_y(e, n_tok, "x_ple")) < 0))
        return rc;
    if (l->out_scale == 1.0f)
        return 0;
    vk_sync(v);
    vk_label(v, "out_scale");
    rc = gpu_op_scale(&v->ops, v->x.addr, D, v->x.addr, D, l->out_scale, 0, (int64_t)D, n_tok);
    return rc < 0 ? rc : vk_trace_d(e, "out_scale", v->x.addr, n_tok);
}

/* ---- the step --------------------------------------------------------------------------------- */

/* Layers recorded between two sends to the device (backend_vulkan.c's VK_FLUSH_LAYERS). */
#define G4_FLUSH_LAYERS 4

/* The step's inputs beyond vk_inputs': the window layers' RoPE rows and the per-layer inputs,
 * through g->h_in. */
static void g4_inputs(struct engine *e, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    struct vk_gemma4 *g = v->g4;
    const struct model_hparams *hp = &e->m->hp;
    const size_t LP = (size_t)hp->n_embd_per_layer * (size_t)hp->n_layer;
    const size_t sb = (size_t)n_tok * (size_t)hp->n_rot_swa * 4, pb = (size_t)n_tok * LP * 4;
    vk_inputs(e, n_tok);
    if (sb) {
        memcpy(gpu_buf_host(g->h_in), e->rope_cs_swa, sb);
        gpu_copy(v->dev, v->rope_cs_swa.buf, 0, g->h_in, 0, sb);
    }
    if (pb) {
        memcpy((uint8_t *)gpu_buf_host(g->h_in) + g->ple_off, e->ple, pb);
        gpu_copy(v->dev, g->ple.buf, 0, g->h_in, g->ple_off, pb);
    }
}

int vk_gemma4_step(struct engine *e, int32_t n_tok) {
    struct engine_vk *v = e->vk;
    const struct model_hparams *hp = &e->m->hp;
    const double t0 = vk_step_start(v);
    if (vk_begin(v) < 0)
        return -EIO;
    g4_inputs(e, n_tok); /* made on the host, where engine.c traced them */
    int rc = 0;
    for (int il = 0; rc == 0 && il < hp->n_layer; il++) {
        e->trace_il = il;
        if ((rc = g4_norm(e, v->layers[il].attn_norm, v->xn.addr, n_tok)) < 0 ||
            (rc = vk_trace_d(e, "attn_norm", v->xn.addr, n_tok)) < 0 ||
            (rc = g4_layer(e, il, n_tok)) < 0)
            break;
        if (il % G4_FLUSH_LAYERS == 0 && il + 1 < hp->n_layer && gpu_flush(v->dev) < 0)
            return -EIO; /* nothing is recording, what was sent has finished */
    }
    vk_sync(v);
    return vk_step_end(e, rc, n_tok, t0);
}
