// matmul_blocks.glsl - the driver of every block-quantized product: out[t][r] = dot(weight row r,
// activation row t) under quant.h's accumulation contract. The contract's float work is four
// chains per output (accumulator j takes blocks j, j + 4, j + 8, ... in order, from +0; the result
// is (acc0 + acc1) + (acc2 + acc3)); its integer work, each block's exact sums, is free of order.
// So a workgroup of 64 invocations takes one row for TOK tokens (1, 2, 4 or 8: gpu_ops.c's rule,
// tok_group below), 64 / TOK blocks at a time: invocation i computes the terms (integer sums and
// float factors) of block i % (64 / TOK) for token i / (64 / TOK) into shared memory, then 4 TOK
// invocations run each token's four chains over those blocks. The weight block is read from
// memory once for the TOK tokens (their other reads hit the cache). A kernel includes this after
// defining
//     QK_ELEMS                           elements per weight block
//     W_BLOCK_BYTES, A_BLOCK_BYTES       block sizes
//     vec4 block_terms(uint64_t w_blk, uint64_t a_blk)
//                                        (d, v, d2, v2): the block adds fma(d, v, acc) to its
//                                        chain, then fma(d2, v2, acc) when TWO_TERMS is defined
// Rows go on the x and z dimensions of the dispatch (x: at most 65535 each), token groups on y; a
// token's matrix, activation row and output row are matmul_push.glsl's (gpu_op_matmul_id's pairs
// take the tokens' place, each invocation reading its own pair's weight block).
// (a block_terms that reads the push constants includes matmul_push.glsl before it).
layout(local_size_x = 64) in;

#include "matmul_push.glsl"

shared vec4 terms[64];
shared float chains[32];

// Tokens per workgroup for a product of n_tok rows (gpu_ops.c's tok_group).
uint tok_group(uint n_tok) {
    return n_tok >= 8u ? 8u : n_tok >= 4u ? 4u : n_tok >= 2u ? 2u : 1u;
}

void main() {
    uint i = gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n_rows) // the whole workgroup leaves together
        return;
    uint TOK = tok_group(p.n_tok), chunk = 64u / TOK;
    uint tt = i / chunk, k = i % chunk, t = gl_WorkGroupID.y * TOK + tt;
    bool live = t < p.n_tok;
    uint64_t wrow = live ? mm_w_row(t, row) : 0ul;
    uint64_t arow = live ? mm_act_row(t) : 0ul;
    uint nb = p.n_in / QK_ELEMS;
    // invocation i < 4 TOK runs chain i % 4 of token i / 4 of the group
    uint ct = i >> 2, cj = i & 3u;
    float acc = 0.0;
    for (uint c = 0u; c < nb; c += chunk) {
        uint b = c + k;
        if (b < nb && live)
            terms[i] = block_terms(wrow + uint64_t(b) * W_BLOCK_BYTES,
                                   arow + uint64_t(b) * A_BLOCK_BYTES);
        barrier();
        if (i < 4u * TOK) {
            uint end = min(chunk, nb - c);
            for (uint kk = cj; kk < end; kk += 4u) {
                vec4 f = terms[ct * chunk + kk];
                acc = fma_rn(f.x, f.y, acc);
#ifdef TWO_TERMS
                acc = fma_rn(f.z, f.w, acc);
#endif
            }
        }
        barrier();
    }
    if (i < 4u * TOK)
        chains[i] = acc;
    barrier();
    uint to = gl_WorkGroupID.y * TOK + i;
    if (i < TOK && to < p.n_tok) {
        precise float lo = chains[4u * i] + chains[4u * i + 1u];
        precise float hi = chains[4u * i + 2u] + chains[4u * i + 3u];
        precise float s = lo + hi;
        mm_store(to, row, s);
    }
}
