// attn_softmax.comp - the attention's softmax with sinks (attn_softmax.glsl), probabilities in f32.
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"
#include "attn_softmax.glsl"
