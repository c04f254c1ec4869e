// kv_store.comp - K or V rows into a sequence's cache, as block_attn.c's kv_store: token t's kv_dim
// floats become row (pos0 + t) % ring_rows, copied (f32), as IEEE halves (f16, quant.c's
// f32_to_fp16), or as common/quant.c's weight quantizer blocks (quant_quantize_row): q8_0 (d =
// fp16(amax / 127), codes round-half-even(x / d) within -127..127) or q4_0 (d = fp16(max / -8) of
// the element of largest magnitude, nibbles round-half-even(x / d) + 8 within 0..15, element j in
// the low nibble of byte j and element j + 16 in its high one). An invocation per element (floats)
// or per 32-element block; tokens on y and z.
#version 450
#include "common.glsl"
#include "rowops.glsl"

#define KV_F32 0u
#define KV_F16 1u
#define KV_Q8_0 2u
#define KV_Q4_0 3u

layout(push_constant) uniform Push {
    uint64_t src;        // token t's floats at src + t src_stride floats
    uint64_t dst;        // the cache's row 0; rows row_bytes apart
    uint src_stride;
    uint row_bytes;
    uint ring_rows;
    uint pos0;
    uint kv_dim;
    uint n_tok;
    uint kind;           // KV_*
} p;

// quant.c's signed_absmax over x[0 .. 32): the element of largest magnitude (the first of equals).
float signed_absmax32(uint64_t x) {
    float amax = 0.0, m = 0.0;
    for (uint j = 0u; j < 32u; j++) {
        float v = f32_at(x, j);
        if (abs(v) > amax) {
            amax = abs(v);
            m = v;
        }
    }
    return m;
}

// quant.c's inv_or_zero of the half h: 1 / h, 0 for 0.
float inv_half(uint h) {
    float d = fp16_to_f32(h);
    return d != 0.0 ? div_rn(1.0, d) : 0.0;
}

// round_even(v) as an int, clamped to [lo, hi].
int code(float v, int lo, int hi) {
    return clamp(int(roundEven(v)), lo, hi);
}

void store_half(uint64_t at, uint h) {
    U8s b = U8s(at);
    b.v[0] = uint8_t(h & 0xffu);
    b.v[1] = uint8_t(h >> 8);
}

void q8_0_block(uint64_t x, uint64_t blk) {
    uint h = f32_to_fp16(div_rn(abs(signed_absmax32(x)), 127.0));
    float id = inv_half(h);
    store_half(blk, h);
    I8s qs = I8s(blk + 2ul);
    for (uint j = 0u; j < 32u; j++) {
        precise float v = f32_at(x, j) * id;
        qs.v[j] = int8_t(code(v, -127, 127));
    }
}

void q4_0_block(uint64_t x, uint64_t blk) {
    uint h = f32_to_fp16(div_rn(signed_absmax32(x), -8.0));
    float id = inv_half(h);
    store_half(blk, h);
    U8s qs = U8s(blk + 2ul);
    for (uint j = 0u; j < 16u; j++) {
        precise float lo = f32_at(x, j) * id;
        precise float hi = f32_at(x, j + 16u) * id;
        qs.v[j] = uint8_t(uint(code(lo, -8, 7) + 8) | uint(code(hi, -8, 7) + 8) << 4);
    }
}

void main() {
    uint t = grid_row(), u = grid_col();
    uint per = p.kind >= KV_Q8_0 ? 32u : 1u;
    if (t >= p.n_tok || u >= p.kv_dim / per)
        return;
    uint64_t x = p.src + (uint64_t(t) * p.src_stride + uint64_t(u) * per) * 4ul;
    uint64_t row = p.dst + uint64_t((p.pos0 + t) % p.ring_rows) * p.row_bytes;
    if (p.kind == KV_F32)
        F32s(row + uint64_t(u) * 4ul).v[0] = f32_at(x, 0ul);
    else if (p.kind == KV_F16)
        U16s(row + uint64_t(u) * 2ul).v[0] = uint16_t(f32_to_fp16(f32_at(x, 0ul)));
    else if (p.kind == KV_Q8_0)
        q8_0_block(x, row + uint64_t(u) * 34ul);
    else
        q4_0_block(x, row + uint64_t(u) * 18ul);
}
