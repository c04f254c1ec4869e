// quantize_bf16.comp - rows of floats -> bfloat16 rounded to nearest even (quant_bf16_from_f32),
// the activations of BF16 weights. One invocation per element.
#version 450
#include "common.glsl"

#define QK_ELEMS 1u
#define A_BLOCK_BYTES 2u

void quantize_block(F32s x, uint64_t blk) {
    U16s(blk).v[0] = uint16_t(f32_to_bf16(x.v[0]));
}

#include "quantize_rows.glsl"
