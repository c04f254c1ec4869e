// blocks_q3_K.glsl - Q3_K weights against Q8_K activations: Q2_K's 2-bit codes minus 4 where bit
// e / 32 of hmask[e % 32] is clear; per sub-block g of 16 isum += scale_g * dot with the signed
// 6-bit scales; acc = fma(a.d * fp16(w.d), isum, acc). Part (h, q) = (part / 4, part % 4)
// (matmul_split.glsl) takes elements 128h + 32k + 8q .. + 7 for every k: two words of qs at
// 32h + 8q, two of hmask at 8q. Blocks of 110 bytes keep only halves aligned: words are read as
// two halves.
#include "kquants.glsl"

#define W_BLOCK_BYTES 110u

// common/quant.c's q3_K_scale: scale j (0..15) of scales[12] at sc, minus 32.
int q3_scale(U8s sc, uint j) {
    uint lo = j < 8u ? uint(sc.v[j]) & 15u : uint(sc.v[j - 8u]) >> 4;
    uint hi = (uint(sc.v[8u + (j & 3u)]) >> (2u * (j >> 2))) & 3u;
    return int(lo | hi << 4) - 32;
}

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part) {
    uint h = part >> 2, q = part & 3u;
    U8s sc = U8s(w_blk + 96u);
    int isum = 0;
    uint off = 32u + 32u * h + 8u * q;
    uvec2 qs = uvec2(load_w32_a2(w_blk, off), load_w32_a2(w_blk, off + 4u));
    uvec2 hm = uvec2(load_w32_a2(w_blk, 8u * q), load_w32_a2(w_blk, 8u * q + 4u));
    for (uint k = 0u; k < 4u; k++) {
        uvec2 a = load_w64(a_blk, 128u * h + 32u * k + 8u * q);
        int dot = 0;
        for (uint j = 0u; j < 2u; j++) {
            // code + 4 = the 2-bit code with the hmask bit as its third
            uint code = ((qs[j] >> (2u * k)) & 0x03030303u) |
                        ((hm[j] >> (4u * h + k)) & 0x01010101u) << 2;
            dot += dot4(code, a[j]) - 4 * sum4(a[j]);
        }
        isum += q3_scale(sc, 8u * h + 2u * k + (q >> 1)) * dot;
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return k_terms(a_blk, load_f16(w_blk, 108u), s.x);
}
