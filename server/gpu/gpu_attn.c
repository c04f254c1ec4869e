/* gpu_attn.c - gpu_ops.h's attention: block_attn.c's attn_head for every (token, head) of a
 * segment, bit for bit, as two or three kernels (shaders/attn*.comp): the query in the KV type's
 * format (the block types; the float types' scores convert it as they read it), the scores (an
 * invocation per position), the weighted sum of V rows (a chain per output element, positions in
 * order) with the softmax and its sink (each workgroup first computes its row's maximum and sum
 * in the contract's 32 lanes, then each probability as it reads it). The scratch holds the query rows and the scores rows of n_kv_max floats (the positions
 * the segment's last token sees, at most the n_ctx it was sized for). The push constants mirror
 * attn.glsl's `Push` block (std430: the addresses first). */
#include "gpu_ops.h"

#include <errno.h>
#include <limits.h>

#include "quant.h"

#define ATTN_Q_BYTES 1024     /* attn.glsl: a query row in the scratch (512 halves, 16 Q8_0 blocks) */
#define ATTN_MAX_HEAD_DIM 512 /* what ATTN_Q_BYTES holds (gemma4's global heads are 512) */
#define ATTN_SCORES_GROUP 64  /* attn_scores.glsl: positions a workgroup */
#define ATTN_VSUM_DIMS 32     /* attn_vsum.glsl: output elements a workgroup */
#define GPU_GROUPS_MAX 65535  /* workgroups a dispatch may have per dimension: Vulkan's minimum */

struct attn_push {
    uint64_t q, k, v, out, sinks, scratch;
    uint32_t q_tok_stride, q_head_stride, row_bytes, ring_rows, out_stride;
    uint32_t n_head, n_head_kv, head_dim, pos0, n_tok, window, n_kv_max, head_bytes;
    float scale;
};
_Static_assert(sizeof(struct attn_push) <= GPU_PUSH_MAX, "attn.glsl's push constants");

/* The KV types with kernels, and the kernels' names (the query: NULL where the scores read it as
 * it is). */
static const struct {
    enum qtype type;
    const char *query, *scores, *vsum;
} attn_types[] = {
    {QTYPE_F32, NULL, "attn_scores_f32", "attn_vsum_f32"},
    {QTYPE_F16, NULL, "attn_scores_f16", "attn_vsum_f16"},
    {QTYPE_Q8_0, "attn_query_q8_0", "attn_scores_q8_0", "attn_vsum_q8_0"},
    {QTYPE_Q4_0, "attn_query_q8_0", "attn_scores_q4_0", "attn_vsum_q4_0"},
};

void gpu_attn_kernels_find(struct gpu_attn_kernels *k, const struct gpu *g) {
    for (int t = 0; t < QTYPE_COUNT; t++)
        k->query[t] = k->scores[t] = k->vsum[t] = -1;
    for (size_t i = 0; g && i < sizeof(attn_types) / sizeof(attn_types[0]); i++) {
        const enum qtype t = attn_types[i].type;
        k->query[t] = attn_types[i].query ? gpu_kernel(g, attn_types[i].query) : -1;
        k->scores[t] = gpu_kernel(g, attn_types[i].scores);
        k->vsum[t] = gpu_kernel(g, attn_types[i].vsum);
    }
}

/* True when every kernel kv_type needs is there. */
static bool attn_has_type(const struct gpu_attn_kernels *k, enum qtype t) {
    if ((int)t < 0 || t >= QTYPE_COUNT)
        return false;
    bool query = false; /* whether attn_types gives the type a query kernel */
    for (size_t i = 0; i < sizeof(attn_types) / sizeof(attn_types[0]); i++)
        query |= attn_types[i].type == t && attn_types[i].query;
    return (!query || k->query[t] >= 0) && k->scores[t] >= 0 && k->vsum[t] >= 0;
}

size_t gpu_attn_scratch_bytes(int32_t n_tok, int32_t n_head, int32_t n_ctx) {
    return (size_t)n_tok * (size_t)n_head * (ATTN_Q_BYTES + (size_t)n_ctx * sizeof(float));
}

/* Positions the segment's last token sees: the longest scores row. */
static int64_t attn_n_kv_max(const struct gpu_attn *a) {
    const int64_t pos = (int64_t)a->pos0 + a->n_tok - 1;
    return a->window > 0 && pos + 1 > a->window ? a->window : pos + 1;
}

static bool fits_u32(size_t v) {
    return v <= UINT32_MAX;
}

/* The alignment the float types' kernels read K and V rows with (attn_scores_f32/f16,
 * attn_vsum_f32/f16: four elements a load), 1 for the block types. */
static size_t attn_row_align(enum qtype t) {
    return t == QTYPE_F32 ? 16 : t == QTYPE_F16 ? 8 : 1;
}

/* A head's bytes in a's KV type (whole blocks of head_dim), 0 where head_dim is not. */
static uint64_t attn_head_bytes(const struct gpu_attn *a) {
    uint64_t head_bytes = 0;
    return qtype_row_bytes(a->kv_type, (uint64_t)a->head_dim, &head_bytes) == 0 ? head_bytes : 0;
}

/* True when a's rows hold its heads: whole blocks of head_dim a head, n_head_kv heads packed from
 * a row's start (the row may be longer: a wider layer's), aligned as the kernels read them. */
static bool attn_rows_ok(const struct gpu_attn *a) {
    const uint64_t head_bytes = attn_head_bytes(a);
    if (head_bytes == 0 || (uint64_t)a->n_head_kv * head_bytes > a->row_bytes)
        return false;
    const size_t align = attn_row_align(a->kv_type);
    return a->k % align == 0 && a->v % align == 0 && a->row_bytes % align == 0 &&
           head_bytes % align == 0;
}

/* True when a's shape is one the kernels take (gpu_op_attn's -EINVAL cases). */
static bool attn_shape_ok(const struct gpu_attn *a) {
    if (a->n_tok < 1 || a->n_head < 1 || a->n_head_kv < 1 || a->n_head % a->n_head_kv != 0 ||
        a->head_dim < 1 || a->head_dim > ATTN_MAX_HEAD_DIM || a->pos0 < 0 || a->window < 0 ||
        a->ring_rows < 1 || (int64_t)a->pos0 + a->n_tok > INT32_MAX || !attn_rows_ok(a))
        return false;
    /* a token sees each row once; tokens and heads on a dispatch's z and y, positions on x,
     * within Vulkan's minimum of groups */
    const int64_t n_kv_max = attn_n_kv_max(a);
    return n_kv_max <= a->ring_rows && a->n_tok <= GPU_GROUPS_MAX && a->n_head <= GPU_GROUPS_MAX &&
           n_kv_max <= (int64_t)GPU_GROUPS_MAX * ATTN_SCORES_GROUP && fits_u32(a->q_tok_stride) &&
           fits_u32(a->q_head_stride) && fits_u32(a->row_bytes) && fits_u32(a->out_stride);
}

static uint32_t groups(int64_t n, int64_t per) {
    return (uint32_t)((n + per - 1) / per);
}

int gpu_op_attn(struct gpu_ops *o, const struct gpu_attn *a) {
    const struct gpu_attn_kernels *k = &o->attn;
    if (!attn_has_type(k, a->kv_type))
        return -ENOTSUP;
    if (!attn_shape_ok(a))
        return -EINVAL;
    const enum qtype t = a->kv_type;
    const int64_t n_kv_max = attn_n_kv_max(a);
    const struct attn_push p = {
        .q = a->q, .k = a->k, .v = a->v, .out = a->out, .sinks = a->sinks, .scratch = a->scratch,
        .q_tok_stride = (uint32_t)a->q_tok_stride, .q_head_stride = (uint32_t)a->q_head_stride,
        .row_bytes = (uint32_t)a->row_bytes, .ring_rows = (uint32_t)a->ring_rows,
        .out_stride = (uint32_t)a->out_stride, .n_head = (uint32_t)a->n_head,
        .n_head_kv = (uint32_t)a->n_head_kv, .head_dim = (uint32_t)a->head_dim,
        .pos0 = (uint32_t)a->pos0, .n_tok = (uint32_t)a->n_tok, .window = (uint32_t)a->window,
        .n_kv_max = (uint32_t)n_kv_max, .head_bytes = (uint32_t)attn_head_bytes(a),
        .scale = a->scale};
    const uint32_t nh = (uint32_t)a->n_head, nt = (uint32_t)a->n_tok;
    if (k->query[t] >= 0) {
        gpu_dispatch(o->g, k->query[t], &p, sizeof(p), nh, nt, 1);
        gpu_barrier(o->g);
    }
    gpu_dispatch(o->g, k->scores[t], &p, sizeof(p), groups(n_kv_max, ATTN_SCORES_GROUP), nh, nt);
    gpu_barrier(o->g);
    gpu_dispatch(o->g, k->vsum[t], &p, sizeof(p), groups(a->head_dim, ATTN_VSUM_DIMS), nh, nt);
    return 0;
}
