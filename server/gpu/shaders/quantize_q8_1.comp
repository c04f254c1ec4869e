// quantize_q8_1.comp - rows of floats -> Q8_1 activation blocks (quant_q8_1_from_f32): the codes
// of quantize_q8.glsl, d as half, s = half(d * sum(codes)) of the unrounded float d. One
// invocation per block.
#version 450
#include "common.glsl"
#include "quantize_q8.glsl"

#define QK_ELEMS 32u
#define A_BLOCK_BYTES 36u

void quantize_block(F32s x, uint64_t blk) {
    int sum;
    float d = q8_codes(x, blk + 4u, sum);
    precise float s = d * float(sum);
    U16s h = U16s(blk);
    h.v[0] = uint16_t(f32_to_fp16(d));
    h.v[1] = uint16_t(f32_to_fp16(s));
}

#include "quantize_rows.glsl"
