// matmul_q8_0.comp - Q8_0 weights against Q8_0 activations: per block d = fp16(w.d) * fp16(a.d)
// (a float product), isum = sum q_w * q_a exact, acc = fma(d, float(isum), acc).
#version 450
#include "common.glsl"

#define QK_ELEMS 32u
#define W_BLOCK_BYTES 34u
#define A_BLOCK_BYTES 34u

void block_apply(uint64_t w_blk, uint64_t a_blk, inout float acc) {
    I8s qw = I8s(w_blk + 2u), qa = I8s(a_blk + 2u);
    int isum = 0;
    for (int i = 0; i < 32; i++)
        isum += int(qw.v[i]) * int(qa.v[i]);
    precise float d = load_f16(w_blk, 0u) * load_f16(a_blk, 0u);
    acc = fma_rn(d, float(isum), acc);
}

#include "matmul_blocks.glsl"
