// quantize_tail.glsl - a row op's last step, so that the next product needs no quantizer of its
// own: the workgroup of 256 that has just written a row of n floats at x writes it again,
// quantized into the activation format fmt at dst, with the bits gpu_op_quantize writes
// (quantize_q8.glsl's Q8_0 / Q8_1 blocks, quantize_q8_K.glsl's Q8_K blocks four at a time, the
// f16 / bf16 conversions). Every invocation calls quantize_tail (it holds barriers). Include after
// common.glsl; the formats are gpu_rowops.c's enum quant_fmt. An includer that keeps the row in
// a shared float array too (its elements 0 .. n - 1 written by the workgroup before the call)
// defines QUANTIZE_TAIL_ROW as its name first and calls quantize_tail_row instead: the Q8_K and
// f16 / bf16 rows are then read from there, not from memory (the Q8_0 / Q8_1 ones still from x).
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

#ifdef QUANTIZE_TAIL_ROW
#define QT_AT(x, i, shared_row) ((shared_row) ? QUANTIZE_TAIL_ROW[i] : F32s(x).v[i])
#else
#define QT_AT(x, i, shared_row) F32s(x).v[i]
#endif

// The tail, the row read from QUANTIZE_TAIL_ROW where shared_row (the includer defines it), else
// from x.
void quantize_tail_from(uint64_t x, uint n, uint fmt, uint64_t dst, uint l, bool shared_row) {
    if (fmt == QFMT_NONE)
        return;
    if (!shared_row || fmt == QFMT_Q8_0 || fmt == QFMT_Q8_1)
        memoryBarrierBuffer(); // the row's writes, read below by other invocations
    memoryBarrierShared();
    barrier();
    if (fmt == QFMT_Q8_K) {
        uint nb = n / 256u;
        for (uint b0 = 0u; b0 < nb; b0 += Q8K_SLOTS) {
            uint b = b0 + l / 64u, e = b * 256u + 4u * (l % 64u);
            vec4 v = vec4(0.0);
            if (b < nb)
                v = vec4(QT_AT(x, e, shared_row), QT_AT(x, e + 1u, shared_row),
                         QT_AT(x, e + 2u, shared_row), QT_AT(x, e + 3u, shared_row));
            q8K_block_v(v, dst + uint64_t(b) * 320u, l % 64u, l / 64u, b < nb);
        }
    } else if (fmt == QFMT_Q8_0 || fmt == QFMT_Q8_1) {
        for (uint b = l; b < n / 32u; b += 256u)
            if (fmt == QFMT_Q8_0)
                q8_0_block(F32s(x + uint64_t(b) * 128u), dst + uint64_t(b) * 34u);
            else
                q8_1_block(F32s(x + uint64_t(b) * 128u), dst + uint64_t(b) * 36u);
    } else {
        for (uint i = l; i < n; i += 256u) {
            float v = QT_AT(x, i, shared_row);
            U16s(dst).v[i] = uint16_t(fmt == QFMT_F16 ? f32_to_fp16(v) : f32_to_bf16(v));
        }
    }
}

void quantize_tail(uint64_t x, uint n, uint fmt, uint64_t dst, uint l) {
    quantize_tail_from(x, n, fmt, dst, l, false);
}

#ifdef QUANTIZE_TAIL_ROW
void quantize_tail_row(uint64_t x, uint n, uint fmt, uint64_t dst, uint l) {
    quantize_tail_from(x, n, fmt, dst, l, true);
}
#endif

#endif
