// attn_softmax_f16.comp - the attention's softmax with sinks (attn_softmax.glsl), each probability
// rounded to a half: what an F16 cache's weighted sum takes.
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"
#define ROUND_F16
#include "attn_softmax.glsl"
