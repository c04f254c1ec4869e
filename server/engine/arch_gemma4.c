/* arch_gemma4.c - Gemma 4 (26B-A4B, 31B, E2B, E4B): window and global attention layers by a
 * per-layer pattern, each kind with its own head
 * size, KV heads, rotation and RoPE base (the global layers rotate by freq factors, rope_freqs);
 * q/k norms and V normalised without a weight, kq scale 1; the last shared_kv_layers layers read
 * the KV of the last earlier layer of their kind; post-attention and post-FFN norms and a
 * per-layer output scale; a dense GeGLU FFN, and in a layer with experts routed experts beside it
 * (router on its own normalised, scaled input; fused gate_up; a scale per expert; their own
 * norms); per-layer embeddings (E2B, E4B: a second token table, a projection of the embedding, and
 * in each layer a gate, a projection and a norm; block_ple.c runs them); the embedding scaled by
 * sqrt(n_embd), the logits soft-capped.
 * Facts: llama.cpp's src/models/gemma4.cpp at the pinned commit (docs/gemma4.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "err.h"

static int gemma4_hparams(const struct gguf *g, struct model_hparams *hp, char *err,
                          size_t err_len) {
    int32_t hd_swa = 0, hd_swa_v = 0, per_layer = 0;
    int rc = 0;
    if (gguf_find_kv(g, "gemma4.expert_count"))
        rc |= arch_moe_hparams(g, hp, err, err_len);
    rc |= model_key_i32_at(g, "feed_forward_length", 0, -1, &hp->n_ff, err, err_len);
    rc |= model_key_i32(g, "attention.sliding_window", -1, &hp->n_swa, err, err_len);
    rc |= model_key_i32(g, "attention.key_length_swa", hp->head_dim, &hd_swa, err, err_len);
    rc |= model_key_i32(g, "attention.value_length_swa", hd_swa, &hd_swa_v, err, err_len);
    if (rc)
        return -EINVAL;
    rc |= model_key_i32(g, "rope.dimension_count_swa", hd_swa, &hp->n_rot_swa, err, err_len);
    if (gguf_get_u32(g, "gemma4.embedding_length_per_layer_input", (uint32_t *)&per_layer) != 0)
        per_layer = 0;
    if (rc)
        return -EINVAL;
    if (hd_swa != hd_swa_v || hp->n_rot_swa > hd_swa || hp->n_rot_swa % 2) {
        err_set(err, err_len, "model: gemma4 window heads: key %d, value %d, rope dims %d",
                hd_swa, hd_swa_v, hp->n_rot_swa);
        return -EINVAL;
    }
    if (per_layer < 0 || per_layer > (1 << 16)) {
        err_set(err, err_len, "model: gemma4 per-layer embedding width %d out of range", per_layer);
        return -EINVAL;
    }
    hp->n_embd_per_layer = per_layer;
    hp->head_dim_swa = hd_swa;
    hp->rope_freq_base_swa = hp->rope_freq_base;
    float f = 0.0f;
    if (gguf_get_f32(g, "gemma4.rope.freq_base_swa", &f) == 0 && f > 0.0f)
        hp->rope_freq_base_swa = f;
    if (gguf_get_f32(g, "gemma4.final_logit_softcapping", &f) == 0 && f > 0.0f)
        hp->logit_softcap = f;
    hp->attn_scale = 1.0f;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->gating = MODEL_GATING_SOFTMAX;
    hp->act = MODEL_ACT_GEGLU;
    return 0;
}

/* f32 tensor <name> of shape [ne0, ne1] into *out; absent is 0 (out stays NULL) when optional. */
static int gemma4_floats(struct model *m, float **out, const char *name, int64_t ne0, int64_t ne1,
                         bool optional, char *err, size_t err_len) {
    if (optional && !gguf_find_tensor(m->gguf, name))
        return 0;
    return model_floats_load(m, out, name, ne0, ne1, err, err_len);
}

static int gemma4_blk_floats(struct model *m, int il, float **out, const char *suffix,
                             int64_t ne0, bool optional, char *err, size_t err_len) {
    char n[96];
    return gemma4_floats(m, out, model_blk_name(n, sizeof(n), il, suffix), ne0, 1, optional, err,
                         err_len);
}

static int gemma4_weight(struct model *m, int il, struct weight *w, const char *suffix,
                         int64_t n_in, int64_t n_out, int64_t n_mat, char *err, size_t err_len) {
    char n[96];
    return model_weight_load(m, w, model_blk_name(n, sizeof(n), il, suffix), n_in, n_out, n_mat,
                             err, err_len);
}

/* Layer il's kind from attention.sliding_window_pattern (a bool per layer), its head shape, and
 * for a shared-KV layer the layer whose KV it reads (llama.cpp: the last layer with KV of its own
 * of the same kind, n_kv - 2 for a window layer, n_kv - 1 for a global one). */
static int gemma4_layer_shape(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    uint64_t n = 0;
    const uint8_t *pat = gguf_get_arr(m->gguf, "gemma4.attention.sliding_window_pattern",
                                      GGUF_VTYPE_BOOL, &n);
    int32_t shared = 0;
    if (!pat || n != (uint64_t)hp->n_layer) {
        err_set(err, err_len, "model: key \"gemma4.attention.sliding_window_pattern\" is not a "
                "bool per layer");
        return -EINVAL;
    }
    if (gguf_find_kv(m->gguf, "gemma4.attention.shared_kv_layers") &&
        gguf_get_u32(m->gguf, "gemma4.attention.shared_kv_layers", (uint32_t *)&shared) != 0)
        return -EINVAL;
    l->swa = pat[il] != 0;
    l->head_dim = l->swa ? hp->head_dim_swa : hp->head_dim;
    l->n_rot = l->swa ? hp->n_rot_swa : hp->n_rot;
    if (model_key_i32_at(m->gguf, "attention.head_count_kv", il, hp->n_head, &l->n_head_kv, err,
                         err_len) < 0)
        return -EINVAL;
    const int32_t n_kv = hp->n_layer - shared;
    if (il >= n_kv) {
        l->kv_src = n_kv - (l->swa ? 2 : 1);
        const struct model_layer *src = l->kv_src >= 0 ? &m->layers[l->kv_src] : NULL;
        if (!src || src->swa != l->swa || src->head_dim != l->head_dim ||
            src->n_head_kv != l->n_head_kv) {
            err_set(err, err_len, "model: gemma4 layer %d shares the KV of layer %d, which is not "
                    "of its kind", il, l->kv_src);
            return -EINVAL;
        }
    }
    if (hp->n_head % l->n_head_kv != 0 || (l->head_dim & 1)) {
        err_set(err, err_len, "model: gemma4 layer %d: %d heads over %d KV heads of %d", il,
                hp->n_head, l->n_head_kv, l->head_dim);
        return -EINVAL;
    }
    return 0;
}

/* Attention of layer il: q, and k, v (v optional: then V is K's projection) with their norms
 * when the layer keeps its own KV. */
static int gemma4_attn(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    const int64_t E = hp->n_embd, hd = l->head_dim, q_dim = (int64_t)hp->n_head * hd;
    const int64_t kv_dim = (int64_t)l->n_head_kv * hd;
    char n[96];
    int rc;
    l->mixer = MODEL_MIXER_ATTN;
    l->v_norm = true;
    if ((rc = gemma4_blk_floats(m, il, &l->attn_norm, "attn_norm.weight", E, false, err,
                                err_len)) ||
        (rc = gemma4_weight(m, il, &l->wq, "attn_q.weight", E, q_dim, 1, err, err_len)) ||
        (rc = gemma4_weight(m, il, &l->wo, "attn_output.weight", q_dim, E, 1, err, err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->attn_q_norm, "attn_q_norm.weight", hd, false, err,
                                err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->attn_post_norm, "post_attention_norm.weight", E,
                                false, err, err_len)))
        return rc;
    if (l->kv_src >= 0)
        return 0;
    if ((rc = gemma4_weight(m, il, &l->wk, "attn_k.weight", E, kv_dim, 1, err, err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->attn_k_norm, "attn_k_norm.weight", hd, false, err,
                                err_len)))
        return rc;
    if (gguf_find_tensor(m->gguf, model_blk_name(n, sizeof(n), il, "attn_v.weight")))
        return gemma4_weight(m, il, &l->wv, "attn_v.weight", E, kv_dim, 1, err, err_len);
    return 0;
}

/* The routed experts of layer il: gate and up fused (their halves as views) or apart, down with
 * an optional scale per expert, the router with its input scale, and their norms. */
static int gemma4_experts(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, X = hp->n_expert;
    char n[96];
    int rc;
    if ((rc = gemma4_weight(m, il, &l->ffn_gate_inp, "ffn_gate_inp.weight", E, X, 1, err,
                            err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->ffn_gate_inp_s, "ffn_gate_inp.scale", E, false, err,
                                err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->ffn_pre_norm_2, "pre_ffw_norm_2.weight", E, false, err,
                                err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->ffn_post_norm_1, "post_ffw_norm_1.weight", E, false,
                                err, err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->ffn_post_norm_2, "post_ffw_norm_2.weight", E, false,
                                err, err_len)) ||
        (rc = gemma4_weight(m, il, &l->ffn_down_exps, "ffn_down_exps.weight", F, E, X, err,
                            err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->ffn_down_exps_s, "ffn_down_exps.scale", X, true, err,
                                err_len)))
        return rc;
    if (!gguf_find_tensor(m->gguf, model_blk_name(n, sizeof(n), il, "ffn_gate_up_exps.weight"))) {
        if ((rc = gemma4_weight(m, il, &l->ffn_gate_exps, "ffn_gate_exps.weight", E, F, X, err,
                                err_len)))
            return rc;
        return gemma4_weight(m, il, &l->ffn_up_exps, "ffn_up_exps.weight", E, F, X, err, err_len);
    }
    if ((rc = gemma4_weight(m, il, &l->ffn_gate_up_exps, "ffn_gate_up_exps.weight", E, 2 * F, X,
                            err, err_len)))
        return rc;
    l->ffn_gate_exps = l->ffn_gate_up_exps; /* rows 0 .. F-1 of each expert's matrix */
    l->ffn_gate_exps.n_out = F;
    l->ffn_gate_exps.mat_bytes = (size_t)F * l->ffn_gate_exps.row_bytes;
    l->ffn_up_exps = l->ffn_gate_exps;      /* rows F .. 2F-1 */
    l->ffn_up_exps.data = (const uint8_t *)l->ffn_gate_exps.data + l->ffn_gate_exps.mat_bytes;
    return 0;
}

/* The FFN of layer il: the dense GeGLU (the shared expert of a layer with experts), its norms,
 * and the experts when the layer has a router. */
static int gemma4_ffn(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    const int64_t E = hp->n_embd;
    int32_t ff = 0;
    char n[96];
    const bool moe = gguf_find_tensor(m->gguf,
                                      model_blk_name(n, sizeof(n), il, "ffn_gate_inp.weight"));
    struct weight *w[3] = {&l->ffn_gate, &l->ffn_up, &l->ffn_down};
    if (moe) {
        w[0] = &l->ffn_gate_shexp;
        w[1] = &l->ffn_up_shexp;
        w[2] = &l->ffn_down_shexp;
    }
    int rc = model_key_i32_at(m->gguf, "feed_forward_length", il, -1, &ff, err, err_len);
    if (rc ||
        (rc = gemma4_blk_floats(m, il, &l->ffn_norm, "ffn_norm.weight", E, false, err,
                                err_len)) ||
        (rc = gemma4_weight(m, il, w[0], "ffn_gate.weight", E, ff, 1, err, err_len)) ||
        (rc = gemma4_weight(m, il, w[1], "ffn_up.weight", E, ff, 1, err, err_len)) ||
        (rc = gemma4_weight(m, il, w[2], "ffn_down.weight", ff, E, 1, err, err_len)) ||
        (rc = gemma4_blk_floats(m, il, &l->ffn_post_norm, "post_ffw_norm.weight", E, false, err,
                                err_len)))
        return rc;
    if (moe && hp->n_expert <= 0) {
        err_set(err, err_len, "model: gemma4 layer %d has a router but the file no expert_count",
                il);
        return -EINVAL;
    }
    l->ffn = moe ? MODEL_FFN_MOE : MODEL_FFN_DENSE;
    return moe ? gemma4_experts(m, il, err, err_len) : 0;
}

/* The per-layer embeddings' model tensors (with il 0) and layer il's: the table of n_layer slices
 * per token, the projection of the scaled token embedding and its norm; each layer's gate,
 * projection and norm. Nothing when the model has none. */
static int gemma4_ple(struct model *m, int il, char *err, size_t err_len) {
    const int64_t E = m->hp.n_embd, P = m->hp.n_embd_per_layer, LP = P * m->hp.n_layer;
    struct model_layer *l = &m->layers[il];
    int rc = 0;
    if (P == 0 && il == 0 && gguf_find_tensor(m->gguf, "per_layer_token_embd.weight")) {
        err_set(err, err_len, "model: tensor \"per_layer_token_embd.weight\" without key "
                "\"gemma4.embedding_length_per_layer_input\"");
        return -EINVAL;
    }
    if (P == 0)
        return 0;
    if (il == 0 &&
        ((rc = model_weight_load(m, &m->ple_embd, "per_layer_token_embd.weight", LP,
                                 m->hp.n_vocab, 1, err, err_len)) ||
         (rc = model_weight_load(m, &m->ple_proj, "per_layer_model_proj.weight", E, LP, 1, err,
                                 err_len)) ||
         (rc = gemma4_floats(m, &m->ple_proj_norm, "per_layer_proj_norm.weight", P, 1, false,
                             err, err_len))))
        return rc;
    if ((rc = gemma4_weight(m, il, &l->ple_gate, "inp_gate.weight", E, P, 1, err, err_len)) ||
        (rc = gemma4_weight(m, il, &l->ple_out, "proj.weight", P, E, 1, err, err_len)))
        return rc;
    return gemma4_blk_floats(m, il, &l->ple_post_norm, "post_norm.weight", E, false, err, err_len);
}

static int gemma4_layer(struct model *m, int il, char *err, size_t err_len) {
    struct model_layer *l = &m->layers[il];
    float *scale = NULL;
    int rc;
    if (il == 0 && (rc = gemma4_floats(m, &m->rope_freqs, "rope_freqs.weight", m->hp.n_rot / 2,
                                       1, true, err, err_len)))
        return rc;
    if ((rc = gemma4_layer_shape(m, il, err, err_len)) || (rc = gemma4_attn(m, il, err, err_len)) ||
        (rc = gemma4_ffn(m, il, err, err_len)) || (rc = gemma4_ple(m, il, err, err_len)) ||
        (rc = gemma4_blk_floats(m, il, &scale, "layer_output_scale.weight", 1, true, err,
                                err_len)))
        return rc;
    if (scale)
        l->out_scale = scale[0];
    free(scale);
    return 0;
}

const struct model_arch_ops arch_gemma4 = {"gemma4", MODEL_ARCH_GEMMA4, MODEL_ROPE_NEOX,
                                           gemma4_hparams, gemma4_layer};
