// attn_query_f16.comp - each head's query as IEEE halves (quant_f16_from_f32), what an F16
// cache's scores take. A workgroup per (head, token).
#version 450
#include "common.glsl"
#include "attn.glsl"

layout(local_size_x = 64) in;

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    F32s x = F32s(attn_q(t, h));
    U16s dst = U16s(attn_qrow(t, h));
    for (uint i = gl_LocalInvocationID.x; i < p.head_dim; i += 64u)
        dst.v[i] = uint16_t(f32_to_fp16(x.v[i]));
}
