// deltanet_conv.comp - the causal depthwise conv of one sequence's consecutive tokens with its conv
// state, an invocation per channel over the tokens in order (deltanet_conv): out = silu(sum over
// the window of row * weight, multiply then add in order), then the state becomes the last
// d_conv - 1 rows of (state, rows).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "deltanet.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t rows;     // [n_tok] rows of n_ch, row_stride floats apart
    uint64_t state;    // [d_conv - 1][n_ch]
    uint64_t w;        // [n_ch][d_conv]
    uint64_t out_;     // [n_tok] rows of n_ch, out_stride floats apart
    uint row_stride;
    uint out_stride;
    uint n_ch;
    uint d_conv;
    uint n_tok;
} p;

// Row r of (state, rows), channel ch: r < d_conv - 1 is the state's.
float window(uint r, uint ch) {
    uint ks = p.d_conv - 1u;
    return r < ks ? F32s(p.state).v[r * p.n_ch + ch] : F32s(p.rows).v[(r - ks) * p.row_stride + ch];
}

void main() {
    uint ch = gl_GlobalInvocationID.x;
    if (ch >= p.n_ch)
        return;
    F32s w = F32s(p.w), out_ = F32s(p.out_);
    for (uint t = 0u; t < p.n_tok; t++) {
        precise float sum = 0.0;
        for (uint j = 0u; j < p.d_conv; j++) {
            precise float m = window(t + j, ch) * w.v[ch * p.d_conv + j];
            precise float s = sum + m;
            sum = s;
        }
        out_.v[t * p.out_stride + ch] = silu_c(sum);
    }
    for (uint i = 0u; i + 1u < p.d_conv; i++) // reads never overwritten: t + i > i
        F32s(p.state).v[i * p.n_ch + ch] = window(p.n_tok + i, ch);
}
