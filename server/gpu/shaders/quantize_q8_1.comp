// quantize_q8_1.comp - rows of floats -> Q8_1 activation blocks (q8_1_block), one invocation per block.
#version 450
#include "common.glsl"
#include "quantize_q8.glsl"

#define QK_ELEMS 32u
#define A_BLOCK_BYTES 36u

void quantize_block(F32s x, uint64_t blk) {
    q8_1_block(x, blk);
}

#include "quantize_rows.glsl"
