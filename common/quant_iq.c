/* quant_iq.c - the scalar spec of the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S): one decoder per type turns a block into integer codes and multipliers, and the
 * dequantizer and the dot product against Q8_K are written once over that form. Invariants: the
 * dequantized values are gguf-py's bit for bit (every product is exact in float); the dot product
 * follows the four-accumulator contract in quant_iq.h, which the SIMD twins reproduce bit for bit.
 * Reading order: decoders, dequantizer, dot products, quantizers. */
#include "quant_iq.h"
#include "rng.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct block_iq2_xxs) == 66, "block_iq2_xxs layout");
_Static_assert(sizeof(struct block_iq2_xs) == 74, "block_iq2_xs layout");
_Static_assert(sizeof(struct block_iq2_s) == 82, "block_iq2_s layout");
_Static_assert(sizeof(struct block_iq3_xxs) == 98, "block_iq3_xxs layout");
_Static_assert(sizeof(struct block_iq3_s) == 110, "block_iq3_s layout");
_Static_assert(sizeof(struct block_iq1_s) == 50, "block_iq1_s layout");
_Static_assert(sizeof(struct block_iq1_m) == 56, "block_iq1_m layout");

/* ==== decoders ================================================================================ */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

/* Byte j of a grid entry. */
static int grid_byte(uint64_t entry, int j) {
    return (int)((entry >> (8 * j)) & 0xff);
}

/* n values of a grid entry into q, negated where bit (first + j) of sign_bits is set. */
static void put_signed(int8_t *q, uint64_t entry, int n, unsigned sign_bits, int first) {
    for (int j = 0; j < n; j++) {
        int v = grid_byte(entry, j);
        q[j] = (int8_t)((sign_bits >> (first + j)) & 1 ? -v : v);
    }
}

static void decode_iq2_xxs(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq2_xxs *b = blk;
    const uint8_t *qs = (const uint8_t *)b->qs;
    o->d = fp16_to_f32(b->d);
    o->unit = 0.125f;
    for (int ib = 0; ib < 8; ib++, qs += 8) {
        uint32_t idx = le32(qs), aux = le32(qs + 4);
        o->m[2 * ib] = o->m[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; l++)
            put_signed(o->q + 32 * ib + 8 * l, quant_iq_grid2xxs[(idx >> (8 * l)) & 0xff], 8,
                       quant_iq_ksigns[(aux >> (7 * l)) & 127], 0);
    }
}

static void decode_iq2_xs(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq2_xs *b = blk;
    const uint8_t *qs = (const uint8_t *)b->qs;
    o->d = fp16_to_f32(b->d);
    o->unit = 0.125f;
    for (int ib = 0; ib < 8; ib++) {
        o->m[2 * ib] = (int16_t)(2 * (b->scales[ib] & 15) + 1);
        o->m[2 * ib + 1] = (int16_t)(2 * (b->scales[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            uint16_t v = le16(qs + 2 * (4 * ib + l));
            put_signed(o->q + 32 * ib + 8 * l, quant_iq_grid2xs[v & 511], 8,
                       quant_iq_ksigns[v >> 9], 0);
        }
    }
}

static void decode_iq2_s(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq2_s *b = blk;
    o->d = fp16_to_f32(b->d);
    o->unit = 0.125f;
    for (int ib = 0; ib < 8; ib++) {
        o->m[2 * ib] = (int16_t)(2 * (b->scales[ib] & 15) + 1);
        o->m[2 * ib + 1] = (int16_t)(2 * (b->scales[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            int idx = b->qs[4 * ib + l] | ((b->qh[ib] >> (2 * l)) & 3) << 8;
            put_signed(o->q + 32 * ib + 8 * l, quant_iq_grid2s[idx], 8,
                       b->qs[QK_K / 8 + 4 * ib + l], 0);
        }
    }
}

static void decode_iq3_xxs(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq3_xxs *b = blk;
    o->d = fp16_to_f32(b->d);
    o->unit = 0.25f;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux = le32(b->qs + QK_K / 4 + 4 * ib);
        o->m[2 * ib] = o->m[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; l++) {
            unsigned signs = quant_iq_ksigns[(aux >> (7 * l)) & 127];
            for (int h = 0; h < 2; h++)
                put_signed(o->q + 32 * ib + 8 * l + 4 * h,
                           quant_iq_grid3xxs[b->qs[8 * ib + 2 * l + h]], 4, signs, 4 * h);
        }
    }
}

static void decode_iq3_s(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq3_s *b = blk;
    o->d = fp16_to_f32(b->d);
    o->unit = 1.0f;
    for (int ib = 0; ib < 8; ib++) {
        int s = (b->scales[ib / 2] >> (4 * (ib % 2))) & 15;
        o->m[2 * ib] = o->m[2 * ib + 1] = (int16_t)(2 * s + 1);
        for (int k = 0; k < 8; k++) {
            int idx = b->qs[8 * ib + k] | ((b->qh[ib] >> k) & 1) << 8;
            put_signed(o->q + 32 * ib + 4 * k, quant_iq_grid3s[idx], 4,
                       b->signs[4 * ib + k / 2], 4 * (k % 2));
        }
    }
}

/* 8 values of an iq1 grid entry (-1, 0, 1) plus the delta +-1/8, in eighths: 8 * g +- 1. */
static void put_iq1(int8_t *q, int idx, bool neg_delta) {
    for (int j = 0; j < 8; j++)
        q[j] = (int8_t)(8 * (int8_t)grid_byte(quant_iq_grid1s[idx], j) + (neg_delta ? -1 : 1));
}

static void decode_iq1_s(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq1_s *b = blk;
    const uint8_t *qh = (const uint8_t *)b->qh;
    o->d = fp16_to_f32(b->d);
    o->unit = 0.125f;
    for (int ib = 0; ib < 8; ib++) {
        unsigned h = le16(qh + 2 * ib);
        o->m[2 * ib] = o->m[2 * ib + 1] = (int16_t)(2 * ((h >> 12) & 7) + 1);
        for (int l = 0; l < 4; l++)
            put_iq1(o->q + 32 * ib + 8 * l, b->qs[4 * ib + l] | ((h >> (3 * l)) & 7) << 8,
                    h & 0x8000);
    }
}

static void decode_iq1_m(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq1_m *b = blk;
    o->d = fp16_to_f32(quant_iq1_m_d(b));
    o->unit = 0.125f;
    for (int ib = 0; ib < 8; ib++) {
        unsigned sc = le16(b->scales + 2 * (ib / 2)) >> (6 * (ib % 2));
        o->m[2 * ib] = (int16_t)(2 * (sc & 7) + 1);
        o->m[2 * ib + 1] = (int16_t)(2 * ((sc >> 3) & 7) + 1);
        for (int l = 0; l < 4; l++) {
            unsigned h = b->qh[2 * ib + l / 2] >> (4 * (l % 2));
            put_iq1(o->q + 32 * ib + 8 * l, b->qs[4 * ib + l] | (h & 7) << 8, h & 8);
        }
    }
}

typedef void (*decode_fn)(const void *blk, struct quant_iq_decoded *o);

static decode_fn decoder_for(enum qtype t) {
    switch (t) {
    case QTYPE_IQ2_XXS: return decode_iq2_xxs;
    case QTYPE_IQ2_XS: return decode_iq2_xs;
    case QTYPE_IQ2_S: return decode_iq2_s;
    case QTYPE_IQ3_XXS: return decode_iq3_xxs;
    case QTYPE_IQ3_S: return decode_iq3_s;
    case QTYPE_IQ1_S: return decode_iq1_s;
    case QTYPE_IQ1_M: return decode_iq1_m;
    default: return NULL;
    }
}

/* Contract in quant_iq.h. */
bool quant_iq_is_grid(enum qtype t) {
    return decoder_for(t) != NULL;
}

/* Contract in quant_iq.h. */
int quant_iq_decode(enum qtype t, const void *block, struct quant_iq_decoded *out) {
    decode_fn fn = decoder_for(t);
    if (!fn)
        return -EINVAL;
    fn(block, out);
    return 0;
}

/* ==== dequantizer ============================================================================= */

/* Contract in quant_iq.h. d * (m * q) is exact in float (at most 11 + 10 significant bits) and the
 * unit is a power of two, so every value is exactly the format's. */
int quant_iq_dequantize_row(enum qtype t, const void *src, float *dst, int64_t n) {
    decode_fn fn = decoder_for(t);
    if (!fn || n < 0 || n % QK_K != 0)
        return -EINVAL;
    const uint8_t *p = src;
    uint32_t bb = qtype_block_bytes(t);
    struct quant_iq_decoded o;
    for (int64_t i = 0; i < n / QK_K; i++, p += bb, dst += QK_K) {
        fn(p, &o);
        for (int j = 0; j < QK_K; j++)
            dst[j] = o.d * (float)(o.m[j / 16] * o.q[j]) * o.unit;
    }
    return 0;
}

/* ==== dot products against Q8_K =============================================================== */

/* The contract of quant_iq.h, over any decoder. */
static void iq_vec_dot(decode_fn decode, uint32_t block_bytes, int64_t n, float *restrict s,
                       const void *restrict w, const void *restrict a) {
    const uint8_t *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    struct quant_iq_decoded o;
    for (int64_t i = 0; i < n / QK_K; i++, x += block_bytes) {
        decode(x, &o);
        int32_t isum = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            int32_t dot = 0;
            for (int j = 0; j < 16; j++)
                dot += o.q[16 * g + j] * y[i].qs[16 * g + j];
            isum += o.m[g] * dot;
        }
        float d = o.d * y[i].d * o.unit;
        acc[i % 4] = fmaf(d, (float)isum, acc[i % 4]);
    }
    *s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* quant_<name>_vec_dot_ref and its four-at-a-time forms (four calls: bit-identical by
 * construction). */
#define IQ_REF_KERNELS(name, block)                                                               \
    void quant_##name##_vec_dot_ref(int64_t n, float *restrict s, const void *restrict w,         \
                                    const void *restrict a) {                                     \
        iq_vec_dot(decode_##name, sizeof(struct block), n, s, w, a);                              \
    }                                                                                             \
    void quant_##name##_vec_dot_ref_x4(int64_t n, float *restrict s, const void *restrict w,      \
                                       const void *const a[4]) {                                  \
        for (int j = 0; j < 4; j++)                                                               \
            quant_##name##_vec_dot_ref(n, &s[j], w, a[j]);                                        \
    }                                                                                             \
    void quant_##name##_vec_dot_ref_r4(int64_t n, float *restrict s, const void *restrict w,      \
                                       size_t row_bytes, const void *restrict a) {                \
        for (int r = 0; r < 4; r++)                                                               \
            quant_##name##_vec_dot_ref(n, &s[r], (const uint8_t *)w + (size_t)r * row_bytes, a);  \
    }

/* Contracts in quant_iq.h. */
IQ_REF_KERNELS(iq2_xxs, block_iq2_xxs)
IQ_REF_KERNELS(iq2_xs, block_iq2_xs)
IQ_REF_KERNELS(iq2_s, block_iq2_s)
IQ_REF_KERNELS(iq3_xxs, block_iq3_xxs)
IQ_REF_KERNELS(iq3_s, block_iq3_s)
IQ_REF_KERNELS(iq1_s, block_iq1_s)
IQ_REF_KERNELS(iq1_m, block_iq1_m)

/* ==== the iq1 grid for the SIMD twins ========================================================= */

static uint64_t iq1_w[4096];
static pthread_once_t iq1_w_once = PTHREAD_ONCE_INIT;

static void iq1_w_init(void) {
    for (int e = 0; e < 4096; e++) {
        uint64_t v = 0;
        for (int j = 0; j < 8; j++) {
            int g = (int8_t)grid_byte(quant_iq_grid1s[e & 2047], j);
            v |= (uint64_t)(8 * (g + 1) + (e & 2048 ? 0 : 2)) << (8 * j);
        }
        iq1_w[e] = v;
    }
}

/* Contract in quant_iq.h. */
const uint64_t *quant_iq1_w_table(void) {
    pthread_once(&iq1_w_once, iq1_w_init);
    return iq1_w;
}

/* ==== weight quantizers ======================================================================= */
/* Per block: one scale per sub-block (16 or 32 values) maps its largest magnitude onto the grid's
 * largest level; the fp16 d makes the largest of those the largest odd multiplier; each group of
 * 8 (4) values then takes the grid entry nearest (least squares, searched exhaustively) to its
 * magnitudes, with the signs of the values. Where the format codes 8 signs with 7 bits (an even
 * count of negatives), the value whose flip costs least is flipped. iq1 has no sign bits: its
 * entries hold signed values and a +-1/8 delta per 32 (iq1_s) or 8 (iq1_m) values, both chosen
 * by least squares. The result is what the dequantizer reads back, not llama-quantize's search. */

/* How a type codes a block, for the quantizer. */
struct iq_qdesc {
    const void *grid;   /* codebook: n_entries entries of width values */
    int n_entries, width;
    int qmax;           /* largest level, in code units (iq1: 8 + 1) */
    float unit;         /* value = d * unit * m * q */
    int sub;            /* values per multiplier: 16 or 32 */
    int s_max;          /* largest s (m = 2s + 1): 15, or 7 for iq1 */
    bool parity;        /* 8 signs coded in 7 bits */
    int delta_span;     /* iq1: values per delta (32 or 8); 0 otherwise */
};

/* What a block holds, before packing. */
struct iq_choice {
    float d;            /* fp16-rounded d, as a float */
    fp16_t d16;
    int s[16];          /* per sub-block */
    int idx[64];        /* per group of width values */
    uint8_t signs[32];  /* per 8 values: bit j negates value 8k + j */
    bool neg_delta[32]; /* iq1: per delta_span values, by group of 8 */
};

static uint64_t grid_entry(const struct iq_qdesc *qd, int e) {
    return qd->width == 8 ? ((const uint64_t *)qd->grid)[e] : ((const uint32_t *)qd->grid)[e];
}

/* Every grid has few levels (iq2: 8, 25, 43; iq1: -1, 0, 1; iq3_xxs: 4, 12, .., 62; iq3_s: 1, 3,
 * .., 15): each entry's first and second half (4 values of 8, 2 of 4) is stored as a base-L number
 * of its values' level indices, so that a group's error against an entry is two lookups in
 * tables of the L^half combinations (81 or 64), filled per group. */
struct grid_codes {
    const void *grid;
    int n_entries, width, n_levels;
    int level[8];       /* the grid's values, ascending */
    uint8_t (*code)[2]; /* [n_entries]: the halves' level numbers */
};
static uint8_t code2xxs[256][2], code2xs[512][2], code2s[1024][2], code1s[2048][2];
static uint8_t code3xxs[256][2], code3s[512][2];
static struct grid_codes grid_codes[] = {
    {quant_iq_grid2xxs, 256, 8, 3, {8, 25, 43}, code2xxs},
    {quant_iq_grid2xs, 512, 8, 3, {8, 25, 43}, code2xs},
    {quant_iq_grid2s, 1024, 8, 3, {8, 25, 43}, code2s},
    {quant_iq_grid1s, 2048, 8, 3, {-1, 0, 1}, code1s},
    {quant_iq_grid3xxs, 256, 4, 8, {4, 12, 20, 28, 36, 44, 52, 62}, code3xxs},
    {quant_iq_grid3s, 512, 4, 8, {1, 3, 5, 7, 9, 11, 13, 15}, code3s},
};
static pthread_once_t grid_codes_once = PTHREAD_ONCE_INIT;

static void grid_codes_init(void) {
    for (size_t g = 0; g < sizeof(grid_codes) / sizeof(grid_codes[0]); g++) {
        struct grid_codes *gc = &grid_codes[g];
        const struct iq_qdesc qd = {.grid = gc->grid, .width = gc->width};
        for (int e = 0; e < gc->n_entries; e++) {
            for (int h = 0; h < 2; h++) {
                int k = 0;
                for (int j = gc->width / 2 - 1; j >= 0; j--) {
                    int v = grid_byte(grid_entry(&qd, e), gc->width / 2 * h + j), l = 0;
                    v = gc->level[0] < 0 ? (int8_t)v : v;
                    while (l < gc->n_levels - 1 && gc->level[l] != v)
                        l++;
                    k = gc->n_levels * k + l;
                }
                gc->code[e][h] = (uint8_t)k;
            }
        }
    }
}

static const struct grid_codes *grid_codes_of(const void *grid) {
    pthread_once(&grid_codes_once, grid_codes_init);
    for (size_t g = 0; g < sizeof(grid_codes) / sizeof(grid_codes[0]); g++)
        if (grid_codes[g].grid == grid)
            return &grid_codes[g];
    return NULL;
}

/* The entry nearest to target a[0..width) in squared error; *err gets that error. For iq1 the
 * entry's values are signed grid values g and the code is 8g + delta. */
static int nearest_entry(const struct iq_qdesc *qd, const float *a, int delta, float *err) {
    const struct grid_codes *gc = grid_codes_of(qd->grid);
    const int half = gc->width / 2, nl = gc->n_levels;
    float c[8][8], t[2][81]; /* c[j][l]: the error of value j at level l */
    for (int j = 0; j < gc->width; j++) {
        for (int l = 0; l < nl; l++) {
            float d = a[j] - (qd->delta_span ? (float)(8 * gc->level[l] + delta)
                                             : (float)gc->level[l]);
            c[j][l] = d * d;
        }
    }
    for (int h = 0; h < 2; h++) { /* combination k = l0 + nl l1 (+ nl^2 l2 + nl^3 l3) */
        const float(*ch)[8] = c + half * h;
        if (half == 2) {
            for (int l1 = 0; l1 < nl; l1++)
                for (int l0 = 0; l0 < nl; l0++)
                    t[h][l0 + nl * l1] = ch[0][l0] + ch[1][l1];
        } else {
            for (int k = 0, l3 = 0; l3 < 3; l3++)
                for (int l2 = 0; l2 < 3; l2++)
                    for (int l1 = 0; l1 < 3; l1++)
                        for (int l0 = 0; l0 < 3; l0++)
                            t[h][k++] = ch[0][l0] + ch[1][l1] + ch[2][l2] + ch[3][l3];
        }
    }
    int best = 0;
    float best_err = INFINITY;
    for (int e = 0; e < gc->n_entries; e++) {
        float sum = t[0][gc->code[e][0]] + t[1][gc->code[e][1]];
        if (sum < best_err) {
            best_err = sum;
            best = e;
        }
    }
    *err = best_err;
    return best;
}

/* Sign-coded types: group k of width values at t (targets in code units); 8-value sign masks go
 * to c->signs, with the parity fix applied per 8 values once both halves (iq3) are chosen. */
static void choose_signed(const struct iq_qdesc *qd, const float *t, int first_group,
                          struct iq_choice *c) {
    float a[8];
    for (int k = 0; k < 8 / qd->width; k++) {
        int gi = first_group + k;
        for (int j = 0; j < qd->width; j++)
            a[j] = fabsf(t[qd->width * k + j]);
        float err;
        c->idx[gi] = nearest_entry(qd, a, 0, &err);
    }
    int g8 = first_group * qd->width / 8;
    unsigned mask = 0;
    for (int j = 0; j < 8; j++)
        mask |= (unsigned)(t[j] < 0) << j;
    if (qd->parity && __builtin_popcount(mask) % 2) {
        /* flip the value whose flip costs least: 4 |t_j| g_j */
        int flip = 0;
        float best = INFINITY;
        for (int j = 0; j < 8; j++) {
            int gv = grid_byte(grid_entry(qd, c->idx[first_group + j / qd->width]), j % qd->width);
            float cost = fabsf(t[j]) * (float)gv;
            if (cost < best) {
                best = cost;
                flip = j;
            }
        }
        mask ^= 1u << flip;
    }
    c->signs[g8] = (uint8_t)mask;
}

/* iq1: the groups of one delta span at t, both deltas tried; returns the error of the best. */
static float choose_iq1(const struct iq_qdesc *qd, const float *t, int first_group, int n_groups,
                        struct iq_choice *c) {
    float best_err = INFINITY;
    int best_idx[4] = {0, 0, 0, 0};
    bool best_neg = false;
    for (int neg = 0; neg < 2; neg++) {
        float total = 0.0f;
        int idx[4];
        for (int k = 0; k < n_groups; k++) {
            float err;
            idx[k] = nearest_entry(qd, t + 8 * k, neg ? -1 : 1, &err);
            total += err;
        }
        if (total < best_err) {
            best_err = total;
            best_neg = neg;
            memcpy(best_idx, idx, sizeof(idx));
        }
    }
    for (int k = 0; k < n_groups; k++) {
        c->idx[first_group + k] = best_idx[k];
        c->neg_delta[first_group + k] = best_neg;
    }
    return best_err;
}

/* Fills c for the 256 values at x. */
static void iq_choose(const struct iq_qdesc *qd, const float *x, struct iq_choice *c) {
    const int n_sub = QK_K / qd->sub, m_max = 2 * qd->s_max + 1;
    float sub_scale[16], top = 0.0f;
    memset(c, 0, sizeof(*c));
    for (int sb = 0; sb < n_sub; sb++) {
        float amax = 0.0f;
        for (int j = 0; j < qd->sub; j++)
            amax = fmaxf(amax, fabsf(x[qd->sub * sb + j]));
        sub_scale[sb] = amax / (float)qd->qmax; /* value per code unit */
        top = fmaxf(top, sub_scale[sb]);
    }
    c->d16 = f32_to_fp16(top / (float)m_max / qd->unit);
    c->d = fp16_to_f32(c->d16);
    if (c->d == 0.0f)
        return; /* all zero: index 0 everywhere still decodes to 0 with d = 0 */
    float t[32];
    for (int sb = 0; sb < n_sub; sb++) {
        float ratio = sub_scale[sb] / (c->d * qd->unit);
        int s = (int)lrintf((ratio - 1.0f) / 2.0f);
        c->s[sb] = s < 0 ? 0 : s > qd->s_max ? qd->s_max : s;
        float e = c->d * qd->unit * (float)(2 * c->s[sb] + 1), ie = 1.0f / e;
        for (int j = 0; j < qd->sub; j++)
            t[j] = x[qd->sub * sb + j] * ie;
        int groups = qd->sub / qd->width, g0 = qd->sub * sb / qd->width;
        if (qd->delta_span) {
            int span = qd->delta_span / 8;
            for (int k = 0; k < groups; k += span)
                choose_iq1(qd, t + 8 * k, g0 + k, span, c);
        } else {
            for (int k = 0; k < groups; k += 8 / qd->width)
                choose_signed(qd, t + qd->width * k, g0 + k, c);
        }
    }
}

/* ---- packing --------------------------------------------------------------------------------- */

static void put_le16(uint8_t *p, unsigned v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

static void pack_iq2_xxs(const struct iq_choice *c, void *blk) {
    struct block_iq2_xxs *b = blk;
    uint8_t *qs = (uint8_t *)b->qs;
    b->d = c->d16;
    for (int ib = 0; ib < 8; ib++, qs += 8) {
        uint32_t aux = (uint32_t)c->s[ib] << 28;
        for (int l = 0; l < 4; l++) {
            qs[l] = (uint8_t)c->idx[4 * ib + l];
            aux |= (uint32_t)(c->signs[4 * ib + l] & 127) << (7 * l);
        }
        put_le32(qs + 4, aux);
    }
}

static void pack_iq2_xs(const struct iq_choice *c, void *blk) {
    struct block_iq2_xs *b = blk;
    b->d = c->d16;
    for (int g = 0; g < 32; g++)
        put_le16((uint8_t *)b->qs + 2 * g, (unsigned)c->idx[g] | (c->signs[g] & 127u) << 9);
    for (int ib = 0; ib < 8; ib++)
        b->scales[ib] = (uint8_t)(c->s[2 * ib] | c->s[2 * ib + 1] << 4);
}

static void pack_iq2_s(const struct iq_choice *c, void *blk) {
    struct block_iq2_s *b = blk;
    b->d = c->d16;
    memset(b->qh, 0, sizeof(b->qh));
    for (int g = 0; g < 32; g++) {
        b->qs[g] = (uint8_t)c->idx[g];
        b->qs[QK_K / 8 + g] = c->signs[g];
        b->qh[g / 4] |= (uint8_t)((c->idx[g] >> 8) << (2 * (g % 4)));
    }
    for (int ib = 0; ib < 8; ib++)
        b->scales[ib] = (uint8_t)(c->s[2 * ib] | c->s[2 * ib + 1] << 4);
}

static void pack_iq3_xxs(const struct iq_choice *c, void *blk) {
    struct block_iq3_xxs *b = blk;
    b->d = c->d16;
    for (int g = 0; g < 64; g++)
        b->qs[g] = (uint8_t)c->idx[g];
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux = (uint32_t)c->s[ib] << 28;
        for (int l = 0; l < 4; l++)
            aux |= (uint32_t)(c->signs[4 * ib + l] & 127) << (7 * l);
        put_le32(b->qs + QK_K / 4 + 4 * ib, aux);
    }
}

static void pack_iq3_s(const struct iq_choice *c, void *blk) {
    struct block_iq3_s *b = blk;
    b->d = c->d16;
    memset(b->qh, 0, sizeof(b->qh));
    for (int g = 0; g < 64; g++) {
        b->qs[g] = (uint8_t)c->idx[g];
        b->qh[g / 8] |= (uint8_t)((c->idx[g] >> 8) << (g % 8));
    }
    memcpy(b->signs, c->signs, sizeof(b->signs));
    for (int k = 0; k < 4; k++)
        b->scales[k] = (uint8_t)(c->s[2 * k] | c->s[2 * k + 1] << 4);
}

static void pack_iq1_s(const struct iq_choice *c, void *blk) {
    struct block_iq1_s *b = blk;
    b->d = c->d16;
    for (int ib = 0; ib < 8; ib++) {
        unsigned h = (unsigned)c->s[ib] << 12 | (c->neg_delta[4 * ib] ? 0x8000u : 0);
        for (int l = 0; l < 4; l++) {
            b->qs[4 * ib + l] = (uint8_t)c->idx[4 * ib + l];
            h |= (unsigned)(c->idx[4 * ib + l] >> 8) << (3 * l);
        }
        put_le16((uint8_t *)b->qh + 2 * ib, h);
    }
}

static void pack_iq1_m(const struct iq_choice *c, void *blk) {
    struct block_iq1_m *b = blk;
    uint16_t sc[4] = {0, 0, 0, 0};
    memset(b->qh, 0, sizeof(b->qh));
    for (int g = 0; g < 32; g++) {
        b->qs[g] = (uint8_t)c->idx[g];
        unsigned nib = (unsigned)(c->idx[g] >> 8) | (c->neg_delta[g] ? 8u : 0);
        b->qh[g / 2] |= (uint8_t)(nib << (4 * (g % 2)));
    }
    for (int k = 0; k < 16; k++) /* sub-block k: word k / 4, bits 3 (k % 4) */
        sc[k / 4] |= (uint16_t)(c->s[k] << (3 * (k % 4)));
    for (int k = 0; k < 4; k++) {
        sc[k] |= (uint16_t)(((c->d16 >> (4 * k)) & 15) << 12);
        put_le16(b->scales + 2 * k, sc[k]);
    }
}

typedef void (*pack_fn)(const struct iq_choice *c, void *blk);

static const struct iq_type {
    enum qtype t;
    struct iq_qdesc qd;
    pack_fn pack;
} iq_types[] = {
        {QTYPE_IQ2_XXS, {quant_iq_grid2xxs, 256, 8, 43, 0.125f, 32, 15, true, 0}, pack_iq2_xxs},
        {QTYPE_IQ2_XS, {quant_iq_grid2xs, 512, 8, 43, 0.125f, 16, 15, true, 0}, pack_iq2_xs},
        {QTYPE_IQ2_S, {quant_iq_grid2s, 1024, 8, 43, 0.125f, 16, 15, false, 0}, pack_iq2_s},
        {QTYPE_IQ3_XXS, {quant_iq_grid3xxs, 256, 4, 62, 0.25f, 32, 15, true, 0}, pack_iq3_xxs},
        {QTYPE_IQ3_S, {quant_iq_grid3s, 512, 4, 15, 1.0f, 32, 15, false, 0}, pack_iq3_s},
        {QTYPE_IQ1_S, {quant_iq_grid1s, 2048, 8, 9, 0.125f, 32, 7, false, 32}, pack_iq1_s},
        {QTYPE_IQ1_M, {quant_iq_grid1s, 2048, 8, 9, 0.125f, 16, 7, false, 8}, pack_iq1_m},
};
#define N_IQ_TYPES (sizeof(iq_types) / sizeof(iq_types[0]))

static const struct iq_type *iq_type_of(enum qtype t) {
    for (size_t k = 0; k < N_IQ_TYPES; k++)
        if (iq_types[k].t == t)
            return &iq_types[k];
    return NULL;
}

/* Contract in quant_iq.h. */
int quant_iq_quantize_row(enum qtype t, const float *src, void *dst, int64_t n) {
    const struct iq_type *ty = iq_type_of(t);
    if (!ty || n < 0 || n % QK_K != 0)
        return -EINVAL;
    uint8_t *out = dst;
    uint32_t bb = qtype_block_bytes(t);
    struct iq_choice c;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K, out += bb) {
        iq_choose(&ty->qd, src, &c);
        memset(out, 0, bb);
        ty->pack(&c, out);
    }
    return 0;
}

/* ==== random blocks (sniper-mkmodel) ========================================================== */

/* RMS of a type's signed codes over uniform entries and signs (iq1: 8g +- 1). */
static float code_rms[N_IQ_TYPES];
static pthread_once_t code_rms_once = PTHREAD_ONCE_INIT;

static void code_rms_init(void) {
    for (size_t k = 0; k < N_IQ_TYPES; k++) {
        const struct iq_qdesc *qd = &iq_types[k].qd;
        double sum = 0.0;
        for (int e = 0; e < qd->n_entries; e++) {
            for (int j = 0; j < qd->width; j++) {
                int g = grid_byte(grid_entry(qd, e), j);
                g = qd->delta_span ? 8 * (int8_t)g : g;
                sum += (double)g * g;
            }
        }
        code_rms[k] = (float)sqrt(sum / (qd->n_entries * qd->width) + (qd->delta_span ? 1 : 0));
    }
}

/* Contract in quant_iq.h. Multipliers are drawn from the upper half of their range (s in
 * s_max/2+1 .. s_max), as trained weights mostly use it; the block's d is scaled by a jitter in
 * [0.85, 1.15) so that blocks differ. */
int quant_iq_random_block(enum qtype t, struct rng *r, float std, void *dst) {
    const struct iq_type *ty = iq_type_of(t);
    if (!ty)
        return -EINVAL;
    pthread_once(&code_rms_once, code_rms_init);
    const struct iq_qdesc *qd = &ty->qd;
    struct iq_choice c;
    memset(&c, 0, sizeof(c));
    double m2 = 0.0;
    int lo = qd->s_max / 2 + 1;
    for (int k = 0; k < QK_K / qd->sub; k++) {
        c.s[k] = lo + (int)(rng_next(r) % (uint64_t)(qd->s_max - lo + 1));
        m2 += (double)(2 * c.s[k] + 1) * (2 * c.s[k] + 1);
    }
    float m_rms = (float)sqrt(m2 / (QK_K / qd->sub));
    float jitter = 0.85f + 0.3f * (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
    c.d16 = f32_to_fp16(std / (qd->unit * code_rms[ty - iq_types] * m_rms) * jitter);
    for (int g = 0; g < QK_K / qd->width; g++)
        c.idx[g] = (int)(rng_next(r) % (uint64_t)qd->n_entries);
    for (int k = 0; k < QK_K / 8; k++) {
        uint64_t v = rng_next(r);
        c.signs[k] = (uint8_t)v;
        c.neg_delta[k] = (v >> 8) & 1;
    }
    if (qd->delta_span == 32) /* iq1_s: one delta per 32 values */
        for (int k = 0; k < QK_K / 8; k++)
            c.neg_delta[k] = c.neg_delta[k - k % 4];
    memset(dst, 0, qtype_block_bytes(t));
    ty->pack(&c, dst);
    return 0;
}
