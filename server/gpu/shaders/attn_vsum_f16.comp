// attn_vsum_f16.comp - the weighted sum of F16 V rows, each element converted exactly
// (attn_vsum.glsl; the probabilities come rounded to halves from attn_softmax_f16).
#version 450
#include "common.glsl"
#include "attn.glsl"

float v_at(uint64_t row, uint d) { return fp16_to_f32(uint(U16s(row).v[d])); }

#include "attn_vsum.glsl"
