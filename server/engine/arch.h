/* arch.h - the architecture table behind model.c: one entry per GGUF architecture, saying which
 * keys it reads and which tensors and blocks each layer has. Adding an architecture is one
 * arch_<name>.c with its entry and one line in model.c's table; the engine runs whatever blocks
 * the layers name (model_layer.mixer / .ffn).
 *
 * The loader helpers below check every tensor's shape against the hyperparameters before its bytes
 * are used, so a file that disagrees with itself is refused with the tensor's name. */
#ifndef SNIPER_ARCH_H
#define SNIPER_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct model_arch_ops {
    const char *name;       /* general.architecture */
    enum model_arch arch;
    enum model_rope rope;
    /* Reads the keys beyond the common ones (model.c reads embedding, blocks, heads, head size,
     * rope, context, eps) into hp. Returns 0 or -EINVAL with a message naming the key. */
    int (*read_hparams)(const struct gguf *g, struct model_hparams *hp, char *err, size_t err_len);
    /* Sets layer il's mixer and ffn kinds and loads its tensors. Returns 0 or a negative error. */
    int (*load_layer)(struct model *m, int il, char *err, size_t err_len);
};

extern const struct model_arch_ops arch_qwen3moe, arch_qwen3, arch_llama; /* arch_qwen3.c */
extern const struct model_arch_ops arch_qwen35moe, arch_qwen35;           /* arch_qwen35.c */
extern const struct model_arch_ops arch_gptoss;                           /* arch_gptoss.c */
extern const struct model_arch_ops arch_gemma4;                           /* arch_gemma4.c */

/* Reads ARCH.suffix (ARCH = hp's architecture name) as a positive int32 into *out; when absent
 * uses def (def < 0: the key is required). Returns 0 or -EINVAL with a message. */
int model_key_i32(const struct gguf *g, const char *suffix, int32_t def, int32_t *out, char *err,
                  size_t err_len);

/* model_key_i32 of a key that may instead be an array with one value per layer (i32 or u32):
 * then layer il's. Returns 0 or -EINVAL with a message. */
int model_key_i32_at(const struct gguf *g, const char *suffix, int32_t il, int32_t def,
                     int32_t *out, char *err, size_t err_len);

/* Points w at tensor name after checking its shape is [n_in, n_out, n_mat] (n_mat 1: 2-D).
 * Returns 0 or -EINVAL with a message naming the tensor. */
int model_weight_load(struct model *m, struct weight *w, const char *name, int64_t n_in,
                      int64_t n_out, int64_t n_mat, char *err, size_t err_len);

/* Reads tensor name of shape [ne0] (ne1 = 1) or [ne0, ne1] as f32 into a malloc'd *out (the model
 * frees it). Returns 0 or a negative error with a message naming the tensor. */
int model_floats_load(struct model *m, float **out, const char *name, int64_t ne0, int64_t ne1,
                      char *err, size_t err_len);

/* The routed-expert keys (expert_count, expert_used_count, expert_feed_forward_length). Returns 0
 * or -EINVAL with a message naming the key. */
int arch_moe_hparams(const struct gguf *g, struct model_hparams *hp, char *err, size_t err_len);

/* Tensors shared by several architectures (arch_qwen3.c), each returning 0 or a negative error:
 * attention (q has q_rows rows: n_head * head_dim, or twice that when gated), a dense SwiGLU FFN,
 * routed experts with their router, and a shared expert with its gate. The FFN loaders set the
 * layer's ffn kind. */
int arch_attn_load(struct model *m, int il, int64_t q_rows, bool with_qk_norm, char *err,
                   size_t err_len);
int arch_ffn_dense_load(struct model *m, int il, char *err, size_t err_len);
int arch_ffn_moe_load(struct model *m, int il, char *err, size_t err_len);
int arch_ffn_shexp_load(struct model *m, int il, char *err, size_t err_len);

/* "blk.<il>.<suffix>" into buf (of size n); returns buf. */
const char *model_blk_name(char *buf, size_t n, int il, const char *suffix);

#endif
