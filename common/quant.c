/* quant.c - the scalar reference of every block format (the spec the SIMD twins must match), the
 * activation quantizers (bit-identical to ggml's x86 CPU decode path), and the one dispatch point.
 * Invariants: block layouts are ggml's, byte for byte; vec_dot accumulates in integers inside a
 * block, applies one float scale per block and sums blocks in double; from_float is the same
 * function in every ISA variant, so activations never depend on the CPU. */
#include "quant.h"
#include "quant_impl.h"
#include "quant_iq.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(struct block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(struct block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(struct block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(struct block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(struct block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(struct block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(struct block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(struct block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(struct block_q8_K) == 292, "block_q8_K layout");

/* ==== scalar conversions ====================================================================== */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Exact: every half is a float. NaN payloads keep their bits and get the quiet bit, as F16C. */
float fp16_to_f32(fp16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f; /* zero or subnormal: mant units of 2^-24, exact */
        return f32_from_bits(f32_bits(v) | sign);
    }
    if (exp == 31)
        return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Round to nearest even, overflow to inf, subnormal halves kept, NaN quieted with its top payload
 * bits: what _cvtss_sh(x, 0) returns. */
fp16_t f32_to_fp16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000)
        return (fp16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a >= 0x477ff000) /* 65520 and up round to inf (65504's mantissa is odd: the tie goes up) */
        return (fp16_t)(sign | 0x7c00);
    if (a >= 0x38800000) /* a normal half: rebias the exponent, round the 13 dropped bits */
        return (fp16_t)(sign | ((a - 0x38000000 + 0xfff + ((a >> 13) & 1)) >> 13));
    uint32_t e = a >> 23;
    if (e < 102) /* below 2^-25: rounds to zero (2^-25 itself is a tie that goes to even 0) */
        return (fp16_t)sign;
    uint32_t m = (a & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e; /* value = m * 2^(e-150); in units of 2^-24 that is m >> (126-e) */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++; /* q may reach 0x400: the smallest normal, which is the right encoding */
    return (fp16_t)(sign | q);
}

float bf16_to_f32(bf16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest even; NaN keeps its top bits and is forced quiet; subnormals are not flushed
 * (ggml's current generic conversion). */
bf16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (bf16_t)((u >> 16) | 0x40);
    return (bf16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* Round half to even in the current (default: nearest) rounding mode, like roundps/cvtps2dq. */
static int round_even(float x) {
    return (int)rintf(x);
}

static int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* ==== dequantizers ============================================================================ */

static void dequant_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void dequant_f16(const void *src, float *dst, int64_t n) {
    const fp16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = fp16_to_f32(x[i]);
}

static void dequant_bf16(const void *src, float *dst, int64_t n) {
    const bf16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_to_f32(x[i]);
}

/* q4_0: byte j holds element j (low nibble) and element j+16 (high nibble), offset 8. */
static void dequant_q4_0(const void *src, float *dst, int64_t n) {
    const struct block_q4_0 *x = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
        float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            dst[j + QK4_0 / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequant_q4_1(const void *src, float *dst, int64_t n) {
    const struct block_q4_1 *x = src;
    for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
        float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            dst[j + QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* q5: qh (little-endian u32) bit j is the fifth bit of element j, for j in 0..31. */
static uint32_t q5_high_bits(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static void dequant_q5_0(const void *src, float *dst, int64_t n) {
    const struct block_q5_0 *x = src;
    for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
        float d = fp16_to_f32(x[i].d);
        uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)(lo - 16) * d;
            dst[j + QK5_0 / 2] = (float)(hi - 16) * d;
        }
    }
}

static void dequant_q5_1(const void *src, float *dst, int64_t n) {
    const struct block_q5_1 *x = src;
    for (int64_t i = 0; i < n / QK5_1; i++, dst += QK5_1) {
        float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)lo * d + m;
            dst[j + QK5_1 / 2] = (float)hi * d + m;
        }
    }
}

static void dequant_q8_0(const void *src, float *dst, int64_t n) {
    const struct block_q8_0 *x = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
        float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_0; j++)
            dst[j] = (float)x[i].qs[j] * d;
    }
}

static void dequant_q8_1(const void *src, float *dst, int64_t n) {
    const struct block_q8_1 *x = src;
    for (int64_t i = 0; i < n / QK8_1; i++, dst += QK8_1) {
        float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_1; j++)
            dst[j] = (float)x[i].qs[j] * d;
    }
}

/* K-quant 6-bit scale/min of sub-block j (0..7) from scales[12]: bytes 0-3 hold scales 0-3 and
 * bytes 4-7 mins 0-3 in their low 6 bits; bytes 8-11 hold the low nibbles of scale (low half) and
 * min (high half) 4-7, whose top 2 bits sit in bits 6-7 of bytes 0-3 (scales) and 4-7 (mins). */
static void k_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* q4_K: 8 sub-blocks of 32; each 32-byte run of qs holds sub-block 2c (low nibbles) and 2c+1
 * (high nibbles). x = d*sc*q - dmin*m. */
static void dequant_q4_K(const void *src, float *dst, int64_t n) {
    const struct block_q4_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int c = 0; c < 4; c++, q += 32, dst += 64) {
            int sc0, m0, sc1, m1;
            k_scale_min(2 * c, x[i].scales, &sc0, &m0);
            k_scale_min(2 * c + 1, x[i].scales, &sc1, &m1);
            float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
            float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
            for (int l = 0; l < 32; l++) {
                dst[l] = d0 * (float)(q[l] & 0x0f) - dm0;
                dst[l + 32] = d1 * (float)(q[l] >> 4) - dm1;
            }
        }
    }
}

/* q5_K: as q4_K, plus qh[l] bit 2c (sub-block 2c) and bit 2c+1 (sub-block 2c+1) as the fifth bit
 * of element l of that sub-block. */
static void dequant_q5_K(const void *src, float *dst, int64_t n) {
    const struct block_q5_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int c = 0; c < 4; c++, q += 32, dst += 64) {
            int sc0, m0, sc1, m1;
            k_scale_min(2 * c, x[i].scales, &sc0, &m0);
            k_scale_min(2 * c + 1, x[i].scales, &sc1, &m1);
            float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
            float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
            for (int l = 0; l < 32; l++) {
                int lo = (q[l] & 0x0f) | ((x[i].qh[l] >> (2 * c)) & 1) << 4;
                int hi = (q[l] >> 4) | ((x[i].qh[l] >> (2 * c + 1)) & 1) << 4;
                dst[l] = d0 * (float)lo - dm0;
                dst[l + 32] = d1 * (float)hi - dm1;
            }
        }
    }
}

/* q6_K code of element e (0..255) of a block, in 0..63 (subtract 32 for the signed value). Each
 * half h of 128 elements uses ql[64h..64h+63] and qh[32h..32h+31]: for l in 0..31, element
 * 128h + 32k + l takes its low 4 bits from ql[64h + l + 32(k&1)] (low nibble for k<2, high for
 * k>=2) and its top 2 bits from qh[32h + l] bits 2k..2k+1. Scale: scales[e / 16]. */
static int q6_K_code(const struct block_q6_K *b, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    int ql = b->ql[64 * h + l + 32 * (k & 1)];
    int lo = k < 2 ? ql & 0x0f : ql >> 4;
    int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
    return lo | hi << 4;
}

static void dequant_q6_K(const void *src, float *dst, int64_t n) {
    const struct block_q6_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = fp16_to_f32(x[i].d);
        for (int e = 0; e < QK_K; e++)
            dst[e] = d * (float)x[i].scales[e / 16] * (float)(q6_K_code(&x[i], e) - 32);
    }
}

static void dequant_q8_K(const void *src, float *dst, int64_t n) {
    const struct block_q8_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        for (int j = 0; j < QK_K; j++)
            dst[j] = x[i].d * (float)x[i].qs[j];
    }
}

typedef void (*dequant_fn)(const void *src, float *dst, int64_t n);

static dequant_fn dequant_for(enum qtype t) {
    switch (t) {
    case QTYPE_F32: return dequant_f32;
    case QTYPE_F16: return dequant_f16;
    case QTYPE_BF16: return dequant_bf16;
    case QTYPE_Q4_0: return dequant_q4_0;
    case QTYPE_Q4_1: return dequant_q4_1;
    case QTYPE_Q5_0: return dequant_q5_0;
    case QTYPE_Q5_1: return dequant_q5_1;
    case QTYPE_Q8_0: return dequant_q8_0;
    case QTYPE_Q8_1: return dequant_q8_1;
    case QTYPE_Q4_K: return dequant_q4_K;
    case QTYPE_Q5_K: return dequant_q5_K;
    case QTYPE_Q6_K: return dequant_q6_K;
    case QTYPE_Q8_K: return dequant_q8_K;
    default: return NULL;
    }
}

/* Contract in quant.h. */
bool quant_can_dequantize(enum qtype t) {
    return dequant_for(t) != NULL || quant_iq_is_grid(t);
}

/* Contract in quant.h. */
int quant_dequantize_row(enum qtype t, const void *src, float *dst, int64_t n) {
    if (quant_iq_is_grid(t))
        return quant_iq_dequantize_row(t, src, dst, n);
    dequant_fn fn = dequant_for(t);
    if (!fn || n < 0 || n % qtype_block_elems(t) != 0)
        return -EINVAL;
    fn(src, dst, n);
    return 0;
}

/* ==== weight quantizers (simple per-block choices, not llama-quantize's search) =============== */

/* The element of largest magnitude, with its sign (the first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    *mn = x[0];
    *mx = x[0];
    for (int j = 1; j < n; j++) {
        *mn = x[j] < *mn ? x[j] : *mn;
        *mx = x[j] > *mx ? x[j] : *mx;
    }
}

/* 1/d, or 0 when d is 0 (an all-zero block encodes as zero codes). */
static float inv_or_zero(float d) {
    return d != 0.0f ? 1.0f / d : 0.0f;
}

/* Symmetric 4-bit: d = max/-8 so that the largest magnitude lands on code 0 (-8 * d = max). */
static void quantize_q4_0(const float *x, void *dst, int64_t n) {
    struct block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        float d = signed_absmax(x, QK4_0) / -8.0f;
        y[i].d = f32_to_fp16(d);
        float id = inv_or_zero(fp16_to_f32(y[i].d));
        for (int j = 0; j < QK4_0 / 2; j++) {
            int lo = clamp_int(round_even(x[j] * id) + 8, 0, 15);
            int hi = clamp_int(round_even(x[j + QK4_0 / 2] * id) + 8, 0, 15);
            y[i].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

static void quantize_q4_1(const float *x, void *dst, int64_t n) {
    struct block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float mn, mx;
        min_max(x, QK4_1, &mn, &mx);
        y[i].d = f32_to_fp16((mx - mn) / 15.0f);
        y[i].m = f32_to_fp16(mn);
        float id = inv_or_zero(fp16_to_f32(y[i].d)), m = fp16_to_f32(y[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            int lo = clamp_int(round_even((x[j] - m) * id), 0, 15);
            int hi = clamp_int(round_even((x[j + QK4_1 / 2] - m) * id), 0, 15);
            y[i].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* Packs 32 five-bit codes into qs (low nibbles, element j and j+16 share byte j) and qh. */
static void q5_pack(const int code[32], uint8_t qs[16], uint8_t qh[4]) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((code[j] & 0x0f) | (code[j + 16] & 0x0f) << 4);
        h |= (uint32_t)(code[j] >> 4) << j | (uint32_t)(code[j + 16] >> 4) << (j + 16);
    }
    for (int b = 0; b < 4; b++)
        qh[b] = (uint8_t)(h >> (8 * b));
}

static void quantize_q5_0(const float *x, void *dst, int64_t n) {
    struct block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        y[i].d = f32_to_fp16(signed_absmax(x, QK5_0) / -16.0f);
        float id = inv_or_zero(fp16_to_f32(y[i].d));
        int code[QK5_0];
        for (int j = 0; j < QK5_0; j++)
            code[j] = clamp_int(round_even(x[j] * id) + 16, 0, 31);
        q5_pack(code, y[i].qs, y[i].qh);
    }
}

static void quantize_q5_1(const float *x, void *dst, int64_t n) {
    struct block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float mn, mx;
        min_max(x, QK5_1, &mn, &mx);
        y[i].d = f32_to_fp16((mx - mn) / 31.0f);
        y[i].m = f32_to_fp16(mn);
        float id = inv_or_zero(fp16_to_f32(y[i].d)), m = fp16_to_f32(y[i].m);
        int code[QK5_1];
        for (int j = 0; j < QK5_1; j++)
            code[j] = clamp_int(round_even((x[j] - m) * id), 0, 31);
        q5_pack(code, y[i].qs, y[i].qh);
    }
}

static void quantize_q8_0_weights(const float *x, void *dst, int64_t n) {
    struct block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float amax = fabsf(signed_absmax(x, QK8_0));
        y[i].d = f32_to_fp16(amax / 127.0f);
        float id = inv_or_zero(fp16_to_f32(y[i].d));
        for (int j = 0; j < QK8_0; j++)
            y[i].qs[j] = (int8_t)clamp_int(round_even(x[j] * id), -127, 127);
    }
}

/* Writes the 6-bit scale sc and min m of sub-block j into scales[12] (layout: k_scale_min). */
static void k_scale_min_put(int j, int sc, int m, uint8_t *q) {
    if (j < 4) {
        q[j] = (uint8_t)((q[j] & 0xc0) | sc);
        q[j + 4] = (uint8_t)((q[j + 4] & 0xc0) | m);
    } else {
        q[j + 4] = (uint8_t)((sc & 0x0f) | (m & 0x0f) << 4);
        q[j - 4] = (uint8_t)((q[j - 4] & 0x3f) | (sc >> 4) << 6);
        q[j] = (uint8_t)((q[j] & 0x3f) | (m >> 4) << 6);
    }
}

/* Shared by q4_K and q5_K (nmax = 15 or 31): each sub-block of 32 gets an affine grid from
 * min(0, min x) to max x; the 8 scales and 8 mins are then coded as 6-bit multiples of the fp16
 * super-scales d and dmin. Writes codes[256] in 0..nmax. */
static void quantize_k_affine(const float *x, int nmax, fp16_t *d_out, fp16_t *dmin_out,
                              uint8_t scales[K_SCALE_SIZE], int codes[QK_K]) {
    float sub_scale[8], sub_min[8], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 8; s++) {
        float mn, mx;
        min_max(x + 32 * s, 32, &mn, &mx);
        mn = mn < 0.0f ? mn : 0.0f;
        sub_scale[s] = (mx - mn) / (float)nmax;
        sub_min[s] = -mn;
        max_scale = sub_scale[s] > max_scale ? sub_scale[s] : max_scale;
        max_min = sub_min[s] > max_min ? sub_min[s] : max_min;
    }
    *d_out = f32_to_fp16(max_scale / 63.0f);
    *dmin_out = f32_to_fp16(max_min / 63.0f);
    float d = fp16_to_f32(*d_out), dmin = fp16_to_f32(*dmin_out);
    float id = inv_or_zero(d), idmin = inv_or_zero(dmin);
    memset(scales, 0, K_SCALE_SIZE);
    for (int s = 0; s < 8; s++) {
        /* round the scale up so that the largest element stays inside the grid */
        int sc = clamp_int((int)ceilf(sub_scale[s] * id), 0, 63);
        int m = clamp_int(round_even(sub_min[s] * idmin), 0, 63);
        k_scale_min_put(s, sc, m, scales);
        float step = d * (float)sc, off = dmin * (float)m;
        float istep = inv_or_zero(step);
        for (int l = 0; l < 32; l++)
            codes[32 * s + l] = clamp_int(round_even((x[32 * s + l] + off) * istep), 0, nmax);
    }
}

static void quantize_q4_K(const float *x, void *dst, int64_t n) {
    struct block_q4_K *y = dst;
    int codes[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_k_affine(x, 15, &y[i].d, &y[i].dmin, y[i].scales, codes);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * c + l] = (uint8_t)(codes[64 * c + l] | codes[64 * c + 32 + l] << 4);
        }
    }
}

static void quantize_q5_K(const float *x, void *dst, int64_t n) {
    struct block_q5_K *y = dst;
    int codes[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_k_affine(x, 31, &y[i].d, &y[i].dmin, y[i].scales, codes);
        memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int lo = codes[64 * c + l], hi = codes[64 * c + 32 + l];
                y[i].qs[32 * c + l] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
                y[i].qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
            }
        }
    }
}

/* q6_K: 16 sub-blocks of 16, symmetric codes -32..31 around a per-sub-block int8 scale times the
 * fp16 super-scale d. */
static void quantize_q6_K(const float *x, void *dst, int64_t n) {
    struct block_q6_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sub[16], max_sub = 0.0f;
        for (int s = 0; s < 16; s++) {
            sub[s] = fabsf(signed_absmax(x + 16 * s, 16)) / 31.0f;
            max_sub = sub[s] > max_sub ? sub[s] : max_sub;
        }
        y[i].d = f32_to_fp16(max_sub / 127.0f);
        float d = fp16_to_f32(y[i].d), id = inv_or_zero(d);
        memset(y[i].ql, 0, sizeof(y[i].ql));
        memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int s = 0; s < 16; s++) {
            int sc = clamp_int((int)ceilf(sub[s] * id), 0, 127);
            y[i].scales[s] = (int8_t)sc;
            float istep = inv_or_zero(d * (float)sc);
            for (int l = 0; l < 16; l++) {
                int e = 16 * s + l;
                int code = clamp_int(round_even(x[e] * istep), -32, 31) + 32;
                int h = e / 128, k = (e % 128) / 32, ll = e % 32;
                y[i].ql[64 * h + ll + 32 * (k & 1)] |= (uint8_t)((code & 0x0f) << (k < 2 ? 0 : 4));
                y[i].qh[32 * h + ll] |= (uint8_t)((code >> 4) << (2 * k));
            }
        }
    }
}

static void quantize_f32_row(const float *x, void *dst, int64_t n) {
    quant_f32_from_f32(x, dst, n);
}

static void quantize_f16_row(const float *x, void *dst, int64_t n) {
    quant_f16_from_f32(x, dst, n);
}

static void quantize_bf16_row(const float *x, void *dst, int64_t n) {
    quant_bf16_from_f32(x, dst, n);
}

/* Contract in quant.h. */
int quant_quantize_row(enum qtype t, const float *src, void *dst, int64_t n) {
    if (quant_iq_is_grid(t))
        return quant_iq_quantize_row(t, src, dst, n);
    void (*fn)(const float *, void *, int64_t) = NULL;
    switch (t) {
    case QTYPE_F32: fn = quantize_f32_row; break;
    case QTYPE_F16: fn = quantize_f16_row; break;
    case QTYPE_BF16: fn = quantize_bf16_row; break;
    case QTYPE_Q4_0: fn = quantize_q4_0; break;
    case QTYPE_Q4_1: fn = quantize_q4_1; break;
    case QTYPE_Q5_0: fn = quantize_q5_0; break;
    case QTYPE_Q5_1: fn = quantize_q5_1; break;
    case QTYPE_Q8_0: fn = quantize_q8_0_weights; break;
    case QTYPE_Q4_K: fn = quantize_q4_K; break;
    case QTYPE_Q5_K: fn = quantize_q5_K; break;
    case QTYPE_Q6_K: fn = quantize_q6_K; break;
    default: return -EINVAL;
    }
    if (n < 0 || n % qtype_block_elems(t) != 0)
        return -EINVAL;
    fn(src, dst, n);
    return 0;
}

/* ==== activation quantizers (ggml's x86 CPU path, bit for bit) ================================ */

/* Q8_0/Q8_1 as ggml's AVX2 quantize_row_q8_0/_1: amax over the block, d = amax/127 (float division,
 * stored as fp16), codes = round-half-even(x * (127/amax)) with the float multiplier 127/amax (not
 * 1/d), 0 for an all-zero block. Returns the sum of the codes. */
static int q8_block_from_f32(const float *x, float *d, int8_t qs[32]) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    *d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        int v = round_even(x[j] * id);
        sum += v;
        qs[j] = (int8_t)clamp_int(v, -128, 127); /* the packs saturate; |v| <= 127 anyway */
    }
    return sum;
}

/* Contract in quant.h. */
void quant_q8_0_from_f32(const float *restrict x, void *restrict y, int64_t n) {
    struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        float d;
        q8_block_from_f32(x + i * QK8_0, &d, b[i].qs);
        b[i].d = f32_to_fp16(d);
    }
}

/* Contract in quant.h. s = fp16(d * sum(codes)) with the unrounded float d, as ggml. */
void quant_q8_1_from_f32(const float *restrict x, void *restrict y, int64_t n) {
    struct block_q8_1 *b = y;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        float d;
        int sum = q8_block_from_f32(x + i * QK8_1, &d, b[i].qs);
        b[i].d = f32_to_fp16(d);
        b[i].s = f32_to_fp16(d * (float)sum);
    }
}

/* Contract in quant.h. ggml's quantize_row_q8_K_ref: the element of largest magnitude (first on
 * ties) sets iscale = -127/max, codes = min(127, round-half-even(iscale * x)), d = 1/iscale (so
 * d is negative for a positive max), bsums = sums of 16 codes. An all-zero block gets d = 0 and
 * zero codes and bsums (ggml leaves bsums unwritten there; zero is what they would sum to). */
void quant_q8_K_from_f32(const float *restrict x, void *restrict y, int64_t n) {
    struct block_q8_K *b = y;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = signed_absmax(x, QK_K);
        memset(b[i].qs, 0, sizeof(b[i].qs));
        memset(b[i].bsums, 0, sizeof(b[i].bsums));
        b[i].d = 0.0f;
        if (max == 0.0f)
            continue;
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = round_even(iscale * x[j]);
            b[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)sum;
        }
        b[i].d = 1.0f / iscale;
    }
}

/* Contract in quant.h. */
void quant_f16_from_f32(const float *restrict x, void *restrict y, int64_t n) {
    fp16_t *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = f32_to_fp16(x[i]);
}

/* Contract in quant.h. */
void quant_bf16_from_f32(const float *restrict x, void *restrict y, int64_t n) {
    bf16_t *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = f32_to_bf16(x[i]);
}

/* Contract in quant.h. */
void quant_f32_from_f32(const float *restrict x, void *restrict y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

/* ==== reference dot products ================================================================== */
/* Each block: an exact integer dot of the codes, times one float scale (the product of the two fp16
 * or float block scales, rounded to float as ggml does); blocks are summed in double. */

static void vec_dot_f32_ref(int64_t n, float *restrict s, const void *restrict w,
                            const void *restrict a) {
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i] * (double)y[i];
    *s = (float)sum;
}

static void vec_dot_f16_ref(int64_t n, float *restrict s, const void *restrict w,
                            const void *restrict a) {
    const fp16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)fp16_to_f32(x[i]) * (double)fp16_to_f32(y[i]);
    *s = (float)sum;
}

static void vec_dot_bf16_ref(int64_t n, float *restrict s, const void *restrict w,
                             const void *restrict a) {
    const bf16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)bf16_to_f32(x[i]) * (double)bf16_to_f32(y[i]);
    *s = (float)sum;
}

static void vec_dot_q4_0_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            isum += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK4_0 / 2];
        }
        sum += (double)(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) * isum;
    }
    *s = (float)sum;
}

/* x = d*q + m against y = dy*c: sum = d*dy*sum(q*c) + m*(dy*sum(c)) = ... + m*s. */
static void vec_dot_q4_1_q8_1_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q4_1 *x = w;
    const struct block_q8_1 *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int isum = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            isum += (x[i].qs[j] & 0x0f) * y[i].qs[j];
            isum += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
        }
        sum += (double)(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) * isum;
        sum += (double)(fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s));
    }
    *s = (float)sum;
}

static void vec_dot_q5_0_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q5_0 *x = w;
    const struct block_q8_0 *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint32_t qh = q5_high_bits(x[i].qh);
        int isum = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int lo = ((x[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4) - 16;
            int hi = ((x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + QK5_0 / 2];
        }
        sum += (double)(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) * isum;
    }
    *s = (float)sum;
}

static void vec_dot_q5_1_q8_1_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q5_1 *x = w;
    const struct block_q8_1 *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        uint32_t qh = q5_high_bits(x[i].qh);
        int isum = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + QK5_1 / 2];
        }
        sum += (double)(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) * isum;
        sum += (double)(fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s));
    }
    *s = (float)sum;
}

static void vec_dot_q8_0_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q8_0 *x = w;
    const struct block_q8_0 *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int isum = 0;
        for (int j = 0; j < QK8_0; j++)
            isum += x[i].qs[j] * y[i].qs[j];
        sum += (double)(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) * isum;
    }
    *s = (float)sum;
}

/* q4_K/q5_K against q8_K: x = d*sc*q - dmin*m per sub-block of 32, so
 * dot = d*dy*sum_s(sc_s * sum(q*c)) - dmin*dy*sum_s(m_s * sum(c)), sum(c) from two bsums. */
static double k_affine_block_dot(const int q[QK_K], const uint8_t scales[K_SCALE_SIZE], fp16_t d,
                                 fp16_t dmin, const struct block_q8_K *y) {
    int isum = 0, msum = 0;
    for (int sb = 0; sb < 8; sb++) {
        int sc, m, dot = 0;
        k_scale_min(sb, scales, &sc, &m);
        for (int l = 0; l < 32; l++)
            dot += q[32 * sb + l] * y->qs[32 * sb + l];
        isum += sc * dot;
        msum += m * (y->bsums[2 * sb] + y->bsums[2 * sb + 1]);
    }
    return (double)(fp16_to_f32(d) * y->d) * isum - (double)(fp16_to_f32(dmin) * y->d) * msum;
}

static void vec_dot_q4_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q4_K *x = w;
    const struct block_q8_K *y = a;
    double sum = 0.0;
    int q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = x[i].qs[32 * c + l] & 0x0f;
                q[64 * c + 32 + l] = x[i].qs[32 * c + l] >> 4;
            }
        }
        sum += k_affine_block_dot(q, x[i].scales, x[i].d, x[i].dmin, &y[i]);
    }
    *s = (float)sum;
}

static void vec_dot_q5_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q5_K *x = w;
    const struct block_q8_K *y = a;
    double sum = 0.0;
    int q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int b = x[i].qs[32 * c + l], h = x[i].qh[l];
                q[64 * c + l] = (b & 0x0f) | ((h >> (2 * c)) & 1) << 4;
                q[64 * c + 32 + l] = (b >> 4) | ((h >> (2 * c + 1)) & 1) << 4;
            }
        }
        sum += k_affine_block_dot(q, x[i].scales, x[i].d, x[i].dmin, &y[i]);
    }
    *s = (float)sum;
}

static void vec_dot_q6_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q6_K *x = w;
    const struct block_q8_K *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            int dot = 0;
            for (int l = 0; l < 16; l++)
                dot += (q6_K_code(&x[i], 16 * g + l) - 32) * y[i].qs[16 * g + l];
            isum += x[i].scales[g] * dot;
        }
        sum += (double)(fp16_to_f32(x[i].d) * y[i].d) * isum;
    }
    *s = (float)sum;
}

/* ==== four-column reference dot products ====================================================== */
/* The scalar kernels share nothing between columns: vec_dot4 is vec_dot four times, which makes it
 * bit-identical to vec_dot by construction. */

VEC_DOT4_GENERIC(vec_dot_f32_ref)
VEC_DOT4_GENERIC(vec_dot_f16_ref)
VEC_DOT4_GENERIC(vec_dot_bf16_ref)
VEC_DOT4_GENERIC(vec_dot_q4_0_q8_0_ref)
VEC_DOT4_GENERIC(vec_dot_q4_1_q8_1_ref)
VEC_DOT4_GENERIC(vec_dot_q5_0_q8_0_ref)
VEC_DOT4_GENERIC(vec_dot_q5_1_q8_1_ref)
VEC_DOT4_GENERIC(vec_dot_q8_0_q8_0_ref)
VEC_DOT4_GENERIC(vec_dot_q4_K_q8_K_ref)
VEC_DOT4_GENERIC(vec_dot_q5_K_q8_K_ref)
VEC_DOT4_GENERIC(vec_dot_q6_K_q8_K_ref)

VEC_DOT_ROWS4_GENERIC(vec_dot_f32_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_f16_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_bf16_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q4_0_q8_0_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q4_1_q8_1_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_0_q8_0_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_1_q8_1_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q8_0_q8_0_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q4_K_q8_K_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_K_q8_K_ref)
VEC_DOT_ROWS4_GENERIC(vec_dot_q6_K_q8_K_ref)

/* ==== dispatch ================================================================================ */

#define KERNELS_REF(t, vt, from, dot) [t] = {t, vt, from, dot, dot##_x4, dot##_r4, "ref"}

static const struct quant_kernels ref_table[QTYPE_COUNT] = {
    KERNELS_REF(QTYPE_F32, QTYPE_F32, quant_f32_from_f32, vec_dot_f32_ref),
    KERNELS_REF(QTYPE_F16, QTYPE_F16, quant_f16_from_f32, vec_dot_f16_ref),
    KERNELS_REF(QTYPE_BF16, QTYPE_BF16, quant_bf16_from_f32, vec_dot_bf16_ref),
    KERNELS_REF(QTYPE_Q4_0, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_q4_0_q8_0_ref),
    KERNELS_REF(QTYPE_Q4_1, QTYPE_Q8_1, quant_q8_1_from_f32, vec_dot_q4_1_q8_1_ref),
    KERNELS_REF(QTYPE_Q5_0, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_q5_0_q8_0_ref),
    KERNELS_REF(QTYPE_Q5_1, QTYPE_Q8_1, quant_q8_1_from_f32, vec_dot_q5_1_q8_1_ref),
    KERNELS_REF(QTYPE_Q8_0, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_q8_0_q8_0_ref),
    KERNELS_REF(QTYPE_Q4_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q4_K_q8_K_ref),
    KERNELS_REF(QTYPE_Q5_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q5_K_q8_K_ref),
    KERNELS_REF(QTYPE_Q6_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q6_K_q8_K_ref),
    KERNELS_REF(QTYPE_IQ2_XXS, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq2_xxs_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ2_XS, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq2_xs_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ2_S, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq2_s_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ3_XXS, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq3_xxs_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ3_S, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq3_s_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ1_S, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq1_s_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ1_M, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq1_m_vec_dot_ref),
};

enum quant_isa { QUANT_ISA_REF, QUANT_ISA_AVX2, QUANT_ISA_AVX512 };

static struct quant_kernels best_table[QTYPE_COUNT];
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

/* The ceiling SNIPER_ISA sets (no ceiling when unset or empty; an unknown value is reported and
 * ignored). */
static enum quant_isa isa_cap(void) {
    const char *env = getenv("SNIPER_ISA");
    if (!env || !*env || strcmp(env, "avx512") == 0)
        return QUANT_ISA_AVX512;
    if (strcmp(env, "avx2") == 0)
        return QUANT_ISA_AVX2;
    if (strcmp(env, "ref") == 0)
        return QUANT_ISA_REF;
    fprintf(stderr, "%s: unknown SNIPER_ISA \"%s\" ignored (ref, avx2, avx512)\n", __func__, env);
    return QUANT_ISA_AVX512;
}

static void best_table_init(void) {
    memcpy(best_table, ref_table, sizeof(best_table));
    enum quant_isa cap = isa_cap();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
    bool has_avx512 = has_avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512dq");
    if (has_avx2 && cap >= QUANT_ISA_AVX2) {
        quant_register_avx2(best_table, QTYPE_COUNT);
        quant_iq_register_avx2(best_table, QTYPE_COUNT);
    }
    if (has_avx512 && cap >= QUANT_ISA_AVX512) {
        quant_register_avx512(best_table, QTYPE_COUNT);
        quant_iq_register_avx512(best_table, QTYPE_COUNT); /* over the AVX2 ones it sets first */
    }
#else
    (void)cap;
#endif
}

/* Contract in quant.h. */
const struct quant_kernels *quant_kernels_ref(enum qtype t) {
    if ((unsigned)t >= QTYPE_COUNT || !ref_table[t].vec_dot)
        return NULL;
    return &ref_table[t];
}

/* Contract in quant.h. */
const struct quant_kernels *quant_kernels(enum qtype t) {
    pthread_once(&best_once, best_table_init);
    if ((unsigned)t >= QTYPE_COUNT || !best_table[t].vec_dot)
        return NULL;
    return &best_table[t];
}

/* Contract in quant.h. */
size_t quant_act_row_bytes(enum qtype t, int64_t n) {
    const struct quant_kernels *k = quant_kernels_ref(t);
    uint64_t bytes;
    if (!k || n < 0 || n % qtype_block_elems(t) != 0)
        return 0;
    if (qtype_row_bytes(k->vec_dot_type, (uint64_t)n, &bytes) < 0 || bytes > SIZE_MAX)
        return 0;
    return (size_t)bytes;
}
