// attn_scores.glsl - the driver of the attention's scores: for head h of token t, position
// first + j gets s = dot(K row, query) * scale, into the scratch's scores row at j. The dot is
// the KV type's vec_dot under quant.h's contract, so one invocation computes one position's whole
// dot (64 positions a workgroup; heads on y, tokens on z). A kernel defines
//     uint64_t query_row(uint t, uint h)          the query as the dot takes it
// and either FLOAT_DOT with
//     vec4 k4_at(uint64_t row, uint m)            elements 4m .. 4m + 3 as floats, one load
//     float k_at(uint64_t row, uint i), q_at(uint64_t row, uint i)   element i as float
// (32 lanes, lane l taking elements l, l + 32, ... with fma in order; lane l += lane l + w for
// w = 16 .. 1; then the tail added to lane 0 with fma; the query is read once into shared
// memory), or the block terms of a blocks_*.glsl (four chains, block b into chain b % 4, summed
// (c0 + c1) + (c2 + c3)).
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;

#ifdef FLOAT_DOT
shared float qs[512]; // the query as floats (head_dim <= 512: gpu_attn.c)

void load_query(uint64_t qrow) {
    for (uint i = gl_LocalInvocationID.x; i < p.head_dim; i += 64u)
        qs[i] = q_at(qrow, i);
    barrier();
}

float kq_dot(uint64_t krow, uint64_t qrow) {
    uint n32 = p.head_dim / 32u * 32u;
    float lanes[32]; // registers: every index below is a constant once the loops unroll
    [[unroll]] for (uint l = 0u; l < 32u; l++)
        lanes[l] = 0.0;
    for (uint c = 0u; c < n32; c += 32u)
        [[unroll]] for (uint m = 0u; m < 8u; m++) {
            vec4 k4 = k4_at(krow, c / 4u + m);
            [[unroll]] for (uint e = 0u; e < 4u; e++)
                lanes[4u * m + e] = fma_rn(k4[e], qs[c + 4u * m + e], lanes[4u * m + e]);
        }
    [[unroll]] for (uint w = 16u; w >= 1u; w >>= 1)
        [[unroll]] for (uint l = 0u; l < w; l++) {
            precise float s = lanes[l] + lanes[l + w];
            lanes[l] = s;
        }
    float sum = lanes[0];
    for (uint i = n32; i < p.head_dim; i++)
        sum = fma_rn(k_at(krow, i), qs[i], sum);
    return sum;
}
#else
float kq_dot(uint64_t krow, uint64_t qrow) {
    uint nb = p.head_dim / QK_ELEMS;
    float c0 = 0.0, c1 = 0.0, c2 = 0.0, c3 = 0.0;
    for (uint b = 0u; b < nb; b += 4u) {
        vec4 f = block_terms(krow + uint64_t(b) * W_BLOCK_BYTES, qrow + uint64_t(b) * A_BLOCK_BYTES);
        c0 = fma_rn(f.x, f.y, c0);
        if (b + 1u < nb) {
            f = block_terms(krow + uint64_t(b + 1u) * W_BLOCK_BYTES,
                            qrow + uint64_t(b + 1u) * A_BLOCK_BYTES);
            c1 = fma_rn(f.x, f.y, c1);
        }
        if (b + 2u < nb) {
            f = block_terms(krow + uint64_t(b + 2u) * W_BLOCK_BYTES,
                            qrow + uint64_t(b + 2u) * A_BLOCK_BYTES);
            c2 = fma_rn(f.x, f.y, c2);
        }
        if (b + 3u < nb) {
            f = block_terms(krow + uint64_t(b + 3u) * W_BLOCK_BYTES,
                            qrow + uint64_t(b + 3u) * A_BLOCK_BYTES);
            c3 = fma_rn(f.x, f.y, c3);
        }
    }
    precise float lo = c0 + c1;
    precise float hi = c2 + c3;
    precise float s = lo + hi;
    return s;
}
#endif

void main() {
    uint j = gl_WorkGroupID.x * 64u + gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
#ifdef FLOAT_DOT
    load_query(query_row(t, h));
#endif
    if (j >= attn_n_kv(t))
        return;
    uint row = attn_ring_row(attn_first(t) % p.ring_rows, j);
    float d = kq_dot(p.k + uint64_t(row) * p.row_bytes + attn_head_off(h), query_row(t, h));
    precise float s = d * p.scale;
    F32s(attn_probs(t, h)).v[j] = s;
}
