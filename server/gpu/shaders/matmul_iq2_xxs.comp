// matmul_iq2_xxs.comp - IQ2_XXS weights against Q8_K activations (common/quant_iq.c's
// decode_iq2_xxs): per 32 values two u32, 4 grid indices; 4 sign indices and s, m = 2s + 1.
#version 450
#include "common.glsl"
#include "iq_grid.glsl"

#define W_BLOCK_BYTES 66u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint ib) {
    I8s a = I8s(a_blk);
    int isum = 0;
    uint idx = load_le32(w_blk, 2u + 8u * ib), aux = load_le32(w_blk, 6u + 8u * ib);
    int m = 2 * int(aux >> 28) + 1;
    for (uint l = 0u; l < 4u; l++)
        isum += m * iq_signed_dot(8u, (idx >> (8u * l)) & 255u, 8u,
                                  iq_ksigns((aux >> (7u * l)) & 127u), 0u, a,
                                  32u * ib + 8u * l);
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return iq_terms(a_blk, load_f16(w_blk, 0u), 0.125, s.x);
}

#include "matmul_split.glsl"
