/* ops.h - the elementwise and row operations of the forward pass, written to round the way ggml's
 * CPU backend does (sums of squares and softmax denominators accumulated in double, scales applied
 * as float), so that our f32 logits land within 1e-3 of llama.cpp's. */
#ifndef SNIPER_OPS_H
#define SNIPER_OPS_H

#include <stdint.h>

/* THE ROW OPS' CONTRACT (docs/architecture.md, "The GPU's accumulation contract"): every
 * operation below is written in steps that the Vulkan kernels (server/gpu/shaders/contract.glsl)
 * repeat bit for bit:
 * - float +, -, * one at a time (no contraction: -ffp-contract=off here, `precise` there), a
 *   division and a square root correctly rounded; in double only +, - and * (which Vulkan rounds
 *   correctly; its double division it does not), so a division by n is a product with 1.0 / n
 *   computed on the CPU;
 * - exp is ops_exp (below), never libm's, whose last bit is the library's choice;
 * - a long sum in double goes over 32 lanes: lane l adds elements l, l + 32, l + 64 ... in order,
 *   from 0; then lane l += lane l + w for w = 16, 8, 4, 2, 1; the total is lane 0 (ops_lanes_*).
 *   A GPU's 32 invocations compute the same, so the order does not depend on the device. */

/* e^x in float: the double value T[k % 32] 2^(k / 32) (1 + r (1 + r (1/2 + r (1/6 + r (1/24 +
 * r / 120))))) with k = round(x 32 / ln 2), r = x - k ln2 / 32 in two steps, rounded once to
 * float; 0 where that is below FLT_MIN (the contract flushes: some GPUs cannot keep subnormals),
 * +inf from 88.72283935546875 on, NaN for NaN. Within one ulp of e^x (correctly rounded nearly
 * always). */
float ops_exp(float x);

/* ln x in float: the double value e ln2 + ln(1 + j/32) + log1p(r) with x = m 2^e (m in [1, 2)),
 * j = m's top 5 fraction bits, r = m (1 / (1 + j/32)) - 1 in [0, 2^-5) and log1p(r) a degree-8
 * polynomial in r, rounded once to float; -inf for 0 and the subnormals (the contract flushes
 * them), NaN below 0 and for NaN, +inf for +inf; ln 1 = 0 exactly. Only double +, - and * (the
 * tables hold 1 / (1 + j/32)): what a Vulkan device rounds alike (contract.glsl's log_c). Within
 * one ulp of ln x. For DeltaNet's softplus. */
float ops_log(float x);

/* The contract's 32-lane double sum (see above): clear, add the elements in order, total. */
struct ops_lanes {
    double lane[32];
    int64_t n;
};
void ops_lanes_clear(struct ops_lanes *s);
void ops_lanes_add(struct ops_lanes *s, double v);
double ops_lanes_total(struct ops_lanes *s); /* destroys the lanes */

/* y = x / rms(x) * w over n elements (w may be NULL: no weight). y may alias x. The sum of
 * squares (each x*x rounded to float) goes over the contract's lanes; mean = (float)(sum *
 * (1.0 / n)), scale = 1.0f / sqrtf(mean + eps). */
void ops_rms_norm(float *y, const float *x, const float *w, int64_t n, float eps);

/* In-place softmax of x[n]; returns nothing. Entries of -INFINITY get probability 0. The
 * denominator is the contract's lane sum of the float exponentials; the probabilities are
 * x * (1.0f / (float)sum). */
void ops_softmax(float *x, int64_t n);

/* ops_softmax with one more logit, sink, that has no entry (ggml's soft_max with sinks: the
 * maximum and the denominator include it, so x sums to less than 1). sink = -INFINITY is
 * ops_softmax, bit for bit. */
void ops_softmax_sink(float *x, int64_t n, float sink);

/* The index of the largest of x[0..n) (the first of equals): the greedy token of a row of logits. */
int32_t ops_argmax(const float *x, int64_t n);

/* y[i] += b[i] over n elements (a bias after a product). */
void ops_add(float *restrict y, const float *restrict b, int64_t n);

/* y[i] = silu(g[i]) * u[i]. y may alias g or u. */
void ops_swiglu(float *y, const float *g, const float *u, int64_t n);

/* y[i] = gpt-oss's clamped SwiGLU (ggml's swiglu_oai with alpha 1.702, limit 7):
 * g' = min(g, 7), y = g' / (1 + exp(-1.702 g')) * (clamp(u, -7, 7) + 1). y may alias g or u. */
void ops_swiglu_oai(float *y, const float *g, const float *u, int64_t n);

/* y[i] = gelu(x[i]), and y[i] = gelu(g[i]) * u[i] (GeGLU), gelu as ggml's CPU backend computes it
 * by default (GGML_GELU_FP16): the tanh approximation of the input rounded to f16, rounded to f16;
 * 0 at or below -10, the input at or above 10. y may alias the inputs. */
void ops_gelu(float *y, const float *x, int64_t n);
void ops_geglu(float *y, const float *g, const float *u, int64_t n);

/* table[h] = the f16 gelu of the f16 value h (bits), for each of the 65,536: what ops_gelu
 * returns for an input strictly between -10 and 10 that rounds to h. The GPU's GeGLU reads it
 * (the formula's tanhf is the C library's; the table carries its bits). */
void ops_gelu_f16_table(uint16_t *table);

/* RoPE's frequencies for n_rot dimensions, with ggml's linear and YaRN scaling: theta_i =
 * pos * base^(-2i/n_rot) (extrapolated), freq_scale * that (interpolated); YaRN (ext_factor > 0)
 * blends the two by a ramp between the correction dims corr[0] and corr[1] and multiplies cos
 * and sin by attn_factor * (1 + 0.1 ln(1 / freq_scale)); otherwise by attn_factor. */
struct ops_rope {
    int32_t n_rot;
    float freq_base;
    float freq_scale;  /* 1: no scaling */
    float ext_factor;  /* 0: no YaRN */
    float attn_factor;
    float corr[2];     /* ggml_rope_yarn_corr_dims */
};

/* The table of rope for a context trained to n_ctx_orig with YaRN's beta_fast / beta_slow (ggml's
 * 32 and 1); with freq_scale 1, ext_factor 0 and attn_factor 1 it is plain RoPE. */
struct ops_rope ops_rope_init(int32_t n_rot, float freq_base, float freq_scale, float ext_factor,
                              float attn_factor, int32_t n_ctx_orig, float beta_fast,
                              float beta_slow);

/* Precomputes the rotation table of position pos: cs[2i] = cos, cs[2i+1] = sin of pair i's angle
 * (scaled as r says), as ggml computes them (theta multiplied step by step in float). */
void ops_rope_cache(float *cs, int32_t pos, const struct ops_rope *r);

/* ops_rope_cache with ggml's freq_factors: pair i's angle divided by ff[i] (ff: [n_rot / 2], or
 * NULL for ops_rope_cache's table). Gemma 4's global layers rotate only their first pairs this way
 * (the rest have factor 1e30: angle 0). */
void ops_rope_cache_ff(float *cs, int32_t pos, const struct ops_rope *r, const float *ff);

/* Rotates one head x[head_dim] in place with the table cs: neox pairs (i, i + n_rot/2) or normal
 * pairs (2i, 2i+1); dimensions from n_rot on are left alone. */
void ops_rope_neox(float *x, const float *cs, int32_t n_rot);
void ops_rope_norm(float *x, const float *cs, int32_t n_rot);

/* y[i] += a * x[i] over n elements, x in f32 or IEEE half (bits); a multiply then an add per
 * element (no fused multiply-add), so every ISA gives the same bits. */
void ops_axpy_f32(float *restrict y, float a, const float *restrict x, int64_t n);
void ops_axpy_f16(float *restrict y, float a, const uint16_t *restrict x, int64_t n);

/* The f32 dot product as ggml's AVX2+FMA build computes it (ggml_vec_dot_f32): 32-element steps
 * into four 8-lane accumulators by fused multiply-adds, the accumulators added 0+2, 1+3, then 0+1,
 * the 8 lanes as lo+hi then two horizontal adds, the tail (n % 32) added in float. The portable
 * twin gives the same bits (fmaf, the same order). For a recurrence that carries every rounding
 * forward (block_deltanet.c). */
float ops_dot_f32(const float *x, const float *y, int64_t n);

/* y[i] = fma(x[i], a, y[i]) over the 32-element steps, y[i] += x[i] * a for the tail: ggml's
 * ggml_vec_mad_f32 on AVX2+FMA, with a portable twin of the same bits. */
void ops_mad_f32(float *restrict y, const float *restrict x, float a, int64_t n);

/* Both twins, for the test that pins them to each other. */
float ops_dot_f32_ref(const float *x, const float *y, int64_t n);
void ops_mad_f32_ref(float *restrict y, const float *restrict x, float a, int64_t n);

#endif
