// matmul_blocks.glsl - the driver of every block-quantized product: out[t][r] = dot(weight row r,
// activation row t) under quant.h's accumulation contract. The contract's float work is four
// chains per output (accumulator j takes blocks j, j + 4, j + 8, ... in order, from +0; the result
// is (acc0 + acc1) + (acc2 + acc3)); its integer work, each block's exact sums, is free of order.
// So a workgroup of 64 invocations takes one row of one token 64 blocks at a time: invocation i
// computes block i's terms (its integer sums and float factors) into shared memory, then
// invocations 0..3 run the four chains over those 64 blocks. A kernel includes this after defining
//     QK_ELEMS                           elements per weight block
//     W_BLOCK_BYTES, A_BLOCK_BYTES       block sizes
//     vec4 block_terms(uint64_t w_blk, uint64_t a_blk)
//                                        (d, v, d2, v2): the block adds fma(d, v, acc) to its
//                                        chain, then fma(d2, v2, acc) when TWO_TERMS is defined
// Rows go on the x and z dimensions of the dispatch (x: at most 65535 each), tokens on y.
layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t w;         // weight rows, row_bytes apart
    uint64_t act;       // activation rows, act_stride bytes apart
    uint64_t out_;      // output rows, out_stride floats apart
    uint row_bytes;
    uint act_stride;
    uint out_stride;
    uint n_in;          // elements per row
    uint n_rows;
    uint n_tok;
} p;

shared vec4 terms[64];
shared float chains[4];

void main() {
    uint i = gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    if (row >= p.n_rows) // the whole workgroup leaves together
        return;
    uint64_t wrow = p.w + uint64_t(row) * p.row_bytes;
    uint64_t arow = p.act + uint64_t(t) * p.act_stride;
    uint nb = p.n_in / QK_ELEMS;
    float acc = 0.0;
    for (uint c = 0u; c < nb; c += 64u) {
        uint b = c + i;
        if (b < nb)
            terms[i] = block_terms(wrow + uint64_t(b) * W_BLOCK_BYTES,
                                   arow + uint64_t(b) * A_BLOCK_BYTES);
        barrier();
        if (i < 4u) {
            uint end = min(64u, nb - c);
            for (uint k = i; k < end; k += 4u) {
                vec4 f = terms[k];
                acc = fma_rn(f.x, f.y, acc);
#ifdef TWO_TERMS
                acc = fma_rn(f.z, f.w, acc);
#endif
            }
        }
        barrier();
    }
    if (i < 4u)
        chains[i] = acc;
    barrier();
    if (i == 0u) {
        precise float lo = chains[0] + chains[1];
        precise float hi = chains[2] + chains[3];
        precise float s = lo + hi;
        F32s(p.out_ + (uint64_t(t) * p.out_stride + row) * 4u).v[0] = s;
    }
}
