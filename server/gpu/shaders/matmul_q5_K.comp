// matmul_q5_K.comp - Q5_K weights against Q8_K activations: Q4_K's codes with bit sb of qh[l] as
// the fifth bit of element l of sub-block sb; the same sums and fmas.
#version 450
#include "common.glsl"
#include "kquants.glsl"

#define W_BLOCK_BYTES 176u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U8s qh = U8s(w_blk + 16u), qs = U8s(w_blk + 48u);
    I8s qa = I8s(a_blk);
    int isum = 0, msum = 0;
    for (uint sb = 0u; sb < 8u; sb++) {
        int sc, m, dot = 0;
        k_scale_min(w_blk + 4u, sb, sc, m);
        uint shift = 4u * (sb & 1u);
        for (uint l = 0u; l < 32u; l++) {
            uint q = ((uint(qs.v[32u * (sb >> 1) + l]) >> shift) & 15u) |
                     ((uint(qh.v[l]) >> sb) & 1u) << 4;
            dot += int(q) * int(qa.v[32u * sb + l]);
        }
        isum += sc * dot;
        msum += m * (q8k_bsum(a_blk, 2u * sb) + q8k_bsum(a_blk, 2u * sb + 1u));
    }
    return k_affine_terms(a_blk, load_f16(w_blk, 0u), load_f16(w_blk, 2u), isum, msum);
}

#define TWO_TERMS
#include "matmul_blocks.glsl"
