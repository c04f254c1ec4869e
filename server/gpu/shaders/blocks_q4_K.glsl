// blocks_q4_K.glsl - Q4_K weights against Q8_K activations under quant.h's lane contract
// (kquants.glsl's LANE8, four min lanes): per sub-block sb of 32 (its codes the low nibbles of
// qs[32c..32c+31] for sb = 2c, the high ones for sb = 2c + 1) lane l += sc * dot over its elements
// 4l..4l+3, min lane c += m * (bsums[2sb] + bsums[2sb + 1]) for sb = 2c and 2c + 1. Part k
// (matmul_split.glsl) takes qs bytes 16k..16k+15 (16 bytes): half h = k % 2 of sub-blocks 2c and
// 2c + 1, c = k / 2, so lanes 4h..4h+3 (word j of the 16 bytes: lane 4h + j), and of their bsums
// (sixteen elements each) the two it covers, min lane c's. Blocks of 144 bytes keep 16-byte
// loads aligned.
#define LANE8
#define LANE8_MINS 4
#include "kquants.glsl"

#define W_BLOCK_BYTES 144u

ivec4 block_lanes(uint64_t w_blk, uint64_t a_blk, uint part, out int msum) {
    uint c = part >> 1, h = part & 1u;
    int sc_lo, m_lo, sc_hi, m_hi;
    k_scale_min(w_blk + 4u, 2u * c, sc_lo, m_lo);
    k_scale_min(w_blk + 4u, 2u * c + 1u, sc_hi, m_hi);
    uint e = 64u * c + 16u * h; // the first low-nibble element; the high ones 32 further
    uvec4 q = load_w128(w_blk, 16u + 16u * part);
    uvec4 a_lo = load_w128(a_blk, e), a_hi = load_w128(a_blk, e + 32u);
    ivec4 lanes;
    for (uint j = 0u; j < 4u; j++)
        lanes[j] = sc_lo * dot4(q[j] & 0x0f0f0f0fu, a_lo[j]) +
                   sc_hi * dot4((q[j] >> 4) & 0x0f0f0f0fu, a_hi[j]);
    msum = m_lo * q8k_bsum(a_blk, 4u * c + h) + m_hi * q8k_bsum(a_blk, 4u * c + 2u + h);
    return lanes;
}

vec2 block_scales(uint64_t w_blk, uint64_t a_blk) {
    return k_lane_scales(a_blk, load_f16(w_blk, 0u), load_f16(w_blk, 2u));
}
