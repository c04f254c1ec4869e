// kv_blocks.glsl - a K or V row's elements in the cache's type, as block_attn.c's kv_store:
// copied (f32), as IEEE halves (f16, quant.c's f32_to_fp16), or as common/quant.c's weight
// quantizer blocks (quant_quantize_row): q8_0 (d = fp16(amax / 127), codes
// round-half-even(x / d) within -127..127) or q4_0 (d = fp16(max / -8) of the element of largest
// magnitude, nibbles round-half-even(x / d) + 8 within 0..15, element j in the low nibble of byte j
// and element j + 16 in its high one). Shared by kv_store.comp and attn_prep.comp. Include after
// common.glsl and contract.glsl.
#ifndef KV_BLOCKS_GLSL
#define KV_BLOCKS_GLSL

#define KV_F32 0u
#define KV_F16 1u
#define KV_Q8_0 2u
#define KV_Q4_0 3u

// Elements one store takes: 32 for the block kinds, else 1.
uint kv_per(uint kind) {
    return kind >= KV_Q8_0 ? 32u : 1u;
}

// quant.c's signed_absmax over xs: the element of largest magnitude (the first of equals).
float kv_signed_absmax32(float xs[32]) {
    float amax = 0.0, m = 0.0;
    for (uint j = 0u; j < 32u; j++) {
        float v = xs[j];
        if (abs(v) > amax) {
            amax = abs(v);
            m = v;
        }
    }
    return m;
}

// quant.c's inv_or_zero of the half h: 1 / h, 0 for 0.
float kv_inv_half(uint h) {
    float d = fp16_to_f32(h);
    return d != 0.0 ? div_rn(1.0, d) : 0.0;
}

// round_even(v) as an int, clamped to [lo, hi].
int kv_code(float v, int lo, int hi) {
    return clamp(int(roundEven(v)), lo, hi);
}

void kv_store_half(uint64_t at, uint h) {
    U8s b = U8s(at);
    b.v[0] = uint8_t(h & 0xffu);
    b.v[1] = uint8_t(h >> 8);
}

void kv_q8_0_block(float xs[32], uint64_t blk) {
    uint h = f32_to_fp16(div_rn(abs(kv_signed_absmax32(xs)), 127.0));
    float id = kv_inv_half(h);
    kv_store_half(blk, h);
    I8s qs = I8s(blk + 2ul);
    for (uint j = 0u; j < 32u; j++) {
        precise float v = xs[j] * id;
        qs.v[j] = int8_t(kv_code(v, -127, 127));
    }
}

void kv_q4_0_block(float xs[32], uint64_t blk) {
    uint h = f32_to_fp16(div_rn(kv_signed_absmax32(xs), -8.0));
    float id = kv_inv_half(h);
    kv_store_half(blk, h);
    U8s qs = U8s(blk + 2ul);
    for (uint j = 0u; j < 16u; j++) {
        precise float lo = xs[j] * id;
        precise float hi = xs[j + 16u] * id;
        qs.v[j] = uint8_t(uint(kv_code(lo, -8, 7) + 8) | uint(kv_code(hi, -8, 7) + 8) << 4);
    }
}

// Element u of a row at row (f32 or f16 kinds) is x.
void kv_put(uint kind, uint64_t row, uint u, float x) {
    if (kind == KV_F32)
        F32s(row + uint64_t(u) * 4ul).v[0] = x;
    else
        U16s(row + uint64_t(u) * 2ul).v[0] = uint16_t(f32_to_fp16(x));
}

// Block u of a row at row (q8_0 or q4_0 kinds) holds xs.
void kv_put_block(uint kind, uint64_t row, uint u, float xs[32]) {
    if (kind == KV_Q8_0)
        kv_q8_0_block(xs, row + uint64_t(u) * 34ul);
    else
        kv_q4_0_block(xs, row + uint64_t(u) * 18ul);
}

#endif
