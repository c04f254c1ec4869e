// attn_vsum_f16.comp - the weighted sum of F16 V rows, each element converted exactly
// (attn_vsum.glsl), the probabilities rounded to halves (attn_softmax.glsl's ROUND_F16).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"
#define ROUND_F16


#define V4_AT
vec4 v4_at(uint64_t row, uint m) {
    uvec2 w = U32x2s(row).v[m];
    return vec4(fp16_to_f32(w.x & 0xffffu), fp16_to_f32(w.x >> 16), fp16_to_f32(w.y & 0xffffu),
                fp16_to_f32(w.y >> 16));
}

#include "attn_vsum.glsl"
