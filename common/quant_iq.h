/* quant_iq.h - the grid i-quants: IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S. Block
 * layouts (ggml's, byte for byte), the codebooks (quant_iq_tables.c, derived from the reference by
 * tools/derive_iq_tables.py), scalar dequantizers, dot products against Q8_K activations (the spec)
 * and weight quantizers. quant.c registers them in its tables; quant_iq_avx2.c / quant_iq_avx512.c
 * hold the SIMD twins, bit-identical to the spec.
 *
 * Every type decodes a block of 256 values into signed integer codes q, a multiplier m per 16
 * values and one float d: value = d * unit * m * q, with unit a power of two per type. */
#ifndef SNIPER_QUANT_IQ_H
#define SNIPER_QUANT_IQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"

struct rng; /* rng.h */

/* Groups of 8 values share a grid entry (4 for the iq3 types). Comments give bytes per field. */
struct block_iq2_xxs {
    fp16_t d;
    uint16_t qs[QK_K / 8]; /* per 32 values, two u32: 4 grid indices (8 bits each); 4 sign indices
                              (7 bits each, bits 0-27) and the scale s (bits 28-31), m = 2s+1 */
};
struct block_iq2_xs {
    fp16_t d;
    uint16_t qs[QK_K / 8];      /* per 8 values: grid index (9 bits) | sign index << 9 */
    uint8_t scales[QK_K / 32];  /* per 32 values: s of the first 16 (low nibble), of the last 16 */
};
struct block_iq2_s {
    fp16_t d;
    uint8_t qs[QK_K / 4];       /* 32 low bytes of the grid indices, then 32 sign bytes */
    uint8_t qh[QK_K / 32];      /* per 32 values: index bits 8-9 of group l in bits 2l..2l+1 */
    uint8_t scales[QK_K / 32];  /* as iq2_xs */
};
struct block_iq3_xxs {
    fp16_t d;
    uint8_t qs[3 * QK_K / 8];   /* 64 grid indices (one per 4 values), then per 32 values a u32
                                   of 4 sign indices (7 bits each) and s (bits 28-31) */
};
struct block_iq3_s {
    fp16_t d;
    uint8_t qs[QK_K / 4];       /* low bytes of 64 grid indices (one per 4 values) */
    uint8_t qh[QK_K / 32];      /* per 32 values: bit k is bit 8 of their k-th index */
    uint8_t signs[QK_K / 8];    /* bit j of byte b negates value 8b + j */
    uint8_t scales[QK_K / 64];  /* per 64 values: s of the first 32 (low nibble), of the last */
};
struct block_iq1_s {
    fp16_t d;
    uint8_t qs[QK_K / 8];       /* low bytes of 32 grid indices (one per 8 values) */
    uint16_t qh[QK_K / 32];     /* per 32 values: index bits 8-10 of group l in bits 3l..3l+2,
                                   s in bits 12-14, the delta's sign in bit 15 */
};
struct block_iq1_m {
    uint8_t qs[QK_K / 8];       /* low bytes of 32 grid indices */
    uint8_t qh[QK_K / 16];      /* per 8 values a nibble: index bits 8-10, the delta's sign */
    uint8_t scales[QK_K / 32];  /* 4 u16: 3-bit s per 16 values in bits 0-11; bits 12-15 of the
                                   four words are the fp16 d */
};

/* iq1_m's fp16 d: the top nibbles of its four scale words, lowest word first. */
static inline fp16_t quant_iq1_m_d(const struct block_iq1_m *b) {
    return (fp16_t)(b->scales[1] >> 4 | (b->scales[3] & 0xf0) | (b->scales[5] >> 4) << 8 |
                    (b->scales[7] & 0xf0) << 8);
}

/* The codebooks (see quant_iq_tables.c): entry e packs its values little-endian, byte j = value
 * j. quant_iq_ksigns maps a 7-bit sign index to 8 sign bits (the eighth makes the count even). */
extern const uint8_t quant_iq_ksigns[128];
extern const uint64_t quant_iq_ksigns64[128]; /* as bytes: -1 where the bit is set, else 1 */
extern const uint64_t quant_iq_grid2xxs[256];
extern const uint64_t quant_iq_grid2xs[512];
extern const uint64_t quant_iq_grid2s[1024];
extern const uint32_t quant_iq_grid3xxs[256];
extern const uint32_t quant_iq_grid3s[512];
extern const uint64_t quant_iq_grid1s[2048]; /* int8 values in {-1, 0, 1} */

/* ---- reference (scalar) functions: the spec ------------------------------------------------- */

/* True when t is one of the grid i-quants above. */
bool quant_iq_is_grid(enum qtype t);

/* Dequantizes n values (a multiple of 256) of grid i-quant t from src into dst. Returns 0, or
 * -EINVAL for another type or a bad n. */
int quant_iq_dequantize_row(enum qtype t, const void *src, float *dst, int64_t n);

/* Quantizes n floats (a multiple of 256) into blocks of grid i-quant t: per group of 8 (4) values
 * the grid entry nearest to the values rounded to the grid's levels, signs from the values (the
 * smallest one flipped where the format wants an even count). Not llama-quantize's search; it
 * round-trips within the format's precision. Returns 0 or -EINVAL. Thread-safe. */
int quant_iq_quantize_row(enum qtype t, const float *src, void *dst, int64_t n);

/* Writes one block of grid i-quant t with random valid codes (uniform entries, signs and
 * deltas; multipliers in the upper half of their range) and a d that gives its values an RMS of
 * about std: what sniper-mkmodel writes for the big presets, where searching the grid for
 * billions of weights would take hours. Draws from r. Returns 0 or -EINVAL for another type. */
int quant_iq_random_block(enum qtype t, struct rng *r, float std, void *dst);

/* The dot products against Q8_K (the activation format of every grid type). For block b in row
 * order, isum_b is the exact integer sum of m * q * a over the block and
 * d_b = (fp16_to_f32(d) * a.d) * unit; acc[b % 4] = fmaf(d_b, (float)isum_b, acc[b % 4]) and the
 * result is (acc[0] + acc[1]) + (acc[2] + acc[3]). Q8_K codes must lie in [-127, 127] (the Q8_K
 * quantizer's range). Signatures: quant_vec_dot_fn, quant_vec_dot4_fn, quant_vec_dot_rows4_fn. */
#define QUANT_IQ_DECLARE_REF(name)                                                                \
    void quant_##name##_vec_dot_ref(int64_t n, float *restrict s, const void *restrict w,         \
                                    const void *restrict a);                                      \
    void quant_##name##_vec_dot_ref_x4(int64_t n, float *restrict s, const void *restrict w,      \
                                       const void *const a[4]);                                   \
    void quant_##name##_vec_dot_ref_r4(int64_t n, float *restrict s, const void *restrict w,      \
                                       size_t row_bytes, const void *restrict a);
QUANT_IQ_DECLARE_REF(iq2_xxs)
QUANT_IQ_DECLARE_REF(iq2_xs)
QUANT_IQ_DECLARE_REF(iq2_s)
QUANT_IQ_DECLARE_REF(iq3_xxs)
QUANT_IQ_DECLARE_REF(iq3_s)
QUANT_IQ_DECLARE_REF(iq1_s)
QUANT_IQ_DECLARE_REF(iq1_m)

/* The decoded form the spec is written in (exposed for the tests): value i of the block is
 * d * unit * m[i / 16] * q[i]. */
struct quant_iq_decoded {
    float d;               /* the block's fp16 scale, as a float */
    float unit;            /* the type's factor: 1/8 (iq1, iq2), 1/4 (iq3_xxs), 1 (iq3_s) */
    int8_t q[QK_K];        /* signed codes: grid value with its sign (iq1: 8 * grid +- 1) */
    int16_t m[QK_K / 16];  /* odd multipliers 2s+1 */
};

/* Decodes one block of grid i-quant t into *out. Returns 0 or -EINVAL for another type. */
int quant_iq_decode(enum qtype t, const void *block, struct quant_iq_decoded *out);

/* ---- SIMD twins ------------------------------------------------------------------------------ */

/* The iq1 grid as the SIMD twins use it: entry e (12 bits: grid index | negative delta << 11) packs
 * w = 8 * (grid + 1) + (delta + 1) per value, in 0..18, so that value * 8 = w - 9. Built from
 * quant_iq_grid1s on the first call (thread-safe); static storage. */
const uint64_t *quant_iq1_w_table(void);

/* Fill tab (indexed by qtype) with the AVX2 / AVX-512 kernels of the grid types (the AVX-512 one
 * registers the AVX2 ones first, then its own over them), leaving other entries alone. Only
 * called when the CPU has the ISA (quant.c's dispatch). */
#if defined(__x86_64__) || defined(__i386__)
void quant_iq_register_avx2(struct quant_kernels *tab, int n_tab);
void quant_iq_register_avx512(struct quant_kernels *tab, int n_tab);
#elif defined(__aarch64__)
/* The NEON twins (quant_iq_neon.c) and the same compiled with SDOT (quant_iq_neondot.c) and with
 * SDOT and SMMLA (quant_iq_i8mm.c, which adds vec_dot_2xn), each with vec_dot2; likewise only
 * called where the CPU has the ISA. */
void quant_iq_register_neon(struct quant_kernels *tab, int n_tab);
void quant_iq_register_neondot(struct quant_kernels *tab, int n_tab);
void quant_iq_register_i8mm(struct quant_kernels *tab, int n_tab);
#endif

#endif
