/* quant_avx512.c - AVX-512 (F/BW/VL/DQ/VNNI) twins of the reference vec_dot kernels in quant.c.
 * Same contract as quant_avx2.c: exact integer sums per block, one float scale per block. The
 * K-quant kernels multiply unsigned codes by signed activations (vpmaddubsw, no saturation for
 * codes <= 63) and fold the per-sub-block scales in with vpdpwssd, so each 64 weights cost two
 * multiplies. Signed-by-signed kernels (q4_0, q5_0, q8_0) need activations in [-127, 127], as
 * Q8_0's are. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "quant.h"
#include "quant_impl.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static inline float h2f(fp16_t h) {
    return _cvtsh_ss(h);
}

static inline float hsum256_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 nibbles of 16 bytes: low nibbles in bytes 0..15, high nibbles in bytes 16..31. */
static inline __m256i nibbles32(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

static inline uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- float kernels --------------------------------------------------------------------------- */

static void vec_dot_f32(int64_t n, float *restrict s, const void *restrict w,
                        const void *restrict a) {
    const float *x = w, *y = a;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), acc3);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        acc0 =
            _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), acc0);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

static inline __m512 load_f16(__mmask16 m, const fp16_t *p) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

static void vec_dot_f16(int64_t n, float *restrict s, const void *restrict w,
                        const void *restrict a) {
    const fp16_t *x = w, *y = a;
    const __mmask16 all = 0xFFFF;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(load_f16(all, x + i), load_f16(all, y + i), acc0);
        acc1 = _mm512_fmadd_ps(load_f16(all, x + i + 16), load_f16(all, y + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(load_f16(all, x + i + 32), load_f16(all, y + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(load_f16(all, x + i + 48), load_f16(all, y + i + 48), acc3);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? all : (__mmask16)((1u << (n - i)) - 1);
        acc0 = _mm512_fmadd_ps(load_f16(m, x + i), load_f16(m, y + i), acc0);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

/* ---- column-parameterised kernels ------------------------------------------------------------ */
/* Each quantized kernel below is one always-inline body, *_cols(n, s, w, a, nc), instantiated with
 * nc = 1 (vec_dot) and nc = 4 (vec_dot4). Work that depends only on the weights (loads, unpacking,
 * scale shuffles) is done once per block; each column has its own accumulators and runs the float
 * operations of the one-column kernel in the same order, so s[c] of vec_dot4 is bit-identical to
 * vec_dot's. Only integer work (exact, so its order is free) is arranged differently. */

#define NC_MAX 4
#define ALWAYS_INLINE inline __attribute__((always_inline))
/* Column loops are unrolled so that per-column accumulators live in registers. */
#define FOR_COLS(c, nc) _Pragma("GCC unroll 4") for (int c = 0; c < (nc); c++)
#define FOR_ROWS4(r) _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)

/* Instantiates vec_dot_<t> and vec_dot4_<t> from <t>_cols. */
#define VEC_DOT_COLS(t)                                                                           \
    static void vec_dot_##t(int64_t n, float *restrict s, const void *restrict w,                 \
                            const void *restrict a) {                                             \
        const void *const a1[1] = {a};                                                            \
        t##_cols(n, s, w, a1, 1);                                                                 \
    }                                                                                             \
    static void vec_dot4_##t(int64_t n, float *restrict s, const void *restrict w,                \
                             const void *const a[4]) {                                            \
        t##_cols(n, s, w, a, 4);                                                                  \
    }

VEC_DOT4_GENERIC(vec_dot_f32)
VEC_DOT4_GENERIC(vec_dot_f16)
VEC_DOT_ROWS4_GENERIC(vec_dot_f32)
VEC_DOT_ROWS4_GENERIC(vec_dot_f16)

/* ---- 32-element block kernels ---------------------------------------------------------------- */

/* Two blocks per iteration, each with its own accumulator, so the FMA chains overlap. */
static ALWAYS_INLINE void q8_0_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q8_0 *x = w, *y[NC_MAX];
    const int64_t nb = n / QK8_0;
    __m256 acc0[NC_MAX], acc1[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc0[c] = _mm256_setzero_ps();
        acc1[c] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        prefetch_ahead(&x[i], 2 * sizeof(x[i]));
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)x[i + 1].qs);
        const __m256i ax0 = _mm256_abs_epi8(x0), ax1 = _mm256_abs_epi8(x1);
        const float dx0 = h2f(x[i].d), dx1 = h2f(x[i + 1].d);
        FOR_COLS(c, nc) {
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)y[c][i].qs);
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)y[c][i + 1].qs);
            const __m256i p0 =
                _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax0, _mm256_sign_epi8(y0, x0));
            const __m256i p1 =
                _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax1, _mm256_sign_epi8(y1, x1));
            acc0[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx0 * h2f(y[c][i].d)),
                                      _mm256_cvtepi32_ps(p0), acc0[c]);
            acc1[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx1 * h2f(y[c][i + 1].d)),
                                      _mm256_cvtepi32_ps(p1), acc1[c]);
        }
    }
    for (; i < nb; i++) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i ax0 = _mm256_abs_epi8(x0);
        const float dx0 = h2f(x[i].d);
        FOR_COLS(c, nc) {
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)y[c][i].qs);
            const __m256i p0 =
                _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax0, _mm256_sign_epi8(y0, x0));
            acc0[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx0 * h2f(y[c][i].d)),
                                      _mm256_cvtepi32_ps(p0), acc0[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = hsum256_ps(_mm256_add_ps(acc0[c], acc1[c]));
}
VEC_DOT_COLS(q8_0)

/* sum (nib - 8) * y = sum nib * y - sum 8 * y: two VNNI dots instead of a signed-byte dance. */
static ALWAYS_INLINE void q4_0_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y[NC_MAX];
    const int64_t nb = n / QK4_0;
    const __m256i eight = _mm256_set1_epi8(8);
    __m256 acc[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const __m256i qx = nibbles32(x[i].qs);
        const float dx = h2f(x[i].d);
        FOR_COLS(c, nc) {
            const __m256i qy = _mm256_loadu_si256((const __m256i *)y[c][i].qs);
            const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), qx, qy);
            const __m256i m = _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, qy);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * h2f(y[c][i].d)),
                                     _mm256_cvtepi32_ps(_mm256_sub_epi32(p, m)), acc[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = hsum256_ps(acc[c]);
}
VEC_DOT_COLS(q4_0)

static ALWAYS_INLINE void q5_0_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q5_0 *x = w;
    const struct block_q8_0 *y[NC_MAX];
    const int64_t nb = n / QK5_0;
    const __m256i f0 = _mm256_set1_epi8((char)0xF0);
    __m256 acc[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        /* nibble | 0xF0 where the fifth bit is clear = nibble + 16 * bit - 16 as a signed byte */
        const __m256i hbits = _mm256_movm_epi8((__mmask32)load_u32(x[i].qh));
        const __m256i qx = _mm256_ternarylogic_epi32(nibbles32(x[i].qs), hbits, f0, 0xF2);
        const __m256i ax = _mm256_abs_epi8(qx);
        const float dx = h2f(x[i].d);
        FOR_COLS(c, nc) {
            const __m256i qy = _mm256_loadu_si256((const __m256i *)y[c][i].qs);
            const __m256i p =
                _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, _mm256_sign_epi8(qy, qx));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * h2f(y[c][i].d)), _mm256_cvtepi32_ps(p),
                                     acc[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = hsum256_ps(acc[c]);
}
VEC_DOT_COLS(q5_0)

_Static_assert(offsetof(struct block_q4_K, dmin) == offsetof(struct block_q4_K, d) + 2,
               "k4_d_dmin reads d and dmin as one 32-bit word");
_Static_assert(offsetof(struct block_q5_K, dmin) == offsetof(struct block_q5_K, d) + 2,
               "k4_d_dmin reads d and dmin as one 32-bit word");

/* ---- K-quants -------------------------------------------------------------------------------- */

/* Unpacks the 12 bytes of 6-bit scales and mins of a q4_K/q5_K block into 16 bytes:
 * bytes 0..7 the scales of the 8 sub-blocks, bytes 8..15 their mins. Reads 16 bytes at p (the
 * 4 past the scales are the block's own codes), all in vector registers. With the 32-bit words
 * u0 u1 u2: scales 0-3 = u0 & 0x3f.., 4-7 = (u2 & 0x0f..) | (u0 >> 2 & 0x30..); mins 0-3 = u1 &
 * 0x3f.., 4-7 = (u2 >> 4 & 0x0f..) | (u1 >> 2 & 0x30..). */
static inline __m128i k4_scales_mins(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)),
                                     _mm_setr_epi32(0, 0, 0, 4)); /* u0 u2 u1 u2>>4 */
    const __m128i b = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2);
    const __m128i ma = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m128i mb = _mm_setr_epi32(0, 0x30303030, 0, 0x30303030);
    return _mm_or_si128(_mm_and_si128(a, ma), _mm_and_si128(b, mb));
}

/* [d, dmin, 0, 0] as floats from a block's adjacent fp16 pair (times dy: the column's scales). */
static inline __m128 k4_d_dmin(const fp16_t *d_dmin) {
    uint32_t u;
    memcpy(&u, d_dmin, sizeof(u));
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)u));
}

/* 8 int32 lanes summing min[j] * (bsums[2j] + bsums[2j+1]) given the bytes of k4_scales_mins. */
static inline __m256i k4_mins_dot(__m128i scm, const int16_t *bsums) {
    const __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), mdup);
}

/* vpermw indices picking int16 scale j for words 0..15 and scale j+1 for words 16..31. */
static inline __m512i idx_pair16(int j) {
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16((short)j),
                                   _mm512_set1_epi16((short)(j + 1)));
}

/* vpermw indices picking int16 scale j + (word / 8): one scale per 16 weights. */
static inline __m512i idx_quad8(int j) {
    const __m512i lane = _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                                            21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                                            11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           3);
    return _mm512_add_epi16(lane, _mm512_set1_epi16((short)j));
}

/* The 64 weights of chunk k of a q4_K block (32 bytes): low nibbles in bytes 0..31 (sub-block 2k),
 * high nibbles in bytes 32..63 (sub-block 2k+1), matching 64 consecutive activations. */
static inline __m512i q4k_chunk(const uint8_t *q) {
    const __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)q));
    return _mm512_and_si512(_mm512_mask_srli_epi16(b, 0xFFFF0000u, b, 4), _mm512_set1_epi8(0x0F));
}

/* One q4_K block of one weight row against one Q8_K activation block: the float operations of
 * every q4_K kernel here (vec_dot, vec_dot4, vec_dot_rows4), which is what keeps them bitwise
 * equal. dx = [d, dmin] of the weights; mdup, q, k their unpacked mins, codes and scales; y the
 * activation block, yq its 256 codes. */
static ALWAYS_INLINE void q4k_block(__m128 dx, __m256i mdup, const __m512i q[4], const __m512i k[4],
                                    const struct block_q8_K *y, const __m512i yq[4],
                                    __m512 *acc, __m256 *accm) {
    const __m128 dd = _mm_mul_ps(dx, _mm_set1_ps(y->d)); /* d*dy, dmin*dy */
    const __m256i md = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mdup);
    *accm = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), _mm256_cvtepi32_ps(md),
                            *accm);
    const __m512i p0 = _mm512_maddubs_epi16(q[0], yq[0]);
    const __m512i p1 = _mm512_maddubs_epi16(q[1], yq[1]);
    const __m512i p2 = _mm512_maddubs_epi16(q[2], yq[2]);
    const __m512i p3 = _mm512_maddubs_epi16(q[3], yq[3]);
    __m512i s0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p0, k[0]);
    __m512i s1 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p1, k[1]);
    s0 = _mm512_dpwssd_epi32(s0, p2, k[2]);
    s1 = _mm512_dpwssd_epi32(s1, p3, k[3]);
    *acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                           *acc);
}

/* Unpacks q4_K block x: [d, dmin], the mins widened for k4 bsums, the four 64-weight chunks and
 * their scale vectors (idx: idx_pair16(0, 2, 4, 6)). */
static ALWAYS_INLINE void q4k_unpack(const struct block_q4_K *x, const __m512i idx[4], __m128 *dx,
                                     __m256i *mdup, __m512i q[4], __m512i k[4]) {
    *dx = k4_d_dmin(&x->d);
    const __m128i scm = k4_scales_mins(x->scales);
    *mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
    const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(scm));
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        q[j] = q4k_chunk(x->qs + 32 * j);
        k[j] = _mm512_permutexvar_epi16(idx[j], sc16);
    }
}

static ALWAYS_INLINE void q8k_load(const struct block_q8_K *y, __m512i yq[4]) {
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
        yq[j] = _mm512_loadu_si512(y->qs + 64 * j);
}

static ALWAYS_INLINE void q4_K_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q4_K *x = w;
    const struct block_q8_K *y[NC_MAX];
    const int64_t nb = n / QK_K;
    const __m512i idx[4] = {idx_pair16(0), idx_pair16(2), idx_pair16(4), idx_pair16(6)};
    __m512 acc[NC_MAX];
    __m256 accm[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc[c] = _mm512_setzero_ps();
        accm[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        __m128 dx;
        __m256i mdup;
        __m512i q[4], k[4];
        q4k_unpack(&x[i], idx, &dx, &mdup, q, k);
        FOR_COLS(c, nc) {
            __m512i yq[4];
            q8k_load(&y[c][i], yq);
            q4k_block(dx, mdup, q, k, &y[c][i], yq, &acc[c], &accm[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = _mm512_reduce_add_ps(acc[c]) - hsum256_ps(accm[c]);
}
VEC_DOT_COLS(q4_K)

/* Four rows, one activation row: the activation block is loaded once for the four rows, and each
 * row runs vec_dot_q4_K's float operations (q4k_block) on its own accumulators. */
static void vec_dot_rows4_q4_K(int64_t n, float *restrict s, const void *restrict w,
                               size_t row_bytes, const void *restrict a) {
    const struct block_q4_K *x[4];
    const struct block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m512i idx[4] = {idx_pair16(0), idx_pair16(2), idx_pair16(4), idx_pair16(6)};
    __m512 acc[4];
    __m256 accm[4];
    FOR_ROWS4(r) {
        x[r] = (const void *)((const uint8_t *)w + (size_t)r * row_bytes);
        acc[r] = _mm512_setzero_ps();
        accm[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_rows4(w, i, row_bytes, sizeof(x[0][i]));
        __m512i yq[4];
        q8k_load(&y[i], yq);
        FOR_ROWS4(r) {
            __m128 dx;
            __m256i mdup;
            __m512i q[4], k[4];
            q4k_unpack(&x[r][i], idx, &dx, &mdup, q, k);
            q4k_block(dx, mdup, q, k, &y[i], yq, &acc[r], &accm[r]);
        }
    }
    FOR_ROWS4(r) s[r] = _mm512_reduce_add_ps(acc[r]) - hsum256_ps(accm[r]);
}

static ALWAYS_INLINE void q5_K_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q5_K *x = w;
    const struct block_q8_K *y[NC_MAX];
    const int64_t nb = n / QK_K;
    const __m512i b4 = _mm512_set1_epi8(0x10);
    __m512 acc[NC_MAX];
    __m256 accm[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc[c] = _mm512_setzero_ps();
        accm[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        const float dx = h2f(x[i].d), dmx = h2f(x[i].dmin);
        const __m128i scm = k4_scales_mins(x[i].scales);
        const __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
        const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(scm));
        /* chunk k needs bit 2k of qh[l] in its low half and bit 2k+1 in its high half: shift the
         * high copy by one, then both by 2 per chunk (16-bit shifts by <= 7 keep bit 0 in-byte) */
        __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x[i].qh));
        hb = _mm512_mask_srli_epi16(hb, 0xFFFF0000u, hb, 1);
        __m512i q[4], k[4];
        for (int j = 0; j < 4; j++) {
            const __m512i hi = _mm512_and_si512(_mm512_slli_epi16(hb, 4), b4);
            q[j] = _mm512_or_si512(q4k_chunk(x[i].qs + 32 * j), hi);
            k[j] = _mm512_permutexvar_epi16(idx_pair16(2 * j), sc16);
            hb = _mm512_srli_epi16(hb, 2);
        }
        FOR_COLS(c, nc) {
            const float d = y[c][i].d * dx, dmin = y[c][i].d * dmx;
            const __m256i md =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[c][i].bsums), mdup);
            accm[c] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(md), accm[c]);
            __m512i sumi = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                const __m512i yq = _mm512_loadu_si512(y[c][i].qs + 64 * j);
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[j], yq), k[j]);
            }
            acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = _mm512_reduce_add_ps(acc[c]) - hsum256_ps(accm[c]);
}
VEC_DOT_COLS(q5_K)

/* One q6_K block of one weight row against one Q8_K activation block: the float operations of
 * every q6_K kernel here, shared so that they stay bitwise equal. dx: the block's d; sc16y: its 16
 * scales as int16; e, k: its codes (+32) and scale vectors (q6k_unpack); y, yq: the activations. */
static ALWAYS_INLINE void q6k_block(float dx, __m256i sc16y, const __m512i e[4], const __m512i k[4],
                                    const struct block_q8_K *y, const __m512i yq[4], __m512 *acc) {
    const float d = y->d * dx;
    /* codes are stored +32: sum sc*(q-32)*y = sum sc*q*y - 32 * sum sc*bsum (16-sums) */
    const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), sc16y);
    const __m512i p0 = _mm512_maddubs_epi16(e[0], yq[0]);
    const __m512i p1 = _mm512_maddubs_epi16(e[1], yq[1]);
    const __m512i p2 = _mm512_maddubs_epi16(e[2], yq[2]);
    const __m512i p3 = _mm512_maddubs_epi16(e[3], yq[3]);
    __m512i s0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p0, k[0]);
    __m512i s1 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p2, k[2]);
    s0 = _mm512_dpwssd_epi32(s0, p1, k[1]);
    s1 = _mm512_dpwssd_epi32(s1, p3, k[3]);
    __m512i tot = _mm512_add_epi32(s0, s1);
    tot = _mm512_sub_epi32(tot, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
    *acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(tot), *acc);
}

/* Unpacks q6_K block x: d, the 16 scales as int16, the 6-bit codes (+32) of weights 64j..64j+63
 * in e[j] and their scale vectors in k[j] (idx: idx_quad8(0, 4, 8, 12)). */
static ALWAYS_INLINE void q6k_unpack(const struct block_q6_K *x, const __m512i idx[4], float *dx,
                                     __m256i *sc16y, __m512i e[4], __m512i k[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x30);
    *dx = h2f(x->d);
    *sc16y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    const __m512i sc16 = _mm512_zextsi256_si512(*sc16y);
    /* e[2h], e[2h+1]: the 6-bit codes (+32) of weights 0..63 and 64..127 of half h */
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i hb =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
        /* weights 0..63 of the half: bits 0-1 of qh[l] (first 32), bits 2-3 (next 32) */
        __m512i ha = _mm512_slli_epi16(hb, 2);
        ha = _mm512_and_si512(_mm512_mask_slli_epi16(ha, 0x0000FFFFu, ha, 2), m6);
        /* weights 64..127: bits 4-5, then bits 6-7 */
        const __m512i hc = _mm512_and_si512(_mm512_mask_srli_epi16(hb, 0xFFFF0000u, hb, 2), m6);
        e[2 * h] = _mm512_ternarylogic_epi32(l, m4, ha, 0xEA);
        e[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), m4, hc, 0xEA);
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
        k[j] = _mm512_permutexvar_epi16(idx[j], sc16);
}

static ALWAYS_INLINE void q6_K_cols(int64_t n, float *restrict s, const void *restrict w,
                                    const void *const *a, const int nc) {
    const struct block_q6_K *x = w;
    const struct block_q8_K *y[NC_MAX];
    const int64_t nb = n / QK_K;
    const __m512i idx[4] = {idx_quad8(0), idx_quad8(4), idx_quad8(8), idx_quad8(12)};
    __m512 acc[NC_MAX];
    FOR_COLS(c, nc) {
        y[c] = a[c];
        acc[c] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_ahead(&x[i], sizeof(x[i]));
        float dx;
        __m256i sc16y;
        __m512i e[4], k[4];
        q6k_unpack(&x[i], idx, &dx, &sc16y, e, k);
        FOR_COLS(c, nc) {
            __m512i yq[4];
            q8k_load(&y[c][i], yq);
            q6k_block(dx, sc16y, e, k, &y[c][i], yq, &acc[c]);
        }
    }
    FOR_COLS(c, nc) s[c] = _mm512_reduce_add_ps(acc[c]);
}
VEC_DOT_COLS(q6_K)

/* Four rows, one activation row, as vec_dot_rows4_q4_K (float operations: q6k_block). */
static void vec_dot_rows4_q6_K(int64_t n, float *restrict s, const void *restrict w,
                               size_t row_bytes, const void *restrict a) {
    const struct block_q6_K *x[4];
    const struct block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m512i idx[4] = {idx_quad8(0), idx_quad8(4), idx_quad8(8), idx_quad8(12)};
    __m512 acc[4];
    FOR_ROWS4(r) {
        x[r] = (const void *)((const uint8_t *)w + (size_t)r * row_bytes);
        acc[r] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        prefetch_rows4(w, i, row_bytes, sizeof(x[0][i]));
        __m512i yq[4];
        q8k_load(&y[i], yq);
        FOR_ROWS4(r) {
            float dx;
            __m256i sc16y;
            __m512i e[4], k[4];
            q6k_unpack(&x[r][i], idx, &dx, &sc16y, e, k);
            q6k_block(dx, sc16y, e, k, &y[i], yq, &acc[r]);
        }
    }
    FOR_ROWS4(r) s[r] = _mm512_reduce_add_ps(acc[r]);
}

/* ---- registration ---------------------------------------------------------------------------- */

/* vec_dot_rows4 as four vec_dot calls for the types without a four-row body yet. */
VEC_DOT_ROWS4_GENERIC(vec_dot_q8_0)
VEC_DOT_ROWS4_GENERIC(vec_dot_q4_0)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_0)
VEC_DOT_ROWS4_GENERIC(vec_dot_q5_K)
#define vec_dot_rows4_f32 vec_dot_f32_r4
#define vec_dot_rows4_f16 vec_dot_f16_r4
#define vec_dot_rows4_q8_0 vec_dot_q8_0_r4
#define vec_dot_rows4_q4_0 vec_dot_q4_0_r4
#define vec_dot_rows4_q5_0 vec_dot_q5_0_r4
#define vec_dot_rows4_q5_K vec_dot_q5_K_r4
#define vec_dot4_f32 vec_dot_f32_x4
#define vec_dot4_f16 vec_dot_f16_x4

/* Sets a type's three kernels together, so a table never mixes ISAs within one type. */
#define SET_KERNEL(tab, n_tab, t, sfx)                                                            \
    set_kernel(tab, n_tab, QTYPE_##t, vec_dot_##sfx, vec_dot4_##sfx, vec_dot_rows4_##sfx)

static void set_kernel(struct quant_kernels *tab, int n_tab, enum qtype t, quant_vec_dot_fn fn,
                       quant_vec_dot4_fn fn4, quant_vec_dot_rows4_fn fnr4) {
    if ((int)t >= n_tab)
        return;
    tab[t].vec_dot = fn;
    tab[t].vec_dot4 = fn4;
    tab[t].vec_dot_rows4 = fnr4;
    tab[t].isa = "avx512";
}

/* Registers the AVX2 kernels first (an AVX-512 CPU has AVX2, so tab is a superset of what
 * quant_register_avx2 gives), then overrides f32, f16, q4_0, q5_0, q8_0, q4_K, q5_K, q6_K with
 * isa "avx512", vec_dot, vec_dot4 and vec_dot_rows4 together (four-column kernels with shared
 * unpacking for the quantized types, four-row kernels with shared activation loads for q4_K and
 * q6_K, four calls of vec_dot elsewhere). type, vec_dot_type and from_float stay as they are. Call
 * only on a CPU with AVX2, FMA, F16C and AVX-512 F/BW/VL/DQ/VNNI. */
void quant_register_avx512(struct quant_kernels *tab, int n_tab) {
    quant_register_avx2(tab, n_tab);
    SET_KERNEL(tab, n_tab, F32, f32);
    SET_KERNEL(tab, n_tab, F16, f16);
    SET_KERNEL(tab, n_tab, Q8_0, q8_0);
    SET_KERNEL(tab, n_tab, Q4_0, q4_0);
    SET_KERNEL(tab, n_tab, Q5_0, q5_0);
    SET_KERNEL(tab, n_tab, Q4_K, q4_K);
    SET_KERNEL(tab, n_tab, Q5_K, q5_K);
    SET_KERNEL(tab, n_tab, Q6_K, q6_K);
}
