// group_pairs.comp - the routed experts' pairs grouped by expert for the tiled products
// (gpu_op_group_pairs): one workgroup counts each expert's pairs (shared atomics), takes the
// prefix sums (experts in index order), writes each expert's tiles of at most tile_tok pairs and
// scatters the pair indices into the order, grouped by expert. Within an expert the order is the
// atomics' (any): each output of a product is computed alone, so its bits do not depend on it.
// The table's layout is matmul_tile.glsl's: u32 n_tiles, u32 the order's byte offset, 8 bytes
// unused, max_tiles (first, count) pairs of u32, then the order (n_pairs u32). Pairs whose
// expert is not below n_expert are left out (the router never makes one).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;

#define GROUP_MAX_EXPERTS 1024u // gpu_op_group_pairs refuses more

layout(push_constant) uniform Push {
    uint64_t ids;    // [n_pairs] int32: pair p's expert
    uint64_t groups; // the table
    uint n_pairs;
    uint n_expert;
    uint tile_tok;   // pairs per tile (matmul_tile.glsl's TILE_TOK)
    uint max_tiles;  // tiles the table has room for: at least sum over experts of ceil(count / tile_tok)
} p;

shared uint count[GROUP_MAX_EXPERTS];      // pairs per expert
shared uint first[GROUP_MAX_EXPERTS];      // the expert's first slot in the order, then its cursor
shared uint tile_first[GROUP_MAX_EXPERTS]; // the expert's first tile

void main() {
    uint i = gl_LocalInvocationID.x, T = p.tile_tok;
    for (uint e = i; e < p.n_expert; e += 256u)
        count[e] = 0u;
    barrier();
    for (uint q = i; q < p.n_pairs; q += 256u) {
        uint e = U32s(p.ids).v[q];
        if (e < p.n_expert)
            atomicAdd(count[e], 1u);
    }
    barrier();
    uint order_off = 16u + 8u * p.max_tiles;
    if (i == 0u) {
        uint run = 0u, tiles = 0u;
        for (uint e = 0u; e < p.n_expert; e++) {
            first[e] = run;
            tile_first[e] = tiles;
            run += count[e];
            tiles += (count[e] + T - 1u) / T;
        }
        U32s(p.groups).v[0] = tiles;
        U32s(p.groups).v[1] = order_off;
    }
    barrier();
    for (uint e = i; e < p.n_expert; e += 256u)
        for (uint j = 0u; j * T < count[e]; j++)
            U32x2s(p.groups + 16ul).v[tile_first[e] + j] =
                uvec2(first[e] + j * T, min(T, count[e] - j * T));
    barrier();
    for (uint q = i; q < p.n_pairs; q += 256u) {
        uint e = U32s(p.ids).v[q];
        if (e < p.n_expert)
            U32s(p.groups + uint64_t(order_off)).v[atomicAdd(first[e], 1u)] = q;
    }
}
