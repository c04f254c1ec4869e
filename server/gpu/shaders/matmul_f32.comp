// matmul_f32.comp - F32 weights against F32 activations (matmul_float.glsl's contract).
#version 450
#include "common.glsl"

float w_at(uint64_t row, uint i) { return F32s(row).v[i]; }
float a_at(uint64_t row, uint i) { return F32s(row).v[i]; }

#include "matmul_float.glsl"
