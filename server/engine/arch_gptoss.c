/* arch_gptoss.c - gpt-oss (gpt-oss-20b, gpt-oss-120b): every layer is attention with biases on
 * q/k/v/o and a sink logit per head, over a sliding window of attention.sliding_window positions
 * on layers il % pattern < pattern - 1 (every even layer) and over the whole context on the
 * others, with YaRN RoPE (model.c); then routed experts after post_attention_norm: a biased
 * router, softmax over the top k, biased experts with the clamped SwiGLU.
 * Facts: docs/gpt-oss.md. */
#include <errno.h>
#include <stdio.h>

#include "arch.h"
#include "err.h"

/* The window, its layer pattern and the MoE keys; a separate RoPE base for the window layers is
 * refused (no published file has one). */
static int gptoss_hparams(const struct gguf *g, struct model_hparams *hp, char *err,
                          size_t err_len) {
    int32_t pattern = 0;
    int rc = 0;
    rc |= arch_moe_hparams(g, hp, err, err_len);
    rc |= model_key_i32(g, "attention.sliding_window", -1, &hp->n_swa, err, err_len);
    rc |= model_key_i32(g, "attention.sliding_window_pattern", 2, &pattern, err, err_len);
    if (rc)
        return -EINVAL;
    float base_swa = 0.0f;
    if (gguf_get_f32(g, "gpt-oss.rope.freq_base_swa", &base_swa) == 0 &&
        base_swa != hp->rope_freq_base) {
        err_set(err, err_len, "model: key \"gpt-oss.rope.freq_base_swa\" (%g) differs from "
                "rope.freq_base (%g): not supported", (double)base_swa, (double)hp->rope_freq_base);
        return -ENOTSUP;
    }
    hp->swa_pattern = pattern;
    hp->gating = MODEL_GATING_SOFTMAX_WEIGHT;
    hp->act = MODEL_ACT_SWIGLU_OAI;
    return 0;
}

/* blk.il.<suffix> as f32 [ne0, ne1] into *out; absent is an error unless optional. */
static int gptoss_floats(struct model *m, int il, float **out, const char *suffix, int64_t ne0,
                         int64_t ne1, bool optional, char *err, size_t err_len) {
    char n[96];
    model_blk_name(n, sizeof(n), il, suffix);
    if (optional && !gguf_find_tensor(m->gguf, n))
        return 0;
    return model_floats_load(m, out, n, ne0, ne1, err, err_len);
}

static int gptoss_layer(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    const int64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    int rc;
    l->mixer = MODEL_MIXER_ATTN;
    l->swa = il % hp->swa_pattern < hp->swa_pattern - 1;
    if ((rc = gptoss_floats(m, il, &l->attn_norm, "attn_norm.weight", E, 1, false, err,
                            err_len)) ||
        (rc = arch_attn_load(m, il, q_dim, false, err, err_len)) ||
        (rc = gptoss_floats(m, il, &l->bq, "attn_q.bias", q_dim, 1, true, err, err_len)) ||
        (rc = gptoss_floats(m, il, &l->bk, "attn_k.bias", kv_dim, 1, true, err, err_len)) ||
        (rc = gptoss_floats(m, il, &l->bv, "attn_v.bias", kv_dim, 1, true, err, err_len)) ||
        (rc = gptoss_floats(m, il, &l->bo, "attn_output.bias", E, 1, false, err, err_len)) ||
        (rc = gptoss_floats(m, il, &l->attn_sinks, "attn_sinks.weight", hp->n_head, 1, false,
                            err, err_len)) ||
        (rc = gptoss_floats(m, il, &l->ffn_norm, "post_attention_norm.weight", E, 1, false, err,
                            err_len)) ||
        (rc = arch_ffn_moe_load(m, il, err, err_len)) ||
        (rc = gptoss_floats(m, il, &l->ffn_gate_inp_b, "ffn_gate_inp.bias", X, 1, false, err,
                            err_len)) ||
        (rc = gptoss_floats(m, il, &l->ffn_gate_exps_b, "ffn_gate_exps.bias", F, X, false, err,
                            err_len)) ||
        (rc = gptoss_floats(m, il, &l->ffn_up_exps_b, "ffn_up_exps.bias", F, X, false, err,
                            err_len)) ||
        (rc = gptoss_floats(m, il, &l->ffn_down_exps_b, "ffn_down_exps.bias", E, X, false, err,
                            err_len)))
        return rc;
    return 0;
}

const struct model_arch_ops arch_gptoss = {"gpt-oss", MODEL_ARCH_GPTOSS, MODEL_ROPE_NEOX,
                                           gptoss_hparams, gptoss_layer};
