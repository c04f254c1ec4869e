/* quant.c - the scalar reference of every block format (the spec the SIMD twins must match), the
 * activation quantizers (bit-identical to ggml's x86 CPU decode path), and the one dispatch point.
 * Invariants: block layouts are ggml's, byte for byte; vec_dot follows the accumulation contract
 * of quant.h exactly (the SIMD twins do too, and quant_kernels_select checks them against these
 * functions before it uses them); from_float is the same function in every ISA variant, so
 * activations never depend on the CPU. */
#include "quant.h"
#include "quant_impl.h"
#include "quant_iq.h"
#include "os.h"

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
_Static_assert(sizeof(struct block_q8_K) == 320, "block_q8_K layout");
_Static_assert(sizeof(struct block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(struct block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(struct block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(struct block_iq4_xs) == 136, "block_iq4_xs layout");
_Static_assert(sizeof(struct block_mxfp4) == 17, "block_mxfp4 layout");

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

/* Q8_K in a file: ggml's layout, not the activations' (quant.h). */
struct block_q8_K_file { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };
_Static_assert(sizeof(struct block_q8_K_file) == 292, "block_q8_K_file layout");

static void dequant_q8_K(const void *src, float *dst, int64_t n) {
    const struct block_q8_K_file *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        for (int j = 0; j < QK_K; j++)
            dst[j] = x[i].d * (float)x[i].qs[j];
    }
}

/* ---- q2_K, q3_K: 16 sub-blocks of 16 ---------------------------------------------------------- */

/* 2-bit code of element e (0..255) in a q2_K/q3_K qs[64]: element 128h + 32k + l (l < 32) is
 * bits 2k..2k+1 of qs[32h + l]. */
static int k2_code(const uint8_t *qs, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    return (qs[32 * h + l] >> (2 * k)) & 3;
}

/* q2_K: element e = d * (scales[e/16] & 15) * q - dmin * (scales[e/16] >> 4). */
static void dequant_q2_K(const void *src, float *dst, int64_t n) {
    const struct block_q2_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        for (int e = 0; e < QK_K; e++) {
            int sc = x[i].scales[e / 16];
            float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
            dst[e] = dl * (float)k2_code(x[i].qs, e) - ml;
        }
    }
}

/* q3_K code of element e: the 2-bit code minus 4 where bit e/32 of hmask[e % 32] is clear. */
static int q3_K_code(const struct block_q3_K *b, int e) {
    return k2_code(b->qs, e) - ((b->hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
}

static void dequant_q3_K(const void *src, float *dst, int64_t n) {
    const struct block_q3_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = fp16_to_f32(x[i].d);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)q3_K_scale(x[i].scales, e / 16);
            dst[e] = dl * (float)q3_K_code(&x[i], e);
        }
    }
}

/* ---- iq4_nl, iq4_xs, mxfp4: 4-bit indices into a 16-value table ------------------------------- */

/* Derived by tools/derive_quant_values.py from the reference (pinned by golden blocks). */
const int8_t quant_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};
const int8_t quant_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Contract in quant.h. 2^(e - 128) as float bits: a subnormal 2^21 << e units for e < 2. */
float quant_e8m0_half(uint8_t e) {
    return f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* 32 elements of a 16-byte nibble run: element j (j < 16) is the low nibble of qs[j], element
 * j + 16 the high nibble; each indexes tab and is scaled by d. */
static void dequant_nibble_run(const uint8_t *qs, const int8_t tab[16], float d, float *dst) {
    for (int j = 0; j < 16; j++) {
        dst[j] = d * (float)tab[qs[j] & 15];
        dst[j + 16] = d * (float)tab[qs[j] >> 4];
    }
}

static void dequant_iq4_nl(const void *src, float *dst, int64_t n) {
    const struct block_iq4_nl *x = src;
    for (int64_t i = 0; i < n / QK4_NL; i++, dst += QK4_NL)
        dequant_nibble_run(x[i].qs, quant_iq4nl_values, fp16_to_f32(x[i].d), dst);
}

static void dequant_iq4_xs(const void *src, float *dst, int64_t n) {
    const struct block_iq4_xs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK_K / 32; j++, dst += 32)
            dequant_nibble_run(x[i].qs + 16 * j, quant_iq4nl_values,
                               d * (float)iq4_xs_scale(&x[i], j), dst);
    }
}

static void dequant_mxfp4(const void *src, float *dst, int64_t n) {
    const struct block_mxfp4 *x = src;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, dst += QK_MXFP4)
        dequant_nibble_run(x[i].qs, quant_mxfp4_values, quant_e8m0_half(x[i].e), dst);
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
    case QTYPE_Q2_K: return dequant_q2_K;
    case QTYPE_Q3_K: return dequant_q3_K;
    case QTYPE_Q4_K: return dequant_q4_K;
    case QTYPE_Q5_K: return dequant_q5_K;
    case QTYPE_Q6_K: return dequant_q6_K;
    case QTYPE_Q8_K: return dequant_q8_K;
    case QTYPE_IQ4_NL: return dequant_iq4_nl;
    case QTYPE_IQ4_XS: return dequant_iq4_xs;
    case QTYPE_MXFP4: return dequant_mxfp4;
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

/* q2_K: each sub-block of 16 gets an affine grid of 4 steps from min(0, min x) - rounded down to a
 * multiple of dmin - up to max x; 4-bit scales and mins in units of the fp16 d and dmin. */
static void quantize_q2_K(const float *x, void *dst, int64_t n) {
    struct block_q2_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float lo[16], hi[16], max_min = 0.0f, max_range = 0.0f;
        for (int s = 0; s < 16; s++) {
            min_max(x + 16 * s, 16, &lo[s], &hi[s]);
            lo[s] = lo[s] < 0.0f ? -lo[s] : 0.0f; /* the offset to subtract, >= 0 */
            max_min = lo[s] > max_min ? lo[s] : max_min;
        }
        y[i].dmin = f32_to_fp16(max_min / 15.0f);
        float dmin = fp16_to_f32(y[i].dmin), idmin = inv_or_zero(dmin);
        int m[16];
        for (int s = 0; s < 16; s++) { /* round the offset up: the grid starts at or below min */
            m[s] = clamp_int((int)ceilf(lo[s] * idmin), 0, 15);
            float range = hi[s] + dmin * (float)m[s];
            max_range = range > max_range ? range : max_range;
        }
        y[i].d = f32_to_fp16(max_range / 45.0f); /* 3 steps of a 15-scale */
        float d = fp16_to_f32(y[i].d), id = inv_or_zero(d);
        memset(y[i].qs, 0, sizeof(y[i].qs));
        for (int s = 0; s < 16; s++) {
            float range = hi[s] + dmin * (float)m[s];
            int sc = clamp_int((int)ceilf(range * id / 3.0f), 0, 15);
            y[i].scales[s] = (uint8_t)(sc | m[s] << 4);
            float step = d * (float)sc, off = dmin * (float)m[s], istep = inv_or_zero(step);
            for (int l = 0; l < 16; l++) {
                int e = 16 * s + l, q = clamp_int(round_even((x[e] + off) * istep), 0, 3);
                y[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * ((e % 128) / 32)));
            }
        }
    }
}

/* Writes q3_K's signed 6-bit scale v (-32..31) of sub-block j (layout: q3_K_scale). */
static void q3_K_scale_put(uint8_t *sc, int j, int v) {
    int u = v + 32;
    if (j < 8)
        sc[j] = (uint8_t)((sc[j] & 0xf0) | (u & 15));
    else
        sc[j - 8] = (uint8_t)((sc[j - 8] & 0x0f) | (u & 15) << 4);
    sc[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
}

/* q3_K: symmetric codes -4..3 per sub-block of 16; the sub-block's step puts its element of
 * largest magnitude on -4 (as q4_0 does), coded as a signed 6-bit multiple of the fp16 d. */
static void quantize_q3_K(const float *x, void *dst, int64_t n) {
    struct block_q3_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sub[16], amax = 0.0f;
        for (int s = 0; s < 16; s++) {
            sub[s] = signed_absmax(x + 16 * s, 16) / -4.0f;
            amax = fabsf(sub[s]) > amax ? fabsf(sub[s]) : amax;
        }
        y[i].d = f32_to_fp16(amax / 31.0f);
        float d = fp16_to_f32(y[i].d), id = inv_or_zero(d);
        memset(y[i].scales, 0, sizeof(y[i].scales));
        memset(y[i].qs, 0, sizeof(y[i].qs));
        memset(y[i].hmask, 0, sizeof(y[i].hmask));
        for (int s = 0; s < 16; s++) {
            int sc = clamp_int(round_even(sub[s] * id), -32, 31);
            q3_K_scale_put(y[i].scales, s, sc);
            float istep = inv_or_zero(d * (float)sc);
            for (int l = 0; l < 16; l++) {
                int e = 16 * s + l, q = clamp_int(round_even(x[e] * istep), -4, 3) + 4;
                y[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)((q & 3) << (2 * ((e % 128) / 32)));
                y[i].hmask[e % 32] |= (uint8_t)((q >> 2) << (e / 32));
            }
        }
    }
}

/* The index of the value nearest v among n ascending values tab[0..n-1] (the lower of two
 * equally near), by bisection over the midpoints. */
static int nearest_sorted(const int8_t *tab, int n, float v) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v > 0.5f * (float)(tab[mid] + tab[mid + 1]))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The index of tab's value nearest v (the first of two equally near): IQ4_NL's table ascends;
 * MXFP4's holds 0..12 ascending in codes 0-7 and their negatives in codes 8-15 (-0 is code 8, so
 * a value nearest 0 takes code 0). */
static int nearest_index(const int8_t tab[16], float v) {
    if (tab[0] <= tab[1] && tab[7] <= tab[8])
        return nearest_sorted(tab, 16, v);
    int k = nearest_sorted(tab, 8, fabsf(v));
    return v < 0.0f && k > 0 ? k + 8 : k;
}

/* Packs 32 table indices of x / d into a nibble run (layout: dequant_nibble_run). */
static void nibble_run_from(const float *x, const int8_t tab[16], float d, uint8_t qs[16]) {
    float id = inv_or_zero(d);
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(nearest_index(tab, x[j] * id) | nearest_index(tab, x[j + 16] * id) << 4);
}

/* iq4_nl: the element of largest magnitude lands on the table's -127 end. */
static void quantize_iq4_nl(const float *x, void *dst, int64_t n) {
    struct block_iq4_nl *y = dst;
    for (int64_t i = 0; i < n / QK4_NL; i++, x += QK4_NL) {
        y[i].d = f32_to_fp16(signed_absmax(x, QK4_NL) / (float)quant_iq4nl_values[0]);
        nibble_run_from(x, quant_iq4nl_values, fp16_to_f32(y[i].d), y[i].qs);
    }
}

/* iq4_xs: iq4_nl's choice per sub-block of 32, the sub-block scales as signed 6-bit multiples
 * of the fp16 d. */
static void quantize_iq4_xs(const float *x, void *dst, int64_t n) {
    struct block_iq4_xs *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sub[8], amax = 0.0f;
        for (int s = 0; s < 8; s++) {
            sub[s] = signed_absmax(x + 32 * s, 32) / (float)quant_iq4nl_values[0];
            amax = fabsf(sub[s]) > amax ? fabsf(sub[s]) : amax;
        }
        y[i].d = f32_to_fp16(amax / 31.0f);
        float d = fp16_to_f32(y[i].d), id = inv_or_zero(d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof(y[i].scales_l));
        for (int s = 0; s < 8; s++) {
            int ls = clamp_int(round_even(sub[s] * id), -32, 31) + 32;
            y[i].scales_l[s / 2] |= (uint8_t)((ls & 15) << (4 * (s % 2)));
            y[i].scales_h |= (uint16_t)((ls >> 4) << (2 * s));
            nibble_run_from(x + 32 * s, quant_iq4nl_values, d * (float)(ls - 32), y[i].qs + 16 * s);
        }
    }
}

/* mxfp4: the smallest exponent whose scale keeps the block's largest magnitude inside the table
 * (12 = 6 doubled), then the nearest e2m1 value per element. */
static void quantize_mxfp4(const float *x, void *dst, int64_t n) {
    struct block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, x += QK_MXFP4) {
        float amax = fabsf(signed_absmax(x, QK_MXFP4));
        int e = 0;
        while (e < 255 && 12.0f * quant_e8m0_half((uint8_t)e) < amax)
            e++;
        y[i].e = (uint8_t)e;
        nibble_run_from(x, quant_mxfp4_values, amax == 0.0f ? 0.0f : quant_e8m0_half(y[i].e),
                        y[i].qs);
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
    case QTYPE_Q2_K: fn = quantize_q2_K; break;
    case QTYPE_Q3_K: fn = quantize_q3_K; break;
    case QTYPE_Q4_K: fn = quantize_q4_K; break;
    case QTYPE_Q5_K: fn = quantize_q5_K; break;
    case QTYPE_Q6_K: fn = quantize_q6_K; break;
    case QTYPE_IQ4_NL: fn = quantize_iq4_nl; break;
    case QTYPE_IQ4_XS: fn = quantize_iq4_xs; break;
    case QTYPE_MXFP4: fn = quantize_mxfp4; break;
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
        memset(b[i].pad, 0, sizeof(b[i].pad));
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

/* ==== reference dot products: the contract of quant.h ========================================= */

/* The float types: 32 fmaf lanes, the reduction tree, then the tail (quant.h). */
#define FLOAT_DOT_REF(name, T, conv)                                                              \
    static void name(int64_t n, float *restrict s, const void *restrict w,                        \
                     const void *restrict a) {                                                    \
        const T *x = w, *y = a;                                                                   \
        float lane[32] = {0};                                                                     \
        const int64_t n32 = n / 32 * 32;                                                          \
        for (int64_t i = 0; i < n32; i += 32)                                                     \
            for (int l = 0; l < 32; l++)                                                          \
                lane[l] = fmaf(conv(x[i + l]), conv(y[i + l]), lane[l]);                          \
        float sum = lanes32_total(lane);                                                          \
        for (int64_t i = n32; i < n; i++)                                                         \
            sum = fmaf(conv(x[i]), conv(y[i]), sum);                                              \
        *s = sum;                                                                                 \
    }

static inline float f32_id(float f) {
    return f;
}

FLOAT_DOT_REF(vec_dot_f32_ref, float, f32_id)
FLOAT_DOT_REF(vec_dot_f16_ref, fp16_t, fp16_to_f32)
FLOAT_DOT_REF(vec_dot_bf16_ref, bf16_t, bf16_to_f32)

static void vec_dot_q4_0_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            isum += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK4_0 / 2];
        }
        acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

/* x = d*q + m against y = dy*c: d*dy*sum(q*c) + m*(dy*sum(c)), the last factor being y's s. */
static void vec_dot_q4_1_q8_1_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q4_1 *x = w;
    const struct block_q8_1 *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int isum = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            isum += (x[i].qs[j] & 0x0f) * y[i].qs[j];
            isum += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
        }
        acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)isum);
        acc4_fma(acc, i, fp16_to_f32(x[i].m), fp16_to_f32(y[i].s));
    }
    *s = acc4_total(acc);
}

static void vec_dot_q5_0_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q5_0 *x = w;
    const struct block_q8_0 *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint32_t qh = q5_high_bits(x[i].qh);
        int isum = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int lo = ((x[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4) - 16;
            int hi = ((x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + QK5_0 / 2];
        }
        acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

static void vec_dot_q5_1_q8_1_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q5_1 *x = w;
    const struct block_q8_1 *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK5_1; i++) {
        uint32_t qh = q5_high_bits(x[i].qh);
        int isum = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + QK5_1 / 2];
        }
        acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)isum);
        acc4_fma(acc, i, fp16_to_f32(x[i].m), fp16_to_f32(y[i].s));
    }
    *s = acc4_total(acc);
}

static void vec_dot_q8_0_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q8_0 *x = w;
    const struct block_q8_0 *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int isum = 0;
        for (int j = 0; j < QK8_0; j++)
            isum += x[i].qs[j] * y[i].qs[j];
        acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

/* sum over a 32-element nibble run (dequant_nibble_run's layout) of tab[code] * y. */
static int nibble_run_dot(const uint8_t *qs, const int8_t tab[16], const int8_t *y) {
    int sum = 0;
    for (int j = 0; j < 16; j++)
        sum += tab[qs[j] & 15] * y[j] + tab[qs[j] >> 4] * y[j + 16];
    return sum;
}

static void vec_dot_iq4_nl_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                    const void *restrict a) {
    const struct block_iq4_nl *x = w;
    const struct block_q8_0 *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        int isum = nibble_run_dot(x[i].qs, quant_iq4nl_values, y[i].qs);
        acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

static void vec_dot_mxfp4_q8_0_ref(int64_t n, float *restrict s, const void *restrict w,
                                   const void *restrict a) {
    const struct block_mxfp4 *x = w;
    const struct block_q8_0 *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        int isum = nibble_run_dot(x[i].qs, quant_mxfp4_values, y[i].qs);
        acc4_fma(acc, i, quant_e8m0_half(x[i].e) * fp16_to_f32(y[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

/* q4_K/q5_K against q8_K (quant.h's lane contract): x = d*sc*q - dmin*m per sub-block of 32. The
 * block's 8 lane sums (lane l: elements 4l..4l+3 of every sub-block, times its scale) go into the
 * 8 lane accumulators; its min sums (sum(c) from two bsums per sub-block) into q4_K's 4 min lanes
 * (lane k: sub-blocks 2k, 2k+1) or q5_K's one. */
static void k_affine_lanes(const int q[QK_K], const uint8_t scales[K_SCALE_SIZE],
                           const struct block_q8_K *y, int lane[8], int mlane[4]) {
    int el[32] = {0}; /* element e of every sub-block, times its scale */
    memset(mlane, 0, 4 * sizeof(int));
    for (int sb = 0; sb < 8; sb++) {
        int sc, m;
        k_scale_min(sb, scales, &sc, &m);
        for (int e = 0; e < 32; e++)
            el[e] += sc * (q[32 * sb + e] * y->qs[32 * sb + e]);
        mlane[sb / 2] += m * (y->bsums[2 * sb] + y->bsums[2 * sb + 1]);
    }
    for (int l = 0; l < 8; l++)
        lane[l] = el[4 * l] + el[4 * l + 1] + el[4 * l + 2] + el[4 * l + 3];
}

/* The 5-bit codes of a q5_K block (4-bit ones of a q4_K with qh NULL) in element order: run c of
 * qs holds sub-block 2c (low nibbles) and 2c+1 (high), qh[l] bit 2c (2c+1) their fifth bit. */
static void k4_codes(const uint8_t *qs, const uint8_t *qh, int q[QK_K]) {
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            int b = qs[32 * c + l], h = qh ? qh[l] : 0;
            q[64 * c + l] = (b & 0x0f) | ((h >> (2 * c)) & 1) << 4;
            q[64 * c + 32 + l] = (b >> 4) | ((h >> (2 * c + 1)) & 1) << 4;
        }
    }
}

static void vec_dot_q4_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q4_K *x = w;
    const struct block_q8_K *y = a;
    float acc[8] = {0}, macc[4] = {0};
    int q[QK_K], lane[8], mlane[4];
    for (int64_t i = 0; i < n / QK_K; i++) {
        k4_codes(x[i].qs, NULL, q);
        k_affine_lanes(q, x[i].scales, &y[i], lane, mlane);
        const float dmin = -(y[i].d * fp16_to_f32(x[i].dmin));
        for (int k = 0; k < 4; k++)
            macc[k] = fmaf(dmin, (float)mlane[k], macc[k]);
        acc8_fma(acc, y[i].d * fp16_to_f32(x[i].d), lane);
    }
    *s = acc8_total(acc) + ((macc[0] + macc[2]) + (macc[1] + macc[3]));
}

static void vec_dot_q5_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q5_K *x = w;
    const struct block_q8_K *y = a;
    float acc[8] = {0}, msum = 0.0f;
    int q[QK_K], lane[8], mlane[4];
    for (int64_t i = 0; i < n / QK_K; i++) {
        k4_codes(x[i].qs, x[i].qh, q);
        k_affine_lanes(q, x[i].scales, &y[i], lane, mlane);
        const float dmin = -(y[i].d * fp16_to_f32(x[i].dmin));
        msum = fmaf(dmin, (float)((mlane[0] + mlane[1]) + (mlane[2] + mlane[3])), msum);
        acc8_fma(acc, y[i].d * fp16_to_f32(x[i].d), lane);
    }
    *s = acc8_total(acc) + msum;
}

/* q6_K against q8_K (quant.h's lane contract): lane l sums sc * q * y over elements 4l..4l+3 of
 * every 32 (q the stored code, 0..63, sc its 16 elements' scale), minus 32 * sc * bsum of groups
 * 2l and 2l + 1 (the codes' offset, taken where ggml's kernel takes it). */
static void vec_dot_q6_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q6_K *x = w;
    const struct block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int el[32] = {0}, lane[8];
        for (int e = 0; e < QK_K; e++)
            el[e % 32] += x[i].scales[e / 16] * (q6_K_code(&x[i], e) * y[i].qs[e]);
        for (int l = 0; l < 8; l++)
            lane[l] = el[4 * l] + el[4 * l + 1] + el[4 * l + 2] + el[4 * l + 3] -
                      32 * (x[i].scales[2 * l] * y[i].bsums[2 * l] +
                            x[i].scales[2 * l + 1] * y[i].bsums[2 * l + 1]);
        acc8_fma(acc, y[i].d * fp16_to_f32(x[i].d), lane);
    }
    *s = acc8_total(acc);
}

/* q2_K: x = d*(sc&15)*q - dmin*(sc>>4) per sub-block of 16. */
static void vec_dot_q2_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q2_K *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            int dot = 0;
            for (int l = 0; l < 16; l++)
                dot += k2_code(x[i].qs, 16 * g + l) * y[i].qs[16 * g + l];
            isum += (x[i].scales[g] & 15) * dot;
            msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
        }
        acc4_fma(acc, i, y[i].d * fp16_to_f32(x[i].d), (float)isum);
        acc4_fma(acc, i, -(y[i].d * fp16_to_f32(x[i].dmin)), (float)msum);
    }
    *s = acc4_total(acc);
}

static void vec_dot_q3_K_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                  const void *restrict a) {
    const struct block_q3_K *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            int dot = 0;
            for (int l = 0; l < 16; l++)
                dot += q3_K_code(&x[i], 16 * g + l) * y[i].qs[16 * g + l];
            isum += q3_K_scale(x[i].scales, g) * dot;
        }
        acc4_fma(acc, i, y[i].d * fp16_to_f32(x[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

static void vec_dot_iq4_xs_q8_K_ref(int64_t n, float *restrict s, const void *restrict w,
                                    const void *restrict a) {
    const struct block_iq4_xs *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int j = 0; j < QK_K / 32; j++)
            isum += iq4_xs_scale(&x[i], j) *
                    nibble_run_dot(x[i].qs + 16 * j, quant_iq4nl_values, y[i].qs + 32 * j);
        acc4_fma(acc, i, y[i].d * fp16_to_f32(x[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

/* ==== four-column reference dot products ====================================================== */
/* The scalar kernels share nothing between columns: vec_dot4 is vec_dot four times, which makes it
 * bit-identical to vec_dot by construction. */

#define REF_FOUR(dot) VEC_DOT4_GENERIC(dot) VEC_DOT_ROWS4_GENERIC(dot)
REF_FOUR(vec_dot_f32_ref)
REF_FOUR(vec_dot_f16_ref)
REF_FOUR(vec_dot_bf16_ref)
REF_FOUR(vec_dot_q4_0_q8_0_ref)
REF_FOUR(vec_dot_q4_1_q8_1_ref)
REF_FOUR(vec_dot_q5_0_q8_0_ref)
REF_FOUR(vec_dot_q5_1_q8_1_ref)
REF_FOUR(vec_dot_q8_0_q8_0_ref)
REF_FOUR(vec_dot_iq4_nl_q8_0_ref)
REF_FOUR(vec_dot_mxfp4_q8_0_ref)
REF_FOUR(vec_dot_q2_K_q8_K_ref)
REF_FOUR(vec_dot_q3_K_q8_K_ref)
REF_FOUR(vec_dot_q4_K_q8_K_ref)
REF_FOUR(vec_dot_q5_K_q8_K_ref)
REF_FOUR(vec_dot_q6_K_q8_K_ref)
REF_FOUR(vec_dot_iq4_xs_q8_K_ref)

/* ==== dispatch ================================================================================ */

#define KERNELS_REF(t, vt, from, dot)                                                             \
    [t] = {t, vt, from, dot, dot##_x4, dot##_r4, "ref", NULL, NULL}

static const struct quant_kernels ref_table[QTYPE_COUNT] = {
    KERNELS_REF(QTYPE_F32, QTYPE_F32, quant_f32_from_f32, vec_dot_f32_ref),
    KERNELS_REF(QTYPE_F16, QTYPE_F16, quant_f16_from_f32, vec_dot_f16_ref),
    KERNELS_REF(QTYPE_BF16, QTYPE_BF16, quant_bf16_from_f32, vec_dot_bf16_ref),
    KERNELS_REF(QTYPE_Q4_0, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_q4_0_q8_0_ref),
    KERNELS_REF(QTYPE_Q4_1, QTYPE_Q8_1, quant_q8_1_from_f32, vec_dot_q4_1_q8_1_ref),
    KERNELS_REF(QTYPE_Q5_0, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_q5_0_q8_0_ref),
    KERNELS_REF(QTYPE_Q5_1, QTYPE_Q8_1, quant_q8_1_from_f32, vec_dot_q5_1_q8_1_ref),
    KERNELS_REF(QTYPE_Q8_0, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_q8_0_q8_0_ref),
    KERNELS_REF(QTYPE_IQ4_NL, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_iq4_nl_q8_0_ref),
    KERNELS_REF(QTYPE_MXFP4, QTYPE_Q8_0, quant_q8_0_from_f32, vec_dot_mxfp4_q8_0_ref),
    KERNELS_REF(QTYPE_Q2_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q2_K_q8_K_ref),
    KERNELS_REF(QTYPE_Q3_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q3_K_q8_K_ref),
    KERNELS_REF(QTYPE_Q4_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q4_K_q8_K_ref),
    KERNELS_REF(QTYPE_Q5_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q5_K_q8_K_ref),
    KERNELS_REF(QTYPE_Q6_K, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_q6_K_q8_K_ref),
    KERNELS_REF(QTYPE_IQ4_XS, QTYPE_Q8_K, quant_q8_K_from_f32, vec_dot_iq4_xs_q8_K_ref),
    KERNELS_REF(QTYPE_IQ2_XXS, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq2_xxs_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ2_XS, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq2_xs_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ2_S, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq2_s_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ3_XXS, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq3_xxs_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ3_S, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq3_s_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ1_S, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq1_s_vec_dot_ref),
    KERNELS_REF(QTYPE_IQ1_M, QTYPE_Q8_K, quant_q8_K_from_f32, quant_iq1_m_vec_dot_ref),
};

/* Every ISA of every CPU family; within a family, narrower first (a candidate table of another
 * family's ISA is the reference's, whose entries are skipped as not that ISA's own). */
enum quant_isa {
    QUANT_ISA_REF,
    QUANT_ISA_AVX2,
    QUANT_ISA_AVX512,
    QUANT_ISA_NEON,
    QUANT_ISA_NEONDOT,
    QUANT_ISA_I8MM,
    QUANT_ISA_COUNT /* as a cap: none */
};
static const char *const isa_names[QUANT_ISA_COUNT] = {"ref",  "avx2",    "avx512",
                                                       "neon", "neondot", "i8mm"};

/* The ceiling a SNIPER_ISA-style string sets (none when NULL or empty; an unknown value is
 * reported and ignored). */
static enum quant_isa isa_cap(const char *cap) {
    if (!cap || !*cap)
        return QUANT_ISA_COUNT;
    for (int i = 0; i < QUANT_ISA_COUNT; i++)
        if (strcmp(cap, isa_names[i]) == 0)
            return (enum quant_isa)i;
    fprintf(stderr,
            "%s: unknown SNIPER_ISA \"%s\" ignored (ref, avx2, avx512, neon, neondot, i8mm)\n",
            __func__, cap);
    return QUANT_ISA_COUNT;
}

/* The widest ISA this CPU runs, no wider than cap (ref when cap names another family's ISA). */
static enum quant_isa isa_available(enum quant_isa cap) {
    /* isa: the widest this CPU runs; [first, last]: its family's SIMD ISAs */
    enum quant_isa isa = QUANT_ISA_REF, first = QUANT_ISA_COUNT, last = QUANT_ISA_COUNT;
#if defined(__x86_64__) || defined(__i386__)
    first = QUANT_ISA_AVX2, last = QUANT_ISA_AVX512;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        os_cpu_x86_f16c()) {
        isa = QUANT_ISA_AVX2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
            __builtin_cpu_supports("avx512dq"))
            isa = QUANT_ISA_AVX512;
    }
#elif defined(__aarch64__)
    first = QUANT_ISA_NEON, last = QUANT_ISA_I8MM;
    isa = QUANT_ISA_NEON; /* Advanced SIMD is part of every Armv8-A CPU */
    const unsigned arm = os_cpu_arm_features();
    if (arm & OS_CPU_ARM_DOTPROD) {
        isa = QUANT_ISA_NEONDOT;
        if (arm & OS_CPU_ARM_I8MM) /* the i8mm build uses SDOT too */
            isa = QUANT_ISA_I8MM;
    }
#endif
    if (cap == QUANT_ISA_COUNT)
        return isa;
    if (cap < first || cap > last)
        return QUANT_ISA_REF; /* ref itself, or another family's ISA */
    return isa < cap ? isa : cap;
}

/* tab = the reference table with ISA isa's kernels registered over it (isa must run here). */
static void isa_table(enum quant_isa isa, struct quant_kernels *tab) {
    memcpy(tab, ref_table, sizeof(ref_table));
#if defined(__x86_64__) || defined(__i386__)
    if (isa == QUANT_ISA_AVX2) {
        quant_register_avx2(tab, QTYPE_COUNT);
        quant_iq_register_avx2(tab, QTYPE_COUNT);
    } else if (isa == QUANT_ISA_AVX512) {
        quant_register_avx512(tab, QTYPE_COUNT); /* over the AVX2 ones it registers first */
        quant_iq_register_avx512(tab, QTYPE_COUNT); /* likewise */
    }
#elif defined(__aarch64__)
    if (isa == QUANT_ISA_NEON) {
        quant_register_neon(tab, QTYPE_COUNT);
        quant_iq_register_neon(tab, QTYPE_COUNT);
    } else if (isa == QUANT_ISA_NEONDOT) {
        quant_register_neon(tab, QTYPE_COUNT);
        quant_register_neondot(tab, QTYPE_COUNT); /* over the NEON ones it registers first */
        quant_iq_register_neondot(tab, QTYPE_COUNT);
    } else if (isa == QUANT_ISA_I8MM) {
        quant_register_neon(tab, QTYPE_COUNT);
        quant_register_i8mm(tab, QTYPE_COUNT); /* likewise */
        quant_iq_register_i8mm(tab, QTYPE_COUNT);
    }
#endif
}

/* ---- the start-up self-check ----------------------------------------------------------------- */

#define CHECK_ROWS 4   /* weight rows and activation rows */
#define CHECK_SIZES 4  /* row lengths, all prefixes of the longest */
static const int check_blocks[CHECK_SIZES] = {1, 3, 4, 7};   /* block-quantized types */
static const int check_elems[CHECK_SIZES] = {7, 32, 75, 160}; /* float types */

/* One type's fixed inputs and the reference's outputs on them. */
struct check_data {
    int64_t n[CHECK_SIZES];
    size_t w_row, a_row;                            /* bytes of a row of the longest n */
    uint8_t *w;                                     /* [CHECK_ROWS][w_row] weights */
    uint8_t *a;                                     /* [CHECK_ROWS][a_row] activations */
    float want[CHECK_SIZES][CHECK_ROWS][CHECK_ROWS]; /* reference vec_dot (weight r, act j) */
};

static uint64_t check_rng(uint64_t *st) {
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    return *st;
}

/* Row r of fixed floats (unit = elements per block): 0 uniform, 1 wide with outliers, 2 edge
 * values (zero blocks, a block of +-2.5, small values with one large one), 3 integers -127..127. */
static void check_floats(float *x, int64_t n, int unit, int r, uint64_t *st) {
    for (int64_t e = 0; e < n; e++) {
        float u = (float)(check_rng(st) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
        int64_t blk = e / unit;
        switch (r) {
        case 0: x[e] = u; break;
        case 1: x[e] = check_rng(st) % 16 == 0 ? 40.0f * u : 3.0f * u; break;
        case 2: x[e] = blk % 3 == 0 ? 0.0f : blk % 3 == 1 ? (e & 1 ? -2.5f : 2.5f)
                     : e % unit == 5 ? 7.0f : 1e-3f * u; break;
        default: x[e] = (float)(e % 255 - 127); break;
        }
    }
}

/* Weight row r: quantized floats where t has a weight quantizer (rows 0 and 2), else bytes. Raw
 * bytes (rows 1 and 3, every row without a quantizer) have bit 6 clear, so that every fp16, bf16
 * or f32 field they form is finite; row 3 uses only extreme codes (0x00 0x0f 0x3f 0x80 0xb0 0xbf). */
static void check_weights(enum qtype t, uint8_t *w, size_t bytes, int64_t n, int r, float *xf,
                          uint64_t *st) {
    int unit = qtype_block_elems(t) > 1 ? (int)qtype_block_elems(t) : 32;
    check_floats(xf, n, unit, r, st);
    if (r % 2 == 0 && quant_quantize_row(t, xf, w, n) == 0)
        return;
    static const uint8_t extreme[6] = {0x00, 0x0f, 0x3f, 0x80, 0xb0, 0xbf};
    for (size_t i = 0; i < bytes; i++)
        w[i] = r == 3 ? extreme[check_rng(st) % 6] : (uint8_t)(check_rng(st) & 0xbf);
}

static void check_data_free(struct check_data *cd) {
    if (cd) {
        free(cd->w);
        free(cd->a);
        free(cd);
    }
}

/* The inputs of type t and the reference's results on them, or NULL when out of memory. */
static struct check_data *check_data_new(enum qtype t) {
    const struct quant_kernels *ref = &ref_table[t];
    struct check_data *cd = calloc(1, sizeof(*cd));
    float *xf = NULL;
    uint64_t wb = 0, st = 0x2545F4914F6CDD1DULL;
    if (!cd)
        return NULL;
    for (int k = 0; k < CHECK_SIZES; k++)
        cd->n[k] = qtype_block_elems(t) > 1 ? check_blocks[k] * (int64_t)qtype_block_elems(t)
                                            : check_elems[k];
    const int64_t n = cd->n[CHECK_SIZES - 1];
    cd->a_row = quant_act_row_bytes(t, n);
    if (qtype_row_bytes(t, (uint64_t)n, &wb) < 0 || !cd->a_row)
        goto err;
    cd->w_row = (size_t)wb;
    cd->w = calloc(CHECK_ROWS, cd->w_row);
    cd->a = calloc(CHECK_ROWS, cd->a_row);
    xf = calloc((size_t)n, sizeof(*xf));
    if (!cd->w || !cd->a || !xf)
        goto err;
    for (int r = 0; r < CHECK_ROWS; r++) {
        check_weights(t, cd->w + r * cd->w_row, cd->w_row, n, r, xf, &st);
        check_floats(xf, n, qtype_block_elems(ref->vec_dot_type) > 1 ? 32 : 16, r, &st);
        ref->from_float(xf, cd->a + r * cd->a_row, n);
    }
    for (int k = 0; k < CHECK_SIZES; k++)
        for (int r = 0; r < CHECK_ROWS; r++)
            for (int j = 0; j < CHECK_ROWS; j++)
                ref->vec_dot(cd->n[k], &cd->want[k][r][j], cd->w + r * cd->w_row,
                             cd->a + j * cd->a_row);
    free(xf);
    return cd;
err:
    free(xf);
    check_data_free(cd);
    return NULL;
}

static bool same_float(float a, float b) {
    return f32_bits(a) == f32_bits(b);
}

/* True when k's vec_dot_2xn (where it has one) gives the reference's bits for rows 0-1 and 2-3
 * against activation rows 0-1, 2-3 (n_act 2) and 0-3 (n_act 4) at row length cd->n[s]. */
static bool check_2xn(const struct quant_kernels *k, const struct check_data *cd, int s,
                      const void *const acts[CHECK_ROWS]) {
    bool ok = true;
    for (int r = 0; k->vec_dot_2xn && r + 2 <= CHECK_ROWS; r += 2) {
        const uint8_t *w = cd->w + r * cd->w_row;
        float got[2 * CHECK_ROWS];
        for (int j = 0; j + 2 <= CHECK_ROWS; j += 2) {
            k->vec_dot_2xn(cd->n[s], got, w, cd->w_row, acts + j, 2);
            for (int i = 0; i < 4; i++)
                ok = ok && same_float(got[i], cd->want[s][r + i / 2][j + i % 2]);
        }
        k->vec_dot_2xn(cd->n[s], got, w, cd->w_row, acts, 4);
        for (int i = 0; i < 8; i++)
            ok = ok && same_float(got[i], cd->want[s][r + i / 4][i % 4]);
    }
    return ok;
}

/* True when k's vec_dot, vec_dot4, vec_dot2, vec_dot_rows4 and vec_dot_2xn give the reference's
 * bits on every input. */
static bool check_kernels(const struct quant_kernels *k, const struct check_data *cd) {
    bool ok = true;
    for (int s = 0; s < CHECK_SIZES && ok; s++) {
        const int64_t n = cd->n[s];
        const void *acts[CHECK_ROWS];
        for (int j = 0; j < CHECK_ROWS; j++)
            acts[j] = cd->a + j * cd->a_row;
        for (int r = 0; r < CHECK_ROWS; r++) {
            const uint8_t *w = cd->w + r * cd->w_row;
            float four[CHECK_ROWS], one;
            k->vec_dot4(n, four, w, acts);
            for (int j = 0; j < CHECK_ROWS; j++) {
                k->vec_dot(n, &one, w, acts[j]);
                ok = ok && same_float(one, cd->want[s][r][j]) && same_float(four[j], one);
            }
            for (int j = 0; k->vec_dot2 && j + 2 <= CHECK_ROWS; j += 2) {
                float two[2];
                k->vec_dot2(n, two, w, acts + j);
                ok = ok && same_float(two[0], four[j]) && same_float(two[1], four[j + 1]);
            }
        }
        for (int j = 0; j < CHECK_ROWS; j++) {
            float rows[CHECK_ROWS];
            k->vec_dot_rows4(n, rows, cd->w, cd->w_row, acts[j]);
            for (int r = 0; r < CHECK_ROWS; r++)
                ok = ok && same_float(rows[r], cd->want[s][r][j]);
        }
        ok = ok && check_2xn(k, cd, s, acts);
    }
    return ok;
}

/* The test hook of quant_kernels_select: a vec_dot that flips its result's last bit. */
static quant_vec_dot_fn corrupt_inner;

static void vec_dot_corrupted(int64_t n, float *restrict s, const void *restrict w,
                              const void *restrict a) {
    corrupt_inner(n, s, w, a);
    *s = f32_from_bits(f32_bits(*s) ^ 1u);
}

/* Applies a "<type>:<isa>" corruption to the candidate tables, if it names one of them. */
static void corrupt_apply(const char *corrupt, struct quant_kernels cand[][QTYPE_COUNT],
                          enum quant_isa top) {
    const char *colon = corrupt ? strchr(corrupt, ':') : NULL;
    if (!colon)
        return;
    for (int t = 0; t < QTYPE_COUNT; t++) {
        const char *name = qtype_name((enum qtype)t);
        if (strlen(name) != (size_t)(colon - corrupt) || strncmp(name, corrupt, strlen(name)))
            continue;
        for (int isa = QUANT_ISA_AVX2; isa <= (int)top; isa++) {
            if (strcmp(colon + 1, isa_names[isa]) == 0 && cand[isa][t].vec_dot &&
                strcmp(cand[isa][t].isa, isa_names[isa]) == 0) {
                corrupt_inner = cand[isa][t].vec_dot;
                cand[isa][t].vec_dot = vec_dot_corrupted;
            }
        }
    }
}

/* Contract in quant.h. */
int quant_kernels_select(struct quant_kernels *tab, const char *cap, const char *corrupt) {
    const enum quant_isa top = isa_available(isa_cap(cap));
    struct quant_kernels cand[QUANT_ISA_COUNT][QTYPE_COUNT];
    int rejected = 0;
    for (int isa = QUANT_ISA_REF; isa <= (int)top; isa++)
        isa_table((enum quant_isa)isa, cand[isa]);
    corrupt_apply(corrupt, cand, top);
    memcpy(tab, ref_table, sizeof(ref_table));
    for (int t = 0; t < QTYPE_COUNT; t++) {
        struct check_data *cd = NULL;
        for (int isa = (int)top; isa > QUANT_ISA_REF; isa--) {
            const struct quant_kernels *k = &cand[isa][t];
            if (!k->vec_dot || strcmp(k->isa, isa_names[isa]) != 0)
                continue; /* no kernel of this ISA's own */
            if (!cd && !(cd = check_data_new((enum qtype)t))) {
                fprintf(stderr, "quant_kernels: out of memory checking %s; using ref\n",
                        qtype_name((enum qtype)t));
                break;
            }
            if (check_kernels(k, cd)) {
                tab[t] = *k;
                break;
            }
            rejected++;
            int next = isa - 1;
            while (next > QUANT_ISA_REF && strcmp(cand[next][t].isa, isa_names[next]) != 0)
                next--;
            fprintf(stderr, "quant_kernels: %s %s kernel disagrees with the reference; using %s\n",
                    qtype_name((enum qtype)t), isa_names[isa], isa_names[next]);
        }
        check_data_free(cd);
    }
    return rejected;
}

static struct quant_kernels best_table[QTYPE_COUNT];
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

static void best_table_init(void) {
    quant_kernels_select(best_table, getenv("SNIPER_ISA"), NULL);
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
size_t quant_act_row_stride(enum qtype t, int64_t n) {
    return (quant_act_row_bytes(t, n) + 63) & ~(size_t)63;
}

/* Contract in quant.h. */
size_t quant_act_row_bytes(enum qtype t, int64_t n) {
    const struct quant_kernels *k = quant_kernels_ref(t);
    uint64_t bytes;
    if (!k || n < 0 || n % qtype_block_elems(t) != 0)
        return 0;
    if (k->vec_dot_type == QTYPE_Q8_K) /* the activations' own layout, not the file's */
        bytes = (uint64_t)(n / QK_K) * sizeof(struct block_q8_K);
    else if (qtype_row_bytes(k->vec_dot_type, (uint64_t)n, &bytes) < 0 || bytes > SIZE_MAX)
        return 0;
    return (size_t)bytes;
}
