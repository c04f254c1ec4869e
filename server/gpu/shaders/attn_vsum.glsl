// attn_vsum.glsl - the attention's weighted sum of V rows: out[d] = 0, then out[d] + p_j v_j[d]
// for the positions j in order (ops_axpy_*: a product, then a sum, each rounded), so each output
// element is one chain of adds. A workgroup takes 32 elements of one (token, head) (element chunks
// on x, heads on y, tokens on z): its 256 invocations compute the products of 128 positions into
// registers, coalesced (a warp's 32 invocations read one row's 32 elements), the next chunk's
// while 32 of them run the chains over the last one's from shared memory. A kernel defines
//     float v_at(uint64_t row, uint d)   element d of a head's V row as float
layout(local_size_x = 256) in;

#define VSUM_DIMS 32u
#define VSUM_CHUNK 128u
#define VSUM_PER (VSUM_CHUNK * VSUM_DIMS / 256u) // products an invocation computes a chunk

shared float prod[VSUM_CHUNK * VSUM_DIMS];

// This invocation's products of chunk c: positions c + i / 32 + 8 k, element d; 0 past the end.
void vsum_products(out float r[VSUM_PER], uint c, uint t, uint h, uint first, uint n, uint d,
                   F32s pr) {
    uint jj = gl_LocalInvocationID.x / VSUM_DIMS;
    for (uint k = 0u; k < VSUM_PER; k++) {
        uint j = c + jj + 8u * k;
        r[k] = 0.0;
        if (j < n && d < p.head_dim) {
            precise float x = pr.v[j] * v_at(attn_row(p.v, h, first + j), d);
            r[k] = x;
        }
    }
}

void main() {
    uint i = gl_LocalInvocationID.x;
    uint d0 = gl_WorkGroupID.x * VSUM_DIMS, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint n = attn_n_kv(t), first = attn_first(t);
    F32s pr = F32s(attn_probs(t, h));
    uint dd = i % VSUM_DIMS, jj = i / VSUM_DIMS;
    float r[VSUM_PER];
    vsum_products(r, 0u, t, h, first, n, d0 + dd, pr);
    float acc = 0.0;
    for (uint c = 0u; c < n; c += VSUM_CHUNK) {
        barrier(); // the chains are done with the last chunk
        for (uint k = 0u; k < VSUM_PER; k++)
            prod[(jj + 8u * k) * VSUM_DIMS + dd] = r[k];
        barrier();
        if (c + VSUM_CHUNK < n)
            vsum_products(r, c + VSUM_CHUNK, t, h, first, n, d0 + dd, pr);
        if (i < VSUM_DIMS) {
            uint end = min(VSUM_CHUNK, n - c);
            for (uint k = 0u; k < end; k++) {
                precise float a = acc + prod[k * VSUM_DIMS + i];
                acc = a;
            }
        }
    }
    if (i < VSUM_DIMS && d0 + i < p.head_dim)
        F32s(p.out_ + (uint64_t(t) * p.out_stride + uint64_t(h) * p.head_dim + d0 + i) * 4u).v[0] = acc;
}
