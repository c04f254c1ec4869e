// attn_scores_q8_0.comp - scores over a Q8_0 cache against the query in Q8_0 (attn_query_q8_0).
#version 450
#include "common.glsl"
#include "attn.glsl"
#include "blocks_q8_0.glsl"

uint64_t query_row(uint t, uint h) { return attn_qrow(t, h); }

#include "attn_scores.glsl"
