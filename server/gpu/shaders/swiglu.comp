// swiglu.comp - y[i] = silu(g[i]) * u[i] over n: ops_swiglu (g / (1 + e^-g), times u) or, with
// oai, ops_swiglu_oai (gpt-oss: g clamped above at 7, u to [-7, 7], g / (1 + e^(1.702 * -g)) times
// (u + 1)), every step rounded as the CPU rounds it. y may be g or u (an invocation reads its
// element before writing it). Flat: elements on x, spilling onto y.
#version 450
#include "common.glsl"
#include "rowops.glsl"

layout(push_constant) uniform Push {
    uint64_t y;
    uint64_t g;
    uint64_t u;
    uint n;
    uint oai;
} p;

void main() {
    uint i = grid_flat();
    if (i >= p.n)
        return;
    float g = F32s(p.g).v[i], u = F32s(p.u).v[i];
    precise float out_;
    if (p.oai == 0u) {
        precise float den = 1.0 + exp_c(-g);
        out_ = div_rn(g, den) * u;
    } else {
        const float alpha = uintBitsToFloat(0x3fd9db23u), limit = 7.0; // 1.702f, as C rounds it
        float x = g < limit ? g : limit;
        float v = u < -limit ? -limit : u > limit ? limit : u;
        precise float ax = alpha * (-x);
        precise float den = 1.0 + exp_c(ax);
        out_ = div_rn(x, den) * (v + 1.0);
    }
    F32s(p.y).v[i] = out_;
}
