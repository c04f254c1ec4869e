/* quant_simd256.h - the 256-bit code the AVX2 and AVX-512 twins share word for word, included by
 * quant_avx2.c and quant_avx512.c and compiled into each under its own flags (everything here is
 * static inline): byte helpers, the float types' scalar tails, the signed 32-code block with its
 * |x|, the unpacking of the 32-element blocks whose codes both twins form the same way, q3_K's
 * scale bytes and iq4_xs's block scales. What differs — the integer dot of a block (vpmaddubsw or
 * vpdpbusd), q4_0, the float lanes — stays in each file, as do the type instantiations (S8_TYPE,
 * U8_TYPE, QUANT_DRIVER). Not for other use. */
#ifndef SNIPER_QUANT_SIMD256_H
#define SNIPER_QUANT_SIMD256_H

#include <immintrin.h>
#include <string.h>

#include "quant.h"
#include "quant_impl.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static inline float h2f(fp16_t h) {
    return _cvtsh_ss(h);
}

static ALWAYS_INLINE uint32_t load_u32(const uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, sizeof(u));
    return u;
}

/* 32 nibbles of 16 bytes: low nibbles in bytes 0..15, high nibbles in bytes 16..31. */
static ALWAYS_INLINE __m256i nibbles32(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

/* 0xFF in byte i where bit i of the 32-bit little-endian word at p is set, else 0. */
static ALWAYS_INLINE __m256i bits_to_bytes(const uint8_t *p) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                            2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v =
        _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)load_u32(p)), spread), bit);
    return _mm256_cmpeq_epi8(v, bit);
}

/* A 16-entry int8 table in both 128-bit lanes, for vpshufb lookups of 4-bit codes. */
static ALWAYS_INLINE __m256i table16(const int8_t *t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
}

/* The float kernels' scalar tails: one element of each type as a float. */
static inline float f32_at(const float *p) {
    return *p;
}

static inline float f16_at(const fp16_t *p) {
    return h2f(*p);
}

static inline float bf16_at(const bf16_t *p) {
    uint32_t u = (uint32_t)*p << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* ---- 32-element blocks ------------------------------------------------------------------------ */

/* A block of 32 signed codes x, with |x| for the sign trick (x = -128 reads as 128 unsigned). */
struct s8_u {
    __m256i x, ax;
};

static ALWAYS_INLINE void s8_set(struct s8_u *u, __m256i x) {
    u->x = x;
    u->ax = _mm256_abs_epi8(x);
}

/* nibble | 0xF0 where the fifth bit is clear = nibble + 16 * bit - 16 as a signed byte */
static ALWAYS_INLINE void q5_0_unpack(const struct block_q5_0 *x, struct s8_u *u) {
    const __m256i hi = _mm256_andnot_si256(bits_to_bytes(x->qh), _mm256_set1_epi8((char)0xF0));
    s8_set(u, _mm256_or_si256(nibbles32(x->qs), hi));
}

static ALWAYS_INLINE void iq4_nl_unpack(const struct block_iq4_nl *x, struct s8_u *u) {
    s8_set(u, _mm256_shuffle_epi8(table16(quant_iq4nl_values), nibbles32(x->qs)));
}

static ALWAYS_INLINE void mxfp4_unpack(const struct block_mxfp4 *x, struct s8_u *u) {
    s8_set(u, _mm256_shuffle_epi8(table16(quant_mxfp4_values), nibbles32(x->qs)));
}

static ALWAYS_INLINE void mxfp4_scales(const struct block_mxfp4 *x, const struct block_q8_0 *y,
                                       const int n_ok, struct qscale4 *f) {
    f->d = _mm_mul_ps(e8m0x4(x, n_ok), f16x4(&y->d, sizeof(*y), n_ok));
}

/* q4_1 / q5_1: unsigned codes (the min term is the driver's fmaf(m_w, s_a)). */
static ALWAYS_INLINE void q4_1_unpack(const struct block_q4_1 *x, __m256i *u) {
    *u = nibbles32(x->qs);
}

static ALWAYS_INLINE void q5_1_unpack(const struct block_q5_1 *x, __m256i *u) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(x->qh), _mm256_set1_epi8(0x10));
    *u = _mm256_or_si256(nibbles32(x->qs), hi);
}

/* ---- 256-element blocks ----------------------------------------------------------------------- */

/* q3_K's 16 signed 6-bit scales as bytes: the low nibbles of bytes 0-7 (scales 0-7) and their
 * high nibbles (8-15), with bits 2(j/4)..+1 of byte 8 + j%4 on top, minus 32. */
static ALWAYS_INLINE __m128i q3_K_sc6(const uint8_t *p) {
    const uint32_t a0 = load_u32(p), a1 = load_u32(p + 4), a2 = load_u32(p + 8);
    const uint32_t lo = 0x0f0f0f0fu, hi = 0x03030303u;
    const __m128i v = _mm_setr_epi32((int)((a0 & lo) | (a2 & hi) << 4),
                                     (int)((a1 & lo) | ((a2 >> 2) & hi) << 4),
                                     (int)(((a0 >> 4) & lo) | ((a2 >> 4) & hi) << 4),
                                     (int)(((a1 >> 4) & lo) | ((a2 >> 6) & hi) << 4));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

static ALWAYS_INLINE void iq4_xs_scales(const struct block_iq4_xs *x, const struct block_q8_K *y,
                                        const int n_ok, struct qscale4 *f) {
    f->d = QSCALE_Q8K(x, d, y, n_ok);
}

#endif
