// attn_vsum_q8_0.comp - the weighted sum of Q8_0 V rows, each element dequantized as
// quant_dequantize_row does: float(code) * fp16(d), then times the probability (attn_vsum.glsl).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"

float v_at(uint64_t row, uint d) {
    uint64_t blk = row + uint64_t(d / 32u) * 34u;
    precise float x = float(I8s(blk + 2u).v[d % 32u]) * fp16_to_f32(uint(U16s(blk).v[0]));
    return x;
}

#include "attn_vsum.glsl"
