// quantize_q8.glsl - the 32 codes of a Q8_0 / Q8_1 activation block, bit for bit common/quant.c's
// q8_block_from_f32: amax of the block, d = amax / 127 (returned unrounded), codes =
// round-half-even(x * (127 / amax)) at q, zero for an all-zero block; *sum gets the codes' sum.
float q8_codes(F32s x, uint64_t q, out int sum) {
    float amax = 0.0;
    for (int j = 0; j < 32; j++)
        amax = abs(x.v[j]) > amax ? abs(x.v[j]) : amax;
    float id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
    I8s qs = I8s(q);
    sum = 0;
    for (int j = 0; j < 32; j++) {
        precise float v = x.v[j] * id;
        int c = int(roundEven(v));
        sum += c;
        qs.v[j] = int8_t(clamp(c, -128, 127));
    }
    return div_rn(amax, 127.0);
}

// A Q8_0 activation block at blk from 32 floats at x (quant_q8_0_from_f32): d as half.
void q8_0_block(F32s x, uint64_t blk) {
    int sum;
    float d = q8_codes(x, blk + 2u, sum);
    U16s(blk).v[0] = uint16_t(f32_to_fp16(d));
}

// A Q8_1 activation block (quant_q8_1_from_f32): d as half, s = half(d * sum(codes)) of the
// unrounded float d.
void q8_1_block(F32s x, uint64_t blk) {
    int sum;
    float d = q8_codes(x, blk + 4u, sum);
    precise float s = d * float(sum);
    U16s h = U16s(blk);
    h.v[0] = uint16_t(f32_to_fp16(d));
    h.v[1] = uint16_t(f32_to_fp16(s));
}
