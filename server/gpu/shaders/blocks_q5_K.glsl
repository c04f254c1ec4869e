// blocks_q5_K.glsl - Q5_K weights against Q8_K activations under quant.h's lane contract
// (kquants.glsl's LANE8, one min sum): Q4_K's codes with bit sb of qh[l] as the fifth bit of
// element l of sub-block sb; the same lane and min sums. Part k (matmul_split.glsl) takes Q4_K's
// part k of qs and qh bytes 16h..16h+15 (h = k % 2): lanes 4h..4h+3; blocks of 176 bytes keep
// 16-byte loads aligned.
#define LANE8
#define LANE8_MINS 1
#include "kquants.glsl"

#define W_BLOCK_BYTES 176u

ivec4 block_lanes(uint64_t w_blk, uint64_t a_blk, uint part, out int msum) {
    uint c = part >> 1, h = part & 1u;
    int sc_lo, m_lo, sc_hi, m_hi;
    k_scale_min(w_blk + 4u, 2u * c, sc_lo, m_lo);
    k_scale_min(w_blk + 4u, 2u * c + 1u, sc_hi, m_hi);
    uint e = 64u * c + 16u * h; // the first low-nibble element; the high ones 32 further
    uvec4 q = load_w128(w_blk, 48u + 16u * part), qh = load_w128(w_blk, 16u + 16u * h);
    uvec4 a_lo = load_w128(a_blk, e), a_hi = load_w128(a_blk, e + 32u);
    ivec4 lanes;
    for (uint j = 0u; j < 4u; j++) {
        uint lo = (q[j] & 0x0f0f0f0fu) | ((qh[j] >> (2u * c)) & 0x01010101u) << 4;
        uint hi = ((q[j] >> 4) & 0x0f0f0f0fu) | ((qh[j] >> (2u * c + 1u)) & 0x01010101u) << 4;
        lanes[j] = sc_lo * dot4(lo, a_lo[j]) + sc_hi * dot4(hi, a_hi[j]);
    }
    msum = m_lo * q8k_bsum(a_blk, 4u * c + h) + m_hi * q8k_bsum(a_blk, 4u * c + 2u + h);
    return lanes;
}

vec2 block_scales(uint64_t w_blk, uint64_t a_blk) {
    return k_lane_scales(a_blk, load_f16(w_blk, 0u), load_f16(w_blk, 2u));
}
