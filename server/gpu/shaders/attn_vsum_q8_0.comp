// attn_vsum_q8_0.comp - the weighted sum of Q8_0 V rows, each element dequantized as
// quant_dequantize_row does: float(code) * fp16(d), then times the probability (attn_vsum.glsl).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"

// the block's scale (bits) above its code (a byte)
uint v_raw(uint64_t row, uint d) {
    uint64_t blk = row + uint64_t(d / 32u) * 34u;
    return uint(U16s(blk).v[0]) << 16 | uint(U8s(blk + 2u).v[d % 32u]);
}

float v_of(uint raw, uint d) {
    precise float x = float(int(raw << 24) >> 24) * fp16_to_f32(raw >> 16);
    return x;
}

#include "attn_vsum.glsl"
