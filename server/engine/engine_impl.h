/* engine_impl.h - what the engine's parts share: the engine object, each block's scratch, the
 * matrix-product helpers, and the blocks a layer is made of. Private to server/engine; the public
 * API is engine.h.
 *
 * A step runs layer by layer over the batch: the mixer block (block_attn.c or block_deltanet.c),
 * then the FFN block (block_ffn.c or block_moe.c); each writes its output rows into y and the
 * driver (engine.c) adds them to the residual stream x. Every block owns its scratch (a struct
 * below, sized once in engine_new for n_batch tokens from one buffer table, engine_buffers) and
 * touches no other block's, and never allocates. The batch is made of segments, each one
 * sequence's consecutive tokens in order; every block but the recurrent one works per token,
 * reading the token's sequence and position from tok_seq / tok_pos. */
#ifndef SNIPER_ENGINE_IMPL_H
#define SNIPER_ENGINE_IMPL_H

#include "engine.h"
#include "matmul.h"
#include "ops.h"
#include "sequence.h"

#define ENGINE_ACT_SLOTS 3

struct expert_cache;
struct threadpool;

/* Shapes below: B = n_batch, T = threads, K = k_used; an act row (act_*) is one row of
 * activations quantized for a weight's type (quant_act_row_stride bytes apart), room sized for
 * the widest of the weights it feeds in the widest format (f32). */

/* block_attn.c */
struct attn_scratch {
    float *q;        /* [B][q_dim] */
    float *qg;       /* [B][2 q_dim] gated attention: per head, query rows then gate rows */
    float *k;        /* [B][kv_dim] */
    float *v;        /* [B][kv_dim] */
    float *heads;    /* [B][q_dim] the heads' output, before wo */
    float *scores;   /* [T][n_ctx] attention scores per thread */
    uint16_t *q16;   /* [T][head_dim] query as fp16 (f16 KV) or q8_0 (q8_0/q4_0 KV) per thread */
    float *vrow;     /* [T][head_dim] a quantized V row, dequantized, per thread */
};

/* block_deltanet.c */
struct deltanet_scratch {
    float *qkv;      /* [d_conv - 1 + B][conv_ch] conv window: the state's rows, then the batch's */
    float *conv;     /* [B][conv_ch] conv output after SiLU: per token the Hk q heads and Hk k
                      * heads (L2-normalised in place), then the Hv v heads, which the
                      * recurrence overwrites with its output (before ssm_out) */
    float *z;        /* [B][ssm_v_dim] output gate */
    float *beta;     /* [B][Hv] */
    float *gate;     /* [B][Hv] decay exponent g */
    float *delta;    /* [T][Dv] per thread */
};

/* block_ffn.c: the dense FFN and the shared expert's SwiGLU (F: the widest of their hidden
 * sizes) */
struct ffn_scratch {
    uint8_t *act_in; /* [B] act rows of xn for the gate (and up) matrix */
    uint8_t *act_up; /* [B] act rows of xn for up, when its activation format differs */
    uint8_t *act_hidden; /* [B] act rows of silu(g) * u for down */
    float *g;        /* [B][F] gate rows, then silu(g) * u */
    float *u;        /* [B][F] up rows */
};

/* block_moe.c: routing and the routed experts (F: n_ff_exp), and the shared expert's result */
struct moe_scratch {
    float *router;   /* [B][n_expert] router logits, then probabilities */
    int32_t *sel;    /* [B][K] chosen experts, best first */
    float *sel_w;    /* [B][K] their renormalised weights */
    int32_t *exp_n;  /* [n_expert] tokens routed to each expert in this batch */
    int32_t *exp_tok;/* [n_expert][B] activation row (token) of each */
    int32_t *exp_out;/* [n_expert][B] output row (token * K + slot) of each */
    int32_t *ids;    /* [n_expert] experts routed to in this batch, ascending */
    const uint8_t **exp_mat; /* [n_expert * 3] their gate, up, down matrices, by expert */
    int32_t *todo;   /* [n_expert] indexes into ids of the experts still to compute */
    int32_t *ready;  /* [n_expert] those whose matrices are here, to compute now */
    uint8_t *act_in; /* [B] act rows of xn for the gate (and up) matrices */
    uint8_t *act_up; /* [B] act rows of xn for up, when its activation format differs */
    uint8_t *act_hidden; /* [B * K] act rows of each (token, slot)'s silu(g) * u for down */
    float *g;        /* [B * K][F] */
    float *u;        /* [B * K][F] */
    float *out;      /* [B * K][n_embd] each (token, slot)'s expert output */
    float *shexp;    /* [B][n_embd] the shared expert's output */
    float *router_x; /* [B][n_embd] the router's own input (gemma4: x normalised and scaled) */
    float *shexp_gate; /* [B] its gate's logit */
};

/* block_moe.c's next-layer lookahead */
struct prefetch_scratch {
    float *xn;       /* [B][n_embd] x normalised with the next layer's ffn_norm */
    float *router;   /* [B][n_expert] the next layer's router logits */
    int32_t *votes;  /* [n_expert] tokens whose top k hold each expert */
    int32_t *ids;    /* [n_expert] the experts voted for, most votes first */
};

struct engine {
    const struct model *m;
    struct engine_params p;
    struct threadpool *tp;
    struct matmul mm;
    struct sequence **seqs; /* [p.n_seq] */
    int32_t q_dim, kv_dim, k_used; /* k_used: experts per token (1 for dense); q_dim, kv_dim: the
                            * widest layer's (gemma4's layers differ), the rows' strides */
    int32_t head_dim_max;  /* the widest layer's head */
    int32_t *kv_layer;     /* [n_layer] attention layer il's KV index, or -1 */
    int32_t *rec_layer;    /* [n_layer] recurrent layer il's state index, or -1 */
    bool *kv_swa;          /* [n_layer] attention layer kv_il has a sliding window */
    struct ops_rope rope;  /* the model's RoPE and its scaling */
    struct ops_rope rope_swa; /* the window layers' own (hp.n_rot_swa > 0: gemma4) */
    int32_t conv_ch;       /* DeltaNet conv channels: 2 Hk Dk + Hv Dv (0: none) */
    int32_t ssm_v_dim;     /* DeltaNet Hv Dv */
    struct expert_cache *experts;   /* borrowed; NULL: experts resident in the model image */
    size_t kv_room;  /* with experts: the bytes the cache and the KV pages that may be resident
                      * share (engine_set_experts) */
    engine_route_fn route_fn;       /* optional observer of each layer's routed experts */
    void *route_ctx;
    struct replay *replay;          /* borrowed; non-NULL: routing from a trace (--route-replay) */
    engine_trace_fn trace_fn;       /* optional per-op trace (engine_set_trace) */
    void *trace_ctx;
    int trace_il;                   /* the layer the trace points now belong to (-1: none) */
    struct engine_vk *vk;           /* owned; non-NULL: the steps run on a GPU (backend_vulkan.c) */
    size_t scratch_bytes;
    struct engine_timing timing;

    /* the driver's rows (engine.c), which every block reads */
    float *x;        /* [B][n_embd] residual stream */
    float *xn;       /* [B][n_embd] normalised input of a block (the logits' rows at the end) */
    float *y;        /* [B][n_embd] a block's output, which the driver adds to x */
    float *rope_cs;  /* [B][n_rot] each token's RoPE cos/sin */
    float *rope_cs_swa; /* [B][n_rot_swa] the window layers' (used when hp.n_rot_swa > 0) */
    uint8_t *embd_row; /* [row_bytes of token_embd]: a row read from the file (embd_on_disk) */
    /* gemma4's per-layer embeddings (block_ple.c; empty without them), P = n_embd_per_layer */
    float *ple;        /* [B][n_layer * P] each token's per-layer inputs, layer by layer */
    float *ple_tok;    /* [n_layer * P] a token's row of the table, dequantized */
    float *ple_g;      /* [B][P] a layer's gated per-layer input */
    uint8_t *ple_row;  /* [row_bytes of per_layer_token_embd]: a row read from the file */
    /* the product helpers' act rows (engine_matmul, engine_matmul_multi and the logits): valid
     * only inside one of their calls */
    uint8_t *act[ENGINE_ACT_SLOTS]; /* [B] each */

    struct attn_scratch attn;
    struct deltanet_scratch dn;
    struct ffn_scratch ffn;
    struct moe_scratch moe;
    struct prefetch_scratch pf;

    /* the step being run: each token's sequence and position, its segments, and the logits
     * rows wanted (out_n rows of the batch from out_row, into out_dst, n_vocab floats apart) */
    int32_t *tok_id;    /* [B] token ids */
    int32_t *tok_seq;   /* [B] */
    int32_t *tok_pos;   /* [B] */
    int32_t n_seg;
    struct engine_seg {
        int32_t seq, first, n;     /* tokens first .. first+n-1 of the batch */
    } *seg;                        /* [n_seq] */
    bool step_reads_prompt;        /* a segment has several tokens (a prompt chunk, not decode) */
    int32_t n_out;
    struct engine_out {
        int32_t row, n;
        float *dst;
        int64_t cap_first;         /* its first soft-capping chunk: the chunks of the requests
                                    * before it (engine_output_softcap, once a step) */
    } *out;                        /* [n_seq] */
};

/* A thread-pool task's context for a layer's per-head work (attention, the DeltaNet recurrence):
 * on the stack of the block that runs it. */
struct engine_task {
    struct engine *e;
    int il;
};

/* A trace point: n_rows rows of n floats, stride apart, after op of the current layer
 * (engine_set_trace); nothing when no trace is set. */
static inline void engine_trace(const struct engine *e, const char *op, const float *rows,
                                int32_t n_rows, int64_t n, size_t stride) {
    if (e->trace_fn)
        e->trace_fn(e->trace_ctx, e->trace_il, op, rows, n_rows, n, stride);
}

/* The sequence token t of the step belongs to. */
static inline struct sequence *engine_tok_seq(const struct engine *e, int32_t t) {
    return e->seqs[e->tok_seq[t]];
}

/* ---- matrix products (engine.c) ----
 * Each returns 0 or the error of a product that could not run: -ENOSPC (the job queue is full)
 * or -ENOTSUP (no quantize path for the weight type: matmul_quantize, which the blocks call for
 * their own act rows). The step fails with it: a product skipped would leave stale rows behind
 * and the logits wrong with no error. */

/* Queues out[t] = M * act[t] for n_tok rows, M being one matrix of w's shape and type at data. */
int engine_queue(struct engine *e, const struct weight *w, const uint8_t *data,
                 const uint8_t *act, size_t act_stride, const int32_t *act_idx, float *out,
                 size_t out_stride, const int32_t *out_idx, int32_t n_tok);

/* out[t] = W * x[t] for n_tok rows, in one dispatch (act slot 0). */
int engine_matmul(struct engine *e, const struct weight *w, const float *x, size_t x_stride,
                  float *out, size_t out_stride, int32_t n_tok);

/* Queues the products of n weights with the same input rows x (n_embd wide), quantizing x once
 * per distinct activation format (slots 0 .. n-1), and runs them in one dispatch. n <= 3; slot
 * i >= 1 is sized for the i-th weight of the mixers' triples (engine.c's engine_widths lists
 * them: a new caller adds its triple there). */
int engine_matmul_multi(struct engine *e, const struct weight *const *ws, float *const *outs,
                        const size_t *out_strides, const float *x, int32_t n_tok, int n);

/* The row of table w (token_embd, per_layer_token_embd) for token: in the image, or when on_disk
 * read from the file into buf (w's row_bytes). *row is borrowed until the next call. Returns 0
 * or the read's negative error. */
int engine_table_row(struct engine *e, const struct weight *w, bool on_disk, uint8_t *buf,
                     int32_t token, const uint8_t **row);

/* gemma4's per-layer embeddings (block_ple.c). block_ple_inputs: the per-layer inputs of the
 * batch's tokens[n_tok] into ple from x (the scaled embeddings) and the table. block_ple: y = the per-layer
 * embedding's output for layer il from x (the residual after the FFN), before its norm. Each
 * returns 0 or a product's or a row read's error. */
int block_ple_inputs(struct engine *e, const int32_t *tokens, int32_t n_tok);
int block_ple(struct engine *e, int il, int32_t n_tok);

/* ---- blocks: each reads xn (the normalised residual) and returns 0 or the error of a product
 * (above) or of an expert read ---- */

/* One query head of one token over its sequence's cache (block_attn.c's attn_task, exposed so
 * that tests/test_gpu.c checks the GPU's attention against the very same code): the positions
 * first .. first + n_kv - 1, position p at row p % rows of k and v (the head's bytes of row 0;
 * rows row_bytes apart). */
struct attn_head {
    enum qtype kv_type;   /* QTYPE_F32, F16, Q8_0 or Q4_0 */
    const float *q;       /* [head_dim] */
    const uint8_t *k, *v;
    size_t row_bytes;
    int32_t rows, first, n_kv, head_dim;
    float scale, sink;    /* sink: -INFINITY for none */
};

/* out[head_dim] = the head's attention output. Scratch, all borrowed for the call: s[n_kv]
 * scores, qbuf 2 head_dim bytes (the query in the KV type's format), vrow[head_dim]. */
void attn_head(const struct attn_head *a, float *out, float *s, void *qbuf, float *vrow);

/* y = attention(xn) of layer il (block_attn.c): GQA over the sequence's KV rows, with q/k head
 * norms and partial RoPE when the layer has them, gated by sigmoid(gate) for
 * MODEL_MIXER_ATTN_GATED. The batch's K and V rows are written at n_past .. n_past+n_tok-1. */
int block_attn(struct engine *e, int il, int32_t n_tok);

/* y = deltanet(xn) of layer il (block_deltanet.c): updates the layer's conv and SSM state. */
int block_deltanet(struct engine *e, int il, int32_t n_tok);

/* y = SwiGLU FFN(xn) of layer il's dense matrices, resident or through the expert cache
 * (block_ffn.c). */
int block_ffn_dense(struct engine *e, int il, int32_t n_tok);

/* out = down(silu(gate xn) * up xn) with resident matrices, the dense FFN's arithmetic (a shared
 * expert's), in the FFN's scratch. */
int block_ffn_swiglu(struct engine *e, const struct weight *gate, const struct weight *up,
                     const struct weight *down, float *out, int32_t n_tok);

/* y = routed experts(xn) of layer il, plus the gated shared expert when the layer has one
 * (block_moe.c). */
int block_moe(struct engine *e, int il, int32_t n_tok);

/* Layer il's union of experts, those with moe.exp_n[x] > 0, into moe.ids ascending; tells the
 * route observer and counts the union in the timing. Returns the union's size. (block_moe's
 * routing fills exp_n; the Vulkan backend's from the routes the device sent back.) */
int32_t block_moe_union(struct engine *e, int il);

/* The routed experts of layer il that the GPU leaves to the CPU (backend_vulkan_experts.c):
 * sel[n_tok k] holds each pair (t, s)'s expert, or -1 for a pair computed elsewhere; each chosen
 * pair's expert output (unweighted, with its bias) goes to out row t k + s (n_embd floats), as
 * block_moe computes it: resident matrices, or through the expert cache with its lookahead of
 * layer il + 1 from x. Reads xn and x (the rows entering the FFN); other rows of out are left
 * alone, and nothing is told to the route observer. Uses moe_scratch. Returns 0, a read error or
 * a product's error. */
int block_moe_experts(struct engine *e, int il, const int32_t *sel, int32_t n_tok, float *out);

/* ---- the Vulkan backend (backend_vulkan.c) ---- */

/* One step (engine_step's staged batch; x holds the embeddings, rope_cs the rotations) on the
 * GPU, the logits rows into out[]. Returns 0, an op's error, the CPU's experts' error (a read's
 * -EIO among them), or -EIO when the device failed. */
int engine_vk_step(struct engine *e, int32_t n_tok);

/* After a step on the GPU failed with -EIO: true when the device failed (the engine drops it),
 * false when a read of the CPU's experts did (the device is fine). */
bool engine_vk_device_failed(const struct engine *e);

/* Reads (writes) positions first .. first+n-1 of sequence seq's attention layer kv_il from (to)
 * device memory: k and v rows of row_bytes each, either may be NULL. Returns 0, -EINVAL or
 * -EIO. */
int engine_vk_kv_read(const struct engine *e, int32_t seq, int32_t kv_il, int32_t first,
                      int32_t n, void *k, void *v);
int engine_vk_kv_write(const struct engine *e, int32_t seq, int32_t kv_il, int32_t first,
                       int32_t n, const void *k, const void *v);

/* Sequence seq's recurrent state and window rings on the device follow its host bookkeeping
 * (sequence.h): after sequence_checkpoint, rec_checkpoint copies the state, and the rings' rows of
 * the window before n_past, into the slot now holding n_past; after the host restored, rolled
 * back or reset the sequence, rec_follow copies the slot at its n_past back into the state and
 * the rings (zeroes the state at 0 with none; a window-only model without a slot there was cut
 * back in place and keeps its rings). No-ops without a GPU or without recurrent and window
 * layers. Return 0, -EINVAL (a recurrent model with no slot at n_past > 0) or -EIO. */
int engine_vk_rec_checkpoint(struct engine *e, int32_t seq);
int engine_vk_rec_follow(struct engine *e, int32_t seq);

/* Reads (write: writes) sequence seq's recurrent state, n bytes (engine_state_size), from (to)
 * device memory. Returns 0, -EINVAL or -EIO. */
int engine_vk_state_move(const struct engine *e, int32_t seq, void *buf, size_t n, bool write);

void engine_vk_free(struct engine_vk *v);

#endif
