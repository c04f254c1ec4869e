// matmul_split.glsl - the driver of the 256-element block products with each block's integer work
// split over SPLIT_PARTS (8) invocations: out[t][r] = dot(weight row r, activation row t) under
// quant.h's accumulation contract, the same bits as matmul_blocks.glsl. The contract's integer
// work (a block's exact sums) is free of order, so part k of a block (k < 8, about 32 elements)
// is one invocation's, and the parts' sums are added in shared memory; its float work is not: one
// invocation then forms the block's terms (d, v[, d2, v2]) from the whole sums, and the four
// chains of each output take their blocks in order (accumulator j: blocks j, j + 4, ... from +0;
// the result (acc0 + acc1) + (acc2 + acc3)).
//
// A workgroup of 64 invocations computes SPLIT_ROWS rows for TOK tokens (split_rows, tok_group:
// gpu_ops.c's rules, the same). Its work is a list of items (output o = rr * TOK + tt, block b),
// item o * nb + b, taken ROUND_BLOCKS (32) at a time: invocation i computes part i % 8 of items
// 8g + i / 8, g < 4, of the round (neighbouring invocations read neighbouring words); then
// invocation i < 32 adds item i's 8 parts and forms its terms; then 4 invocations per output run
// the output's chains over the round's items of that output, in block order. Rows with few blocks
// so share a round (decode of a 2048-wide row: 4 rows, 32 blocks), and a weight block is read once
// for TOK tokens while the cache holds it.
//
// A kernel includes this after defining
//     W_BLOCK_BYTES, A_BLOCK_BYTES       block sizes (256 elements each)
//     ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part)
//                                        part (0..7) of the block's integer sums (isum, msum):
//                                        the block's are the parts' sums, exact
//     vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 sums)
//                                        (d, v, d2, v2) from the whole sums: the block adds
//                                        fma(d, v, acc) to its chain, then fma(d2, v2, acc) when
//                                        TWO_TERMS is defined (matmul_blocks.glsl's block_terms)
// Rows go on the x and z dimensions of the dispatch (x: at most 65535 each), in groups of
// SPLIT_ROWS; token groups on y.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;

#include "matmul_push.glsl"

#define SPLIT_PARTS 8u
#define ROUND_BLOCKS 32u

// part k of the round's block slot s at k * PARTS_PAD + s: the invocations of a warp write 8
// parts of 4 slots to 32 distinct banks (36 = 4 mod 32), and read one part of 32 slots likewise
#define PARTS_PAD 36u
shared int split_isum[SPLIT_PARTS * PARTS_PAD], split_msum[SPLIT_PARTS * PARTS_PAD];
shared vec4 split_terms[ROUND_BLOCKS];
shared float split_chains[64];

// Tokens per workgroup for a product of n_tok rows (gpu_ops.c's tok_group).
uint tok_group(uint n_tok) {
    return n_tok >= 8u ? 8u : n_tok >= 4u ? 4u : n_tok >= 2u ? 2u : 1u;
}

// Rows per workgroup (gpu_ops.c's split_rows): the fewest, a power of two, whose items fill a
// round, at most 16 outputs (64 chain invocations).
uint split_rows(uint nb, uint tok) {
    uint r = 1u;
    while (r * tok * nb < ROUND_BLOCKS && r * tok < 16u)
        r *= 2u;
    return r;
}

// The addresses of output (row, t)'s weight row and activation row; false where the output is
// past the product (mm_store writes it), and then row 0 of token 0's: readable, unused.
bool split_addrs(uint row, uint t, out uint64_t wrow, out uint64_t arow) {
    bool ok = row < p.n_rows && t < p.n_tok;
    uint tt = ok ? t : 0u; // no index array is read past its pairs
    wrow = mm_w_row(tt, ok ? row : 0u);
    arow = mm_act_row(tt);
    return ok;
}

// Output o (0 .. rows * tok - 1) of this workgroup as (row, token).
uvec2 split_output(uint o, uint tok) {
    uint rows = split_rows(p.n_in / 256u, tok);
    uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * rows;
    return uvec2(row0 + o / tok, gl_WorkGroupID.y * tok + o % tok);
}

// Item x's weight and activation blocks; false for an item past the workgroup's or the product's
// (then a readable block's, unused).
bool split_item(uint x, uint nb, uint tok, uint n_items, out uint64_t w_blk, out uint64_t a_blk) {
    uint64_t wrow, arow;
    uint xc = min(x, n_items - 1u);
    uvec2 rt = split_output(xc / nb, tok);
    bool ok = split_addrs(rt.x, rt.y, wrow, arow) && x < n_items;
    uint b = xc % nb;
    w_blk = wrow + uint64_t(b) * W_BLOCK_BYTES;
    a_blk = arow + uint64_t(b) * A_BLOCK_BYTES;
    return ok;
}

void main() {
    uint i = gl_LocalInvocationID.x;
    uint nb = p.n_in / 256u, TOK = tok_group(p.n_tok), n_out = split_rows(nb, TOK) * TOK;
    uint n_items = n_out * nb;
    // invocation i < 4 n_out runs chain i % 4 of output i / 4
    uint co = i >> 2, cj = i & 3u;
    float acc = 0.0;
    uint64_t w_blk, a_blk;
    for (uint c = 0u; c < n_items; c += ROUND_BLOCKS) {
        // the four items' loads unconditional, so in flight together (behind a condition each
        // waited for the item before: 13 us of a decode step's expert product on the H200)
        [[unroll]] for (uint g = 0u; g < 4u; g++) {
            uint slot = 8u * g + i / SPLIT_PARTS;
            bool live = split_item(c + slot, nb, TOK, n_items, w_blk, a_blk);
            ivec2 s = block_isums(w_blk, a_blk, i % SPLIT_PARTS);
            split_isum[(i % SPLIT_PARTS) * PARTS_PAD + slot] = live ? s.x : 0;
            split_msum[(i % SPLIT_PARTS) * PARTS_PAD + slot] = live ? s.y : 0;
        }
        barrier();
        if (i < ROUND_BLOCKS) {
            ivec2 s = ivec2(0);
            for (uint k = 0u; k < SPLIT_PARTS; k++)
                s += ivec2(split_isum[k * PARTS_PAD + i], split_msum[k * PARTS_PAD + i]);
            vec4 terms = vec4(0.0);
            if (split_item(c + i, nb, TOK, n_items, w_blk, a_blk))
                terms = block_float_terms(w_blk, a_blk, s);
            split_terms[i] = terms;
        }
        barrier();
        if (co < n_out) {
            // output co's items in this round, from its first block of chain cj
            uint first = co * nb, lo = max(first, c), hi = min(first + nb, c + ROUND_BLOCKS);
            uint x = lo + ((cj + first - lo) & 3u);
            for (; x < hi; x += 4u) {
                vec4 f = split_terms[x - c];
                acc = fma_rn(f.x, f.y, acc);
#ifdef TWO_TERMS
                acc = fma_rn(f.z, f.w, acc);
#endif
            }
        }
        barrier();
    }
    split_chains[i] = acc;
    barrier();
    uint64_t wrow, arow;
    if (i < n_out) {
        uvec2 rt = split_output(i, TOK);
        if (split_addrs(rt.x, rt.y, wrow, arow)) {
            precise float lo = split_chains[4u * i] + split_chains[4u * i + 1u];
            precise float hi = split_chains[4u * i + 2u] + split_chains[4u * i + 3u];
            precise float s = lo + hi;
            mm_store(rt.y, rt.x, s);
        }
    }
}
