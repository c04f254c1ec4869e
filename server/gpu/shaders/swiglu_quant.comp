// swiglu_quant.comp - swiglu.comp by rows, each row then quantized for the down product
// (quantize_tail.glsl): one workgroup of 256 per row, rows on x spilling onto z. y, g and u rows
// are stride floats apart; y may be g or u.
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "swiglu.glsl"
#include "quantize_tail.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint64_t y;
    uint64_t g;
    uint64_t u;
    uint64_t qdst;     // the rows quantized (qfmt), q_stride bytes apart
    uint stride;
    uint n;
    uint n_rows;
    uint oai;
    uint qfmt;
    uint q_stride;
} p;

void main() {
    uint l = gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n_rows) // the whole workgroup leaves together
        return;
    uint64_t off = uint64_t(row) * p.stride * 4u;
    F32s y = F32s(p.y + off), g = F32s(p.g + off), u = F32s(p.u + off);
    for (uint i = l; i < p.n; i += 256u)
        y.v[i] = swiglu_c(g.v[i], u.v[i], p.oai != 0u);
    quantize_tail(p.y + off, p.n, p.qfmt, p.qdst + uint64_t(row) * p.q_stride, l);
}
