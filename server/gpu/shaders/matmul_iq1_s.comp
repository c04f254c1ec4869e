// matmul_iq1_s.comp - IQ1_S weights against Q8_K activations (decode_iq1_s): grid index = low
// byte | 3 bits of the sub-block's u16 << 8; s and the delta's sign in that u16's top bits; codes
// 8 * grid +- 1.
#version 450
#include "common.glsl"
#include "iq_grid.glsl"

#define W_BLOCK_BYTES 50u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint ib) {
    I8s a = I8s(a_blk);
    int isum = 0;
    uint h = load_le16(w_blk, 34u + 2u * ib);
    int m = 2 * int((h >> 12) & 7u) + 1, delta = (h & 0x8000u) != 0u ? -1 : 1;
    for (uint l = 0u; l < 4u; l++) {
        uint idx = load_u8(w_blk, 2u + 4u * ib + l) | ((h >> (3u * l)) & 7u) << 8;
        isum += m * iq1_dot(idx, delta, a, 32u * ib + 8u * l);
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return iq_terms(a_blk, load_f16(w_blk, 0u), 0.125, s.x);
}

#include "matmul_split.glsl"
