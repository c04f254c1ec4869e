/* quant_avx512.c - AVX-512 (F/BW/VL/DQ/VNNI) twins of the reference vec_dot kernels in quant.c.
 * Same contract as quant_avx2.c (exact integer sums per block, then the contract's float
 * operations through QUANT_DRIVER), with wider integer work: 32-element blocks use vpdpbusd on
 * 256 bits (one instruction per block and column), 256-element blocks take 64 weights per
 * 512-bit multiply (vpmaddubsw, no saturation for codes <= 63) and fold the sub-block scales in
 * with vpdpwssd. Signed-by-signed products need activations in [-127, 127], as Q8_0's are. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "quant.h"
/* The K-quants' column kernels are this file's own (K512_COLS below). */
#define K_COLS_DRIVER(name, WB, TERM, shift) K512_COLS(name, WB, TERM, shift)
#include "quant_impl.h"
#include "quant_simd256.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* Eight int32 lanes summing to the sum of v's sixteen (exact). */
static ALWAYS_INLINE __m256i hsum16_to8(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* ---- float kernels: 32 lanes as two __m512 (elements 0-15, 16-31) ----------------------------- */

/* The contract's reduction of the 32 lanes (l += l+16, +8, +4, +2, +1); returns lane 0. */
static ALWAYS_INLINE float lanes32_reduce(__m512 a0, __m512 a1) {
    const __m512 b = _mm512_add_ps(a0, a1);
    const __m256 c = _mm256_add_ps(_mm512_castps512_ps256(b),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1)));
    const __m128 d = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 e = _mm_add_ps(d, _mm_movehl_ps(d, d));
    return _mm_cvtss_f32(_mm_add_ss(e, _mm_movehdup_ps(e)));
}

static ALWAYS_INLINE __m512 load_f32(const float *p) {
    return _mm512_loadu_ps(p);
}

static ALWAYS_INLINE __m512 load_f16(const fp16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static ALWAYS_INLINE __m512 load_bf16(const bf16_t *p) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

#define FLOAT_DOT_AVX512(name, T, load, at)                                                       \
    static void name(int64_t n, float *restrict s, const void *restrict w,                        \
                     const void *restrict a) {                                                    \
        const T *x = w, *y = a;                                                                   \
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                                \
        int64_t i = 0;                                                                            \
        for (; i + 32 <= n; i += 32) {                                                            \
            a0 = _mm512_fmadd_ps(load(x + i), load(y + i), a0);                                   \
            a1 = _mm512_fmadd_ps(load(x + i + 16), load(y + i + 16), a1);                         \
        }                                                                                         \
        float sum = lanes32_reduce(a0, a1);                                                       \
        for (; i < n; i++)                                                                        \
            sum = fmaf(at(x + i), at(y + i), sum);                                                \
        *s = sum;                                                                                 \
    }                                                                                             \
    VEC_DOT4_GENERIC(name)                                                                        \
    VEC_DOT_ROWS4_GENERIC(name)

FLOAT_DOT_AVX512(f32_dot, float, load_f32, f32_at)
FLOAT_DOT_AVX512(f16_dot, fp16_t, load_f16, f16_at)
FLOAT_DOT_AVX512(bf16_dot, bf16_t, load_bf16, bf16_at)

/* ---- 32-element blocks against Q8_0 / Q8_1: one vpdpbusd per block ---------------------------- */

static ALWAYS_INLINE struct qsum s8_block(const struct s8_u *u, const int8_t *qy) {
    const __m256i y = _mm256_loadu_si256((const __m256i *)qy);
    struct qsum r = {_mm256_dpbusd_epi32(_mm256_setzero_si256(), u->ax, _mm256_sign_epi8(y, u->x)),
                     _mm256_setzero_si256()};
    return r;
}

/* Unsigned codes u (<= 255) against signed activations. */
static ALWAYS_INLINE struct qsum u8_block(const __m256i *u, const int8_t *qy) {
    const __m256i y = _mm256_loadu_si256((const __m256i *)qy);
    struct qsum r = {_mm256_dpbusd_epi32(_mm256_setzero_si256(), *u, y), _mm256_setzero_si256()};
    return r;
}

static ALWAYS_INLINE void q8_0_unpack(const struct block_q8_0 *x, struct s8_u *u) {
    s8_set(u, _mm256_loadu_si256((const __m256i *)x->qs));
}
S8_TYPE(q8_0, struct block_q8_0)

/* sum (nib - 8) * y = sum nib * y - sum 8 * y: two unsigned dots instead of the sign dance. */
static ALWAYS_INLINE void q4_0_unpack(const struct block_q4_0 *x, __m256i *u) {
    *u = nibbles32(x->qs);
}

static ALWAYS_INLINE struct qsum q4_0_block(const __m256i *u, const struct block_q8_0 *y) {
    const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), *u, qy);
    const __m256i m = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), qy);
    struct qsum r = {_mm256_sub_epi32(p, m), _mm256_setzero_si256()};
    return r;
}

static ALWAYS_INLINE void q4_0_scales(const struct block_q4_0 *x, const struct block_q8_0 *y,
                                      const int n_ok, struct qscale4 *f) {
    f->d = QSCALE_F16_F16(x, d, y, n_ok);
}
QUANT_DRIVER(q4_0, struct block_q4_0, struct block_q8_0, QK4_0, __m256i, QTERM_ONE)

/* q5_0, iq4_nl, mxfp4, q4_1, q5_1: unpacked as quant_simd256.h says */
S8_TYPE(q5_0, struct block_q5_0)
S8_TYPE(iq4_nl, struct block_iq4_nl)

static ALWAYS_INLINE struct qsum mxfp4_block(const struct s8_u *u, const struct block_q8_0 *y) {
    return s8_block(u, y->qs);
}

QUANT_DRIVER(mxfp4, struct block_mxfp4, struct block_q8_0, QK_MXFP4, struct s8_u, QTERM_ONE)
U8_TYPE(q4_1, struct block_q4_1)
U8_TYPE(q5_1, struct block_q5_1)

/* ---- 256-element blocks against Q8_K: four 64-weight chunks ----------------------------------- */

/* An unpacked 256-element block: the codes of chunk j (weights 64j..64j+63, unsigned, at most 63)
 * and the int16 multiplier of each of its 32 pairs, plus the int16 vector the type's second sum
 * or offset correction multiplies the 16 bsums with. */
struct k_u {
    __m512i q[4], k[4];
    __m256i sc16;
};

/* Block and column: sixteen int32 lanes summing to sum_j k_j * q_j . y_j over the four chunks (the
 * chunks' products chained through vpdpwssd). */
static ALWAYS_INLINE __m512i k_chunks_dot16(const struct k_u *u, const int8_t *qy) {
    __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(u->q[0], _mm512_loadu_si512(qy)), u->k[0]);
    _Pragma("GCC unroll 8") for (int j = 1; j < 4; j++) {
        const __m512i p = _mm512_maddubs_epi16(u->q[j], _mm512_loadu_si512(qy + 64 * j));
        s = _mm512_dpwssd_epi32(s, p, u->k[j]);
    }
    return s;
}

/* The same sum in 8 int32 lanes (QUANT_DRIVER's block functions). */
static ALWAYS_INLINE __m256i k_chunks_dot(const struct k_u *u, const int8_t *qy) {
    return hsum16_to8(k_chunks_dot16(u, qy));
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

/* ---- the K-quants' column kernels: a column's four blocks folded together ------------------- */
/* QUANT_DRIVER folds every block's sums to eight lanes and then two blocks at a time, per block and
 * column. Here each block and column keeps its sixteen lanes, and a column's four blocks are
 * folded together, half the shuffles; the integer sums and the contract's float operations are
 * the same, so the kernels stay bitwise vec_dot. */

/* [a's sixteen lanes folded to eight | b's]: lane l of each half sums lanes l and l + 8. */
static ALWAYS_INLINE __m512i fold16_pair(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* From fold16_pair(s0, s1) and fold16_pair(s2, s3): 128-bit lane b holds four lanes summing to
 * block b's sum. */
static ALWAYS_INLINE __m512i fold8_quad(__m512i t01, __m512i t23) {
    return _mm512_add_epi32(_mm512_shuffle_i32x4(t01, t23, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(t01, t23, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The four blocks' integer sums as floats, block b in lane b: of us (QTERM_ONE), or of us in the
 * first and um in the second (QTERM_INT), from fold8_quad's vectors. */
static ALWAYS_INLINE __m128 k_isum4(__m512i us) {
    __m512i v = _mm512_add_epi32(us, _mm512_shuffle_epi32(us, _MM_PERM_BADC));
    v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(pick, v)));
}
static ALWAYS_INLINE void k_isum4_pair(__m512i us, __m512i um, __m128 *is, __m128 *ms) {
    __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi64(us, um), _mm512_unpackhi_epi64(us, um));
    v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB)); /* lane b: is is ms ms */
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256 f = _mm256_cvtepi32_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi32(pick, v)));
    *is = _mm256_castps256_ps128(f);
    *ms = _mm256_extractf128_ps(f, 1);
}

/* K512_COLS(name, WB, TERM, shift): name_dot, name_dot4 and name_dot2 of a K-quant (its
 * name_unpack and name_scales as QUANT_DRIVER's; TERM QTERM_INT: msum = bsums . sc16 is the
 * -dmin term's; QTERM_ONE: isum -= (bsums . sc16) << shift). */
#define K512_COLS(name, WB, TERM, shift)                                                          \
    static ALWAYS_INLINE void name##_kgroup(const WB *x, const struct block_q8_K *const *y,       \
                                            int64_t i, const int nblk, const int nc,              \
                                            __m128 *acc) {                                        \
        __m512i ts[NC_MAX][2], tm[NC_MAX][2];                                                     \
        _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) {                                     \
            __m512i sb[NC_MAX][2];                                                                \
            __m256i mb[NC_MAX][2];                                                                \
            _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++) {                                 \
                const int b = 2 * p + q;                                                          \
                if (b < nblk) {                                                                   \
                    prefetch_ahead(&x[i + b], sizeof(WB));                                        \
                    struct k_u u;                                                                 \
                    name##_unpack(&x[i + b], &u);                                                 \
                    FOR_COLS(c, nc) {                                                             \
                        sb[c][q] = k_chunks_dot16(&u, y[c][i + b].qs);                            \
                        mb[c][q] = k_bsums_dot(&u, &y[c][i + b]);                                 \
                        if ((TERM) == QTERM_ONE)                                                  \
                            sb[c][q] = _mm512_sub_epi32(                                          \
                                sb[c][q], _mm512_zextsi256_si512(_mm256_slli_epi32(mb[c][q], shift))); \
                    }                                                                             \
                } else {                                                                          \
                    FOR_COLS(c, nc) {                                                             \
                        sb[c][q] = _mm512_setzero_si512();                                        \
                        mb[c][q] = _mm256_setzero_si256();                                        \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            FOR_COLS(c, nc) {                                                                     \
                ts[c][p] = fold16_pair(sb[c][0], sb[c][1]);                                       \
                if ((TERM) == QTERM_INT)                                                          \
                    tm[c][p] = _mm512_inserti64x4(_mm512_castsi256_si512(mb[c][0]), mb[c][1], 1); \
            }                                                                                     \
        }                                                                                         \
        FOR_COLS(c, nc) {                                                                         \
            struct qscale4 f;                                                                     \
            name##_scales(&x[i], &y[c][i], nblk, &f);                                             \
            const __m512i us = fold8_quad(ts[c][0], ts[c][1]);                                    \
            if ((TERM) == QTERM_INT) {                                                            \
                __m128 is, ms;                                                                    \
                k_isum4_pair(us, fold8_quad(tm[c][0], tm[c][1]), &is, &ms);                       \
                acc[c] = _mm_fmadd_ps(f.d, is, acc[c]);                                           \
                acc[c] = _mm_fmadd_ps(f.m, ms, acc[c]);                                           \
            } else {                                                                              \
                acc[c] = _mm_fmadd_ps(f.d, k_isum4(us), acc[c]);                                  \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    QUANT_COLS_KERNELS(name, WB, struct block_q8_K, QK_K, name##_kgroup)

/* vpermw indices picking int16 scale j for words 0..15 and scale j+1 for words 16..31 (one scale
 * per 32 weights). */
static ALWAYS_INLINE __m512i idx_pair16(int j) {
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16((short)j),
                                   _mm512_set1_epi16((short)(j + 1)));
}

/* vpermw indices picking int16 scale j + word / 8 (one scale per 16 weights). */
static ALWAYS_INLINE __m512i idx_quad8(int j) {
    const __m512i lane = _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                                            21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                                            11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           3);
    return _mm512_add_epi16(lane, _mm512_set1_epi16((short)j));
}

/* k[j] for 16 per-16 scales (q2_K, q3_K, q6_K): scales 4j..4j+3 over chunk j's 32 pairs. */
static ALWAYS_INLINE void k_scales16(__m256i sc16, __m512i k[4]) {
    const __m512i v = _mm512_zextsi256_si512(sc16);
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++)
        k[j] = _mm512_permutexvar_epi16(idx_quad8(4 * j), v);
}

/* 32 bytes b in both 256-bit halves. */
static ALWAYS_INLINE __m512i dup256(const uint8_t *p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* Unpacks the 12 bytes of 6-bit scales and mins of a q4_K/q5_K block into 16 bytes:
 * bytes 0..7 the scales of the 8 sub-blocks, bytes 8..15 their mins. Reads 16 bytes at p (the
 * 4 past the scales are the block's own data), all in vector registers. With the 32-bit words
 * u0 u1 u2: scales 0-3 = u0 & 0x3f.., 4-7 = (u2 & 0x0f..) | (u0 >> 2 & 0x30..); mins 0-3 = u1 &
 * 0x3f.., 4-7 = (u2 >> 4 & 0x0f..) | (u1 >> 2 & 0x30..). */
static ALWAYS_INLINE __m128i k4_scales_mins(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)),
                                     _mm_setr_epi32(0, 0, 0, 4)); /* u0 u2 u1 u2>>4 */
    const __m128i b = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2);
    const __m128i ma = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m128i mb = _mm_setr_epi32(0, 0x30303030, 0, 0x30303030);
    return _mm_or_si128(_mm_and_si128(a, ma), _mm_and_si128(b, mb));
}

/* q4_K/q5_K: k[j] = scales 2j (words 0-15) and 2j+1 (words 16-31); sc16 = each min twice. */
static ALWAYS_INLINE void k4_scales_unpack(const uint8_t *scales, struct k_u *u) {
    const __m128i scm = k4_scales_mins(scales);
    const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(scm));
    u->sc16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++)
        u->k[j] = _mm512_permutexvar_epi16(idx_pair16(2 * j), sc16);
}

/* The 64 weights of chunk j of a q4_K block (qs[32j..32j+31]): low nibbles then high nibbles. */
static ALWAYS_INLINE __m512i q4k_chunk(const uint8_t *q) {
    const __m512i b = dup256(q);
    return _mm512_and_si512(_mm512_mask_srli_epi16(b, 0xFFFF0000u, b, 4), _mm512_set1_epi8(0x0F));
}

static ALWAYS_INLINE void q4_K_unpack(const struct block_q4_K *x, struct k_u *u) {
    k4_scales_unpack(x->scales, u);
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++)
        u->q[j] = q4k_chunk(x->qs + 32 * j);
}

K_LANE8_MIN_TYPE(q4_K, struct block_q4_K, 4)

/* q5_K: chunk j needs bit 2j of qh[l] in its low half and bit 2j+1 in its high half: shift the
 * high copy by one, then both by 2 per chunk (16-bit shifts by <= 7 keep bit 0 in its byte). */
static ALWAYS_INLINE void q5_K_unpack(const struct block_q5_K *x, struct k_u *u) {
    const __m512i b4 = _mm512_set1_epi8(0x10);
    k4_scales_unpack(x->scales, u);
    __m512i hb = dup256(x->qh);
    hb = _mm512_mask_srli_epi16(hb, 0xFFFF0000u, hb, 1);
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++) {
        const __m512i hi = _mm512_and_si512(_mm512_slli_epi16(hb, 4), b4);
        u->q[j] = _mm512_or_si512(q4k_chunk(x->qs + 32 * j), hi);
        hb = _mm512_srli_epi16(hb, 2);
    }
}

K_LANE8_MIN_TYPE(q5_K, struct block_q5_K, 1)

/* q6_K: the 6-bit codes (+32) of weights 64j..64j+63 of half h = j/2 from ql[64h..] (low 4
 * bits) and qh[32h..] (top 2 bits, pairs of bits per 32 weights). */
static ALWAYS_INLINE void q6_K_unpack(const struct block_q6_K *x, struct k_u *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x30);
    u->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    k_scales16(u->sc16, u->k);
    _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i hb = dup256(x->qh + 32 * h);
        /* weights 0..63 of the half: bits 0-1 of qh[l] (first 32), bits 2-3 (next 32) */
        __m512i ha = _mm512_slli_epi16(hb, 2);
        ha = _mm512_and_si512(_mm512_mask_slli_epi16(ha, 0x0000FFFFu, ha, 2), m6);
        /* weights 64..127: bits 4-5, then bits 6-7 */
        const __m512i hc = _mm512_and_si512(_mm512_mask_srli_epi16(hb, 0xFFFF0000u, hb, 2), m6);
        u->q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), ha);
        u->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), hc);
    }
}

K_LANE8_OFFSET_TYPE(q6_K, struct block_q6_K, 5)

/* q2_K / q3_K: chunk j = weights 64j..64j+63 = bits 4(j%2)..+1 (first 32) and 4(j%2)+2..+3 (next
 * 32) of qs[32(j/2)..+31]. */
static ALWAYS_INLINE void k2_codes(const uint8_t *qs, __m512i q[4]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
        const __m512i b = dup256(qs + 32 * h);
        const __m512i b02 = _mm512_mask_srli_epi16(b, 0xFFFF0000u, b, 2); /* shifts 0 | 2 */
        q[2 * h] = _mm512_and_si512(b02, m3);
        q[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(b02, 4), m3); /* shifts 4 | 6 */
    }
}

static ALWAYS_INLINE void q2_K_unpack(const struct block_q2_K *x, struct k_u *u) {
    const __m128i sc = _mm_loadu_si128((const __m128i *)x->scales);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    k2_codes(x->qs, u->q);
    k_scales16(_mm256_cvtepu8_epi16(_mm_and_si128(sc, m4)), u->k);
    u->sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
}

K_MIN_TYPE(q2_K, struct block_q2_K)

/* q3_K: code + 4 = 2-bit code | (bit 2j' of hmask[l]) << 2 for 32-weight chunk j', in 0..7. */
static ALWAYS_INLINE void q3_K_unpack(const struct block_q3_K *x, struct k_u *u) {
    const __m512i b2 = _mm512_set1_epi8(4);
    k2_codes(x->qs, u->q);
    /* chunk j's halves take bits 2j and 2j+1 of hmask[l] to bit 2 */
    __m512i hm = dup256(x->hmask);
    hm = _mm512_mask_srli_epi16(hm, 0xFFFF0000u, hm, 1);
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++) {
        const __m512i hb = j == 0 ? _mm512_slli_epi16(hm, 2)
                         : j == 1 ? hm
                                  : _mm512_srli_epi16(hm, 2 * j - 2);
        u->q[j] = _mm512_or_si512(u->q[j], _mm512_and_si512(hb, b2));
    }
    u->sc16 = _mm256_cvtepi8_epi16(q3_K_sc6(x->scales));
    k_scales16(u->sc16, u->k);
}

K_OFFSET_TYPE(q3_K, struct block_q3_K, 2)

/* iq4_xs: chunk j = sub-blocks 2j and 2j+1 (qs[32j..32j+31]: 16 bytes each, low nibbles then high
 * nibbles), looked up in the table; |value| against sign-adjusted activations, then the
 * sub-block scales ls - 32 with vpdpwssd. */
struct iq4_xs_u {
    __m512i ax[4], sx[4], k[4];
};

static ALWAYS_INLINE void iq4_xs_unpack(const struct block_iq4_xs *x, struct iq4_xs_u *u) {
    const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* byte j of ls: sub-block j's 6-bit scale (nibble j of scales_l, bits 2j..2j+1 of
     * scales_h on top), built in a register (an array in memory stalls the vector load) */
    const uint64_t sl = load_u32(x->scales_l), sh = x->scales_h;
    uint64_t ls = 0;
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
        ls |= (((sl >> (4 * j)) & 15) | ((sh >> (2 * j)) & 3) << 4) << (8 * j);
    const __m128i ls8 = _mm_sub_epi8(_mm_cvtsi64_si128((long long)ls), _mm_set1_epi8(32));
    const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepi8_epi16(ls8));
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++) {
        /* 128-bit lanes: bytes 0-15 (lo nibbles), 0-15 (hi), 16-31 (lo), 16-31 (hi) */
        const __m512i b = _mm512_shuffle_i64x2(dup256(x->qs + 32 * j), dup256(x->qs + 32 * j),
                                              _MM_SHUFFLE(1, 1, 0, 0));
        const __m512i codes = _mm512_and_si512(_mm512_mask_srli_epi16(b, 0xFF00FF00u, b, 4), m4);
        u->sx[j] = _mm512_shuffle_epi8(tab, codes);
        u->ax[j] = _mm512_abs_epi8(u->sx[j]);
        u->k[j] = _mm512_permutexvar_epi16(idx_pair16(2 * j), sc16);
    }
}

static ALWAYS_INLINE struct qsum iq4_xs_block(const struct iq4_xs_u *u,
                                              const struct block_q8_K *y) {
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j += 2) {
        const __m512i y0 = _mm512_loadu_si512(y->qs + 64 * j);
        const __m512i y1 = _mm512_loadu_si512(y->qs + 64 * j + 64);
        const __m512i p0 = _mm512_maddubs_epi16(u->ax[j], _mm512_mask_sub_epi8(
            y0, _mm512_movepi8_mask(u->sx[j]), _mm512_setzero_si512(), y0));
        const __m512i p1 = _mm512_maddubs_epi16(u->ax[j + 1], _mm512_mask_sub_epi8(
            y1, _mm512_movepi8_mask(u->sx[j + 1]), _mm512_setzero_si512(), y1));
        s0 = _mm512_dpwssd_epi32(s0, p0, u->k[j]);
        s1 = _mm512_dpwssd_epi32(s1, p1, u->k[j + 1]);
    }
    struct qsum r = {hsum16_to8(_mm512_add_epi32(s0, s1)), _mm256_setzero_si256()};
    return r;
}

QUANT_DRIVER(iq4_xs, struct block_iq4_xs, struct block_q8_K, QK_K, struct iq4_xs_u, QTERM_ONE)

/* ---- registration ---------------------------------------------------------------------------- */

#define SET_FLOAT(tab, n_tab, t, fn)                                                              \
    quant_set_kernel(tab, n_tab, t, fn, fn##_x4, NULL, fn##_r4, "avx512")

/* Registers the AVX2 kernels first (an AVX-512 CPU has AVX2), then replaces every type's with
 * isa "avx512" (vec_dot, vec_dot4 and vec_dot_rows4 together): f32, f16, bf16, q4_0, q4_1, q5_0,
 * q5_1, q8_0, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs. type, vec_dot_type and
 * from_float stay as they are. Call only on a CPU with AVX2, FMA, F16C and AVX-512
 * F/BW/VL/DQ/VNNI. */
void quant_register_avx512(struct quant_kernels *tab, int n_tab) {
    quant_register_avx2(tab, n_tab);
    SET_FLOAT(tab, n_tab, QTYPE_F32, f32_dot);
    SET_FLOAT(tab, n_tab, QTYPE_F16, f16_dot);
    SET_FLOAT(tab, n_tab, QTYPE_BF16, bf16_dot);
    QUANT_SET(tab, n_tab, QTYPE_Q8_0, q8_0, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q4_0, q4_0, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q5_0, q5_0, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q4_1, q4_1, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q5_1, q5_1, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_IQ4_NL, iq4_nl, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_MXFP4, mxfp4, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q2_K, q2_K, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q3_K, q3_K, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q4_K, q4_K, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q5_K, q5_K, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_Q6_K, q6_K, "avx512");
    QUANT_SET(tab, n_tab, QTYPE_IQ4_XS, iq4_xs, "avx512");
}
