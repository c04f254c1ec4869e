// attn_vsum_f16.comp - the weighted sum of F16 V rows, each element converted exactly
// (attn_vsum.glsl), the probabilities rounded to halves (attn_softmax.glsl's ROUND_F16).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"
#define ROUND_F16


#define V4_AT
uvec4 v4_raw(uint64_t row, uint m) {
    return uvec4(U32x2s(row).v[m], 0u, 0u);
}

vec4 v4_of(uvec4 w) {
    return vec4(fp16_to_f32(w.x & 0xffffu), fp16_to_f32(w.x >> 16), fp16_to_f32(w.y & 0xffffu),
                fp16_to_f32(w.y >> 16));
}

#include "attn_vsum.glsl"
