// quantize_q8_K.comp - rows of floats -> the engine's Q8_K activation blocks (quant.h: 256 codes,
// 16 bsums, d, zero pad; 320 bytes), bit for bit quant_q8_K_from_f32: the element of largest
// magnitude (first on ties) sets iscale = -127 / max, codes = min(127, round-half-even(iscale *
// x)), d = 1 / iscale, bsums = sums of 16 codes; an all-zero block is all zero. One invocation per
// block.
#version 450
#include "common.glsl"

#define QK_ELEMS 256u
#define A_BLOCK_BYTES 320u

void quantize_block(F32s x, uint64_t blk) {
    float amax = 0.0, max_ = 0.0;
    for (int j = 0; j < 256; j++)
        if (abs(x.v[j]) > amax) {
            amax = abs(x.v[j]);
            max_ = x.v[j];
        }
    U32s words = U32s(blk);
    for (uint i = 0u; i < 80u; i++)
        words.v[i] = 0u;
    if (max_ == 0.0)
        return;
    float iscale = div_rn(-127.0, max_);
    I8s qs = I8s(blk);
    I16s bsums = I16s(blk + 256u);
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int j = 16 * g; j < 16 * g + 16; j++) {
            precise float v = iscale * x.v[j];
            int c = min(int(roundEven(v)), 127);
            qs.v[j] = int8_t(c);
            sum += c;
        }
        bsums.v[g] = int16_t(sum);
    }
    F32s(blk + 288u).v[0] = div_rn(1.0, iscale);
}

#include "quantize_rows.glsl"
