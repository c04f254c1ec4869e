// blocks_q6_K.glsl - Q6_K weights against Q8_K activations under quant.h's lane contract
// (kquants.glsl's LANE8, no min accumulators): element 128h + 32k + l takes its low 4 bits from
// ql[64h + l + 32(k & 1)] (low nibble for k < 2) and its top 2 from bits 2k..2k+1 of qh[32h + l]
// (common/quant.c's q6_K_code: the stored code q, 0..63); lane l' += scales[e / 16] * q * a over
// its elements e (e % 32 in 4l'..4l'+3), and lane l' -= 32 * (scales[2l'] * bsums[2l'] +
// scales[2l' + 1] * bsums[2l' + 1]) (the codes' offset, taken where ggml's kernel takes it).
// Part k (matmul_split.glsl) = 2c + h', c = 2h + kk: l = 16h'..16h'+15 of k = kk (low nibbles)
// and of k = kk + 2 (high nibbles) in half h, so lanes 4h'..4h'+3 (word j of the 16 bytes: lane
// 4h' + j), from 16 bytes of ql at 64h + 32kk + 16h' and 16 of qh at 32h + 16h'; and lane
// 4h' + c's offset term, so each lane's once (the parts of lanes 4h'..4h'+3 are c = 0..3).
// Blocks of 210 bytes keep only halves aligned: the weights' words are read as two halves.
#define LANE8
#define LANE8_MINS 0
#include "kquants.glsl"

#define W_BLOCK_BYTES 210u

ivec4 block_lanes(uint64_t w_blk, uint64_t a_blk, uint part, out int msum) {
    uint hl = part & 1u, c = part >> 1, h = c >> 1, kk = c & 1u;
    I8s sc = I8s(w_blk + 192u);
    int sc_lo = int(sc.v[8u * h + 2u * kk + hl]), sc_hi = int(sc.v[8u * h + 2u * kk + 4u + hl]);
    uint e = 128u * h + 32u * kk + 16u * hl; // the low nibbles' first element; the high ones 64 on
    uvec4 a_lo = load_w128(a_blk, e), a_hi = load_w128(a_blk, e + 64u);
    ivec4 lanes;
    for (uint j = 0u; j < 4u; j++) {
        uint ql = load_w32_a2(w_blk, 64u * h + 32u * kk + 16u * hl + 4u * j);
        uint qh = load_w32_a2(w_blk, 128u + 32u * h + 16u * hl + 4u * j);
        uint lo = (ql & 0x0f0f0f0fu) | ((qh >> (2u * kk)) & 0x03030303u) << 4;
        uint hi = ((ql >> 4) & 0x0f0f0f0fu) | ((qh >> (2u * kk + 4u)) & 0x03030303u) << 4;
        lanes[j] = sc_lo * dot4(lo, a_lo[j]) + sc_hi * dot4(hi, a_hi[j]);
    }
    uint l = 4u * hl + c; // the lane whose offset term this part takes
    lanes[c] -= 32 * (int(sc.v[2u * l]) * q8k_bsum(a_blk, 2u * l) +
                      int(sc.v[2u * l + 1u]) * q8k_bsum(a_blk, 2u * l + 1u));
    msum = 0; // LANE8_MINS 0: no min sums
    return lanes;
}

vec2 block_scales(uint64_t w_blk, uint64_t a_blk) {
    precise float d = q8k_d(a_blk) * load_f16(w_blk, 208u);
    return vec2(d, 0.0); // no dmin (LANE8_MINS 0)
}
