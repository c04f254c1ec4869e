// matmul_q4_1.comp - Q4_1 weights against Q8_1 activations: d = fp16(w.d) * fp16(a.d), isum =
// sum nibble * q_a, acc = fma(d, isum, acc), then acc = fma(fp16(w.m), fp16(a.s), acc).
#version 450
#include "common.glsl"

#define QK_ELEMS 32u
#define W_BLOCK_BYTES 20u
#define A_BLOCK_BYTES 36u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U8s qw = U8s(w_blk + 4u);
    I8s qa = I8s(a_blk + 4u);
    int isum = 0;
    for (int j = 0; j < 16; j++) {
        uint b = uint(qw.v[j]);
        isum += int(b & 15u) * int(qa.v[j]) + int(b >> 4) * int(qa.v[j + 16]);
    }
    precise float d = load_f16(w_blk, 0u) * load_f16(a_blk, 0u);
    return vec4(d, float(isum), load_f16(w_blk, 2u), load_f16(a_blk, 2u));
}

#define TWO_TERMS
#include "matmul_blocks.glsl"
