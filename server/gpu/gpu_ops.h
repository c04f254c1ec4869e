/* gpu_ops.h - the engine's operations as GPU kernels, recorded into the device's command buffer
 * (gpu.h): activation quantization and quantized matrix products, each bit-identical to the CPU
 * kernels of common/quant.h under their accumulation contract (tests/test_gpu.c compares them
 * with memcmp). Tensors are named by device address (gpu_buf_addr + an offset).
 *
 *     struct gpu_ops o;
 *     gpu_ops_init(&o, g, err, sizeof(err));
 *     gpu_begin(g);
 *     gpu_op_quantize(&o, w_type, x, n_embd, act, &act_stride, n_embd, n_tok);
 *     gpu_barrier(g);
 *     gpu_op_matmul(&o, w_type, w, row_bytes, n_in, n_rows, act, act_stride, out, n_rows, n_tok);
 *     gpu_submit(g);
 *     gpu_ops_release(&o); */
#ifndef SNIPER_GPU_OPS_H
#define SNIPER_GPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "qtype.h"

/* The row ops' kernels (gpu_rowops.c), -1 where the build has none. */
struct gpu_rowops {
    int rms_norm, rope, add_rows, swiglu, swiglu_quant, sigmoid_mul, moe_sum, kv_store, geglu,
        scale_rows, attn_prep;
};

/* The attention's kernels per KV type (gpu_attn.c), -1 where a type has none. */
struct gpu_attn_kernels {
    int query[QTYPE_COUNT];   /* the query in the KV type's format (-1 for F32 and F16: the
                               * scores read it as they take it) */
    int scores[QTYPE_COUNT], vsum[QTYPE_COUNT];
};

struct gpu_ops {
    struct gpu *g; /* borrowed */
    struct gpu_rowops row;
    int matmul[QTYPE_COUNT];   /* kernel of a weight type's product, or -1 */
    int quantize[QTYPE_COUNT]; /* kernel making a weight type's activation rows, or -1 */
    int matmul_tile[QTYPE_COUNT]; /* kernel of a type's tiled product (prefill), or -1 */
    bool tile_taken[QTYPE_COUNT]; /* the products take it (from tile_min_tok): set by init for
                                * the types where it measured faster (gpu_ops.c's tile_pays) */
    int group_pairs;           /* the experts' pair grouping (gpu_op_group_pairs), or -1 */
    int32_t tile_min_tok;      /* tokens (pairs) from which products take the tiled kernels: set
                                * by init from measurements; INT32_MAX: never (bench-gpu's
                                * comparison) */
    struct gpu_buf *tables;    /* the grid i-quants' codebooks (owned), NULL before init */
    uint64_t table_addr[QTYPE_COUNT]; /* a type's codebook in tables, 0 for types without one */
    struct gpu_attn_kernels attn;
};

/* Finds the kernels of every weight type g's build has and uploads the grid i-quants' codebooks
 * (common/quant_iq.h's tables, about 50 KiB of device memory, counted in g's budget). Returns 0
 * (gpu_ops_release releases what it holds), -ENOENT when the build has no kernels at all, -ENOMEM
 * when the codebooks find no room, or gpu_buf_write's error; a message says which. On error
 * nothing is held. */
int gpu_ops_init(struct gpu_ops *o, struct gpu *g, char *err, size_t err_len);

/* Fills o->row with g's row-op kernels (gpu_rowops.c; gpu_ops_init calls it). */
void gpu_rowops_find(struct gpu_ops *o);

/* Frees what gpu_ops_init holds; call it before gpu_close. Accepts an o that init failed on. */
void gpu_ops_release(struct gpu_ops *o);

/* True when weights of type t can be multiplied on the GPU. */
bool gpu_ops_has_type(const struct gpu_ops *o, enum qtype t);

/* Records dst rows = t's activation format of n_rows rows of n floats (x: x_stride floats apart),
 * as matmul_quantize does on the CPU; *act_stride gets the bytes between dst rows. Returns 0 or
 * -ENOTSUP for a type without kernels. */
int gpu_op_quantize(struct gpu_ops *o, enum qtype t, uint64_t x, size_t x_stride, uint64_t dst,
                    size_t *act_stride, int64_t n, int32_t n_rows);

/* Records out[t][r] = dot(weight row r, activation row t) for r < n_rows, t < n_tok: weights of
 * type t at w (rows row_bytes apart, n_in elements each), activation rows act_stride bytes apart,
 * output rows out_stride floats apart. From o->tile_min_tok tokens a type whose tiled kernel
 * (matmul_tile.glsl) is o->tile_taken runs on it: the same bits. Returns 0, -ENOTSUP, or -EINVAL for the types of
 * 256-element blocks (K-quants, i-quants) where act or act_stride is not a multiple of 16
 * (quant_act_row_stride's are), or w or row_bytes not a multiple of the block size's largest
 * power-of-two divisor up to 16 (16 for Q4_K and Q5_K, 8 for IQ4_XS and IQ1_M, 4 for Q2_K, 2 for
 * the others): their kernels read words, 16 bytes where the blocks keep that aligned. */
int gpu_op_matmul(struct gpu_ops *o, enum qtype t, uint64_t w, size_t row_bytes, int64_t n_in,
                  int64_t n_rows, uint64_t act, size_t act_stride, uint64_t out, size_t out_stride,
                  int32_t n_tok);

/* gpu_op_matmul, each output row r then plus bias[r] (n_rows floats in device memory; 0: none)
 * in the same kernel: the CPU adds a bias to the product's result, the same one rounding. */
int gpu_op_matmul_bias(struct gpu_ops *o, enum qtype t, uint64_t w, size_t row_bytes,
                       int64_t n_in, int64_t n_rows, uint64_t act, size_t act_stride,
                       uint64_t out, size_t out_stride, uint64_t bias, int32_t n_tok);

/* ---- the forward pass's other ops: each gives server/engine/ops.h's (and the blocks') bits, by
 * the row ops' contract (contract.glsl). Tensors are float rows by device address unless named
 * otherwise; each returns 0, -EINVAL for a shape it cannot take, or -ENOTSUP when o has no
 * kernel for it (after gpu_ops_release). Code: gpu_rowops.c (the products: gpu_ops.c). ---- */

/* y rows = x rows / rms(x row) * w (w 0: no weight): n_rows rows of n, x_stride / y_stride floats
 * apart; y may be x. As ops_rms_norm. */
int gpu_op_rms_norm(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t w, uint64_t y,
                    size_t y_stride, int64_t n, float eps, int32_t n_rows);

/* x rows = r rows + x rows (r: rows x_stride apart, as x's), then gpu_op_rms_norm of them: a
 * residual's add and the next block's norm in one kernel. y must not be x. */
int gpu_op_add_rms_norm(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t r, uint64_t w,
                        uint64_t y, size_t y_stride, int64_t n, float eps, int32_t n_rows);

/* Where a row op writes its rows a second time, in the activation format of a product with a
 * weight of type wtype: the rows gpu_op_quantize(wtype, ...) would write from them, at dst, bit for
 * bit; *stride gets their bytes apart. The product then needs no quantizer of its own (one kernel
 * and one barrier fewer: each cost about 5.7 us a decode step on the H100). */
struct gpu_quant_out {
    enum qtype wtype;
    uint64_t dst;
    size_t *stride;
};

/* Whether a row op can quantize its rows of n for a weight of type wtype (its activations are not
 * F32 and n fills their blocks). */
bool gpu_quant_out_takes(enum qtype wtype, int64_t n);

/* gpu_op_rms_norm (r 0) or gpu_op_add_rms_norm, its rows then quantized as q says (y may not be
 * x), in one kernel. -EINVAL where gpu_quant_out_takes says no. */
int gpu_op_rms_norm_quantize(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t r,
                             uint64_t w, uint64_t y, size_t y_stride, int64_t n, float eps,
                             int32_t n_rows, const struct gpu_quant_out *q);

/* The routed experts' rows and weights as gpu_op_moe_sum takes them (d, w, k, shexp, shexp_gate),
 * for a norm that adds their sum. */
struct gpu_moe_rows {
    uint64_t d, w, shexp, shexp_gate;
    int32_t k;
};

/* x rows += gpu_op_moe_sum's rows of m (the sum's bits, never written to memory), then
 * gpu_op_rms_norm of them into y, quantized as q says where q is not NULL: a MoE layer's sum, the
 * residual's add and the next block's norm in one kernel. y must not be x; m's rows are n floats
 * apart. -EINVAL also for m's k < 1 or a shared expert without its gate. */
int gpu_op_moe_add_rms_norm(struct gpu_ops *o, uint64_t x, size_t x_stride,
                            const struct gpu_moe_rows *m, uint64_t w, uint64_t y, size_t y_stride,
                            int64_t n, float eps, int32_t n_rows, const struct gpu_quant_out *q);

/* RoPE in place: head h of token t at x + t tok_stride + h head_stride floats, n_head heads of
 * n_tok tokens, rotated by cs's row t (ops_rope_cache's table, n_rot floats a token); neox pairs
 * or normal ones, as ops_rope_neox / ops_rope_norm. */
int gpu_op_rope(struct gpu_ops *o, bool neox, uint64_t x, size_t tok_stride, size_t head_stride,
                int32_t n_head, uint64_t cs, int32_t n_rot, int32_t n_tok);

/* y row r += b row r (b_stride 0: the same b row for every r, a bias), n_rows rows of n. */
int gpu_op_add(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t b, size_t b_stride,
               int64_t n, int32_t n_rows);

/* y row r += b row ids[r] (int32 ids in device memory; b rows n floats apart): an expert's bias.
 * Each ids[r] must name a row of b: the kernel does not bound it (gpu_op_matmul_id's note). */
int gpu_op_add_id(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t b, uint64_t ids,
                  int64_t n, int32_t n_rows);

/* y[i] = silu(g[i]) * u[i] over n (oai: gpt-oss's clamped one), as ops_swiglu / ops_swiglu_oai;
 * y may be g or u. */
int gpu_op_swiglu(struct gpu_ops *o, bool oai, uint64_t y, uint64_t g, uint64_t u, int64_t n);

/* gpu_op_swiglu over n_rows rows of n (y, g and u rows stride floats apart), each row then
 * quantized as q says, in one kernel. -EINVAL where gpu_quant_out_takes says no. */
int gpu_op_swiglu_quantize(struct gpu_ops *o, bool oai, uint64_t y, uint64_t g, uint64_t u,
                           size_t stride, int64_t n, int32_t n_rows, const struct gpu_quant_out *q);

/* y row r = gelu(g row r) * u row r elementwise, n_rows rows of n (strides in floats), as
 * ops_geglu: gelu read from table (device memory: ops_gelu_f16_table's 65,536 halves) for g
 * rounded to f16, 0 at or below -10, g at or above 10. y may be g or u. */
int gpu_op_geglu(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t g, size_t g_stride,
                 uint64_t u, size_t u_stride, uint64_t table, int64_t n, int32_t n_rows);

/* y row r = (x row r * a) * w elementwise (w 0: no weight; each product rounded), n_rows rows of
 * n: ggml_scale, and gemma4's router input (times 1 / sqrt(n_embd), times its scale). y may be x. */
int gpu_op_scale(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t x, size_t x_stride,
                 float a, uint64_t w, int64_t n, int32_t n_rows);

/* y row r *= s[ids[r]] (int32 ids in device memory, s floats): an expert's output scale. Each
 * ids[r] must name a float of s: the kernel does not bound it (gpu_op_matmul_id's note). */
int gpu_op_scale_id(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t s, uint64_t ids,
                    int64_t n, int32_t n_rows);

/* y row r = y row r * (1 / (1 + exp(-g row r))) elementwise, n_rows rows of n: the gated
 * attention's output gate (block_attn.c). */
int gpu_op_sigmoid_mul(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t g, size_t g_stride,
                       int64_t n, int32_t n_rows);

/* The routed experts' weighted sum, per token t < n_tok: y[t] = d[t k] * w[t k], then
 * y[t] + d[t k + s] * w[t k + s] for s = 1 .. k - 1 (d: rows of n floats, w: k floats a token);
 * then, with shexp (not 0), y[t] + shexp[t] * (1 / (1 + exp(-gate[t]))): block_moe.c's order. */
int gpu_op_moe_sum(struct gpu_ops *o, uint64_t y, uint64_t d, uint64_t w, int32_t k, int64_t n,
                   uint64_t shexp, uint64_t shexp_gate, int32_t n_tok);

/* K or V rows into a sequence's cache: token t's kv_dim floats (src + t src_stride) become row
 * (pos0 + t) % ring_rows of the rows at dst (row_bytes apart) in kv_type: f32 copied, f16, or
 * q8_0 / q4_0 blocks, as block_attn.c's kv_store. */
int gpu_op_kv_store(struct gpu_ops *o, enum qtype kv_type, uint64_t src, size_t src_stride,
                    uint64_t dst, size_t row_bytes, int32_t ring_rows, int32_t pos0, int64_t kv_dim,
                    int32_t n_tok);

/* How gpu_op_attn_prep treats the V rows: stored as they are, normalised without a weight first,
 * or K's projection (before K's norm) normalised without a weight: gemma4's layers without
 * attn_v. */
enum gpu_v_norm { GPU_V_AS_IS, GPU_V_NORM, GPU_V_FROM_K };

/* The attention's prologue of one segment (block_attn.c's qk_rope_store), one dispatch: per token
 * t and query head h, the head's row at q + t q_tok_stride + h q_head_stride floats normalised
 * (gpu_op_rms_norm with q_norm; q_norm 0: no norm) and turned (gpu_op_rope by cs's row t) in
 * place; per KV head j, K's row at k + t kv_stride + j head_dim floats normalised with k_norm (0:
 * none) and turned, V's (v, the same layout) as v_norm says, both stored as head j of row (pos0 +
 * t) % ring_rows of k_rows and v_rows (gpu_op_kv_store's conversion). The bits of those ops run
 * one after another; k's and v's own rows are left as they were. */
struct gpu_attn_prep {
    enum qtype kv_type;      /* the cache's: F32, F16, Q8_0, Q4_0 */
    bool neox;
    uint64_t q;
    size_t q_tok_stride, q_head_stride;   /* floats */
    uint64_t k, v;           /* v unread with GPU_V_FROM_K */
    size_t kv_stride;        /* floats from a token's K (V) row to the next's */
    uint64_t q_norm, k_norm; /* head_dim floats each, or 0 */
    enum gpu_v_norm v_norm;
    uint64_t cs;             /* token t's table at cs + t n_rot floats */
    int32_t n_rot;           /* even, at most head_dim */
    uint64_t k_rows, v_rows; /* the layer's K and V rows of the sequence (row 0) */
    size_t row_bytes;
    int32_t ring_rows, pos0;
    int32_t n_head, n_head_kv, head_dim, n_tok; /* n_head_kv 0: the queries only */
    float eps;
};

/* Whether gpu_op_attn_prep takes heads of head_dim with a cache of kv_type: a head's row fits its
 * workgroup's shared memory (512 floats) and whole blocks of Q8_0 / Q4_0 (head_dim % 32 == 0). */
bool gpu_attn_prep_takes(enum qtype kv_type, int32_t head_dim);

/* Records a's prologue (contract above); the caller orders what wrote q, k, v before it and what
 * reads q and the rows after it. Returns 0, -ENOTSUP without the kernel, or -EINVAL for a shape
 * gpu_attn_prep_takes refuses, an odd n_rot or one past head_dim, rows too short for the KV heads,
 * strides past 32 bits, or halves or floats not aligned to their size. */
int gpu_op_attn_prep(struct gpu_ops *o, const struct gpu_attn_prep *a);

/* The routed experts' products (ggml's mul_mat_id): for pair p < n_pairs, out row out_idx[p] =
 * the matrix ids[p] (at w + ids[p] mat_bytes, n_rows rows of row_bytes) times activation row
 * act_idx[p]; ids, act_idx, out_idx are int32 arrays in device memory (act_idx or out_idx 0:
 * pair p's own row p). Each output element is gpu_op_matmul's. With mat_bytes 0, w is instead a
 * table of uint64 device addresses, matrix ids[p] at the table's entry ids[p] (matrices wherever
 * they are: an expert cache's slots read in place); each must be aligned as w would be.
 * Not checked: every ids[p] must name one of w's matrices, act_idx[p] a row of act and out_idx[p]
 * a row of out. The indices are device data (gpu_op_route writes them), out of the host's sight
 * when this records, and the kernels (matmul_push.glsl) do not bound them: an id past w's
 * matrices reads past w (and its bias), an out_idx past out writes past it, on a device sharing
 * the host's memory (lavapipe) into the host's heap. gpu_op_route writes only ids below its
 * n_expert; ids the caller writes (the three levels' slots) are its own to keep in range. */
int gpu_op_matmul_id(struct gpu_ops *o, enum qtype t, uint64_t w, size_t mat_bytes,
                     size_t row_bytes, int64_t n_in, int64_t n_rows, uint64_t ids, uint64_t act,
                     size_t act_stride, uint64_t act_idx, uint64_t out, size_t out_stride,
                     uint64_t out_idx, int32_t n_pairs);

/* The routed experts' pairs grouped by expert, for the tiled products (gpu_op_group_pairs):
 * a table in device memory and the tiles it has room for. */
struct gpu_pair_groups {
    uint64_t addr;      /* gpu_pair_groups_bytes of device memory, 8-byte aligned; 0: none */
    int32_t max_tiles;  /* tiles of up to 16 pairs of one expert the table may list */
};

/* Bytes of the table gpu_op_group_pairs writes for n_pairs pairs over n_expert experts (0 for
 * negative counts). */
size_t gpu_pair_groups_bytes(int32_t n_pairs, int32_t n_expert);

/* Records the grouping of n_pairs pairs by expert (ids: int32 array in device memory, each below
 * n_expert <= 1024; a pair with another id is left out and its outputs are not written) into
 * table (gpu_pair_groups_bytes, 8-byte aligned): each expert's pairs in tiles of at most 16,
 * which gpu_op_matmul_grouped runs a workgroup each, reading the expert's weights once for the
 * tile. *out names the table (addr 0 where n_pairs is below o->tile_min_tok: nothing recorded,
 * the products take the per-pair drivers). The caller orders what wrote ids before it and the products after
 * it (gpu_barrier). Returns 0, -EINVAL for counts out of range or a misaligned table, or -ENOTSUP
 * where the build has no kernel. */
int gpu_op_group_pairs(struct gpu_ops *o, uint64_t ids, int32_t n_expert, int32_t n_pairs,
                       uint64_t table, struct gpu_pair_groups *out);

/* gpu_op_matmul_id's product (the same outputs, bit for bit) over pg's tiles where type t's tiled
 * kernel is o->tile_taken and n_pairs reaches o->tile_min_tok; otherwise (or pg NULL) as
 * gpu_op_matmul_id.
 * pg must come from gpu_op_group_pairs over the same ids and n_pairs. Returns as
 * gpu_op_matmul_id. */
int gpu_op_matmul_grouped(struct gpu_ops *o, enum qtype t, uint64_t w, size_t mat_bytes,
                          size_t row_bytes, int64_t n_in, int64_t n_rows, uint64_t ids,
                          uint64_t act, size_t act_stride, uint64_t act_idx, uint64_t out,
                          size_t out_stride, uint64_t out_idx, int32_t n_pairs,
                          const struct gpu_pair_groups *pg);

/* gpu_op_matmul_grouped, pair p's output row r then plus its expert's bias[ids[p] n_rows + r]
 * (0: none), as gpu_op_matmul_bias. */
int gpu_op_matmul_grouped_bias(struct gpu_ops *o, enum qtype t, uint64_t w, size_t mat_bytes,
                               size_t row_bytes, int64_t n_in, int64_t n_rows, uint64_t ids,
                               uint64_t act, size_t act_stride, uint64_t act_idx, uint64_t out,
                               size_t out_stride, uint64_t out_idx, int32_t n_pairs,
                               const struct gpu_pair_groups *pg, uint64_t bias);

/* A MoE layer's routing, block_moe.c's route_token bit for bit: for each of n_tok tokens, its
 * router logits (n_expert <= 1024 floats a row, plus bias when not 0), softmax over all then top
 * k with weights renormalised (softmax_all), or top k of the logits and a softmax over those;
 * writes the pairs gpu_op_matmul_id takes: 4 arrays of n_tok k at pairs (expert ids, activation
 * rows t, output rows t k + s, weights as floats), and the ids again at log when not 0 (a host
 * buffer: what the CPU's statistics read after the step). k <= 32. Returns 0, -EINVAL or
 * -ENOTSUP. */
int gpu_op_route(struct gpu_ops *o, uint64_t logits, uint64_t bias, bool softmax_all,
                 int32_t n_expert, int32_t k, uint64_t pairs, uint64_t log, int32_t n_tok);

/* Causal attention of one segment (one sequence's consecutive tokens) over its cache, as
 * block_attn.c's attn_task per (token, head): scores by the KV type's dot product (f32; f16 with
 * the query in f16; q8_0 / q4_0 with the query in q8_0), times scale, the softmax with the sink
 * (ops_softmax_sink), then the weighted sum of V rows in position order (f16: the probability
 * rounded to f16 first). The token at position pos sees pos - window + 1 .. pos (window 0: 0 ..
 * pos); position p is row p % ring_rows. */
struct gpu_attn {
    enum qtype kv_type;
    uint64_t q;              /* head h of token t at q + t q_tok_stride + h q_head_stride floats */
    size_t q_tok_stride, q_head_stride;
    uint64_t k, v;           /* the layer's K and V rows of the sequence (row 0) */
    size_t row_bytes;        /* bytes of one K or V row: its n_head_kv heads of head_dim packed
                              * from its start (a longer row: a wider layer's, gemma4) */
    int32_t ring_rows;
    uint64_t out;            /* head h of token t at out + t out_stride + h head_dim floats */
    size_t out_stride;
    uint64_t sinks;          /* [n_head] floats, or 0 */
    uint64_t scratch;        /* gpu_attn_scratch_bytes of device memory */
    int32_t n_head, n_head_kv, head_dim;
    int32_t pos0, n_tok;     /* the segment: positions pos0 .. pos0 + n_tok - 1 */
    int32_t window;
    float scale;
};
/* Bytes of scratch gpu_op_attn needs for a segment of n_tok tokens of n_head heads that see at
 * most n_ctx positions each (the context, or the window plus nothing more). */
size_t gpu_attn_scratch_bytes(int32_t n_tok, int32_t n_head, int32_t n_ctx);

/* Records the segment's attention: the query in the KV type's format (Q8_0 and Q4_0), the scores
 * over positions, then the softmax with the weighted sum over elements, barriers between them; the
 * caller orders what wrote q, k, v before it and what reads out after it (gpu_barrier). Returns 0,
 * -ENOTSUP for a KV type without kernels, or -EINVAL for a shape it cannot take: head_dim past
 * 512 (or not a multiple of 32 for Q8_0 / Q4_0), n_head not a multiple of n_head_kv, rows too
 * short for the heads, a ring shorter than the positions a token sees, n_tok < 1, or K and V
 * rows (k, v, row_bytes, a head's bytes) not 16-byte aligned for F32 or 8-byte aligned for F16. */
int gpu_op_attn(struct gpu_ops *o, const struct gpu_attn *a);

/* Finds the attention's kernels in g (every entry -1 where g is NULL or a kernel is missing). */
void gpu_attn_kernels_find(struct gpu_attn_kernels *k, const struct gpu *g);

/* ---- the Gated DeltaNet mixer's steps (gpu_deltanet.c), each deltanet.h's bit for bit.
 * Each returns 0, or -ENOTSUP where the build lacks the kernel. ---- */

/* In place over n_tok tokens of n_head V heads (rows of n_head floats): beta = sigmoid(beta),
 * gate = softplus(gate + dt_bias[h]) * a[h] (deltanet_gates). */
int gpu_op_deltanet_gates(struct gpu_ops *o, uint64_t beta, uint64_t gate, uint64_t dt_bias,
                          uint64_t a, int32_t n_head, int32_t n_tok);

/* The causal conv of one sequence's n_tok consecutive rows of n_ch (rows, row_stride floats
 * apart) with the kernel w ([n_ch][d_conv]) and the sequence's conv state ([d_conv - 1][n_ch],
 * updated): out rows (out_stride floats apart; not rows or state) = silu(conv) (deltanet_conv). */
int gpu_op_deltanet_conv(struct gpu_ops *o, uint64_t rows, size_t row_stride, uint64_t state,
                         uint64_t w, uint64_t out, size_t out_stride, int32_t n_ch, int32_t d_conv,
                         int32_t n_tok);

/* L2 norms in place: head h of token t at x + t tok_stride + h n floats, n_head heads of n_tok
 * tokens (deltanet_l2_norm). */
int gpu_op_l2_norm(struct gpu_ops *o, uint64_t x, size_t tok_stride, int32_t n_head, int64_t n,
                   float eps, int32_t n_tok);

/* The recurrence of one sequence's n_tok consecutive tokens (deltanet_head_token for every V head
 * h of each token in order): S the layer's state ([n_hv][d][d]); token t's q heads, k heads and v
 * heads (n_hk, n_hk, n_hv of d floats) at conv + t conv_stride floats, its v heads overwritten
 * with the output; gate and beta rows of n_hv floats a token; V head h reads q / k head h % n_hk.
 * d <= 65535 * 64. */
struct gpu_deltanet {
    uint64_t S, conv, gate, beta;
    size_t conv_stride;
    int32_t n_hk, n_hv, d, n_tok;
    float scale;
};
int gpu_op_deltanet_recur(struct gpu_ops *o, const struct gpu_deltanet *r);

/* The heads' gated RMSNorm in place (deltanet_gated_norm): head h of token t at o + t o_stride +
 * h n floats, its gate at z + t z_stride + h n, the weight w [n]; n_head heads of n_tok tokens. */
int gpu_op_gated_norm(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t z, size_t z_stride,
                      uint64_t w, int32_t n_head, int64_t n, float eps, int32_t n_tok);

#endif
