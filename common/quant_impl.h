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
#include <xmmintrin.h>

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

/* The float types' reduction of their 32 lanes: lane l += lane l + half for half = 16, 8, 4, 2,
 * 1; returns lane 0 (the tail is added to it by the caller). */
static inline float lanes32_total(float lane[32]) {
    for (int half = 16; half >= 1; half /= 2)
        for (int l = 0; l < half; l++)
            lane[l] = lane[l] + lane[l + half];
    return lane[0];
}

/* dot##_x4 (vec_dot4) and dot##_r4 (vec_dot_rows4) as four calls of the one-row kernel dot: they
 * share no work, which makes them bit-identical to dot by construction. For kernels without a
 * shared-work body. */
#define VEC_DOT4_GENERIC(dot)                                                                     \
    static void dot##_x4(int64_t n, float *restrict s, const void *restrict w,                    \
                         const void *const a[4]) {                                                \
        for (int j = 0; j < 4; j++)                                                               \
            dot(n, &s[j], w, a[j]);                                                               \
    }
#define VEC_DOT_ROWS4_GENERIC(dot)                                                                \
    static void dot##_r4(int64_t n, float *restrict s, const void *restrict w, size_t row_bytes, \
                         const void *restrict a) {                                                \
        for (int r = 0; r < 4; r++)                                                               \
            dot(n, &s[r], (const uint8_t *)w + (size_t)r * row_bytes, a);                         \
    }

#ifndef PF_DIST
#define PF_DIST 2048
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T0
#endif
/* Weight rows of a matrix lie back to back and are read once: asking for the lines PF_DIST bytes
 * ahead (past the row's end means the next row) keeps more misses in flight than the hardware
 * prefetcher alone does (+40-70% GB/s out of cache here). Prefetches never fault, so running off
 * the matrix is harmless. */
static inline void prefetch_ahead(const void *p, size_t bytes) {
    const char *c = (const char *)p + PF_DIST;
    for (size_t off = 0; off < bytes; off += 64)
        _mm_prefetch(c + off, PF_HINT);
}

#ifndef PF_R4_ROWS
#define PF_R4_ROWS 4
#endif
#ifndef PF_R4_HINT
#define PF_R4_HINT _MM_HINT_T1
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
static inline void prefetch_rows4(const void *w, int64_t i, size_t row_bytes, size_t block_bytes) {
    const char *c =
        (const char *)w + PF_R4_ROWS * row_bytes + PF_R4_BYTES + 4 * (size_t)i * block_bytes;
    for (size_t off = 0; off < 4 * block_bytes; off += 64)
        _mm_prefetch(c + off, PF_R4_HINT);
}

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

/* One block's share, as a type's block function computes it for the driver. */
struct qblk {
    __m128i isum; /* four int32 lanes that sum to isum_b */
    __m128i msum; /* QTERM_INT: four int32 lanes that sum to msum_b */
    float d;      /* d_b */
    float m;      /* QTERM_INT: -dmin_b; QTERM_FLOAT: m_w */
    float s;      /* QTERM_FLOAT: s_a */
};

static ALWAYS_INLINE struct qblk qblk_zero(void) {
    struct qblk r = {_mm_setzero_si128(), _mm_setzero_si128(), 0.0f, 0.0f, 0.0f};
    return r;
}

/* Four int32 lanes summing to the sum of v's eight (exact). */
static ALWAYS_INLINE __m128i hsum8_to4(__m256i v) {
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

/* [sum a, sum b, sum c, sum d] of four 4-lane int32 vectors (exact). */
static ALWAYS_INLINE __m128i hsum4x4(__m128i a, __m128i b, __m128i c, __m128i d) {
    return _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(c, d));
}

/* (acc0 + acc1) + (acc2 + acc3) of lanes 0..3. */
static ALWAYS_INLINE float acc4_reduce(__m128 acc) {
    const __m128 t = _mm_hadd_ps(acc, acc); /* a0+a1, a2+a3, ... */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* The contract's float operations for four consecutive blocks r[0..3] (lane j = acc[j]). A block
 * past the row's end is qblk_zero(): fmaf(0, 0, acc) = acc, since acc starts +0 and round to
 * nearest never makes it -0. */
static ALWAYS_INLINE __m128 acc4_update(__m128 acc, const struct qblk r[4], const int term) {
    const __m128 d = _mm_setr_ps(r[0].d, r[1].d, r[2].d, r[3].d);
    const __m128i is = hsum4x4(r[0].isum, r[1].isum, r[2].isum, r[3].isum);
    acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(is), acc);
    if (term == QTERM_INT) {
        const __m128i ms = hsum4x4(r[0].msum, r[1].msum, r[2].msum, r[3].msum);
        acc = _mm_fmadd_ps(_mm_setr_ps(r[0].m, r[1].m, r[2].m, r[3].m), _mm_cvtepi32_ps(ms), acc);
    } else if (term == QTERM_FLOAT) {
        acc = _mm_fmadd_ps(_mm_setr_ps(r[0].m, r[1].m, r[2].m, r[3].m),
                           _mm_setr_ps(r[0].s, r[1].s, r[2].s, r[3].s), acc);
    }
    return acc;
}

/* QUANT_DRIVER(name, WB, AB, QKB, U, TERM) defines name_dot (vec_dot), name_dot4 (vec_dot4) and
 * name_rows4 (vec_dot_rows4) for weight blocks WB of QKB elements against activation blocks AB,
 * from two always-inline functions the type provides:
 *     void name_unpack(const WB *x, U *u);    the weights alone (shared by vec_dot4's columns)
 *     void name_block(const U *u, const WB *x, const AB *y, struct qblk *r);
 * TERM is an enum qterm. The driver groups blocks by four and applies the contract
 * (acc4_update), so the three kernels run the same float operations per output by construction;
 * only the integer work is the type's. */
#define QUANT_DRIVER(name, WB, AB, QKB, U, TERM)                                                  \
    static ALWAYS_INLINE void name##_group(const WB *x, const AB *const *y, int64_t i,           \
                                           const int nblk, const int nc, __m128 *acc) {           \
        struct qblk r[NC_MAX][4];                                                                 \
        FOR_BLK4(b) {                                                                             \
            if (b < nblk) {                                                                       \
                prefetch_ahead(&x[i + b], sizeof(WB));                                            \
                U u;                                                                              \
                name##_unpack(&x[i + b], &u);                                                     \
                FOR_COLS(c, nc) name##_block(&u, &x[i + b], &y[c][i + b], &r[c][b]);              \
            } else {                                                                              \
                FOR_COLS(c, nc) r[c][b] = qblk_zero();                                            \
            }                                                                                     \
        }                                                                                         \
        FOR_COLS(c, nc) acc[c] = acc4_update(acc[c], r[c], TERM);                                 \
    }                                                                                             \
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
            name##_group(x, y, i, 4, nc, acc);                                                    \
        if (i < nb)                                                                               \
            name##_group(x, y, i, (int)(nb - i), nc, acc);                                        \
        FOR_COLS(c, nc) s[c] = acc4_reduce(acc[c]);                                               \
    }                                                                                             \
    static void name##_dot(int64_t n, float *restrict s, const void *restrict w,                  \
                           const void *restrict a) {                                              \
        const void *const a1[1] = {a};                                                            \
        name##_cols(n, s, w, a1, 1);                                                              \
    }                                                                                             \
    static void name##_dot4(int64_t n, float *restrict s, const void *restrict w,                 \
                            const void *const a[4]) {                                             \
        name##_cols(n, s, w, a, 4);                                                               \
    }                                                                                             \
    static ALWAYS_INLINE void name##_rgroup(const WB *const *x, const AB *y, int64_t i,          \
                                            const int nblk, const void *w, size_t row_bytes,      \
                                            __m128 *acc) {                                        \
        struct qblk r[4][4];                                                                      \
        FOR_BLK4(b) {                                                                             \
            if (b < nblk) {                                                                       \
                prefetch_rows4(w, i + b, row_bytes, sizeof(WB));                                  \
                FOR_ROWS4(k) {                                                                    \
                    U u;                                                                          \
                    name##_unpack(&x[k][i + b], &u);                                              \
                    name##_block(&u, &x[k][i + b], &y[i + b], &r[k][b]);                          \
                }                                                                                 \
            } else {                                                                              \
                FOR_ROWS4(k) r[k][b] = qblk_zero();                                               \
            }                                                                                     \
        }                                                                                         \
        FOR_ROWS4(k) acc[k] = acc4_update(acc[k], r[k], TERM);                                    \
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

/* Sets a type's three kernels and its isa name together, so a table never mixes ISAs within one
 * type. */
static inline void quant_set_kernel(struct quant_kernels *tab, int n_tab, enum qtype t,
                                    quant_vec_dot_fn fn, quant_vec_dot4_fn fn4,
                                    quant_vec_dot_rows4_fn fnr4, const char *isa) {
    if ((int)t >= n_tab)
        return;
    tab[t].vec_dot = fn;
    tab[t].vec_dot4 = fn4;
    tab[t].vec_dot_rows4 = fnr4;
    tab[t].isa = isa;
}
#define QUANT_SET(tab, n_tab, t, name, isa)                                                       \
    quant_set_kernel(tab, n_tab, t, name##_dot, name##_dot4, name##_rows4, isa)
#endif

#endif
