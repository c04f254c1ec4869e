// quantize_q8_0.comp - rows of floats -> Q8_0 activation blocks (q8_0_block), one invocation per block.
#version 450
#include "common.glsl"
#include "quantize_q8.glsl"

#define QK_ELEMS 32u
#define A_BLOCK_BYTES 34u

void quantize_block(F32s x, uint64_t blk) {
    q8_0_block(x, blk);
}

#include "quantize_rows.glsl"
