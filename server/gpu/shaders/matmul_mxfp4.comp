// matmul_mxfp4.comp - MXFP4's product (blocks_mxfp4.glsl's terms) on matmul_blocks.glsl: decode.
#version 450
#include "common.glsl"
#include "blocks_mxfp4.glsl"
#include "matmul_blocks.glsl"
