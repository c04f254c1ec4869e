// matmul_push.glsl - the push constants of the block-quantized products (gpu_ops.c's matmul_push).
#ifndef MATMUL_PUSH
#define MATMUL_PUSH
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
    uint64_t tables;    // the weight type's codebook (iq_grid.glsl), 0 for types without one
} p;
#endif
