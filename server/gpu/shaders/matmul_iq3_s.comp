// matmul_iq3_s.comp - IQ3_S weights against Q8_K activations (decode_iq3_s): grid index = low
// byte | bit k of qh << 8 per 4 values, sign bits in their own bytes, a 4-bit s per 32 values.
#version 450
#include "common.glsl"
#include "iq_grid.glsl"

#define W_BLOCK_BYTES 110u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint ib) {
    I8s a = I8s(a_blk);
    int isum = 0;
    int m = 2 * int((load_u8(w_blk, 106u + ib / 2u) >> (4u * (ib & 1u))) & 15u) + 1;
    uint qh = load_u8(w_blk, 66u + ib);
    for (uint k = 0u; k < 8u; k++) {
        uint idx = load_u8(w_blk, 2u + 8u * ib + k) | ((qh >> k) & 1u) << 8;
        isum += m * iq_signed_dot(4u, idx, 4u, load_u8(w_blk, 74u + 4u * ib + k / 2u),
                                  4u * (k & 1u), a, 32u * ib + 4u * k);
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return iq_terms(a_blk, load_f16(w_blk, 0u), 1.0, s.x);
}

#include "matmul_split.glsl"
