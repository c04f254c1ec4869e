// matmul_q3_K.comp - Q3_K's product (blocks_q3_K.glsl's terms) on matmul_split.glsl: decode.
#version 450
#include "common.glsl"
#include "blocks_q3_K.glsl"
#include "matmul_split.glsl"
