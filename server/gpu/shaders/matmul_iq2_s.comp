// matmul_iq2_s.comp - IQ2_S weights against Q8_K activations (decode_iq2_s): grid index = low byte
// | 2 bits of qh << 8, the 8 sign bits a byte of their own, scales as IQ2_XS.
#version 450
#include "common.glsl"
#include "iq_grid.glsl"

#define W_BLOCK_BYTES 82u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint ib) {
    I8s a = I8s(a_blk);
    int isum = 0;
    uint sc = load_u8(w_blk, 74u + ib), qh = load_u8(w_blk, 66u + ib);
    for (uint l = 0u; l < 4u; l++) {
        uint idx = load_u8(w_blk, 2u + 4u * ib + l) | ((qh >> (2u * l)) & 3u) << 8;
        int m = 2 * int((sc >> (l < 2u ? 0u : 4u)) & 15u) + 1;
        isum += m * iq_signed_dot(8u, idx, 8u, load_u8(w_blk, 34u + 4u * ib + l), 0u, a,
                                  32u * ib + 8u * l);
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return iq_terms(a_blk, load_f16(w_blk, 0u), 0.125, s.x);
}

#include "matmul_split.glsl"
