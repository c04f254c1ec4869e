// matmul_float.glsl - the driver of the float products (F32, F16, BF16 weights against activations
// of the same type) under quant.h's contract: 32 lanes, lane l taking elements l, l + 32, ... of
// the first floor(n/32)*32 with fma in element order; then lane l += lane l + h for h = 16, 8, 4,
// 2, 1; then the tail elements added to lane 0 one by one with fma. A kernel defines
//     float w_at(uint64_t row, uint i), a_at(uint64_t row, uint i)   element i as float
// A workgroup of 64 invocations computes 2 rows of one token, 32 lanes each (row pairs on the
// dispatch's x and z dimensions, tokens (or gpu_op_matmul_id's pairs: matmul_push.glsl) on y).
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;

#include "matmul_push.glsl"

shared float lanes[64];

void main() {
    uint lid = gl_LocalInvocationID.x, l = lid & 31u, base = lid & 32u;
    uint row = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 2u + (lid >> 5);
    uint t = gl_WorkGroupID.y;
    uint64_t wrow = mm_w_row(t, row);
    uint64_t arow = mm_act_row(t);
    uint n32 = p.n_in / 32u * 32u;
    float acc = 0.0;
    uint i = l;
    if (row < p.n_rows) {
        // eight of the lane's elements loaded at once, then their fmas in order: one memory
        // round trip per 256 elements of the row, not one per 32 (a router's weights come from
        // memory in a decode step: 10.2 us a product for 5.9 from the cache, bench-gpu --cold)
        for (uint n256 = p.n_in / 256u * 256u; i < n256; i += 256u) {
            float wv[8], av[8];
            [[unroll]] for (uint k = 0u; k < 8u; k++) {
                wv[k] = w_at(wrow, i + 32u * k);
                av[k] = a_at(arow, i + 32u * k);
            }
            [[unroll]] for (uint k = 0u; k < 8u; k++)
                acc = fma_rn(wv[k], av[k], acc);
        }
        for (; i < n32; i += 32u)
            acc = fma_rn(w_at(wrow, i), a_at(arow, i), acc);
    }
    lanes[lid] = acc;
    barrier();
    for (uint h = 16u; h >= 1u; h >>= 1) {
        float other = l < h ? lanes[base + l + h] : 0.0;
        barrier();
        if (l < h) {
            precise float s = lanes[lid] + other;
            lanes[lid] = s;
        }
        barrier();
    }
    if (l == 0u && row < p.n_rows) {
        float sum = lanes[lid];
        for (uint i = n32; i < p.n_in; i++) {
            sum = fma_rn(w_at(wrow, i), a_at(arow, i), sum);
        }
        mm_store(t, row, sum);
    }
}
