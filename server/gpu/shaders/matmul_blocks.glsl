// matmul_blocks.glsl - the driver of every block-quantized product: out[t][r] = dot(weight row r,
// activation row t) under quant.h's accumulation contract. Four accumulators per output, each a
// chain over the blocks b = j, j + 4, j + 8, ... in order, start at +0; the result is
// (acc0 + acc1) + (acc2 + acc3). A kernel includes this after defining
//     QK_ELEMS                           elements per weight block
//     void block_apply(uint64_t w_blk, uint64_t a_blk, inout float acc)
//                                        the block's fma (or two) into acc, in the contract's order
//     W_BLOCK_BYTES, A_BLOCK_BYTES       block sizes
// (a block_apply that reads the push constants includes matmul_push.glsl before it).
// A workgroup of 64 invocations computes 16 rows of one token: invocation 4 * k + j runs
// accumulator j of row k.
layout(local_size_x = 64) in;

#include "matmul_push.glsl"

shared float partial[64];

void main() {
    uint lid = gl_LocalInvocationID.x, j = lid & 3u;
    uint row = gl_WorkGroupID.x * 16u + (lid >> 2), t = gl_WorkGroupID.y;
    float acc = 0.0;
    if (row < p.n_rows) {
        uint64_t wrow = p.w + uint64_t(row) * p.row_bytes;
        uint64_t arow = p.act + uint64_t(t) * p.act_stride;
        uint nb = p.n_in / QK_ELEMS;
        for (uint b = j; b < nb; b += 4u)
            block_apply(wrow + uint64_t(b) * W_BLOCK_BYTES, arow + uint64_t(b) * A_BLOCK_BYTES, acc);
    }
    partial[lid] = acc;
    barrier();
    if (j == 0u && row < p.n_rows) {
        precise float lo = partial[lid] + partial[lid + 1u];
        precise float hi = partial[lid + 2u] + partial[lid + 3u];
        precise float s = lo + hi;
        F32s(p.out_ + (uint64_t(t) * p.out_stride + row) * 4u).v[0] = s;
    }
}
