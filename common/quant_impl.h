/* quant_impl.h - pieces shared by the kernel files (quant.c, quant_avx2.c, quant_avx512.c and
 * the i-quant files) and by nothing else: the accumulation contract of quant.h in scalar and SIMD
 * form (the SIMD driver that turns a type's integer block dot into vec_dot, vec_dot4 and
 * vec_dot_rows4 with the contract's float operations), the four-at-a-time wrappers built from a
 * one-row kernel, and the weight prefetch helpers. */
#ifndef SNIPER_QUANT_IMPL_H
#define SNIPER_QUANT_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define PF_T0 _MM_HINT_T0
#define PF_T1 _MM_HINT_T1
#define quant_prefetch(p, hint) _mm_prefetch((p), (hint))
#else /* __builtin_prefetch's locality 3 and 2 are SSE's T0 (every level) and T1 (L2 and out) */
#define PF_T0 3
#define PF_T1 2
#define quant_prefetch(p, hint) __builtin_prefetch((p), 0, (hint))
#endif

#include "quant.h"

/* ==== the accumulation contract, scalar (quant.h) ============================================= */

/* acc[b % 4] = fmaf(d, v, acc[b % 4]): block b's term (v: its integer sum as a float, or s_a). */
static inline void acc4_fma(float acc[4], int64_t b, float d, float v) {
    acc[b & 3] = fmaf(d, v, acc[b & 3]);
}

/* (acc[0] + acc[1]) + (acc[2] + acc[3]). */
static inline float acc4_total(const float acc[4]) {
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* The lane contract's block step: acc[l] = fmaf(d, lane[l], acc[l]) for the 8 lanes. */
static inline void acc8_fma(float acc[8], float d, const int lane[8]) {
    for (int l = 0; l < 8; l++)
        acc[l] = fmaf(d, (float)lane[l], acc[l]);
}

/* ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])). */
static inline float acc8_total(const float acc[8]) {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* The float types' reduction of their 32 lanes: lane l += lane l + half for half = 16, 8, 4, 2,
 * 1; returns lane 0 (the tail is added to it by the caller). */
static inline float lanes32_total(float lane[32]) {
    for (int half = 16; half >= 1; half /= 2)
        for (int l = 0; l < half; l++)
            lane[l] = lane[l] + lane[l + half];
    return lane[0];
}

/* The (unaligned, little-endian) u32 and u16 at p: the formats' packed words. */
static inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Scale and bit fields of the block formats (quant.h), shared by the reference and the twins that
 * read them one block at a time (quant_neon.c). */
/* q5: qh (little-endian u32) bit j is the fifth bit of element j, for j in 0..31. */
static inline uint32_t q5_high_bits(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

/* K-quant 6-bit scale/min of sub-block j (0..7) from scales[12]: bytes 0-3 hold scales 0-3 and
 * bytes 4-7 mins 0-3 in their low 6 bits; bytes 8-11 hold the low nibbles of scale (low half) and
 * min (high half) 4-7, whose top 2 bits sit in bits 6-7 of bytes 0-3 (scales) and 4-7 (mins). */
static inline void k_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* q3_K's 6-bit scale j (0..15), signed: the low 4 bits are the low nibble of scales[j] (j < 8) or
 * the high nibble of scales[j - 8]; the top 2 bits are bits 2(j/4)..2(j/4)+1 of scales[8 + j%4]. */
static inline int q3_K_scale(const uint8_t *sc, int j) {
    int lo = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
    int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* iq4_xs's 6-bit scale of sub-block j (0..7), minus 32: low nibble j%2 of scales_l[j/2], top
 * bits 2j..2j+1 of scales_h. */
static inline int iq4_xs_scale(const struct block_iq4_xs *b, int j) {
    int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 15;
    int hi = (b->scales_h >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

/* dot##_x4 (vec_dot4) and dot##_r4 (vec_dot_rows4) as four calls of the one-row kernel dot: they
 * share no work, which makes them bit-identical to dot by construction. For kernels without a
 * shared-work body. */
#define VEC_DOT4_GENERIC(dot)                                                                     \
    static void dot##_x4(int64_t n, float *restrict s, const void *restrict w,                    \
                         const void *const a[4]) {                                                \
        _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++)                                                               \
            dot(n, &s[j], w, a[j]);                                                               \
    }
#define VEC_DOT_ROWS4_GENERIC(dot)                                                                \
    static void dot##_r4(int64_t n, float *restrict s, const void *restrict w, size_t row_bytes, \
                         const void *restrict a) {                                                \
        _Pragma("GCC unroll 8") for (int r = 0; r < 4; r++)                                                               \
            dot(n, &s[r], (const uint8_t *)w + (size_t)r * row_bytes, a);                         \
    }

#ifndef PF_DIST
#define PF_DIST 2048
#endif
#ifndef PF_HINT
#define PF_HINT PF_T0
#endif
/* Weight rows of a matrix lie back to back and are read once: asking for the lines PF_DIST bytes
 * ahead (past the row's end means the next row) keeps more misses in flight than the hardware
 * prefetcher alone does (+40-70% GB/s out of cache here). Prefetches never fault, so running off
 * the matrix is harmless. Always inlined: a separate function holding nothing but prefetches is
 * "const" to GCC's IPA, which then deletes its calls (every AVX-512 weight prefetch was lost that
 * way before). */
static inline __attribute__((always_inline)) void prefetch_ahead(const void *p, size_t bytes) {
    const char *c = (const char *)p + PF_DIST;
    for (size_t off = 0; off < bytes; off += 64)
        quant_prefetch(c + off, PF_HINT);
}

#ifndef PF_R4_ROWS
#define PF_R4_ROWS 4
#endif
#ifndef PF_R4_HINT
#define PF_R4_HINT PF_T1
#endif
#ifndef PF_R4_BYTES
#define PF_R4_BYTES 0
#endif
/* prefetch_ahead for a vec_dot_rows4 kernel at block i (block_bytes each) of its four rows, which
 * start at w, row_bytes apart. The group's rows are read interleaved, so per-row prefetches would
 * mostly hit lines of the group itself; instead the prefetch pointer walks the bytes that follow
 * the group sequentially, 4 * block_bytes per block, PF_R4_ROWS * row_bytes + PF_R4_BYTES past w,
 * into L2 only (T1): measured out of cache on huge pages, per-row T0 prefetches 2048 bytes ahead
 * gave 9.0 GB/s for AVX-512 q4_K, this 10.3-10.8 GB/s (tools/bench_kernels.c). */
static inline __attribute__((always_inline)) void prefetch_rows4(const void *w, int64_t i,
                                                                 size_t row_bytes,
                                                                 size_t block_bytes) {
    const char *c =
        (const char *)w + PF_R4_ROWS * row_bytes + PF_R4_BYTES + 4 * (size_t)i * block_bytes;
    for (size_t off = 0; off < 4 * block_bytes; off += 64)
        quant_prefetch(c + off, PF_R4_HINT);
}

/* Sets a type's kernels and its isa name together, so a table never mixes ISAs within one type
 * (fn2 may be NULL: the ISA has no vec_dot2 for the type). vec_dot_2xn is cleared: an ISA that
 * has one sets it after this call. */
static inline void quant_set_kernel(struct quant_kernels *tab, int n_tab, enum qtype t,
                                    quant_vec_dot_fn fn, quant_vec_dot4_fn fn4,
                                    quant_vec_dot2_fn fn2, quant_vec_dot_rows4_fn fnr4,
                                    const char *isa) {
    if ((int)t >= n_tab)
        return;
    tab[t].vec_dot = fn;
    tab[t].vec_dot4 = fn4;
    tab[t].vec_dot2 = fn2;
    tab[t].vec_dot_rows4 = fnr4;
    tab[t].vec_dot_2xn = NULL;
    tab[t].isa = isa;
}
#define QUANT_SET(tab, n_tab, t, name, isa)                                                       \
    quant_set_kernel(tab, n_tab, t, name##_dot, name##_dot4, name##_dot2, name##_rows4, isa)

/* ==== the accumulation contract, SIMD: the driver ============================================= */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define NC_MAX 4
/* Column, row and block loops are unrolled so that per-column state lives in registers. */
#define FOR_COLS(c, nc) _Pragma("GCC unroll 4") for (int c = 0; c < (nc); c++)
#define FOR_ROWS4(r) _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
#define FOR_BLK4(b) _Pragma("GCC unroll 4") for (int b = 0; b < 4; b++)

/* What a type's block adds after acc = fmaf(d, isum, acc): nothing, fmaf(m, msum) with an integer
 * msum (m = -dmin), or fmaf(m, s) with a float s (Q4_1/Q5_1: m_w * s_a). */
enum qterm { QTERM_ONE, QTERM_INT, QTERM_FLOAT };

/* One block's integer sums, as a type's block function computes them for the driver. */
struct qsum {
    __m256i isum; /* eight int32 lanes that sum to isum_b */
    __m256i msum; /* QTERM_INT: eight int32 lanes that sum to msum_b */
};

/* The float factors of four consecutive blocks, lane b for block b (0 past the row's end), as a
 * type's scales function computes them: d (d_b), m (QTERM_INT: -dmin_b; QTERM_FLOAT: m_w), s
 * (QTERM_FLOAT: s_a). */
struct qscale4 {
    __m128 d, m, s;
};

/* Block b's sums folded to one vector: isum (one term) or hadd(isum, msum) (two). */
static ALWAYS_INLINE __m256i qsum_fold(struct qsum q, const int term) {
    return term == QTERM_INT ? _mm256_hadd_epi32(q.isum, q.msum) : q.isum;
}

/* (acc0 + acc1) + (acc2 + acc3) of lanes 0..3. */
static ALWAYS_INLINE float acc4_reduce(__m128 acc) {
    const __m128 t = _mm_hadd_ps(acc, acc); /* a0+a1, a2+a3, ... */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* The contract's float operations for four consecutive blocks (lane j = acc[j]), given
 * h01 = hadd(fold_0, fold_1) and h23 = hadd(fold_2, fold_3) of their folded sums (exact integer
 * reductions; a block past the row's end folds to zero and has zero factors, so its
 * fmaf(0, 0, acc) leaves acc as it is: acc starts +0 and round to nearest never makes it -0). */
static ALWAYS_INLINE __m128 acc4_update(__m128 acc, __m256i h01, __m256i h23,
                                        const struct qscale4 *f, const int term) {
    if (term == QTERM_INT) { /* per lane: [is0 ms0 is1 ms1] and [is2 ms2 is3 ms3] halves */
        const __m256i t = _mm256_add_epi32(_mm256_permute2x128_si256(h01, h23, 0x20),
                                           _mm256_permute2x128_si256(h01, h23, 0x31));
        const __m256 v = _mm256_cvtepi32_ps(t);
        const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
        acc = _mm_fmadd_ps(f->d, _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), acc);
        return _mm_fmadd_ps(f->m, _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), acc);
    }
    const __m256i h = _mm256_hadd_epi32(h01, h23); /* per lane: [is0 is1 is2 is3] */
    const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    acc = _mm_fmadd_ps(f->d, _mm_cvtepi32_ps(t), acc);
    if (term == QTERM_FLOAT)
        acc = _mm_fmadd_ps(f->m, f->s, acc);
    return acc;
}

/* Four fp16 fields n_ok of them real (the rest 0), stride bytes apart from p, as floats. */
static ALWAYS_INLINE __m128 f16x4(const void *p, size_t stride, const int n_ok) {
    uint16_t h[4] = {0, 0, 0, 0};
    _Pragma("GCC unroll 8") for (int b = 0; b < 4; b++)
        if (b < n_ok)
            memcpy(&h[b], (const uint8_t *)p + (size_t)b * stride, 2);
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0,
                                       0, 0));
}

/* Four pairs of adjacent fp16 fields (n_ok real, the rest 0), stride bytes apart from p, as
 * floats: *first gets each pair's first, *second its second. */
static ALWAYS_INLINE void f16x4_pairs(const void *p, size_t stride, const int n_ok, __m128 *first,
                                      __m128 *second) {
    uint32_t u[4] = {0, 0, 0, 0};
    for (int b = 0; b < 4; b++)
        if (b < n_ok)
            memcpy(&u[b], (const uint8_t *)p + (size_t)b * stride, 4);
    const __m256 v = _mm256_cvtph_ps(_mm_setr_epi32((int)u[0], (int)u[1], (int)u[2], (int)u[3]));
    const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    *first = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    *second = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
}

/* Four f32 fields (n_ok real, the rest 0), stride bytes apart from p. */
static ALWAYS_INLINE __m128 f32x4(const void *p, size_t stride, const int n_ok) {
    float f[4] = {0, 0, 0, 0};
    _Pragma("GCC unroll 8") for (int b = 0; b < 4; b++)
        if (b < n_ok)
            memcpy(&f[b], (const uint8_t *)p + (size_t)b * stride, 4);
    return _mm_setr_ps(f[0], f[1], f[2], f[3]);
}

/* MXFP4's scales quant_e8m0_half(x[b].e) of four consecutive blocks (n_ok real, the rest 0). */
static ALWAYS_INLINE __m128 e8m0x4(const struct block_mxfp4 *x, const int n_ok) {
    uint32_t u[4] = {0, 0, 0, 0};
    _Pragma("GCC unroll 8") for (int b = 0; b < 4; b++)
        if (b < n_ok)
            u[b] = x[b].e < 2 ? 0x00200000u << x[b].e : (uint32_t)(x[b].e - 1) << 23;
    return _mm_castsi128_ps(_mm_setr_epi32((int)u[0], (int)u[1], (int)u[2], (int)u[3]));
}

/* QUANT_DRIVER(name, WB, AB, QKB, U, TERM) defines name_dot (vec_dot), name_dot4 (vec_dot4),
 * name_dot2 (vec_dot2) and name_rows4 (vec_dot_rows4) for weight blocks WB of QKB elements against
 * activation blocks AB: QUANT_DRIVER_COLS the first three, QUANT_DRIVER_ROWS4 the last (an ISA
 * may give a family its own column kernels, as K_COLS_DRIVER below). From three always-inline
 * functions the type provides:
 *     void name_unpack(const WB *x, U *u);       the weights alone (shared by vec_dot4's columns)
 *     struct qsum name_block(const U *u, const AB *y);                  the integer sums
 *     void name_scales(const WB *x, const AB *y, int n_ok, struct qscale4 *f);
 * (name_scales: the float factors of blocks x[0..3] against y[0..3], only the first n_ok real).
 * TERM is an enum qterm. The driver walks the row four blocks at a time and applies the contract
 * (acc4_update) per output, so the three kernels run the same float operations by construction;
 * only the integer work is the type's. */
#define QUANT_DRIVER(name, WB, AB, QKB, U, TERM)                                                  \
    QUANT_DRIVER_COLS(name, WB, AB, QKB, U, TERM)                                                 \
    QUANT_DRIVER_ROWS4(name, WB, AB, QKB, U, TERM)
#define QUANT_DRIVER_COLS(name, WB, AB, QKB, U, TERM)                                             \
    static ALWAYS_INLINE void name##_group(const WB *x, const AB *const *y, int64_t i,           \
                                           const int nblk, const int nc, __m128 *acc) {           \
        __m256i h[NC_MAX][2];                                                                     \
        _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) {                                     \
            __m256i v[NC_MAX][2];                                                                 \
            _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++) {                                 \
                const int b = 2 * p + q;                                                          \
                if (b < nblk) {                                                                   \
                    prefetch_ahead(&x[i + b], sizeof(WB));                                        \
                    U u;                                                                          \
                    name##_unpack(&x[i + b], &u);                                                 \
                    FOR_COLS(c, nc) v[c][q] = qsum_fold(name##_block(&u, &y[c][i + b]), TERM);    \
                } else {                                                                          \
                    FOR_COLS(c, nc) v[c][q] = _mm256_setzero_si256();                             \
                }                                                                                 \
            }                                                                                     \
            FOR_COLS(c, nc) h[c][p] = _mm256_hadd_epi32(v[c][0], v[c][1]);                        \
        }                                                                                         \
        FOR_COLS(c, nc) {                                                                         \
            struct qscale4 f;                                                                     \
            name##_scales(&x[i], &y[c][i], nblk, &f);                                             \
            acc[c] = acc4_update(acc[c], h[c][0], h[c][1], &f, TERM);                             \
        }                                                                                         \
    }                                                                                             \
    QUANT_COLS_KERNELS(name, WB, AB, QKB, name##_group)
/* name_dot, name_dot4 and name_dot2 from group(x, y, i, nblk, nc, acc), which applies blocks
 * i..i+nblk-1 (nblk <= 4) of the nc columns y[c] to their accumulators acc[c] (lane b for block
 * i + b); the kernels walk the row four blocks at a time and reduce acc by the contract. */
#define QUANT_COLS_KERNELS(name, WB, AB, QKB, group)                                             \
    static ALWAYS_INLINE void name##_cols(int64_t n, float *restrict s, const void *restrict w,   \
                                          const void *const *a, const int nc) {                   \
        const WB *x = w;                                                                          \
        const AB *y[NC_MAX];                                                                      \
        __m128 acc[NC_MAX];                                                                       \
        FOR_COLS(c, nc) {                                                                         \
            y[c] = a[c];                                                                          \
            acc[c] = _mm_setzero_ps();                                                            \
        }                                                                                         \
        const int64_t nb = n / (QKB);                                                             \
        int64_t i = 0;                                                                            \
        for (; i + 4 <= nb; i += 4)                                                               \
            group(x, y, i, 4, nc, acc);                                                           \
        if (i < nb)                                                                               \
            group(x, y, i, (int)(nb - i), nc, acc);                                               \
        FOR_COLS(c, nc) s[c] = acc4_reduce(acc[c]);                                               \
    }                                                                                             \
    QUANT_COLS_ENTRIES(name)
/* name_dot, name_dot4 and name_dot2: name_cols(n, s, w, a, nc) for 1, 4 and 2 columns. */
#define QUANT_COLS_ENTRIES(name)                                                                  \
    static void name##_dot(int64_t n, float *restrict s, const void *restrict w,                  \
                           const void *restrict a) {                                              \
        const void *const a1[1] = {a};                                                            \
        name##_cols(n, s, w, a1, 1);                                                              \
    }                                                                                             \
    static void name##_dot4(int64_t n, float *restrict s, const void *restrict w,                 \
                            const void *const a[4]) {                                             \
        name##_cols(n, s, w, a, 4);                                                               \
    }                                                                                             \
    static void name##_dot2(int64_t n, float *restrict s, const void *restrict w,                 \
                            const void *const a[2]) {                                             \
        name##_cols(n, s, w, a, 2);                                                               \
    }
#define QUANT_DRIVER_ROWS4(name, WB, AB, QKB, U, TERM)                                            \
    static ALWAYS_INLINE void name##_rgroup(const WB *const *x, const AB *y, int64_t i,          \
                                            const int nblk, const void *w, size_t row_bytes,      \
                                            __m128 *acc) {                                        \
        __m256i h[4][2];                                                                          \
        _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) {                                     \
            __m256i v[4][2];                                                                      \
            _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++) {                                 \
                const int b = 2 * p + q;                                                          \
                if (b < nblk) {                                                                   \
                    prefetch_rows4(w, i + b, row_bytes, sizeof(WB));                              \
                    FOR_ROWS4(k) {                                                                \
                        U u;                                                                      \
                        name##_unpack(&x[k][i + b], &u);                                          \
                        v[k][q] = qsum_fold(name##_block(&u, &y[i + b]), TERM);                   \
                    }                                                                             \
                } else {                                                                          \
                    FOR_ROWS4(k) v[k][q] = _mm256_setzero_si256();                                \
                }                                                                                 \
            }                                                                                     \
            FOR_ROWS4(k) h[k][p] = _mm256_hadd_epi32(v[k][0], v[k][1]);                           \
        }                                                                                         \
        FOR_ROWS4(k) {                                                                            \
            struct qscale4 f;                                                                     \
            name##_scales(&x[k][i], &y[i], nblk, &f);                                             \
            acc[k] = acc4_update(acc[k], h[k][0], h[k][1], &f, TERM);                             \
        }                                                                                         \
    }                                                                                             \
    static void name##_rows4(int64_t n, float *restrict s, const void *restrict w,                \
                             size_t row_bytes, const void *restrict a) {                          \
        const WB *x[4];                                                                           \
        const AB *y = a;                                                                          \
        __m128 acc[4];                                                                            \
        FOR_ROWS4(k) {                                                                            \
            x[k] = (const void *)((const uint8_t *)w + (size_t)k * row_bytes);                    \
            acc[k] = _mm_setzero_ps();                                                            \
        }                                                                                         \
        const int64_t nb = n / (QKB);                                                             \
        int64_t i = 0;                                                                            \
        for (; i + 4 <= nb; i += 4)                                                               \
            name##_rgroup(x, y, i, 4, w, row_bytes, acc);                                         \
        if (i < nb)                                                                               \
            name##_rgroup(x, y, i, (int)(nb - i), w, row_bytes, acc);                             \
        FOR_ROWS4(k) s[k] = acc4_reduce(acc[k]);                                                  \
    }

/* name_scales bodies for the common factor shapes: d = fp16(x.D) * fp16(y.d) (Q8_0/Q8_1
 * activations), and d = y.d * fp16(x.D) (Q8_K activations, whose d is a float); the K-quants'
 * m = -(y.d * fp16(x.dmin)). */
#define QSCALE_F16_F16(x, D, y, n_ok)                                                             \
    _mm_mul_ps(f16x4(&(x)->D, sizeof(*(x)), n_ok), f16x4(&(y)->d, sizeof(*(y)), n_ok))
#define QSCALE_Q8K(x, D, y, n_ok)                                                                 \
    _mm_mul_ps(f32x4(&(y)->d, sizeof(*(y)), n_ok), f16x4(&(x)->D, sizeof(*(x)), n_ok))
#define QSCALE_NEG(v) _mm_xor_ps(v, _mm_set1_ps(-0.0f))

/* The drivers of the type families both SIMD files have. Each expects the including file to
 * define the family's integer block function (s8_block / u8_block over struct s8_u / __m256i;
 * k_min_block / k_offset_block over struct k_u) and the type's name_unpack. */
/* A 32-element type whose codes are signed bytes (unpack: x -> s8_u) and whose d is
 * fp16(x.d) * fp16(y.d). */
#define S8_TYPE(name, WB)                                                                         \
    static ALWAYS_INLINE struct qsum name##_block(const struct s8_u *u,                           \
                                                  const struct block_q8_0 *y) {                  \
        return s8_block(u, y->qs);                                                                \
    }                                                                                             \
    static ALWAYS_INLINE void name##_scales(const WB *x, const struct block_q8_0 *y,             \
                                            const int n_ok, struct qscale4 *f) {                  \
        f->d = QSCALE_F16_F16(x, d, y, n_ok);                                                     \
    }                                                                                             \
    QUANT_DRIVER(name, WB, struct block_q8_0, 32, struct s8_u, QTERM_ONE)

/* A 32-element type with unsigned codes against Q8_1 (q4_1, q5_1): d = fp16(x.d) * fp16(y.d),
 * then fmaf(fp16(x.m), fp16(y.s)). */
#define U8_TYPE(name, WB)                                                                         \
    static ALWAYS_INLINE struct qsum name##_block(const __m256i *u, const struct block_q8_1 *y) { \
        return u8_block(u, y->qs);                                                                \
    }                                                                                             \
    static ALWAYS_INLINE void name##_scales(const WB *x, const struct block_q8_1 *y,             \
                                            const int n_ok, struct qscale4 *f) {                  \
        f->d = QSCALE_F16_F16(x, d, y, n_ok);                                                     \
        f->m = f16x4(&x->m, sizeof(*x), n_ok);                                                    \
        f->s = f16x4(&y->s, sizeof(*y), n_ok);                                                    \
    }                                                                                             \
    QUANT_DRIVER(name, WB, struct block_q8_1, 32, __m256i, QTERM_FLOAT)

/* The column kernels (vec_dot, vec_dot4, vec_dot2) of a K-quant: QUANT_DRIVER_COLS's, unless the
 * including file defines K_COLS_DRIVER(name, WB, TERM, shift) first (quant_avx512.c does). */
#ifndef K_COLS_DRIVER
#define K_COLS_DRIVER(name, WB, TERM, shift)                                                      \
    QUANT_DRIVER_COLS(name, WB, struct block_q8_K, QK_K, struct k_u, TERM)
#endif
/* A K-quant's driver: blocks by k_min_block (with the -dmin term) or k_offset_block(shift). */
#define K_MIN_TYPE(name, WB)                                                                      \
    static ALWAYS_INLINE struct qsum name##_block(const struct k_u *u,                            \
                                                  const struct block_q8_K *y) {                  \
        return k_min_block(u, y);                                                                 \
    }                                                                                             \
    static ALWAYS_INLINE void name##_scales(const WB *x, const struct block_q8_K *y,             \
                                            const int n_ok, struct qscale4 *f) {                  \
        _Static_assert(offsetof(WB, dmin) == offsetof(WB, d) + 2, "d, dmin adjacent");           \
        __m128 d, dmin;                                                                           \
        f16x4_pairs(&x->d, sizeof(*x), n_ok, &d, &dmin);                                          \
        const __m128 dy = f32x4(&y->d, sizeof(*y), n_ok);                                         \
        f->d = _mm_mul_ps(dy, d);                                                                 \
        f->m = QSCALE_NEG(_mm_mul_ps(dy, dmin));                                                  \
    }                                                                                             \
    QUANT_DRIVER_ROWS4(name, WB, struct block_q8_K, QK_K, struct k_u, QTERM_INT)                 \
    K_COLS_DRIVER(name, WB, QTERM_INT, 0)
#define K_OFFSET_TYPE(name, WB, shift)                                                            \
    static ALWAYS_INLINE struct qsum name##_block(const struct k_u *u,                            \
                                                  const struct block_q8_K *y) {                  \
        return k_offset_block(u, y, shift);                                                       \
    }                                                                                             \
    static ALWAYS_INLINE void name##_scales(const WB *x, const struct block_q8_K *y,             \
                                            const int n_ok, struct qscale4 *f) {                  \
        f->d = QSCALE_Q8K(x, d, y, n_ok);                                                         \
    }                                                                                             \
    QUANT_DRIVER_ROWS4(name, WB, struct block_q8_K, QK_K, struct k_u, QTERM_ONE)                 \
    K_COLS_DRIVER(name, WB, QTERM_ONE, shift)


/* ---- the lane contract (q4_K, q5_K: quant.h) ---- */

/* ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)). */
static ALWAYS_INLINE float acc8_reduce(__m256 a) {
    const __m128 r = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 h = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* One block of a lane-contract type against one column: lanes = its 8 lane sums, mins = 8 int32
 * lanes, lane j sub-block j's min term; acc (8 lanes) and macc (q4_K: 4 min lanes; q5_K: lane 0
 * the one msum) take the block's fmas. */
static ALWAYS_INLINE void k_lane8_step(__m256i lanes, __m256i mins, float dy, float wd,
                                       float wdmin, const int n_min, __m256 *acc, __m128 *macc) {
    const float d = dy * wd, dmin = -(dy * wdmin);
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), *acc);
    const __m128i m4 = _mm_hadd_epi32(_mm256_castsi256_si128(mins),
                                      _mm256_extracti128_si256(mins, 1)); /* lane k: 2k + 2k+1 */
    if (n_min == 4) {
        *macc = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(m4), *macc);
    } else {
        const __m128i m2 = _mm_hadd_epi32(m4, m4);
        *macc = _mm_fmadd_ss(_mm_set_ss(dmin), _mm_cvtepi32_ps(_mm_hadd_epi32(m2, m2)), *macc);
    }
}

/* The result: acc8_reduce(acc), plus ((m0 + m2) + (m1 + m3)) (q4_K) or m0 (q5_K); q6_K (n_min 0)
 * has no min term. */
static ALWAYS_INLINE float k_lane8_result(__m256 acc, __m128 macc, const int n_min) {
    if (n_min == 0)
        return acc8_reduce(acc);
    float m = _mm_cvtss_f32(macc);
    if (n_min == 4) {
        const __m128 h = _mm_add_ps(macc, _mm_movehl_ps(macc, macc));
        m = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
    }
    return acc8_reduce(acc) + m;
}

/* The lane contract's types (q4_K, q5_K, q6_K: quant.h) from the including file's name_unpack,
 * k_chunks_dot (8 int32 lanes, lane l: elements 4l..4l+3 of every 32, times their scale: the
 * contract's lane sums) and k_bsums_dot (lane j: the scales or mins of elements 32j..32j+31 times
 * their bsums). K_LANE8_MIN_TYPE(name, WB, n_min): q4_K (4 min lanes) and q5_K (1);
 * K_LANE8_OFFSET_TYPE(name, WB, shift): q6_K, codes stored + 2^shift, lane l less its bsums lane
 * << shift. */
#define K_LANE8_MIN_TYPE(name, WB, n_min)                                                         \
    static ALWAYS_INLINE void name##_wd(const WB *x, float wd[2]) {                               \
        wd[0] = _cvtsh_ss(x->d);                                                                  \
        wd[1] = _cvtsh_ss(x->dmin);                                                               \
    }                                                                                             \
    static ALWAYS_INLINE void name##_step(const struct k_u *u, const float wd[2],                \
                                          const struct block_q8_K *y, __m256 *acc,                \
                                          __m128 *macc) {                                         \
        k_lane8_step(k_chunks_dot(u, y->qs), k_bsums_dot(u, y), y->d, wd[0], wd[1], n_min, acc,   \
                     macc);                                                                       \
    }                                                                                             \
    K_LANE8_DRIVER(name, WB, n_min)
#define K_LANE8_OFFSET_TYPE(name, WB, shift)                                                      \
    static ALWAYS_INLINE void name##_wd(const WB *x, float wd[2]) {                               \
        wd[0] = _cvtsh_ss(x->d);                                                                  \
        wd[1] = 0.0f;                                                                             \
    }                                                                                             \
    static ALWAYS_INLINE void name##_step(const struct k_u *u, const float wd[2],                \
                                          const struct block_q8_K *y, __m256 *acc,                \
                                          __m128 *macc) {                                         \
        (void)macc;                                                                               \
        const __m256i lanes = _mm256_sub_epi32(k_chunks_dot(u, y->qs),                            \
                                               _mm256_slli_epi32(k_bsums_dot(u, y), shift));      \
        *acc = _mm256_fmadd_ps(_mm256_set1_ps(y->d * wd[0]), _mm256_cvtepi32_ps(lanes), *acc);    \
    }                                                                                             \
    K_LANE8_DRIVER(name, WB, 0)
/* vec_dot, vec_dot4, vec_dot2 and vec_dot_rows4 from name_wd (the block's d, dmin as floats) and
 * name_step (one block against one column). A weight block is unpacked, and its d and dmin
 * converted, once for every column. */
#define K_LANE8_DRIVER(name, WB, n_min)                                                           \
    static ALWAYS_INLINE void name##_cols(int64_t n, float *restrict s, const void *restrict w,   \
                                          const void *const *a, const int nc) {                   \
        const WB *x = w;                                                                          \
        const struct block_q8_K *y[NC_MAX];                                                       \
        __m256 acc[NC_MAX];                                                                       \
        __m128 macc[NC_MAX];                                                                      \
        FOR_COLS(c, nc) {                                                                         \
            y[c] = a[c];                                                                          \
            acc[c] = _mm256_setzero_ps();                                                         \
            macc[c] = _mm_setzero_ps();                                                           \
        }                                                                                         \
        for (int64_t i = 0; i < n / QK_K; i++) {                                                  \
            prefetch_ahead(&x[i], sizeof(WB));                                                    \
            struct k_u u;                                                                         \
            float wd[2];                                                                          \
            name##_unpack(&x[i], &u);                                                             \
            name##_wd(&x[i], wd);                                                                 \
            FOR_COLS(c, nc) name##_step(&u, wd, &y[c][i], &acc[c], &macc[c]);                     \
        }                                                                                         \
        FOR_COLS(c, nc) s[c] = k_lane8_result(acc[c], macc[c], n_min);                            \
    }                                                                                             \
    QUANT_COLS_ENTRIES(name)                                                                      \
    static void name##_rows4(int64_t n, float *restrict s, const void *restrict w,                \
                             size_t row_bytes, const void *restrict a) {                          \
        const WB *x[4];                                                                           \
        const struct block_q8_K *y = a;                                                           \
        __m256 acc[4];                                                                            \
        __m128 macc[4];                                                                           \
        FOR_ROWS4(k) {                                                                            \
            x[k] = (const void *)((const uint8_t *)w + (size_t)k * row_bytes);                    \
            acc[k] = _mm256_setzero_ps();                                                         \
            macc[k] = _mm_setzero_ps();                                                           \
        }                                                                                         \
        for (int64_t i = 0; i < n / QK_K; i++) {                                                  \
            prefetch_rows4(w, i, row_bytes, sizeof(WB));                                          \
            FOR_ROWS4(k) {                                                                        \
                struct k_u u;                                                                     \
                float wd[2];                                                                      \
                name##_unpack(&x[k][i], &u);                                                      \
                name##_wd(&x[k][i], wd);                                                          \
                name##_step(&u, wd, &y[i], &acc[k], &macc[k]);                                    \
            }                                                                                     \
        }                                                                                         \
        FOR_ROWS4(k) s[k] = k_lane8_result(acc[k], macc[k], n_min);                               \
    }

#endif

#endif
