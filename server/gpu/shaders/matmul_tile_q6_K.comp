// matmul_tile_q6_K.comp - Q6_K's product (blocks_q6_K.glsl's lanes) on matmul_tile.glsl: prefill
// and the experts' grouped pairs.
#version 450
#include "common.glsl"
#include "blocks_q6_K.glsl"
#include "matmul_tile.glsl"
