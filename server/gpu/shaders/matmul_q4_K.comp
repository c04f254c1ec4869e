// matmul_q4_K.comp - Q4_K weights against Q8_K activations: per sub-block sb of 32 (its codes the
// low nibbles of qs[32c..32c+31] for sb = 2c, the high ones for sb = 2c + 1) isum += sc * dot,
// msum += m * (bsums[2sb] + bsums[2sb + 1]); kquants.glsl's two fmas.
#version 450
#include "common.glsl"
#include "kquants.glsl"

#define W_BLOCK_BYTES 144u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U8s qs = U8s(w_blk + 16u);
    I8s qa = I8s(a_blk);
    int isum = 0, msum = 0;
    for (uint sb = 0u; sb < 8u; sb++) {
        int sc, m, dot = 0;
        k_scale_min(w_blk + 4u, sb, sc, m);
        uint shift = 4u * (sb & 1u);
        for (uint l = 0u; l < 32u; l++)
            dot += int((uint(qs.v[32u * (sb >> 1) + l]) >> shift) & 15u) * int(qa.v[32u * sb + l]);
        isum += sc * dot;
        msum += m * (q8k_bsum(a_blk, 2u * sb) + q8k_bsum(a_blk, 2u * sb + 1u));
    }
    return k_affine_terms(a_blk, load_f16(w_blk, 0u), load_f16(w_blk, 2u), isum, msum);
}

#define TWO_TERMS
#include "matmul_blocks.glsl"
