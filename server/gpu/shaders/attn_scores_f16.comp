// attn_scores_f16.comp - scores over an F16 cache against the query in halves (attn_query_f16).
#version 450
#include "common.glsl"
#include "attn.glsl"

#define FLOAT_DOT
float k_at(uint64_t row, uint i) { return fp16_to_f32(uint(U16s(row).v[i])); }
float q_at(uint64_t row, uint i) { return fp16_to_f32(uint(U16s(row).v[i])); }
uint64_t query_row(uint t, uint h) { return attn_qrow(t, h); }

#include "attn_scores.glsl"
