/* quant_iq.c - the scalar spec of the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S): one decoder per type turns a block into integer codes and multipliers, and the
 * dequantizer and the dot product against Q8_K are written once over that form. Invariants: the
 * dequantized values are gguf-py's bit for bit (every product is exact in float); the dot product
 * follows the four-accumulator contract in quant_iq.h, which the SIMD twins reproduce bit for bit.
 * Reading order: decoders, dequantizer, dot products, quantizers. */
#include "quant_iq.h"

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

/* iq1_m's fp16 d: the top nibbles of its four scale words, lowest word first. */
static fp16_t iq1_m_d(const struct block_iq1_m *b) {
    return (fp16_t)(b->scales[1] >> 4 | (b->scales[3] & 0xf0) | (b->scales[5] >> 4) << 8 |
                    (b->scales[7] & 0xf0) << 8);
}

static void decode_iq1_m(const void *blk, struct quant_iq_decoded *o) {
    const struct block_iq1_m *b = blk;
    o->d = fp16_to_f32(iq1_m_d(b));
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
