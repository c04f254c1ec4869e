// add_rows.comp - y row r += b row k (ops_add): k = r (b_stride floats apart; 0: one row, a bias),
// or ids[r] when ids is not 0 (ggml's add_id: an expert's bias row). Rows on y and z, a row's
// elements on x.
#version 450
#include "common.glsl"
#include "rowops.glsl"

layout(push_constant) uniform Push {
    uint64_t y;        // rows of n floats, y_stride floats apart
    uint64_t b;        // rows of n floats, b_stride floats apart
    uint64_t ids;      // int32 per y row, or 0
    uint y_stride;
    uint b_stride;
    uint n;
    uint n_rows;
} p;

void main() {
    uint r = grid_row(), i = grid_col();
    if (r >= p.n_rows || i >= p.n)
        return;
    uint k = p.ids != 0ul ? U32s(p.ids).v[r] : r;
    F32s y = F32s(p.y + uint64_t(r) * p.y_stride * 4u);
    precise float s = y.v[i] + F32s(p.b + uint64_t(k) * p.b_stride * 4u).v[i];
    y.v[i] = s;
}
