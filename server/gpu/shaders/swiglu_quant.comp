// swiglu_quant.comp - swiglu.comp by rows, each row then quantized for the down product
// (quantize_tail.glsl): one workgroup of 256 per row, rows on x spilling onto z. y, g and u rows
// are stride floats apart; y may be g or u. A row of up to ROW_REG * 256 elements (a decode
// step's experts: a workgroup each) is loaded in one round trip, its y kept in shared memory for
// the quantizer; a wider one takes the loop over memory. The loop of swiglu_c is not [[unroll]]:
// glslc's unroller drops the copies' precise (lavapipe then rounded exp_c's steps otherwise).
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "contract.glsl"
#include "swiglu.glsl"

layout(local_size_x = 256) in;

#include "row_held.glsl"         // row_s: the row's y, read by quantize_tail_row

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
    if (p.n > ROW_FAST) {
        for (uint i = l; i < p.n; i += 256u)
            y.v[i] = swiglu_c(g.v[i], u.v[i], p.oai != 0u);
        quantize_tail(p.y + off, p.n, p.qfmt, p.qdst + uint64_t(row) * p.q_stride, l);
        return;
    }
    float gv[ROW_REG], uv[ROW_REG];
    [[unroll]] for (uint j = 0u; j < ROW_REG; j++) { // unconditional: in flight together (the
        uint i = min(l + 256u * j, p.n - 1u);        // row's last past its end, unused)
        gv[j] = g.v[i];
        uv[j] = u.v[i];
    }
    for (uint j = 0u; j < ROW_REG; j++) {
        uint i = l + 256u * j;
        if (i < p.n) {
            float v = swiglu_c(gv[j], uv[j], p.oai != 0u);
            y.v[i] = v;
            row_s[i] = v;
        }
    }
    quantize_tail_row(p.y + off, p.n, p.qfmt, p.qdst + uint64_t(row) * p.q_stride, l);
}
