// row_held.glsl - what the kernels that hold a row in one workgroup of 256 share (rms_norm.comp,
// swiglu_quant.comp): a row of up to ROW_FAST floats, ROW_REG elements an invocation (elements
// l + 256 j) in registers, and row_s, the row in shared memory, which quantize_tail_row reads
// (quantize_tail.glsl's QUANTIZE_TAIL_ROW). Include after common.glsl, in place of
// quantize_tail.glsl.
#ifndef ROW_HELD_GLSL
#define ROW_HELD_GLSL

#define ROW_REG 16u                 // elements an invocation holds
#define ROW_FAST (ROW_REG * 256u)   // the widest row held
shared float row_s[ROW_FAST];
#define QUANTIZE_TAIL_ROW row_s
#include "quantize_tail.glsl"

#endif
