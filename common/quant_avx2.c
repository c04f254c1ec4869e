/* quant_avx2.c - AVX2+FMA+F16C twins of the reference vec_dot kernels in quant.c.
 * Each follows the accumulation contract of quant.h: per block the exact integer sums, computed
 * here with byte multiplies, then the contract's float operations through QUANT_DRIVER (quant_impl.h),
 * so every result is bit-identical to the reference. Signed-by-signed byte products use the
 * |x| * sign(y, x) trick, exact while the activation byte is never -128 (Q8_0/Q8_1/Q8_K codes lie
 * in [-127, 127] by construction); no maddubs pair here can reach 32767. */
#include <immintrin.h>
#include <string.h>

#include "quant.h"
#include "quant_impl.h"
#include "quant_simd256.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* 8 int32 lanes summing x[i]*y[i] over 32 signed bytes, given ax = |x| (x = -128 reads as 128);
 * y must not hold -128. */
static ALWAYS_INLINE __m256i dot_s8(__m256i ax, __m256i x, __m256i y) {
    const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* 8 int32 lanes summing u[i]*y[i] over 32 bytes, u unsigned and at most 63. */
static ALWAYS_INLINE __m256i dot_u8(__m256i u, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

/* ---- float kernels: 32 lanes as four __m256 (elements 0-7, 8-15, 16-23, 24-31) ---------------- */

/* The contract's reduction of the 32 lanes (l += l+16, +8, +4, +2, +1); returns lane 0. */
static ALWAYS_INLINE float lanes32_reduce(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 c = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 d = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 e = _mm_add_ps(d, _mm_movehl_ps(d, d));
    return _mm_cvtss_f32(_mm_add_ss(e, _mm_movehdup_ps(e)));
}

static ALWAYS_INLINE __m256 load_f16(const fp16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static ALWAYS_INLINE __m256 load_bf16(const bf16_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static ALWAYS_INLINE __m256 load_f32(const float *p) {
    return _mm256_loadu_ps(p);
}

#define FLOAT_DOT_AVX2(name, T, load, at)                                                         \
    static void name(int64_t n, float *restrict s, const void *restrict w,                        \
                     const void *restrict a) {                                                    \
        const T *x = w, *y = a;                                                                   \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                                \
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();                                \
        int64_t i = 0;                                                                            \
        for (; i + 32 <= n; i += 32) {                                                            \
            a0 = _mm256_fmadd_ps(load(x + i), load(y + i), a0);                                   \
            a1 = _mm256_fmadd_ps(load(x + i + 8), load(y + i + 8), a1);                           \
            a2 = _mm256_fmadd_ps(load(x + i + 16), load(y + i + 16), a2);                         \
            a3 = _mm256_fmadd_ps(load(x + i + 24), load(y + i + 24), a3);                         \
        }                                                                                         \
        float sum = lanes32_reduce(a0, a1, a2, a3);                                               \
        for (; i < n; i++)                                                                        \
            sum = fmaf(at(x + i), at(y + i), sum);                                                \
        *s = sum;                                                                                 \
    }                                                                                             \
    VEC_DOT4_GENERIC(name)                                                                        \
    VEC_DOT_ROWS4_GENERIC(name)

FLOAT_DOT_AVX2(f32_dot, float, load_f32, f32_at)
FLOAT_DOT_AVX2(f16_dot, fp16_t, load_f16, f16_at)
FLOAT_DOT_AVX2(bf16_dot, bf16_t, load_bf16, bf16_at)

/* ---- 32-element blocks against Q8_0 / Q8_1 ---------------------------------------------------- */

static ALWAYS_INLINE struct qsum s8_block(const struct s8_u *u, const int8_t *qy) {
    struct qsum r = {dot_s8(u->ax, u->x, _mm256_loadu_si256((const __m256i *)qy)),
                     _mm256_setzero_si256()};
    return r;
}

static ALWAYS_INLINE struct qsum u8_block(const __m256i *u, const int8_t *qy) {
    struct qsum r = {dot_u8(*u, _mm256_loadu_si256((const __m256i *)qy)), _mm256_setzero_si256()};
    return r;
}

static ALWAYS_INLINE void q8_0_unpack(const struct block_q8_0 *x, struct s8_u *u) {
    s8_set(u, _mm256_loadu_si256((const __m256i *)x->qs));
}
S8_TYPE(q8_0, struct block_q8_0)

static ALWAYS_INLINE void q4_0_unpack(const struct block_q4_0 *x, struct s8_u *u) {
    s8_set(u, _mm256_sub_epi8(nibbles32(x->qs), _mm256_set1_epi8(8)));
}
S8_TYPE(q4_0, struct block_q4_0)

/* q5_0, iq4_nl, mxfp4, q4_1, q5_1: unpacked as quant_simd256.h says */
S8_TYPE(q5_0, struct block_q5_0)
S8_TYPE(iq4_nl, struct block_iq4_nl)

static ALWAYS_INLINE struct qsum mxfp4_block(const struct s8_u *u, const struct block_q8_0 *y) {
    return s8_block(u, y->qs);
}

QUANT_DRIVER(mxfp4, struct block_mxfp4, struct block_q8_0, QK_MXFP4, struct s8_u, QTERM_ONE)
U8_TYPE(q4_1, struct block_q4_1)
U8_TYPE(q5_1, struct block_q5_1)

/* ---- K-quants and iq4_xs against Q8_K: 256-element blocks, eight 32-code chunks --------------- */

/* An unpacked 256-element block: the codes of chunk j (elements 32j..32j+31, unsigned, at most
 * 63), the int16 scales that multiply its pairs (kept compact: 16 ymm of scale vectors would not
 * fit the register file beside the codes), and the int16 vector the type's second sum or offset
 * correction multiplies the 16 bsums with. */
struct k_u {
    __m256i q[8];
    __m256i sc_lo, sc_hi; /* scales 0-7 and 8-15 as int16, each in both 128-bit lanes */
    __m256i sc16;         /* q2_K: its 16 mins; q4_K/q5_K: the 8 mins twice; q3_K, q6_K: scales */
    int per16;            /* 1: one scale per 16 weights (16 scales); 0: per 32 (8, in sc_lo) */
};

/* Int16 scale j in every lane, out of 8 int16 scales broadcast to both 128-bit lanes. */
static ALWAYS_INLINE __m256i scale_at(__m256i sc16, int j) {
    return _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* Int16 scale a in the low 128-bit lane and a+1 in the high one (one scale per 16 weights), out
 * of 8 int16 scales broadcast to both lanes. */
static ALWAYS_INLINE __m256i scale_pair(__m256i sc16, int a) {
    const __m256i lo = _mm256_set1_epi16((short)(0x0100 + 0x0202 * a));
    const __m256i hi = _mm256_set1_epi16((short)(0x0100 + 0x0202 * (a + 1)));
    return _mm256_shuffle_epi8(sc16, _mm256_permute2x128_si256(lo, hi, 0x20));
}

/* The multiplier of chunk j's 16 pairs. */
static ALWAYS_INLINE __m256i k_scale(const struct k_u *u, int j) {
    if (!u->per16)
        return scale_at(u->sc_lo, j);
    return scale_pair(j < 4 ? u->sc_lo : u->sc_hi, 2 * (j % 4));
}

/* 16 int16 scales (one per 16 weights) into sc_lo / sc_hi. */
static ALWAYS_INLINE void k_scales16(struct k_u *u, __m256i s16) {
    u->per16 = 1;
    u->sc_lo = _mm256_permute2x128_si256(s16, s16, 0x00);
    u->sc_hi = _mm256_permute2x128_si256(s16, s16, 0x11);
}

/* sum over the 8 chunks of madd(maddubs(q[j], y chunk j), scale): 8 int32 lanes. */
static ALWAYS_INLINE __m256i k_chunks_dot(const struct k_u *u, const int8_t *qy) {
    __m256i sum = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
        const __m256i p =
            _mm256_maddubs_epi16(u->q[j], _mm256_loadu_si256((const __m256i *)(qy + 32 * j)));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, k_scale(u, j)));
    }
    return sum;
}

/* sum bsums[g] * sc16[g] over the 16 groups of 16: 8 int32 lanes. */
static ALWAYS_INLINE __m256i k_bsums_dot(const struct k_u *u, const struct block_q8_K *y) {
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), u->sc16);
}

/* Types with a min term (q2_K, q4_K, q5_K): isum over the chunks, msum over the bsums. */
static ALWAYS_INLINE struct qsum k_min_block(const struct k_u *u, const struct block_q8_K *y) {
    struct qsum r = {k_chunks_dot(u, y->qs), k_bsums_dot(u, y)};
    return r;
}

/* Codes stored + 2^shift (q3_K, q6_K): sum sc*(q - 2^shift)*y = sum sc*q*y - (sum sc*bsum) <<
 * shift. */
static ALWAYS_INLINE struct qsum k_offset_block(const struct k_u *u, const struct block_q8_K *y,
                                                int shift) {
    struct qsum r = {_mm256_sub_epi32(k_chunks_dot(u, y->qs),
                                      _mm256_slli_epi32(k_bsums_dot(u, y), shift)),
                     _mm256_setzero_si256()};
    return r;
}

/* Unpacks the 12 bytes of 6-bit scales and mins of a q4_K/q5_K block into 16 bytes:
 * bytes 0..7 the scales of the 8 sub-blocks, bytes 8..15 their mins. */
static ALWAYS_INLINE __m128i k4_scales_mins(const uint8_t *p) {
    const uint32_t u0 = load_u32(p), u1 = load_u32(p + 4), u2 = load_u32(p + 8);
    const uint32_t sc_lo = u0 & 0x3f3f3f3fu;
    const uint32_t mn_lo = u1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
    return _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)mn_lo, (int)mn_hi);
}

/* q4_K/q5_K: the 8 scales (one per 32 weights) and sc16 = the mins, each twice (for bsums). */
static ALWAYS_INLINE void k4_scales_unpack(const uint8_t *scales, struct k_u *u) {
    const __m128i scm = k4_scales_mins(scales);
    u->per16 = 0;
    u->sc_lo = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
    u->sc_hi = u->sc_lo;
    u->sc16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
}

/* q4_K: chunk 2c is the low nibbles of qs[32c..32c+31], chunk 2c+1 their high nibbles. */
static ALWAYS_INLINE void q4_K_unpack(const struct block_q4_K *x, struct k_u *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    k4_scales_unpack(x->scales, u);
    _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
        u->q[2 * c] = _mm256_and_si256(qb, m4);
        u->q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4);
    }
}
K_LANE8_MIN_TYPE(q4_K, struct block_q4_K, 4)

/* q5_K: chunk 2c takes bit 2c of qh[l] as its fifth bit, chunk 2c+1 bit 2c+1. */
static ALWAYS_INLINE void q5_K_unpack(const struct block_q5_K *x, struct k_u *u) {
    const __m256i b4 = _mm256_set1_epi8(0x10), m4 = _mm256_set1_epi8(0x0F);
    k4_scales_unpack(x->scales, u);
    __m256i hb = _mm256_loadu_si256((const __m256i *)x->qh);
    _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
        u->q[2 * c] = _mm256_or_si256(_mm256_and_si256(qb, m4),
                                      _mm256_and_si256(_mm256_slli_epi16(hb, 4), b4));
        u->q[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                          _mm256_and_si256(_mm256_slli_epi16(hb, 3), b4));
        hb = _mm256_srli_epi16(hb, 2); /* 16-bit shifts by <= 6 keep each byte's low bits */
    }
}
K_LANE8_MIN_TYPE(q5_K, struct block_q5_K, 1)

/* q6_K: codes stored +32. */
static ALWAYS_INLINE void q6_K_unpack(const struct block_q6_K *x, struct k_u *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m6 = _mm256_set1_epi8(0x30);
    u->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    k_scales16(u, u->sc16);
    _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
        __m256i *q = u->q + 4 * h;
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                               _mm256_and_si256(_mm256_slli_epi16(hb, 4), m6));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                               _mm256_and_si256(_mm256_slli_epi16(hb, 2), m6));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(hb, m6));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), m6));
    }
}
K_LANE8_OFFSET_TYPE(q6_K, struct block_q6_K, 5)

/* q2_K / q3_K: chunk j = 4h + k holds bits 2k..2k+1 of qs[32h..32h+31]. */
static ALWAYS_INLINE void k2_codes(const uint8_t *qs, __m256i q[8]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
        q[4 * h] = _mm256_and_si256(b, m3);
        q[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 2), m3);
        q[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m3);
        q[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(b, 6), m3);
    }
}

static ALWAYS_INLINE void q2_K_unpack(const struct block_q2_K *x, struct k_u *u) {
    const __m128i sc = _mm_loadu_si128((const __m128i *)x->scales);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    k2_codes(x->qs, u->q);
    k_scales16(u, _mm256_cvtepu8_epi16(_mm_and_si128(sc, m4)));
    u->sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
}
K_MIN_TYPE(q2_K, struct block_q2_K)

/* q3_K: code + 4 = 2-bit code | hmask bit << 2, in 0..7; the -4 is the offset correction. */
static ALWAYS_INLINE void q3_K_unpack(const struct block_q3_K *x, struct k_u *u) {
    const __m256i b2 = _mm256_set1_epi8(4);
    k2_codes(x->qs, u->q);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)x->hmask);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) { /* chunk j's third bits: bit j of hmask[l] */
        const __m256i hb = j <= 2 ? _mm256_slli_epi16(hm, 2 - j) : _mm256_srli_epi16(hm, j - 2);
        u->q[j] = _mm256_or_si256(u->q[j], _mm256_and_si256(hb, b2));
    }
    u->sc16 = _mm256_cvtepi8_epi16(q3_K_sc6(x->scales));
    k_scales16(u, u->sc16);
}
K_OFFSET_TYPE(q3_K, struct block_q3_K, 2)

/* iq4_xs: table values (signed) per sub-block of 32, times the sub-block's ls - 32. */
struct iq4_xs_u {
    struct s8_u v[8];
    __m256i k[8];
};

static ALWAYS_INLINE void iq4_xs_unpack(const struct block_iq4_xs *x, struct iq4_xs_u *u) {
    const __m256i tab = table16(quant_iq4nl_values);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
        const int ls = (((x->scales_l[j / 2] >> (4 * (j % 2))) & 15) |
                        ((x->scales_h >> (2 * j)) & 3) << 4) - 32;
        s8_set(&u->v[j], _mm256_shuffle_epi8(tab, nibbles32(x->qs + 16 * j)));
        u->k[j] = _mm256_set1_epi16((short)ls);
    }
}

static ALWAYS_INLINE struct qsum iq4_xs_block(const struct iq4_xs_u *u,
                                              const struct block_q8_K *y) {
    __m256i sum = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
        const __m256i qy = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * j));
        const __m256i p = _mm256_maddubs_epi16(u->v[j].ax, _mm256_sign_epi8(qy, u->v[j].x));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, u->k[j]));
    }
    struct qsum r = {sum, _mm256_setzero_si256()};
    return r;
}

QUANT_DRIVER(iq4_xs, struct block_iq4_xs, struct block_q8_K, QK_K, struct iq4_xs_u, QTERM_ONE)

/* ---- registration ---------------------------------------------------------------------------- */

#define SET_FLOAT(tab, n_tab, t, fn)                                                              \
    quant_set_kernel(tab, n_tab, t, fn, fn##_x4, NULL, fn##_r4, "avx2")

/* Fills vec_dot, vec_dot4, vec_dot_rows4 and isa ("avx2") of f32, f16, bf16, q4_0, q4_1, q5_0,
 * q5_1, q8_0, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs (the quantized types'
 * vec_dot4 share each weight block's unpacking across the four columns); type, vec_dot_type and
 * from_float stay as they are. Call only on a CPU with AVX2, FMA and F16C. */
void quant_register_avx2(struct quant_kernels *tab, int n_tab) {
    SET_FLOAT(tab, n_tab, QTYPE_F32, f32_dot);
    SET_FLOAT(tab, n_tab, QTYPE_F16, f16_dot);
    SET_FLOAT(tab, n_tab, QTYPE_BF16, bf16_dot);
    QUANT_SET(tab, n_tab, QTYPE_Q8_0, q8_0, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q4_0, q4_0, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q5_0, q5_0, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q4_1, q4_1, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q5_1, q5_1, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_IQ4_NL, iq4_nl, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_MXFP4, mxfp4, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q2_K, q2_K, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q3_K, q3_K, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q4_K, q4_K, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q5_K, q5_K, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_Q6_K, q6_K, "avx2");
    QUANT_SET(tab, n_tab, QTYPE_IQ4_XS, iq4_xs, "avx2");
}
