// matmul_q6_K.comp - Q6_K's product (blocks_q6_K.glsl's lanes) on matmul_split.glsl: decode.
#version 450
#include "common.glsl"
#include "blocks_q6_K.glsl"
#include "matmul_split.glsl"
