// quantize_q8_K.comp - rows of floats -> the engine's Q8_K activation blocks (quant.h: 256 codes,
// 16 bsums, d, zero pad; 320 bytes), bit for bit quant_q8_K_from_f32: the element of largest
// magnitude (first on ties) sets iscale = -127 / max, codes = min(127, round-half-even(iscale *
// x)), d = 1 / iscale, bsums = sums of 16 codes; an all-zero block is all zero.
// A workgroup of 64 per block (gpu_ops.c: quantize_per_group), four elements each: the largest
// magnitude by a tree (larger |x|, or on ties the lower index: the sequential scan's first), the
// codes side by side, the bsums from four invocations' integer sums (exact in any order). One
// invocation per block read 256 floats one after another: 19 us a decode row on the H100.
#version 450
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;        // f32 rows, x_stride floats apart
    uint64_t dst;      // activation rows, dst_stride bytes apart
    uint x_stride;
    uint dst_stride;
    uint n_blocks;     // blocks per row
    uint n_rows;
} p;

shared float s_abs[64];
shared uint s_idx[64];
shared float s_val[64];
shared int s_sum[64];

void main() {
    uint i = gl_LocalInvocationID.x, b = gl_WorkGroupID.x, row = gl_WorkGroupID.y;
    if (b >= p.n_blocks || row >= p.n_rows) // the whole workgroup leaves together
        return;
    F32s x = F32s(p.x + (uint64_t(row) * p.x_stride + uint64_t(b) * 256u) * 4u);
    uint64_t blk = p.dst + uint64_t(row) * p.dst_stride + uint64_t(b) * 320u;
    vec4 v = vec4(x.v[4u * i], x.v[4u * i + 1u], x.v[4u * i + 2u], x.v[4u * i + 3u]);
    float amax = 0.0, best = 0.0;
    uint idx = 0xffffffffu;
    for (uint j = 0u; j < 4u; j++)
        if (abs(v[j]) > amax) {
            amax = abs(v[j]);
            best = v[j];
            idx = 4u * i + j;
        }
    s_abs[i] = amax;
    s_idx[i] = idx;
    s_val[i] = best;
    for (uint w = 32u; w >= 1u; w >>= 1) {
        barrier();
        if (i < w) {
            float a2 = s_abs[i + w];
            uint i2 = s_idx[i + w];
            if (a2 > s_abs[i] || (a2 == s_abs[i] && a2 > 0.0 && i2 < s_idx[i])) {
                s_abs[i] = a2;
                s_idx[i] = i2;
                s_val[i] = s_val[i + w];
            }
        }
    }
    barrier();
    float max_ = s_val[0];
    U32s words = U32s(blk);
    if (max_ == 0.0) {
        for (uint k = i; k < 80u; k += 64u)
            words.v[k] = 0u;
        return;
    }
    float iscale = div_rn(-127.0, max_);
    int sum = 0;
    uint packed = 0u;
    for (uint j = 0u; j < 4u; j++) {
        precise float q = iscale * v[j];
        int c = min(int(roundEven(q)), 127);
        sum += c;
        packed |= (uint(c) & 255u) << (8u * j);
    }
    words.v[i] = packed; // codes 4i .. 4i + 3, little-endian
    s_sum[i] = sum;
    barrier();
    if (i < 16u) { // bsum g: codes 16g .. 16g + 15, invocations 4g .. 4g + 3
        int g = s_sum[4u * i] + s_sum[4u * i + 1u] + s_sum[4u * i + 2u] + s_sum[4u * i + 3u];
        I16s(blk + 256u).v[i] = int16_t(g);
    }
    if (i == 0u)
        F32s(blk + 288u).v[0] = div_rn(1.0, iscale);
    if (i >= 57u) // the pad after d: bytes 292 .. 319, words 73 .. 79
        words.v[73u + (i - 57u)] = 0u;
}
