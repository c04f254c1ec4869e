// matmul_tile_mxfp4.comp - MXFP4's product (blocks_mxfp4.glsl's terms) on matmul_tile.glsl: prefill
// and the experts' grouped pairs.
#version 450
#include "common.glsl"
#include "blocks_mxfp4.glsl"
#include "matmul_tile.glsl"
