// moe_sum.comp - the routed experts' weighted sum in block_moe.c's order (moe_sum.glsl) into y.
// Tokens on y and z, a row's elements on x.
#version 450
#include "common.glsl"
#include "rowops.glsl"
#include "moe_sum.glsl"

layout(push_constant) uniform Push {
    uint64_t y;          // n_tok rows of n floats
    uint64_t d;          // n_tok k rows of n floats: the experts' outputs, in selection order
    uint64_t w;          // n_tok k floats: their weights
    uint64_t shexp;      // n_tok rows of n floats, or 0: no shared expert
    uint64_t shexp_gate; // n_tok floats: the shared expert's gate logits
    uint k;
    uint n;
    uint n_tok;
} p;

void main() {
    uint t = grid_row(), i = grid_col();
    if (t >= p.n_tok || i >= p.n)
        return;
    float y = moe_sum_at(p.d, p.w, p.k, p.n, p.shexp, p.shexp_gate, t, i);
    F32s(p.y + (uint64_t(t) * p.n + i) * 4ul).v[0] = y;
}
