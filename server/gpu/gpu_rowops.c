/* gpu_rowops.c - gpu_ops.h's row ops (RMSNorm, RoPE, adds, SwiGLU and GeGLU, the sigmoid gate,
 * the scales, the experts' weighted sum, the KV store, the attention's prologue): their launch
 * shapes and push constants. Each push struct mirrors its kernel's `Push` block
 * (server/gpu/shaders/NAME.comp, std430: 8-byte fields first); the kernels keep the row ops'
 * contract (contract.glsl), so each gives server/engine/ops.c's bits. */
#include <errno.h>
#include <stdint.h>

#include "gpu_ops.h"
#include "qtype.h"
#include "quant.h"

#define ROW_GROUP 64           /* invocations per workgroup of the elementwise kernels */
#define ROW_GROUPS_MAX 65535u  /* workgroups a dispatch may have per dimension: Vulkan's minimum */

void gpu_rowops_find(struct gpu_ops *o) {
    o->row = (struct gpu_rowops){
        .rms_norm = gpu_kernel(o->g, "rms_norm"),
        .rope = gpu_kernel(o->g, "rope"),
        .add_rows = gpu_kernel(o->g, "add_rows"),
        .swiglu = gpu_kernel(o->g, "swiglu"),
        .swiglu_quant = gpu_kernel(o->g, "swiglu_quant"),
        .sigmoid_mul = gpu_kernel(o->g, "sigmoid_mul"),
        .moe_sum = gpu_kernel(o->g, "moe_sum"),
        .kv_store = gpu_kernel(o->g, "kv_store"),
        .geglu = gpu_kernel(o->g, "geglu"),
        .scale_rows = gpu_kernel(o->g, "scale_rows"),
        .attn_prep = gpu_kernel(o->g, "attn_prep"),
    };
}

/* ---- launch shapes (rowops.glsl) -------------------------------------------------------------- */

/* True when every v[0 .. n) fits the kernels' 32-bit fields. */
static bool fits_u32(const uint64_t *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] > UINT32_MAX)
            return false;
    return true;
}

/* Splits n workgroups (> 0) over two dimensions: *a of at most 65535, *b of them. False where
 * even 65535 x 65535 are too few. */
static bool split_groups(uint64_t n, uint32_t *a, uint32_t *b) {
    *a = n < ROW_GROUPS_MAX ? (uint32_t)n : ROW_GROUPS_MAX;
    const uint64_t rest = (n + *a - 1) / *a;
    *b = (uint32_t)rest;
    return rest <= ROW_GROUPS_MAX;
}

/* Records kernel k over n_rows rows of n_cols invocations (a row's on x, ROW_GROUP a workgroup;
 * rows on y, spilling onto z). Returns 0, -EINVAL for more than a dispatch takes, -ENOTSUP for no
 * kernel. Nothing is recorded for an empty grid. */
static int dispatch_rows(struct gpu_ops *o, int k, const void *push, size_t push_bytes,
                         int64_t n_cols, int64_t n_rows) {
    if (k < 0)
        return -ENOTSUP;
    if (n_cols < 0 || n_rows < 0)
        return -EINVAL;
    if (n_cols == 0 || n_rows == 0)
        return 0;
    const uint64_t nx = ((uint64_t)n_cols + ROW_GROUP - 1) / ROW_GROUP;
    uint32_t ny, nz;
    if (nx > ROW_GROUPS_MAX || !split_groups((uint64_t)n_rows, &ny, &nz))
        return -EINVAL;
    gpu_dispatch(o->g, k, push, push_bytes, (uint32_t)nx, ny, nz);
    return 0;
}

/* ---- RMSNorm ---------------------------------------------------------------------------------- */

/* ---- a row op's rows quantized for the next product (quantize_tail.glsl) ---------------------- */

/* quantize_tail.glsl's formats */
enum quant_fmt { QFMT_NONE, QFMT_Q8_0, QFMT_Q8_1, QFMT_Q8_K, QFMT_F16, QFMT_BF16 };

static enum quant_fmt quant_fmt_of(enum qtype wtype) {
    const struct quant_kernels *k = quant_kernels(wtype);
    switch (k ? k->vec_dot_type : QTYPE_F32) {
    case QTYPE_Q8_0: return QFMT_Q8_0;
    case QTYPE_Q8_1: return QFMT_Q8_1;
    case QTYPE_Q8_K: return QFMT_Q8_K;
    case QTYPE_F16: return QFMT_F16;
    case QTYPE_BF16: return QFMT_BF16;
    default: return QFMT_NONE;
    }
}

bool gpu_quant_out_takes(enum qtype wtype, int64_t n) {
    return quant_fmt_of(wtype) != QFMT_NONE && quant_act_row_stride(wtype, n) > 0;
}

/* q's format and rows' stride for rows of n (*q->stride set), or false. */
static bool quant_out(const struct gpu_quant_out *q, int64_t n, uint32_t *fmt, uint32_t *stride) {
    *fmt = QFMT_NONE;
    *stride = 0;
    if (!q)
        return true;
    const size_t s = gpu_quant_out_takes(q->wtype, n) ? quant_act_row_stride(q->wtype, n) : 0;
    if (!s || s > UINT32_MAX)
        return false;
    *fmt = quant_fmt_of(q->wtype);
    *stride = (uint32_t)s;
    *q->stride = s;
    return true;
}

/* ---- RMSNorm ---------------------------------------------------------------------------------- */

struct rms_norm_push {
    uint64_t x, w, y, r, qdst, d, dw, shexp, shexp_gate;
    double inv_n;
    uint32_t x_stride, y_stride, n, n_rows;
    float eps;
    uint32_t qfmt, q_stride, k;
};

/* Contract in gpu_ops.h. A workgroup of 256 per row, rows on x spilling onto z (rms_norm.comp);
 * m (NULL: none) adds the experts' weighted sum instead of r's rows. */
static int rms_norm(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t r, uint64_t w,
                    uint64_t y, size_t y_stride, int64_t n, float eps, int32_t n_rows,
                    const struct gpu_quant_out *q, const struct gpu_moe_rows *m) {
    if (o->row.rms_norm < 0)
        return -ENOTSUP;
    const uint64_t sizes[] = {x_stride, y_stride, (uint64_t)n};
    uint32_t nx, nz, qfmt, q_stride;
    if (n <= 0 || n_rows < 0 || !fits_u32(sizes, 3) || !quant_out(q, n, &qfmt, &q_stride) ||
        (m && (!m->d || !m->w || m->k < 1 || (m->shexp && !m->shexp_gate))))
        return -EINVAL;
    if (n_rows == 0)
        return 0;
    if (!split_groups((uint64_t)n_rows, &nx, &nz))
        return -EINVAL;
    struct rms_norm_push p = {.x = x, .w = w, .y = y, .r = r, .qdst = q ? q->dst : 0,
                              .inv_n = 1.0 / (double)n, .x_stride = (uint32_t)x_stride,
                              .y_stride = (uint32_t)y_stride, .n = (uint32_t)n,
                              .n_rows = (uint32_t)n_rows, .eps = eps, .qfmt = qfmt,
                              .q_stride = q_stride};
    if (m) {
        p.d = m->d, p.dw = m->w, p.shexp = m->shexp, p.shexp_gate = m->shexp_gate;
        p.k = (uint32_t)m->k;
    }
    gpu_dispatch(o->g, o->row.rms_norm, &p, sizeof(p), nx, 1, nz);
    return 0;
}

int gpu_op_rms_norm(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t w, uint64_t y,
                    size_t y_stride, int64_t n, float eps, int32_t n_rows) {
    return rms_norm(o, x, x_stride, 0, w, y, y_stride, n, eps, n_rows, NULL, NULL);
}

int gpu_op_add_rms_norm(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t r, uint64_t w,
                        uint64_t y, size_t y_stride, int64_t n, float eps, int32_t n_rows) {
    return r ? rms_norm(o, x, x_stride, r, w, y, y_stride, n, eps, n_rows, NULL, NULL) : -EINVAL;
}

int gpu_op_rms_norm_quantize(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t r,
                             uint64_t w, uint64_t y, size_t y_stride, int64_t n, float eps,
                             int32_t n_rows, const struct gpu_quant_out *q) {
    if (!q || y == x)
        return -EINVAL;
    return rms_norm(o, x, x_stride, r, w, y, y_stride, n, eps, n_rows, q, NULL);
}

int gpu_op_moe_add_rms_norm(struct gpu_ops *o, uint64_t x, size_t x_stride,
                            const struct gpu_moe_rows *m, uint64_t w, uint64_t y, size_t y_stride,
                            int64_t n, float eps, int32_t n_rows, const struct gpu_quant_out *q) {
    if (!m || y == x)
        return -EINVAL;
    return rms_norm(o, x, x_stride, 0, w, y, y_stride, n, eps, n_rows, q, m);
}

/* ---- RoPE ------------------------------------------------------------------------------------- */

struct rope_push {
    uint64_t x, cs;
    uint32_t tok_stride, head_stride, n_head, n_rot, n_tok, neox;
};

int gpu_op_rope(struct gpu_ops *o, bool neox, uint64_t x, size_t tok_stride, size_t head_stride,
                int32_t n_head, uint64_t cs, int32_t n_rot, int32_t n_tok) {
    const uint64_t sizes[] = {tok_stride, head_stride};
    if (n_head < 0 || n_rot < 0 || n_rot % 2 || !fits_u32(sizes, 2))
        return -EINVAL;
    struct rope_push p = {.x = x, .cs = cs, .tok_stride = (uint32_t)tok_stride,
                          .head_stride = (uint32_t)head_stride, .n_head = (uint32_t)n_head,
                          .n_rot = (uint32_t)n_rot, .n_tok = (uint32_t)n_tok, .neox = neox};
    return dispatch_rows(o, o->row.rope, &p, sizeof(p), (int64_t)n_head * (n_rot / 2), n_tok);
}

/* ---- adds ------------------------------------------------------------------------------------- */

struct add_rows_push {
    uint64_t y, b, ids;
    uint32_t y_stride, b_stride, n, n_rows;
};

/* y row r += b row (ids ? ids[r] : r), b rows b_stride floats apart (add_rows.comp). */
static int add_rows(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t b, size_t b_stride,
                    uint64_t ids, int64_t n, int32_t n_rows) {
    const uint64_t sizes[] = {y_stride, b_stride, (uint64_t)n};
    if (n < 0 || !fits_u32(sizes, 3))
        return -EINVAL;
    struct add_rows_push p = {.y = y, .b = b, .ids = ids, .y_stride = (uint32_t)y_stride,
                              .b_stride = (uint32_t)b_stride, .n = (uint32_t)n,
                              .n_rows = (uint32_t)n_rows};
    return dispatch_rows(o, o->row.add_rows, &p, sizeof(p), n, n_rows);
}

int gpu_op_add(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t b, size_t b_stride,
               int64_t n, int32_t n_rows) {
    return add_rows(o, y, y_stride, b, b_stride, 0, n, n_rows);
}

int gpu_op_add_id(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t b, uint64_t ids,
                  int64_t n, int32_t n_rows) {
    if (!ids)
        return -EINVAL;
    return add_rows(o, y, y_stride, b, (size_t)n, ids, n, n_rows);
}

/* ---- SwiGLU and the sigmoid gate -------------------------------------------------------------- */

struct swiglu_push {
    uint64_t y, g, u;
    uint32_t n, oai;
};

/* Contract in gpu_ops.h. Flat: n elements as rows of 65535 workgroups (swiglu.comp's grid_flat). */
int gpu_op_swiglu(struct gpu_ops *o, bool oai, uint64_t y, uint64_t g, uint64_t u, int64_t n) {
    if (o->row.swiglu < 0)
        return -ENOTSUP;
    uint32_t nx, ny;
    if (n < 0 || n > UINT32_MAX)
        return -EINVAL;
    if (n == 0)
        return 0;
    if (!split_groups(((uint64_t)n + ROW_GROUP - 1) / ROW_GROUP, &nx, &ny))
        return -EINVAL;
    struct swiglu_push p = {.y = y, .g = g, .u = u, .n = (uint32_t)n, .oai = oai};
    gpu_dispatch(o->g, o->row.swiglu, &p, sizeof(p), nx, ny, 1);
    return 0;
}

struct swiglu_quant_push {
    uint64_t y, g, u, qdst;
    uint32_t stride, n, n_rows, oai, qfmt, q_stride;
};

/* Contract in gpu_ops.h. A workgroup of 256 per row, rows on x spilling onto z
 * (swiglu_quant.comp). */
int gpu_op_swiglu_quantize(struct gpu_ops *o, bool oai, uint64_t y, uint64_t g, uint64_t u,
                           size_t stride, int64_t n, int32_t n_rows, const struct gpu_quant_out *q) {
    if (o->row.swiglu_quant < 0)
        return -ENOTSUP;
    const uint64_t sizes[] = {stride, (uint64_t)n};
    uint32_t nx, nz, qfmt, q_stride;
    if (!q || n <= 0 || n_rows < 0 || !fits_u32(sizes, 2) || !quant_out(q, n, &qfmt, &q_stride))
        return -EINVAL;
    if (n_rows == 0)
        return 0;
    if (!split_groups((uint64_t)n_rows, &nx, &nz))
        return -EINVAL;
    struct swiglu_quant_push p = {.y = y, .g = g, .u = u, .qdst = q->dst,
                                  .stride = (uint32_t)stride, .n = (uint32_t)n,
                                  .n_rows = (uint32_t)n_rows, .oai = oai, .qfmt = qfmt,
                                  .q_stride = q_stride};
    gpu_dispatch(o->g, o->row.swiglu_quant, &p, sizeof(p), nx, 1, nz);
    return 0;
}

struct sigmoid_mul_push {
    uint64_t y, g;
    uint32_t y_stride, g_stride, n, n_rows;
};

int gpu_op_sigmoid_mul(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t g, size_t g_stride,
                       int64_t n, int32_t n_rows) {
    const uint64_t sizes[] = {y_stride, g_stride, (uint64_t)n};
    if (n < 0 || !fits_u32(sizes, 3))
        return -EINVAL;
    struct sigmoid_mul_push p = {.y = y, .g = g, .y_stride = (uint32_t)y_stride,
                                 .g_stride = (uint32_t)g_stride, .n = (uint32_t)n,
                                 .n_rows = (uint32_t)n_rows};
    return dispatch_rows(o, o->row.sigmoid_mul, &p, sizeof(p), n, n_rows);
}

/* ---- GeGLU and the scales (gemma4) ----------------------------------------------------------- */

struct geglu_push {
    uint64_t y, g, u, table;
    uint32_t y_stride, g_stride, u_stride, n, n_rows;
};

int gpu_op_geglu(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t g, size_t g_stride,
                 uint64_t u, size_t u_stride, uint64_t table, int64_t n, int32_t n_rows) {
    const uint64_t sizes[] = {y_stride, g_stride, u_stride, (uint64_t)n};
    if (!table || n < 0 || !fits_u32(sizes, 4))
        return -EINVAL;
    struct geglu_push p = {.y = y, .g = g, .u = u, .table = table,
                           .y_stride = (uint32_t)y_stride, .g_stride = (uint32_t)g_stride,
                           .u_stride = (uint32_t)u_stride, .n = (uint32_t)n,
                           .n_rows = (uint32_t)n_rows};
    return dispatch_rows(o, o->row.geglu, &p, sizeof(p), n, n_rows);
}

struct scale_rows_push {
    uint64_t y, x, w, s, ids;
    uint32_t y_stride, x_stride, n, n_rows;
    float a;
};

/* y row r = (x row r * (ids ? s[ids[r]] : a)) * w (scale_rows.comp). */
static int scale_rows(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t x, size_t x_stride,
                      float a, uint64_t w, uint64_t s, uint64_t ids, int64_t n, int32_t n_rows) {
    const uint64_t sizes[] = {y_stride, x_stride, (uint64_t)n};
    if (n < 0 || !fits_u32(sizes, 3))
        return -EINVAL;
    struct scale_rows_push p = {.y = y, .x = x, .w = w, .s = s, .ids = ids,
                                .y_stride = (uint32_t)y_stride, .x_stride = (uint32_t)x_stride,
                                .n = (uint32_t)n, .n_rows = (uint32_t)n_rows, .a = a};
    return dispatch_rows(o, o->row.scale_rows, &p, sizeof(p), n, n_rows);
}

int gpu_op_scale(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t x, size_t x_stride,
                 float a, uint64_t w, int64_t n, int32_t n_rows) {
    return scale_rows(o, y, y_stride, x, x_stride, a, w, 0, 0, n, n_rows);
}

int gpu_op_scale_id(struct gpu_ops *o, uint64_t y, size_t y_stride, uint64_t s, uint64_t ids,
                    int64_t n, int32_t n_rows) {
    if (!s || !ids)
        return -EINVAL;
    return scale_rows(o, y, y_stride, y, y_stride, 0.0f, 0, s, ids, n, n_rows);
}

/* ---- the experts' weighted sum ---------------------------------------------------------------- */

struct moe_sum_push {
    uint64_t y, d, w, shexp, shexp_gate;
    uint32_t k, n, n_tok;
};

int gpu_op_moe_sum(struct gpu_ops *o, uint64_t y, uint64_t d, uint64_t w, int32_t k, int64_t n,
                   uint64_t shexp, uint64_t shexp_gate, int32_t n_tok) {
    if (k < 1 || n < 0 || n > UINT32_MAX || (shexp && !shexp_gate))
        return -EINVAL;
    struct moe_sum_push p = {.y = y, .d = d, .w = w, .shexp = shexp, .shexp_gate = shexp_gate,
                             .k = (uint32_t)k, .n = (uint32_t)n, .n_tok = (uint32_t)n_tok};
    return dispatch_rows(o, o->row.moe_sum, &p, sizeof(p), n, n_tok);
}

/* ---- the KV store ----------------------------------------------------------------------------- */

enum kv_kind { KV_NONE = -1, KV_F32, KV_F16, KV_Q8_0, KV_Q4_0 }; /* kv_store.comp's KV_* */

static enum kv_kind kv_kind_of(enum qtype t) {
    switch (t) {
    case QTYPE_F32: return KV_F32;
    case QTYPE_F16: return KV_F16;
    case QTYPE_Q8_0: return KV_Q8_0;
    case QTYPE_Q4_0: return KV_Q4_0;
    default: return KV_NONE;
    }
}

struct kv_store_push {
    uint64_t src, dst;
    uint32_t src_stride, row_bytes, ring_rows, pos0, kv_dim, n_tok, kind;
};

/* Contract in gpu_ops.h. -EINVAL also for a kv_type the cache cannot have, a kv_dim that is not
 * whole blocks of it, rows too short for kv_dim, halves or floats not aligned to their size, or a
 * ring position past 32 bits. */
int gpu_op_kv_store(struct gpu_ops *o, enum qtype kv_type, uint64_t src, size_t src_stride,
                    uint64_t dst, size_t row_bytes, int32_t ring_rows, int32_t pos0, int64_t kv_dim,
                    int32_t n_tok) {
    const enum kv_kind kind = kv_kind_of(kv_type);
    const uint64_t sizes[] = {src_stride, row_bytes, (uint64_t)kv_dim,
                              (uint64_t)pos0 + (uint64_t)n_tok};
    const uint64_t align = kind == KV_F32 ? 4 : kind == KV_F16 ? 2 : 1;
    uint64_t need = 0;
    if (kind == KV_NONE || ring_rows < 1 || pos0 < 0 || kv_dim < 0 || n_tok < 0 ||
        !fits_u32(sizes, 4) || qtype_row_bytes(kv_type, (uint64_t)kv_dim, &need) < 0 ||
        need > row_bytes || dst % align || row_bytes % align)
        return -EINVAL;
    struct kv_store_push p = {.src = src, .dst = dst, .src_stride = (uint32_t)src_stride,
                              .row_bytes = (uint32_t)row_bytes, .ring_rows = (uint32_t)ring_rows,
                              .pos0 = (uint32_t)pos0, .kv_dim = (uint32_t)kv_dim,
                              .n_tok = (uint32_t)n_tok, .kind = (uint32_t)kind};
    const int64_t per = kind == KV_Q8_0 || kind == KV_Q4_0 ? 32 : 1;
    return dispatch_rows(o, o->row.kv_store, &p, sizeof(p), kv_dim / per, n_tok);
}

/* ---- the attention's prologue ---------------------------------------------------------------- */

#define ATTN_PREP_HEAD_MAX 512 /* attn_prep.comp's HEAD_MAX: a head's row in shared memory */

struct attn_prep_push {
    uint64_t q, k, v, q_norm, k_norm, cs, kc, vc;
    double inv_n;
    uint32_t q_tok_stride, q_head_stride, kv_stride, n_head, n_head_kv, head_dim, n_rot;
    uint32_t row_bytes, ring_rows, pos0, n_tok, flags;
    float eps;
};

bool gpu_attn_prep_takes(enum qtype kv_type, int32_t head_dim) {
    const enum kv_kind kind = kv_kind_of(kv_type);
    return kind != KV_NONE && head_dim > 0 && head_dim <= ATTN_PREP_HEAD_MAX &&
           (head_dim % 32 == 0 || kind == KV_F32 || kind == KV_F16);
}

/* True when a's shape is one attn_prep.comp takes (gpu_ops.h's contract). */
static bool attn_prep_fits(const struct gpu_attn_prep *a) {
    const enum kv_kind kind = kv_kind_of(a->kv_type);
    const uint64_t kv_dim = (uint64_t)a->n_head_kv * (uint64_t)(a->head_dim > 0 ? a->head_dim : 0);
    const uint64_t sizes[] = {a->q_tok_stride, a->q_head_stride, a->kv_stride, a->row_bytes,
                              (uint64_t)a->pos0 + (uint64_t)a->n_tok};
    const uint64_t align = kind == KV_F32 ? 4 : kind == KV_F16 ? 2 : 1;
    uint64_t need = 0;
    if (!gpu_attn_prep_takes(a->kv_type, a->head_dim) || a->n_head < 0 || a->n_head_kv < 0 ||
        a->n_tok < 0 || a->n_rot < 0 || a->n_rot % 2 || a->n_rot > a->head_dim ||
        (unsigned)a->v_norm > GPU_V_FROM_K || !fits_u32(sizes, 5) ||
        (uint64_t)a->n_head + (uint64_t)a->n_head_kv > ROW_GROUPS_MAX)
        return false;
    if (a->n_head_kv == 0)
        return true;
    return a->ring_rows >= 1 && a->pos0 >= 0 && a->kv_stride >= kv_dim &&
           qtype_row_bytes(a->kv_type, kv_dim, &need) == 0 && need <= a->row_bytes &&
           a->k_rows % align == 0 && a->v_rows % align == 0 && a->row_bytes % align == 0;
}

/* Contract in gpu_ops.h. A workgroup of ROW_GROUP per head, heads on x, tokens on y and z. */
int gpu_op_attn_prep(struct gpu_ops *o, const struct gpu_attn_prep *a) {
    if (o->row.attn_prep < 0)
        return -ENOTSUP;
    if (!attn_prep_fits(a))
        return -EINVAL;
    const uint32_t flags = (a->neox ? 1u : 0u) | (uint32_t)a->v_norm << 1 |
                           (uint32_t)kv_kind_of(a->kv_type) << 3;
    struct attn_prep_push p = {
        .q = a->q, .k = a->k, .v = a->v, .q_norm = a->q_norm, .k_norm = a->k_norm, .cs = a->cs,
        .kc = a->k_rows, .vc = a->v_rows, .inv_n = 1.0 / (double)a->head_dim,
        .q_tok_stride = (uint32_t)a->q_tok_stride, .q_head_stride = (uint32_t)a->q_head_stride,
        .kv_stride = (uint32_t)a->kv_stride, .n_head = (uint32_t)a->n_head,
        .n_head_kv = (uint32_t)a->n_head_kv, .head_dim = (uint32_t)a->head_dim,
        .n_rot = (uint32_t)a->n_rot, .row_bytes = (uint32_t)a->row_bytes,
        .ring_rows = (uint32_t)(a->ring_rows > 0 ? a->ring_rows : 1), .pos0 = (uint32_t)a->pos0,
        .n_tok = (uint32_t)a->n_tok, .flags = flags, .eps = a->eps};
    return dispatch_rows(o, o->row.attn_prep, &p, sizeof(p),
                         ((int64_t)a->n_head + a->n_head_kv) * ROW_GROUP, a->n_tok);
}

_Static_assert(sizeof(struct rms_norm_push) <= GPU_PUSH_MAX, "push constants");
_Static_assert(sizeof(struct attn_prep_push) <= GPU_PUSH_MAX, "push constants");
_Static_assert(sizeof(struct moe_sum_push) <= GPU_PUSH_MAX, "push constants");
_Static_assert(sizeof(struct kv_store_push) <= GPU_PUSH_MAX, "push constants");
_Static_assert(sizeof(struct geglu_push) <= GPU_PUSH_MAX, "push constants");
_Static_assert(sizeof(struct scale_rows_push) <= GPU_PUSH_MAX, "push constants");
