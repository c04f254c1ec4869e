// blocks_mxfp4.glsl - MXFP4 weights against Q8_0 activations: isum = sum values[nibble] * q_a
// (doubled e2m1), d = e8m0_half(w.e) * fp16(a.d), acc = fma(d, isum, acc).
#define NIBBLE_VALUE(n) mxfp4_value(n)
#include "nibble_tables.glsl"

#define QK_ELEMS 32u
#define W_BLOCK_BYTES 17u
#define A_BLOCK_BYTES 34u

// 2^(e - 128) as float bits, a subnormal for e < 2 (common/quant.c's quant_e8m0_half).
float e8m0_half(uint e) {
    return uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
}

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    int isum = nibble_run_dot(w_blk + 1u, a_blk + 2u);
    precise float d = e8m0_half(load_u8(w_blk, 0u)) * load_f16(a_blk, 0u);
    return vec4(d, float(isum), 0.0, 0.0);
}
