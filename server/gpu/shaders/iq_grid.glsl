// iq_grid.glsl - what the grid i-quants' products share (common/quant_iq.h): the weight type's
// codebook at p.tables, uploaded once by gpu_ops_init from common/quant_iq_tables.c
// (quant_iq_ksigns in bytes 0..127, the type's grid from byte 128, entries little-endian, value j
// in byte j), the signed dot of a grid entry against int8 activations, and the block's
// accumulation: isum = sum m * q * a exact, d = (fp16(w.d) * a.d) * unit, the block's terms (d, isum).
// Their products run on matmul_split.glsl: part ib (0..7) of a block is its values 32ib..32ib+31.
#include "matmul_push.glsl"
#include "kquants.glsl"

// The 8 sign bits of sign index i (7 bits).
uint iq_ksigns(uint i) {
    return load_u8(p.tables, i);
}

// sum over j < n (4 or 8) of (value j of grid entry e, negated where bit first + j of signs is
// set) * a[j]; entries are entry_bytes (n) apart, so the entry and a[a_off..] (a_off a multiple
// of 4) are read as words.
int iq_signed_dot(uint entry_bytes, uint e, uint n, uint signs, uint first, I8s a, uint a_off) {
    uint64_t g = p.tables + 128u + uint64_t(entry_bytes) * e;
    int sum = 0;
    for (uint w = 0u; w < n; w += 4u) {
        uint gw = load_w32(g, w), aw = load_w32(uint64_t(a), a_off + w);
        for (uint j = 0u; j < 4u; j++) {
            int v = int((gw >> (8u * j)) & 255u);
            int y = bitfieldExtract(int(aw), int(8u * j), 8);
            sum += (((signs >> (first + w + j)) & 1u) != 0u ? -v : v) * y;
        }
    }
    return sum;
}

// The iq1 types: sum over the 8 values of grid entry e (int8 in -1..1) of (8 * value + delta) *
// a[j], delta = -1 or 1; the entry and a[a_off..] (a_off a multiple of 8) read as words.
int iq1_dot(uint e, int delta, I8s a, uint a_off) {
    uvec2 g = load_w64(p.tables + 128u + 8u * uint64_t(e), 0u);
    uvec2 y = load_w64(uint64_t(a), a_off);
    int sum = 0;
    for (uint w = 0u; w < 2u; w++)
        for (int j = 0; j < 32; j += 8)
            sum += (8 * bitfieldExtract(int(g[w]), j, 8) + delta) * bitfieldExtract(int(y[w]), j, 8);
    return sum;
}

vec4 iq_terms(uint64_t a_blk, float wd, float unit, int isum) {
    precise float d0 = wd * q8k_d(a_blk);
    precise float d = d0 * unit;
    return vec4(d, float(isum), 0.0, 0.0);
}
