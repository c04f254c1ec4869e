/* engine_impl.h - what the engine's parts share: the engine object (scratch sized once for n_batch
 * tokens), the matrix-product helpers, and the blocks a layer is made of. Private to
 * server/engine; the public API is engine.h.
 *
 * A step runs layer by layer over the batch: the mixer block (block_attn.c or block_deltanet.c)
 * adds its output to the residual stream x, then the FFN block (block_ffn.c or block_moe.c)
 * writes its output into tmp and the driver (engine.c) adds it. Blocks never allocate. The batch
 * is made of segments, each one sequence's consecutive tokens in order (engine_step_seg); every
 * block but the recurrent one works per token, reading the token's sequence and position from
 * tok_seq / tok_pos. */
#ifndef SNIPER_ENGINE_IMPL_H
#define SNIPER_ENGINE_IMPL_H

#include "engine.h"
#include "matmul.h"
#include "ops.h"
#include "sequence.h"

#define ENGINE_ACT_SLOTS 3

struct expert_cache;
struct threadpool;

struct engine {
    const struct model *m;
    struct engine_params p;
    struct threadpool *tp;
    struct matmul mm;
    struct sequence **seqs; /* [p.n_seq] */
    int32_t q_dim, kv_dim, n_ff_max, k_used; /* k_used: experts per token (1 for dense) */
    int32_t *kv_layer;     /* [n_layer] attention layer il's KV index, or -1 */
    int32_t *rec_layer;    /* [n_layer] recurrent layer il's state index, or -1 */
    bool *kv_swa;          /* [n_layer] attention layer kv_il has a sliding window */
    struct ops_rope rope;  /* the model's RoPE and its scaling */
    int32_t conv_ch;       /* DeltaNet conv channels: 2 Hk Dk + Hv Dv (0: none) */
    int32_t ssm_v_dim;     /* DeltaNet Hv Dv */

    /* scratch, sized for n_batch tokens (rows) */
    float *x;      /* [B][n_embd] residual stream */
    float *xn;     /* [B][n_embd] normalised input of a block */
    float *q;      /* [B][q_dim] */
    float *qg;     /* [B][2 q_dim] gated attention: per head, query rows then gate rows */
    float *k;      /* [B][kv_dim] */
    float *v;      /* [B][kv_dim] */
    float *attn;   /* [B][max(q_dim, ssm_v_dim)] attention or DeltaNet output before its projection */
    float *tmp;    /* [B][n_embd] block output */
    float *ffn_g;  /* [B*k_used][n_ff_max] */
    float *ffn_u;  /* [B*k_used][n_ff_max] */
    float *ffn_d;  /* [B*k_used][n_embd] */
    float *shexp;  /* [B][n_embd] shared expert output */
    float *shexp_gate; /* [B] its gate's logit */
    uint8_t *act[ENGINE_ACT_SLOTS]; /* quantized activation rows (see engine_alloc_all) */
    float *router;   /* [B][n_expert] */
    int32_t *sel;    /* [B][k_used] chosen experts, best first */
    float *sel_w;    /* [B][k_used] their renormalised weights */
    int32_t *exp_n;  /* [n_expert] tokens routed to each expert in this batch */
    int32_t *exp_tok;/* [n_expert][B] activation row (token) of each */
    int32_t *exp_out;/* [n_expert][B] output row (token * k_used + slot) of each */
    int32_t *fetch_ids;             /* [n_expert] experts routed to in this batch */
    const uint8_t **exp_mat;        /* [n_expert * 3] their gate, up, down matrices, by expert */
    int32_t *guess_n;   /* [n_expert] prefetch votes, then the experts still to compute */
    int32_t *guess_ids; /* [n_expert] prefetch guesses, then the experts ready to compute */
    struct expert_cache *experts;   /* borrowed; NULL: experts resident in the model image */
    size_t kv_room;  /* with experts: the bytes the cache and the KV pages that may be resident
                      * share (engine_set_experts) */
    engine_route_fn route_fn;       /* optional observer of each layer's routed experts */
    void *route_ctx;
    float *rope_cs;  /* [B][n_rot] */
    float *scores;   /* [n_threads][n_ctx] attention scores per thread */
    uint16_t *q16;   /* [n_threads][head_dim] query as fp16 (f16 KV) or q8_0 (q8_0/q4_0 KV) */
    float *vrow;     /* [n_threads][head_dim] a quantized V row, dequantized */
    uint16_t *p16;   /* [n_threads][n_ctx] probabilities as fp16 (f16 KV) */
    /* DeltaNet */
    float *qkv;      /* [d_conv - 1 + B][conv_ch] conv window: the state's rows, then the batch's */
    float *conv;     /* [B][conv_ch] conv output after SiLU; q and k L2-normalised in place */
    float *z;        /* [B][ssm_v_dim] output gate */
    float *beta;     /* [B][Hv] */
    float *gate;     /* [B][Hv] decay exponent g */
    float *delta;    /* [n_threads][Dv] */
    uint8_t *embd_row; /* [row_bytes of token_embd]: a row read from the file (embd_on_disk) */
    size_t scratch_bytes;
    struct engine_timing timing;

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
    } *out;                        /* [n_seq] */

    /* the layer the thread pool's attention or DeltaNet tasks work on */
    int task_layer;
};

/* The sequence token t of the step belongs to. */
static inline struct sequence *engine_tok_seq(const struct engine *e, int32_t t) {
    return e->seqs[e->tok_seq[t]];
}

/* ---- matrix products (engine.c) ----
 * Each returns 0 or the error of a product that could not run: -ENOSPC (the job queue is full)
 * or -ENOTSUP (no quantize path for the weight type). The step fails with it: a product skipped
 * would leave stale rows behind and the logits wrong with no error. */

/* Quantizes n_tok rows of x (n wide, x_stride apart) for w's type into act slot and sets *stride
 * to the rows' stride. */
int engine_quantize(struct engine *e, int slot, enum qtype wtype, const float *x, size_t x_stride,
                    int32_t n_tok, int64_t n, size_t *stride);

/* Queues out[t] = M * act[t] for n_tok rows, M being one matrix of w's shape and type at data. */
int engine_queue(struct engine *e, const struct weight *w, const uint8_t *data,
                 const uint8_t *act, size_t act_stride, const int32_t *act_idx, float *out,
                 size_t out_stride, const int32_t *out_idx, int32_t n_tok);

/* out[t] = W * x[t] for n_tok rows, in one dispatch. */
int engine_matmul(struct engine *e, const struct weight *w, const float *x, size_t x_stride,
                  float *out, size_t out_stride, int32_t n_tok);

/* Queues the products of n weights with the same input rows x (n_embd wide), quantizing x once
 * per distinct activation format (slots 0 .. n-1), and runs them in one dispatch. n <= 3. */
int engine_matmul_multi(struct engine *e, const struct weight *const *ws, float *const *outs,
                        const size_t *out_strides, const float *x, int32_t n_tok, int n);

/* ---- blocks: each reads xn (the normalised residual) and returns 0 or the error of a product
 * (above) or of an expert read ---- */

/* x += attention(xn) of layer il (block_attn.c): GQA over the sequence's KV rows, with q/k head
 * norms and partial RoPE when the layer has them, gated by sigmoid(gate) for
 * MODEL_MIXER_ATTN_GATED. The batch's K and V rows are written at n_past .. n_past+n_tok-1. */
int block_attn(struct engine *e, int il, int32_t n_tok);

/* x += deltanet(xn) of layer il (block_deltanet.c): updates the layer's conv and SSM state. */
int block_deltanet(struct engine *e, int il, int32_t n_tok);

/* tmp = SwiGLU FFN(xn) of layer il's dense matrices, resident or through the expert cache
 * (block_ffn.c). */
int block_ffn_dense(struct engine *e, int il, int32_t n_tok);

/* out = down(silu(gate xn) * up xn) with resident matrices, the dense FFN's arithmetic (a shared
 * expert's). Uses act slots 0-1, ffn_g and ffn_u. */
int block_ffn_swiglu(struct engine *e, const struct weight *gate, const struct weight *up,
                     const struct weight *down, float *out, int32_t n_tok);

/* tmp = routed experts(xn) of layer il, plus the gated shared expert when the layer has one
 * (block_moe.c). */
int block_moe(struct engine *e, int il, int32_t n_tok);

#endif
