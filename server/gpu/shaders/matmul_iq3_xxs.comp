// matmul_iq3_xxs.comp - IQ3_XXS weights against Q8_K activations (decode_iq3_xxs): 64 grid
// indices of 4 values, then per 32 values a u32 of 4 sign indices and s.
#version 450
#include "common.glsl"
#include "iq_grid.glsl"

#define W_BLOCK_BYTES 98u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint ib) {
    I8s a = I8s(a_blk);
    int isum = 0;
    uint aux = load_le32(w_blk, 66u + 4u * ib);
    int m = 2 * int(aux >> 28) + 1;
    for (uint l = 0u; l < 4u; l++) {
        uint signs = iq_ksigns((aux >> (7u * l)) & 127u);
        for (uint h = 0u; h < 2u; h++)
            isum += m * iq_signed_dot(4u, load_u8(w_blk, 2u + 8u * ib + 2u * l + h), 4u, signs,
                                      4u * h, a, 32u * ib + 8u * l + 4u * h);
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return iq_terms(a_blk, load_f16(w_blk, 0u), 0.25, s.x);
}

#include "matmul_split.glsl"
