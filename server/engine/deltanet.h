/* deltanet.h - the Gated DeltaNet mixer's steps on plain arrays (deltanet.c): what block_deltanet.c
 * runs, and what the GPU's kernels (server/gpu/gpu_deltanet.c) are compared with bit for bit.
 * Each is written in the row ops' contract (ops.h): exp is ops_exp, log ops_log,
 * float operations one at a time, the L2 norm's sum over the contract's 32 lanes, the recurrence's
 * dot products and updates ggml's AVX2 FMA order (ops_dot_f32 / ops_mad_f32). */
#ifndef SNIPER_DELTANET_H
#define SNIPER_DELTANET_H

#include <stdint.h>

/* In place over n_tok tokens of n_head V heads ([n_tok][n_head] each): beta = sigmoid(beta),
 * gate = softplus(gate + dt_bias[h]) * a[h], softplus(x) = x above 20, else ops_log(1 +
 * ops_exp(x)). */
void deltanet_gates(float *beta, float *gate, const float *dt_bias, const float *a, int32_t n_tok,
                    int32_t n_head);

/* The causal depthwise conv of one sequence's n_tok consecutive rows (rows: [n_tok][n_ch]) with
 * kernel w ([n_ch][d_conv]) and state (the d_conv - 1 rows before them, [d_conv - 1][n_ch]):
 * out[t][ch] = silu(sum over j < d_conv of window row j's ch * w[ch][j], multiply then add in
 * j's order), window = the d_conv - 1 rows before row t, then row t. The state becomes the last
 * d_conv - 1 rows of (state, rows). d_conv <= 16; out does not alias rows or state. */
void deltanet_conv(const float *rows, float *state, const float *w, float *out, int32_t n_tok,
                   int32_t n_ch, int32_t d_conv);

/* x / max(||x||, eps) in place over n floats, the sum of squares in double over the contract's
 * lanes (ggml's l2_norm), the scale 1.0f / fmaxf(sqrtf(sum), eps). */
void deltanet_l2_norm(float *x, int32_t n, float eps);

/* One token of one V head: S ([d][d], row j is the state's column j) = decay S; delta[j] =
 * (v[j] - dot(S row j, k)) * b; S row j += k delta[j] (ops_mad_f32); o[j] = dot(S row j, q) *
 * scale, over o = v (v is read whole before o is written). delta: d floats of scratch. */
void deltanet_head_token(float *S, const float *q, const float *k, float *v, float decay, float b,
                         float *delta, int32_t d, float scale);

/* One head's gated RMSNorm in place: o = ops_rms_norm(o) * w, then o[j] * silu(z[j]). */
void deltanet_gated_norm(float *o, const float *z, const float *w, int32_t d, float eps);

#endif
