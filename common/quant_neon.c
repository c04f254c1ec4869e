/* quant_neon.c - the NEON twins (Armv8-A Advanced SIMD) of quant.c's reference dot products, for
 * f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K and
 * iq4_xs. quant_neondot.c compiles this file a second time with the dot-product extension
 * (SDOT), registered as "neondot" where the CPU has it (os_cpu_arm_features), and quant_i8mm.c a
 * third time with SMMLA as well ("i8mm"), where the quantized types also get vec_dot_2xn (two
 * weight rows against two or four activation rows; SMMLA's 2x2 tiles, but SDOT for q4_K, q5_K and
 * q6_K). Invariant (quant.h's accumulation contract): NEON computes each block's integer sums only
 * (exact: int8 products widened to int16, pairs added into int32, SDOT or SMMLA); every float
 * operation is the reference's own expression, in its order, so the results are its bits. q4_K,
 * q5_K and q6_K take the contract's 8 integer lane sums per block (lane l: codes 4l..4l+3 of every
 * 32, SDOT's own lanes; without SDOT product pairs added in int16, where they fit) and its 8 float
 * lanes in two float32x4_t (vfmaq is fused, as fmaf); SMMLA's 8-code sums do not split into those
 * lanes. The quantized types unpack a weight block once for all the columns of vec_dot2 and
 * vec_dot4 (quant_neon_simd.h's column driver, or K45_TYPE's). */
#include "quant_neon_simd.h"

#if defined(__ARM_FEATURE_MATMUL_INT8)
#define NEON_REGISTER quant_register_i8mm
#elif defined(__ARM_FEATURE_DOTPROD)
#define NEON_REGISTER quant_register_neondot
#else
#define NEON_REGISTER quant_register_neon
#endif

/* ==== unpacking =============================================================================== */

/* Lane j (0..15): 0x10 where bit j of m is set (a q5 code's fifth bit). */
static inline uint8x16_t bit5_of(uint32_t m) {
    return vandq_u8(bits16((uint8_t)m, (uint8_t)(m >> 8)), vdupq_n_u8(0x10));
}

/* The low (lo) and high (hi) nibbles of 16 bytes. */
static inline void nibbles(const uint8_t *qs, uint8x16_t *lo, uint8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vandq_u8(q, vdupq_n_u8(0x0f));
    *hi = vshrq_n_u8(q, 4);
}

/* tab[code] for a 32-element nibble run: q[0] elements 0..15 (low nibbles), q[1] 16..31. */
static inline void nibble_run_codes(const uint8_t *qs, int8x16_t tab, int8x16_t q[2]) {
    uint8x16_t lo, hi;
    nibbles(qs, &lo, &hi);
    q[0] = vqtbl1q_s8(tab, lo);
    q[1] = vqtbl1q_s8(tab, hi);
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

/* name_block and the kernels of a 32-element type against Q8_0: codes(x, q) unpacks weight block x
 * into its 32 signed codes q[0..1]; D(x) is the weight's float factor of d = D(x) * fp16(y.d). */
#define Q8_0_TYPE(name, WB, codes, D)                                                             \
    NEON_INLINE void name##_block(const WB *x, const struct block_q8_0 *const *y, const int nc,  \
                                  float acc[][4], int64_t i) {                                    \
        int8x16_t q[2];                                                                           \
        codes(x, q);                                                                              \
        for (int c = 0; c < nc; c++)                                                              \
            acc4_fma(acc[c], i, D(x) * fp16_to_f32(y[c]->d), (float)dot32(q[0], q[1], y[c]->qs)); \
    }                                                                                             \
    NEON_2XN_INLINE void name##_tile(const WB *const x[2], const struct block_q8_0 *const *y,     \
                                     const int n_act, float acc[][4][4], int64_t i) {             \
        int8x16_t q[2][2];                                                                        \
        codes(x[0], q[0]);                                                                        \
        codes(x[1], q[1]);                                                                        \
        for (int p = 0; p < n_act; p += 2) {                                                      \
            int32_t t[4];                                                                         \
            tile32(q, y[p]->qs, y[p + 1]->qs, t);                                                 \
            for (int r = 0; r < 2; r++)                                                           \
                for (int c = 0; c < 2; c++)                                                       \
                    acc4_fma(acc[r][p + c], i, D(x[r]) * fp16_to_f32(y[p + c]->d),                \
                             (float)t[2 * r + c]);                                                \
        }                                                                                         \
    }                                                                                             \
    NEON_COLS_KERNELS(name, WB, struct block_q8_0, 32)                                            \
    NEON_2XN_KERNELS(name, WB, struct block_q8_0, 32)
/* Against Q8_1 (codes >= 0): d = fp16(x.d) * fp16(y.d), then fmaf(fp16(x.m), fp16(y.s)). */
#define Q8_1_TYPE(name, WB, codes)                                                                \
    NEON_INLINE void name##_block(const WB *x, const struct block_q8_1 *const *y, const int nc,  \
                                  float acc[][4], int64_t i) {                                    \
        int8x16_t q[2];                                                                           \
        codes(x, q);                                                                              \
        for (int c = 0; c < nc; c++) {                                                            \
            acc4_fma(acc[c], i, fp16_to_f32(x->d) * fp16_to_f32(y[c]->d),                         \
                     (float)dot32(q[0], q[1], y[c]->qs));                                         \
            acc4_fma(acc[c], i, fp16_to_f32(x->m), fp16_to_f32(y[c]->s));                         \
        }                                                                                         \
    }                                                                                             \
    NEON_2XN_INLINE void name##_tile(const WB *const x[2], const struct block_q8_1 *const *y,     \
                                     const int n_act, float acc[][4][4], int64_t i) {             \
        int8x16_t q[2][2];                                                                        \
        codes(x[0], q[0]);                                                                        \
        codes(x[1], q[1]);                                                                        \
        for (int p = 0; p < n_act; p += 2) {                                                      \
            int32_t t[4];                                                                         \
            tile32(q, y[p]->qs, y[p + 1]->qs, t);                                                 \
            for (int r = 0; r < 2; r++)                                                           \
                for (int c = 0; c < 2; c++) {                                                     \
                    acc4_fma(acc[r][p + c], i, fp16_to_f32(x[r]->d) * fp16_to_f32(y[p + c]->d),   \
                             (float)t[2 * r + c]);                                                \
                    acc4_fma(acc[r][p + c], i, fp16_to_f32(x[r]->m), fp16_to_f32(y[p + c]->s));   \
                }                                                                                 \
        }                                                                                         \
    }                                                                                             \
    NEON_COLS_KERNELS(name, WB, struct block_q8_1, 32)                                            \
    NEON_2XN_KERNELS(name, WB, struct block_q8_1, 32)

#define D_FP16(x) fp16_to_f32((x)->d)
#define D_E8M0(x) quant_e8m0_half((x)->e)

static inline void q8_0_codes(const struct block_q8_0 *x, int8x16_t q[2]) {
    q[0] = vld1q_s8(x->qs);
    q[1] = vld1q_s8(x->qs + 16);
}

static inline void q4_0_codes(const struct block_q4_0 *x, int8x16_t q[2]) {
    uint8x16_t lo, hi;
    nibbles(x->qs, &lo, &hi);
    q[0] = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
    q[1] = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
}

static inline void q4_1_codes(const struct block_q4_1 *x, int8x16_t q[2]) {
    uint8x16_t lo, hi;
    nibbles(x->qs, &lo, &hi);
    q[0] = vreinterpretq_s8_u8(lo);
    q[1] = vreinterpretq_s8_u8(hi);
}

/* q5 codes 0..31 of a block: nibbles with qh's bits j (q[0]) and j + 16 (q[1]) as the fifth bit. */
static inline void q5_codes(const uint8_t qs[16], const uint8_t qh[4], int8x16_t q[2]) {
    const uint32_t bits = q5_high_bits(qh);
    uint8x16_t l, h;
    nibbles(qs, &l, &h);
    q[0] = vreinterpretq_s8_u8(vorrq_u8(l, bit5_of(bits)));
    q[1] = vreinterpretq_s8_u8(vorrq_u8(h, bit5_of(bits >> 16)));
}

static inline void q5_0_codes(const struct block_q5_0 *x, int8x16_t q[2]) {
    q5_codes(x->qs, x->qh, q);
    q[0] = vsubq_s8(q[0], vdupq_n_s8(16));
    q[1] = vsubq_s8(q[1], vdupq_n_s8(16));
}

static inline void q5_1_codes(const struct block_q5_1 *x, int8x16_t q[2]) {
    q5_codes(x->qs, x->qh, q);
}

static inline void iq4_nl_codes(const struct block_iq4_nl *x, int8x16_t q[2]) {
    nibble_run_codes(x->qs, vld1q_s8(quant_iq4nl_values), q);
}

static inline void mxfp4_codes(const struct block_mxfp4 *x, int8x16_t q[2]) {
    nibble_run_codes(x->qs, vld1q_s8(quant_mxfp4_values), q);
}

Q8_0_TYPE(q8_0, struct block_q8_0, q8_0_codes, D_FP16)
Q8_0_TYPE(q4_0, struct block_q4_0, q4_0_codes, D_FP16)
Q8_0_TYPE(q5_0, struct block_q5_0, q5_0_codes, D_FP16)
Q8_0_TYPE(iq4_nl, struct block_iq4_nl, iq4_nl_codes, D_FP16)
Q8_0_TYPE(mxfp4, struct block_mxfp4, mxfp4_codes, D_E8M0)
Q8_1_TYPE(q4_1, struct block_q4_1, q4_1_codes)
Q8_1_TYPE(q5_1, struct block_q5_1, q5_1_codes)

/* ==== q2_K, q3_K and iq4_xs against Q8_K (four block accumulators) =========================== */

/* d = a.d * fp16(w.d); q2_K adds fmaf(-(a.d * fp16(w.dmin)), msum). */
#define D_Q8K(x, y) ((y)->d * fp16_to_f32((x)->d))
/* name_block and the kernels of a K-quant with mins, q2_K (neon_k16's mn filled by decode). */
#define K16_MIN_TERM(name, WB, decode)                                                            \
    NEON_INLINE void name##_block(const WB *x, const struct block_q8_K *const *y, const int nc,   \
                                  float acc[][4], int64_t i) {                                    \
        struct neon_k16 k;                                                                        \
        decode(x, &k);                                                                            \
        for (int c = 0; c < nc; c++) {                                                            \
            acc4_fma(acc[c], i, D_Q8K(x, y[c]), (float)k16_isum(&k, y[c]->qs));                   \
            acc4_fma(acc[c], i, -(y[c]->d * fp16_to_f32(x->dmin)),                                \
                     (float)k16_msum(&k, y[c]->bsums));                                           \
        }                                                                                         \
    }                                                                                             \
    NEON_2XN_INLINE void name##_tile(const WB *const x[2], const struct block_q8_K *const *y,     \
                                     const int n_act, float acc[][4][4], int64_t i) {             \
        struct neon_k16 k[2];                                                                     \
        decode(x[0], &k[0]);                                                                      \
        decode(x[1], &k[1]);                                                                      \
        for (int p = 0; p < n_act; p += 2) {                                                      \
            int32_t t[4];                                                                         \
            k16_isum_tile(&k[0], &k[1], y[p]->qs, y[p + 1]->qs, t);                               \
            for (int r = 0; r < 2; r++)                                                           \
                for (int c = 0; c < 2; c++) {                                                     \
                    const struct block_q8_K *yc = y[p + c];                                       \
                    acc4_fma(acc[r][p + c], i, D_Q8K(x[r], yc), (float)t[2 * r + c]);             \
                    acc4_fma(acc[r][p + c], i, -(yc->d * fp16_to_f32(x[r]->dmin)),                \
                             (float)k16_msum(&k[r], yc->bsums));                                  \
                }                                                                                 \
        }                                                                                         \
    }                                                                                             \
    NEON_COLS_KERNELS(name, WB, struct block_q8_K, QK_K)                                          \
    NEON_2XN_KERNELS(name, WB, struct block_q8_K, QK_K)

/* The 2-bit codes of element 128h + 32k + l (bits 2k..2k+1 of qs[32h + l]) into group
 * g = 8h + 2k + r (r: l < 16 or l >= 16); q2_K's codes and q3_K's low bits. */
static inline void k2_codes(const uint8_t qs[QK_K / 4], int8x16_t q[16]) {
    const uint8x16_t three = vdupq_n_u8(3);
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 2; r++) {
            const uint8x16_t v = vld1q_u8(qs + 32 * h + 16 * r);
            q[8 * h + r] = vreinterpretq_s8_u8(vandq_u8(v, three));
            q[8 * h + 2 + r] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 2), three));
            q[8 * h + 4 + r] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 4), three));
            q[8 * h + 6 + r] = vreinterpretq_s8_u8(vshrq_n_u8(v, 6));
        }
}

/* q2_K: group g has scale scales[g] & 15 and min scales[g] >> 4. */
static inline void q2_K_decode(const struct block_q2_K *x, struct neon_k16 *k) {
    k2_codes(x->qs, k->q);
    for (int g = 0; g < QK_K / 16; g++) {
        k->sc[g] = x->scales[g] & 15;
        k->mn[g] = x->scales[g] >> 4;
    }
}

/* q3_K: the 2-bit code minus 4 where bit 4h + k of hmask[l] is clear (e = 128h + 32k + l). */
static inline void q3_K_decode(const struct block_q3_K *x, struct neon_k16 *k) {
    k2_codes(x->qs, k->q);
    const uint8x16_t hm[2] = {vld1q_u8(x->hmask), vld1q_u8(x->hmask + 16)};
    for (int g = 0; g < QK_K / 16; g++) {
        const int h = g / 8, kk = (g / 2) % 4, r = g % 2;
        const uint8x16_t clear =
            vceqq_u8(vandq_u8(hm[r], vdupq_n_u8((uint8_t)(1u << (4 * h + kk)))), vdupq_n_u8(0));
        k->q[g] = vsubq_s8(k->q[g], vreinterpretq_s8_u8(vandq_u8(clear, vdupq_n_u8(4))));
        k->sc[g] = q3_K_scale(x->scales, g);
    }
}

/* iq4_xs: sub-block j's 32 table values (groups 2j, 2j + 1) with its 6-bit scale minus 32. */
static inline void iq4_xs_decode(const struct block_iq4_xs *x, struct neon_k16 *k) {
    const int8x16_t tab = vld1q_s8(quant_iq4nl_values);
    for (int j = 0; j < QK_K / 32; j++) {
        nibble_run_codes(x->qs + 16 * j, tab, &k->q[2 * j]);
        k->sc[2 * j] = k->sc[2 * j + 1] = iq4_xs_scale(x, j);
    }
}

K16_MIN_TERM(q2_K, struct block_q2_K, q2_K_decode)
K16_ONE_TERM(q3_K, struct block_q3_K, q3_K_decode, D_Q8K)
K16_ONE_TERM(iq4_xs, struct block_iq4_xs, iq4_xs_decode, D_Q8K)

/* ==== q4_K, q5_K and q6_K against Q8_K: the lane contract (quant.h) =========================== */

/* A q4_K, q5_K or q6_K weight block as the lane contract wants it: q[g] the codes of group g,
 * elements 16g..16g+15 (SDOT's lanes of q[g] are the contract's lanes 4(g % 2)..4(g % 2)+3), sc[g]
 * the group's scale (q4_K's and q5_K's 6-bit sub-block scale, in both of its groups; q6_K's
 * int8), mn[sb] sub-block sb's min (q4_K, q5_K), d and dmin the block's fp16 factors (q6_K: d). */
struct neon_k45 {
    int8x16_t q[16];
    int8_t sc[16];
    int16x8_t mn;
    float d, dmin;
};

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "k_scales_mins reads scales[] as little-endian 32-bit words"
#endif
/* The 8 scales and 8 mins of scales[12] (k_scale_min's layout) as bytes, four at a time (ggml's
 * 32-bit steps): sc[sb] and mn[sb]. */
static inline void k_scales_mins(const uint8_t scales[K_SCALE_SIZE], uint8_t sc[8],
                                 uint8_t mn[8]) {
    uint32_t u[3], o[4];
    memcpy(u, scales, sizeof(u));
    o[0] = u[0] & 0x3f3f3f3f;                                     /* scales 0-3 */
    o[1] = (u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4; /* scales 4-7 */
    o[2] = u[1] & 0x3f3f3f3f;                                     /* mins 0-3 */
    o[3] = (u[2] >> 4 & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4; /* mins 4-7 */
    memcpy(sc, o, 8);
    memcpy(mn, o + 2, 8);
}

/* k->d and k->dmin from the block's fp16 d and dmin (FCVTL: exact, fp16_to_f32's bits, without
 * its call). */
static inline void k45_factors(fp16_t d, fp16_t dmin, struct neon_k45 *k) {
    const float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(vset_lane_u16(dmin, vdup_n_u16(d), 1)));
    k->d = vgetq_lane_f32(f, 0);
    k->dmin = vgetq_lane_f32(f, 1);
}

/* 32-byte run c of qs holds sub-block 2c (low nibbles) and 2c + 1 (high nibbles); q5_K adds bit
 * 2c (2c + 1) of qh[l] as the fifth bit of element l. */
static inline void q45_K_decode(const uint8_t qs[QK_K / 2], const uint8_t *qh,
                                const uint8_t scales[K_SCALE_SIZE], fp16_t d, fp16_t dmin,
                                struct neon_k45 *k) {
    for (int c = 0; c < 4; c++) {
        for (int h = 0; h < 2; h++) {
            uint8x16_t lo, hi;
            nibbles(qs + 32 * c + 16 * h, &lo, &hi);
            if (qh) {
                const uint8x16_t b = vld1q_u8(qh + 16 * h), sixteen = vdupq_n_u8(0x10);
                const uint8x16_t b0 = vtstq_u8(b, vdupq_n_u8((uint8_t)(1u << (2 * c))));
                const uint8x16_t b1 = vtstq_u8(b, vdupq_n_u8((uint8_t)(2u << (2 * c))));
                lo = vorrq_u8(lo, vandq_u8(b0, sixteen));
                hi = vorrq_u8(hi, vandq_u8(b1, sixteen));
            }
            k->q[4 * c + h] = vreinterpretq_s8_u8(lo);
            k->q[4 * c + 2 + h] = vreinterpretq_s8_u8(hi);
        }
    }
    uint8_t sc[8], mn[8];
    k_scales_mins(scales, sc, mn);
    const uint8x8_t s = vld1_u8(sc); /* 0..63: as int8 */
    vst1q_s8(k->sc, vreinterpretq_s8_u8(vcombine_u8(vzip1_u8(s, s), vzip2_u8(s, s))));
    k->mn = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    k45_factors(d, dmin, k);
}

static inline void q4_K_decode(const struct block_q4_K *x, struct neon_k45 *k) {
    q45_K_decode(x->qs, NULL, x->scales, x->d, x->dmin, k);
}

static inline void q5_K_decode(const struct block_q5_K *x, struct neon_k45 *k) {
    q45_K_decode(x->qs, x->qh, x->scales, x->d, x->dmin, k);
}

/* q6_K: element 128h + 32k + l (group 8h + 2k + l / 16) has low bits from ql[64h + l + 32(k & 1)]
 * (low nibble for k < 2) and top bits 2k..2k+1 of qh[32h + l]: the stored code, 0..63 (the offset
 * of 32 is k6_offset_lanes'); group g's scale scales[g]. */
static inline void q6_K_decode(const struct block_q6_K *x, struct neon_k45 *k) {
    for (int h = 0; h < 2; h++)
        for (int kk = 0; kk < 4; kk++)
            for (int r = 0; r < 2; r++) {
                const uint8x16_t ql = vld1q_u8(x->ql + 64 * h + 32 * (kk & 1) + 16 * r);
                const uint8x16_t qh = vld1q_u8(x->qh + 32 * h + 16 * r);
                const uint8x16_t lo = kk < 2 ? vandq_u8(ql, vdupq_n_u8(0x0f)) : vshrq_n_u8(ql, 4);
                const uint8x16_t hi =
                    vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(-2 * kk))), vdupq_n_u8(3));
                k->q[8 * h + 2 * kk + r] = vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4)));
            }
    vst1q_s8(k->sc, vld1q_s8(x->scales));
    k45_factors(x->d, 0, k);
}

/* lane[h] += group 2sb + h's lanes 4h..4h+3 against its activation codes (y0: elements 32sb..
 * 32sb+15, y1: the next 16), times its scale. Exact: |lane| <= 8 * 63 * 4 * 31 * 128 < 2^24
 * (q4_K, q5_K), 8 * 128 * 4 * 63 * 128 < 2^25 (q6_K); without SDOT the int16 pairs of products
 * of codes 0..63 with int8 ones stay within 2 * 63 * 128. */
NEON_INLINE void k45_sub(int32x4_t lane[2], const struct neon_k45 *k, int sb, int8x16_t y0,
                         int8x16_t y1) {
    lane[0] = vmlaq_n_s32(lane[0], dot16_lanes(k->q[2 * sb], y0), k->sc[2 * sb]);
    lane[1] = vmlaq_n_s32(lane[1], dot16_lanes(k->q[2 * sb + 1], y1), k->sc[2 * sb + 1]);
}

/* The block's 8 lane sums of k0 against Q8_K codes y into l0 (lanes 0-3, 4-7), and of k1 into l1
 * where k1 is not NULL (two weight rows share each activation load). */
NEON_INLINE void k45_lanes(const struct neon_k45 *k0, const struct neon_k45 *k1, const int8_t *y,
                           int32x4_t l0[2], int32x4_t l1[2]) {
    l0[0] = l0[1] = l1[0] = l1[1] = vdupq_n_s32(0);
    for (int sb = 0; sb < 8; sb++) {
        const int8x16_t y0 = vld1q_s8(y + 32 * sb), y1 = vld1q_s8(y + 32 * sb + 16);
        k45_sub(l0, k0, sb, y0, y1);
        if (k1)
            k45_sub(l1, k1, sb, y0, y1);
    }
}

/* q4_K's 4 min lanes (lane j: sub-blocks 2j and 2j + 1 of m * sum(q_a), sum(q_a) from two bsums;
 * q5_K adds them up): exact, |sum(q_a)| <= 4096 in int16. */
NEON_INLINE int32x4_t k45_min_lanes(int16x8_t mn, const int16_t bsums[16]) {
    const int16x8_t sum = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    return vpaddq_s32(vmull_s16(vget_low_s16(mn), vget_low_s16(sum)), vmull_high_s16(mn, sum));
}

/* q6_K's offset in the contract's lanes: off[h] lanes 4h..4h+3, lane l's
 * 32 * (sc[2l] * bsums[2l] + sc[2l + 1] * bsums[2l + 1]) (exact: |sc * bsum| <= 128 * 16 * 128). */
NEON_INLINE void k6_offset_lanes(const int8_t sc[16], const int16_t bsums[16], int32x4_t off[2]) {
    for (int h = 0; h < 2; h++) {
        const int16x8_t s = vmovl_s8(vld1_s8(sc + 8 * h)), b = vld1q_s16(bsums + 8 * h);
        const int32x4_t p =
            vpaddq_s32(vmull_s16(vget_low_s16(s), vget_low_s16(b)), vmull_high_s16(s, b));
        off[h] = vshlq_n_s32(p, 5);
    }
}

/* One output's float state: the 8 lane accumulators (acc[h] holds lanes 4h..4h+3), q4_K's 4 min
 * lanes (macc) or q5_K's one (msum); all +0 at the start. */
struct k45_acc {
    float32x4_t acc[2], macc;
    float msum;
};

NEON_INLINE void k45_acc_zero(struct k45_acc *a) {
    a->acc[0] = a->acc[1] = a->macc = vdupq_n_f32(0.0f);
    a->msum = 0.0f;
}

/* Block b's float operations for weight block k against activation block y, given its lanes
 * (q6_K, min_lanes 0: less k6_offset_lanes): acc[l] = fmaf(d_b, lane_l, acc[l]) (vfmaq is fused,
 * as fmaf), then the min term into q4_K's 4 lanes (min_lanes 4) or q5_K's msum (min_lanes 1). */
NEON_INLINE void k45_acc_block(struct k45_acc *a, const struct neon_k45 *k,
                               const struct block_q8_K *y, const int32x4_t lane[2],
                               const int min_lanes) {
    const float d = y->d * k->d;
    int32x4_t l[2] = {lane[0], lane[1]};
    if (min_lanes == 0) {
        int32x4_t off[2];
        k6_offset_lanes(k->sc, y->bsums, off);
        l[0] = vsubq_s32(l[0], off[0]);
        l[1] = vsubq_s32(l[1], off[1]);
    }
    a->acc[0] = vfmaq_n_f32(a->acc[0], vcvtq_f32_s32(l[0]), d);
    a->acc[1] = vfmaq_n_f32(a->acc[1], vcvtq_f32_s32(l[1]), d);
    if (min_lanes == 0)
        return;
    const float dmin = -(y->d * k->dmin);
    const int32x4_t mlane = k45_min_lanes(k->mn, y->bsums);
    if (min_lanes == 4)
        a->macc = vfmaq_n_f32(a->macc, vcvtq_f32_s32(mlane), dmin);
    else
        a->msum = fmaf(dmin, (float)vaddvq_s32(mlane), a->msum);
}

/* ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)), plus ((macc0 + macc2) +
 * (macc1 + macc3)) (min_lanes 4) or msum (1); nothing more for q6_K (0). */
NEON_INLINE float k45_total(const struct k45_acc *a, const int min_lanes) {
    const float32x4_t s = vaddq_f32(a->acc[0], a->acc[1]);
    const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    const float sum = vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
    if (min_lanes == 0)
        return sum;
    if (min_lanes == 1)
        return sum + a->msum;
    const float32x2_t m = vadd_f32(vget_low_f32(a->macc), vget_high_f32(a->macc));
    return sum + (vget_lane_f32(m, 0) + vget_lane_f32(m, 1));
}

/* name_cols (the column driver: vec_dot, vec_dot2, vec_dot4, vec_dot_rows4) and name_2cols (the
 * two-row vec_dot_2xn of the "i8mm" builds, SDOT too: SMMLA's 8-code sums do not split into the
 * contract's 4-code lanes) of q4_K (MIN_LANES 4), q5_K (1) or q6_K (0: no min term). Each weight
 * block is decoded once for all its columns (and, in name_2cols, each activation load serves both
 * rows); every output takes exactly vec_dot's float operations. */
#define K45_TYPE(name, WB, decode, MIN_LANES)                                                     \
    NEON_INLINE void name##_cols(int64_t n, float *restrict s, const void *restrict w,           \
                                 const void *const *a, const int nc) {                            \
        const WB *x = w;                                                                          \
        struct k45_acc acc[4];                                                                    \
        for (int c = 0; c < nc; c++)                                                              \
            k45_acc_zero(&acc[c]);                                                                \
        for (int64_t i = 0; i < n / QK_K; i++) {                                                  \
            struct neon_k45 k;                                                                    \
            prefetch_ahead(&x[i], sizeof(WB));                                                    \
            decode(&x[i], &k);                                                                    \
            for (int c = 0; c < nc; c++) {                                                        \
                const struct block_q8_K *y = (const struct block_q8_K *)a[c] + i;                 \
                int32x4_t lane[2], none[2]; /* no second row */                                   \
                k45_lanes(&k, NULL, y->qs, lane, none);                                           \
                k45_acc_block(&acc[c], &k, y, lane, MIN_LANES);                                   \
            }                                                                                     \
        }                                                                                         \
        for (int c = 0; c < nc; c++)                                                              \
            s[c] = k45_total(&acc[c], MIN_LANES);                                                 \
    }                                                                                             \
    NEON_COLS_ENTRIES(name)                                                                       \
    NEON_2XN_INLINE void name##_2cols(int64_t n, float *restrict s, const void *restrict w,       \
                                      size_t row_bytes, const void *const *a, const int n_act) {  \
        const WB *x[2] = {w, (const void *)((const uint8_t *)w + row_bytes)};                     \
        struct k45_acc acc[2][4];                                                                 \
        for (int c = 0; c < n_act; c++)                                                           \
            k45_acc_zero(&acc[0][c]), k45_acc_zero(&acc[1][c]);                                   \
        for (int64_t i = 0; i < n / QK_K; i++) {                                                  \
            struct neon_k45 k[2];                                                                 \
            prefetch_ahead(&x[0][i], sizeof(WB));                                                 \
            prefetch_ahead(&x[1][i], sizeof(WB));                                                 \
            decode(&x[0][i], &k[0]);                                                              \
            decode(&x[1][i], &k[1]);                                                              \
            for (int c = 0; c < n_act; c++) {                                                     \
                const struct block_q8_K *y = (const struct block_q8_K *)a[c] + i;                 \
                int32x4_t l0[2], l1[2];                                                           \
                k45_lanes(&k[0], &k[1], y->qs, l0, l1);                                           \
                k45_acc_block(&acc[0][c], &k[0], y, l0, MIN_LANES);                               \
                k45_acc_block(&acc[1][c], &k[1], y, l1, MIN_LANES);                               \
            }                                                                                     \
        }                                                                                         \
        for (int r = 0; r < 2; r++)                                                               \
            for (int c = 0; c < n_act; c++)                                                       \
                s[r * n_act + c] = k45_total(&acc[r][c], MIN_LANES);                              \
    }                                                                                             \
    NEON_2XN_ENTRY(name)

K45_TYPE(q4_K, struct block_q4_K, q4_K_decode, 4)
K45_TYPE(q5_K, struct block_q5_K, q5_K_decode, 1)
K45_TYPE(q6_K, struct block_q6_K, q6_K_decode, 0)

/* ==== registration ============================================================================ */

#define NEON_FOUR(dot) VEC_DOT4_GENERIC(dot) VEC_DOT_ROWS4_GENERIC(dot)
NEON_FOUR(f32_dot)
NEON_FOUR(f16_dot)
NEON_FOUR(bf16_dot)

/* The float types: four vec_dot calls for vec_dot4 and vec_dot_rows4, no vec_dot2 (as AVX2's). */
#define NEON_SET_FLOAT(tab, n_tab, t, fn)                                                         \
    quant_set_kernel(tab, n_tab, t, fn, fn##_x4, NULL, fn##_r4, NEON_ISA)

/* Contract in quant.h. */
void NEON_REGISTER(struct quant_kernels *tab, int n_tab) {
    NEON_SET_FLOAT(tab, n_tab, QTYPE_F32, f32_dot);
    NEON_SET_FLOAT(tab, n_tab, QTYPE_F16, f16_dot);
    NEON_SET_FLOAT(tab, n_tab, QTYPE_BF16, bf16_dot);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q4_0, q4_0);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q4_1, q4_1);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q5_0, q5_0);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q5_1, q5_1);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q8_0, q8_0);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ4_NL, iq4_nl);
    NEON_SET_COLS(tab, n_tab, QTYPE_MXFP4, mxfp4);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q2_K, q2_K);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q3_K, q3_K);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q4_K, q4_K);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q5_K, q5_K);
    NEON_SET_COLS(tab, n_tab, QTYPE_Q6_K, q6_K);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ4_XS, iq4_xs);
}
