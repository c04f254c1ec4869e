// quantize_q8_0.comp - rows of floats -> Q8_0 activation blocks (quant_q8_0_from_f32): the codes
// of quantize_q8.glsl, d stored as half. One invocation per block.
#version 450
#include "common.glsl"
#include "quantize_q8.glsl"

#define QK_ELEMS 32u
#define A_BLOCK_BYTES 34u

void quantize_block(F32s x, uint64_t blk) {
    int sum;
    float d = q8_codes(x, blk + 2u, sum);
    U16s(blk).v[0] = uint16_t(f32_to_fp16(d));
}

#include "quantize_rows.glsl"
