// attn_scores_f16.comp - scores over an F16 cache against the query rounded to halves as it is read.
// K rows 8-byte aligned (gpu_attn.c checks): four halves a load, each converted exactly.
#version 450
#include "common.glsl"
#include "attn.glsl"


#define FLOAT_DOT
vec4 k4_at(uint64_t row, uint m) {
    uvec2 w = U32x2s(row).v[m];
    return vec4(fp16_to_f32(w.x & 0xffffu), fp16_to_f32(w.x >> 16), fp16_to_f32(w.y & 0xffffu),
                fp16_to_f32(w.y >> 16));
}
float k_at(uint64_t row, uint i) { return fp16_to_f32(uint(U16s(row).v[i])); }
// the query read as floats and rounded to halves (quant_f16_from_f32), as the CPU's F16 dot takes it
float q_at(uint64_t row, uint i) { return fp16_to_f32(f32_to_fp16(F32s(row).v[i])); }
uint64_t query_row(uint t, uint h) { return attn_q(t, h); }

#include "attn_scores.glsl"
