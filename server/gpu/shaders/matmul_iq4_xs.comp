// matmul_iq4_xs.comp - IQ4_XS weights against Q8_K activations: per sub-block j of 32, isum +=
// (6-bit scale - 32) * the IQ4_NL nibble-run dot; acc = fma(a.d * fp16(w.d), isum, acc).
#version 450
#include "common.glsl"
#include "kquants.glsl"
#define NIBBLE_VALUES IQ4NL_VALUES
#include "nibble_tables.glsl"

#define W_BLOCK_BYTES 136u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    uint sh = load_le16(w_blk, 2u);
    int isum = 0;
    for (uint j = 0u; j < 8u; j++) {
        uint lo = (load_u8(w_blk, 4u + j / 2u) >> (4u * (j & 1u))) & 15u;
        uint hi = (sh >> (2u * j)) & 3u;
        int s = int(lo | hi << 4) - 32;
        isum += s * nibble_run_dot(w_blk + 8u + 16u * j, a_blk + 32u * j);
    }
    return k_terms(a_blk, load_f16(w_blk, 0u), isum);
}

#include "matmul_blocks.glsl"
