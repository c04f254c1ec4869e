// attn_scores_f32.comp - scores over an F32 cache: the f32 query as is (attn_scores.glsl). K rows
// 16-byte aligned (gpu_attn.c checks).
#version 450
#include "common.glsl"
#include "attn.glsl"

layout(buffer_reference, std430, buffer_reference_align = 16) buffer F32x4s { vec4 v[]; };

#define FLOAT_DOT
vec4 k4_at(uint64_t row, uint m) { return F32x4s(row).v[m]; }
float k_at(uint64_t row, uint i) { return F32s(row).v[i]; }
float q_at(uint64_t row, uint i) { return F32s(row).v[i]; }
uint64_t query_row(uint t, uint h) { return attn_q(t, h); }

#include "attn_scores.glsl"
