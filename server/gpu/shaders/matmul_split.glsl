// matmul_split.glsl - the driver of the 256-element block products with each block's integer work
// split over SPLIT_PARTS (8) invocations: out[t][r] = dot(weight row r, activation row t) under
// quant.h's accumulation contract, the same bits as the CPU's vec_dot. The contract's integer
// work (a block's exact sums) is free of order, so part k of a block (k < 8, about 32 elements)
// is one invocation's, and the parts' sums are added in shared memory; its float work is not: the
// block's float terms are formed once from the whole sums, then each output's chains take their
// blocks in order. Two contracts:
//  - four chains (most types): one invocation forms the block's terms (d, v[, d2, v2]); chain j
//    (accumulator j) takes blocks j, j + 4, ... from +0; the result (acc0 + acc1) + (acc2 + acc3).
//  - LANE8 (q4_K, q5_K, q6_K: kquants.glsl): a block's sums are 8 lane sums and its min sums
//    (part k: lanes 4h..4h+3, h = k % 2, and min lane k / 2's share), its factors (d, dmin); every
//    chain takes every block: chain j of an output holds lane accumulators j and j + 4 and min
//    accumulator j (LANE8_MINS 1: chain 0's is the one min accumulator; 0: none, no min sums
//    kept), all from +0; the result kquants.glsl's lane8_result.
//
// A workgroup of 64 invocations computes SPLIT_ROWS rows for TOK tokens (split_rows, tok_group:
// gpu_ops.c's rules, the same). Its work is a list of items (output o = rr * TOK + tt, block b),
// item o * nb + b, taken ROUND_BLOCKS (32) at a time: invocation i computes part i % 8 of items
// 8g + i / 8, g < 4, of the round (neighbouring invocations read neighbouring words); then the
// items' parts are added and their terms formed (four chains: invocation i < 32, item i's; LANE8:
// invocation i, item i % 32's floats of chains 2 (i / 32) and 2 (i / 32) + 1); then 4 invocations
// per output run the output's chains over the round's items of that output, in block order. Rows
// with few blocks so share a round (decode of a 2048-wide row: 4 rows, 32 blocks), and a weight
// block is read once for TOK tokens while the cache holds it.
//
// A kernel includes this after defining W_BLOCK_BYTES, A_BLOCK_BYTES (blocks of 256 elements)
// and, for the four chains,
//     ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part)
//                                        part (0..7) of the block's integer sums (isum, msum):
//                                        the block's are the parts' sums, exact
//     vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 sums)
//                                        (d, v, d2, v2) from the whole sums: the block adds
//                                        fma(d, v, acc) to its chain, then fma(d2, v2, acc) when
//                                        TWO_TERMS is defined (matmul_blocks.glsl's block_terms)
// or, with LANE8 and LANE8_MINS (4, 1 or 0),
//     ivec4 block_lanes(uint64_t w_blk, uint64_t a_blk, uint part, out int msum)
//                                        part k's sums of lanes 4h..4h+3 (h = k % 2) and its
//                                        share msum of min lane k / 2 (exact, as above;
//                                        LANE8_MINS 0: msum unread)
//     vec2 block_scales(uint64_t w_blk, uint64_t a_blk)
//                                        (d, dmin): lane l adds fma(d, lane l, acc), min lane
//                                        k (or the whole min sum) fma(dmin, min, acc)
//                                        (LANE8_MINS 0: dmin unread)
// Rows go on the x and z dimensions of the dispatch (x: at most 65535 each), in groups of
// SPLIT_ROWS; token groups on y.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;

#include "matmul_push.glsl"

#define SPLIT_PARTS 8u
#define ROUND_BLOCKS 32u

#if defined(LANE8) && LANE8_MINS == 0
#define SPLIT_WORDS 4u      // a part's sums: its 4 lanes
#define SPLIT_CHAIN_STEP 1u // every chain takes every block
#elif defined(LANE8)
#define SPLIT_WORDS 5u      // a part's sums: its 4 lanes, its min
#define SPLIT_CHAIN_STEP 1u // every chain takes every block
#else
#define SPLIT_WORDS 2u      // a part's sums: isum, msum
#define SPLIT_CHAIN_STEP 4u // chain j takes blocks j, j + 4, ...
#endif

// word w of part k of the round's block slot s at (w * 8 + k) * PARTS_PAD + s (split_word): the
// invocations of a warp write one word of 8 parts of 4 slots to 32 distinct banks (36 = 4 mod
// 32), and read one word of one part of 32 slots likewise
#define PARTS_PAD 36u
shared int split_sums[SPLIT_WORDS * SPLIT_PARTS * PARTS_PAD];
#ifdef LANE8
shared vec2 split_scales[ROUND_BLOCKS];      // slot s's (d, dmin)
shared vec4 split_lanes[4u * ROUND_BLOCKS];  // chain j's floats of slot s at 32 j + s: lanes j,
                                             // j + 4, min lane j (LANE8_MINS 1: the min sum, j 0;
                                             // 0: none, .z 0)
shared float split_chains[128];              // chain j's acc_j + acc_j+4 at 2 j, its min acc next
#else
shared vec4 split_terms[ROUND_BLOCKS];
shared float split_chains[64];
#endif

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

// Where word w of part k of the round's block slot s lies in split_sums.
uint split_word(uint w, uint k, uint s) {
    return (w * SPLIT_PARTS + k) * PARTS_PAD + s;
}

#ifdef LANE8
// Part k of the round's block slot s into split_sums (zeros where the item is not live).
void split_put_part(uint s, uint k, bool live, uint64_t w_blk, uint64_t a_blk) {
    int m;
    ivec4 l = block_lanes(w_blk, a_blk, k, m);
    for (uint w = 0u; w < 4u; w++)
        split_sums[split_word(w, k, s)] = live ? l[w] : 0;
#if LANE8_MINS != 0
    split_sums[split_word(4u, k, s)] = live ? m : 0;
#endif
}

// The round's floats from the parts' sums, invocation i's share: for j = 2 (i / 32) and the
// next, slot s = i % 32's lanes j and j + 4 (word j of its parts 2c, and of its parts 2c + 1,
// c < 4) and min lane j (parts 2j, 2j + 1; LANE8_MINS 1: all eight parts' for j 0; 0: none);
// with i >= 32 (the half without the whole min sum) also the slot's factors.
void split_form_terms(uint i, uint c, uint nb, uint tok, uint n_items) {
    uint s = i % ROUND_BLOCKS, j0 = 2u * (i / ROUND_BLOCKS);
    for (uint j = j0; j < j0 + 2u; j++) {
        ivec2 lane = ivec2(0);
        for (uint k = 0u; k < SPLIT_PARTS; k += 2u)
            lane += ivec2(split_sums[split_word(j, k, s)], split_sums[split_word(j, k + 1u, s)]);
        int m = 0;
#if LANE8_MINS == 4
        m = split_sums[split_word(4u, 2u * j, s)] + split_sums[split_word(4u, 2u * j + 1u, s)];
#elif LANE8_MINS == 1
        if (j == 0u)
            for (uint k = 0u; k < SPLIT_PARTS; k++)
                m += split_sums[split_word(4u, k, s)];
#endif
        split_lanes[j * ROUND_BLOCKS + s] = vec4(float(lane.x), float(lane.y), float(m), 0.0);
    }
    if (i >= ROUND_BLOCKS) {
        uint64_t w_blk, a_blk;
        vec2 f = vec2(0.0);
        if (split_item(c + s, nb, tok, n_items, w_blk, a_blk))
            f = block_scales(w_blk, a_blk);
        split_scales[s] = f;
    }
}

// Chain j's accumulators (lanes j, j + 4, min j; LANE8_MINS 0: .z stays 0) after the round's
// slot s.
vec4 split_chain_step(vec4 acc, uint s, uint j) {
    vec2 f = split_scales[s];
    vec4 v = split_lanes[j * ROUND_BLOCKS + s];
    acc.x = fma_rn(f.x, v.x, acc.x);
    acc.y = fma_rn(f.x, v.y, acc.y);
#if LANE8_MINS != 0
    acc.z = fma_rn(f.y, v.z, acc.z);
#endif
    return acc;
}

// Invocation i's chain (of output i / 4) into split_chains.
void split_put_chain(uint i, vec4 acc) {
    precise float pair = acc.x + acc.y;
    split_chains[2u * i] = pair;
    split_chains[2u * i + 1u] = acc.z;
}

// Output o's result from its four chains.
float split_result(uint o) {
    vec4 pairs, mins;
    for (uint j = 0u; j < 4u; j++) {
        pairs[j] = split_chains[8u * o + 2u * j];
        mins[j] = split_chains[8u * o + 2u * j + 1u];
    }
    return lane8_result(pairs, mins);
}
#else
void split_put_part(uint s, uint k, bool live, uint64_t w_blk, uint64_t a_blk) {
    ivec2 v = block_isums(w_blk, a_blk, k);
    split_sums[split_word(0u, k, s)] = live ? v.x : 0;
    split_sums[split_word(1u, k, s)] = live ? v.y : 0;
}

// Invocation i < 32 adds slot i's 8 parts and forms its terms.
void split_form_terms(uint i, uint c, uint nb, uint tok, uint n_items) {
    if (i >= ROUND_BLOCKS)
        return;
    ivec2 s = ivec2(0);
    for (uint k = 0u; k < SPLIT_PARTS; k++)
        s += ivec2(split_sums[split_word(0u, k, i)], split_sums[split_word(1u, k, i)]);
    uint64_t w_blk, a_blk;
    vec4 terms = vec4(0.0);
    if (split_item(c + i, nb, tok, n_items, w_blk, a_blk))
        terms = block_float_terms(w_blk, a_blk, s);
    split_terms[i] = terms;
}

vec4 split_chain_step(vec4 acc, uint s, uint j) {
    vec4 f = split_terms[s];
    acc.x = fma_rn(f.x, f.y, acc.x);
#ifdef TWO_TERMS
    acc.x = fma_rn(f.z, f.w, acc.x);
#endif
    return acc;
}

void split_put_chain(uint i, vec4 acc) {
    split_chains[i] = acc.x;
}

float split_result(uint o) {
    precise float lo = split_chains[4u * o] + split_chains[4u * o + 1u];
    precise float hi = split_chains[4u * o + 2u] + split_chains[4u * o + 3u];
    precise float s = lo + hi;
    return s;
}
#endif

void main() {
    uint i = gl_LocalInvocationID.x;
    uint nb = p.n_in / 256u, TOK = tok_group(p.n_tok), n_out = split_rows(nb, TOK) * TOK;
    uint n_items = n_out * nb;
    // invocation i < 4 n_out runs chain i % 4 of output i / 4
    uint co = i >> 2, cj = i & 3u;
    uint64_t w_blk, a_blk;
    vec4 acc = vec4(0.0); // four chains: chain cj's in .x; LANE8: lanes cj, cj + 4, min cj
    for (uint c = 0u; c < n_items; c += ROUND_BLOCKS) {
        // the four items' loads unconditional, so in flight together (behind a condition each
        // waited for the item before: 13 us of a decode step's expert product on the H200)
        [[unroll]] for (uint g = 0u; g < 4u; g++) {
            uint slot = 8u * g + i / SPLIT_PARTS;
            bool live = split_item(c + slot, nb, TOK, n_items, w_blk, a_blk);
            split_put_part(slot, i % SPLIT_PARTS, live, w_blk, a_blk);
        }
        barrier();
        split_form_terms(i, c, nb, TOK, n_items);
        barrier();
        if (co < n_out) {
            // output co's items in this round, from its first block of chain cj
            uint first = co * nb, lo = max(first, c), hi = min(first + nb, c + ROUND_BLOCKS);
            uint x = lo + ((cj + first - lo) & (SPLIT_CHAIN_STEP - 1u));
            for (; x < hi; x += SPLIT_CHAIN_STEP)
                acc = split_chain_step(acc, x - c, cj);
        }
        barrier();
    }
    split_put_chain(i, acc);
    barrier();
    uint64_t wrow, arow;
    if (i < n_out) {
        uvec2 rt = split_output(i, TOK);
        if (split_addrs(rt.x, rt.y, wrow, arow))
            mm_store(rt.y, rt.x, split_result(i));
    }
}
