// blocks_iq4_xs.glsl - IQ4_XS weights against Q8_K activations: per sub-block j of 32, isum +=
// (6-bit scale - 32) * the IQ4_NL nibble-run dot; acc = fma(a.d * fp16(w.d), isum, acc). Part j
// (matmul_split.glsl) is sub-block j: qs bytes 16j..16j+15 as two 8-byte loads (blocks of 136
// bytes keep them aligned).
#include "kquants.glsl"
#define NIBBLE_VALUE(n) iq4nl_value(n)
#include "nibble_tables.glsl"

#define W_BLOCK_BYTES 136u

ivec2 block_isums(uint64_t w_blk, uint64_t a_blk, uint part) {
    uint lo = (load_u8(w_blk, 4u + part / 2u) >> (4u * (part & 1u))) & 15u;
    uint hi = (load_le16(w_blk, 2u) >> (2u * part)) & 3u;
    int dot = 0;
    uvec4 q = uvec4(load_w64(w_blk, 8u + 16u * part), load_w64(w_blk, 16u + 16u * part));
    uvec4 a_lo = load_w128(a_blk, 32u * part), a_hi = load_w128(a_blk, 32u * part + 16u);
    for (uint j = 0u; j < 4u; j++) {
        for (uint b = 0u; b < 32u; b += 8u) {
            dot += NIBBLE_VALUE((q[j] >> b) & 15u) * bitfieldExtract(int(a_lo[j]), int(b), 8);
            dot += NIBBLE_VALUE((q[j] >> (b + 4u)) & 15u) * bitfieldExtract(int(a_hi[j]), int(b), 8);
        }
    }
    return ivec2((int(lo | hi << 4) - 32) * dot, 0);
}

vec4 block_float_terms(uint64_t w_blk, uint64_t a_blk, ivec2 s) {
    return k_terms(a_blk, load_f16(w_blk, 0u), s.x);
}
