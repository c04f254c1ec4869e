/* arch_qwen3.c - qwen3moe (Qwen3-30B-A3B), dense qwen3 and llama: every layer is attention (q/k
 * head norms but for llama) then an FFN, routed experts for qwen3moe. */
#include <errno.h>
#include <stdio.h>

#include "arch.h"
#include "err.h"

int arch_moe_hparams(const struct gguf *g, struct model_hparams *hp, char *err, size_t err_len) {
    int rc = 0;
    rc |= model_key_i32(g, "expert_count", -1, &hp->n_expert, err, err_len);
    rc |= model_key_i32(g, "expert_used_count", -1, &hp->n_expert_used, err, err_len);
    rc |= model_key_i32(g, "expert_feed_forward_length", -1, &hp->n_ff_exp, err, err_len);
    return rc ? -EINVAL : 0;
}

static int dense_hparams(const struct gguf *g, struct model_hparams *hp, char *err,
                         size_t err_len) {
    return model_key_i32(g, "feed_forward_length", -1, &hp->n_ff, err, err_len);
}

int arch_attn_load(struct model *m, int il, int64_t q_rows, bool with_qk_norm, char *err,
                   size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[96];
    int rc;
    if ((rc = model_weight_load(m, &l->wq, model_blk_name(n, sizeof(n), il, "attn_q.weight"),
                                hp->n_embd, q_rows, 1, err, err_len)) ||
        (rc = model_weight_load(m, &l->wk, model_blk_name(n, sizeof(n), il, "attn_k.weight"),
                                hp->n_embd, kv_dim, 1, err, err_len)) ||
        (rc = model_weight_load(m, &l->wv, model_blk_name(n, sizeof(n), il, "attn_v.weight"),
                                hp->n_embd, kv_dim, 1, err, err_len)) ||
        (rc = model_weight_load(m, &l->wo, model_blk_name(n, sizeof(n), il, "attn_output.weight"),
                                q_dim, hp->n_embd, 1, err, err_len)))
        return rc;
    if (with_qk_norm &&
        ((rc = model_floats_load(m, &l->attn_q_norm,
                                 model_blk_name(n, sizeof(n), il, "attn_q_norm.weight"),
                                 hp->head_dim, 1, err, err_len)) ||
         (rc = model_floats_load(m, &l->attn_k_norm,
                                 model_blk_name(n, sizeof(n), il, "attn_k_norm.weight"),
                                 hp->head_dim, 1, err, err_len))))
        return rc;
    return 0;
}

/* The three matrices ffn_{gate,up,down}<suffix> of layer il, width ff, n_mat stacked. */
static int swiglu_load(struct model *m, int il, struct weight *gate, struct weight *up,
                       struct weight *down, const char *suffix, int64_t ff, int64_t n_mat,
                       char *err, size_t err_len) {
    const int64_t E = m->hp.n_embd;
    char s[64], n[96];
    int rc;
    snprintf(s, sizeof(s), "ffn_gate%s.weight", suffix);
    if ((rc = model_weight_load(m, gate, model_blk_name(n, sizeof(n), il, s), E, ff, n_mat, err,
                                err_len)))
        return rc;
    snprintf(s, sizeof(s), "ffn_up%s.weight", suffix);
    if ((rc = model_weight_load(m, up, model_blk_name(n, sizeof(n), il, s), E, ff, n_mat, err,
                                err_len)))
        return rc;
    snprintf(s, sizeof(s), "ffn_down%s.weight", suffix);
    return model_weight_load(m, down, model_blk_name(n, sizeof(n), il, s), ff, E, n_mat, err,
                             err_len);
}

int arch_ffn_dense_load(struct model *m, int il, char *err, size_t err_len) {
    struct model_layer *l = &m->layers[il];
    l->ffn = MODEL_FFN_DENSE;
    return swiglu_load(m, il, &l->ffn_gate, &l->ffn_up, &l->ffn_down, "", m->hp.n_ff, 1, err,
                       err_len);
}

int arch_ffn_moe_load(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    char n[96];
    l->ffn = MODEL_FFN_MOE;
    int rc = model_weight_load(m, &l->ffn_gate_inp,
                               model_blk_name(n, sizeof(n), il, "ffn_gate_inp.weight"), hp->n_embd,
                               hp->n_expert, 1, err, err_len);
    return rc ? rc : swiglu_load(m, il, &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
                                 "_exps", hp->n_ff_exp, hp->n_expert, err, err_len);
}

int arch_ffn_shexp_load(struct model *m, int il, char *err, size_t err_len) {
    struct model_layer *l = &m->layers[il];
    char n[96];
    int rc = model_weight_load(m, &l->ffn_gate_inp_shexp,
                               model_blk_name(n, sizeof(n), il, "ffn_gate_inp_shexp.weight"),
                               m->hp.n_embd, 1, 1, err, err_len);
    return rc ? rc : swiglu_load(m, il, &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp,
                                 "_shexp", m->hp.n_ff_shexp, 1, err, err_len);
}

static int qwen3_layer(struct model *m, int il, char *err, size_t err_len) {
    struct model_layer *l = &m->layers[il];
    const struct model_hparams *hp = &m->hp;
    char n[96];
    int rc;
    l->mixer = MODEL_MIXER_ATTN;
    if ((rc = model_floats_load(m, &l->attn_norm, model_blk_name(n, sizeof(n), il,
                                "attn_norm.weight"), hp->n_embd, 1, err, err_len)) ||
        (rc = arch_attn_load(m, il, (int64_t)hp->n_head * hp->head_dim, hp->arch != MODEL_ARCH_LLAMA,
                        err, err_len)) ||
        (rc = model_floats_load(m, &l->ffn_norm, model_blk_name(n, sizeof(n), il,
                                "ffn_norm.weight"), hp->n_embd, 1, err, err_len)))
        return rc;
    return hp->n_expert > 0 ? arch_ffn_moe_load(m, il, err, err_len)
                            : arch_ffn_dense_load(m, il, err, err_len);
}

const struct model_arch_ops arch_qwen3moe = {"qwen3moe", MODEL_ARCH_QWEN3MOE, MODEL_ROPE_NEOX,
                                             arch_moe_hparams, qwen3_layer};
const struct model_arch_ops arch_qwen3 = {"qwen3", MODEL_ARCH_QWEN3, MODEL_ROPE_NEOX,
                                          dense_hparams, qwen3_layer};
const struct model_arch_ops arch_llama = {"llama", MODEL_ARCH_LLAMA, MODEL_ROPE_NORM,
                                          dense_hparams, qwen3_layer};
