/* backend_vulkan_impl.h - what backend_vulkan.c shares with the architectures' own GPU steps
 * (backend_vulkan_gemma4.c): the backend's state in device memory and the recording helpers.
 * Private to the engine's Vulkan backend: the rest of the engine sees engine_impl.h's engine_vk_*.
 * Every helper records into the device's command buffer between vk_begin and vk_submit; a product
 * is not followed by a barrier (vk_sync orders what reads it). */
#ifndef SNIPER_BACKEND_VULKAN_IMPL_H
#define SNIPER_BACKEND_VULKAN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "gpu_ops.h"
#include "model.h"

struct engine;
struct vk_gemma4;

/* A layer's tensors in device memory (0: the layer has none). */
struct vk_layer {
    uint64_t attn_norm, wq, wk, wv, wo, q_norm, k_norm, bq, bk, bv, bo, sinks;
    uint64_t ffn_norm, router, router_b, gate_exps, up_exps, down_exps;
    uint64_t gate_exps_b, up_exps_b, down_exps_b;
    uint64_t shexp_inp, gate_shexp, up_shexp, down_shexp, gate, up, down;
};

/* One device buffer and its address, for the activations. */
struct vk_area {
    struct gpu_buf *buf;
    uint64_t addr;
};

/* A Gated DeltaNet layer's tensors in device memory. */
struct vk_dn_layer {
    uint64_t qkv, z, beta, alpha, out; /* the products' matrices */
    uint64_t conv1d, dt_bias, a, norm; /* floats */
};

/* The recurrent layers: their tensors, their scratch for n_batch tokens, and each sequence's
 * state and checkpoints in device memory, laid out as the host's (sequence.h: per recurrent
 * layer the conv state, then the SSM state). The host's sequences keep the bookkeeping (n_past,
 * which checkpoint holds which position); the rows follow it (engine_vk_rec_*). */
struct vk_rec {
    struct vk_dn_layer *layers;    /* [n_layer], zeros for the attention layers */
    struct vk_area qkv, conv, z, beta, gate; /* [B][conv_ch], [B][conv_ch], [B][Hv Dv], [B][Hv] */
    struct gpu_buf **state;        /* [n_seq] */
    struct gpu_buf **ckpt;         /* [n_seq][n_ckpt]: checkpoint slot i of the host's ckpt[i] */
    int32_t n_ckpt;
    size_t state_bytes;            /* rec_floats * 4 */
};

struct engine_vk {
    struct gpu *dev;               /* borrowed */
    struct gpu_ops ops;
    struct gpu_buf **bufs;         /* every buffer below, owned */
    int n_bufs, cap_bufs;
    struct vk_layer *layers;       /* [n_layer] */
    uint64_t output_norm, output;
    struct vk_area x, xn, y, q, k, v, heads, act_in, act_up, act_hid, g, u, d, router, shexp,
        shexp_gate, rope_cs, rope_cs_swa, logits, attn, pairs; /* rope_cs_swa: gemma4's window
                                    * layers' table (backend_vulkan_gemma4.c), else none */
    struct gpu_buf **kv;           /* [n_seq][n_kv_layer]: K rows, the V rows rows * row_bytes on
                                    * (a window layer's rows are its ring: sequence.h's rows[]) */
    struct gpu_buf **tails;        /* [n_seq][n_checkpoints]: checkpoint slot i's window rows, in
                                    * the layout of the host's ckpt[i].tail; NULL without windows */
    struct vk_rec *rec;            /* the recurrent layers' (owned), NULL for a model without */
    struct vk_gemma4 *g4;          /* gemma4's own (owned; backend_vulkan_gemma4.c), or NULL */
    uint64_t gelu_table;           /* GeGLU's table (ops_gelu_f16_table) for a GeGLU model, or 0 */
    /* host buffers (mapped): what a step sends (x and RoPE's table; the experts' pairs) and gets
     * back (router logits, logits), copied to and from device memory inside the submits */
    struct gpu_buf *h_in, *h_routes, *h_logits; /* h_routes: [n_layer][n_batch k] expert ids */
    int32_t logit_rows;            /* rows of logits one readback takes */
    size_t weight_bytes, kv_bytes, act_bytes;
    /* the experts on three levels (backend_vulkan_experts.h), NULL when every routed expert is in
     * VRAM: a MoE layer's gate_exps, up_exps, down_exps are then its n_slots slots, and per MoE
     * layer the step sends the FFN's input rows and the routes to the host, the GPU computes the
     * pairs whose expert has a slot while the CPU computes the others, and the CPU's expert rows
     * come back into d before the weighted sum */
    struct vk_tier *tier;
    struct gpu_buf **slot_bufs;    /* [n_layer][3] a MoE layer's gate, up and down slots */
    size_t slot_bytes;             /* device bytes of the slots, all layers */
    struct vk_area tier_pairs;     /* [3][B K] int32 the GPU's pairs (slot, act row, out row),
                                    * then their group table */
    struct gpu_buf *h_rows;        /* host: [2][B][n_embd] the FFN's x and xn rows */
    struct gpu_buf *h_tier_pairs;  /* host: [3][B K] int32, what tier_pairs gets */
    struct gpu_buf *h_exp;         /* host: [B K][n_embd] the CPU's pairs' expert outputs */
    bool cpu_failed;               /* the last step failed in the CPU's experts (a read), not on
                                    * the device */
    /* on unified memory with the experts streamed (vk_cache_place; tier is NULL): the expert
     * cache's slots live in arena, host-visible memory the kernels address, reads from the SSD
     * land there, and the GPU computes every routed expert in its slot, through tier_pairs
     * (expert, act row, out row) and a table of the matrices' addresses (h_mats) */
    struct expert_cache *cache;    /* e->experts while its slots are in the arena */
    uint8_t *arena_host;           /* the arena's host view, aligned for direct reads */
    uint64_t arena_dev;            /* its device address */
    size_t arena_bytes;
    struct gpu_buf *h_mats;        /* host: [3][n_expert] uint64 gate, up, down addresses */
    int32_t *cache_pos;            /* [n_expert] a layer's expert's place in cache_union, or -1 */
    int32_t *cache_union;          /* [n_expert] a layer's distinct experts, first use first */
    uint64_t cache_pairs;          /* pairs computed in the cache's slots so far */
    int32_t *cpu_sel;              /* [B K] the CPU's pairs' experts, -1 for the GPU's */
    /* a batch's transit (vk_transit): up to n_transit of a layer's missed experts uploaded for
     * the step and computed on the GPU, where its pairs make that faster than the CPU; 0: none
     * (engine_params.gpu_transit -1, steps of one token, too little room) */
    int32_t n_transit;
    struct gpu_buf *transit_bufs[6]; /* gate, up, down: n_transit matrices of the widest layer's;
                                    * then their bias rows (NULL where the experts have none) */
    struct gpu_buf *h_transit;     /* host: what they get, the [n_transit] runs at transit_off[k],
                                    * each matrix (bias row) its layer's size apart */
    size_t transit_off[6];
    struct vk_area transit_pairs;  /* as tier_pairs, for the transit's pairs */
    struct gpu_buf *h_transit_pairs; /* host: [3][B K] int32, what transit_pairs gets */
    int32_t *transit_x;            /* [n_transit] the experts a layer's transit holds */
    double stage_bps, upload_bps;  /* measured: bytes a second staged by memcpy, uploaded */
    double transit_pair_s;         /* measured: the CPU's seconds a pair in a batch's exchange
                                    * (0 until one ran) */
    /* profiling ($SNIPER_GPU_PROFILE=1): each barrier writes a timestamp, and the time since the
     * one before goes to the label of the last op recorded (vk_label); with 2 (stamp_steps) only
     * a step's start and end do, so its device time is measured without the ops' stamps */
    bool profile, stamp_steps;
    const char *label;
    const char *stamp_label[GPU_STAMPS];
    double stamp_ns[GPU_STAMPS];
    struct vk_prof { const char *label; double ns; uint64_t n; } prof[32];
    /* and the host's seconds per step: recording the layers, waiting for them after the last
     * part was sent, the logits' submit (recording, waiting, copying), and between the end of
     * one step and the start of the next (the engine's and its caller's work); on three levels,
     * within the recording, the exchanges' waits for the device and the CPU's experts */
    double host_record, host_wait, host_output, host_between, host_end;
    double host_xwait, host_xcpu;
    uint64_t host_steps;
    /* the device's dispatches and barriers of the steps since the last profile (gpu_counts), and
     * its counts at the step's start */
    uint64_t count_dispatches, count_barriers, count_steps, count_d0, count_b0;
    /* a MoE layer's weighted sum not recorded yet (k 0: none): the residual's norm after the
     * layer adds it (gpu_op_moe_add_rms_norm), the last layer's add records it first */
    struct gpu_moe_rows moe_sum;
    /* the activation rows quantized last, the newest first (src 0: none): what a product of the
     * same format may reuse. Two, so that the routed experts' hidden rows do not push out the
     * quantized xn that the shared expert's products read next. */
    struct vk_quant_rows {
        uint64_t src, dst;   /* the float rows and their quantized copy */
        enum qtype fmt;      /* the activation format (vec_dot_type) */
        int32_t rows;
        size_t stride;       /* bytes between the copy's rows */
    } quant[2];
    /* the per-op trace's rows read back (vk_trace), grown to the widest traced in a first step */
    float *trace_rows;
    size_t trace_cap;              /* bytes */
};

/* ---- backend_vulkan.c's helpers (contracts at their definitions) ---- */

/* Device memory, freed with v: an activation area, a mapped host buffer, a weight's or floats'
 * upload (*addr 0 for a tensor the model lacks). Each returns 0 (or the buffer) or -ENOMEM /
 * -ENOTSUP / an upload's error, with a message in err. */
int vk_area(struct engine_vk *v, struct vk_area *a, size_t bytes, char *err, size_t err_len);
struct gpu_buf *vk_host(struct engine_vk *v, size_t bytes, char *err, size_t err_len);
int vk_weight(struct engine_vk *v, const struct weight *w, uint64_t *addr, char *err,
              size_t err_len);
int vk_floats(struct engine_vk *v, const float *p, int64_t n, uint64_t *addr, char *err,
              size_t err_len);

/* Recording: its start and its submit (0 or -EIO; the profile's timestamps), the profile's label,
 * a barrier, forgetting the activation rows quantized last (call it after writing rows a product
 * may quantize again at the same address). */
int vk_begin(struct engine_vk *v);
int vk_submit(struct engine_vk *v);
void vk_label(struct engine_vk *v, const char *label);
void vk_sync(struct engine_vk *v);
void vk_quant_forget(struct engine_vk *v);

/* A trace point (engine_set_trace; 0 at once when none is set): ends the recording, waits, reads
 * n_rows rows of n floats, stride floats apart, from device address addr (inside one of v's
 * buffers) and tells the trace, as the CPU's blocks do at the same point, then records on. Returns
 * 0, -EINVAL (addr in no buffer), -ENOMEM or -EIO. */
int vk_trace(struct engine *e, const char *op, uint64_t addr, int32_t n_rows, int64_t n,
             size_t stride);

/* vk_trace of n_tok rows of n_embd floats at addr (x, xn, y: the residual stream's width). */
int vk_trace_d(struct engine *e, const char *op, uint64_t addr, int32_t n_tok);

/* The trace points of the routed experts' rows after vk_experts (pair t k + s: up, the
 * activation, and with `out` the output), as block_moe's experts_trace. */
int vk_experts_trace(struct engine *e, int32_t n_tok, bool out);

/* out rows = w (at dev) times n_tok rows of x (x_stride floats apart), plus the bias b (0: none). */
int vk_matmul(struct engine_vk *v, const char *what, const struct weight *w, uint64_t dev,
              uint64_t x, size_t x_stride, uint64_t out, size_t out_stride, uint64_t b,
              int32_t n_tok);

/* y = attention(xn) of layer il, in the layer's own head shape; block_attn's steps. */
int vk_attn(struct engine *e, int il, int32_t n_tok);

/* out = down(act(gate xn) * up xn), act the model's (SwiGLU, the clamped one, GeGLU). */
int vk_swiglu(struct engine *e, const struct weight *gate, uint64_t dg, const struct weight *up,
              uint64_t du, const struct weight *down, uint64_t dd, uint64_t out, int32_t n_tok);

/* Layer il's routing from router input rows in (D floats apart) into the pairs, then the routed
 * experts' products from the expert input rows xn: pair p's output in v->d's row p. */
int vk_route(struct engine *e, int il, uint64_t in, int32_t n_tok);
int vk_experts(struct engine *e, int il, uint64_t xn, int32_t n_tok);

/* Copies the step's x and RoPE table rows (e->x, e->rope_cs) to v->x and v->rope_cs. */
void vk_inputs(struct engine *e, int32_t n_tok);

/* x += y, then xn = rmsnorm(x) * w, and quantized for the product with `next` where its format
 * allows (NULL: none; vk_quantize then finds the rows). */
int vk_residual(struct engine *e, uint64_t w, const struct weight *next, int32_t n_tok);

/* The profile's clock (0 without it), and a step's start (the clock, the device's counts) and
 * end: the last part sent and waited for, the experts' statistics and the logits (vk_step_end
 * returns rc's error, -EIO, or vk_output's). */
double vk_profile_clock(const struct engine_vk *v);
double vk_step_start(struct engine_vk *v);
int vk_step_end(struct engine *e, int rc, int32_t n_tok, double t0);

/* The step's logits rows (its own submits), and the experts' statistics after a step. */
int vk_output(struct engine *e);
void vk_route_stats(struct engine *e, int32_t n_tok);

/* ---- backend_vulkan_gemma4.c ---- */

/* gemma4's tensors and scratch beyond the common ones (engine_use_gpu calls it for a gemma4
 * model): 0, or an error with a message (what was made is freed with v). */
int vk_gemma4_new(struct engine *e, struct engine_vk *v, char *err, size_t err_len);
void vk_gemma4_free(struct vk_gemma4 *g);

/* engine_vk_step for gemma4: 0, -EIO for a lost device, or an op's error. */
int vk_gemma4_step(struct engine *e, int32_t n_tok);

#endif
