// moe_sum.comp - the routed experts' weighted sum in block_moe.c's order, per token t and element
// i: y = d[t k][i] * w[t k], then y + d[t k + s][i] * w[t k + s] for s = 1 .. k - 1 (each product
// rounded before its sum), then with a shared expert y + shexp[t][i] * (1 / (1 + e^-gate[t])).
// Tokens on y and z, a row's elements on x.
#version 450
#include "common.glsl"
#include "rowops.glsl"

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
    uint64_t r0 = uint64_t(t) * p.k;
    precise float y = f32_at(p.d, r0 * p.n + i) * f32_at(p.w, r0);
    for (uint s = 1u; s < p.k; s++) {
        precise float acc = y + f32_at(p.d, (r0 + s) * p.n + i) * f32_at(p.w, r0 + s);
        y = acc;
    }
    if (p.shexp != 0ul) {
        float g = sigmoid_c(f32_at(p.shexp_gate, t));
        precise float acc = y + f32_at(p.shexp, uint64_t(t) * p.n + i) * g;
        y = acc;
    }
    F32s(p.y + (uint64_t(t) * p.n + i) * 4ul).v[0] = y;
}
