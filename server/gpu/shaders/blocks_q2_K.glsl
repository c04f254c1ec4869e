// blocks_q2_K.glsl - Q2_K weights against Q8_K activations: element 128h + 32k + l has code bits
// 2k..2k+1 of qs[32h + l]; per sub-block g of 16, isum += (scales[g] & 15) * dot and msum +=
// (scales[g] >> 4) * bsums[g]; kquants.glsl's two fmas. Part (h, q) = (part / 4, part % 4)
// (matmul_split.glsl) takes elements 128h + 32k + 8q .. + 7 for every k (two words of qs at
// 32h + 8q), and the msum terms of its sub-blocks where q is even (each sub-block has two parts).
// Blocks of 84 bytes keep words aligned.
#include "kquants.glsl"

#define W_BLOCK_BYTES 84u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part) {
    uint h = part >> 2, q = part & 3u;
    U8s sc = U8s(w_blk);
    int isum = 0, msum = 0;
    uint off = 16u + 32u * h + 8u * q;
    uvec2 qs = uvec2(load_w32(w_blk, off), load_w32(w_blk, off + 4u));
    for (uint k = 0u; k < 4u; k++) {
        uint g = 8u * h + 2u * k + (q >> 1);
        int dot = 0;
        uvec2 a = load_w64(a_blk, 128u * h + 32u * k + 8u * q);
        for (uint j = 0u; j < 2u; j++)
            dot += dot4((qs[j] >> (2u * k)) & 0x03030303u, a[j]);
        uint s = uint(sc.v[g]);
        isum += int(s & 15u) * dot;
        if ((q & 1u) == 0u)
            msum += int(s >> 4) * q8k_bsum(a_blk, g);
    }
    return ivec2(isum, msum);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return k_affine_terms(a_blk, load_f16(w_blk, 80u), load_f16(w_blk, 82u), s.x, s.y);
}

#define TWO_TERMS
