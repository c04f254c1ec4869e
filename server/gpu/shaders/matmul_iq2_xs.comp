// matmul_iq2_xs.comp - IQ2_XS weights against Q8_K activations (decode_iq2_xs): per 8 values a
// u16, grid index (9 bits) | sign index << 9; per 32 values a scale byte, s of the first 16 in the
// low nibble, of the last 16 in the high one.
#version 450
#include "common.glsl"
#include "iq_grid.glsl"

#define W_BLOCK_BYTES 74u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint ib) {
    I8s a = I8s(a_blk);
    int isum = 0;
    uint sc = load_u8(w_blk, 66u + ib);
    for (uint l = 0u; l < 4u; l++) {
        uint v = load_le16(w_blk, 2u + 2u * (4u * ib + l));
        int m = 2 * int((sc >> (l < 2u ? 0u : 4u)) & 15u) + 1;
        isum += m * iq_signed_dot(8u, v & 511u, 8u, iq_ksigns(v >> 9), 0u, a,
                                  32u * ib + 8u * l);
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return iq_terms(a_blk, load_f16(w_blk, 0u), 0.125, s.x);
}

#include "matmul_split.glsl"
