// attn_vsum_q4_0.comp - the weighted sum of Q4_0 V rows, each element dequantized as
// quant_dequantize_row does: float(nibble - 8) * fp16(d) (byte j: element j low, j + 16 high),
// then times the probability (attn_vsum.glsl).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"

// the block's scale (bits) above the byte holding the element's code
uint v_raw(uint64_t row, uint d) {
    uint64_t blk = row + uint64_t(d / 32u) * 18u;
    return uint(U16s(blk).v[0]) << 16 | uint(U8s(blk + 2u).v[(d % 32u) & 15u]);
}

float v_of(uint raw, uint d) {
    uint b = raw & 255u;
    int q = int(d % 32u < 16u ? b & 15u : b >> 4) - 8;
    precise float x = float(q) * fp16_to_f32(raw >> 16);
    return x;
}

#include "attn_vsum.glsl"
