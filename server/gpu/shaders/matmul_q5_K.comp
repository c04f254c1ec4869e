// matmul_q5_K.comp - Q5_K's product (blocks_q5_K.glsl's lanes) on matmul_split.glsl: decode.
#version 450
#include "common.glsl"
#include "blocks_q5_K.glsl"
#include "matmul_split.glsl"
