// matmul_q2_K.comp - Q2_K weights against Q8_K activations: element 128h + 32k + l has code bits
// 2k..2k+1 of qs[32h + l]; per sub-block g of 16, isum += (scales[g] & 15) * dot and msum +=
// (scales[g] >> 4) * bsums[g]; kquants.glsl's two fmas.
#version 450
#include "common.glsl"
#include "kquants.glsl"

#define W_BLOCK_BYTES 84u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U8s sc = U8s(w_blk), qs = U8s(w_blk + 16u);
    I8s qa = I8s(a_blk);
    int isum = 0, msum = 0;
    for (uint g = 0u; g < 16u; g++) {
        int dot = 0;
        for (uint e = 16u * g; e < 16u * g + 16u; e++)
            dot += k2_code(qs, e) * int(qa.v[e]);
        uint s = uint(sc.v[g]);
        isum += int(s & 15u) * dot;
        msum += int(s >> 4) * q8k_bsum(a_blk, g);
    }
    return k_affine_terms(a_blk, load_f16(w_blk, 80u), load_f16(w_blk, 82u), isum, msum);
}

#define TWO_TERMS
#include "matmul_blocks.glsl"
