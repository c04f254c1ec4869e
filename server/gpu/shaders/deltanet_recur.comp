// deltanet_recur.comp - the Gated DeltaNet recurrence of one sequence's consecutive tokens, an
// invocation per row j of a V head's state over the tokens in order (deltanet_head_token): row j
// decays, delta = (v[j] - dot(row, k)) beta, row += k delta, o[j] = dot(row, q) scale, over v[j].
// A row's arithmetic reads only the row, the token's q and k and its own v[j], so the rows run
// side by side with no barrier; the dot products and the update are ggml's AVX2 FMA order
// (ops_dot_f32, ops_mad_f32), each decay and update fused into the dot product that follows it.
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "deltanet.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t S;        // the layer's state: [n_hv][d][d], row j of head h at (h d + j) d
    uint64_t conv;     // token t's q heads, k heads, v heads at conv + t conv_stride floats
    uint64_t gate;     // [n_tok][n_hv] decay exponents
    uint64_t beta;     // [n_tok][n_hv]
    uint conv_stride;
    uint n_tok;
    uint n_hk;
    uint n_hv;
    uint d;
    float scale;
} p;

void main() {
    uint h = gl_WorkGroupID.x, j = gl_WorkGroupID.y * 64u + gl_LocalInvocationID.x;
    uint d = p.d;
    if (j >= d)
        return;
    uint kh = h % p.n_hk, np = d & ~31u;
    F32s R = F32s(p.S + (uint64_t(h) * d + j) * d * 4u);
    float s[32];
    for (uint t = 0u; t < p.n_tok; t++) {
        uint64_t c = p.conv + uint64_t(t) * p.conv_stride * 4u;
        F32s Q = F32s(c + uint64_t(kh) * d * 4u), K = F32s(c + uint64_t(p.n_hk + kh) * d * 4u);
        F32s V = F32s(c + uint64_t(2u * p.n_hk * d + h * d) * 4u);
        float decay = exp_c(F32s(p.gate).v[t * p.n_hv + h]);
        float b = F32s(p.beta).v[t * p.n_hv + h];
        for (uint l = 0u; l < 32u; l++)
            s[l] = 0.0;
        for (uint i = 0u; i < np; i += 32u)
            for (uint l = 0u; l < 32u; l++) {
                precise float y = R.v[i + l] * decay;
                R.v[i + l] = y;
                s[l] = fma_rn(y, K.v[i + l], s[l]);
            }
        for (uint i = np; i < d; i++) {
            precise float y = R.v[i] * decay;
            R.v[i] = y;
        }
        precise float dv = V.v[j] - dot_ggml_fold(s, R, K, np, d);
        precise float delta = dv * b;
        for (uint l = 0u; l < 32u; l++)
            s[l] = 0.0;
        for (uint i = 0u; i < np; i += 32u)
            for (uint l = 0u; l < 32u; l++) {
                float y = fma_rn(K.v[i + l], delta, R.v[i + l]);
                R.v[i + l] = y;
                s[l] = fma_rn(y, Q.v[i + l], s[l]);
            }
        for (uint i = np; i < d; i++) {
            precise float m = K.v[i] * delta;
            precise float y = R.v[i] + m;
            R.v[i] = y;
        }
        precise float o = dot_ggml_fold(s, R, Q, np, d) * p.scale;
        V.v[j] = o;
    }
}
