// blocks_q5_K.glsl - Q5_K weights against Q8_K activations: Q4_K's codes with bit sb of qh[l] as
// the fifth bit of element l of sub-block sb; the same sums and fmas. Part k (matmul_split.glsl)
// takes Q4_K's part k of qs and qh bytes 16h..16h+15 (h = k % 2); blocks of 176 bytes keep 16-byte
// loads aligned.
#include "kquants.glsl"

#define W_BLOCK_BYTES 176u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part) {
    uint c = part >> 1, h = part & 1u;
    int sc_lo, m_lo, sc_hi, m_hi, dot_lo = 0, dot_hi = 0;
    k_scale_min(w_blk + 4u, 2u * c, sc_lo, m_lo);
    k_scale_min(w_blk + 4u, 2u * c + 1u, sc_hi, m_hi);
    uint e = 64u * c + 16u * h; // the first low-nibble element; the high ones 32 further
    uvec4 q = load_w128(w_blk, 48u + 16u * part), qh = load_w128(w_blk, 16u + 16u * h);
    uvec4 a_lo = load_w128(a_blk, e), a_hi = load_w128(a_blk, e + 32u);
    for (uint j = 0u; j < 4u; j++) {
        uint lo = (q[j] & 0x0f0f0f0fu) | ((qh[j] >> (2u * c)) & 0x01010101u) << 4;
        uint hi = ((q[j] >> 4) & 0x0f0f0f0fu) | ((qh[j] >> (2u * c + 1u)) & 0x01010101u) << 4;
        dot_lo += dot4(lo, a_lo[j]);
        dot_hi += dot4(hi, a_hi[j]);
    }
    int msum = m_lo * q8k_bsum(a_blk, 4u * c + h) + m_hi * q8k_bsum(a_blk, 4u * c + 2u + h);
    return ivec2(sc_lo * dot_lo + sc_hi * dot_hi, msum);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return k_affine_terms(a_blk, load_f16(w_blk, 0u), load_f16(w_blk, 2u), s.x, s.y);
}

#define TWO_TERMS
