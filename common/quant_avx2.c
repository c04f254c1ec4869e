/* quant_avx2.c - AVX2+FMA+F16C twins of the reference vec_dot kernels in quant.c.
 * Each kernel computes the same sum as its reference: integer products per block (exact), then one
 * float scale per block, so results differ from the reference only by float summation order.
 * Signed-by-signed byte products use the |x| * sign(y, x) trick, which is exact as long as the
 * activation byte is never -128: Q8_0/Q8_1 activations lie in [-127, 127] by construction. */
#include <immintrin.h>

#include "quant.h"
#include "quant_impl.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float h2f(fp16_t h) {
    return _cvtsh_ss(h);
}

/* 8 int32 lanes summing x[i]*y[i] over 32 signed bytes; y must not hold -128. */
static inline __m256i dot_s8(__m256i x, __m256i y) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* 8 int32 lanes summing u[i]*y[i] over 32 bytes, u unsigned and small enough (<= 63). */
static inline __m256i dot_u8(__m256i u, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

/* 32 nibbles of 16 bytes: low nibbles in bytes 0..15, high nibbles in bytes 16..31. */
static inline __m256i nibbles32(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

/* 0xFF in byte i where bit i of the 32-bit little-endian word at p is set, else 0. */
static inline __m256i bits_to_bytes(const uint8_t *p) {
    const uint32_t bits =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                            2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v =
        _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), bit);
    return _mm256_cmpeq_epi8(v, bit);
}

/* ---- float kernels --------------------------------------------------------------------------- */

static void vec_dot_f32(int64_t n, float *restrict s, const void *restrict w,
                        const void *restrict a) {
    const float *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        sum += x[i] * y[i];
    *s = sum;
}

static inline __m256 load_f16(const fp16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static void vec_dot_f16(int64_t n, float *restrict s, const void *restrict w,
                        const void *restrict a) {
    const fp16_t *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(load_f16(x + i), load_f16(y + i), acc0);
        acc1 = _mm256_fmadd_ps(load_f16(x + i + 8), load_f16(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load_f16(x + i + 16), load_f16(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load_f16(x + i + 24), load_f16(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(load_f16(x + i), load_f16(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        sum += h2f(x[i]) * h2f(y[i]);
    *s = sum;
}

static inline __m256 load_bf16(const bf16_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static inline float bf2f(bf16_t h) {
    return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128((int)((uint32_t)h << 16))));
}

static void vec_dot_bf16(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const bf16_t *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), acc0);
        acc1 = _mm256_fmadd_ps(load_bf16(x + i + 8), load_bf16(y + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        sum += bf2f(x[i]) * bf2f(y[i]);
    *s = sum;
}

/* ---- 32-element block kernels ---------------------------------------------------------------- */

static void vec_dot_q8_0(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q8_0 *x = w, *y = a;
    const int64_t nb = n / QK8_0;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_s8(qx, qy)), acc);
    }
    *s = hsum_ps(acc);
}

static void vec_dot_q4_0(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb = n / QK4_0;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const __m256i qx = _mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_s8(qx, qy)), acc);
    }
    *s = hsum_ps(acc);
}

static void vec_dot_q5_0(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q5_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb = n / QK5_0;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        /* nibble | 0xF0 where the fifth bit is clear = nibble + 16 * bit - 16 as a signed byte */
        const __m256i hi =
            _mm256_andnot_si256(bits_to_bytes(x[i].qh), _mm256_set1_epi8((char)0xF0));
        const __m256i qx = _mm256_or_si256(nibbles32(x[i].qs), hi);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_s8(qx, qy)), acc);
    }
    *s = hsum_ps(acc);
}

static void vec_dot_q4_1(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q4_1 *x = w;
    const struct block_q8_1 *y = a;
    const int64_t nb = n / QK4_1;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8(nibbles32(x[i].qs), qy)), acc);
        summs += h2f(x[i].m) * h2f(y[i].s);
    }
    *s = hsum_ps(acc) + summs;
}

static void vec_dot_q5_1(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q5_1 *x = w;
    const struct block_q8_1 *y = a;
    const int64_t nb = n / QK5_1;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const __m256i hi = _mm256_and_si256(bits_to_bytes(x[i].qh), _mm256_set1_epi8(0x10));
        const __m256i qx = _mm256_or_si256(nibbles32(x[i].qs), hi);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8(qx, qy)), acc);
        summs += h2f(x[i].m) * h2f(y[i].s);
    }
    *s = hsum_ps(acc) + summs;
}

/* ---- K-quants -------------------------------------------------------------------------------- */

/* Unpacks the 12 bytes of 6-bit scales and mins of a q4_K/q5_K block into 16 bytes:
 * bytes 0..7 the scales of the 8 sub-blocks, bytes 8..15 their mins. */
static inline __m128i k4_scales_mins(const uint8_t *p) {
    uint32_t u0 =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    uint32_t u1 =
        (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    uint32_t u2 =
        (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
    const uint32_t sc_lo = u0 & 0x3f3f3f3fu;
    const uint32_t mn_lo = u1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
    return _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)mn_lo, (int)mn_hi);
}

/* 8 int32 lanes summing min[j] * (bsums[2j] + bsums[2j+1]) given the bytes of k4_scales_mins. */
static inline __m256i k4_mins_dot(__m128i scm, const int16_t *bsums) {
    const __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), mdup);
}

/* The sub-block scale j (int16, both lanes) out of the 8 int16 scales broadcast to both lanes. */
static inline __m256i k_scale_at(__m256i sc16, int j) {
    return _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

static void vec_dot_q4_K(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q4_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const float d = y[i].d * h2f(x[i].d), dmin = y[i].d * h2f(x[i].dmin);
        const __m128i scm = k4_scales_mins(x[i].scales);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
                               _mm256_cvtepi32_ps(k4_mins_dot(scm, y[i].bsums)), accm);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
        const uint8_t *q = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const __m256i qb = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
            const __m256i lo = _mm256_and_si256(qb, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4);
            const __m256i plo =
                _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * k)));
            const __m256i phi =
                _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * k + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, k_scale_at(sc16, 2 * k)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, k_scale_at(sc16, 2 * k + 1)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc) - hsum_ps(accm);
}

static void vec_dot_q5_K(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q5_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const float d = y[i].d * h2f(x[i].d), dmin = y[i].d * h2f(x[i].dmin);
        const __m128i scm = k4_scales_mins(x[i].scales);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
                               _mm256_cvtepi32_ps(k4_mins_dot(scm, y[i].bsums)), accm);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
        const uint8_t *q = x[i].qs;
        const int8_t *q8 = y[i].qs;
        /* chunk k takes bit 2k of qh[l] for its low half, bit 2k+1 for its high half: shifting
         * 16-bit lanes right by 2 per chunk keeps each byte's low bits its own for k <= 3 */
        __m256i hb = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const __m256i qb = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(qb, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 4), b4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 3), b4));
            hb = _mm256_srli_epi16(hb, 2);
            const __m256i plo =
                _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * k)));
            const __m256i phi =
                _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * k + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, k_scale_at(sc16, 2 * k)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, k_scale_at(sc16, 2 * k + 1)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc) - hsum_ps(accm);
}

/* Scale vector for q6_K: int16 sc[a] in the low 128-bit lane, sc[a+1] in the high one, out of the
 * 8 int16 scales of a half-block broadcast to both lanes. */
static inline __m256i q6_scale_pair(__m256i sc16, int a) {
    const __m256i ctl = _mm256_setr_epi8(
        (char)(2 * a), (char)(2 * a + 1), (char)(2 * a), (char)(2 * a + 1), (char)(2 * a),
        (char)(2 * a + 1), (char)(2 * a), (char)(2 * a + 1), (char)(2 * a), (char)(2 * a + 1),
        (char)(2 * a), (char)(2 * a + 1), (char)(2 * a), (char)(2 * a + 1), (char)(2 * a),
        (char)(2 * a + 1), (char)(2 * a + 2), (char)(2 * a + 3), (char)(2 * a + 2),
        (char)(2 * a + 3), (char)(2 * a + 2), (char)(2 * a + 3), (char)(2 * a + 2),
        (char)(2 * a + 3), (char)(2 * a + 2), (char)(2 * a + 3), (char)(2 * a + 2),
        (char)(2 * a + 3), (char)(2 * a + 2), (char)(2 * a + 3), (char)(2 * a + 2),
        (char)(2 * a + 3));
    return _mm256_shuffle_epi8(sc16, ctl);
}

static void vec_dot_q6_K(int64_t n, float *restrict s, const void *restrict w,
                         const void *restrict a) {
    const struct block_q6_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m6 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const float d = y[i].d * h2f(x[i].d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        /* codes are stored +32: sum sc*(q-32)*y = sum sc*q*y - 32 * sum sc*bsum (16-sums) */
        const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums),
                                               _mm256_cvtepi8_epi16(sc8));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const int8_t *q8 = y[i].qs + 128 * h;
            const __m256i sc16 =
                _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc8, 8) : sc8));
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
            const __m256i e0 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 4), m6));
            const __m256i e1 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 2), m6));
            const __m256i e2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                               _mm256_and_si256(hb, m6));
            const __m256i e3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), m6));
            const __m256i p0 = _mm256_maddubs_epi16(e0, _mm256_loadu_si256((const __m256i *)q8));
            const __m256i p1 =
                _mm256_maddubs_epi16(e1, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            const __m256i p2 =
                _mm256_maddubs_epi16(e2, _mm256_loadu_si256((const __m256i *)(q8 + 64)));
            const __m256i p3 =
                _mm256_maddubs_epi16(e3, _mm256_loadu_si256((const __m256i *)(q8 + 96)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, q6_scale_pair(sc16, 0)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, q6_scale_pair(sc16, 2)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p2, q6_scale_pair(sc16, 4)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p3, q6_scale_pair(sc16, 6)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* ---- four-column kernels --------------------------------------------------------------------- */

/* vec_dot4 for q4_K and q6_K: the weights are unpacked once per block (into locals that may live on
 * the stack: reloading them beats unpacking again) for four columns. Each column keeps its own
 * accumulators and runs vec_dot_q4_K's / vec_dot_q6_K's float operations in the same order (same
 * products of the block scales, one FMA per block, the same horizontal sums), so s[c] is
 * bit-identical to vec_dot's (pinned by test_quant_simd). Only exact integer work differs. The
 * one-column kernels stay separate: instantiated for one column, these bodies keep the unpacked
 * vectors in arrays that 16 ymm registers cannot hold, which cost 20-50% there. */

#define NC_MAX 4
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define FOR_COLS(c, nc) _Pragma("GCC unroll 4") for (int c = 0; c < (nc); c++)

/* Instantiates vec_dot_<t>_x4 from <t>_cols. */
#define VEC_DOT_COLS(t)                                                                           \
    static void vec_dot_##t##_x4(int64_t n, float *restrict s, const void *restrict w,            \
                                 const void *const a[4]) {                                        \
        t##_cols(n, s, w, a, 4);                                                                  \
    }

/* The 32 codes of q4_K sub-block j (0..7) out of the block's qs. */
static inline __m256i q4k_sub(const uint8_t *qs, int j, __m256i m4) {
    const __m256i qb = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j / 2)));
    return _mm256_and_si256(j & 1 ? _mm256_srli_epi16(qb, 4) : qb, m4);
}

static ALWAYS_INLINE void q4_K_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q4_K *x = w;
    const struct block_q8_K *y[NC_MAX];
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[NC_MAX], accm[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc[c] = _mm256_setzero_ps();
        accm[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const float dx = h2f(x[i].d), dmx = h2f(x[i].dmin);
        const __m128i scm = k4_scales_mins(x[i].scales);
        const __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
        /* q[j]: the 32 codes of sub-block j; k[j]: its scale in every int16 */
        __m256i q[8], k[8];
        for (int j = 0; j < 8; j++) {
            q[j] = q4k_sub(x[i].qs, j, m4);
            k[j] = k_scale_at(sc16, j);
        }
        FOR_COLS(c, nc) {
            const float d = y[c][i].d * dx, dmin = y[c][i].d * dmx;
            const __m256i md =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[c][i].bsums), mdup);
            accm[c] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(md), accm[c]);
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i qy = _mm256_loadu_si256((const __m256i *)(y[c][i].qs + 32 * j));
                const __m256i p = _mm256_maddubs_epi16(q[j], qy);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, k[j]));
            }
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = hsum_ps(acc[c]) - hsum_ps(accm[c]);
}
VEC_DOT_COLS(q4_K)

/* The 6-bit codes (+32) of weights 32j..32j+31 of half h (e[0..3]) and their two 16-weight
 * scale vectors (k[0..3]), from the half's ql (64 bytes), qh (32 bytes) and int16 scales sc16. */
static inline void q6k_half(const uint8_t *ql, const uint8_t *qh, __m256i sc16, __m256i e[4],
                            __m256i k[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m6 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
    e[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                           _mm256_and_si256(_mm256_slli_epi16(hb, 4), m6));
    e[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                           _mm256_and_si256(_mm256_slli_epi16(hb, 2), m6));
    e[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_and_si256(hb, m6));
    e[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m6));
    for (int j = 0; j < 4; j++)
        k[j] = q6_scale_pair(sc16, 2 * j);
}

static ALWAYS_INLINE void q6_K_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q6_K *x = w;
    const struct block_q8_K *y[NC_MAX];
    const int64_t nb = n / QK_K;
    __m256 acc[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const float dx = h2f(x[i].d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i sc8w = _mm256_cvtepi8_epi16(sc8);
        const __m256i sc16[2] = {
            _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8)),
            _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8))),
        };
        /* e[j]: codes (+32) of weights 32j..32j+31; k[j]: their two 16-weight scales */
        __m256i e[8], k[8];
        q6k_half(x[i].ql, x[i].qh, sc16[0], e, k);
        q6k_half(x[i].ql + 64, x[i].qh + 32, sc16[1], e + 4, k + 4);
        FOR_COLS(c, nc) {
            const float d = y[c][i].d * dx;
            /* codes are stored +32: sum sc*(q-32)*y = sum sc*q*y - 32 * sum sc*bsum (16-sums) */
            const __m256i corr =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[c][i].bsums), sc8w);
            __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
            for (int j = 0; j < 8; j++) {
                const __m256i qy = _mm256_loadu_si256((const __m256i *)(y[c][i].qs + 32 * j));
                const __m256i p = _mm256_maddubs_epi16(e[j], qy);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, k[j]));
            }
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = hsum_ps(acc[c]);
}
VEC_DOT_COLS(q6_K)

/* ---- four-row kernels ------------------------------------------------------------------------ */

/* vec_dot_rows4 for q4_K and q6_K: four weight rows against one activation row. The activation
 * codes and bsums are loaded once per block for the four rows, and the rows' integer work is
 * interleaved so that four weight streams are in flight. Each row keeps its own accumulators and
 * runs vec_dot_q4_K's / vec_dot_q6_K's float operations in the same order (the same block-scale
 * products, one FMA per block, the same horizontal sums), so s[r] is bit-identical to vec_dot's on
 * that row (pinned by test_quant_simd). */

#define FOR_ROWS4(r) _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)

static void vec_dot_rows4_q4_K(int64_t n, float *restrict s, const void *restrict w,
                               size_t row_bytes, const void *restrict a) {
    const struct block_q4_K *x[4];
    const struct block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4], accm[4];
    FOR_ROWS4(r) {
        x[r] = (const void *)((const uint8_t *)w + (size_t)r * row_bytes);
        acc[r] = _mm256_setzero_ps();
        accm[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_rows4(w, i, row_bytes, sizeof(x[0][i]));
        const float dy = y[i].d;
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        __m256i sc16[4], sumi[4];
        FOR_ROWS4(r) {
            const float dmin = dy * h2f(x[r][i].dmin);
            const __m128i scm = k4_scales_mins(x[r][i].scales);
            const __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
            accm[r] = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
                                      _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mdup)), accm[r]);
            sc16[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
            sumi[r] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m256i ylo = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * k));
            const __m256i yhi = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * k + 32));
            FOR_ROWS4(r) {
                const __m256i qb = _mm256_loadu_si256((const __m256i *)(x[r][i].qs + 32 * k));
                const __m256i lo = _mm256_and_si256(qb, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4);
                const __m256i plo = _mm256_maddubs_epi16(lo, ylo);
                const __m256i phi = _mm256_maddubs_epi16(hi, yhi);
                sumi[r] = _mm256_add_epi32(sumi[r],
                                           _mm256_madd_epi16(plo, k_scale_at(sc16[r], 2 * k)));
                sumi[r] = _mm256_add_epi32(sumi[r],
                                           _mm256_madd_epi16(phi, k_scale_at(sc16[r], 2 * k + 1)));
            }
        }
        FOR_ROWS4(r) {
            const float d = dy * h2f(x[r][i].d);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    FOR_ROWS4(r) s[r] = hsum_ps(acc[r]) - hsum_ps(accm[r]);
}

static void vec_dot_rows4_q6_K(int64_t n, float *restrict s, const void *restrict w,
                               size_t row_bytes, const void *restrict a) {
    const struct block_q6_K *x[4];
    const struct block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m6 = _mm256_set1_epi8(0x30);
    __m256 acc[4];
    FOR_ROWS4(r) {
        x[r] = (const void *)((const uint8_t *)w + (size_t)r * row_bytes);
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_rows4(w, i, row_bytes, sizeof(x[0][i]));
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        __m128i sc8[4];
        __m256i sumi[4];
        FOR_ROWS4(r) {
            sc8[r] = _mm_loadu_si128((const __m128i *)x[r][i].scales);
            /* codes are stored +32: sum sc*(q-32)*y = sum sc*q*y - 32 * sum sc*bsum */
            const __m256i corr = _mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc8[r]));
            sumi[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *q8 = y[i].qs + 128 * h;
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)q8);
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(q8 + 32));
            const __m256i y2 = _mm256_loadu_si256((const __m256i *)(q8 + 64));
            const __m256i y3 = _mm256_loadu_si256((const __m256i *)(q8 + 96));
            FOR_ROWS4(r) {
                const uint8_t *ql = x[r][i].ql + 64 * h, *qh = x[r][i].qh + 32 * h;
                const __m256i sc16 = _mm256_broadcastsi128_si256(
                    _mm_cvtepi8_epi16(h ? _mm_srli_si128(sc8[r], 8) : sc8[r]));
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
                const __m256i e0 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                                   _mm256_and_si256(_mm256_slli_epi16(hb, 4), m6));
                const __m256i e1 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                                   _mm256_and_si256(_mm256_slli_epi16(hb, 2), m6));
                const __m256i e2 = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m6));
                const __m256i e3 =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                    _mm256_and_si256(_mm256_srli_epi16(hb, 2), m6));
                __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(e0, y0),
                                              q6_scale_pair(sc16, 0));
                t = _mm256_add_epi32(t, _mm256_madd_epi16(_mm256_maddubs_epi16(e1, y1),
                                                          q6_scale_pair(sc16, 2)));
                t = _mm256_add_epi32(t, _mm256_madd_epi16(_mm256_maddubs_epi16(e2, y2),
                                                          q6_scale_pair(sc16, 4)));
                t = _mm256_add_epi32(t, _mm256_madd_epi16(_mm256_maddubs_epi16(e3, y3),
                                                          q6_scale_pair(sc16, 6)));
                sumi[r] = _mm256_add_epi32(sumi[r], t);
            }
        }
        FOR_ROWS4(r) {
            const float d = y[i].d * h2f(x[r][i].d);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    FOR_ROWS4(r) s[r] = hsum_ps(acc[r]);
}

VEC_DOT4_GENERIC(vec_dot_f32)
VEC_DOT4_GENERIC(vec_dot_f16)
VEC_DOT4_GENERIC(vec_dot_bf16)
VEC_DOT4_GENERIC(vec_dot_q8_0)
VEC_DOT4_GENERIC(vec_dot_q4_0)
VEC_DOT4_GENERIC(vec_dot_q5_0)
VEC_DOT4_GENERIC(vec_dot_q4_1)
VEC_DOT4_GENERIC(vec_dot_q5_1)
VEC_DOT4_GENERIC(vec_dot_q5_K)
VEC_DOT_ROWS4_GENERIC(vec_dot_f32)
VEC_DOT_ROWS4_GENERIC(vec_dot_f16)
VEC_DOT_ROWS4_GENERIC(vec_dot_bf16)
VEC_DOT_ROWS4_GENERIC(vec_dot_q8_0)
VEC_DOT_ROWS4_GENERIC(vec_dot_q4_0)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_0)
VEC_DOT_ROWS4_GENERIC(vec_dot_q4_1)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_1)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_K)
#define vec_dot_q4_K_r4 vec_dot_rows4_q4_K
#define vec_dot_q6_K_r4 vec_dot_rows4_q6_K

/* ---- registration ---------------------------------------------------------------------------- */

/* Sets vec_dot, vec_dot4 and vec_dot_rows4 together, so a table never mixes ISAs within a type. */
#define SET_KERNEL(tab, n_tab, t, fn) set_kernel(tab, n_tab, t, fn, fn##_x4, fn##_r4)

static void set_kernel(struct quant_kernels *tab, int n_tab, enum qtype t, quant_vec_dot_fn fn,
                       quant_vec_dot4_fn fn4, quant_vec_dot_rows4_fn fnr4) {
    if ((int)t >= n_tab)
        return;
    tab[t].vec_dot = fn;
    tab[t].vec_dot4 = fn4;
    tab[t].vec_dot_rows4 = fnr4;
    tab[t].isa = "avx2";
}

/* Fills tab[t].vec_dot, vec_dot4, vec_dot_rows4 and isa ("avx2") for f32, f16, bf16, q4_0, q4_1,
 * q5_0, q5_1, q8_0, q4_K, q5_K, q6_K (vec_dot4 shares the unpacking and vec_dot_rows4 the
 * activation loads for q4_K and q6_K; elsewhere they are four vec_dot calls); type, vec_dot_type
 * and from_float stay as they are. Call only on a CPU with AVX2, FMA and F16C. */
void quant_register_avx2(struct quant_kernels *tab, int n_tab) {
    SET_KERNEL(tab, n_tab, QTYPE_F32, vec_dot_f32);
    SET_KERNEL(tab, n_tab, QTYPE_F16, vec_dot_f16);
    SET_KERNEL(tab, n_tab, QTYPE_BF16, vec_dot_bf16);
    SET_KERNEL(tab, n_tab, QTYPE_Q8_0, vec_dot_q8_0);
    SET_KERNEL(tab, n_tab, QTYPE_Q4_0, vec_dot_q4_0);
    SET_KERNEL(tab, n_tab, QTYPE_Q5_0, vec_dot_q5_0);
    SET_KERNEL(tab, n_tab, QTYPE_Q4_1, vec_dot_q4_1);
    SET_KERNEL(tab, n_tab, QTYPE_Q5_1, vec_dot_q5_1);
    SET_KERNEL(tab, n_tab, QTYPE_Q4_K, vec_dot_q4_K);
    SET_KERNEL(tab, n_tab, QTYPE_Q5_K, vec_dot_q5_K);
    SET_KERNEL(tab, n_tab, QTYPE_Q6_K, vec_dot_q6_K);
}
