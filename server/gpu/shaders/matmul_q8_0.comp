// matmul_q8_0.comp - Q8_0 weights against Q8_0 activations (blocks_q8_0.glsl's terms).
#version 450
#include "common.glsl"
#include "blocks_q8_0.glsl"
#include "matmul_blocks.glsl"
