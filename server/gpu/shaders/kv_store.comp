// kv_store.comp - K or V rows into a sequence's cache, as block_attn.c's kv_store: token t's kv_dim
// floats become row (pos0 + t) % ring_rows in the cache's type (kv_blocks.glsl). An invocation per
// element (floats) or per 32-element block; tokens on y and z.
#version 450
#include "common.glsl"
#include "rowops.glsl"
#include "kv_blocks.glsl"

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

void main() {
    uint t = grid_row(), u = grid_col();
    uint per = kv_per(p.kind);
    if (t >= p.n_tok || u >= p.kv_dim / per)
        return;
    uint64_t x = p.src + (uint64_t(t) * p.src_stride + uint64_t(u) * per) * 4ul;
    uint64_t row = p.dst + uint64_t((p.pos0 + t) % p.ring_rows) * p.row_bytes;
    if (per == 1u) {
        kv_put(p.kind, row, u, f32_at(x, 0ul));
        return;
    }
    float xs[32];
    for (uint j = 0u; j < 32u; j++)
        xs[j] = f32_at(x, j);
    kv_put_block(p.kind, row, u, xs);
}
