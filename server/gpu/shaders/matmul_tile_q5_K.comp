// matmul_tile_q5_K.comp - Q5_K's product (blocks_q5_K.glsl's lanes) on matmul_tile.glsl: prefill
// and the experts' grouped pairs.
#version 450
#include "common.glsl"
#include "blocks_q5_K.glsl"
#include "matmul_tile.glsl"
