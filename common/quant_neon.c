/* quant_neon.c - the NEON twins (Armv8-A Advanced SIMD) of quant.c's reference dot products, for
 * f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K and
 * iq4_xs. quant_neondot.c compiles this file a second time with the dot-product extension
 * (SDOT), registered as "neondot" where the CPU has it (os_cpu_arm_features).
 * Invariant (quant.h's accumulation contract): NEON computes each block's integer sums only
 * (exact: int8 products widened to int16, pairs added into int32, or SDOT); every float
 * operation is the reference's own expression, in its order, so the results are its bits. */
#include <arm_neon.h>

#include "quant_impl.h"

#if defined(__ARM_FEATURE_DOTPROD)
#define NEON_ISA "neondot"
#define NEON_REGISTER quant_register_neondot
#else
#define NEON_ISA "neon"
#define NEON_REGISTER quant_register_neon
#endif

/* ==== integer sums ============================================================================ */

/* acc's lanes plus the products a[j] * b[j] of 16 int8 pairs (each lane takes four). */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* sum a[j] * b[j] over two runs of 16: a0 with b[0..15], a1 with b[16..31]. */
static inline int dot32(int8x16_t a0, int8x16_t a1, const int8_t *b) {
    const int32x4_t acc = dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(b)), a1, vld1q_s8(b + 16));
    return vaddvq_s32(acc);
}

/* sum a[j] * b[j] over 16. */
static inline int dot16_sum(int8x16_t a, const int8_t *b) {
    return vaddvq_s32(dot16(vdupq_n_s32(0), a, vld1q_s8(b)));
}

/* Lane j (0..15): 0x10 where bit j of m is set, else 0 (a q5 code's fifth bit). */
static inline uint8x16_t bit5_of(uint32_t m) {
    static const uint8_t sel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)m), vdup_n_u8((uint8_t)(m >> 8)));
    return vandq_u8(vtstq_u8(v, vld1q_u8(sel)), vdupq_n_u8(0x10));
}

/* The low (lo) and high (hi) nibbles of 16 bytes. */
static inline void nibbles(const uint8_t *qs, uint8x16_t *lo, uint8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vandq_u8(q, vdupq_n_u8(0x0f));
    *hi = vshrq_n_u8(q, 4);
}

/* sum tab[code] * y over a 32-element nibble run (quant.c's nibble_run_dot). */
static inline int nibble_run_dot(const uint8_t *qs, int8x16_t tab, const int8_t *y) {
    uint8x16_t lo, hi;
    nibbles(qs, &lo, &hi);
    return dot32(vqtbl1q_s8(tab, lo), vqtbl1q_s8(tab, hi), y);
}

/* ==== the float types: 32 fmaf lanes, the reduction tree, the tail (quant.h) ================== */

/* Lane l of the contract is lane l % 4 of acc[l / 4]; lanes32_total's tree. */
static inline float lanes32_reduce(float32x4_t acc[8]) {
    for (int k = 0; k < 4; k++)
        acc[k] = vaddq_f32(acc[k], acc[k + 4]); /* l += l + 16 */
    for (int k = 0; k < 2; k++)
        acc[k] = vaddq_f32(acc[k], acc[k + 2]); /* l += l + 8 */
    acc[0] = vaddq_f32(acc[0], acc[1]);         /* l += l + 4 */
    const float32x2_t t = vadd_f32(vget_low_f32(acc[0]), vget_high_f32(acc[0])); /* l += l + 2 */
    return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);                             /* l += l + 1 */
}

/* LOAD4(p) turns four elements at p into float32x4_t; CONV(e) one element into float. */
#define FLOAT_DOT_NEON(name, T, LOAD4, CONV)                                                      \
    static void name(int64_t n, float *restrict s, const void *restrict w,                        \
                     const void *restrict a) {                                                    \
        const T *x = w, *y = a;                                                                   \
        float32x4_t acc[8];                                                                       \
        for (int k = 0; k < 8; k++)                                                               \
            acc[k] = vdupq_n_f32(0.0f);                                                           \
        const int64_t n32 = n / 32 * 32;                                                          \
        for (int64_t i = 0; i < n32; i += 32)                                                     \
            for (int k = 0; k < 8; k++)                                                           \
                acc[k] = vfmaq_f32(acc[k], LOAD4(x + i + 4 * k), LOAD4(y + i + 4 * k));           \
        float sum = lanes32_reduce(acc);                                                          \
        for (int64_t i = n32; i < n; i++)                                                         \
            sum = fmaf(CONV(x[i]), CONV(y[i]), sum);                                              \
        *s = sum;                                                                                 \
    }

static inline float f32_conv(float f) {
    return f;
}

static inline float32x4_t f16x4_load(const fp16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); /* exact, as fp16_to_f32 */
}

static inline float32x4_t bf16x4_load(const bf16_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

FLOAT_DOT_NEON(f32_dot, float, vld1q_f32, f32_conv)
FLOAT_DOT_NEON(f16_dot, fp16_t, f16x4_load, fp16_to_f32)
FLOAT_DOT_NEON(bf16_dot, bf16_t, bf16x4_load, bf16_to_f32)

/* ==== 32-element types against Q8_0 / Q8_1 =================================================== */

/* name's vec_dot: ISUM(&x[i], &y[i]) is block i's integer sum; the floats are the reference's. */
#define Q8_0_DOT(name, WB, ISUM)                                                                  \
    static void name(int64_t n, float *restrict s, const void *restrict w,                        \
                     const void *restrict a) {                                                    \
        const WB *x = w;                                                                          \
        const struct block_q8_0 *y = a;                                                           \
        float acc[4] = {0};                                                                       \
        for (int64_t i = 0; i < n / 32; i++) {                                                    \
            prefetch_ahead(&x[i], sizeof(WB));                                                    \
            acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)ISUM(&x[i], &y[i])); \
        }                                                                                         \
        *s = acc4_total(acc);                                                                     \
    }
#define Q8_1_DOT(name, WB, ISUM)                                                                  \
    static void name(int64_t n, float *restrict s, const void *restrict w,                        \
                     const void *restrict a) {                                                    \
        const WB *x = w;                                                                          \
        const struct block_q8_1 *y = a;                                                           \
        float acc[4] = {0};                                                                       \
        for (int64_t i = 0; i < n / 32; i++) {                                                    \
            prefetch_ahead(&x[i], sizeof(WB));                                                    \
            acc4_fma(acc, i, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), (float)ISUM(&x[i], &y[i])); \
            acc4_fma(acc, i, fp16_to_f32(x[i].m), fp16_to_f32(y[i].s));                           \
        }                                                                                         \
        *s = acc4_total(acc);                                                                     \
    }

static inline int q8_0_isum(const struct block_q8_0 *x, const struct block_q8_0 *y) {
    return dot32(vld1q_s8(x->qs), vld1q_s8(x->qs + 16), y->qs);
}

static inline int q4_0_isum(const struct block_q4_0 *x, const struct block_q8_0 *y) {
    uint8x16_t lo, hi;
    nibbles(x->qs, &lo, &hi);
    const int8x16_t eight = vdupq_n_s8(8);
    return dot32(vsubq_s8(vreinterpretq_s8_u8(lo), eight), vsubq_s8(vreinterpretq_s8_u8(hi), eight),
                 y->qs);
}

static inline int q4_1_isum(const struct block_q4_1 *x, const struct block_q8_1 *y) {
    uint8x16_t lo, hi;
    nibbles(x->qs, &lo, &hi);
    return dot32(vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), y->qs);
}

/* q5 codes 0..31 of a block: nibbles with qh's bits j (lo) and j + 16 (hi) as the fifth bit. */
static inline void q5_codes(const uint8_t qs[16], const uint8_t qh[4], int8x16_t *lo,
                            int8x16_t *hi) {
    const uint32_t bits = q5_high_bits(qh);
    uint8x16_t l, h;
    nibbles(qs, &l, &h);
    *lo = vreinterpretq_s8_u8(vorrq_u8(l, bit5_of(bits)));
    *hi = vreinterpretq_s8_u8(vorrq_u8(h, bit5_of(bits >> 16)));
}

static inline int q5_0_isum(const struct block_q5_0 *x, const struct block_q8_0 *y) {
    int8x16_t lo, hi;
    q5_codes(x->qs, x->qh, &lo, &hi);
    const int8x16_t sixteen = vdupq_n_s8(16);
    return dot32(vsubq_s8(lo, sixteen), vsubq_s8(hi, sixteen), y->qs);
}

static inline int q5_1_isum(const struct block_q5_1 *x, const struct block_q8_1 *y) {
    int8x16_t lo, hi;
    q5_codes(x->qs, x->qh, &lo, &hi);
    return dot32(lo, hi, y->qs);
}

static inline int iq4_nl_isum(const struct block_iq4_nl *x, const struct block_q8_0 *y) {
    return nibble_run_dot(x->qs, vld1q_s8(quant_iq4nl_values), y->qs);
}

Q8_0_DOT(q8_0_dot, struct block_q8_0, q8_0_isum)
Q8_0_DOT(q4_0_dot, struct block_q4_0, q4_0_isum)
Q8_0_DOT(q5_0_dot, struct block_q5_0, q5_0_isum)
Q8_0_DOT(iq4_nl_dot, struct block_iq4_nl, iq4_nl_isum)
Q8_1_DOT(q4_1_dot, struct block_q4_1, q4_1_isum)
Q8_1_DOT(q5_1_dot, struct block_q5_1, q5_1_isum)

/* mxfp4: its scale is e8m0_half(x.e) rather than an fp16 d. */
static void mxfp4_dot(int64_t n, float *restrict s, const void *restrict w,
                      const void *restrict a) {
    const struct block_mxfp4 *x = w;
    const struct block_q8_0 *y = a;
    const int8x16_t tab = vld1q_s8(quant_mxfp4_values);
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const int isum = nibble_run_dot(x[i].qs, tab, y[i].qs);
        acc4_fma(acc, i, quant_e8m0_half(x[i].e) * fp16_to_f32(y[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

/* ==== K-quants and iq4_xs against Q8_K ======================================================== */

/* isum and msum of a q4_K / q5_K block whose codes (0..31) are q[8][2] (sub-block sb's 32 as two
 * runs of 16); quant.c's k_affine_block_dot, the float terms included. */
static inline void k_affine_neon(float acc[4], int64_t i, const int8x16_t q[8][2],
                                 const uint8_t scales[K_SCALE_SIZE], fp16_t d, fp16_t dmin,
                                 const struct block_q8_K *y) {
    int isum = 0, msum = 0;
    for (int sb = 0; sb < 8; sb++) {
        int sc, m;
        k_scale_min(sb, scales, &sc, &m);
        isum += sc * dot32(q[sb][0], q[sb][1], y->qs + 32 * sb);
        msum += m * (y->bsums[2 * sb] + y->bsums[2 * sb + 1]);
    }
    acc4_fma(acc, i, y->d * fp16_to_f32(d), (float)isum);
    acc4_fma(acc, i, -(y->d * fp16_to_f32(dmin)), (float)msum);
}

/* q4_K: 32-byte run c holds sub-block 2c (low nibbles) and 2c + 1 (high nibbles); q5_K adds bit
 * 2c (2c + 1) of qh[l] as the fifth bit of element l. */
static inline void q45_K_codes(const uint8_t qs[QK_K / 2], const uint8_t *qh,
                               int8x16_t q[8][2]) {
    for (int c = 0; c < 4; c++) {
        for (int h = 0; h < 2; h++) {
            uint8x16_t lo, hi;
            nibbles(qs + 32 * c + 16 * h, &lo, &hi);
            if (qh) {
                const uint8x16_t b = vld1q_u8(qh + 16 * h);
                const uint8x16_t sixteen = vdupq_n_u8(0x10);
                lo = vorrq_u8(lo, vandq_u8(vtstq_u8(b, vdupq_n_u8((uint8_t)(1u << (2 * c)))), sixteen));
                hi = vorrq_u8(hi, vandq_u8(vtstq_u8(b, vdupq_n_u8((uint8_t)(2u << (2 * c)))), sixteen));
            }
            q[2 * c][h] = vreinterpretq_s8_u8(lo);
            q[2 * c + 1][h] = vreinterpretq_s8_u8(hi);
        }
    }
}

static void q4_K_dot(int64_t n, float *restrict s, const void *restrict w,
                     const void *restrict a) {
    const struct block_q4_K *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        int8x16_t q[8][2];
        q45_K_codes(x[i].qs, NULL, q);
        k_affine_neon(acc, i, q, x[i].scales, x[i].d, x[i].dmin, &y[i]);
    }
    *s = acc4_total(acc);
}

static void q5_K_dot(int64_t n, float *restrict s, const void *restrict w,
                     const void *restrict a) {
    const struct block_q5_K *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        int8x16_t q[8][2];
        q45_K_codes(x[i].qs, x[i].qh, q);
        k_affine_neon(acc, i, q, x[i].scales, x[i].d, x[i].dmin, &y[i]);
    }
    *s = acc4_total(acc);
}

/* The 2-bit codes of element 128h + 32k + l (bits 2k..2k+1 of qs[32h + l]) as out[h][k][0..1]
 * (runs of 16: l < 16 and l >= 16); q2_K's codes and q3_K's low bits. */
static inline void k2_codes(const uint8_t qs[QK_K / 4], uint8x16_t out[2][4][2]) {
    const uint8x16_t three = vdupq_n_u8(3);
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 2; r++) {
            const uint8x16_t v = vld1q_u8(qs + 32 * h + 16 * r);
            out[h][0][r] = vandq_u8(v, three);
            out[h][1][r] = vandq_u8(vshrq_n_u8(v, 2), three);
            out[h][2][r] = vandq_u8(vshrq_n_u8(v, 4), three);
            out[h][3][r] = vshrq_n_u8(v, 6);
        }
}

/* q2_K: group g = 2(4h + k) + r of 16 has scale scales[g] & 15 and min scales[g] >> 4. */
static void q2_K_dot(int64_t n, float *restrict s, const void *restrict w,
                     const void *restrict a) {
    const struct block_q2_K *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        uint8x16_t c[2][4][2];
        k2_codes(x[i].qs, c);
        int isum = 0, msum = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            const int dot = dot16_sum(vreinterpretq_s8_u8(c[g / 8][(g / 2) % 4][g % 2]),
                                      y[i].qs + 16 * g);
            isum += (x[i].scales[g] & 15) * dot;
            msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
        }
        acc4_fma(acc, i, y[i].d * fp16_to_f32(x[i].d), (float)isum);
        acc4_fma(acc, i, -(y[i].d * fp16_to_f32(x[i].dmin)), (float)msum);
    }
    *s = acc4_total(acc);
}

/* q3_K: the 2-bit code minus 4 where bit 4h + k of hmask[l] is clear (e = 128h + 32k + l). */
static void q3_K_dot(int64_t n, float *restrict s, const void *restrict w,
                     const void *restrict a) {
    const struct block_q3_K *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        uint8x16_t c[2][4][2];
        k2_codes(x[i].qs, c);
        const uint8x16_t hm[2] = {vld1q_u8(x[i].hmask), vld1q_u8(x[i].hmask + 16)};
        int isum = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            const int h = g / 8, k = (g / 2) % 4, r = g % 2;
            const uint8x16_t clear =
                vceqq_u8(vandq_u8(hm[r], vdupq_n_u8((uint8_t)(1u << (4 * h + k)))), vdupq_n_u8(0));
            const int8x16_t code = vsubq_s8(vreinterpretq_s8_u8(c[h][k][r]),
                                            vreinterpretq_s8_u8(vandq_u8(clear, vdupq_n_u8(4))));
            isum += q3_K_scale(x[i].scales, g) * dot16_sum(code, y[i].qs + 16 * g);
        }
        acc4_fma(acc, i, y[i].d * fp16_to_f32(x[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

/* q6_K: element 128h + 32k + l has low bits from ql[64h + l + 32(k & 1)] (low nibble for k < 2)
 * and top bits 2k..2k+1 of qh[32h + l]; code - 32, scale scales[e / 16]. */
static void q6_K_dot(int64_t n, float *restrict s, const void *restrict w,
                     const void *restrict a) {
    const struct block_q6_K *x = w;
    const struct block_q8_K *y = a;
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        int isum = 0;
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++)
                for (int r = 0; r < 2; r++) {
                    const uint8x16_t ql = vld1q_u8(x[i].ql + 64 * h + 32 * (k & 1) + 16 * r);
                    const uint8x16_t qh = vld1q_u8(x[i].qh + 32 * h + 16 * r);
                    const uint8x16_t lo = k < 2 ? vandq_u8(ql, vdupq_n_u8(0x0f)) : vshrq_n_u8(ql, 4);
                    const uint8x16_t hi =
                        vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(-2 * k))), vdupq_n_u8(3));
                    const int8x16_t code = vsubq_s8(
                        vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
                    const int e = 128 * h + 32 * k + 16 * r;
                    isum += x[i].scales[e / 16] * dot16_sum(code, y[i].qs + e);
                }
        acc4_fma(acc, i, y[i].d * fp16_to_f32(x[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

static void iq4_xs_dot(int64_t n, float *restrict s, const void *restrict w,
                       const void *restrict a) {
    const struct block_iq4_xs *x = w;
    const struct block_q8_K *y = a;
    const int8x16_t tab = vld1q_s8(quant_iq4nl_values);
    float acc[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        int isum = 0;
        for (int j = 0; j < QK_K / 32; j++)
            isum += iq4_xs_scale(&x[i], j) * nibble_run_dot(x[i].qs + 16 * j, tab, y[i].qs + 32 * j);
        acc4_fma(acc, i, y[i].d * fp16_to_f32(x[i].d), (float)isum);
    }
    *s = acc4_total(acc);
}

/* ==== registration ============================================================================ */

#define NEON_FOUR(dot) VEC_DOT4_GENERIC(dot) VEC_DOT_ROWS4_GENERIC(dot)
NEON_FOUR(f32_dot)
NEON_FOUR(f16_dot)
NEON_FOUR(bf16_dot)
NEON_FOUR(q4_0_dot)
NEON_FOUR(q4_1_dot)
NEON_FOUR(q5_0_dot)
NEON_FOUR(q5_1_dot)
NEON_FOUR(q8_0_dot)
NEON_FOUR(iq4_nl_dot)
NEON_FOUR(mxfp4_dot)
NEON_FOUR(q2_K_dot)
NEON_FOUR(q3_K_dot)
NEON_FOUR(q4_K_dot)
NEON_FOUR(q5_K_dot)
NEON_FOUR(q6_K_dot)
NEON_FOUR(iq4_xs_dot)

#define NEON_SET(tab, n_tab, t, fn)                                                               \
    quant_set_kernel(tab, n_tab, t, fn, fn##_x4, NULL, fn##_r4, NEON_ISA)

/* Contract in quant.h. */
void NEON_REGISTER(struct quant_kernels *tab, int n_tab) {
    NEON_SET(tab, n_tab, QTYPE_F32, f32_dot);
    NEON_SET(tab, n_tab, QTYPE_F16, f16_dot);
    NEON_SET(tab, n_tab, QTYPE_BF16, bf16_dot);
    NEON_SET(tab, n_tab, QTYPE_Q4_0, q4_0_dot);
    NEON_SET(tab, n_tab, QTYPE_Q4_1, q4_1_dot);
    NEON_SET(tab, n_tab, QTYPE_Q5_0, q5_0_dot);
    NEON_SET(tab, n_tab, QTYPE_Q5_1, q5_1_dot);
    NEON_SET(tab, n_tab, QTYPE_Q8_0, q8_0_dot);
    NEON_SET(tab, n_tab, QTYPE_IQ4_NL, iq4_nl_dot);
    NEON_SET(tab, n_tab, QTYPE_MXFP4, mxfp4_dot);
    NEON_SET(tab, n_tab, QTYPE_Q2_K, q2_K_dot);
    NEON_SET(tab, n_tab, QTYPE_Q3_K, q3_K_dot);
    NEON_SET(tab, n_tab, QTYPE_Q4_K, q4_K_dot);
    NEON_SET(tab, n_tab, QTYPE_Q5_K, q5_K_dot);
    NEON_SET(tab, n_tab, QTYPE_Q6_K, q6_K_dot);
    NEON_SET(tab, n_tab, QTYPE_IQ4_XS, iq4_xs_dot);
}
