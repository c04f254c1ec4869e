// attn_vsum_q4_0.comp - the weighted sum of Q4_0 V rows, each element dequantized as
// quant_dequantize_row does: float(nibble - 8) * fp16(d) (byte j: element j low, j + 16 high),
// then times the probability (attn_vsum.glsl).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "attn.glsl"

float v_at(uint64_t row, uint d) {
    uint64_t blk = row + uint64_t(d / 32u) * 18u;
    uint e = d % 32u, b = uint(U8s(blk + 2u).v[e & 15u]);
    int q = int(e < 16u ? b & 15u : b >> 4) - 8;
    precise float x = float(q) * load_f16(blk, 0u);
    return x;
}

#include "attn_vsum.glsl"
