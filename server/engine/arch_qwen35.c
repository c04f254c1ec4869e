/* arch_qwen35.c - the Qwen3.5 family: qwen35moe (Qwen3.5-35B-A3B) and dense qwen35 (9B, 27B).
 * Layer il is gated full attention when (il + 1) % full_attention_interval == 0, otherwise a Gated
 * DeltaNet layer; every layer then runs its FFN (routed experts plus a gated shared expert, or a
 * dense SwiGLU) after post_attention_norm. Facts: ../shared/fixtures/README.md, "Qwen3.5". */
#include <errno.h>
#include <stdio.h>

#include "arch.h"
#include "err.h"

/* Qwen3.5 files may carry multi-token-prediction blocks after the trunk: block_count counts them,
 * nextn_predict_layers says how many there are. They draft tokens for speculative decoding, which
 * sniperd does not do: the model is the first block_count - nextn blocks, the rest is not read. */
static int nextn_hparams(const struct gguf *g, struct model_hparams *hp, char *err,
                         size_t err_len) {
    char key[128];
    uint32_t nextn = 0;
    snprintf(key, sizeof(key), "%s.nextn_predict_layers", gguf_get_str(g, "general.architecture"));
    int rc = gguf_get_u32(g, key, &nextn);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0 || nextn >= (uint32_t)hp->n_layer) {
        err_set(err, err_len, "model: key \"%s\" is not a count of fewer than the %d blocks", key,
                hp->n_layer);
        return -EINVAL;
    }
    hp->n_layer -= (int32_t)nextn;
    return 0;
}

/* The DeltaNet keys; ssm.inner_size must be Hv * Dv and Hv a multiple of Hk. */
static int deltanet_hparams(const struct gguf *g, struct model_hparams *hp, char *err,
                            size_t err_len) {
    int32_t inner = 0;
    int rc = 0;
    rc |= model_key_i32(g, "ssm.conv_kernel", -1, &hp->ssm_d_conv, err, err_len);
    rc |= model_key_i32(g, "ssm.state_size", -1, &hp->ssm_d_state, err, err_len);
    rc |= model_key_i32(g, "ssm.group_count", -1, &hp->ssm_n_group, err, err_len);
    rc |= model_key_i32(g, "ssm.time_step_rank", -1, &hp->ssm_dt_rank, err, err_len);
    rc |= model_key_i32(g, "ssm.inner_size", -1, &inner, err, err_len);
    rc |= model_key_i32(g, "full_attention_interval", 4, &hp->full_attn_interval, err, err_len);
    if (rc || nextn_hparams(g, hp, err, err_len) < 0)
        return -EINVAL;
    if (hp->ssm_dt_rank % hp->ssm_n_group != 0 ||
        (int64_t)inner != (int64_t)hp->ssm_dt_rank * hp->ssm_d_state || hp->ssm_d_conv > 16) {
        err_set(err, err_len, "model: inconsistent DeltaNet sizes (heads %d/%d, state %d, inner "
                "%d, conv %d)", hp->ssm_n_group, hp->ssm_dt_rank, hp->ssm_d_state, inner,
                hp->ssm_d_conv);
        return -EINVAL;
    }
    return 0;
}

static int qwen35moe_hparams(const struct gguf *g, struct model_hparams *hp, char *err,
                             size_t err_len) {
    if (arch_moe_hparams(g, hp, err, err_len) < 0 ||
        model_key_i32(g, "expert_shared_feed_forward_length", -1, &hp->n_ff_shexp, err,
                      err_len) < 0)
        return -EINVAL;
    return deltanet_hparams(g, hp, err, err_len);
}

static int qwen35_hparams(const struct gguf *g, struct model_hparams *hp, char *err,
                          size_t err_len) {
    if (model_key_i32(g, "feed_forward_length", -1, &hp->n_ff, err, err_len) < 0)
        return -EINVAL;
    return deltanet_hparams(g, hp, err, err_len);
}

/* The DeltaNet tensors of layer il. */
static int deltanet_load(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    const int64_t E = hp->n_embd, Hv = hp->ssm_dt_rank, D = hp->ssm_d_state;
    const int64_t v_dim = Hv * D, conv_ch = 2 * (int64_t)hp->ssm_n_group * D + v_dim;
    char n[96];
    int rc;
    l->mixer = MODEL_MIXER_DELTANET;
    if ((rc = model_weight_load(m, &l->ssm_qkv, model_blk_name(n, sizeof(n), il,
                                "attn_qkv.weight"), E, conv_ch, 1, err, err_len)) ||
        (rc = model_weight_load(m, &l->ssm_z, model_blk_name(n, sizeof(n), il,
                                "attn_gate.weight"), E, v_dim, 1, err, err_len)) ||
        (rc = model_weight_load(m, &l->ssm_beta, model_blk_name(n, sizeof(n), il,
                                "ssm_beta.weight"), E, Hv, 1, err, err_len)) ||
        (rc = model_weight_load(m, &l->ssm_alpha, model_blk_name(n, sizeof(n), il,
                                "ssm_alpha.weight"), E, Hv, 1, err, err_len)) ||
        (rc = model_weight_load(m, &l->ssm_out, model_blk_name(n, sizeof(n), il,
                                "ssm_out.weight"), v_dim, E, 1, err, err_len)) ||
        (rc = model_floats_load(m, &l->ssm_conv1d, model_blk_name(n, sizeof(n), il,
                                "ssm_conv1d.weight"), hp->ssm_d_conv, conv_ch, err, err_len)) ||
        (rc = model_floats_load(m, &l->ssm_dt_bias, model_blk_name(n, sizeof(n), il,
                                "ssm_dt.bias"), Hv, 1, err, err_len)) ||
        (rc = model_floats_load(m, &l->ssm_a, model_blk_name(n, sizeof(n), il, "ssm_a"), Hv, 1,
                                err, err_len)) ||
        (rc = model_floats_load(m, &l->ssm_norm, model_blk_name(n, sizeof(n), il,
                                "ssm_norm.weight"), D, 1, err, err_len)))
        return rc;
    return 0;
}

static int qwen35_layer(struct model *m, int il, char *err, size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct model_layer *l = &m->layers[il];
    char n[96];
    int rc;
    if ((rc = model_floats_load(m, &l->attn_norm, model_blk_name(n, sizeof(n), il,
                                "attn_norm.weight"), hp->n_embd, 1, err, err_len)) ||
        (rc = model_floats_load(m, &l->ffn_norm, model_blk_name(n, sizeof(n), il,
                                "post_attention_norm.weight"), hp->n_embd, 1, err, err_len)))
        return rc;
    if ((il + 1) % hp->full_attn_interval == 0) {
        l->mixer = MODEL_MIXER_ATTN_GATED;
        rc = arch_attn_load(m, il, 2 * (int64_t)hp->n_head * hp->head_dim, true, err, err_len);
    } else {
        rc = deltanet_load(m, il, err, err_len);
    }
    if (rc)
        return rc;
    if (hp->n_expert == 0)
        return arch_ffn_dense_load(m, il, err, err_len);
    if ((rc = arch_ffn_moe_load(m, il, err, err_len)))
        return rc;
    return arch_ffn_shexp_load(m, il, err, err_len);
}

const struct model_arch_ops arch_qwen35moe = {"qwen35moe", MODEL_ARCH_QWEN35MOE, MODEL_ROPE_NEOX,
                                              qwen35moe_hparams, qwen35_layer};
const struct model_arch_ops arch_qwen35 = {"qwen35", MODEL_ARCH_QWEN35, MODEL_ROPE_NEOX,
                                           qwen35_hparams, qwen35_layer};
