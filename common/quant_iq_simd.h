/* quant_iq_simd.h - what quant_iq_avx2.c and quant_iq_avx512.c share, compiled into each with its
 * own ISA flags: the contract's float steps over a type's block function (iq_dot), the kernel and
 * registration macros, byte readers, the sign-index parity. The includer defines iq_vec (its
 * integer vector), hsum_epi32(iq_vec) and hsum4_epi32(4 x iq_vec) before including it. Nothing
 * else includes it. */
#ifndef SNIPER_QUANT_IQ_SIMD_H
#define SNIPER_QUANT_IQ_SIMD_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant_impl.h"
#include "quant_iq.h"

#define ALWAYS static inline __attribute__((always_inline))

/* The fp16 d at the start of most blocks, as a float. */
ALWAYS float d_at0(const uint8_t *x) {
    return _cvtsh_ss(rd16(x));
}

/* iq1_m's fp16 d from the top nibbles of its four scale words. */
ALWAYS float d_iq1_m(const uint8_t *x) {
    const uint8_t *sc = x + 48;
    return _cvtsh_ss(
        (unsigned short)(sc[1] >> 4 | (sc[3] & 0xf0) | (sc[5] >> 4) << 8 | (sc[7] & 0xf0) << 8));
}

/* 32 sign indices (7 bits, one per byte) -> their 8-bit sign masks (ksigns): bit 7 set where the
 * index has an odd number of set bits, so every mask has an even count. */
ALWAYS __m256i ksigns32(__m256i f) {
    const __m256i lut = _mm256_setr_epi8(0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0,
                                         1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0);
    const __m256i lo = _mm256_and_si256(f, _mm256_set1_epi8(15));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(f, 4), _mm256_set1_epi8(15));
    const __m256i par =
        _mm256_xor_si256(_mm256_shuffle_epi8(lut, lo), _mm256_shuffle_epi8(lut, hi));
    return _mm256_or_si256(f, _mm256_slli_epi16(par, 7));
}

/* One block of a type against na (1 or 4) activation blocks: out[j] = int32 lanes summing to the
 * spec's isum for activation j. */
typedef void (*iq_block_fn)(const uint8_t *x, const struct block_q8_K *const *y, int na,
                            iq_vec *out);
/* A block's fp16 d as a float. */
typedef float (*iq_d_fn)(const uint8_t *x);

/* The contract's float steps over na activation rows a[j]: s[j] = the dot of row x with a[j].
 * Four blocks at a time: their integer sums go to the four lanes of one float FMA, block b into
 * lane b % 4; the last n_blocks % 4 blocks take a scalar fmaf each, into the same lanes. */
ALWAYS void iq_dot(int64_t n, float *restrict s, const uint8_t *x, size_t bb, const void *const *a,
                   int na, iq_block_fn blk, iq_d_fn dfn, float unit) {
    const int64_t nb = n / QK_K;
    const struct block_q8_K *y[4];
    __m128 acc[4];
    for (int j = 0; j < na; j++)
        acc[j] = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        iq_vec r[4][4];
        prefetch_ahead(x + (size_t)i * bb, 4 * bb);
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < na; j++)
                y[j] = (const struct block_q8_K *)a[j] + i + k;
            blk(x + (size_t)(i + k) * bb, y, na, r[k]);
        }
        const uint8_t *xb = x + (size_t)i * bb;
        const __m128 dw = _mm_setr_ps(dfn(xb), dfn(xb + bb), dfn(xb + 2 * bb), dfn(xb + 3 * bb));
        for (int j = 0; j < na; j++) {
            const struct block_q8_K *yj = (const struct block_q8_K *)a[j] + i;
            const __m128 dy = _mm_setr_ps(yj[0].d, yj[1].d, yj[2].d, yj[3].d);
            const __m128 d = _mm_mul_ps(_mm_mul_ps(dw, dy), _mm_set1_ps(unit));
            const __m128i v = hsum4_epi32(r[0][j], r[1][j], r[2][j], r[3][j]);
            acc[j] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(v), acc[j]);
        }
    }
    float t[4][4];
    for (int j = 0; j < na; j++)
        _mm_storeu_ps(t[j], acc[j]);
    for (; i < nb; i++) {
        const uint8_t *xb = x + (size_t)i * bb;
        iq_vec r[4];
        for (int j = 0; j < na; j++)
            y[j] = (const struct block_q8_K *)a[j] + i;
        blk(xb, y, na, r);
        const float dw = dfn(xb);
        for (int j = 0; j < na; j++)
            t[j][i % 4] = fmaf(dw * y[j]->d * unit, (float)hsum_epi32(r[j]), t[j][i % 4]);
    }
    for (int j = 0; j < na; j++)
        s[j] = (t[j][0] + t[j][1]) + (t[j][2] + t[j][3]);
}

/* vec_dot, vec_dot4 and vec_dot_rows4 of one type from its block function. */
#define IQ_KERNELS(name, block, blk, dfn, unit)                                                    \
    static void vec_dot_##name(int64_t n, float *restrict s, const void *restrict w,               \
                               const void *restrict a) {                                           \
        const void *a1[1] = {a};                                                                   \
        iq_dot(n, s, w, sizeof(struct block), a1, 1, blk, dfn, unit);                              \
    }                                                                                              \
    static void vec_dot_##name##_x4(int64_t n, float *restrict s, const void *restrict w,          \
                                    const void *const a[4]) {                                      \
        iq_dot(n, s, w, sizeof(struct block), a, 4, blk, dfn, unit);                               \
    }                                                                                              \
    static void vec_dot_##name##_r4(int64_t n, float *restrict s, const void *restrict w,          \
                                    size_t row_bytes, const void *restrict a) {                    \
        for (int r = 0; r < 4; r++)                                                                \
            vec_dot_##name(n, &s[r], (const uint8_t *)w + (size_t)r * row_bytes, a);               \
    }

/* Sets vec_dot, vec_dot4 and vec_dot_rows4 of type t together (no vec_dot2), with the ISA's
 * name. */
#define SET_IQ(tab, n_tab, t, name, isa_name)                                                      \
    quant_set_kernel(tab, n_tab, t, vec_dot_##name, vec_dot_##name##_x4, NULL,                     \
                     vec_dot_##name##_r4, isa_name)

#endif
