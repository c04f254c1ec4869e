/* quant.h - ggml's block formats, their scalar reference dequantizers and quantizers (the spec),
 * and the dot-product kernels the engine's matrix products are built from.
 *
 *     const struct quant_kernels *k = quant_kernels(QTYPE_Q4_K);  // best for this CPU
 *     k->from_float(x, xq, n);          // x (f32, n elements) -> xq in k->vec_dot_type
 *     k->vec_dot(n, &out, w_row, xq);   // out = dot(weight row, activation row)
 *
 * Block layouts are bit-identical to ggml's (pinned by tests against gguf-py's dequantization).
 * Activations are quantized exactly as ggml's CPU decode path does: Q8_0 blocks (scale amax/127
 * stored as fp16, codes x*(127/amax) rounded half to even) for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4
 * weights, Q8_1 for Q4_1/Q5_1, Q8_K (ggml's reference quantizer) for K-quants and IQ4_XS, fp16 for
 * F16 weights, bf16 for BF16, plain f32 for F32. That is what makes our logits land where
 * llama.cpp's do.
 *
 * THE ACCUMULATION CONTRACT. Every vec_dot, in every ISA, performs exactly these float operations,
 * so each SIMD kernel is bit-identical to the scalar reference and logits are the same on every
 * CPU (tests/test_quant_simd.c compares them with memcmp; quant_kernels() re-checks the selected
 * twins at start-up).
 *  - Block-quantized types but q4_K, q5_K and q6_K (the next item). For block b of the row (in row
 *    order) the kernel computes exact integer sums: isum_b, and for types with a min/offset term
 *    a second one, msum_b. Their order is free (they are integers; no intermediate may saturate
 *    or overflow). A fixed float expression per type gives the block scale d_b (and the second
 *    term's factors); four float accumulators, all +0 at the start, take
 *        acc[b % 4] = fmaf(d_b, (float)isum_b, acc[b % 4]);
 *    and, for two-term types, right after it in the same accumulator
 *        acc[b % 4] = fmaf(-dmin_b, (float)msum_b, acc[b % 4]);   (q2_K)
 *        acc[b % 4] = fmaf(m_w, s_a, acc[b % 4]);                  (Q4_1, Q5_1: fp16 m and s)
 *    The result is (acc[0] + acc[1]) + (acc[2] + acc[3]). Per type (w: weight block, a:
 *    activation block, fp16() the exact conversion, products in float):
 *        q4_0 q5_0 q8_0 iq4_nl  d = fp16(w.d) * fp16(a.d)      isum = sum q_w * q_a
 *        q4_1 q5_1              d = fp16(w.d) * fp16(a.d)      isum = sum q_w * q_a (q_w >= 0),
 *                               then fmaf(fp16(w.m), fp16(a.s))
 *        mxfp4                  d = e8m0_half(w.e) * fp16(a.d) isum = sum kv[q_w] * q_a
 *        q2_K                   d = a.d * fp16(w.d)            isum = sum_sub sc * dot(q_w, q_a),
 *                               dmin = a.d * fp16(w.dmin)      msum = sum_sub m * sum(q_a)
 *        q3_K                   d = a.d * fp16(w.d)            isum = sum_sub sc * dot(q_w, q_a)
 *                                                              (signed codes and scales)
 *        iq4_xs                 d = a.d * fp16(w.d)            isum = sum_sub (ls-32) * dot(kv, q_a)
 *  - q4_K, q5_K and q6_K: ggml's x86 (AVX2) order, which llama.cpp's x86 builds compute. For
 *    block b, d_b = a.d * fp16(w.d) (and dmin_b = -(a.d * fp16(w.dmin))); 8 exact integer lane
 *    sums, lane l = sum of sc * q_w * q_a over elements 4l..4l+3 of every 32 (sc the scale of
 *    their sub-block of 32, or of 16 for q6_K; q6_K's q_w the stored code 0..63, and its lane l
 *    less 32 * the sum of sc * bsum over the groups of 16 elements 2l and 2l+1); 8 float lane
 *    accumulators from +0 take acc[l] = fmaf(d_b, (float)lane_l, acc[l]). The mins: q4_K has 4
 *    lanes, min lane k = sum over sub-blocks 2k and 2k+1 of m * sum(q_a), macc[k] =
 *    fmaf(dmin_b, (float)mlane_k, macc[k]); q5_K one sum, msum = fmaf(dmin_b, (float)(sum_sub m *
 *    sum(q_a)), msum). The result is ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] +
 *    acc[5]) + (acc[3] + acc[7])), plus ((macc[0] + macc[2]) + (macc[1] + macc[3])) for q4_K or
 *    msum for q5_K. (Taken from ggml because the four-accumulator order lands one ulp off ggml's
 *    in half the rows, which flips an activation's Q8_K code now and then:
 *    tests/golden/README.md.)
 *  - Float types (F32, F16, BF16; each product in f32 of the converted values): 32 lanes; lane l
 *    accumulates elements i = l (mod 32) of the first floor(n/32)*32 with fmaf in element order;
 *    then lane l += lane l+16 (l < 16), l += l+8, l += l+4, l += l+2, l += l+1; then the tail
 *    elements are added to lane 0 one by one with fmaf. (AVX2: four __m256 accumulators; AVX-512:
 *    two __m512.)
 *  - vec_dot4, vec_dot2, vec_dot_rows4 and vec_dot_2xn perform, per output, vec_dot's operations.
 *  - The activation quantizers (from_float) are one function for every ISA. */
#ifndef SNIPER_QUANT_H
#define SNIPER_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qtype.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12
#define QK4_NL 32
#define QK_MXFP4 32

typedef uint16_t fp16_t; /* IEEE half, stored as bits */
typedef uint16_t bf16_t; /* bfloat16, stored as bits */

struct block_q4_0 { fp16_t d; uint8_t qs[QK4_0 / 2]; };
struct block_q4_1 { fp16_t d; fp16_t m; uint8_t qs[QK4_1 / 2]; };
struct block_q5_0 { fp16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
struct block_q5_1 { fp16_t d; fp16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
struct block_q8_0 { fp16_t d; int8_t qs[QK8_0]; };
struct block_q8_1 { fp16_t d; fp16_t s; int8_t qs[QK8_1]; }; /* s = d * sum(qs) */
struct block_q4_K { fp16_t d; fp16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
struct block_q5_K {
    fp16_t d; fp16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2];
};
struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; fp16_t d; };
/* q8_K: the K-quants' and i-quants' activations. This layout is the engine's own (ggml's, d first
 * in 292 bytes, is only ever dequantized: quant.c): the codes come first and a block fills five
 * cache lines, so in a 64-byte-aligned row every block's codes start a line and the kernels'
 * 64-byte loads never split one (q4_K vec_dot4 7% faster). */
struct block_q8_K { int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; float d; uint8_t pad[28]; };
/* q2_K: 16 sub-blocks of 16; scales[j] = 4-bit scale | 4-bit min << 4; 2-bit codes. */
struct block_q2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; fp16_t d; fp16_t dmin; };
/* q3_K: 2-bit low codes in qs, the third bit in hmask, 16 six-bit signed scales in 12 bytes. */
struct block_q3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; fp16_t d; };
/* iq4_nl: 4-bit indices into a 16-value non-linear table (quant_iq4nl_values). */
struct block_iq4_nl { fp16_t d; uint8_t qs[QK4_NL / 2]; };
/* iq4_xs: 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h). */
struct block_iq4_xs { fp16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };
/* mxfp4: an E8M0 exponent e and 32 e2m1 codes (quant_mxfp4_values, doubled; scale
 * quant_e8m0_half(e)). */
struct block_mxfp4 { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; };

/* The format tables (tools/derive_quant_values.py derives them from the reference): IQ4_NL's and
 * IQ4_XS's 16 values, and MXFP4's 16 e2m1 values times two. */
extern const int8_t quant_iq4nl_values[16];
extern const int8_t quant_mxfp4_values[16];

/* MXFP4's block scale for exponent byte e, halved to match the doubled values: 2^(e - 128),
 * exact (a float subnormal for e < 2). */
float quant_e8m0_half(uint8_t e);

/* ---- scalar conversions ---------------------------------------------------------------------- */

/* IEEE half <-> float. f32_to_fp16 rounds to nearest even (as F16C's _cvtss_sh does). */
float fp16_to_f32(fp16_t h);
fp16_t f32_to_fp16(float f);

/* bfloat16 <-> float. f32_to_bf16 rounds to nearest even and keeps NaNs quiet, as ggml does. */
float bf16_to_f32(bf16_t h);
bf16_t f32_to_bf16(float f);

/* ---- reference (scalar) functions: the spec ---------------------------------------------------- */

/* True when t has a dequantizer here (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, q2_K,
 * q3_K, q4_K, q5_K, q6_K, q8_K, iq4_nl, iq4_xs, mxfp4). */
bool quant_can_dequantize(enum qtype t);

/* Dequantizes n elements (a multiple of t's block size) from src into dst. Returns 0, or -EINVAL for
 * a type without a dequantizer or a bad n. */
int quant_dequantize_row(enum qtype t, const void *src, float *dst, int64_t n);

/* Quantizes n float elements into blocks of type t (a weight quantizer, used by sniper-mkmodel and
 * tests; round-trips through quant_dequantize_row within the format's precision). Supports every
 * type quant_can_dequantize accepts except the activation formats q8_1 and q8_K. Returns 0 or
 * -EINVAL. */
int quant_quantize_row(enum qtype t, const float *src, void *dst, int64_t n);

/* Activation quantizers, exactly as ggml's CPU decode path. n is a multiple of the block size. */
void quant_q8_0_from_f32(const float *restrict x, void *restrict y, int64_t n);
void quant_q8_1_from_f32(const float *restrict x, void *restrict y, int64_t n);
void quant_q8_K_from_f32(const float *restrict x, void *restrict y, int64_t n);
void quant_f16_from_f32(const float *restrict x, void *restrict y, int64_t n);
void quant_bf16_from_f32(const float *restrict x, void *restrict y, int64_t n);
void quant_f32_from_f32(const float *restrict x, void *restrict y, int64_t n); /* a copy */

/* ---- kernels ----------------------------------------------------------------------------------- */

/* *s = dot(w, a) over n elements: w is a row of the weight type, a the activation row already in the
 * weight type's vec_dot_type. n is a multiple of the weight type's block size. */
typedef void (*quant_vec_dot_fn)(int64_t n, float *restrict s, const void *restrict w,
                                 const void *restrict a);
/* s[j] = dot(w, a[j]) for j < 4: one weight row against four activation rows, sharing the weight
 * loads and unpacking. Each s[j] is bit-identical to vec_dot(n, &s[j], w, a[j]) of the same table
 * (same float operations in the same order), so a token's result does not depend on whether it was
 * computed in a group of four or alone. a[j] may repeat. */
typedef void (*quant_vec_dot4_fn)(int64_t n, float *restrict s, const void *restrict w,
                                  const void *const a[4]);
/* s[j] = dot(w, a[j]) for j < 2: vec_dot4's sharing for two activation rows (two sequences
 * decoding in one step), at half its integer work. Bitwise vec_dot of the same table likewise. */
typedef void (*quant_vec_dot2_fn)(int64_t n, float *restrict s, const void *restrict w,
                                  const void *const a[2]);
/* s[i] = dot(row i, a) for i < 4: four weight rows, row_bytes apart starting at w, against one
 * activation row, sharing the activation loads and keeping four weight streams in flight. Each s[i]
 * is bit-identical to vec_dot(n, &s[i], w + i * row_bytes, a) of the same table (same float
 * operations in the same order), so a row's result does not depend on how rows were grouped. */
typedef void (*quant_vec_dot_rows4_fn)(int64_t n, float *restrict s, const void *restrict w,
                                       size_t row_bytes, const void *restrict a);
/* s[i * n_act + j] = dot(row i, a[j]) for i < 2 and j < n_act (2 or 4): two weight rows,
 * row_bytes apart starting at w, against two or four activation rows (a[j] may repeat), sharing
 * the loads and unpacking of both sides: the shape of Arm's SMMLA, which multiplies a 2x8 by an
 * 8x2 int8 tile. Each output is bit-identical to vec_dot(n, ..., w + i * row_bytes, a[j]) of the
 * same table, so grouping never changes a result. */
typedef void (*quant_vec_dot_2xn_fn)(int64_t n, float *restrict s, const void *restrict w,
                                     size_t row_bytes, const void *const *a, int n_act);
/* Converts n floats into the activation format (see the quant_*_from_f32 functions above). */
typedef void (*quant_from_float_fn)(const float *restrict x, void *restrict y, int64_t n);

struct quant_kernels {
    enum qtype type;               /* the weight type */
    enum qtype vec_dot_type;       /* the activation format vec_dot expects */
    quant_from_float_fn from_float; /* f32 -> vec_dot_type; bit-identical in every variant */
    quant_vec_dot_fn vec_dot;
    quant_vec_dot4_fn vec_dot4;    /* never NULL where vec_dot is set; bitwise vec_dot x 4 */
    quant_vec_dot_rows4_fn vec_dot_rows4; /* never NULL where vec_dot is set; bitwise vec_dot x 4 */
    const char *isa;               /* "ref", "avx2", "avx512", "neon", "neondot", "i8mm" */
    quant_vec_dot2_fn vec_dot2;    /* NULL where the ISA has none (then vec_dot4 serves two) */
    quant_vec_dot_2xn_fn vec_dot_2xn; /* NULL where the ISA has none (i8mm's quantized types have
                                       * one: the matmul then takes rows in pairs) */
};

/* The scalar reference kernels for weight type t, or NULL when t has none. Static storage. */
const struct quant_kernels *quant_kernels_ref(enum qtype t);

/* The fastest kernels for t on this CPU (chosen once, on first use; thread-safe), or NULL when t
 * has none: quant_kernels_select(table, getenv("SNIPER_ISA"), NULL). SNIPER_ISA=ref|avx2|avx512
 * (x86) or ref|neon|neondot|i8mm (arm64) caps the choice (for tests and benchmarks). Static
 * storage. */
const struct quant_kernels *quant_kernels(enum qtype t);

/* Fills tab[QTYPE_COUNT] with the kernels for this CPU, no wider than cap ("ref", "avx2",
 * "avx512" on x86; "ref", "neon", "neondot", "i8mm" on arm64; NULL or "" for no cap; another CPU
 * family's name means ref). Each SIMD type entry (vec_dot, vec_dot4, vec_dot2, vec_dot_rows4 and
 * vec_dot_2xn where it has them) first runs on fixed blocks (a fixed seed, 1, 3, 4 and 7 blocks,
 * edge values) against the scalar reference; one that differs in any bit is not used: stderr says
 * "quant_kernels: <type> <isa> kernel disagrees with the reference; using <narrower isa>" and the
 * next narrower twin, checked the same way, takes over (avx512 -> avx2 -> ref, i8mm -> neondot ->
 * neon -> ref). corrupt ("<type>:<isa>", e.g. "q4_K:avx512", or NULL) is a test hook: that type's
 * vec_dot in that ISA flips its result's last bit, as a miscompiled kernel would. Returns how many
 * candidate entries were rejected. */
int quant_kernels_select(struct quant_kernels *tab, const char *cap, const char *corrupt);

/* Bytes of the activation row of n elements in t's vec_dot_type (for sizing buffers), 0 when t has no
 * kernels or n is not a multiple of the block size. */
size_t quant_act_row_bytes(enum qtype t, int64_t n);

/* Bytes from one activation row to the next as the engine lays them out: quant_act_row_bytes
 * rounded up to 64, so that in a 64-byte-aligned buffer every row starts a cache line (Q8_K's
 * layout counts on it). 0 as quant_act_row_bytes. */
size_t quant_act_row_stride(enum qtype t, int64_t n);

/* SIMD twins, defined in quant_avx2.c / quant_avx512.c (x86 builds) and quant_neon.c /
 * quant_neondot.c / quant_i8mm.c (arm64 builds; neondot: SDOT, Armv8.2's dot-product extension;
 * i8mm: the same with SMMLA, FEAT_I8MM, and vec_dot_2xn for the quantized types): each fills tab
 * (indexed by qtype) with the kernels it implements for the given weight types, leaving other
 * entries alone. Only called when the CPU supports the ISA. */
#if defined(__x86_64__) || defined(__i386__)
void quant_register_avx2(struct quant_kernels *tab, int n_tab);
void quant_register_avx512(struct quant_kernels *tab, int n_tab);
#elif defined(__aarch64__)
void quant_register_neon(struct quant_kernels *tab, int n_tab);
void quant_register_neondot(struct quant_kernels *tab, int n_tab);
void quant_register_i8mm(struct quant_kernels *tab, int n_tab);
#endif

#endif
