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
