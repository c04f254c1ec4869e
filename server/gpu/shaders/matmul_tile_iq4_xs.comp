// matmul_tile_iq4_xs.comp - IQ4_XS's product (blocks_iq4_xs.glsl's terms) on matmul_tile.glsl: prefill
// and the experts' grouped pairs.
#version 450
#include "common.glsl"
#include "blocks_iq4_xs.glsl"
#define TILE_SPLIT_PARTS 8u
#include "matmul_tile.glsl"
