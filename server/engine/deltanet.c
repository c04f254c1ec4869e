/* deltanet.c - the Gated DeltaNet mixer's steps on plain arrays (deltanet.h), in the row ops'
 * contract: what block_deltanet.c runs per token and head, and what the GPU's kernels are compared
 * with. */
#include "deltanet.h"

#include <math.h>
#include <string.h>

#include "ops.h"

static float sigmoid(float x) { return 1.0f / (1.0f + ops_exp(-x)); }
static float silu(float x) { return x / (1.0f + ops_exp(-x)); }
static float softplus(float x) { return x > 20.0f ? x : ops_log(1.0f + ops_exp(x)); }

void deltanet_gates(float *beta, float *gate, const float *dt_bias, const float *a, int32_t n_tok,
                    int32_t n_head) {
    for (int32_t t = 0; t < n_tok; t++)
        for (int32_t h = 0; h < n_head; h++) {
            const size_t i = (size_t)t * n_head + h;
            beta[i] = sigmoid(beta[i]);
            gate[i] = softplus(gate[i] + dt_bias[h]) * a[h];
        }
}

void deltanet_conv(const float *rows, float *state, const float *w, float *out, int32_t n_tok,
                   int32_t n_ch, int32_t d_conv) {
    const int32_t C = n_ch, K = d_conv;
    const float *win[16];
    for (int32_t t = 0; t < n_tok; t++) {
        for (int32_t j = 0; j < K; j++) { /* row r of the segment; r < 0: the state's */
            const int32_t r = t - (K - 1) + j;
            win[j] = r >= 0 ? rows + (size_t)r * C : state + (size_t)(r + K - 1) * C;
        }
        float *o = out + (size_t)t * C;
        for (int32_t ch = 0; ch < C; ch++) {
            float sum = 0.0f;
            for (int32_t j = 0; j < K; j++)
                sum += win[j][ch] * w[(size_t)ch * K + j];
            o[ch] = silu(sum);
        }
    }
    /* row n + i of (state, segment) becomes the state's row i; reads are never overwritten */
    for (int32_t i = 0; i < K - 1; i++) {
        const int32_t q = n_tok + i;
        const float *src = q < K - 1 ? state + (size_t)q * C : rows + (size_t)(q - (K - 1)) * C;
        memcpy(state + (size_t)i * C, src, (size_t)C * sizeof(float));
    }
}

void deltanet_l2_norm(float *x, int32_t n, float eps) {
    struct ops_lanes s;
    ops_lanes_clear(&s);
    for (int32_t i = 0; i < n; i++)
        ops_lanes_add(&s, (double)(x[i] * x[i]));
    const float scale = 1.0f / fmaxf(sqrtf((float)ops_lanes_total(&s)), eps);
    for (int32_t i = 0; i < n; i++)
        x[i] *= scale;
}

void deltanet_head_token(float *S, const float *q, const float *k, float *v, float decay, float b,
                         float *delta, int32_t d, float scale) {
    const int32_t D = d;
    float *o = v; /* v is read whole (delta) before o is written */
    for (size_t i = 0; i < (size_t)D * D; i++)
        S[i] *= decay;
    for (int32_t j = 0; j < D; j++)
        delta[j] = (v[j] - ops_dot_f32(S + (size_t)j * D, k, D)) * b;
    for (int32_t j = 0; j < D; j++)
        ops_mad_f32(S + (size_t)j * D, k, delta[j], D);
    for (int32_t j = 0; j < D; j++)
        o[j] = ops_dot_f32(S + (size_t)j * D, q, D) * scale;
}

void deltanet_gated_norm(float *o, const float *z, const float *w, int32_t d, float eps) {
    ops_rms_norm(o, o, w, d, eps);
    for (int32_t j = 0; j < d; j++)
        o[j] = o[j] * silu(z[j]);
}
