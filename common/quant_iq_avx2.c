/* quant_iq_avx2.c - AVX2+FMA+F16C twins of the grid i-quant dot products in quant_iq.c.
 * Each block's integer sum is the spec's, computed in another order (exact: no intermediate can
 * saturate, see each type); the float steps are the spec's, in the spec's order, so every result
 * is bit-identical to quant_iq.c's. Grid entries are fetched by scalar index loads; signs become
 * +-1 bytes that _mm256_sign_epi8 applies to the activations (codes in [-127, 127], so negating
 * never overflows); _mm256_maddubs_epi16 multiplies the unsigned grid bytes with them in pairs
 * (|pair| <= 2 * 62 * 127 < 32767) and _mm256_madd_epi16 applies the odd multipliers. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant_iq.h"

#define ALWAYS static inline __attribute__((always_inline))

/* ---- helpers --------------------------------------------------------------------------------- */

ALWAYS uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

ALWAYS uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

ALWAYS float rdh(const uint8_t *p) {
    return _cvtsh_ss(rd16(p));
}

/* Four 8-byte grid entries, entry i0 in bytes 0-7. */
ALWAYS __m256i grid8x4(const uint64_t *g, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return _mm256_set_epi64x((long long)g[i3], (long long)g[i2], (long long)g[i1],
                             (long long)g[i0]);
}

/* Eight 4-byte grid entries, idx[0] in bytes 0-3. */
ALWAYS __m256i grid4x8(const uint32_t *g, const unsigned idx[8]) {
    return _mm256_set_epi32((int)g[idx[7]], (int)g[idx[6]], (int)g[idx[5]], (int)g[idx[4]],
                            (int)g[idx[3]], (int)g[idx[2]], (int)g[idx[1]], (int)g[idx[0]]);
}

/* Four sign indices (7 bits each) as +-1 bytes, index k for bytes 8k..8k+7. */
ALWAYS __m256i ksigns4(unsigned k0, unsigned k1, unsigned k2, unsigned k3) {
    return grid8x4(quant_iq_ksigns64, k0, k1, k2, k3);
}

/* -1 in byte i where bit i of bits is set, else 1. */
ALWAYS __m256i bits_to_signs(uint32_t bits) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                            2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), bit);
    return _mm256_or_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1));
}

/* int16 multipliers: m0 for the first 16 values (lanes 0-7), m1 for the last 16. */
ALWAYS __m256i mul16x2(int m0, int m1) {
    return _mm256_setr_m128i(_mm_set1_epi16((short)m0), _mm_set1_epi16((short)m1));
}

/* acc + m * sum over pairs of g[i] * (sign[i] * q[i]), g unsigned. */
ALWAYS __m256i dot_group(__m256i acc, __m256i g, __m256i sgn, __m256i mul, const int8_t *q) {
    const __m256i qs = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q), sgn);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(g, qs), mul));
}

ALWAYS int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* One block of a type against na (1 or 4) activation blocks: out[j] = 8 int32 lanes summing to
 * the spec's isum for activation j. */
typedef void (*iq_block_fn)(const uint8_t *x, const struct block_q8_K *const *y, int na,
                            __m256i *out);
/* A block's fp16 d as a float. */
typedef float (*iq_d_fn)(const uint8_t *x);

/* The contract's float steps over na activation rows a[j]: s[j] = the dot of row x with a[j]. */
ALWAYS void iq_dot(int64_t n, float *restrict s, const uint8_t *x, size_t bb,
                   const void *const *a, int na, iq_block_fn blk, iq_d_fn dfn, float unit) {
    const int64_t nb = n / QK_K;
    const struct block_q8_K *y[4];
    __m128 acc[4];
    int32_t isum[4][4];
    float dw[4];
    for (int j = 0; j < na; j++)
        acc[j] = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *xb = x + (size_t)i * bb;
        __m256i r[4];
        for (int j = 0; j < na; j++)
            y[j] = (const struct block_q8_K *)a[j] + i;
        blk(xb, y, na, r);
        dw[i % 4] = dfn(xb);
        for (int j = 0; j < na; j++)
            isum[j][i % 4] = hsum_epi32(r[j]);
        if (i % 4 == 3) {
            const __m128 d4 = _mm_loadu_ps(dw);
            for (int j = 0; j < na; j++) {
                const struct block_q8_K *yj = (const struct block_q8_K *)a[j] + i - 3;
                const __m128 dy = _mm_setr_ps(yj[0].d, yj[1].d, yj[2].d, yj[3].d);
                const __m128 d = _mm_mul_ps(_mm_mul_ps(d4, dy), _mm_set1_ps(unit));
                const __m128 v = _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)isum[j]));
                acc[j] = _mm_fmadd_ps(d, v, acc[j]);
            }
        }
    }
    for (int j = 0; j < na; j++) {
        float t[4];
        _mm_storeu_ps(t, acc[j]);
        for (int64_t i = nb - nb % 4; i < nb; i++) {
            const struct block_q8_K *yj = (const struct block_q8_K *)a[j] + i;
            t[i % 4] = fmaf(dw[i % 4] * yj->d * unit, (float)isum[j][i % 4], t[i % 4]);
        }
        s[j] = (t[0] + t[1]) + (t[2] + t[3]);
    }
}

/* vec_dot, vec_dot4 and vec_dot_rows4 of one type from its block function. */
#define IQ_KERNELS(name, block, blk, dfn, unit)                                                   \
    static void vec_dot_##name(int64_t n, float *restrict s, const void *restrict w,              \
                               const void *restrict a) {                                          \
        const void *a1[1] = {a};                                                                  \
        iq_dot(n, s, w, sizeof(struct block), a1, 1, blk, dfn, unit);                             \
    }                                                                                             \
    static void vec_dot_##name##_x4(int64_t n, float *restrict s, const void *restrict w,         \
                                    const void *const a[4]) {                                     \
        iq_dot(n, s, w, sizeof(struct block), a, 4, blk, dfn, unit);                              \
    }                                                                                             \
    static void vec_dot_##name##_r4(int64_t n, float *restrict s, const void *restrict w,         \
                                    size_t row_bytes, const void *restrict a) {                   \
        for (int r = 0; r < 4; r++)                                                               \
            vec_dot_##name(n, &s[r], (const uint8_t *)w + (size_t)r * row_bytes, a);              \
    }

ALWAYS float d_at0(const uint8_t *x) {
    return rdh(x);
}

/* ---- iq2_xxs: per 32 values 4 index bytes, then 4 sign indices and s in one u32 ------------- */

ALWAYS void blk_iq2_xxs(const uint8_t *x, const struct block_q8_K *const *y, int na,
                        __m256i *out) {
    const uint8_t *qs = x + 2;
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t idx = rd32(qs + 8 * ib), aux = rd32(qs + 8 * ib + 4);
        const __m256i g = grid8x4(quant_iq_grid2xxs, idx & 255, (idx >> 8) & 255,
                                  (idx >> 16) & 255, idx >> 24);
        const __m256i sgn =
            ksigns4(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
        const __m256i mul = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq2_xxs, block_iq2_xxs, blk_iq2_xxs, d_at0, 0.125f)

/* ---- iq2_xs: per 8 values a u16 of index (9 bits) and sign index; nibble scales ------------- */

ALWAYS void blk_iq2_xs(const uint8_t *x, const struct block_q8_K *const *y, int na,
                       __m256i *out) {
    const uint8_t *qs = x + 2, *sc = x + 66;
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const unsigned q0 = rd16(qs + 8 * ib), q1 = rd16(qs + 8 * ib + 2);
        const unsigned q2 = rd16(qs + 8 * ib + 4), q3 = rd16(qs + 8 * ib + 6);
        const __m256i g = grid8x4(quant_iq_grid2xs, q0 & 511, q1 & 511, q2 & 511, q3 & 511);
        const __m256i sgn = ksigns4(q0 >> 9, q1 >> 9, q2 >> 9, q3 >> 9);
        const __m256i mul = mul16x2(2 * (sc[ib] & 15) + 1, 2 * (sc[ib] >> 4) + 1);
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq2_xs, block_iq2_xs, blk_iq2_xs, d_at0, 0.125f)

/* ---- iq2_s: index low bytes, sign bytes, 2 index bits per group in qh, nibble scales -------- */

ALWAYS void blk_iq2_s(const uint8_t *x, const struct block_q8_K *const *y, int na,
                      __m256i *out) {
    const uint8_t *qs = x + 2, *signs = x + 34, *qh = x + 66, *sc = x + 74;
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const unsigned h = qh[ib];
        const __m256i g = grid8x4(quant_iq_grid2s, qs[4 * ib] | (h & 3) << 8,
                                  qs[4 * ib + 1] | (h & 12) << 6, qs[4 * ib + 2] | (h & 48) << 4,
                                  qs[4 * ib + 3] | (h & 192) << 2);
        const __m256i sgn = bits_to_signs(rd32(signs + 4 * ib));
        const __m256i mul = mul16x2(2 * (sc[ib] & 15) + 1, 2 * (sc[ib] >> 4) + 1);
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq2_s, block_iq2_s, blk_iq2_s, d_at0, 0.125f)

/* ---- iq3_xxs: 8 index bytes per 32 values, then per 32 a u32 of sign indices and s ---------- */

ALWAYS void blk_iq3_xxs(const uint8_t *x, const struct block_q8_K *const *y, int na,
                        __m256i *out) {
    const uint8_t *qs = x + 2, *ss = x + 66;
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        unsigned idx[8];
        for (int k = 0; k < 8; k++)
            idx[k] = qs[8 * ib + k];
        const uint32_t aux = rd32(ss + 4 * ib);
        const __m256i g = grid4x8(quant_iq_grid3xxs, idx);
        const __m256i sgn =
            ksigns4(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
        const __m256i mul = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq3_xxs, block_iq3_xxs, blk_iq3_xxs, d_at0, 0.25f)

/* ---- iq3_s: index low bytes, one high bit each in qh, sign bytes, nibble scales per 32 ------ */

ALWAYS void blk_iq3_s(const uint8_t *x, const struct block_q8_K *const *y, int na,
                      __m256i *out) {
    const uint8_t *qs = x + 2, *qh = x + 66, *signs = x + 74, *sc = x + 106;
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        unsigned idx[8];
        for (int k = 0; k < 8; k++)
            idx[k] = qs[8 * ib + k] | ((qh[ib] >> k) & 1) << 8;
        const __m256i g = grid4x8(quant_iq_grid3s, idx);
        const __m256i sgn = bits_to_signs(rd32(signs + 4 * ib));
        const __m256i mul = _mm256_set1_epi16((short)(2 * ((sc[ib / 2] >> (4 * (ib % 2))) & 15) + 1));
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq3_s, block_iq3_s, blk_iq3_s, d_at0, 1.0f)

/* ---- iq1_s / iq1_m: value = m * (8 * grid +- 1) in eighths ----------------------------------- */
/* The grid part: sign_epi8(q, grid) is q * grid (grid in {-1, 0, 1}), its pairs summed by
 * maddubs with ones (|pair| <= 254) and weighted by 8m in madd. */

ALWAYS __m256i iq1_grid_part(__m256i acc, __m256i g, __m256i mul8, const int8_t *q) {
    const __m256i t = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q), g);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), t), mul8));
}

/* iq1_s: the delta +-1 per 32 values, m per 32: the delta part is sum_g c_g * bsums[g] over the
 * 16 bsums with c = m * delta (the same for both halves of a group of 32). */
ALWAYS void blk_iq1_s(const uint8_t *x, const struct block_q8_K *const *y, int na,
                      __m256i *out) {
    const uint8_t *qs = x + 2, *qh = x + 34;
    int16_t c[16];
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const unsigned h = rd16(qh + 2 * ib);
        const int m = 2 * ((h >> 12) & 7) + 1;
        c[2 * ib] = c[2 * ib + 1] = (int16_t)(h & 0x8000 ? -m : m);
        const __m256i g = grid8x4(quant_iq_grid1s, qs[4 * ib] | (h & 7) << 8,
                                  qs[4 * ib + 1] | (h & 56) << 5, qs[4 * ib + 2] | (h & 448) << 2,
                                  qs[4 * ib + 3] | (h & 3584) >> 1);
        const __m256i mul8 = _mm256_set1_epi16((short)(8 * m));
        for (int j = 0; j < na; j++)
            out[j] = iq1_grid_part(out[j], g, mul8, y[j]->qs + 32 * ib);
    }
    const __m256i cv = _mm256_loadu_si256((const __m256i *)c);
    for (int j = 0; j < na; j++)
        out[j] = _mm256_add_epi32(
            out[j], _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[j]->bsums), cv));
}
IQ_KERNELS(iq1_s, block_iq1_s, blk_iq1_s, d_at0, 0.125f)

/* iq1_m: the delta +-1 per 8 values, m per 16: 8 * (grid pairs) + (delta pairs), both from
 * maddubs with ones (|8 * 254 + 254| < 32767), then madd with m. */
ALWAYS void blk_iq1_m(const uint8_t *x, const struct block_q8_K *const *y, int na,
                      __m256i *out) {
    const uint8_t *qs = x, *qh = x + 32, *sc = x + 48;
    const __m256i ones = _mm256_set1_epi8(1);
    const __m256i dbit = _mm256_setr_epi64x(0x08, 0x80, 0x800, 0x8000);
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const unsigned h = rd16(qh + 2 * ib);
        const unsigned s = (unsigned)rd16(sc + 2 * (ib / 2)) >> (6 * (ib % 2));
        const __m256i g = grid8x4(quant_iq_grid1s, qs[4 * ib] | (h & 7) << 8,
                                  qs[4 * ib + 1] | (h & 0x70) << 4, qs[4 * ib + 2] | (h & 0x700),
                                  qs[4 * ib + 3] | (h & 0x7000) >> 4);
        const __m256i hv = _mm256_and_si256(_mm256_set1_epi64x(h), dbit);
        const __m256i delta = _mm256_or_si256(_mm256_cmpeq_epi64(hv, dbit), ones);
        const __m256i mul = mul16x2(2 * (s & 7) + 1, 2 * ((s >> 3) & 7) + 1);
        for (int j = 0; j < na; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(y[j]->qs + 32 * ib));
            const __m256i pg = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q, g));
            const __m256i pd = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q, delta));
            const __m256i p = _mm256_add_epi16(_mm256_slli_epi16(pg, 3), pd);
            out[j] = _mm256_add_epi32(out[j], _mm256_madd_epi16(p, mul));
        }
    }
}

/* iq1_m's fp16 d from the top nibbles of its four scale words. */
ALWAYS float d_iq1_m(const uint8_t *x) {
    const uint8_t *sc = x + 48;
    return _cvtsh_ss((unsigned short)(sc[1] >> 4 | (sc[3] & 0xf0) | (sc[5] >> 4) << 8 |
                                      (sc[7] & 0xf0) << 8));
}
IQ_KERNELS(iq1_m, block_iq1_m, blk_iq1_m, d_iq1_m, 0.125f)

/* ---- registration ---------------------------------------------------------------------------- */

#define SET_IQ(tab, n_tab, t, name)                                                               \
    do {                                                                                          \
        if ((int)(t) < (n_tab)) {                                                                 \
            (tab)[t].vec_dot = vec_dot_##name;                                                    \
            (tab)[t].vec_dot4 = vec_dot_##name##_x4;                                              \
            (tab)[t].vec_dot_rows4 = vec_dot_##name##_r4;                                         \
            (tab)[t].isa = "avx2";                                                                \
        }                                                                                         \
    } while (0)

/* Contract in quant_iq.h. */
void quant_iq_register_avx2(struct quant_kernels *tab, int n_tab) {
    SET_IQ(tab, n_tab, QTYPE_IQ2_XXS, iq2_xxs);
    SET_IQ(tab, n_tab, QTYPE_IQ2_XS, iq2_xs);
    SET_IQ(tab, n_tab, QTYPE_IQ2_S, iq2_s);
    SET_IQ(tab, n_tab, QTYPE_IQ3_XXS, iq3_xxs);
    SET_IQ(tab, n_tab, QTYPE_IQ3_S, iq3_s);
    SET_IQ(tab, n_tab, QTYPE_IQ1_S, iq1_s);
    SET_IQ(tab, n_tab, QTYPE_IQ1_M, iq1_m);
}
