// swiglu.comp - y[i] = swiglu_c(g[i], u[i]) over n (swiglu.glsl). y may be g or u (an invocation
// reads its element before writing it). Flat: elements on x, spilling onto y.
#version 450
#include "common.glsl"
#include "rowops.glsl"
#include "swiglu.glsl"

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
    F32s(p.y).v[i] = swiglu_c(F32s(p.g).v[i], F32s(p.u).v[i], p.oai != 0u);
}
