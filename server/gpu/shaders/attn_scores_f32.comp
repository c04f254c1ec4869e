// attn_scores_f32.comp - scores over an F32 cache: the f32 query as is (attn_scores.glsl).
#version 450
#include "common.glsl"
#include "attn.glsl"

#define FLOAT_DOT
float k_at(uint64_t row, uint i) { return F32s(row).v[i]; }
float q_at(uint64_t row, uint i) { return F32s(row).v[i]; }
uint64_t query_row(uint t, uint h) { return attn_q(t, h); }

#include "attn_scores.glsl"
