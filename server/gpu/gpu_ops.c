/* gpu_ops.c - gpu_ops.h: a table from weight type to its kernels and their launch shapes. The
 * push constants below mirror each kernel's `Push` block (std430: the addresses first). */
#include "gpu_ops.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "quant.h"
#include "quant_iq.h"

/* The driver a type's product kernel includes, which sets its launch shape. */
enum gpu_driver {
    GPU_DRIVER_FLOAT,  /* matmul_float.glsl: a workgroup is two rows of one token */
    GPU_DRIVER_BLOCKS, /* matmul_blocks.glsl: one row, tok_group tokens */
    GPU_DRIVER_SPLIT,  /* matmul_split.glsl: split_rows rows, tok_group tokens; 256-element
                        * blocks read as words, so rows and activations 4-byte aligned */
};

/* One weight type's kernels. */
struct gpu_type_kernels {
    enum qtype type;
    const char *matmul;       /* shaders/NAME.comp */
    const char *quantize;
    enum gpu_driver driver;
    int quantize_elems;       /* elements one invocation of the quantizer handles */
    const void *grid;         /* a grid i-quant's codebook (quant_iq.h), NULL for other types */
    size_t grid_bytes;
};

static const struct gpu_type_kernels gpu_types[] = {
    {QTYPE_F32, "matmul_f32", "quantize_f32", GPU_DRIVER_FLOAT, 1, NULL, 0},
    {QTYPE_F16, "matmul_f16", "quantize_f16", GPU_DRIVER_FLOAT, 1, NULL, 0},
    {QTYPE_BF16, "matmul_bf16", "quantize_bf16", GPU_DRIVER_FLOAT, 1, NULL, 0},
    {QTYPE_Q8_0, "matmul_q8_0", "quantize_q8_0", GPU_DRIVER_BLOCKS, 32, NULL, 0},
    {QTYPE_Q4_0, "matmul_q4_0", "quantize_q8_0", GPU_DRIVER_BLOCKS, 32, NULL, 0},
    {QTYPE_Q4_1, "matmul_q4_1", "quantize_q8_1", GPU_DRIVER_BLOCKS, 32, NULL, 0},
    {QTYPE_Q5_0, "matmul_q5_0", "quantize_q8_0", GPU_DRIVER_BLOCKS, 32, NULL, 0},
    {QTYPE_Q5_1, "matmul_q5_1", "quantize_q8_1", GPU_DRIVER_BLOCKS, 32, NULL, 0},
    {QTYPE_IQ4_NL, "matmul_iq4_nl", "quantize_q8_0", GPU_DRIVER_BLOCKS, 32, NULL, 0},
    {QTYPE_MXFP4, "matmul_mxfp4", "quantize_q8_0", GPU_DRIVER_BLOCKS, 32, NULL, 0},
    {QTYPE_Q2_K, "matmul_q2_K", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, NULL, 0},
    {QTYPE_Q3_K, "matmul_q3_K", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, NULL, 0},
    {QTYPE_Q4_K, "matmul_q4_K", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, NULL, 0},
    {QTYPE_Q5_K, "matmul_q5_K", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, NULL, 0},
    {QTYPE_Q6_K, "matmul_q6_K", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, NULL, 0},
    {QTYPE_IQ4_XS, "matmul_iq4_xs", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, NULL, 0},
    {QTYPE_IQ2_XXS, "matmul_iq2_xxs", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, quant_iq_grid2xxs,
     sizeof(quant_iq_grid2xxs)},
    {QTYPE_IQ2_XS, "matmul_iq2_xs", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, quant_iq_grid2xs,
     sizeof(quant_iq_grid2xs)},
    {QTYPE_IQ2_S, "matmul_iq2_s", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, quant_iq_grid2s,
     sizeof(quant_iq_grid2s)},
    {QTYPE_IQ3_XXS, "matmul_iq3_xxs", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, quant_iq_grid3xxs,
     sizeof(quant_iq_grid3xxs)},
    {QTYPE_IQ3_S, "matmul_iq3_s", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, quant_iq_grid3s,
     sizeof(quant_iq_grid3s)},
    {QTYPE_IQ1_S, "matmul_iq1_s", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, quant_iq_grid1s,
     sizeof(quant_iq_grid1s)},
    {QTYPE_IQ1_M, "matmul_iq1_m", "quantize_q8_K", GPU_DRIVER_SPLIT, 256, quant_iq_grid1s,
     sizeof(quant_iq_grid1s)},
};

#define GPU_GROUP 64       /* invocations per workgroup of every kernel here */
#define GPU_TILE_ROWS 16   /* matmul_tile.glsl's tile: rows */
#define GPU_TILE_TOK 16    /* and tokens (or pairs) */
#define GPU_GROUP_MAX_EXPERTS 1024 /* group_pairs.comp's */
/* Tokens (or pairs) from which the products take the tiled driver (where tile_pays): below, a
 * tile leaves slots idle and the per-token drivers (up to 8 tokens a workgroup) were as fast or
 * faster (bench-gpu --sweep on the H100: IQ4_XS lost at 8 tokens, Q4_K won from 8;
 * docs/benchmarks.md). */
#define GPU_TILE_MIN_TOK 16
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
    uint64_t tiles; /* gpu_op_group_pairs' table for the tiled driver, or 0 */
};
_Static_assert(sizeof(struct matmul_push) <= GPU_PUSH_MAX, "push constants");

struct group_push {
    uint64_t ids, groups;
    uint32_t n_pairs, n_expert, tile_tok, max_tiles;
};

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

/* The kernel of k's tiled product (shaders/matmul_tile_SUFFIX.comp for matmul_SUFFIX.comp; its
 * _dot twin where g has the integer dot product), or -1 where the type has none (it keeps the
 * per-token drivers). */
static int tile_kernel(const struct gpu *g, const struct gpu_type_kernels *k) {
    char name[64];
    snprintf(name, sizeof(name), "matmul_tile_%s_dot", k->matmul + sizeof("matmul_") - 1);
    const int kd = gpu_kernel(g, name);
    name[strlen(name) - 4] = '\0';
    return kd >= 0 ? kd : gpu_kernel(g, name);
}

/* True for the types whose tiled kernel beat the per-token drivers from 16 tokens on the H100
 * (bench-gpu --sweep, 4096 x 4096, docs/benchmarks.md): Q4_K 1.12x at 512 tokens (with the
 * integer dot product; 1.05x without), IQ4_XS 1.42x. Q6_K's tiles ran at 0.80x, Q8_0's at 0.37x
 * and MXFP4's at 0.32x (their one-output-per-invocation reads of narrow words from 16 activation
 * rows at once); Q2_K, Q3_K and Q5_K are not measured yet. */
static bool tile_pays(enum qtype t) {
    return t == QTYPE_Q4_K || t == QTYPE_IQ4_XS;
}

int gpu_ops_init(struct gpu_ops *o, struct gpu *g, char *err, size_t err_len) {
    *o = (struct gpu_ops){.g = g};
    int found = 0;
    for (int t = 0; t < QTYPE_COUNT; t++) {
        const struct gpu_type_kernels *k = type_kernels((enum qtype)t);
        o->matmul[t] = k ? gpu_kernel(g, k->matmul) : -1;
        o->quantize[t] = k ? gpu_kernel(g, k->quantize) : -1;
        o->matmul_tile[t] = k ? tile_kernel(g, k) : -1;
        o->tile_taken[t] = o->matmul_tile[t] >= 0 && tile_pays((enum qtype)t);
        found += o->matmul[t] >= 0 && o->quantize[t] >= 0;
    }
    o->group_pairs = gpu_kernel(g, "group_pairs");
    o->tile_min_tok = GPU_TILE_MIN_TOK;
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
    o->row = (struct gpu_rowops){-1, -1, -1, -1, -1, -1, -1, -1, -1};
    for (int t = 0; t < QTYPE_COUNT; t++) {
        o->matmul[t] = o->quantize[t] = o->matmul_tile[t] = -1;
        o->tile_taken[t] = false;
        o->table_addr[t] = 0;
    }
    o->group_pairs = -1;
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
    /* Q8_K's quantizer takes a workgroup a block (quantize_q8_K.comp), the others an invocation */
    const uint32_t nx = k->quantize_elems == 256 ? p.n : groups(p.n, GPU_GROUP);
    gpu_dispatch(o->g, o->quantize[t], &p, sizeof(p), nx, (uint32_t)n_rows, 1);
    return 0;
}

/* Tokens one workgroup of k's product takes: the block drivers' rule (matmul_blocks.glsl's and
 * matmul_split.glsl's tok_group), one for the float driver (its workgroups are two rows of one
 * token). */
static int32_t tok_group(const struct gpu_type_kernels *k, int32_t n_tok) {
    if (k->driver == GPU_DRIVER_FLOAT)
        return 1;
    return n_tok >= 8 ? 8 : n_tok >= 4 ? 4 : n_tok >= 2 ? 2 : 1;
}

/* Rows one workgroup of k's product takes. The split driver's (matmul_split.glsl's split_rows):
 * the fewest, a power of two, whose tok tokens' blocks fill a round of 32 blocks, at most 16
 * outputs; the float driver two, the blocks driver one. */
static int32_t rows_group(const struct gpu_type_kernels *k, int64_t n_in, int32_t tok) {
    if (k->driver != GPU_DRIVER_SPLIT)
        return k->driver == GPU_DRIVER_FLOAT ? 2 : 1;
    const int64_t nb = n_in / 256;
    int32_t r = 1;
    while (r * tok * nb < 32 && r * tok < 16)
        r *= 2;
    return r;
}

/* True unless k's driver reads words that these addresses would misalign: the split driver reads
 * activations 16 bytes at a time, and weights as wide as the type's block size keeps them
 * aligned (its largest power-of-two divisor, at most 16: gpu_ops.h); mat_bytes: the distance
 * between the matrices of gpu_op_matmul_id (0 for one matrix). */
static bool split_aligned(const struct gpu_type_kernels *k, uint64_t w, size_t row_bytes,
                          size_t mat_bytes, uint64_t act, size_t act_stride) {
    if (k->driver != GPU_DRIVER_SPLIT)
        return true;
    uint64_t w_align = 1;
    while (w_align < 16 && qtype_block_bytes(k->type) % (2 * w_align) == 0)
        w_align *= 2;
    return (act | act_stride) % 16 == 0 && (w | row_bytes | mat_bytes) % w_align == 0;
}

/* Records type t's product with push constants p (p->n_tok tokens or pairs): row groups on x,
 * spilling onto z past 65535 (every device takes that many on each), token groups on y. */
static int record_product(struct gpu_ops *o, enum qtype t, const struct matmul_push *p) {
    const struct gpu_type_kernels *k = type_kernels(t);
    if (!split_aligned(k, p->w, p->row_bytes, p->mat_bytes, p->act, p->act_stride))
        return -EINVAL;
    const int32_t n_tok = (int32_t)p->n_tok, tok = tok_group(k, n_tok);
    const uint32_t n_groups = groups(p->n_rows, rows_group(k, p->n_in, tok));
    const uint32_t nx = n_groups < GPU_GROUPS_X ? n_groups : GPU_GROUPS_X;
    gpu_dispatch(o->g, o->matmul[t], p, sizeof(*p), nx, groups(n_tok, tok), groups(n_groups, nx));
    return 0;
}

/* Records type t's tiled product (matmul_tile.glsl) with push constants p over n_tiles tiles of
 * tokens (or of grouped pairs: p->tiles) on y, row tiles on x spilling onto z. */
static int record_tiles(struct gpu_ops *o, enum qtype t, const struct matmul_push *p,
                        uint32_t n_tiles) {
    const struct gpu_type_kernels *k = type_kernels(t);
    if (!split_aligned(k, p->w, p->row_bytes, p->mat_bytes, p->act, p->act_stride))
        return -EINVAL;
    const uint32_t n_groups = groups(p->n_rows, GPU_TILE_ROWS);
    const uint32_t nx = n_groups < GPU_GROUPS_X ? n_groups : GPU_GROUPS_X;
    gpu_dispatch(o->g, o->matmul_tile[t], p, sizeof(*p), nx, n_tiles, groups(n_groups, nx));
    return 0;
}

/* True when type t's product of n_tok tokens (or grouped pairs) runs on the tiled driver: t has
 * one, o takes it (o->tile_taken) and n_tok reaches o->tile_min_tok. */
static bool use_tiles(const struct gpu_ops *o, enum qtype t, int32_t n_tok) {
    return o->matmul_tile[t] >= 0 && o->tile_taken[t] && n_tok >= o->tile_min_tok;
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
    if (use_tiles(o, t, n_tok))
        return record_tiles(o, t, &p, groups(n_tok, GPU_TILE_TOK));
    return record_product(o, t, &p);
}

/* Contract in gpu_ops.h: gpu_op_matmul's kernels, each pair in a token's place (matmul_push.glsl
 * reads the three index arrays). -EINVAL for a size the push constants cannot hold. */
int gpu_op_matmul_id(struct gpu_ops *o, enum qtype t, uint64_t w, size_t mat_bytes,
                     size_t row_bytes, int64_t n_in, int64_t n_rows, uint64_t ids, uint64_t act,
                     size_t act_stride, uint64_t act_idx, uint64_t out, size_t out_stride,
                     uint64_t out_idx, int32_t n_pairs) {
    return gpu_op_matmul_grouped(o, t, w, mat_bytes, row_bytes, n_in, n_rows, ids, act, act_stride,
                                 act_idx, out, out_stride, out_idx, n_pairs, NULL);
}

/* Contract in gpu_ops.h: gpu_op_matmul_id's product, over pg's tiles where t's tiled driver is
 * taken and n_pairs reaches its threshold. */
int gpu_op_matmul_grouped(struct gpu_ops *o, enum qtype t, uint64_t w, size_t mat_bytes,
                          size_t row_bytes, int64_t n_in, int64_t n_rows, uint64_t ids,
                          uint64_t act, size_t act_stride, uint64_t act_idx, uint64_t out,
                          size_t out_stride, uint64_t out_idx, int32_t n_pairs,
                          const struct gpu_pair_groups *pg) {
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
    if (pg && pg->addr && use_tiles(o, t, n_pairs)) {
        p.tiles = pg->addr;
        return record_tiles(o, t, &p, (uint32_t)pg->max_tiles);
    }
    return record_product(o, t, &p);
}

/* Tiles a table for n_pairs pairs over n_expert experts must hold: the sum over experts of
 * ceil(count / GPU_TILE_TOK) is at most (n_pairs + used (GPU_TILE_TOK - 1)) / GPU_TILE_TOK, where
 * at most min(n_expert, n_pairs) experts are used. */
static int64_t group_max_tiles(int32_t n_pairs, int32_t n_expert) {
    const int64_t used = n_expert < n_pairs ? n_expert : n_pairs;
    return ((int64_t)n_pairs + used * (GPU_TILE_TOK - 1)) / GPU_TILE_TOK;
}

size_t gpu_pair_groups_bytes(int32_t n_pairs, int32_t n_expert) {
    if (n_pairs < 0 || n_expert < 0)
        return 0;
    return 16 + 8 * (size_t)group_max_tiles(n_pairs, n_expert) + 4 * (size_t)n_pairs;
}

int gpu_op_group_pairs(struct gpu_ops *o, uint64_t ids, int32_t n_expert, int32_t n_pairs,
                       uint64_t table, struct gpu_pair_groups *out) {
    if (o->group_pairs < 0)
        return -ENOTSUP;
    if (n_expert < 1 || n_expert > GPU_GROUP_MAX_EXPERTS || n_pairs < 1 || table % 8 != 0)
        return -EINVAL;
    *out = (struct gpu_pair_groups){0};
    if (n_pairs < o->tile_min_tok) /* the products take the per-pair drivers: nothing to group */
        return 0;
    const int64_t max_tiles = group_max_tiles(n_pairs, n_expert);
    struct group_push p = {.ids = ids, .groups = table, .n_pairs = (uint32_t)n_pairs,
                           .n_expert = (uint32_t)n_expert, .tile_tok = GPU_TILE_TOK,
                           .max_tiles = (uint32_t)max_tiles};
    gpu_dispatch(o->g, o->group_pairs, &p, sizeof(p), 1, 1, 1);
    *out = (struct gpu_pair_groups){.addr = table, .max_tiles = (int32_t)max_tiles};
    return 0;
}
