// matmul_bf16.comp - BF16 weights against BF16 activations, each product in f32 of the exact
// conversions (matmul_float.glsl's contract).
#version 450
#include "common.glsl"

float w_at(uint64_t row, uint i) { return bf16_to_f32(uint(U16s(row).v[i])); }
float a_at(uint64_t row, uint i) { return bf16_to_f32(uint(U16s(row).v[i])); }

#include "matmul_float.glsl"
