// quantize_q8_K.comp - rows of floats -> the engine's Q8_K activation blocks (quantize_q8_K.glsl),
// a workgroup of 64 per block (gpu_ops.c: quantize_per_group).
#version 450
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;        // f32 rows, x_stride floats apart
    uint64_t dst;      // activation rows, dst_stride bytes apart
    uint x_stride;
    uint dst_stride;
    uint n_blocks;     // blocks per row
    uint n_rows;
} p;

#define Q8K_SLOTS 1u
#include "quantize_q8_K.glsl"

void main() {
    uint b = gl_WorkGroupID.x, row = gl_WorkGroupID.y;
    if (b >= p.n_blocks || row >= p.n_rows) // the whole workgroup leaves together
        return;
    F32s x = F32s(p.x + (uint64_t(row) * p.x_stride + uint64_t(b) * 256u) * 4u);
    q8K_block(x, p.dst + uint64_t(row) * p.dst_stride + uint64_t(b) * 320u,
              gl_LocalInvocationID.x, 0u, true);
}
