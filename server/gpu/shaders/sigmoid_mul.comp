// sigmoid_mul.comp - y row r = y row r * (1 / (1 + e^-g)) elementwise: block_attn.c's output gate,
// bit for bit. Rows on y and z, a row's elements on x.
#version 450
#include "common.glsl"
#include "rowops.glsl"

layout(push_constant) uniform Push {
    uint64_t y;        // rows of n floats, y_stride floats apart
    uint64_t g;        // rows of n floats, g_stride floats apart
    uint y_stride;
    uint g_stride;
    uint n;
    uint n_rows;
} p;

void main() {
    uint r = grid_row(), i = grid_col();
    if (r >= p.n_rows || i >= p.n)
        return;
    F32s y = F32s(p.y + uint64_t(r) * p.y_stride * 4u);
    precise float s = y.v[i] * sigmoid_c(F32s(p.g + uint64_t(r) * p.g_stride * 4u).v[i]);
    y.v[i] = s;
}
