/* quant_iq_avx512.c - AVX-512 (F/BW/VL/DQ/VNNI) twins of the grid i-quant dot products in
 * quant_iq.c, bit-identical to the spec like the AVX2 twins (same integer sums, same float steps).
 * 64 values per step; per block the sign bits of all 256 values are decoded at once into four
 * 64-bit masks that negate activation bytes (codes in [-127, 127]: no overflow), and the odd
 * multipliers into int16 lanes for _mm512_madd_epi16. */
#include <immintrin.h>

#include "quant_iq.h"

typedef __m512i iq_vec;

static inline __attribute__((always_inline)) int32_t hsum_epi32(__m512i v) {
    return _mm512_reduce_add_epi32(v);
}

/* [sum a, sum b, sum c, sum d] of four vectors of 16 int32 lanes. */
static inline __attribute__((always_inline)) __m128i hsum4_epi32(__m512i a, __m512i b, __m512i c,
                                                                 __m512i d) {
    const __m256i a8 = _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
    const __m256i b8 = _mm256_add_epi32(_mm512_castsi512_si256(b), _mm512_extracti64x4_epi64(b, 1));
    const __m256i c8 = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));
    const __m256i d8 = _mm256_add_epi32(_mm512_castsi512_si256(d), _mm512_extracti64x4_epi64(d, 1));
    const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a8, b8), _mm256_hadd_epi32(c8, d8));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

#include "quant_iq_simd.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* int16 lane indices: a for lanes 0-15, b for lanes 16-31 (for _mm512_permutexvar_epi16). */
ALWAYS __m512i halves16(int a, int b) {
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16((short)a),
                                   _mm512_set1_epi16((short)b));
}

/* acc + madd(maddubs(g, q negated where k), mul): 64 values, g unsigned. */
ALWAYS __m512i dot64(__m512i acc, __m512i g, __mmask64 k, __m512i mul, const int8_t *q) {
    const __m512i qv = _mm512_loadu_si512(q);
    const __m512i qs = _mm512_mask_sub_epi8(qv, k, _mm512_setzero_si512(), qv);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(g, qs), mul));
}

/* ---- iq2_xxs ------------------------------------------------------------------------------- */
/* The 64 bytes after d are 16 u32: even ones hold 4 index bytes, odd ones 4 sign indices and s. */

ALWAYS void blk_iq2_xxs(const uint8_t *x, const struct block_q8_K *const *y, int na, __m512i *out) {
    const __m512i q = _mm512_loadu_si512(x + 2);
    /* per u64 (index word | aux word << 32): the 4 sign indices of aux to bytes 0-3 */
    const __m512i aux = _mm512_srli_epi64(q, 32);
    __m512i f = _mm512_and_si512(aux, _mm512_set1_epi64(0x7f));
    f = _mm512_ternarylogic_epi64(_mm512_slli_epi64(aux, 1), _mm512_set1_epi64(0x7f00), f, 0xea);
    f = _mm512_ternarylogic_epi64(_mm512_slli_epi64(aux, 2), _mm512_set1_epi64(0x7f0000), f, 0xea);
    f = _mm512_ternarylogic_epi64(_mm512_slli_epi64(aux, 3), _mm512_set1_epi64(0x7f000000), f,
                                  0xea);
    uint64_t sg[4];
    _mm256_storeu_si256((__m256i *)sg, ksigns32(_mm512_cvtepi64_epi32(f)));
    /* multipliers 2s + 1 in the low word of each odd u32 */
    const __m512i m =
        _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(q, 28), 1), _mm512_set1_epi32(1));
    int16_t ms[32];
    _mm512_storeu_si512(ms, m);
    const __m512i ib =
        _mm512_shuffle_epi8(q, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -1,
                                                                    -1, -1, -1, -1, -1, -1, -1)));
    for (int j = 0; j < na; j++)
        out[j] = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
        const __m512i mul =
            _mm512_mask_set1_epi16(_mm512_set1_epi16(ms[8 * t + 2]), 0xFFFF0000u, ms[8 * t + 6]);
        const __m128i lane = t == 0   ? _mm512_castsi512_si128(ib)
                             : t == 1 ? _mm512_extracti32x4_epi32(ib, 1)
                             : t == 2 ? _mm512_extracti32x4_epi32(ib, 2)
                                      : _mm512_extracti32x4_epi32(ib, 3);
        const __m512i g =
            _mm512_i64gather_epi64(_mm512_cvtepu8_epi64(lane), (const void *)quant_iq_grid2xxs, 8);
        for (int j = 0; j < na; j++)
            out[j] = dot64(out[j], g, sg[t], mul, y[j]->qs + 64 * t);
    }
}
IQ_KERNELS(iq2_xxs, block_iq2_xxs, blk_iq2_xxs, d_at0, 0.125f)

/* ---- per-block multiplier vectors -------------------------------------------------------------
 */

/* n scale bytes (n = 8 or 4) -> 2n int16 multipliers 2 * nibble + 1, low nibble first:
 * word 2b = byte b's low nibble, word 2b + 1 its high nibble. */
ALWAYS __m512i nibble_muls(uint64_t bytes) {
    const __m128i v = _mm_cvtsi64_si128((long long)bytes);
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15));
    const __m128i nib = _mm_unpacklo_epi8(lo, hi);
    const __m128i m = _mm_or_si128(_mm_add_epi8(nib, nib), _mm_set1_epi8(1));
    return _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(m));
}

/* The multipliers of step t (values 64t..64t+63) from 16 per-16 multipliers in words 0-15. */
ALWAYS __m512i step_muls16(__m512i m16, int t) {
    const __m512i base =
        _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002,
                         0x0002000200020002, 0x0001000100010001, 0x0001000100010001, 0, 0);
    return _mm512_permutexvar_epi16(_mm512_add_epi16(base, _mm512_set1_epi16((short)(4 * t))), m16);
}

/* 8 index-or-scale words per 8 groups from words w[0..7] replicated: word k of the result is
 * (w[k / 4] >> shift[k % 4]) & mask, for k = 0..31. */
ALWAYS __m512i spread4_words(__m128i w8, __m512i shifts, short mask) {
    const __m512i rep = _mm512_set_epi64(0x0007000700070007, 0x0006000600060006, 0x0005000500050005,
                                         0x0004000400040004, 0x0003000300030003, 0x0002000200020002,
                                         0x0001000100010001, 0);
    const __m512i w = _mm512_permutexvar_epi16(rep, _mm512_castsi128_si512(w8));
    return _mm512_and_si512(_mm512_srlv_epi16(w, shifts), _mm512_set1_epi16(mask));
}

/* Eight 8-byte grid entries at word indices 8t..8t+7 of idx (32 words). */
ALWAYS __m512i gather8_w(const uint64_t *grid, __m512i idx, int t) {
    const __m128i lane = t == 0   ? _mm512_castsi512_si128(idx)
                         : t == 1 ? _mm512_extracti32x4_epi32(idx, 1)
                         : t == 2 ? _mm512_extracti32x4_epi32(idx, 2)
                                  : _mm512_extracti32x4_epi32(idx, 3);
    return _mm512_i64gather_epi64(_mm512_cvtepu16_epi64(lane), (const void *)grid, 8);
}

/* ---- iq2_xs: 32 u16 of index (9 bits) | sign index << 9; per 16 values a scale nibble ------- */

ALWAYS void blk_iq2_xs(const uint8_t *x, const struct block_q8_K *const *y, int na, __m512i *out) {
    const __m512i q = _mm512_loadu_si512(x + 2);
    uint64_t sg[4], sc;
    _mm256_storeu_si256((__m256i *)sg, ksigns32(_mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9))));
    memcpy(&sc, x + 66, sizeof(sc));
    const __m512i m16 = nibble_muls(sc);
    const __m512i idx = _mm512_and_si512(q, _mm512_set1_epi16(511));
    for (int j = 0; j < na; j++)
        out[j] = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
        const __m512i g = gather8_w(quant_iq_grid2xs, idx, t);
        const __m512i mul = step_muls16(m16, t);
        for (int j = 0; j < na; j++)
            out[j] = dot64(out[j], g, sg[t], mul, y[j]->qs + 64 * t);
    }
}
IQ_KERNELS(iq2_xs, block_iq2_xs, blk_iq2_xs, d_at0, 0.125f)

/* ---- iq2_s: 32 low index bytes, 32 sign bytes, 2 index bits per entry in qh, nibble scales -- */

ALWAYS void blk_iq2_s(const uint8_t *x, const struct block_q8_K *const *y, int na, __m512i *out) {
    uint64_t sc, qh;
    memcpy(&sc, x + 74, sizeof(sc));
    memcpy(&qh, x + 66, sizeof(qh));
    const __m512i m16 = nibble_muls(sc);
    const __m512i shifts = _mm512_set1_epi64(0x0006000400020000);
    const __m512i hi =
        spread4_words(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)qh)), shifts, 3);
    const __m512i idx =
        _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(x + 2))),
                        _mm512_slli_epi16(hi, 8));
    for (int j = 0; j < na; j++)
        out[j] = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
        uint64_t sg;
        memcpy(&sg, x + 34 + 8 * t, sizeof(sg));
        const __m512i g = gather8_w(quant_iq_grid2s, idx, t);
        const __m512i mul = step_muls16(m16, t);
        for (int j = 0; j < na; j++)
            out[j] = dot64(out[j], g, sg, mul, y[j]->qs + 64 * t);
    }
}
IQ_KERNELS(iq2_s, block_iq2_s, blk_iq2_s, d_at0, 0.125f)

/* ---- iq3_xxs: 64 index bytes (4 values each), then 8 u32 of sign indices and s ------------- */

ALWAYS void blk_iq3_xxs(const uint8_t *x, const struct block_q8_K *const *y, int na, __m512i *out) {
    const __m512i aux = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x + 66)));
    const __m512i shifts =
        _mm512_setr_epi32(0, 7, 14, 21, 0, 7, 14, 21, 0, 7, 14, 21, 0, 7, 14, 21);
    const __m512i f0 = _mm512_srlv_epi32(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 aux),
        shifts);
    const __m512i f1 = _mm512_srlv_epi32(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7),
                                 aux),
        shifts);
    const __m256i f =
        _mm256_and_si256(_mm256_setr_m128i(_mm512_cvtepi32_epi8(f0), _mm512_cvtepi32_epi8(f1)),
                         _mm256_set1_epi8(127));
    uint64_t sg[4];
    _mm256_storeu_si256((__m256i *)sg, ksigns32(f));
    const __m512i m =
        _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(aux, 28), 1), _mm512_set1_epi32(1));
    for (int j = 0; j < na; j++)
        out[j] = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
        const __m512i mul = _mm512_permutexvar_epi16(halves16(4 * t, 4 * t + 2), m);
        const __m512i idx =
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + 2 + 16 * t)));
        const __m512i g = _mm512_i32gather_epi32(idx, (const void *)quant_iq_grid3xxs, 4);
        for (int j = 0; j < na; j++)
            out[j] = dot64(out[j], g, sg[t], mul, y[j]->qs + 64 * t);
    }
}
IQ_KERNELS(iq3_xxs, block_iq3_xxs, blk_iq3_xxs, d_at0, 0.25f)

/* ---- iq3_s: 64 low index bytes, their 9th bits in qh, sign bytes, a nibble per 32 values ---- */

ALWAYS void blk_iq3_s(const uint8_t *x, const struct block_q8_K *const *y, int na, __m512i *out) {
    uint32_t sc;
    memcpy(&sc, x + 106, sizeof(sc));
    const __m512i m8 = nibble_muls(sc);
    for (int j = 0; j < na; j++)
        out[j] = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
        uint64_t sg;
        memcpy(&sg, x + 74 + 8 * t, sizeof(sg));
        const __mmask16 h = rd16(x + 66 + 2 * t);
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + 2 + 16 * t)));
        const __m512i idx = _mm512_mask_or_epi32(lo, h, lo, _mm512_set1_epi32(256));
        const __m512i g = _mm512_i32gather_epi32(idx, (const void *)quant_iq_grid3s, 4);
        const __m512i mul = _mm512_permutexvar_epi16(halves16(2 * t, 2 * t + 1), m8);
        for (int j = 0; j < na; j++)
            out[j] = dot64(out[j], g, sg, mul, y[j]->qs + 64 * t);
    }
}
IQ_KERNELS(iq3_s, block_iq3_s, blk_iq3_s, d_at0, 1.0f)

/* ---- iq1_s / iq1_m --------------------------------------------------------------------------- */
/* With g' = grid + 1 and d' = delta + 1 (0 or 2): 8 * grid + delta = w - 9 for w = 8g' + d' in
 * 0..18, so a group's sum is m * sum(w * q) - 9m * sum(q), the last from bsums. w comes straight
 * from quant_iq1_w_table(), the grid expanded with the delta's sign as a twelfth index bit.
 * maddubs pairs stay below 2 * 18 * 127. */

static const uint64_t *iq1_w; /* quant_iq1_w_table(), set at registration */

/* acc + madd(maddubs(w, q), mul) for 64 values. */
ALWAYS __m512i dot64u(__m512i acc, __m512i w, __m512i mul, const int8_t *q) {
    const __m512i p = _mm512_maddubs_epi16(w, _mm512_loadu_si512(q));
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, mul));
}

/* acc - 9 * sum_g m16[g] * bsums[g] (16 int16 multipliers in the low 256 bits of m16). */
ALWAYS __m512i iq1_bsums(__m512i acc, __m512i m16, const int16_t *bsums) {
    const __m256i c = _mm256_mullo_epi16(_mm512_castsi512_si256(m16), _mm256_set1_epi16(-9));
    const __m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), c);
    return _mm512_add_epi32(acc, _mm512_zextsi256_si512(p));
}

/* The block loop shared by iq1_s and iq1_m: idx = 32 twelve-bit iq1_w indices, m16 = 16 per-16
 * multipliers. */
ALWAYS void iq1_block(__m512i idx, __m512i m16, const struct block_q8_K *const *y, int na,
                      __m512i *out) {
    for (int j = 0; j < na; j++)
        out[j] = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
        const __m512i w = gather8_w(iq1_w, idx, t);
        const __m512i mul = step_muls16(m16, t);
        for (int j = 0; j < na; j++)
            out[j] = dot64u(out[j], w, mul, y[j]->qs + 64 * t);
    }
    for (int j = 0; j < na; j++)
        out[j] = iq1_bsums(out[j], m16, y[j]->bsums);
}

/* iq1_s: 32 low index bytes; per 32 values a u16 qh: 3 index bits per entry (bits 3l..3l+2),
 * s in bits 12-14, the delta's sign in bit 15 (bit 11 of all four of its w indices). */
ALWAYS void blk_iq1_s(const uint8_t *x, const struct block_q8_K *const *y, int na, __m512i *out) {
    const __m128i qh = _mm_loadu_si128((const __m128i *)(x + 34));
    const __m512i hi = spread4_words(qh, _mm512_set1_epi64(0x0009000600030000), 7);
    const __m512i neg = spread4_words(_mm_srli_epi16(qh, 15), _mm512_setzero_si512(), 1);
    const __m512i idx =
        _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(x + 2))),
                        _mm512_or_si512(_mm512_slli_epi16(hi, 8), _mm512_slli_epi16(neg, 11)));
    /* m per 32 values (words 0-7) repeated for the halves: m16 word g = m of group g / 2 */
    const __m128i m8 =
        _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7)), 1),
                     _mm_set1_epi16(1));
    const __m512i m16 = _mm512_castsi256_si512(
        _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                                 _mm256_castsi128_si256(m8)));
    iq1_block(idx, m16, y, na, out);
}
IQ_KERNELS(iq1_s, block_iq1_s, blk_iq1_s, d_at0, 0.125f)

/* iq1_m: 32 low index bytes; per entry a qh nibble (3 index bits, then the delta's sign: the
 * nibble is bits 8-11 of the w index); per 16 values a 3-bit s in the four scale words (bits
 * 0-11), whose top nibbles hold the fp16 d. */
ALWAYS void blk_iq1_m(const uint8_t *x, const struct block_q8_K *const *y, int na, __m512i *out) {
    /* word k = nibble k of qh: byte k / 2 shifted by 4 * (k % 2) */
    const __m512i rep2 = _mm512_set_epi64(
        0x000f000f000e000e, 0x000d000d000c000c, 0x000b000b000a000a, 0x0009000900080008,
        0x0007000700060006, 0x0005000500040004, 0x0003000300020002, 0x0001000100000000);
    const __m512i qhw =
        _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x + 32))));
    const __m512i nib = _mm512_and_si512(
        _mm512_srlv_epi16(_mm512_permutexvar_epi16(rep2, qhw), _mm512_set1_epi32(0x00040000)),
        _mm512_set1_epi16(15));
    const __m512i idx = _mm512_or_si512(
        _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)x)), _mm512_slli_epi16(nib, 8));
    const __m512i s16 = spread4_words(_mm_loadl_epi64((const __m128i *)(x + 48)),
                                      _mm512_set1_epi64(0x0009000600030000), 7);
    const __m512i m16 = _mm512_or_si512(_mm512_slli_epi16(s16, 1), _mm512_set1_epi16(1));
    iq1_block(idx, m16, y, na, out);
}

IQ_KERNELS(iq1_m, block_iq1_m, blk_iq1_m, d_iq1_m, 0.125f)

/* ---- registration ---------------------------------------------------------------------------- */

/* Contract in quant_iq.h. */
void quant_iq_register_avx512(struct quant_kernels *tab, int n_tab) {
    quant_iq_register_avx2(tab, n_tab);
    iq1_w = quant_iq1_w_table();
    SET_IQ(tab, n_tab, QTYPE_IQ2_XXS, iq2_xxs, "avx512");
    SET_IQ(tab, n_tab, QTYPE_IQ2_XS, iq2_xs, "avx512");
    SET_IQ(tab, n_tab, QTYPE_IQ2_S, iq2_s, "avx512");
    SET_IQ(tab, n_tab, QTYPE_IQ3_XXS, iq3_xxs, "avx512");
    SET_IQ(tab, n_tab, QTYPE_IQ3_S, iq3_s, "avx512");
    SET_IQ(tab, n_tab, QTYPE_IQ1_S, iq1_s, "avx512");
    SET_IQ(tab, n_tab, QTYPE_IQ1_M, iq1_m, "avx512");
}
