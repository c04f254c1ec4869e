// attn_query_q8_0.comp - each head's query as Q8_0 blocks (quant_q8_0_from_f32, through
// quantize_q8.glsl), what a Q8_0 or Q4_0 cache's scores take. A workgroup per (head, token), an
// invocation per block.
#version 450
#include "common.glsl"
#include "attn.glsl"
#include "quantize_q8.glsl"

layout(local_size_x = 16) in; // head_dim <= 512 (gpu_attn.c)

void main() {
    uint b = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    if (b >= p.head_dim / 32u)
        return;
    q8_0_block(F32s(attn_q(t, h) + uint64_t(b) * 128u), attn_qrow(t, h) + uint64_t(b) * 34u);
}
