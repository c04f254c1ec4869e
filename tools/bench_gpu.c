/* bench_gpu.c - what the Vulkan backend's kernels reach on a device, against its memory bandwidth:
 * a device-to-device copy (the bound), and each weight type's product for a decode step (1 token)
 * and a prefill batch, as GB/s of weights read and tokens/s of that one matrix; for a type with
 * a tiled kernel the prefill twice, tiled and on the per-token drivers (--sweep: also at 4 .. 64
 * tokens, where gpu_ops.c's threshold between them is chosen). --cold 1 reads the weights from
 * memory, not the cache: the products take their matrix in turn from copies spanning 512 MiB (a
 * decode step's products never find theirs in the L2); --barrier 1 puts a barrier after each
 * product, as a step's next op waits for it. --ops 1 times instead a decode
 * step's small ops alone at qwen3-30b-a3b's shapes (ops_bench: what each costs in launch, barrier
 * and memory latency, against an empty dispatch).
 *
 *     bench-gpu [--gpu N] [--rows R] [--cols C] [--tokens T] [--reps K] [--types q4_K,q6_K,...]
 *               [--sweep 1] [--cold 1] [--barrier 1] [--ops 1]
 *
 * Each figure is the best of three submits of K back-to-back dispatches (one command buffer). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gpu.h"
#include "gpu_ops.h"
#include "quant.h"
#include "rng.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct bench_opts {
    const char *gpu;
    const char *types; /* comma-separated type names (qtype_name, any case), NULL: all */
    int64_t rows, cols;
    int32_t tokens, reps;
    bool sweep;
    bool cold;    /* the weights in copies spanning COLD_BYTES, taken in turn */
    bool barrier; /* a barrier after each product */
    bool ops; /* the small ops' table (ops_bench) instead of the products */
    bool apart; /* --ops: each tensor but the weights in a buffer of its own */
};

/* What a timed submit records: reps calls of record(ctx), each followed by a barrier where
 * barrier is set; rc is set to the first negative result of record, if any. */
struct timed {
    int (*record)(const void *ctx);
    const void *ctx;
    int reps;
    bool barrier;
    int rc;
};

/* Seconds of the best of three submits of t's records; -1 when a begin, a record (t->rc) or a
 * submit failed. */
static double best_of_three(struct gpu *g, struct timed *t) {
    double best = 1e30;
    t->rc = 0;
    for (int k = 0; k < 3; k++) {
        if (gpu_begin(g) < 0)
            return -1;
        for (int r = 0; t->rc == 0 && r < t->reps; r++) {
            t->rc = t->record(t->ctx);
            if (t->barrier)
                gpu_barrier(g);
        }
        double t0 = now_s();
        if (gpu_submit(g) < 0 || t->rc < 0)
            return -1;
        double s = now_s() - t0;
        best = s < best ? s : best;
    }
    return best;
}

/* A copy of src into dst: by the copy engine (vkCmdCopyBuffer), or by copy_words (kernel >= 0,
 * one workgroup per 16 KiB up to 65535). */
struct copy_rec {
    struct gpu *g;
    struct gpu_buf *dst, *src;
    int kernel;
};

static int record_copy(const void *ctx) {
    const struct copy_rec *c = ctx;
    struct { uint64_t src, dst; uint32_t n; } push = {gpu_buf_addr(c->src), gpu_buf_addr(c->dst),
                                                      (uint32_t)(gpu_buf_bytes(c->src) / 16)};
    const uint32_t n_groups = push.n / 1024 < 65535 ? push.n / 1024 + 1 : 65535;
    if (c->kernel < 0)
        gpu_copy(c->g, c->dst, 0, c->src, 0, gpu_buf_bytes(c->src));
    else
        gpu_dispatch(c->g, c->kernel, &push, sizeof(push), n_groups, 1, 1);
    return 0;
}

/* What --cold's copies of a matrix span: many times any device's last-level cache. */
#define COLD_BYTES ((size_t)512 << 20)

/* A product of weights w (type t) with n_tok activation rows; with copies > 1 the k-th product
 * recorded takes copy k % copies, w_bytes apart (*next counts them). */
struct product_rec {
    struct gpu_ops *o;
    enum qtype t;
    uint64_t w, act, out;
    size_t row_bytes, act_stride, w_bytes;
    int64_t cols, rows;
    int32_t n_tok;
    size_t copies, *next;
};

static int record_product(const void *ctx) {
    const struct product_rec *m = ctx;
    const uint64_t w = m->w + (uint64_t)(*m->next % m->copies) * m->w_bytes;
    ++*m->next;
    return gpu_op_matmul(m->o, m->t, w, m->row_bytes, m->cols, m->rows, m->act, m->act_stride,
                         m->out, (size_t)m->rows, m->n_tok);
}

/* Seconds of the best of three submits of reps products (record_product) of w's copies of a
 * matrix of w_bytes. */
static double time_products(struct gpu *g, struct gpu_ops *o, enum qtype t, struct gpu_buf *w,
                            size_t copies, size_t row_bytes, const struct bench_opts *b,
                            struct gpu_buf *act, size_t act_stride, struct gpu_buf *out,
                            int32_t n_tok) {
    size_t next = 0;
    const struct product_rec m = {o, t, gpu_buf_addr(w), gpu_buf_addr(act), gpu_buf_addr(out),
                                  row_bytes, act_stride, row_bytes * (size_t)b->rows, b->cols,
                                  b->rows, n_tok, copies, &next};
    struct timed tm = {record_product, &m, b->reps, b->barrier, 0};
    return best_of_three(g, &tm);
}

/* True when list (comma-separated names, any case; NULL: every type) names t. */
static bool type_listed(const char *list, enum qtype t) {
    const char *name = qtype_name(t);
    const size_t n = strlen(name);
    for (const char *s = list; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        if (strncasecmp(s, name, n) == 0 && (s[n] == ',' || s[n] == '\0'))
            return true;
    return list == NULL;
}

/* True when every name of list is a type's. */
static bool types_known(const char *list) {
    for (const char *s = list; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
        const size_t n = strcspn(s, ",");
        bool found = false;
        for (int t = 0; t < QTYPE_COUNT && !found; t++)
            found = strlen(qtype_name((enum qtype)t)) == n &&
                    strncasecmp(s, qtype_name((enum qtype)t), n) == 0;
        if (!found)
            return false;
    }
    return true;
}

static int bench_type(struct gpu *g, struct gpu_ops *o, enum qtype t, const struct bench_opts *b,
                      struct gpu_buf *act, struct gpu_buf *out) {
    uint64_t rb = 0;
    if (!gpu_ops_has_type(o, t) || !type_listed(b->types, t) ||
        qtype_row_bytes(t, (uint64_t)b->cols, &rb) < 0)
        return 0;
    char err[256] = "";
    const size_t w_bytes = (size_t)rb * (size_t)b->rows;
    const size_t copies = b->cold ? (COLD_BYTES + w_bytes - 1) / w_bytes : 1;
    struct gpu_buf *w = gpu_buf_new(g, w_bytes * copies, err, sizeof(err));
    if (!w) {
        fprintf(stderr, "bench-gpu: %s\n", err);
        return -ENOMEM;
    }
    /* weights: zero bytes are valid blocks of every type; speed does not depend on the values */
    const size_t act_stride = quant_act_row_stride(t, b->cols);
    const int32_t sweep[] = {4, 8, 16, 32, 64}, n_sweep = b->sweep ? 5 : 0;
    const int32_t tile_min = o->tile_min_tok;
    int rc = 0;
    for (int i = -1; rc == 0 && i <= n_sweep; i++) {
        const int32_t n_tok = i < 0 ? 1 : i < n_sweep ? sweep[i] : b->tokens;
        if (i >= 0 && i < n_sweep && n_tok >= b->tokens) /* the sweep stops below --tokens */
            continue;
        /* pass 0: the tiled kernel (where the type has one), pass 1: the per-token drivers */
        const bool both = o->matmul_tile[t] >= 0 && n_tok > 1;
        for (int pass = both ? 0 : 1; rc == 0 && pass < 2; pass++) {
            const bool tiled = pass == 0;
            const bool taken = o->tile_taken[t];
            o->tile_min_tok = tiled ? 1 : INT32_MAX;
            o->tile_taken[t] = true;
            double s = time_products(g, o, t, w, copies, (size_t)rb, b, act, act_stride, out,
                                     n_tok);
            o->tile_min_tok = tile_min;
            o->tile_taken[t] = taken;
            if (s < 0) {
                fprintf(stderr, "bench-gpu: %s\n", gpu_error(g));
                rc = -EIO;
                break;
            }
            double per = s / b->reps;
            printf("%-7s %5lld x %5lld, %3d token%s: %8.1f us  %7.1f GB/s of weights  %9.0f tok/s"
                   "%s%s\n", qtype_name(t), (long long)b->rows, (long long)b->cols, n_tok,
                   n_tok == 1 ? " " : "s", per * 1e6, (double)w_bytes / per * 1e-9,
                   (double)n_tok / per, !both ? "" : tiled ? "  tiled" : "  per-token",
                   both && tiled == (n_tok >= tile_min && o->tile_taken[t]) ? " (taken)" : "");
        }
    }
    gpu_buf_free(g, w);
    return rc;
}

/* ---- --ops: a decode step's small ops alone, at qwen3-30b-a3b's shapes ---- */

/* The decode shapes of qwen3-30b-a3b (1 token). */
enum {
    OPS_EMBD = 2048, OPS_EXPERTS = 128, OPS_K = 8, OPS_FF = 768, OPS_HEADS = 32, OPS_HEADS_KV = 4,
    OPS_HEAD_DIM = 128, OPS_POS = 511, OPS_KV_ROWS = 4096,
    OPS_QKV_ROWS = (OPS_HEADS + 2 * OPS_HEADS_KV) * OPS_HEAD_DIM,
};

/* The ops' tensors, carved out of one buffer (addresses 256-byte aligned). */
struct ops_bufs {
    uint64_t x, r, y, w, q8, moe_d, moe_w, logits, pairs, log, q, k, v, q_norm, k_norm, cs,
        k_rows, v_rows, gate, up, router_w, qkv_w, out, heads, scratch;
};

enum ops_op {
    OPS_EMPTY, OPS_NORM, OPS_ADD_NORM_Q, OPS_MOE_NORM_Q, OPS_ROUTE, OPS_ATTN_PREP, OPS_QUANTIZE,
    OPS_SWIGLU_Q, OPS_ROUTER, OPS_QKV, OPS_QKV3, OPS_ATTN_SHORT, OPS_ATTN, OPS_ATTN_LONG, OPS_COUNT
};

static const char *const ops_names[OPS_COUNT] = {
    "empty dispatch (launch + barrier)", "rms_norm 2048 (layer 0's: no residual)",
    "residual + rms_norm + Q8_K quantize", "moe sum (k 8) + residual + rms_norm + Q8_K",
    "route (softmax gating, 128 experts, k 8)", "attn_prep (32 q / 4 kv heads of 128, f16 KV)",
    "quantize Q8_K 4096 (attention's output)", "swiglu + Q8_K (8 rows of 768)",
    "router product 2048 -> 128 F32", "qkv product 2048 -> 5120 Q4_K",
    "q, k, v: 4096 Q4_K, 512 Q4_K, 512 Q6_K, no barrier", "attention, f16 KV, 32 positions",
    "attention, f16 KV, 512 positions", "attention, f16 KV, 4096 positions",
};

/* The attention of the step at position pos (gpu_op_attn: 32 q heads over 4 KV heads of 128). */
static int ops_attention(struct gpu_ops *o, const struct ops_bufs *a, int32_t pos) {
    const struct gpu_attn at = {
        .kv_type = QTYPE_F16, .q = a->q, .q_tok_stride = OPS_QKV_ROWS,
        .q_head_stride = OPS_HEAD_DIM, .k = a->k_rows, .v = a->v_rows,
        .row_bytes = OPS_HEADS_KV * OPS_HEAD_DIM * 2, .ring_rows = OPS_KV_ROWS,
        .out = a->heads, .out_stride = OPS_HEADS * OPS_HEAD_DIM, .scratch = a->scratch,
        .n_head = OPS_HEADS, .n_head_kv = OPS_HEADS_KV, .head_dim = OPS_HEAD_DIM, .pos0 = pos,
        .n_tok = 1, .scale = 0.08838835f};
    return gpu_op_attn(o, &at);
}

/* The step's q, k and v products, one after another with no barrier between (as vk_attn). */
static int ops_qkv3(struct gpu_ops *o, const struct ops_bufs *a) {
    const int64_t E = OPS_EMBD, Q = OPS_HEADS * OPS_HEAD_DIM, KV = OPS_HEADS_KV * OPS_HEAD_DIM;
    const size_t as = quant_act_row_stride(QTYPE_Q4_K, OPS_EMBD);
    uint64_t r4 = 0, r6 = 0;
    int rc = qtype_row_bytes(QTYPE_Q4_K, E, &r4) < 0 || qtype_row_bytes(QTYPE_Q6_K, E, &r6) < 0
                 ? -EINVAL : 0;
    if (rc == 0)
        rc = gpu_op_matmul(o, QTYPE_Q4_K, a->qkv_w, (size_t)r4, E, Q, a->q8, as, a->out, Q, 1);
    if (rc == 0)
        rc = gpu_op_matmul(o, QTYPE_Q4_K, a->qkv_w + (uint64_t)r4 * Q, (size_t)r4, E, KV, a->q8,
                           as, a->out + (uint64_t)Q * 4, KV, 1);
    if (rc == 0)
        rc = gpu_op_matmul(o, QTYPE_Q6_K, a->qkv_w, (size_t)r6, E, KV, a->q8, as,
                           a->out + (uint64_t)(Q + KV) * 4, KV, 1);
    return rc;
}

/* Records op once, as the step records it (its gpu_op_* call); returns that call's result. */
static int ops_record(struct gpu_ops *o, int empty, const struct ops_bufs *a, enum ops_op op) {
    size_t stride = 0;
    const struct gpu_quant_out q = {.wtype = QTYPE_Q4_K, .dst = a->q8, .stride = &stride};
    const struct gpu_moe_rows m = {.d = a->moe_d, .w = a->moe_w, .k = OPS_K};
    const struct gpu_attn_prep ap = {
        .kv_type = QTYPE_F16, .neox = true, .q = a->q, .q_tok_stride = OPS_QKV_ROWS,
        .q_head_stride = OPS_HEAD_DIM, .k = a->k, .v = a->v,
        .kv_stride = OPS_HEADS_KV * OPS_HEAD_DIM,
        .q_norm = a->q_norm, .k_norm = a->k_norm, .v_norm = GPU_V_AS_IS, .cs = a->cs,
        .n_rot = OPS_HEAD_DIM, .k_rows = a->k_rows, .v_rows = a->v_rows,
        .row_bytes = OPS_HEADS_KV * OPS_HEAD_DIM * 2, .ring_rows = OPS_POS + 1, .pos0 = OPS_POS,
        .n_head = OPS_HEADS, .n_head_kv = OPS_HEADS_KV, .head_dim = OPS_HEAD_DIM, .n_tok = 1,
        .eps = 1e-6f};
    const struct { uint64_t src, dst; uint32_t n; } none = {a->x, a->y, 0};
    uint64_t rb = 0;
    switch (op) {
    case OPS_EMPTY:
        gpu_dispatch(o->g, empty, &none, sizeof(none), 1, 1, 1);
        return 0;
    case OPS_NORM:
        return gpu_op_rms_norm(o, a->x, OPS_EMBD, a->w, a->y, OPS_EMBD, OPS_EMBD, 1e-6f, 1);
    case OPS_ADD_NORM_Q:
        return gpu_op_rms_norm_quantize(o, a->x, OPS_EMBD, a->r, a->w, a->y, OPS_EMBD, OPS_EMBD,
                                        1e-6f, 1, &q);
    case OPS_MOE_NORM_Q:
        return gpu_op_moe_add_rms_norm(o, a->x, OPS_EMBD, &m, a->w, a->y, OPS_EMBD, OPS_EMBD,
                                       1e-6f, 1, &q);
    case OPS_ROUTE:
        return gpu_op_route(o, a->logits, 0, true, OPS_EXPERTS, OPS_K, a->pairs, a->log, 1);
    case OPS_ATTN_PREP:
        return gpu_op_attn_prep(o, &ap);
    case OPS_QUANTIZE:
        return gpu_op_quantize(o, QTYPE_Q4_K, a->x, OPS_HEADS * OPS_HEAD_DIM, a->q8, &stride,
                               OPS_HEADS * OPS_HEAD_DIM, 1);
    case OPS_SWIGLU_Q:
        return gpu_op_swiglu_quantize(o, false, a->gate, a->gate, a->up, OPS_FF, OPS_FF, OPS_K,
                                      &q);
    case OPS_ROUTER:
        return gpu_op_matmul(o, QTYPE_F32, a->router_w, OPS_EMBD * 4, OPS_EMBD, OPS_EXPERTS,
                             a->x, quant_act_row_stride(QTYPE_F32, OPS_EMBD), a->out,
                             OPS_EXPERTS, 1);
    case OPS_QKV:
        if (qtype_row_bytes(QTYPE_Q4_K, OPS_EMBD, &rb) < 0)
            return -EINVAL;
        return gpu_op_matmul(o, QTYPE_Q4_K, a->qkv_w, (size_t)rb, OPS_EMBD, OPS_QKV_ROWS, a->q8,
                             quant_act_row_stride(QTYPE_Q4_K, OPS_EMBD), a->out, OPS_QKV_ROWS, 1);
    case OPS_QKV3:
        return ops_qkv3(o, a);
    case OPS_ATTN_SHORT:
        return ops_attention(o, a, 31);
    case OPS_ATTN:
        return ops_attention(o, a, OPS_POS);
    case OPS_ATTN_LONG:
        return ops_attention(o, a, OPS_KV_ROWS - 1);
    default:
        return -EINVAL;
    }
}

/* One of the ops' tensors: where its address goes, its bytes. */
struct ops_part {
    uint64_t *at;
    size_t bytes;
};
#define OPS_PARTS 24
#define OPS_WEIGHTS 6 /* the first parts: ops_take's */

/* The ops' tensors, the weights first; returns their count. */
static int ops_parts(struct ops_bufs *a, struct ops_part *parts) {
    const size_t f = sizeof(float), kv = (size_t)OPS_HEADS_KV * OPS_HEAD_DIM;
    uint64_t rb = 0;
    qtype_row_bytes(QTYPE_Q4_K, OPS_EMBD, &rb);
    const struct ops_part p[] = {
        {&a->w, OPS_EMBD * f}, {&a->q_norm, OPS_HEAD_DIM * f}, {&a->k_norm, OPS_HEAD_DIM * f},
        {&a->cs, OPS_HEAD_DIM * f}, {&a->router_w, (size_t)OPS_EXPERTS * OPS_EMBD * f},
        {&a->qkv_w, (size_t)rb * OPS_QKV_ROWS},
        {&a->x, (size_t)OPS_HEADS * OPS_HEAD_DIM * f}, {&a->r, OPS_EMBD * f},
        {&a->y, OPS_EMBD * f}, {&a->q8, 64 * 1024},
        {&a->moe_d, (size_t)OPS_K * OPS_EMBD * f}, {&a->moe_w, OPS_K * f},
        {&a->logits, OPS_EXPERTS * f}, {&a->pairs, 4 * OPS_K * 4}, {&a->q, OPS_QKV_ROWS * f},
        {&a->k_rows, OPS_KV_ROWS * kv * 2}, {&a->v_rows, OPS_KV_ROWS * kv * 2},
        {&a->gate, (size_t)OPS_K * OPS_FF * f}, {&a->up, (size_t)OPS_K * OPS_FF * f},
        {&a->out, OPS_QKV_ROWS * f}, {&a->heads, (size_t)OPS_HEADS * OPS_HEAD_DIM * f},
        {&a->scratch, gpu_attn_scratch_bytes(1, OPS_HEADS, OPS_KV_ROWS)},
    };
    _Static_assert(sizeof(p) / sizeof(p[0]) <= OPS_PARTS, "OPS_PARTS");
    memcpy(parts, p, sizeof(p));
    return (int)(sizeof(p) / sizeof(p[0]));
}

/* q's views: k and v packed after the query heads. */
static void ops_views(struct ops_bufs *a) {
    a->k = a->q + (uint64_t)OPS_HEADS * OPS_HEAD_DIM * sizeof(float);
    a->v = a->k + (uint64_t)OPS_HEADS_KV * OPS_HEAD_DIM * sizeof(float);
}

/* Lays out the ops' tensors from base: each a multiple of 256 bytes, the weights first (*span
 * bytes: ops_take's); returns the bytes used. */
static size_t ops_layout(struct ops_bufs *a, uint64_t base, size_t *span) {
    struct ops_part parts[OPS_PARTS];
    const int n = ops_parts(a, parts);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        *parts[i].at = base + off;
        off += (parts[i].bytes + 255) / 256 * 256;
        *span = i == OPS_WEIGHTS - 1 ? off : *span;
    }
    ops_views(a);
    return off;
}

/* --apart: each tensor but the weights in a buffer of its own (bufs[i], filled), as the engine
 * allocates its activations. Returns 0 or a negative error. */
static int ops_apart(struct gpu *g, struct ops_bufs *a, struct gpu_buf **bufs, char *err,
                     size_t err_len) {
    struct ops_part parts[OPS_PARTS];
    const int n = ops_parts(a, parts);
    for (int i = OPS_WEIGHTS; i < n; i++) {
        if (!(bufs[i] = gpu_buf_new(g, parts[i].bytes, err, err_len)))
            return -ENOMEM;
        *parts[i].at = gpu_buf_addr(bufs[i]);
    }
    ops_views(a);
    return 0;
}

/* One small op (ops_record's arguments); with copies > 1 (--cold) the k-th record takes the
 * weights' copy k % copies: the weights (ops_layout's first span bytes, from base) moved to
 * cold + (k % copies) span (*next counts the records). */
struct op_rec {
    struct gpu_ops *o;
    int empty;
    const struct ops_bufs *a;
    enum ops_op op;
    uint64_t base, cold, span;
    size_t copies, *next;
};

/* r's tensors for its next record: the weights' next copy where there are copies. */
static struct ops_bufs ops_take(const struct op_rec *r) {
    struct ops_bufs b = *r->a;
    if (r->copies < 2)
        return b;
    const uint64_t to = r->cold + (uint64_t)(*r->next % r->copies) * r->span;
    ++*r->next;
    struct ops_part parts[OPS_PARTS];
    ops_parts(&b, parts);
    for (int i = 0; i < OPS_WEIGHTS; i++)
        *parts[i].at = *parts[i].at - r->base + to;
    return b;
}

static int record_op(const void *ctx) {
    const struct op_rec *r = ctx;
    const struct ops_bufs b = ops_take(r);
    return ops_record(r->o, r->empty, &b, r->op);
}

/* Microseconds a record of op costs: the best of three submits of reps records, each followed by
 * the barrier the step puts after it; -1 on an error (printed). */
static double ops_time(struct op_rec r, enum ops_op op, int reps) {
    struct gpu *g = r.o->g;
    r.op = op;
    struct timed tm = {record_op, &r, reps, true, 0};
    const double s = best_of_three(g, &tm);
    if (s < 0) {
        fprintf(stderr, "bench-gpu: %s: %s\n", ops_names[op],
                tm.rc < 0 ? strerror(-tm.rc) : gpu_error(g));
        return -1;
    }
    return s / reps * 1e6;
}

/* The ops but the empty dispatch once each, in the table's order, each followed by the barrier the
 * step puts after it: one op switching to the next as in a step (ctx: an op_rec, op unused). */
static int record_sequence(const void *ctx) {
    const struct op_rec *r = ctx;
    const struct ops_bufs b = ops_take(r);
    for (int op = OPS_NORM; op < OPS_COUNT; op++) {
        int rc = ops_record(r->o, r->empty, &b, (enum ops_op)op);
        if (rc < 0)
            return rc;
        if (op + 1 < OPS_COUNT)
            gpu_barrier(r->o->g);
    }
    return 0;
}

/* Microseconds a sequence of the ops (record_sequence) costs, the best of three submits of reps
 * sequences; -1 on an error (printed). */
static double ops_sequence_time(const struct op_rec *r, int reps) {
    struct gpu *g = r->o->g;
    struct timed tm = {record_sequence, r, reps, true, 0};
    const double s = best_of_three(g, &tm);
    if (s < 0) {
        fprintf(stderr, "bench-gpu: the sequence: %s\n",
                tm.rc < 0 ? strerror(-tm.rc) : gpu_error(g));
        return -1;
    }
    return s / reps * 1e6;
}

/* Fills n bytes of b with floats in [-1, 1) from a fixed seed (rng.h): the values decide no
 * timing, but zeros would take the quantizers' all-zero shortcut (the f16 and Q4_K rows get these
 * bits as they are: finite or not, the kernels' work is the same). */
static int ops_fill(struct gpu *g, struct gpu_buf *b, size_t n) {
    float *v = malloc(n);
    if (!v)
        return -ENOMEM;
    struct rng r;
    rng_seed(&r, 12345);
    for (size_t i = 0; i < n / sizeof(float); i++)
        v[i] = (float)(rng_next(&r) >> 40) / (float)(1u << 23) - 1.0f;
    int rc = gpu_buf_write(g, b, 0, v, n);
    free(v);
    return rc;
}

/* Prints the table of --ops: each op's microseconds, reps of it in one command buffer; with cold
 * the weights in copies spanning COLD_BYTES, taken in turn (from memory, as in a step, instead of
 * the cache). Returns 0, or a negative error (printed). */
static int ops_bench(struct gpu *g, struct gpu_ops *o, int reps, bool cold, bool apart) {
    char err[256] = "";
    struct ops_bufs a;
    size_t span = 0, next = 0;
    const size_t bytes = ops_layout(&a, 0, &span);
    const size_t copies = cold ? COLD_BYTES / span : 1;
    struct gpu_buf *b = gpu_buf_new(g, bytes, err, sizeof(err));
    struct gpu_buf *c = b && cold ? gpu_buf_new(g, copies * span, err, sizeof(err)) : NULL;
    struct gpu_buf *log = b && (c || !cold) ? gpu_buf_new_host(g, OPS_K * 4, err, sizeof(err))
                                            : NULL;
    const int empty = gpu_kernel(g, "copy_words");
    int rc = !log ? -ENOMEM : empty < 0 ? -ENOTSUP : ops_fill(g, b, bytes);
    if (rc == 0 && c)
        rc = ops_fill(g, c, copies * span);
    if (rc < 0) {
        fprintf(stderr, "bench-gpu: %s\n", err[0] ? err : "no copy_words kernel, or no memory");
        goto out;
    }
    ops_layout(&a, gpu_buf_addr(b), &span);
    struct gpu_buf *own[OPS_PARTS] = {0};
    if (apart && (rc = ops_apart(g, &a, own, err, sizeof(err))) < 0) {
        fprintf(stderr, "bench-gpu: %s\n", err);
        goto out;
    }
    for (int i = 0; apart && i < OPS_PARTS && rc == 0; i++)
        rc = own[i] ? ops_fill(g, own[i], gpu_buf_bytes(own[i])) : 0;
    a.log = gpu_buf_addr(log);
    const struct op_rec r = {o, empty, &a, OPS_EMPTY, gpu_buf_addr(b), c ? gpu_buf_addr(c) : 0,
                             span, copies, &next};
    printf("decode ops of qwen3-30b-a3b, each alone with its barrier, %d reps a submit, the "
           "weights %s, %s:\n", reps, cold ? "from memory (copies over 512 MiB)" : "cached",
           apart ? "each other tensor in a buffer of its own" : "the tensors in one buffer");
    double sum = 0.0;
    for (int op = 0; rc == 0 && op < OPS_COUNT; op++) {
        double us = ops_time(r, (enum ops_op)op, reps);
        rc = us < 0 ? -EIO : 0;
        if (rc == 0)
            printf("  %-52s %8.2f us\n", ops_names[op], us);
        sum += op > OPS_EMPTY ? us : 0.0;
    }
    const double seq = rc == 0 ? ops_sequence_time(&r, reps) : -1.0;
    if (seq >= 0.0)
        printf("  %-52s %8.2f us (the ops alone: %.2f)\n", "all but the empty, one after another",
               seq, sum);
    rc = rc == 0 && seq < 0.0 ? -EIO : rc;
    for (int i = 0; i < OPS_PARTS; i++)
        gpu_buf_free(g, own[i]);
out:
    gpu_buf_free(g, log);
    gpu_buf_free(g, c);
    gpu_buf_free(g, b);
    return rc;
}

static int parse(int argc, char **argv, struct bench_opts *b) {
    *b = (struct bench_opts){.gpu = "auto", .rows = 4096, .cols = 4096, .tokens = 512, .reps = 50};
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -EINVAL;
        if (strcmp(argv[i], "--gpu") == 0)
            b->gpu = v;
        else if (strcmp(argv[i], "--rows") == 0)
            b->rows = atoll(v);
        else if (strcmp(argv[i], "--cols") == 0)
            b->cols = atoll(v);
        else if (strcmp(argv[i], "--tokens") == 0)
            b->tokens = atoi(v);
        else if (strcmp(argv[i], "--reps") == 0)
            b->reps = atoi(v);
        else if (strcmp(argv[i], "--types") == 0)
            b->types = v;
        else if (strcmp(argv[i], "--sweep") == 0)
            b->sweep = atoi(v) != 0;
        else if (strcmp(argv[i], "--cold") == 0)
            b->cold = atoi(v) != 0;
        else if (strcmp(argv[i], "--barrier") == 0)
            b->barrier = atoi(v) != 0;
        else if (strcmp(argv[i], "--ops") == 0)
            b->ops = atoi(v) != 0;
        else if (strcmp(argv[i], "--apart") == 0)
            b->apart = atoi(v) != 0;
        else
            return -EINVAL;
    }
    return b->rows > 0 && b->cols > 0 && b->cols % 256 == 0 && b->tokens > 0 && b->reps > 0 &&
                   (!b->types || types_known(b->types))
               ? 0 : -EINVAL;
}

int main(int argc, char **argv) {
    struct bench_opts b;
    char err[256] = "", desc[512];
    if (parse(argc, argv, &b) < 0) {
        fprintf(stderr, "usage: bench-gpu [--gpu N] [--rows R] [--cols C (a multiple of 256)] "
                        "[--tokens T] [--reps K] [--types q4_K,q6_K,...] [--sweep 1] "
                        "[--cold 1] [--barrier 1] [--ops 1]\n");
        return 2;
    }
    int idx = gpu_choose(b.gpu, err, sizeof(err));
    struct gpu *g = idx >= 0 ? gpu_open(idx, 0, err, sizeof(err)) : NULL;
    struct gpu_ops o;
    if (!g || gpu_ops_init(&o, g, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench-gpu: %s\n", err[0] ? err : "no device");
        gpu_close(g);
        return 1;
    }
    const struct gpu_info *in = gpu_get_info(g);
    printf("device: %s (%s)\n%s\n", in->name, in->driver, gpu_describe(g, desc, sizeof(desc)));
    if (b.ops) {
        int orc = ops_bench(g, &o, b.reps, b.cold, b.apart);
        gpu_ops_release(&o);
        gpu_close(g);
        return orc < 0 ? 1 : 0;
    }
    const size_t copy_bytes = (size_t)256 << 20;
    struct gpu_buf *c0 = gpu_buf_new(g, copy_bytes, err, sizeof(err));
    struct gpu_buf *c1 = c0 ? gpu_buf_new(g, copy_bytes, err, sizeof(err)) : NULL;
    for (int by_kernel = 0; c1 && by_kernel < 2; by_kernel++) {
        const struct copy_rec c = {g, c1, c0, by_kernel ? gpu_kernel(g, "copy_words") : -1};
        struct timed tm = {record_copy, &c, 10, false, 0};
        double s = best_of_three(g, &tm);
        if (s > 0)
            printf("copy    %zu MiB device to device by %s: %.0f GB/s (read + write)\n",
                   copy_bytes >> 20, by_kernel ? "a kernel" : "the copy engine",
                   2.0 * (double)copy_bytes * 10 / s * 1e-9);
    }
    gpu_buf_free(g, c0);
    gpu_buf_free(g, c1);
    const size_t act_bytes = (size_t)b.tokens * quant_act_row_stride(QTYPE_F32, b.cols);
    struct gpu_buf *act = gpu_buf_new(g, act_bytes, err, sizeof(err));
    struct gpu_buf *out = act ? gpu_buf_new(g, sizeof(float) * (size_t)b.rows * b.tokens, err,
                                            sizeof(err)) : NULL;
    int rc = out ? 0 : -ENOMEM;
    for (int t = 0; rc == 0 && t < QTYPE_COUNT; t++)
        rc = bench_type(g, &o, (enum qtype)t, &b, act, out);
    if (!out)
        fprintf(stderr, "bench-gpu: %s\n", err);
    gpu_buf_free(g, act);
    gpu_buf_free(g, out);
    gpu_ops_release(&o);
    gpu_close(g);
    return rc < 0 ? 1 : 0;
}
