// matmul_q2_K.comp - Q2_K's product (blocks_q2_K.glsl's terms) on matmul_split.glsl: decode.
#version 450
#include "common.glsl"
#include "blocks_q2_K.glsl"
#include "matmul_split.glsl"
