// scale_rows.comp - y row r = (x row r * f) * w elementwise, each product rounded as C rounds it:
// f is a (one factor for every row: a layer's output scale, gemma4's router input 1 / sqrt(n_embd))
// or, with ids, s[ids[r]] (an expert's output scale); w (0: none) a weight per element (the
// router's input scale). y may be x. Rows on y and z, a row's elements on x.
#version 450
#include "common.glsl"
#include "rowops.glsl"

layout(push_constant) uniform Push {
    uint64_t y;        // rows of n floats, y_stride floats apart
    uint64_t x;        // rows of n floats, x_stride floats apart
    uint64_t w;        // [n] floats, or 0
    uint64_t s;        // floats indexed by ids, or 0
    uint64_t ids;      // int32 per row, or 0
    uint y_stride;
    uint x_stride;
    uint n;
    uint n_rows;
    float a;
} p;

void main() {
    uint r = grid_row(), i = grid_col();
    if (r >= p.n_rows || i >= p.n)
        return;
    float f = p.ids != 0ul ? F32s(p.s).v[U32s(p.ids).v[r]] : p.a;
    precise float v = F32s(p.x + uint64_t(r) * p.x_stride * 4u).v[i] * f;
    if (p.w != 0ul) {
        precise float vw = v * F32s(p.w).v[i];
        v = vw;
    }
    F32s(p.y + uint64_t(r) * p.y_stride * 4u).v[i] = v;
}
