// blocks_q6_K.glsl - Q6_K weights against Q8_K activations: element 128h + 32k + l takes its low
// 4 bits from ql[64h + l + 32(k & 1)] (low nibble for k < 2) and its top 2 from bits 2k..2k+1 of
// qh[32h + l], minus 32 (common/quant.c's q6_K_code); per sub-block g of 16 isum += scales[g] *
// dot (signed); acc = fma(a.d * fp16(w.d), isum, acc). Part (h, q) = (part / 4, part % 4)
// (matmul_split.glsl) takes l = 8q..8q+7 for every k: two words of ql at 64h + 8q and at
// 64h + 32 + 8q, two of qh at 32h + 8q. Blocks of 210 bytes keep only halves aligned: words are
// read as two halves.
#include "kquants.glsl"

#define W_BLOCK_BYTES 210u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part) {
    uint h = part >> 2, q = part & 3u;
    I8s sc = I8s(w_blk + 192u);
    int isum = 0;
    for (uint k = 0u; k < 4u; k++) {
        uvec2 a = load_w64(a_blk, 128u * h + 32u * k + 8u * q);
        int dot = 0;
        for (uint j = 0u; j < 2u; j++) {
            uint l = load_w32_a2(w_blk, 64u * h + 32u * (k & 1u) + 8u * q + 4u * j);
            uint qh = load_w32_a2(w_blk, 128u + 32u * h + 8u * q + 4u * j);
            uint code = ((l >> (k < 2u ? 0u : 4u)) & 0x0f0f0f0fu) |
                        ((qh >> (2u * k)) & 0x03030303u) << 4;
            dot += dot4(code, a[j]) - 32 * sum4(a[j]);
        }
        isum += int(sc.v[8u * h + 2u * k + (q >> 1)]) * dot;
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return k_terms(a_blk, load_f16(w_blk, 208u), s.x);
}
