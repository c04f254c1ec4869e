// quantize_tail.glsl - a row op's last step, so that the next product needs no quantizer of its
// own: the workgroup of 256 that has just written a row of n floats at x writes it again,
// quantized into the activation format fmt at dst, with the bits gpu_op_quantize writes
// (quantize_q8.glsl's Q8_0 / Q8_1 blocks, quantize_q8_K.glsl's Q8_K blocks four at a time, the
// f16 / bf16 conversions). Every invocation calls quantize_tail (it holds barriers). Include after
// common.glsl; the formats are gpu_rowops.c's enum quant_fmt.
#ifndef QUANTIZE_TAIL_GLSL
#define QUANTIZE_TAIL_GLSL

#define QFMT_NONE 0u
#define QFMT_Q8_0 1u
#define QFMT_Q8_1 2u
#define QFMT_Q8_K 3u
#define QFMT_F16 4u
#define QFMT_BF16 5u

#define Q8K_SLOTS 4u
#include "quantize_q8.glsl"
#include "quantize_q8_K.glsl"

void quantize_tail(uint64_t x, uint n, uint fmt, uint64_t dst, uint l) {
    if (fmt == QFMT_NONE)
        return;
    memoryBarrierBuffer(); // the row's writes, read below by other invocations
    barrier();
    if (fmt == QFMT_Q8_K) {
        uint nb = n / 256u;
        for (uint b0 = 0u; b0 < nb; b0 += Q8K_SLOTS) {
            uint b = b0 + l / 64u;
            q8K_block(F32s(x + uint64_t(b) * 1024u), dst + uint64_t(b) * 320u, l % 64u, l / 64u,
                      b < nb);
        }
    } else if (fmt == QFMT_Q8_0 || fmt == QFMT_Q8_1) {
        for (uint b = l; b < n / 32u; b += 256u)
            if (fmt == QFMT_Q8_0)
                q8_0_block(F32s(x + uint64_t(b) * 128u), dst + uint64_t(b) * 34u);
            else
                q8_1_block(F32s(x + uint64_t(b) * 128u), dst + uint64_t(b) * 36u);
    } else {
        for (uint i = l; i < n; i += 256u) {
            float v = F32s(x).v[i];
            U16s(dst).v[i] = uint16_t(fmt == QFMT_F16 ? f32_to_fp16(v) : f32_to_bf16(v));
        }
    }
}

#endif
