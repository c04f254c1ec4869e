// attn_vsum_f32.comp - the weighted sum of F32 V rows (attn_vsum.glsl).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"

layout(buffer_reference, std430, buffer_reference_align = 16) buffer F32x4s { vec4 v[]; };

#define V4_AT
uvec4 v4_raw(uint64_t row, uint m) { return floatBitsToUint(F32x4s(row).v[m]); }
vec4 v4_of(uvec4 w) { return uintBitsToFloat(w); }

#include "attn_vsum.glsl"
