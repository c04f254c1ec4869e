// matmul_tile_q8_0.comp - Q8_0's product (blocks_q8_0.glsl's terms) on matmul_tile.glsl: prefill
// and the experts' grouped pairs.
#version 450
#include "common.glsl"
#include "blocks_q8_0.glsl"
#include "matmul_tile.glsl"
