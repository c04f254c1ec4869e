/* quant_impl.h - pieces shared by the kernel files (quant.c, quant_avx2.c, quant_avx512.c) and by
 * nothing else: the four-at-a-time wrappers built from a one-row kernel, and the weight prefetch
 * helpers. */
#ifndef SNIPER_QUANT_IMPL_H
#define SNIPER_QUANT_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <xmmintrin.h>

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

#endif
