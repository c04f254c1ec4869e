// matmul_iq4_nl.comp - IQ4_NL weights against Q8_0 activations: isum = sum values[nibble] * q_a,
// d = fp16(w.d) * fp16(a.d), acc = fma(d, isum, acc).
#version 450
#include "common.glsl"
#define NIBBLE_VALUE(n) iq4nl_value(n)
#include "nibble_tables.glsl"

#define QK_ELEMS 32u
#define W_BLOCK_BYTES 18u
#define A_BLOCK_BYTES 34u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    int isum = nibble_run_dot(w_blk + 2u, a_blk + 2u);
    precise float d = load_f16(w_blk, 0u) * load_f16(a_blk, 0u);
    return vec4(d, float(isum), 0.0, 0.0);
}

#include "matmul_blocks.glsl"
