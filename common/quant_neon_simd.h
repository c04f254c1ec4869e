/* quant_neon_simd.h - what the NEON twins (quant_neon.c, quant_iq_neon.c) share, compiled into each
 * under its own flags (plain Armv8-A, or +dotprod for the "neondot" builds; everything here is
 * static inline): exact int8 dot products (SDOT where the compiler may use it), lane masks from
 * bits, the sixteen-group form of a 256-value block (codes and integer factors), and the column
 * driver that turns a type's block function into vec_dot, vec_dot2 and vec_dot4 with the
 * reference's float operations for every column. Invariant (quant.h's accumulation contract):
 * integer sums here are exact; float operations are only those the block functions perform, in
 * the reference's order. Not for other use. */
#ifndef SNIPER_QUANT_NEON_SIMD_H
#define SNIPER_QUANT_NEON_SIMD_H

#include <arm_neon.h>

#include "quant_impl.h"

#if defined(__ARM_FEATURE_DOTPROD)
#define NEON_ISA "neondot"
#else
#define NEON_ISA "neon"
#endif

#define NEON_INLINE static inline __attribute__((always_inline))

/* ==== integer sums ============================================================================ */

/* acc's lanes plus the products a[j] * b[j] of 16 int8 pairs (each lane takes four). */
NEON_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* sum a[j] * b[j] over two runs of 16: a0 with b[0..15], a1 with b[16..31]. */
NEON_INLINE int dot32(int8x16_t a0, int8x16_t a1, const int8_t *b) {
    const int32x4_t acc = dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(b)), a1, vld1q_s8(b + 16));
    return vaddvq_s32(acc);
}

/* Lane j (0..15): 0xff where bit j % 8 of b0 (j < 8) or of b1 (j >= 8) is set, else 0. */
NEON_INLINE uint8x16_t bits16(uint8_t b0, uint8_t b1) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vtstq_u8(vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1)), vld1q_u8(bit));
}

/* ==== 256-value blocks as sixteen groups of 16 ============================================= */

/* A block of 256 values (K-quants, iq4_xs, the grid i-quants) as its signed codes, group g of 16
 * in q[g], with integer factors per group: the block's sums against Q8_K codes y are
 * isum = sum_g sc[g] * dot(q[g], y[16g..16g+15]) and, for the types with a min term,
 * msum = sum_g mn[g] * bsums[g]. Both are the reference's integers (exact: |isum| < 2^27). */
struct neon_k16 {
    int8x16_t q[16];
    int32_t sc[16];
    int32_t mn[16];
};

NEON_INLINE int k16_isum(const struct neon_k16 *k, const int8_t *y) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int g = 0; g < 16; g++)
        acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), k->q[g], vld1q_s8(y + 16 * g)), k->sc[g]);
    return vaddvq_s32(acc);
}

NEON_INLINE int k16_msum(const struct neon_k16 *k, const int16_t bsums[16]) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int g = 0; g < 16; g += 4)
        acc = vmlaq_s32(acc, vld1q_s32(k->mn + g), vmovl_s16(vld1_s16(bsums + g)));
    return vaddvq_s32(acc);
}

/* ==== the column driver ==================================================================== */

/* name_dot (vec_dot), name_dot2 (vec_dot2), name_dot4 (vec_dot4) and name_dot_r4
 * (vec_dot_rows4: four vec_dot calls) from name_block(x, y, nc, acc, i), which unpacks weight
 * block x (block i of the row) once and, for each column c < nc, adds block i of activation row c
 * (y[c]) to acc[c] with the reference's float operations (acc4_fma into lane i % 4). Column c's
 * float operations are those of vec_dot on its own, so every form has vec_dot's bits. */
#define NEON_COLS_KERNELS(name, WB, AB, QKB)                                                      \
    NEON_INLINE void name##_cols(int64_t n, float *restrict s, const void *restrict w,           \
                                 const void *const *a, const int nc) {                            \
        const WB *x = w;                                                                          \
        float acc[4][4] = {{0}};                                                                  \
        for (int64_t i = 0; i < n / (QKB); i++) {                                                 \
            const AB *y[4];                                                                       \
            for (int c = 0; c < nc; c++)                                                          \
                y[c] = (const AB *)a[c] + i;                                                      \
            prefetch_ahead(&x[i], sizeof(WB));                                                    \
            name##_block(&x[i], y, nc, acc, i);                                                   \
        }                                                                                         \
        for (int c = 0; c < nc; c++)                                                              \
            s[c] = acc4_total(acc[c]);                                                            \
    }                                                                                             \
    static void name##_dot(int64_t n, float *restrict s, const void *restrict w,                  \
                           const void *restrict a) {                                              \
        const void *const a1[1] = {a};                                                            \
        name##_cols(n, s, w, a1, 1);                                                              \
    }                                                                                             \
    static void name##_dot2(int64_t n, float *restrict s, const void *restrict w,                 \
                            const void *const a[2]) {                                             \
        name##_cols(n, s, w, a, 2);                                                               \
    }                                                                                             \
    static void name##_dot4(int64_t n, float *restrict s, const void *restrict w,                 \
                            const void *const a[4]) {                                             \
        name##_cols(n, s, w, a, 4);                                                               \
    }                                                                                             \
    VEC_DOT_ROWS4_GENERIC(name##_dot)

/* name_block and the kernels of a 256-value type against Q8_K whose decode(x, &k) fills a
 * neon_k16 and whose block scale is the float expression D(x, y) (x the weight block, y the
 * activation block): one term, acc = fmaf(D, isum, acc). */
#define K16_ONE_TERM(name, WB, decode, D)                                                         \
    NEON_INLINE void name##_block(const WB *x, const struct block_q8_K *const *y, const int nc,   \
                                  float acc[][4], int64_t i) {                                    \
        struct neon_k16 k;                                                                        \
        decode(x, &k);                                                                            \
        for (int c = 0; c < nc; c++)                                                              \
            acc4_fma(acc[c], i, D(x, y[c]), (float)k16_isum(&k, y[c]->qs));                       \
    }                                                                                             \
    NEON_COLS_KERNELS(name, WB, struct block_q8_K, QK_K)

/* Sets type t's vec_dot, vec_dot4, vec_dot2 and vec_dot_rows4 from NEON_COLS_KERNELS(name). */
#define NEON_SET_COLS(tab, n_tab, t, name)                                                        \
    quant_set_kernel(tab, n_tab, t, name##_dot, name##_dot4, name##_dot2, name##_dot_r4, NEON_ISA)

#endif
