// attn_vsum.glsl - the attention's weighted sum of V rows, the softmax's probabilities taken from
// the scores as they are read (attn_softmax.glsl; every workgroup of a head computes its row's
// maximum and sum first): out[d] = 0, then out[d] + p_j v_j[d]
// for the positions j in order (ops_axpy_*: a product, then a sum, each rounded), so each output
// element is one chain of adds. A workgroup takes 32 elements of one (token, head) (element chunks
// on x, heads on y, tokens on z). Its first 32 invocations run the 32 chains over a chunk of 112
// positions' products in shared memory; meanwhile the other 224 (seven "maker" warps) write the
// next chunk's products into the other half of the double buffer, from values they loaded during
// the chunk before, and load the chunk after it: a load has a whole chunk's time to arrive. A
// chunk's 112 probabilities are computed once, one by each of the first 112 makers, into a shared
// double buffer (probs) a chunk ahead of their products: each exp_c is on one invocation's path,
// not four or sixteen in a row on every maker's. A warp's 32 invocations read one row's 32
// elements (coalesced). What a maker loads is kept as it was read and converted to floats only
// when its products are made, a chunk later: converted as they were loaded, the loads were waited
// for in the chunk that issued them (2 us a chunk of F16 rows on the H200, the load's latency).
// A kernel defines
//     uint v_raw(uint64_t row, uint d)   what element d of a head's V row is made from, one load
//     float v_of(uint raw, uint d)       element d as float, from its v_raw
// or V4_AT and
//     uvec4 v4_raw(uint64_t row, uint m) what elements 4m .. 4m + 3 are made from, one load (the
//                                        float types: a warp then reads four rows' 32 elements,
//                                        four loads an invocation a chunk instead of 16)
//     vec4 v4_of(uvec4 raw)              the four as floats
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;

#define VSUM_DIMS 32u
#define VSUM_MAKERS 7u                           // warps computing products
#define VSUM_CHUNK (VSUM_MAKERS * 16u)           // positions a chunk: 16 per maker invocation

shared float prod[2u * VSUM_CHUNK * VSUM_DIMS];
shared float probs[2u * VSUM_CHUNK]; // chunk c's probabilities at ((c / VSUM_CHUNK) % 2) VSUM_CHUNK
#define SOFTMAX_SCRATCH prod // the softmax's statistics are done before the first products
#include "attn_softmax.glsl"

// What a maker invocation (warp w of the makers, element dd of the 32) works with.
struct vsum_maker {
    uint w, dd, d, n, first_row;
    uint64_t vbase;                 // the head's bytes of V row 0
    F32s pr;                        // the head's scores
    float mx, inv;                  // their softmax's (attn_softmax_stats)
    uint vj[16];                    // the loaded chunk as read (v_raw, v4_raw): positions c + w + 7 k
};

// Chunk c's probabilities into its half of probs, one by each maker invocation u < VSUM_CHUNK
// (positions past the end: 0, never read into a product).
void vsum_probs(in vsum_maker m, uint c) {
    uint u = VSUM_DIMS * m.w + m.dd;
    if (u < VSUM_CHUNK)
        probs[((c / VSUM_CHUNK) & 1u) * VSUM_CHUNK + u] =
            c + u < m.n ? attn_prob(m.pr.v[c + u], m.mx, m.inv) : 0.0;
}

// The probability of chunk c's position c + jj (vsum_probs made it a chunk before).
float vsum_prob(uint c, uint jj) {
    return probs[((c / VSUM_CHUNK) & 1u) * VSUM_CHUNK + jj];
}

#ifdef V4_AT
// Loads chunk c's V elements four at a time (v4_raw; its probabilities: vsum_probs): maker
// invocation u = 32 w + dd takes loads u + 224 q (q < 4) of the chunk's 112 rows x 8 loads, row
// u / 8, elements 4 (u % 8) ..; positions past the end read the last one (every load is
// unconditional).
void vsum_load(inout vsum_maker m, uint c) {
    uint u = VSUM_DIMS * m.w + m.dd;
    [[unroll]] for (uint q = 0u; q < 4u; q++) {
        uint x = u + VSUM_MAKERS * VSUM_DIMS * q, jj = x / 8u, e = 4u * (x % 8u);
        uint j = min(c + jj, m.n - 1u), d = min(m.d - m.dd + e, p.head_dim - 4u);
        uvec4 v = v4_raw(m.vbase + uint64_t(attn_ring_row(m.first_row, j)) * p.row_bytes, d / 4u);
        [[unroll]] for (uint k = 0u; k < 4u; k++)
            m.vj[4u * q + k] = v[k];
    }
}

// Chunk c's products, from what vsum_load loaded, into half (c / VSUM_CHUNK) % 2 of prod (0 past
// the end).
void vsum_store(in vsum_maker m, uint c) {
    uint half_ = (c / VSUM_CHUNK) & 1u, u = VSUM_DIMS * m.w + m.dd;
    [[unroll]] for (uint q = 0u; q < 4u; q++) {
        uint x = u + VSUM_MAKERS * VSUM_DIMS * q, jj = x / 8u, e = 4u * (x % 8u);
        bool in_ = c + jj < m.n && m.d - m.dd + e < p.head_dim;
        float pj = vsum_prob(c, jj);
        vec4 v = v4_of(uvec4(m.vj[4u * q], m.vj[4u * q + 1u], m.vj[4u * q + 2u], m.vj[4u * q + 3u]));
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            precise float y = pj * v[k];
            prod[(half_ * VSUM_CHUNK + jj) * VSUM_DIMS + e + k] = in_ ? y : 0.0;
        }
    }
}
#else
// Loads chunk c's V elements (positions and elements past the end read the last ones: every load
// is unconditional, so the 16 are in flight together).
void vsum_load(inout vsum_maker m, uint c) {
    uint dl = min(m.d, p.head_dim - 1u);
    [[unroll]] for (uint k = 0u; k < 16u; k++) {
        uint j = min(c + m.w + VSUM_MAKERS * k, m.n - 1u);
        m.vj[k] = v_raw(m.vbase + uint64_t(attn_ring_row(m.first_row, j)) * p.row_bytes, dl);
    }
}

// Chunk c's products, from what vsum_load loaded, into half (c / VSUM_CHUNK) % 2 of prod (0 past
// the end).
void vsum_store(in vsum_maker m, uint c) {
    uint half_ = (c / VSUM_CHUNK) & 1u, dl = min(m.d, p.head_dim - 1u);
    [[unroll]] for (uint k = 0u; k < 16u; k++) {
        uint jj = m.w + VSUM_MAKERS * k;
        precise float x = vsum_prob(c, jj) * v_of(m.vj[k], dl);
        prod[(half_ * VSUM_CHUNK + jj) * VSUM_DIMS + m.dd] = c + jj < m.n && m.d < p.head_dim ? x : 0.0;
    }
}
#endif

void main() {
    uint i = gl_LocalInvocationID.x;
    uint d0 = gl_WorkGroupID.x * VSUM_DIMS, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint n = attn_n_kv(t);
    vsum_maker m;
    m.w = i / VSUM_DIMS - 1u, m.dd = i % VSUM_DIMS, m.d = d0 + m.dd, m.n = n;
    m.first_row = attn_first(t) % p.ring_rows;
    m.vbase = p.v + attn_head_off(h);
    m.pr = F32s(attn_probs(t, h));
    attn_softmax_stats(m.pr, n, h, m.mx, m.inv);
    if (i >= VSUM_DIMS) {
        vsum_probs(m, 0u);
        if (VSUM_CHUNK < n)
            vsum_probs(m, VSUM_CHUNK);
        vsum_load(m, 0u);
    }
    barrier();
    if (i >= VSUM_DIMS) {
        vsum_store(m, 0u);
        if (VSUM_CHUNK < n)
            vsum_load(m, VSUM_CHUNK);
    }
    barrier();
    float acc = 0.0;
    for (uint c = 0u; c < n; c += VSUM_CHUNK) {
        if (i < VSUM_DIMS) {
            uint base = ((c / VSUM_CHUNK) & 1u) * VSUM_CHUNK * VSUM_DIMS + i;
            if (n - c >= VSUM_CHUNK) { // a whole chunk: 16 loads at a time ahead of their adds
                for (uint k0 = 0u; k0 < VSUM_CHUNK; k0 += 16u) {
                    float x[16];
                    [[unroll]] for (uint k = 0u; k < 16u; k++)
                        x[k] = prod[base + (k0 + k) * VSUM_DIMS];
                    [[unroll]] for (uint k = 0u; k < 16u; k++) {
                        precise float a = acc + x[k];
                        acc = a;
                    }
                }
            } else {
                for (uint k = 0u; k < n - c; k++) {
                    precise float a = acc + prod[base + k * VSUM_DIMS];
                    acc = a;
                }
            }
        } else if (c + VSUM_CHUNK < n) {
            vsum_store(m, c + VSUM_CHUNK); // reads chunk c + 1's probabilities, not c's half
            if (c + 2u * VSUM_CHUNK < n) {
                vsum_probs(m, c + 2u * VSUM_CHUNK); // into chunk c's half, read last iteration
                vsum_load(m, c + 2u * VSUM_CHUNK);
            }
        }
        barrier();
    }
    if (i < VSUM_DIMS && d0 + i < p.head_dim)
        F32s(p.out_ + (uint64_t(t) * p.out_stride + uint64_t(h) * p.head_dim + d0 + i) * 4u).v[0] = acc;

}
