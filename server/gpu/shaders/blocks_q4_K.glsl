// blocks_q4_K.glsl - Q4_K weights against Q8_K activations: per sub-block sb of 32 (its codes the
// low nibbles of qs[32c..32c+31] for sb = 2c, the high ones for sb = 2c + 1) isum += sc * dot,
// msum += m * (bsums[2sb] + bsums[2sb + 1]); kquants.glsl's two fmas. Part k (matmul_split.glsl)
// takes qs bytes 16k..16k+15 (16 bytes): half of sub-blocks 2c and 2c + 1, c = k / 2, and of their
// bsums (sixteen elements each) the two it covers. Blocks of 144 bytes keep 16-byte
// loads aligned.
#include "kquants.glsl"

#define W_BLOCK_BYTES 144u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part) {
    uint c = part >> 1, h = part & 1u;
    int sc_lo, m_lo, sc_hi, m_hi, dot_lo = 0, dot_hi = 0;
    k_scale_min(w_blk + 4u, 2u * c, sc_lo, m_lo);
    k_scale_min(w_blk + 4u, 2u * c + 1u, sc_hi, m_hi);
    uint e = 64u * c + 16u * h; // the first low-nibble element; the high ones 32 further
    uvec4 q = load_w128(w_blk, 16u + 16u * part);
    uvec4 a_lo = load_w128(a_blk, e), a_hi = load_w128(a_blk, e + 32u);
    for (uint j = 0u; j < 4u; j++) {
        dot_lo += dot4(q[j] & 0x0f0f0f0fu, a_lo[j]);
        dot_hi += dot4((q[j] >> 4) & 0x0f0f0f0fu, a_hi[j]);
    }
    int msum = m_lo * q8k_bsum(a_blk, 4u * c + h) + m_hi * q8k_bsum(a_blk, 4u * c + 2u + h);
    return ivec2(sc_lo * dot_lo + sc_hi * dot_hi, msum);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return k_affine_terms(a_blk, load_f16(w_blk, 0u), load_f16(w_blk, 2u), s.x, s.y);
}

#define TWO_TERMS
