// quantize_f16.comp - rows of floats -> IEEE halves rounded to nearest even (quant_f16_from_f32),
// the activations of F16 weights. One invocation per element.
#version 450
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;        // f32 rows, x_stride floats apart
    uint64_t dst;      // f16 rows, dst_stride bytes apart
    uint x_stride;
    uint dst_stride;
    uint n;            // elements per row
    uint n_rows;
} p;

void main() {
    uint i = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
    if (i >= p.n || row >= p.n_rows)
        return;
    float v = F32s(p.x + (uint64_t(row) * p.x_stride + i) * 4u).v[0];
    U16s(p.dst + uint64_t(row) * p.dst_stride + uint64_t(i) * 2u).v[0] = uint16_t(f32_to_fp16(v));
}
