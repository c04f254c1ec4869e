// matmul_tile_q4_K.comp - Q4_K's product (blocks_q4_K.glsl's lanes) on matmul_tile.glsl: prefill
// and the experts' grouped pairs.
#version 450
#include "common.glsl"
#include "blocks_q4_K.glsl"
#include "matmul_tile.glsl"
