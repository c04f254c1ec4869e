// attn_prep.comp - the attention's prologue in one kernel, block_attn.c's qk_rope_store per
// (token, head): a query head's RMS norm (with q_norm's weight; none where q_norm is 0) then RoPE
// in place; a KV head's K norm (k_norm) then RoPE, V's norm without a weight (V_NORM), or V as K's
// projection normalised without a weight (V_FROM_K: gemma4's layers without attn_v, from the
// same sum of squares as K's norm), then both rows stored at row (pos0 + t) % ring_rows of the
// cache in its type (kv_blocks.glsl). Each step is ops_rms_norm's (the 32 lanes, rms_scale_c, (x *
// scale) * w), ops_rope_neox's or ops_rope_norm's (rope_pair_c) and kv_store's, in that order, on
// the head's row held in shared memory: the bits of rms_norm.comp, rope.comp and kv_store.comp
// run one after the other, with no barrier between dispatches. A workgroup of 64 per head: the
// n_head query heads, then the n_head_kv KV heads, on x; tokens on y and z. The K and V rows are
// read and stored in the cache; their source rows are not written back. The head's weight and
// its RoPE table are loaded with its row (head_load), before the first barrier: no memory round
// trip waits between the steps.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#include "common.glsl"
#include "rowops.glsl"
#include "kv_blocks.glsl"

#define HEAD_MAX 512u          // gpu_rowops.c's ATTN_PREP_HEAD_MAX
#define FLAG_NEOX 1u
#define V_NONE 0u              // flags >> 1 & 3: V stored as it is
#define V_NORM 1u              // V normalised without a weight
#define V_FROM_K 2u            // V is K's projection normalised without a weight

layout(push_constant) uniform Push {
    uint64_t q;          // query head h of token t at q + t q_tok_stride + h q_head_stride floats
    uint64_t k;          // KV head j of token t at k + t kv_stride + j head_dim floats
    uint64_t v;          // the same for V (unread with V_FROM_K)
    uint64_t q_norm;     // head_dim floats, or 0: no query norm
    uint64_t k_norm;     // head_dim floats, or 0: no key norm
    uint64_t cs;         // token t's RoPE table at cs + t n_rot floats: (cos, sin) per pair
    uint64_t kc;         // the cache's K row 0, rows row_bytes apart
    uint64_t vc;         // and its V row 0
    double inv_n;        // 1.0 / head_dim, rounded on the CPU
    uint q_tok_stride;
    uint q_head_stride;
    uint kv_stride;
    uint n_head;
    uint n_head_kv;      // 0: the queries only (a layer reading another's KV)
    uint head_dim;
    uint n_rot;
    uint row_bytes;
    uint ring_rows;
    uint pos0;
    uint n_tok;
    uint flags;          // FLAG_NEOX | V_* << 1 | KV_* << 3
    float eps;
} p;

shared float xs[HEAD_MAX];     // the head's row: the query or K
shared float vs[HEAD_MAX];     // V's row
shared float ws[HEAD_MAX];     // the norm's weight of xs's row (q_norm or k_norm), where not 0
shared float css[HEAD_MAX];    // token t's RoPE table: (cos, sin) of pair i at 2i, 2i + 1
shared double lanes[32];

// ops_rms_norm's scale of the row in xs (of_v false) or vs: the 32 lanes' double sums of the
// squares, folded. Every invocation calls it; the rows were written before a barrier.
float head_scale(bool of_v, uint l) {
    if (l < 32u) {
        double acc = 0.0LF;
        for (uint i = l; i < p.head_dim; i += 32u) {
            float x = of_v ? vs[i] : xs[i];
            precise float q = x * x;
            precise double s = acc + double(q);
            acc = s;
        }
        lanes[l] = acc;
    }
    LANES_FOLD(lanes, l)
    float scale = rms_scale_c(lanes[0], p.inv_n, p.eps);
    barrier(); // every invocation has read lanes[0] before the next sum writes it
    return scale;
}

// xs (or vs) = (row * scale) * w (w 0: row * scale; else its floats are in ws), each element by
// the invocation that reads it.
void head_apply(bool of_v, float scale, uint64_t w, uint l) {
    for (uint i = l; i < p.head_dim; i += 64u) {
        precise float v = (of_v ? vs[i] : xs[i]) * scale;
        if (w != 0ul) {
            precise float vw = v * ws[i];
            v = vw;
        }
        if (of_v)
            vs[i] = v;
        else
            xs[i] = v;
    }
}

// RoPE of xs by token t's table (in css), then a barrier.
void head_rope(uint l) {
    uint half_ = p.n_rot / 2u;
    bool neox = (p.flags & FLAG_NEOX) != 0u;
    for (uint i = l; i < half_; i += 64u) {
        uint i0 = neox ? i : 2u * i, i1 = neox ? i + half_ : 2u * i + 1u;
        vec2 r = rope_pair_c(xs[i0], xs[i1], css[2u * i], css[2u * i + 1u]);
        xs[i0] = r.x;
        xs[i1] = r.y;
    }
    barrier();
}

// Head j's elements of the cache row at row, from xs (of_v false) or vs.
void head_store(bool of_v, uint64_t row, uint j, uint l) {
    uint kind = p.flags >> 3 & 3u, per = kv_per(kind), n = p.head_dim / per;
    uint first = j * n; // the head's first element (or block) of the row
    for (uint u = l; u < n; u += 64u) {
        if (per == 1u) {
            kv_put(kind, row, first + u, of_v ? vs[u] : xs[u]);
            continue;
        }
        float b[32];
        for (uint e = 0u; e < 32u; e++)
            b[e] = of_v ? vs[u * 32u + e] : xs[u * 32u + e];
        kv_put_block(kind, row, first + u, b);
    }
}

// Loads the head's weight w (0: none) into ws and token t's RoPE table into css, each element by
// one invocation, with the loads of the row (before the caller's barrier).
void head_load(uint t, uint64_t w, uint l) {
    F32s cs = F32s(p.cs + uint64_t(t) * p.n_rot * 4u), wv = F32s(w);
    for (uint i = l; i < p.head_dim; i += 64u) {
        if (w != 0ul)
            ws[i] = wv.v[i];
        if (i < p.n_rot)
            css[i] = cs.v[i];
    }
}

void query_head(uint t, uint h, uint l) {
    F32s q = F32s(p.q + (uint64_t(t) * p.q_tok_stride + uint64_t(h) * p.q_head_stride) * 4u);
    head_load(t, p.q_norm, l);
    for (uint i = l; i < p.head_dim; i += 64u)
        xs[i] = q.v[i];
    barrier();
    if (p.q_norm != 0ul) {
        head_apply(false, head_scale(false, l), p.q_norm, l);
        barrier();
    }
    head_rope(l);
    for (uint i = l; i < p.head_dim; i += 64u)
        q.v[i] = xs[i];
}

void kv_head(uint t, uint j, uint l) {
    uint vmode = p.flags >> 1 & 3u;
    uint64_t off = (uint64_t(t) * p.kv_stride + uint64_t(j) * p.head_dim) * 4u;
    F32s k = F32s(p.k + off), v = F32s(p.v + off);
    head_load(t, p.k_norm, l);
    for (uint i = l; i < p.head_dim; i += 64u) {
        xs[i] = k.v[i];
        vs[i] = vmode == V_FROM_K ? k.v[i] : v.v[i];
    }
    barrier();
    if (vmode == V_FROM_K) { // one sum of squares for both: the same scale
        float scale = head_scale(false, l);
        head_apply(true, scale, 0ul, l);
        if (p.k_norm != 0ul)
            head_apply(false, scale, p.k_norm, l);
    } else {
        if (p.k_norm != 0ul)
            head_apply(false, head_scale(false, l), p.k_norm, l);
        if (vmode == V_NORM)
            head_apply(true, head_scale(true, l), 0ul, l);
    }
    barrier();
    head_rope(l);
    uint64_t row = uint64_t((p.pos0 + t) % p.ring_rows) * p.row_bytes;
    head_store(false, p.kc + row, j, l);
    head_store(true, p.vc + row, j, l);
}

void main() {
    uint t = grid_row(), h = gl_WorkGroupID.x, l = gl_LocalInvocationID.x;
    if (t >= p.n_tok || h >= p.n_head + p.n_head_kv) // the whole workgroup leaves together
        return;
    if (h < p.n_head)
        query_head(t, h, l);
    else
        kv_head(t, h - p.n_head, l);
}
