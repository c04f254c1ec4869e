// quantize_f32.comp - rows of floats copied as they are (quant_f32_from_f32), the activations of
// F32 weights, into rows dst_stride bytes apart. One invocation per element.
#version 450
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;
    uint64_t dst;
    uint x_stride;
    uint dst_stride;
    uint n;
    uint n_rows;
} p;

void main() {
    uint i = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
    if (i >= p.n || row >= p.n_rows)
        return;
    float v = F32s(p.x + (uint64_t(row) * p.x_stride + i) * 4u).v[0];
    F32s(p.dst + uint64_t(row) * p.dst_stride + uint64_t(i) * 4u).v[0] = v;
}
