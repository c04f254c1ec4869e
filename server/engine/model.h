/* model.h - a loaded GGUF model: hyperparameters and weights of the supported architectures
 * (qwen3moe, qwen3, llama: server/engine/arch_qwen3.c; qwen35moe, qwen35: arch_qwen35.c;
 * gpt-oss: arch_gptoss.c; gemma4: arch_gemma4.c), and
 * for each layer which blocks it runs (a mixer: attention, gated attention or Gated DeltaNet; an
 * FFN: dense or routed experts, with or without a shared expert).
 *
 *     struct model *m = model_load("model.gguf", err, sizeof(err));
 *     ... engine_new(m, ...) ...
 *     model_free(m);
 *
 * Every matrix is kept in its file type and layout (row-major, ne[0] = input features per row),
 * in one read-only image of the file (of a split model: of its shards, end to end) in anonymous
 * memory on transparent huge pages, read once at load with direct I/O (see model_read_image for why); norms are converted to f32. Routed experts (ffn_*_exps) are stacked [n_expert][n_out][n_in]:
 * expert e is the contiguous slice at e * expert_bytes. */
#ifndef SNIPER_MODEL_H
#define SNIPER_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "qtype.h"

enum model_arch {
    MODEL_ARCH_QWEN3MOE,
    MODEL_ARCH_QWEN3,
    MODEL_ARCH_LLAMA,
    MODEL_ARCH_QWEN35MOE,
    MODEL_ARCH_QWEN35,
    MODEL_ARCH_GPTOSS,
    MODEL_ARCH_GEMMA4,
};

/* What a layer mixes tokens with (server/engine/block_attn.c, block_deltanet.c). */
enum model_mixer {
    MODEL_MIXER_ATTN,       /* causal GQA attention over the KV cache */
    MODEL_MIXER_ATTN_GATED, /* the same, its output times sigmoid(a per-head gate from attn_q) */
    MODEL_MIXER_DELTANET,   /* Gated DeltaNet: a short causal conv, then a per-head recurrence */
};

/* The layer's feed-forward block (block_ffn.c, block_moe.c). */
enum model_ffn {
    MODEL_FFN_DENSE, /* SwiGLU ffn_gate / ffn_up / ffn_down */
    MODEL_FFN_MOE,   /* routed experts, plus a gated shared expert when the layer has one */
};

/* How a MoE layer turns router logits into its experts and their weights (block_moe.c). */
enum model_gating {
    MODEL_GATING_SOFTMAX,        /* softmax over all experts, top-k, weights renormalised to sum
                                  * 1 (qwen3moe, qwen35moe) */
    MODEL_GATING_SOFTMAX_WEIGHT, /* top-k of the (biased) logits, softmax over those k (gpt-oss) */
};

/* The gated activation between an FFN's gate/up and down products. */
enum model_act {
    MODEL_ACT_SWIGLU,     /* silu(g) * u */
    MODEL_ACT_SWIGLU_OAI, /* gpt-oss: g' = min(g, 7), g' sigmoid(1.702 g') (clamp(u, -7, 7) + 1) */
    MODEL_ACT_GEGLU,      /* gemma4: gelu(g) * u (ops_geglu), the dense FFNs' too */
};

enum model_rope {
    MODEL_ROPE_NORM, /* rotate adjacent pairs (x[2i], x[2i+1]): llama */
    MODEL_ROPE_NEOX, /* rotate halves (x[i], x[i + n_rot/2]): qwen3, qwen3moe */
};

struct model_hparams {
    enum model_arch arch;
    enum model_rope rope;
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;      /* key_length = value_length */
    int32_t n_rot;         /* rotated dimensions per head (= head_dim unless the file says) */
    int32_t n_ff;          /* dense FFN width (0 for moe) */
    int32_t n_expert;      /* 0 for dense */
    int32_t n_expert_used;
    int32_t n_ff_exp;      /* expert FFN width */
    int32_t n_ff_shexp;    /* shared expert FFN width (0: none) */
    int32_t n_ctx_train;
    /* Gated DeltaNet layers (0 for models without): */
    int32_t ssm_d_conv;    /* causal conv taps */
    int32_t ssm_d_state;   /* Dk = Dv: key and value size of a head */
    int32_t ssm_n_group;   /* Hk: query/key heads */
    int32_t ssm_dt_rank;   /* Hv: value heads (Hv % Hk == 0) */
    int32_t full_attn_interval; /* layer il is attention iff (il + 1) % interval == 0 */
    int32_t n_swa;         /* sliding window of the window layers (model_layer.swa), 0: none */
    int32_t swa_pattern;   /* layer il has the window iff il % pattern < pattern - 1 */
    enum model_gating gating; /* moe */
    enum model_act act;    /* moe experts' activation */
    float rope_freq_base;
    /* RoPE scaling (rope.scaling.*, as llama.cpp reads them for every architecture): */
    float rope_freq_scale;   /* 1 / rope.scaling.factor for linear and yarn; 1: none */
    float rope_ext_factor;   /* YaRN's extrapolation mix: 1 for yarn, else 0 */
    float rope_attn_factor;  /* the magnitude ggml's rope_yarn starts from (llama.cpp's
                              * yarn_attn_factor): 1 unless rope.scaling.attn_factor says */
    int32_t rope_n_ctx_orig; /* rope.scaling.original_context_length (else the context) */
    float rms_eps;
    /* Gemma 4 (0 for the others): */
    int32_t head_dim_swa;    /* the window layers' head size (0: head_dim) */
    int32_t n_rot_swa;       /* rotated dimensions of the window layers' heads (0: n_rot) */
    float rope_freq_base_swa; /* the window layers' RoPE base (0: rope_freq_base) */
    float attn_scale;        /* attention's kq scale (0: 1 / sqrt(head_dim)) */
    float embd_scale;        /* the token embedding is multiplied by it (0: not) */
    float logit_softcap;     /* logits = c tanh(logits / c) (0: not) */
    int32_t n_embd_per_layer; /* per-layer embeddings' width (E2B, E4B; 0: none) */
};

/* A weight matrix (or a stack of them) in its file type. */
struct weight {
    enum qtype type;
    int64_t n_in;      /* ne[0]: elements per row */
    int64_t n_out;     /* ne[1]: rows per matrix */
    int64_t n_mat;     /* ne[2]: stacked matrices (experts), 1 otherwise */
    size_t row_bytes;  /* bytes per row */
    size_t mat_bytes;  /* bytes per matrix = n_out * row_bytes */
    size_t mat_stride; /* bytes from one stacked matrix to the next: mat_bytes, or for the gate
                        * and up halves of a fused ffn_gate_up_exps twice it */
    const struct gguf_tensor *tensor; /* where it lives in the file */
    const void *data;  /* resident bytes [n_mat][n_out][row_bytes] in the model's image */
};

struct model_layer {
    enum model_mixer mixer;
    enum model_ffn ffn;
    bool swa;                   /* attention over the last hp.n_swa positions only (gpt-oss,
                                 * gemma4) */
    int32_t head_dim, n_head_kv, n_rot; /* this layer's (model.c fills hp's where the arch did
                                 * not set them: gemma4's global layers have their own) */
    int32_t kv_src;             /* -1, or the earlier layer whose K and V rows this one reads
                                 * instead of keeping its own (gemma4's shared-KV layers) */
    bool v_norm;                /* V rows rms-normalised without a weight (gemma4) */
    /* Gemma 4's extra norms (NULL for the others): after the mixer, after the FFN, and in a
     * layer with experts around its two halves (the dense FFN is the shared expert) */
    float *attn_post_norm, *ffn_post_norm; /* [n_embd] */
    float *ffn_post_norm_1;     /* [n_embd] after the dense half */
    float *ffn_pre_norm_2, *ffn_post_norm_2; /* [n_embd] before and after the experts */
    float *ffn_gate_inp_s;      /* [n_embd] the router's input scale */
    float *ffn_down_exps_s;     /* [n_expert] each expert's output scale */
    float out_scale;            /* the layer's output is multiplied by it (1: none) */
    float *attn_norm;           /* [n_embd] */
    /* attention (MODEL_MIXER_ATTN*): wq is [n_embd -> q_dim], or [n_embd -> 2 q_dim] when gated
     * (per head: head_dim query rows, then head_dim gate rows) */
    struct weight wq, wk, wv, wo;
    float *attn_q_norm;         /* [head_dim] (qwen3*), NULL for llama */
    float *attn_k_norm;         /* [head_dim] */
    float *bq, *bk, *bv, *bo;   /* biases [q_dim], [kv_dim], [kv_dim], [n_embd] or NULL (gpt-oss) */
    float *attn_sinks;          /* [n_head] a sink logit per head, or NULL (gpt-oss) */
    /* Gated DeltaNet (MODEL_MIXER_DELTANET); conv_ch = 2 Hk Dk + Hv Dv */
    struct weight ssm_qkv;      /* attn_qkv [n_embd -> conv_ch]: q | k | v channels */
    struct weight ssm_z;        /* attn_gate [n_embd -> Hv Dv]: the output gate */
    struct weight ssm_beta;     /* [n_embd -> Hv] */
    struct weight ssm_alpha;    /* [n_embd -> Hv] */
    struct weight ssm_out;      /* [Hv Dv -> n_embd] */
    float *ssm_conv1d;          /* [conv_ch][d_conv] taps, oldest first */
    float *ssm_dt_bias;         /* [Hv] */
    float *ssm_a;               /* [Hv] -exp(A_log): negative */
    float *ssm_norm;            /* [Dv] */
    float *ffn_norm;            /* [n_embd] (post_attention_norm in qwen35*) */
    struct weight ffn_gate_inp; /* router [n_embd -> n_expert] (moe) */
    float *ffn_gate_inp_b;      /* [n_expert] router bias, or NULL (gpt-oss) */
    struct weight ffn_gate_exps, ffn_up_exps, ffn_down_exps; /* moe: stacked experts */
    float *ffn_gate_exps_b, *ffn_up_exps_b; /* [n_expert][n_ff_exp] expert biases, or NULL */
    float *ffn_down_exps_b;     /* [n_expert][n_embd] */
    struct weight ffn_gate_inp_shexp;  /* [n_embd -> 1] shared expert gate (data NULL: none) */
    struct weight ffn_gate_up_exps;    /* fused [n_embd -> 2 n_ff_exp] per expert (gemma4), or data
                                        * NULL; ffn_gate_exps / ffn_up_exps are its halves */
    struct weight ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp; /* shared expert (data NULL: none) */
    struct weight ffn_gate, ffn_up, ffn_down;                 /* dense */
    /* Gemma 4's per-layer embedding (data NULL: none): ple_out(gelu(ple_gate x) * the layer's
     * per-layer input), normalised, joins x after the FFN */
    struct weight ple_gate;     /* inp_gate [n_embd -> n_embd_per_layer] */
    struct weight ple_out;      /* proj [n_embd_per_layer -> n_embd] */
    float *ple_post_norm;       /* [n_embd] post_norm */
};

struct model {
    struct gguf *gguf;           /* owned; open for reads of non-resident tensors */
    char *path;
    char *name;                  /* general.name or the file's base name */
    struct model_hparams hp;
    struct weight tok_embd;      /* [n_vocab][n_embd] */
    float *output_norm;          /* [n_embd] */
    float *rope_freqs;           /* [n_rot / 2] freq factors of the global layers, or NULL */
    struct weight output;        /* [n_embd -> n_vocab]; may alias tok_embd (tied) */
    struct model_layer *layers;  /* [n_layer] */
    /* Gemma 4's per-layer embeddings (data NULL: none; block_ple.c) */
    struct weight ple_embd;      /* per_layer_token_embd [n_vocab][n_layer * n_embd_per_layer] */
    struct weight ple_proj;      /* per_layer_model_proj [n_embd -> n_layer * n_embd_per_layer] */
    float *ple_proj_norm;        /* [n_embd_per_layer] per_layer_proj_norm */
    void *image;                 /* read-only copy of the file, 2 MiB aligned (address space); a
                                  * split model's shards one after the other */
    size_t image_bytes;
    uint64_t *shard_image_off;   /* [gguf->n_shards] image offset of each shard's byte 0 (4 KiB
                                  * aligned, so direct reads of a shard land aligned) */
    bool experts_on_disk;        /* routed experts were not read: see server/experts */
    bool embd_on_disk;           /* with experts on disk and an untied output: token_embd was not
                                  * read either; the engine reads the rows it needs (a few KiB a
                                  * token, where the whole matrix is 286 MB on Qwen3.5-35B-A3B) */
    bool ple_on_disk;            /* with experts on disk: per_layer_token_embd was not read
                                  * either (most of an E2B / E4B file); the engine reads the rows
                                  * it needs, as for token_embd */
    uint64_t resident_bytes;     /* bytes of the file read into the image: the weights in RAM */
};

/* Reads hyperparameters only (no weights). Returns 0 or a negative error with a message in err. */
int model_read_hparams(const struct gguf *g, struct model_hparams *hp, char *err, size_t err_len);

/* Opens path and loads every weight into RAM. Returns the model (free with model_free) or NULL with
 * a message in err naming the missing or malformed tensor or key. */
struct model *model_load(const char *path, char *err, size_t err_len);

/* model_load, or with experts_on_disk every tensor but the streamed ones (model_tensor_streamed:
 * a moe model's routed experts, a dense model's FFN matrices): their part of the image is left
 * unread (no RAM), their weights' data pointers must not be dereferenced, and an expert cache
 * (server/experts) reads them from the file on demand. */
struct model *model_open(const char *path, bool experts_on_disk, char *err, size_t err_len);

/* How far a model_open_progress call has read, readable from another thread at any time. */
struct model_progress {
    _Atomic uint64_t done;  /* bytes read so far */
    _Atomic uint64_t total; /* bytes to read (set once the tensor table is known; 0 before) */
};

/* model_open, reporting the bytes read into p (may be NULL) as it goes. */
struct model *model_open_progress(const char *path, bool experts_on_disk,
                                  struct model_progress *p, char *err, size_t err_len);

/* True for the tensors a model opened with experts on disk leaves there: blk.N.ffn_{gate,up,down}_exps
 * of a moe model (hp->n_expert > 0), blk.N.ffn_{gate,up,down} of a dense one. */
bool model_tensor_streamed(const struct model_hparams *hp, const char *name);

void model_free(struct model *m);

/* Name of an architecture as GGUF spells it. */
const char *model_arch_name(enum model_arch a);

/* True when some layer carries recurrent state (Gated DeltaNet): such a model's sequence state
 * cannot be rolled back token by token, only restored from a checkpoint. */
bool model_is_recurrent(const struct model *m);

#endif
