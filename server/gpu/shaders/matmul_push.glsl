// matmul_push.glsl - the push constants of every product (gpu_ops.c's matmul_push), and where a
// product's row t (a token, or gpu_op_matmul_id's pair) takes its matrix, activation row and
// output row: identity where ids / act_idx / out_idx are 0 (gpu_op_matmul), else from those int32
// arrays (gpu_op_matmul_id). Include after common.glsl.
#ifndef MATMUL_PUSH
#define MATMUL_PUSH
layout(push_constant) uniform Push {
    uint64_t w;         // weight rows, row_bytes apart (matrix e at w + e mat_bytes)
    uint64_t act;       // activation rows, act_stride bytes apart
    uint64_t out_;      // output rows, out_stride floats apart
    uint row_bytes;
    uint act_stride;
    uint out_stride;
    uint n_in;          // elements per row
    uint n_rows;
    uint n_tok;         // tokens, or pairs
    uint64_t tables;    // the weight type's codebook (iq_grid.glsl), 0 for types without one
    uint64_t ids;       // pair t's matrix, or 0: matrix 0 for every t
    uint64_t act_idx;   // pair t's activation row, or 0: row t
    uint64_t out_idx;   // pair t's output row, or 0: row t
    uint64_t mat_bytes; // bytes between matrices; 0 with ids: w is a table of their addresses
    uint64_t tiles;     // matmul_tile.glsl's grouped pairs (gpu_op_group_pairs), or 0
    uint64_t bias;      // n_rows floats per matrix added to the outputs, or 0
} p;

// Row `row` of row t's matrix.
uint64_t mm_w_row(uint t, uint row) {
    uint64_t m = p.w;
    if (p.ids != 0ul) {
        uint e = U32s(p.ids).v[t];
        m = p.mat_bytes != 0ul ? p.w + uint64_t(e) * p.mat_bytes : U64s(p.w).v[e];
    }
    return m + uint64_t(row) * p.row_bytes;
}

// Row t's activation row.
uint64_t mm_act_row(uint t) {
    uint a = p.act_idx != 0ul ? U32s(p.act_idx).v[t] : t;
    return p.act + uint64_t(a) * p.act_stride;
}

// Where row t's output `row` goes.
uint64_t mm_out_at(uint t, uint row) {
    uint o = p.out_idx != 0ul ? U32s(p.out_idx).v[t] : t;
    return p.out_ + (uint64_t(o) * p.out_stride + row) * 4ul;
}

// Stores row t's output `row`: s, plus row `row` of its matrix's bias where the product has one
// (as the CPU adds a bias to a product's result: one more rounding, the same).
void mm_store(uint t, uint row, float s) {
    if (p.bias != 0ul) {
        uint m = p.ids != 0ul ? U32s(p.ids).v[t] : 0u;
        precise float sb = s + F32s(p.bias + (uint64_t(m) * p.n_rows + row) * 4ul).v[0];
        s = sb;
    }
    F32s(mm_out_at(t, row)).v[0] = s;
}
#endif
