// geglu.comp - y row r = gelu(g row r) * u row r elementwise: ops_geglu bit for bit. gelu is
// ggml's f16 one: 0 at or below -10, g at or above 10, otherwise the entry of g rounded to f16 in
// a table of 65,536 halves that the host filled with the CPU's own formula (ops_gelu_f16_table:
// its tanhf is the C library's, which no kernel can promise to match) and uploaded once. y may be
// g or u (an invocation reads its elements before writing). Rows on y and z, a row's elements on x.
#version 450
#include "common.glsl"
#include "rowops.glsl"

layout(push_constant) uniform Push {
    uint64_t y;        // rows of n floats, y_stride floats apart
    uint64_t g;        // rows of n floats, g_stride floats apart
    uint64_t u;        // rows of n floats, u_stride floats apart
    uint64_t table;    // [65536] halves: gelu of each f16 value
    uint y_stride;
    uint g_stride;
    uint u_stride;
    uint n;
    uint n_rows;
} p;

void main() {
    uint r = grid_row(), i = grid_col();
    if (r >= p.n_rows || i >= p.n)
        return;
    float g = F32s(p.g + uint64_t(r) * p.g_stride * 4u).v[i];
    float u = F32s(p.u + uint64_t(r) * p.u_stride * 4u).v[i];
    float gl = g <= -10.0 ? 0.0 : g >= 10.0 ? g : load_f16(p.table, uint64_t(f32_to_fp16(g)) * 2u);
    precise float out_ = gl * u;
    F32s(p.y + uint64_t(r) * p.y_stride * 4u).v[i] = out_;
}
