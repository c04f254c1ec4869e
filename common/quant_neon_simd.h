/* quant_neon_simd.h - what the NEON twins (quant_neon.c, quant_iq_neon.c) share, compiled into each
 * under its own flags (plain Armv8-A, or +dotprod for the "neondot" builds; everything here is
 * static inline): exact int8 dot products (SDOT where the compiler may use it), lane masks from
 * bits, the sixteen-group form of a 256-value block (codes and integer factors), and the column
 * driver that turns a type's block function into vec_dot, vec_dot2 and vec_dot4 with the
 * reference's float operations for every column, and its two-row twin for vec_dot_2xn (SMMLA's
 * 2x2 tiles, registered by the "i8mm" builds only). Invariant (quant.h's accumulation contract):
 * integer sums here are exact; float operations are only those the block functions perform, in
 * the reference's order. Not for other use. */
#ifndef SNIPER_QUANT_NEON_SIMD_H
#define SNIPER_QUANT_NEON_SIMD_H

#include <arm_neon.h>

#include "quant_impl.h"

#if defined(__ARM_FEATURE_MATMUL_INT8)
#define NEON_ISA "i8mm"
#elif defined(__ARM_FEATURE_DOTPROD)
#define NEON_ISA "neondot"
#else
#define NEON_ISA "neon"
#endif

#define NEON_INLINE static inline __attribute__((always_inline))
/* The two-row driver's pieces: unused in the builds without i8mm, which never register it. */
#define NEON_2XN_INLINE static inline __attribute__((always_inline, unused))

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

/* The products a[j] * b[j] of 16 int8 pairs in SDOT's lanes: lane i sums products 4i..4i+3 (the
 * lanes of q4_K's, q5_K's and q6_K's contract). Without SDOT adjacent products are added in int16
 * first, exact as long as a holds no -128 (|a[j] * b[j]| <= 16256). */
NEON_INLINE int32x4_t dot16_lanes(int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdupq_n_s32(0), a, b);
#else
    const int16x8_t pairs =
        vpaddq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)), vmull_high_s8(a, b));
    return vpaddlq_s16(pairs);
#endif
}

/* sum a[j] * b[j] over two runs of 16: a0 with b[0..15], a1 with b[16..31]. */
NEON_INLINE int dot32(int8x16_t a0, int8x16_t a1, const int8_t *b) {
    const int32x4_t acc = dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(b)), a1, vld1q_s8(b + 16));
    return vaddvq_s32(acc);
}

/* acc's lanes plus the 2x2 tile of 16-element dot products [w0.y0, w0.y1, w1.y0, w1.y1]. SMMLA
 * multiplies a 2x8 by an 8x2 int8 tile: lane 2i + j takes sum_k a[8i + k] * b[8j + k], so the
 * runs' low halves go in one SMMLA and their high halves in another. Elsewhere (the builds that
 * never register vec_dot_2xn) the same integers from dot16. */
NEON_INLINE int32x4_t tile16(int32x4_t acc, int8x16_t w0, int8x16_t w1, int8x16_t y0,
                             int8x16_t y1) {
#if defined(__ARM_FEATURE_MATMUL_INT8)
    const int64x2_t a0 = vreinterpretq_s64_s8(w0), a1 = vreinterpretq_s64_s8(w1);
    const int64x2_t b0 = vreinterpretq_s64_s8(y0), b1 = vreinterpretq_s64_s8(y1);
    acc = vmmlaq_s32(acc, vreinterpretq_s8_s64(vzip1q_s64(a0, a1)),
                     vreinterpretq_s8_s64(vzip1q_s64(b0, b1)));
    return vmmlaq_s32(acc, vreinterpretq_s8_s64(vzip2q_s64(a0, a1)),
                      vreinterpretq_s8_s64(vzip2q_s64(b0, b1)));
#else
    const int32x4_t z = vdupq_n_s32(0);
    const int32_t t[4] = {vaddvq_s32(dot16(z, w0, y0)), vaddvq_s32(dot16(z, w0, y1)),
                          vaddvq_s32(dot16(z, w1, y0)), vaddvq_s32(dot16(z, w1, y1))};
    return vaddq_s32(acc, vld1q_s32(t));
#endif
}

/* t[2i + j] = sum of w[i][e] * y_j[e] over a 32-element block: two weight blocks' codes w[i][0..1]
 * (elements 0..15, 16..31) against activation codes y0 and y1. */
NEON_INLINE void tile32(const int8x16_t w[2][2], const int8_t *y0, const int8_t *y1,
                        int32_t t[4]) {
    int32x4_t acc = tile16(vdupq_n_s32(0), w[0][0], w[1][0], vld1q_s8(y0), vld1q_s8(y1));
    acc = tile16(acc, w[0][1], w[1][1], vld1q_s8(y0 + 16), vld1q_s8(y1 + 16));
    vst1q_s32(t, acc);
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

/* t[2i + j] = k16_isum(k[i], y_j): two blocks' sixteen groups against two activation rows, each
 * group's 2x2 tile times its rows' factors (exact, as k16_isum). */
NEON_INLINE void k16_isum_tile(const struct neon_k16 *k0, const struct neon_k16 *k1,
                               const int8_t *y0, const int8_t *y1, int32_t t[4]) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int g = 0; g < 16; g++) {
        const int32x4_t d = tile16(vdupq_n_s32(0), k0->q[g], k1->q[g], vld1q_s8(y0 + 16 * g),
                                   vld1q_s8(y1 + 16 * g));
        acc = vmlaq_s32(acc, d, vcombine_s32(vdup_n_s32(k0->sc[g]), vdup_n_s32(k1->sc[g])));
    }
    vst1q_s32(t, acc);
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
    NEON_COLS_ENTRIES(name)

/* The entry points of the column drivers from name_cols(n, s, w, a, nc), which computes s[c] for
 * the nc (1, 2 or 4) activation rows a[c], each with vec_dot's float operations. */
#define NEON_COLS_ENTRIES(name)                                                                   \
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

/* The two-row driver: name_dot_2xn (vec_dot_2xn) from name_tile(x, y, n_act, acc, i), which
 * unpacks weight blocks x[0] and x[1] (block i of the two rows) once and, for each pair of
 * columns, adds block i of activation rows y[c] (c < n_act) to acc[r][c] with the reference's
 * float operations (acc4_fma into lane i % 4). As in the column driver, output (r, c) takes
 * exactly vec_dot's float operations, so it has vec_dot's bits. name_dot_2xn itself exists in the
 * "i8mm" builds only (NEON_2XN_ENTRY), where tile16 is SMMLA. */
#define NEON_2XN_KERNELS(name, WB, AB, QKB)                                                       \
    NEON_2XN_INLINE void name##_2cols(int64_t n, float *restrict s, const void *restrict w,       \
                                      size_t row_bytes, const void *const *a, const int n_act) {  \
        const WB *x[2] = {w, (const void *)((const uint8_t *)w + row_bytes)};                     \
        float acc[2][4][4] = {{{0}}};                                                             \
        for (int64_t i = 0; i < n / (QKB); i++) {                                                 \
            const WB *xb[2] = {&x[0][i], &x[1][i]};                                               \
            const AB *y[4];                                                                       \
            for (int c = 0; c < n_act; c++)                                                       \
                y[c] = (const AB *)a[c] + i;                                                      \
            prefetch_ahead(xb[0], sizeof(WB));                                                    \
            prefetch_ahead(xb[1], sizeof(WB));                                                    \
            name##_tile(xb, y, n_act, acc, i);                                                    \
        }                                                                                         \
        for (int r = 0; r < 2; r++)                                                               \
            for (int c = 0; c < n_act; c++)                                                       \
                s[r * n_act + c] = acc4_total(acc[r][c]);                                         \
    }                                                                                             \
    NEON_2XN_ENTRY(name)
/* name_dot_2xn (vec_dot_2xn, n_act 2 or 4) from name_2cols: in the "i8mm" builds only. */
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define NEON_2XN_ENTRY(name)                                                                      \
    static void name##_dot_2xn(int64_t n, float *restrict s, const void *restrict w,              \
                               size_t row_bytes, const void *const *a, int n_act) {               \
        if (n_act == 4)                                                                           \
            name##_2cols(n, s, w, row_bytes, a, 4);                                               \
        else                                                                                      \
            name##_2cols(n, s, w, row_bytes, a, 2);                                               \
    }
#else
#define NEON_2XN_ENTRY(name)
#endif

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
    NEON_2XN_INLINE void name##_tile(const WB *const x[2], const struct block_q8_K *const *y,     \
                                     const int n_act, float acc[][4][4], int64_t i) {             \
        struct neon_k16 k[2];                                                                     \
        decode(x[0], &k[0]);                                                                      \
        decode(x[1], &k[1]);                                                                      \
        for (int p = 0; p < n_act; p += 2) {                                                      \
            int32_t t[4];                                                                         \
            k16_isum_tile(&k[0], &k[1], y[p]->qs, y[p + 1]->qs, t);                               \
            for (int r = 0; r < 2; r++)                                                           \
                for (int c = 0; c < 2; c++)                                                       \
                    acc4_fma(acc[r][p + c], i, D(x[r], y[p + c]), (float)t[2 * r + c]);           \
        }                                                                                         \
    }                                                                                             \
    NEON_COLS_KERNELS(name, WB, struct block_q8_K, QK_K)                                          \
    NEON_2XN_KERNELS(name, WB, struct block_q8_K, QK_K)

/* Sets type t's vec_dot, vec_dot4, vec_dot2 and vec_dot_rows4 from NEON_COLS_KERNELS(name), and
 * in the "i8mm" builds its vec_dot_2xn from NEON_2XN_KERNELS(name). */
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define NEON_SET_COLS(tab, n_tab, t, name)                                                        \
    do {                                                                                          \
        quant_set_kernel(tab, n_tab, t, name##_dot, name##_dot4, name##_dot2, name##_dot_r4,      \
                         NEON_ISA);                                                               \
        if ((int)(t) < (n_tab))                                                                   \
            (tab)[t].vec_dot_2xn = name##_dot_2xn;                                                \
    } while (0)
#else
#define NEON_SET_COLS(tab, n_tab, t, name)                                                        \
    quant_set_kernel(tab, n_tab, t, name##_dot, name##_dot4, name##_dot2, name##_dot_r4, NEON_ISA)
#endif

#endif
