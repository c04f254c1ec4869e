/* quant_iq_avx2.c - AVX2+FMA+F16C twins of the grid i-quant dot products in quant_iq.c.
 * Each block's integer sum is the spec's, computed in another order (exact: no intermediate can
 * saturate, see each type); the float steps are the spec's, in the spec's order, so every result
 * is bit-identical to quant_iq.c's. Grid entries are fetched by scalar index loads; signs become
 * +-1 bytes that _mm256_sign_epi8 applies to the activations (codes in [-127, 127], so negating
 * never overflows); _mm256_maddubs_epi16 multiplies the unsigned grid bytes with them in pairs
 * (|pair| <= 2 * 62 * 127 < 32767) and _mm256_madd_epi16 applies the odd multipliers. */
#include <immintrin.h>

#include "quant_iq.h"

typedef __m256i iq_vec;

static inline __attribute__((always_inline)) int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* [sum a, sum b, sum c, sum d] of four vectors of 8 int32 lanes. */
static inline __attribute__((always_inline)) __m128i hsum4_epi32(__m256i a, __m256i b, __m256i c,
                                                                 __m256i d) {
    const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

#include "quant_iq_simd.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* Four 8-byte grid entries, entry i0 in bytes 0-7. */
ALWAYS __m256i grid8x4(const uint64_t *g, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return _mm256_set_epi64x((long long)g[i3], (long long)g[i2], (long long)g[i1],
                             (long long)g[i0]);
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
    const __m256i v =
        _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), bit);
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

/* ---- iq2_xxs: per 32 values 4 index bytes, then 4 sign indices and s in one u32 ------------- */

ALWAYS void blk_iq2_xxs(const uint8_t *x, const struct block_q8_K *const *y, int na, __m256i *out) {
    const uint8_t *qs = x + 2;
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t aux = rd32(qs + 8 * ib + 4);
        const __m256i g =
            grid8x4(quant_iq_grid2xxs, qs[8 * ib], qs[8 * ib + 1], qs[8 * ib + 2], qs[8 * ib + 3]);
        const __m256i sgn =
            ksigns4(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
        const __m256i mul = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq2_xxs, block_iq2_xxs, blk_iq2_xxs, d_at0, 0.125f)

/* ---- iq2_xs: per 8 values a u16 of index (9 bits) and sign index; nibble scales ------------- */

ALWAYS void blk_iq2_xs(const uint8_t *x, const struct block_q8_K *const *y, int na, __m256i *out) {
    const uint8_t *qs = x + 2, *sc = x + 66;
    const __m256i q0 = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i q1 = _mm256_loadu_si256((const __m256i *)(qs + 32));
    /* the 32 sign indices (u16 >> 9) as bytes in entry order, then their masks */
    const __m256i f = _mm256_permute4x64_epi64(
        _mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), 0xD8);
    uint32_t sg[8];
    _mm256_storeu_si256((__m256i *)sg, ksigns32(f));
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const unsigned q0w = rd16(qs + 8 * ib), q1w = rd16(qs + 8 * ib + 2);
        const unsigned q2w = rd16(qs + 8 * ib + 4), q3w = rd16(qs + 8 * ib + 6);
        const __m256i g = grid8x4(quant_iq_grid2xs, q0w & 511, q1w & 511, q2w & 511, q3w & 511);
        const __m256i sgn = bits_to_signs(sg[ib]);
        const __m256i mul = mul16x2(2 * (sc[ib] & 15) + 1, 2 * (sc[ib] >> 4) + 1);
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq2_xs, block_iq2_xs, blk_iq2_xs, d_at0, 0.125f)

/* ---- iq2_s: index low bytes, sign bytes, 2 index bits per group in qh, nibble scales -------- */

ALWAYS void blk_iq2_s(const uint8_t *x, const struct block_q8_K *const *y, int na, __m256i *out) {
    const uint8_t *qs = x + 2, *signs = x + 34, *qh = x + 66, *sc = x + 74;
    const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    uint32_t idx[32];
    for (int k = 0; k < 4; k++) { /* groups 2k and 2k + 1 */
        const __m256i hi = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(rd16(qh + 2 * k)), shifts), _mm256_set1_epi32(3));
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * k)));
        _mm256_storeu_si256((__m256i *)(idx + 8 * k),
                            _mm256_or_si256(lo, _mm256_slli_epi32(hi, 8)));
    }
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i g = grid8x4(quant_iq_grid2s, idx[4 * ib], idx[4 * ib + 1], idx[4 * ib + 2],
                                  idx[4 * ib + 3]);
        const __m256i sgn = bits_to_signs(rd32(signs + 4 * ib));
        const __m256i mul = mul16x2(2 * (sc[ib] & 15) + 1, 2 * (sc[ib] >> 4) + 1);
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq2_s, block_iq2_s, blk_iq2_s, d_at0, 0.125f)

/* ---- iq3_xxs: 8 index bytes per 32 values, then per 32 a u32 of sign indices and s ---------- */

ALWAYS void blk_iq3_xxs(const uint8_t *x, const struct block_q8_K *const *y, int na, __m256i *out) {
    const uint8_t *qs = x + 2;
    const __m256i aux = _mm256_loadu_si256((const __m256i *)(x + 66));
    /* the four 7-bit sign indices of u32 ib to its bytes 0-3 */
    __m256i f = _mm256_and_si256(aux, _mm256_set1_epi32(0x7f));
    f = _mm256_or_si256(f, _mm256_and_si256(_mm256_slli_epi32(aux, 1), _mm256_set1_epi32(0x7f00)));
    f = _mm256_or_si256(f,
                        _mm256_and_si256(_mm256_slli_epi32(aux, 2), _mm256_set1_epi32(0x7f0000)));
    f = _mm256_or_si256(f,
                        _mm256_and_si256(_mm256_slli_epi32(aux, 3), _mm256_set1_epi32(0x7f000000)));
    uint32_t sg[8];
    _mm256_storeu_si256((__m256i *)sg, ksigns32(f));
    int16_t ms[16]; /* 2s + 1 in the low word of each u32 */
    _mm256_storeu_si256(
        (__m256i *)ms,
        _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1)));
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * ib)));
        const __m256i g = _mm256_i32gather_epi32((const int *)quant_iq_grid3xxs, idx, 4);
        const __m256i sgn = bits_to_signs(sg[ib]);
        const __m256i mul = _mm256_set1_epi16(ms[2 * ib]);
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq3_xxs, block_iq3_xxs, blk_iq3_xxs, d_at0, 0.25f)

/* ---- iq3_s: index low bytes, one high bit each in qh, sign bytes, nibble scales per 32 ------ */

ALWAYS void blk_iq3_s(const uint8_t *x, const struct block_q8_K *const *y, int na, __m256i *out) {
    const uint8_t *qs = x + 2, *qh = x + 66, *signs = x + 74, *sc = x + 106;
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    int16_t ms[8];
    for (int k = 0; k < 4; k++) {
        ms[2 * k] = (int16_t)(2 * (sc[k] & 15) + 1);
        ms[2 * k + 1] = (int16_t)(2 * (sc[k] >> 4) + 1);
    }
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * ib)));
        const __m256i h = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(qh[ib]), bit), bit);
        const __m256i idx = _mm256_or_si256(lo, _mm256_and_si256(h, _mm256_set1_epi32(256)));
        const __m256i g = _mm256_i32gather_epi32((const int *)quant_iq_grid3s, idx, 4);
        const __m256i sgn = bits_to_signs(rd32(signs + 4 * ib));
        const __m256i mul = _mm256_set1_epi16(ms[ib]);
        for (int j = 0; j < na; j++)
            out[j] = dot_group(out[j], g, sgn, mul, y[j]->qs + 32 * ib);
    }
}
IQ_KERNELS(iq3_s, block_iq3_s, blk_iq3_s, d_at0, 1.0f)

/* ---- iq1_s / iq1_m ----------------------------------------------------------------------- */
/* 8 * grid + delta = w - 9 with w = 8 * (grid + 1) + (delta + 1) in 0..18, from
 * quant_iq1_w_table() (index: grid index | negative delta << 11), so a group's sum is
 * m * sum(w * q) - 9m * sum(q), the last from bsums. maddubs pairs stay below 2 * 18 * 127. */

static const uint64_t *iq1_w; /* quant_iq1_w_table(), set at registration */

/* acc + madd(maddubs(w, q), mul). */
ALWAYS __m256i dot_group_u(__m256i acc, __m256i w, __m256i mul, const int8_t *q) {
    const __m256i p = _mm256_maddubs_epi16(w, _mm256_loadu_si256((const __m256i *)q));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, mul));
}

/* acc - 9 * sum_g m[g] * bsums[g] over the 16 per-16 multipliers m. */
ALWAYS __m256i iq1_bsums(__m256i acc, const int16_t m[16], const int16_t *bsums) {
    const __m256i c =
        _mm256_mullo_epi16(_mm256_loadu_si256((const __m256i *)m), _mm256_set1_epi16(-9));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), c));
}

/* iq1_s: per 32 values a u16 qh: 3 index bits per entry, s in bits 12-14, the delta's sign in
 * bit 15 (bit 11 of all four w indices). */
ALWAYS void blk_iq1_s(const uint8_t *x, const struct block_q8_K *const *y, int na, __m256i *out) {
    const uint8_t *qs = x + 2;
    const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + 34)));
    const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
    uint32_t idx[32];
    for (int k = 0; k < 4; k++) { /* groups 2k and 2k + 1 */
        const __m256i h =
            _mm256_permutevar8x32_epi32(qh, _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1,
                                                              2 * k + 1, 2 * k + 1, 2 * k + 1));
        const __m256i hi = _mm256_slli_epi32(
            _mm256_and_si256(_mm256_srlv_epi32(h, shifts), _mm256_set1_epi32(7)), 8);
        const __m256i neg = _mm256_and_si256(_mm256_srli_epi32(h, 4), _mm256_set1_epi32(0x800));
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * k)));
        _mm256_storeu_si256((__m256i *)(idx + 8 * k),
                            _mm256_or_si256(_mm256_or_si256(lo, hi), neg));
    }
    int16_t m[16];
    const __m256i mv = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7)), 1),
        _mm256_set1_epi32(1));
    _mm256_storeu_si256((__m256i *)m, _mm256_or_si256(mv, _mm256_slli_epi32(mv, 16)));
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i w =
            grid8x4(iq1_w, idx[4 * ib], idx[4 * ib + 1], idx[4 * ib + 2], idx[4 * ib + 3]);
        const __m256i mul = _mm256_set1_epi16(m[2 * ib]);
        for (int j = 0; j < na; j++)
            out[j] = dot_group_u(out[j], w, mul, y[j]->qs + 32 * ib);
    }
    for (int j = 0; j < na; j++)
        out[j] = iq1_bsums(out[j], m, y[j]->bsums);
}
IQ_KERNELS(iq1_s, block_iq1_s, blk_iq1_s, d_at0, 0.125f)

/* iq1_m: per entry a qh nibble (3 index bits, then the delta's sign: bits 8-11 of the w index);
 * per 16 values a 3-bit s in the scale words. */
ALWAYS void blk_iq1_m(const uint8_t *x, const struct block_q8_K *const *y, int na, __m256i *out) {
    const uint8_t *qs = x, *qh = x + 32, *sc = x + 48;
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    uint32_t idx[32];
    int16_t m[16];
    for (int k = 0; k < 4; k++) { /* groups 2k and 2k + 1: qh bytes 4k..4k+3 */
        const __m256i nib =
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)rd32(qh + 4 * k)), shifts),
                             _mm256_set1_epi32(15));
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * k)));
        _mm256_storeu_si256((__m256i *)(idx + 8 * k),
                            _mm256_or_si256(lo, _mm256_slli_epi32(nib, 8)));
    }
    for (int ib = 0; ib < 8; ib++) {
        const unsigned s = (unsigned)rd16(sc + 2 * (ib / 2)) >> (6 * (ib % 2));
        m[2 * ib] = (int16_t)(2 * (s & 7) + 1);
        m[2 * ib + 1] = (int16_t)(2 * ((s >> 3) & 7) + 1);
    }
    for (int j = 0; j < na; j++)
        out[j] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i w =
            grid8x4(iq1_w, idx[4 * ib], idx[4 * ib + 1], idx[4 * ib + 2], idx[4 * ib + 3]);
        const __m256i mul = mul16x2(m[2 * ib], m[2 * ib + 1]);
        for (int j = 0; j < na; j++)
            out[j] = dot_group_u(out[j], w, mul, y[j]->qs + 32 * ib);
    }
    for (int j = 0; j < na; j++)
        out[j] = iq1_bsums(out[j], m, y[j]->bsums);
}

IQ_KERNELS(iq1_m, block_iq1_m, blk_iq1_m, d_iq1_m, 0.125f)

/* ---- registration ---------------------------------------------------------------------------- */

/* Contract in quant_iq.h. */
void quant_iq_register_avx2(struct quant_kernels *tab, int n_tab) {
    iq1_w = quant_iq1_w_table();
    SET_IQ(tab, n_tab, QTYPE_IQ2_XXS, iq2_xxs, "avx2");
    SET_IQ(tab, n_tab, QTYPE_IQ2_XS, iq2_xs, "avx2");
    SET_IQ(tab, n_tab, QTYPE_IQ2_S, iq2_s, "avx2");
    SET_IQ(tab, n_tab, QTYPE_IQ3_XXS, iq3_xxs, "avx2");
    SET_IQ(tab, n_tab, QTYPE_IQ3_S, iq3_s, "avx2");
    SET_IQ(tab, n_tab, QTYPE_IQ1_S, iq1_s, "avx2");
    SET_IQ(tab, n_tab, QTYPE_IQ1_M, iq1_m, "avx2");
}
