/* quant_iq_neon.c - NEON twins of the grid i-quant dot products in quant_iq.c (IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M). quant_iq_neondot.c compiles this file again with SDOT,
 * registered as "neondot" where the CPU has it, and quant_iq_i8mm.c with SMMLA too ("i8mm", with
 * vec_dot_2xn: quant_neon_simd.h's two-row driver). Each block is decoded into quant_neon_simd.h's
 * sixteen groups (signed codes, the spec's odd multipliers as group factors), whose exact integer
 * sum is the spec's isum; the float steps are the spec's, in its order, so every result is
 * bit-identical to quant_iq.c's. Grid entries come from the codebooks by scalar index loads;
 * signs negate a code lane ((g ^ m) - m), exact since every grid value is below 64; iq1's codes
 * are 8 * grid + delta, in [-9, 9]. */
#include "quant_iq.h"
#include "quant_neon_simd.h"

#if defined(__ARM_FEATURE_MATMUL_INT8)
#define IQ_NEON_REGISTER quant_iq_register_i8mm
#elif defined(__ARM_FEATURE_DOTPROD)
#define IQ_NEON_REGISTER quant_iq_register_neondot
#else
#define IQ_NEON_REGISTER quant_iq_register_neon
#endif

/* ==== helpers ================================================================================= */

/* Two 8-value grid entries: i0's values in lanes 0-7, i1's in 8-15. */
static inline uint8x16_t grid8x2(const uint64_t *grid, unsigned i0, unsigned i1) {
    return vcombine_u8(vcreate_u8(grid[i0]), vcreate_u8(grid[i1]));
}

/* Four 4-value grid entries, i0's values in lanes 0-3. */
static inline uint8x16_t grid4x4(const uint32_t *grid, unsigned i0, unsigned i1, unsigned i2,
                                 unsigned i3) {
    const uint32_t v[4] = {grid[i0], grid[i1], grid[i2], grid[i3]};
    return vreinterpretq_u8_u32(vld1q_u32(v));
}

/* Grid values g (each below 128) as signed codes, negated in the lanes where bit j % 8 of s0
 * (lanes 0-7) or s1 (lanes 8-15) is set. */
static inline int8x16_t signed_codes(uint8x16_t g, uint8_t s0, uint8_t s1) {
    const int8x16_t m = vreinterpretq_s8_u8(bits16(s0, s1));
    return vsubq_s8(veorq_s8(vreinterpretq_s8_u8(g), m), m);
}

/* The spec's 8-bit sign mask of a 7-bit sign index k (bits 7 * l .. 7 * l + 6 of aux). */
static inline uint8_t ksigns_at(uint32_t aux, int l) {
    return quant_iq_ksigns[(aux >> (7 * l)) & 127];
}

/* Block scale d = (fp16(w.d) * a.d) * unit, the spec's expression. */
#define D_IQ(x, y, unit) (fp16_to_f32((x)->d) * (y)->d * (unit))
#define D_IQ2(x, y) D_IQ(x, y, 0.125f)
#define D_IQ3XXS(x, y) D_IQ(x, y, 0.25f)
#define D_IQ3S(x, y) D_IQ(x, y, 1.0f)
#define D_IQ1M(x, y) (fp16_to_f32(quant_iq1_m_d(x)) * (y)->d * 0.125f)

/* ==== decoders: a block into sixteen groups ================================================ */
/* Group 2 ib + h of 16 holds values 32 ib + 16 h ..; its factor is the spec's m of those values. */

/* iq2_xxs: per 32 values 4 index bytes, then a u32 of 4 sign indices and s (bits 28-31). */
static inline void iq2_xxs_decode(const struct block_iq2_xxs *x, struct neon_k16 *k) {
    const uint8_t *qs = (const uint8_t *)x->qs;
    for (int ib = 0; ib < 8; ib++, qs += 8) {
        const uint32_t aux = rd32(qs + 4);
        for (int h = 0; h < 2; h++) {
            const uint8x16_t g = grid8x2(quant_iq_grid2xxs, qs[2 * h], qs[2 * h + 1]);
            k->q[2 * ib + h] = signed_codes(g, ksigns_at(aux, 2 * h), ksigns_at(aux, 2 * h + 1));
            k->sc[2 * ib + h] = (int32_t)(2 * (aux >> 28) + 1);
        }
    }
}

/* iq2_xs: per 8 values a u16 of grid index (9 bits) and sign index; a nibble s per 16. */
static inline void iq2_xs_decode(const struct block_iq2_xs *x, struct neon_k16 *k) {
    const uint8_t *qs = (const uint8_t *)x->qs;
    for (int g = 0; g < 16; g++) {
        const unsigned v0 = rd16(qs + 4 * g), v1 = rd16(qs + 4 * g + 2);
        k->q[g] = signed_codes(grid8x2(quant_iq_grid2xs, v0 & 511, v1 & 511),
                               quant_iq_ksigns[v0 >> 9], quant_iq_ksigns[v1 >> 9]);
        k->sc[g] = 2 * ((x->scales[g / 2] >> (4 * (g % 2))) & 15) + 1;
    }
}

/* iq2_s: index low bytes, then sign bytes; index bits 8-9 of entry l of 32 values in qh. */
static inline void iq2_s_decode(const struct block_iq2_s *x, struct neon_k16 *k) {
    const uint8_t *signs = x->qs + QK_K / 8;
    for (int g = 0; g < 16; g++) {
        const int ib = g / 2, l = 2 * (g % 2); /* entries l and l + 1 of the 32 */
        const unsigned i0 = x->qs[4 * ib + l] | ((x->qh[ib] >> (2 * l)) & 3) << 8;
        const unsigned i1 = x->qs[4 * ib + l + 1] | ((x->qh[ib] >> (2 * l + 2)) & 3) << 8;
        k->q[g] = signed_codes(grid8x2(quant_iq_grid2s, i0, i1), signs[4 * ib + l],
                               signs[4 * ib + l + 1]);
        k->sc[g] = 2 * ((x->scales[ib] >> (4 * (g % 2))) & 15) + 1;
    }
}

/* iq3_xxs: 64 index bytes (one per 4 values), then per 32 values a u32 of sign indices and s. */
static inline void iq3_xxs_decode(const struct block_iq3_xxs *x, struct neon_k16 *k) {
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t aux = rd32(x->qs + QK_K / 4 + 4 * ib);
        for (int h = 0; h < 2; h++) {
            const uint8_t *idx = x->qs + 8 * ib + 4 * h;
            const uint8x16_t g = grid4x4(quant_iq_grid3xxs, idx[0], idx[1], idx[2], idx[3]);
            k->q[2 * ib + h] = signed_codes(g, ksigns_at(aux, 2 * h), ksigns_at(aux, 2 * h + 1));
            k->sc[2 * ib + h] = (int32_t)(2 * (aux >> 28) + 1);
        }
    }
}

/* iq3_s: index low bytes, bit 8 of index k of 32 values in qh bit k, a sign byte per 8 values, a
 * nibble s per 32. */
static inline void iq3_s_decode(const struct block_iq3_s *x, struct neon_k16 *k) {
    for (int g = 0; g < 16; g++) {
        const int ib = g / 2, e = 4 * (g % 2); /* entries e .. e + 3 of the 32 */
        unsigned idx[4];
        for (int j = 0; j < 4; j++)
            idx[j] = x->qs[8 * ib + e + j] | ((x->qh[ib] >> (e + j)) & 1) << 8;
        k->q[g] = signed_codes(grid4x4(quant_iq_grid3s, idx[0], idx[1], idx[2], idx[3]),
                               x->signs[2 * g], x->signs[2 * g + 1]);
        k->sc[g] = 2 * ((x->scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
    }
}

/* iq1: two 8-value grid entries (values -1, 0, 1) as codes 8 * g + delta, delta d0 for lanes
 * 0-7 and d1 for 8-15 (each +1 or -1). */
static inline int8x16_t iq1_codes(unsigned i0, unsigned i1, int8_t d0, int8_t d1) {
    const int8x16_t g = vreinterpretq_s8_u8(grid8x2(quant_iq_grid1s, i0, i1));
    return vaddq_s8(vshlq_n_s8(g, 3), vcombine_s8(vdup_n_s8(d0), vdup_n_s8(d1)));
}

/* iq1_s: per 32 values a u16: 3 index bits per entry, s in bits 12-14, the delta's sign in 15. */
static inline void iq1_s_decode(const struct block_iq1_s *x, struct neon_k16 *k) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned h = rd16((const uint8_t *)x->qh + 2 * ib);
        const int8_t d = h & 0x8000 ? -1 : 1;
        for (int hh = 0; hh < 2; hh++) {
            const int l = 2 * hh;
            k->q[2 * ib + hh] = iq1_codes(x->qs[4 * ib + l] | ((h >> (3 * l)) & 7) << 8,
                                          x->qs[4 * ib + l + 1] | ((h >> (3 * l + 3)) & 7) << 8,
                                          d, d);
            k->sc[2 * ib + hh] = (int32_t)(2 * ((h >> 12) & 7) + 1);
        }
    }
}

/* iq1_m: per entry a qh nibble (3 index bits, the delta's sign); a 3-bit s per 16 values in the
 * scale words. */
static inline void iq1_m_decode(const struct block_iq1_m *x, struct neon_k16 *k) {
    for (int g = 0; g < 16; g++) {
        const int ib = g / 2;
        const unsigned nib = x->qh[g]; /* entries 2g (low nibble) and 2g + 1 */
        k->q[g] = iq1_codes(x->qs[2 * g] | (nib & 7) << 8, x->qs[2 * g + 1] | ((nib >> 4) & 7) << 8,
                            nib & 8 ? -1 : 1, nib & 0x80 ? -1 : 1);
        const unsigned sc = (unsigned)rd16(x->scales + 2 * (ib / 2)) >> (6 * (ib % 2));
        k->sc[g] = (int32_t)(2 * ((sc >> (3 * (g % 2))) & 7) + 1);
    }
}

K16_ONE_TERM(iq2_xxs, struct block_iq2_xxs, iq2_xxs_decode, D_IQ2)
K16_ONE_TERM(iq2_xs, struct block_iq2_xs, iq2_xs_decode, D_IQ2)
K16_ONE_TERM(iq2_s, struct block_iq2_s, iq2_s_decode, D_IQ2)
K16_ONE_TERM(iq3_xxs, struct block_iq3_xxs, iq3_xxs_decode, D_IQ3XXS)
K16_ONE_TERM(iq3_s, struct block_iq3_s, iq3_s_decode, D_IQ3S)
K16_ONE_TERM(iq1_s, struct block_iq1_s, iq1_s_decode, D_IQ2)
K16_ONE_TERM(iq1_m, struct block_iq1_m, iq1_m_decode, D_IQ1M)

/* ==== registration ============================================================================ */

/* Contract in quant_iq.h. */
void IQ_NEON_REGISTER(struct quant_kernels *tab, int n_tab) {
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ2_XXS, iq2_xxs);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ2_XS, iq2_xs);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ2_S, iq2_s);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ3_XXS, iq3_xxs);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ3_S, iq3_s);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ1_S, iq1_s);
    NEON_SET_COLS(tab, n_tab, QTYPE_IQ1_M, iq1_m);
}
