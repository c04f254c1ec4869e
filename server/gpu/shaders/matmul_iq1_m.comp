// matmul_iq1_m.comp - IQ1_M weights against Q8_K activations (decode_iq1_m): per 8 values a
// nibble of qh, index bits 8-10 and the delta's sign; 3-bit s per 16 values in the scale words,
// whose top nibbles make the fp16 d.
#version 450
#include "common.glsl"
#include "iq_grid.glsl"

#define W_BLOCK_BYTES 56u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint ib) {
    I8s a = I8s(a_blk);
    int isum = 0;
    uint sc = load_le16(w_blk, 48u + 2u * (ib / 2u)) >> (6u * (ib & 1u));
    for (uint l = 0u; l < 4u; l++) {
        uint h = load_u8(w_blk, 32u + 2u * ib + l / 2u) >> (4u * (l & 1u));
        uint idx = load_u8(w_blk, 4u * ib + l) | (h & 7u) << 8;
        int m = 2 * int((sc >> (l < 2u ? 0u : 3u)) & 7u) + 1;
        isum += m * iq1_dot(idx, (h & 8u) != 0u ? -1 : 1, a, 32u * ib + 8u * l);
    }
    return ivec2(isum, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    uint d = load_u8(w_blk, 49u) >> 4 | (load_u8(w_blk, 51u) & 0xf0u) |
             (load_u8(w_blk, 53u) >> 4) << 8 | (load_u8(w_blk, 55u) & 0xf0u) << 8;
    return iq_terms(a_blk, fp16_to_f32(d), 0.125, s.x);
}

#include "matmul_split.glsl"
