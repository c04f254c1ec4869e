// matmul_tile.glsl - the driver of the block products over tiles of rows x tokens (prefill, and
// the routed experts' pairs grouped by expert): out[t][r] = dot(weight row r, activation row t)
// with each output's float steps exactly those of the decode drivers (matmul_blocks.glsl,
// matmul_split.glsl), so the same bits: a block's terms formed once from its whole exact integer
// sums, then four chains over the blocks in order (chain j: blocks j, j + 4, ... from +0), the
// result (acc0 + acc1) + (acc2 + acc3); or, for LANE8's types (q4_K, q5_K, q6_K: kquants.glsl), 8
// lane accumulators and the min accumulators (4, 1 or none) each taking every block in order, the
// result lane8_result.
//
// A workgroup of 64 invocations computes TILE_ROWS (16) rows for TILE_TOK (16) tokens:
// invocation i takes token slot i % 16 and rows 4 (i / 16) .. 4 (i / 16) + 3, the four outputs'
// chains in its registers. The 16 invocations of a row read its weight blocks at once and an
// invocation's four rows share its activation block, so a weight block comes from memory once
// for 16 tokens (the split driver: 8) and an activation block once for 16 rows. No shared memory
// and no barriers: an invocation past the product leaves.
//
// Four chains without indexing: the four accumulators of an output rotate, the next block's chain
// always in .x; after nb blocks chain j sits at (j - nb) mod 4.
//
// Tiles go on the dispatch's y: with p.tiles 0, tile y is tokens (or pairs) 16y .. 16y + 15;
// else p.tiles is gpu_op_group_pairs' table (group_pairs.comp): u32 n_tiles, u32 the order's byte
// offset, then tile y's (first, count) as two u32 at 16 + 8y, and the order, pair indices grouped
// by expert: tile y is pairs order[first .. first + count), all of one expert. Rows go on x
// (spilling onto z past 65535), in groups of 16.
//
// A kernel includes this after defining QK_ELEMS, W_BLOCK_BYTES, A_BLOCK_BYTES (TWO_TERMS where
// the blocks have two) and either
//     vec4 block_terms(uint64_t w_blk, uint64_t a_blk)       (matmul_blocks.glsl's)
// or TILE_SPLIT_PARTS and matmul_split.glsl's block_isums / block_float_terms, or LANE8 and
// matmul_split.glsl's block_lanes / block_scales (8 parts).
layout(local_size_x = 64) in;

#include "matmul_push.glsl"

#define TILE_TOK 16u      // gpu_ops.c's GPU_TILE_TOK
#define TILE_ROWS 16u     // gpu_ops.c's GPU_TILE_ROWS
#define TILE_ROWS_PER 4u  // rows of one invocation

#if defined(LANE8)
// Accumulators of a row: lanes 0..3, lanes 4..7, and the min lanes' unless LANE8_MINS is 0.
#if LANE8_MINS == 0
#define TILE_ROW_ACCS 2u
#else
#define TILE_ROW_ACCS 3u
#endif

// The block's lanes 0..3 and 4..7 and its min lanes (min lane c: parts 2c and 2c + 1; LANE8_MINS
// 0: unread) from all its parts' integer sums (exact: any order), as matmul_split.glsl adds them.
void tile_block_lanes(uint64_t w_blk, uint64_t a_blk, out ivec4 lo, out ivec4 hi, out ivec4 mins) {
    lo = ivec4(0);
    hi = ivec4(0);
    for (uint c = 0u; c < 4u; c++) {
        int m_lo, m_hi;
        lo += block_lanes(w_blk, a_blk, 2u * c, m_lo);
        hi += block_lanes(w_blk, a_blk, 2u * c + 1u, m_hi);
        mins[c] = m_lo + m_hi;
    }
}
#elif defined(TILE_SPLIT_PARTS)
// The block's terms from all its parts' integer sums (exact: any order), as matmul_split.glsl's
// one invocation forms them.
vec4 tile_block_terms(uint64_t w_blk, uint64_t a_blk) {
    ivec2 s = ivec2(0);
    for (uint k = 0u; k < TILE_SPLIT_PARTS; k++)
        s += block_isums(w_blk, a_blk, k);
    return block_float_terms(w_blk, a_blk, s);
}
#else
vec4 tile_block_terms(uint64_t w_blk, uint64_t a_blk) {
    return block_terms(w_blk, a_blk);
}
#endif

// The pair (a token, or gpu_op_matmul_id's pair) in slot s of tile y; false past the tile's.
bool tile_pair(uint y, uint s, out uint pair) {
    pair = 0u;
    if (p.tiles == 0ul) {
        pair = y * TILE_TOK + s;
        return pair < p.n_tok;
    }
    U32s head = U32s(p.tiles);
    if (y >= head.v[0])
        return false;
    uvec2 tile = U32x2s(p.tiles + 16ul).v[y]; // (first, count) in the order
    if (s >= tile.y)
        return false;
    pair = U32s(p.tiles + uint64_t(head.v[1])).v[tile.x + s];
    return true;
}

// The output of four chains c (rotated nb times): (acc0 + acc1) + (acc2 + acc3).
float tile_result(vec4 c, uint nb) {
    uint r = (4u - (nb & 3u)) & 3u; // chain j at (j + r) % 4
    precise float lo = c[r] + c[(r + 1u) & 3u];
    precise float hi = c[(r + 2u) & 3u] + c[(r + 3u) & 3u];
    precise float s = lo + hi;
    return s;
}

void main() {
    uint i = gl_LocalInvocationID.x, pair;
    if (!tile_pair(gl_WorkGroupID.y, i % TILE_TOK, pair))
        return;
    uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * TILE_ROWS +
                (i / TILE_TOK) * TILE_ROWS_PER;
    if (row0 >= p.n_rows)
        return;
    uint n_live = min(TILE_ROWS_PER, p.n_rows - row0), nb = p.n_in / QK_ELEMS;
    uint64_t wrow = mm_w_row(pair, row0), arow = mm_act_row(pair);
#ifdef LANE8
    // row m's lanes 0..3 at 3m, lanes 4..7 at 3m + 1, min lanes at 3m + 2 (LANE8_MINS 1: .x;
    // 0: none, 2m and 2m + 1 the lanes')
    vec4 acc[TILE_ROW_ACCS * TILE_ROWS_PER];
    for (uint m = 0u; m < TILE_ROW_ACCS * TILE_ROWS_PER; m++)
        acc[m] = vec4(0.0);
#else
    vec4 acc[TILE_ROWS_PER];
    for (uint m = 0u; m < TILE_ROWS_PER; m++)
        acc[m] = vec4(0.0);
#endif
    for (uint b = 0u; b < nb; b++) {
        uint64_t a_blk = arow + uint64_t(b) * A_BLOCK_BYTES;
        for (uint m = 0u; m < TILE_ROWS_PER; m++) {
            if (m < n_live) {
                uint64_t w_blk = wrow + uint64_t(m) * p.row_bytes + uint64_t(b) * W_BLOCK_BYTES;
#ifdef LANE8
                vec2 f = block_scales(w_blk, a_blk);
                ivec4 lo, hi, mins;
                tile_block_lanes(w_blk, a_blk, lo, hi, mins);
                acc[TILE_ROW_ACCS * m] = fma_rn4(f.x, vec4(lo), acc[TILE_ROW_ACCS * m]);
                acc[TILE_ROW_ACCS * m + 1u] = fma_rn4(f.x, vec4(hi), acc[TILE_ROW_ACCS * m + 1u]);
#if LANE8_MINS == 4
                acc[3u * m + 2u] = fma_rn4(f.y, vec4(mins), acc[3u * m + 2u]);
#elif LANE8_MINS == 1
                int msum = (mins.x + mins.y) + (mins.z + mins.w);
                acc[3u * m + 2u].x = fma_rn(f.y, float(msum), acc[3u * m + 2u].x);
#endif
#else
                vec4 f = tile_block_terms(w_blk, a_blk);
                float c = fma_rn(f.x, f.y, acc[m].x);
#ifdef TWO_TERMS
                c = fma_rn(f.z, f.w, c);
#endif
                acc[m] = vec4(acc[m].yzw, c);
#endif
            }
        }
    }
    for (uint m = 0u; m < TILE_ROWS_PER; m++) {
        if (m < n_live) {
#ifdef LANE8
            precise vec4 pairs = acc[TILE_ROW_ACCS * m] + acc[TILE_ROW_ACCS * m + 1u];
#if LANE8_MINS == 0
            mm_store(pair, row0 + m, lane8_result(pairs, vec4(0.0))); // mins unread
#else
            mm_store(pair, row0 + m, lane8_result(pairs, acc[3u * m + 2u]));
#endif
#else
            mm_store(pair, row0 + m, tile_result(acc[m], nb));
#endif
        }
    }
}
