// rope.comp - RoPE in place from ops_rope_cache's table: ops_rope_neox (pairs i, i + n_rot / 2) or
// ops_rope_norm (pairs 2i, 2i + 1) bit for bit, each product rounded before its sum. One
// invocation per pair of one head: a token's n_head * n_rot / 2 pairs on x, tokens on y and z.
#version 450
#include "common.glsl"
#include "rowops.glsl"

layout(push_constant) uniform Push {
    uint64_t x;          // head h of token t at x + t tok_stride + h head_stride floats
    uint64_t cs;         // token t's table at cs + t n_rot floats: (cos, sin) per pair
    uint tok_stride;
    uint head_stride;
    uint n_head;
    uint n_rot;
    uint n_tok;
    uint neox;           // 1: neox pairs, 0: normal pairs
} p;

void main() {
    uint t = grid_row(), half_ = p.n_rot / 2u, q = grid_col();
    if (t >= p.n_tok || q >= p.n_head * half_)
        return;
    uint h = q / half_, i = q % half_;
    F32s x = F32s(p.x + (uint64_t(t) * p.tok_stride + uint64_t(h) * p.head_stride) * 4u);
    F32s cs = F32s(p.cs + uint64_t(t) * p.n_rot * 4u);
    float c = cs.v[2u * i], s = cs.v[2u * i + 1u];
    uint i0 = p.neox != 0u ? i : 2u * i, i1 = p.neox != 0u ? i + half_ : 2u * i + 1u;
    float x0 = x.v[i0], x1 = x.v[i1];
    vec2 r = rope_pair_c(x0, x1, c, s);
    x.v[i0] = r.x;
    x.v[i1] = r.y;
}
