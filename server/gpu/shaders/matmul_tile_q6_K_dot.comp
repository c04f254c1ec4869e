// matmul_tile_q6_K_dot.comp - matmul_tile_q6_K.comp with the integer dot product instructions
// (common.glsl's INT_DOT): the same bits, made where the device has them.
#version 450
#define INT_DOT
#include "common.glsl"
#include "blocks_q6_K.glsl"
#include "matmul_tile.glsl"
