// quantize_q8_0.comp - rows of floats -> Q8_0 activation blocks, bit for bit common/quant.c's
// quant_q8_0_from_f32: amax of the block, d = amax / 127 stored as half, codes =
// round-half-even(x * (127 / amax)), zero for an all-zero block. One invocation per block.
#version 450
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;        // f32 rows, x_stride floats apart
    uint64_t dst;      // Q8_0 rows, dst_stride bytes apart
    uint x_stride;
    uint dst_stride;
    uint n_blocks;     // blocks per row
    uint n_rows;
} p;

void main() {
    uint b = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
    if (b >= p.n_blocks || row >= p.n_rows)
        return;
    F32s x = F32s(p.x + (uint64_t(row) * p.x_stride + uint64_t(b) * 32u) * 4u);
    uint64_t blk = p.dst + uint64_t(row) * p.dst_stride + uint64_t(b) * 34u;
    float amax = 0.0;
    for (int j = 0; j < 32; j++)
        amax = abs(x.v[j]) > amax ? abs(x.v[j]) : amax;
    float id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
    U16s(blk).v[0] = uint16_t(f32_to_fp16(div_rn(amax, 127.0)));
    I8s q = I8s(blk + 2u);
    for (int j = 0; j < 32; j++) {
        precise float v = x.v[j] * id;
        q.v[j] = int8_t(clamp(int(roundEven(v)), -128, 127));
    }
}
