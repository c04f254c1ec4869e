// attn_vsum_f32.comp - the weighted sum of F32 V rows (attn_vsum.glsl).
#version 450
#include "common.glsl"
#include "attn.glsl"

float v_at(uint64_t row, uint d) { return F32s(row).v[d]; }

#include "attn_vsum.glsl"
