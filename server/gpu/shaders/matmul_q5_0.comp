// matmul_q5_0.comp - Q5_0 weights against Q8_0 activations: codes = nibble | bit j (j + 16) of
// the little-endian qh << 4, minus 16; d = fp16(w.d) * fp16(a.d), acc = fma(d, isum, acc).
#version 450
#include "common.glsl"

#define QK_ELEMS 32u
#define W_BLOCK_BYTES 22u
#define A_BLOCK_BYTES 34u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    uint qh = load_le32(w_blk, 2u);
    U8s qw = U8s(w_blk + 6u);
    I8s qa = I8s(a_blk + 2u);
    int isum = 0;
    for (int j = 0; j < 16; j++) {
        uint b = uint(qw.v[j]);
        int lo = int((b & 15u) | ((qh >> j) & 1u) << 4) - 16;
        int hi = int((b >> 4) | ((qh >> (j + 16)) & 1u) << 4) - 16;
        isum += lo * int(qa.v[j]) + hi * int(qa.v[j + 16]);
    }
    precise float d = load_f16(w_blk, 0u) * load_f16(a_blk, 0u);
    return vec4(d, float(isum), 0.0, 0.0);
}

#include "matmul_blocks.glsl"
