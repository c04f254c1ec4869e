/* gpu_ops.c - gpu_ops.h: a table from weight type to its kernels and their launch shapes. The
 * push constants below mirror each kernel's `Push` block (std430: the addresses first). */
#include "gpu_ops.h"

#include <errno.h>
#include <stdint.h>

#include "err.h"
#include "quant.h"
#include "quant_iq.h"

/* One weight type's kernels. */
struct gpu_type_kernels {
    enum qtype type;
    const char *matmul;       /* shaders/NAME.comp */
    const char *quantize;
    bool blocks;              /* matmul_blocks.glsl's driver (a workgroup: one row, tok_group
                               * tokens), else matmul_float.glsl's (two rows of one token) */
    int quantize_elems;       /* elements one invocation of the quantizer handles */
    const void *grid;         /* a grid i-quant's codebook (quant_iq.h), NULL for other types */
    size_t grid_bytes;
};

static const struct gpu_type_kernels gpu_types[] = {
    {QTYPE_F32, "matmul_f32", "quantize_f32", false, 1, NULL, 0},
    {QTYPE_F16, "matmul_f16", "quantize_f16", false, 1, NULL, 0},
    {QTYPE_BF16, "matmul_bf16", "quantize_bf16", false, 1, NULL, 0},
    {QTYPE_Q8_0, "matmul_q8_0", "quantize_q8_0", true, 32, NULL, 0},
    {QTYPE_Q4_0, "matmul_q4_0", "quantize_q8_0", true, 32, NULL, 0},
    {QTYPE_Q4_1, "matmul_q4_1", "quantize_q8_1", true, 32, NULL, 0},
    {QTYPE_Q5_0, "matmul_q5_0", "quantize_q8_0", true, 32, NULL, 0},
    {QTYPE_Q5_1, "matmul_q5_1", "quantize_q8_1", true, 32, NULL, 0},
    {QTYPE_IQ4_NL, "matmul_iq4_nl", "quantize_q8_0", true, 32, NULL, 0},
    {QTYPE_MXFP4, "matmul_mxfp4", "quantize_q8_0", true, 32, NULL, 0},
    {QTYPE_Q2_K, "matmul_q2_K", "quantize_q8_K", true, 256, NULL, 0},
    {QTYPE_Q3_K, "matmul_q3_K", "quantize_q8_K", true, 256, NULL, 0},
    {QTYPE_Q4_K, "matmul_q4_K", "quantize_q8_K", true, 256, NULL, 0},
    {QTYPE_Q5_K, "matmul_q5_K", "quantize_q8_K", true, 256, NULL, 0},
    {QTYPE_Q6_K, "matmul_q6_K", "quantize_q8_K", true, 256, NULL, 0},
    {QTYPE_IQ4_XS, "matmul_iq4_xs", "quantize_q8_K", true, 256, NULL, 0},
    {QTYPE_IQ2_XXS, "matmul_iq2_xxs", "quantize_q8_K", true, 256, quant_iq_grid2xxs,
     sizeof(quant_iq_grid2xxs)},
    {QTYPE_IQ2_XS, "matmul_iq2_xs", "quantize_q8_K", true, 256, quant_iq_grid2xs,
     sizeof(quant_iq_grid2xs)},
    {QTYPE_IQ2_S, "matmul_iq2_s", "quantize_q8_K", true, 256, quant_iq_grid2s,
     sizeof(quant_iq_grid2s)},
    {QTYPE_IQ3_XXS, "matmul_iq3_xxs", "quantize_q8_K", true, 256, quant_iq_grid3xxs,
     sizeof(quant_iq_grid3xxs)},
    {QTYPE_IQ3_S, "matmul_iq3_s", "quantize_q8_K", true, 256, quant_iq_grid3s,
     sizeof(quant_iq_grid3s)},
    {QTYPE_IQ1_S, "matmul_iq1_s", "quantize_q8_K", true, 256, quant_iq_grid1s,
     sizeof(quant_iq_grid1s)},
    {QTYPE_IQ1_M, "matmul_iq1_m", "quantize_q8_K", true, 256, quant_iq_grid1s,
     sizeof(quant_iq_grid1s)},
};

#define GPU_GROUP 64       /* invocations per workgroup of every kernel here */
#define GPU_GROUPS_X 65535 /* workgroups a dispatch may have on x: Vulkan's minimum */
#define GPU_TYPES (sizeof(gpu_types) / sizeof(gpu_types[0]))

/* A codebook in the tables buffer (shaders/iq_grid.glsl): quant_iq_ksigns in bytes 0..127, then
 * the grid; codebooks start 8-byte aligned. */
#define IQ_SIGNS_BYTES 128
_Static_assert(sizeof(quant_iq_ksigns) == IQ_SIGNS_BYTES, "iq_grid.glsl's layout");

struct matmul_push {
    uint64_t w, act, out;
    uint32_t row_bytes, act_stride, out_stride, n_in, n_rows, n_tok;
    uint64_t tables; /* matmul_push.glsl */
    uint64_t ids, act_idx, out_idx, mat_bytes; /* gpu_op_matmul_id's; 0 in gpu_op_matmul's */
};
_Static_assert(sizeof(struct matmul_push) <= GPU_PUSH_MAX, "push constants");

struct quantize_push {
    uint64_t x, dst;
    uint32_t x_stride, dst_stride, n, n_rows;
};

static const struct gpu_type_kernels *type_kernels(enum qtype t) {
    for (size_t i = 0; i < GPU_TYPES; i++)
        if (gpu_types[i].type == t)
            return &gpu_types[i];
    return NULL;
}

/* Bytes of k's codebook in the tables buffer (a multiple of 8), 0 for a type without one. */
static size_t codebook_bytes(const struct gpu_type_kernels *k) {
    return k->grid ? (IQ_SIGNS_BYTES + k->grid_bytes + 7) / 8 * 8 : 0;
}

/* Uploads every codebook of gpu_types into o->tables, filling o->table_addr. Returns 0, -ENOMEM
 * where gpu_buf_new finds no room (its reason in the message), or gpu_buf_write's error. */
static int upload_codebooks(struct gpu_ops *o, char *err, size_t err_len) {
    size_t total = 0;
    for (size_t i = 0; i < GPU_TYPES; i++)
        total += codebook_bytes(&gpu_types[i]);
    char why[256] = "";
    o->tables = gpu_buf_new(o->g, total, why, sizeof(why));
    if (!o->tables) {
        err_set(err, err_len, "gpu_ops: no room for the i-quant codebooks (%zu bytes): %s", total,
                why);
        return -ENOMEM;
    }
    size_t off = 0;
    for (size_t i = 0; i < GPU_TYPES; i++) {
        const struct gpu_type_kernels *k = &gpu_types[i];
        if (!k->grid)
            continue;
        int rc = gpu_buf_write(o->g, o->tables, off, quant_iq_ksigns, IQ_SIGNS_BYTES);
        if (!rc)
            rc = gpu_buf_write(o->g, o->tables, off + IQ_SIGNS_BYTES, k->grid, k->grid_bytes);
        if (rc) {
            err_set(err, err_len, "gpu_ops: uploading the i-quant codebooks failed (%d)", rc);
            return rc;
        }
        o->table_addr[k->type] = gpu_buf_addr(o->tables) + off;
        off += codebook_bytes(k);
    }
    return 0;
}

int gpu_ops_init(struct gpu_ops *o, struct gpu *g, char *err, size_t err_len) {
    *o = (struct gpu_ops){.g = g};
    int found = 0;
    for (int t = 0; t < QTYPE_COUNT; t++) {
        const struct gpu_type_kernels *k = type_kernels((enum qtype)t);
        o->matmul[t] = k ? gpu_kernel(g, k->matmul) : -1;
        o->quantize[t] = k ? gpu_kernel(g, k->quantize) : -1;
        found += o->matmul[t] >= 0 && o->quantize[t] >= 0;
    }
    gpu_attn_kernels_find(&o->attn, g);
    if (!found) {
        err_set(err, err_len, "gpu_ops: this build has no matrix-product kernels");
        gpu_ops_release(o);
        return -ENOENT;
    }
    gpu_rowops_find(o);
    int rc = upload_codebooks(o, err, err_len);
    if (rc)
        gpu_ops_release(o);
    return rc;
}

/* Contract in gpu_ops.h. Afterwards o has no types (gpu_op_* answer -ENOTSUP). */
void gpu_ops_release(struct gpu_ops *o) {
    if (o->g)
        gpu_buf_free(o->g, o->tables);
    o->tables = NULL;
    o->row = (struct gpu_rowops){-1, -1, -1, -1, -1, -1, -1};
    for (int t = 0; t < QTYPE_COUNT; t++) {
        o->matmul[t] = o->quantize[t] = -1;
        o->table_addr[t] = 0;
    }
    gpu_attn_kernels_find(&o->attn, NULL);
}

bool gpu_ops_has_type(const struct gpu_ops *o, enum qtype t) {
    return (int)t >= 0 && t < QTYPE_COUNT && o->matmul[t] >= 0 && o->quantize[t] >= 0;
}

static uint32_t groups(int64_t n, int64_t per) {
    return (uint32_t)((n + per - 1) / per);
}

int gpu_op_quantize(struct gpu_ops *o, enum qtype t, uint64_t x, size_t x_stride, uint64_t dst,
                    size_t *act_stride, int64_t n, int32_t n_rows) {
    if (!gpu_ops_has_type(o, t))
        return -ENOTSUP;
    const struct gpu_type_kernels *k = type_kernels(t);
    *act_stride = quant_act_row_stride(t, n);
    struct quantize_push p = {.x = x, .dst = dst, .x_stride = (uint32_t)x_stride,
                              .dst_stride = (uint32_t)*act_stride,
                              .n = (uint32_t)(n / k->quantize_elems), .n_rows = (uint32_t)n_rows};
    gpu_dispatch(o->g, o->quantize[t], &p, sizeof(p), groups(p.n, GPU_GROUP), (uint32_t)n_rows, 1);
    return 0;
}

/* Tokens one workgroup of k's product takes: the block driver's rule (matmul_blocks.glsl's
 * tok_group), one for the float driver (its workgroups are two rows of one token). */
static int32_t tok_group(const struct gpu_type_kernels *k, int32_t n_tok) {
    if (!k->blocks)
        return 1;
    return n_tok >= 8 ? 8 : n_tok >= 4 ? 4 : n_tok >= 2 ? 2 : 1;
}

/* Records type t's product with push constants p (p->n_tok tokens or pairs). */
static void record_product(struct gpu_ops *o, enum qtype t, const struct matmul_push *p) {
    const struct gpu_type_kernels *k = type_kernels(t);
    const int32_t n_tok = (int32_t)p->n_tok;
    /* row groups on x, spilling onto z past 65535 (every device takes that many on each); the
     * block kernels take tok_group tokens per workgroup (matmul_blocks.glsl's rule) */
    const uint32_t n_groups = groups(p->n_rows, k->blocks ? 1 : 2);
    const uint32_t nx = n_groups < GPU_GROUPS_X ? n_groups : GPU_GROUPS_X;
    gpu_dispatch(o->g, o->matmul[t], p, sizeof(*p), nx, groups(n_tok, tok_group(k, n_tok)),
                 groups(n_groups, nx));
}

int gpu_op_matmul(struct gpu_ops *o, enum qtype t, uint64_t w, size_t row_bytes, int64_t n_in,
                  int64_t n_rows, uint64_t act, size_t act_stride, uint64_t out, size_t out_stride,
                  int32_t n_tok) {
    if (!gpu_ops_has_type(o, t))
        return -ENOTSUP;
    struct matmul_push p = {.w = w, .act = act, .out = out, .row_bytes = (uint32_t)row_bytes,
                            .act_stride = (uint32_t)act_stride, .out_stride = (uint32_t)out_stride,
                            .n_in = (uint32_t)n_in, .n_rows = (uint32_t)n_rows,
                            .n_tok = (uint32_t)n_tok, .tables = o->table_addr[t]};
    record_product(o, t, &p);
    return 0;
}

/* Contract in gpu_ops.h: gpu_op_matmul's kernels, each pair in a token's place (matmul_push.glsl
 * reads the three index arrays). -EINVAL for a size the push constants cannot hold. */
int gpu_op_matmul_id(struct gpu_ops *o, enum qtype t, uint64_t w, size_t mat_bytes,
                     size_t row_bytes, int64_t n_in, int64_t n_rows, uint64_t ids, uint64_t act,
                     size_t act_stride, uint64_t act_idx, uint64_t out, size_t out_stride,
                     uint64_t out_idx, int32_t n_pairs) {
    if (!gpu_ops_has_type(o, t))
        return -ENOTSUP;
    if (n_in <= 0 || n_rows <= 0 || n_pairs < 0 || n_in > UINT32_MAX || n_rows > UINT32_MAX ||
        row_bytes > UINT32_MAX || act_stride > UINT32_MAX || out_stride > UINT32_MAX)
        return -EINVAL;
    struct matmul_push p = {.w = w, .act = act, .out = out, .row_bytes = (uint32_t)row_bytes,
                            .act_stride = (uint32_t)act_stride, .out_stride = (uint32_t)out_stride,
                            .n_in = (uint32_t)n_in, .n_rows = (uint32_t)n_rows,
                            .n_tok = (uint32_t)n_pairs, .tables = o->table_addr[t], .ids = ids,
                            .act_idx = act_idx, .out_idx = out_idx, .mat_bytes = mat_bytes};
    record_product(o, t, &p);
    return 0;
}
