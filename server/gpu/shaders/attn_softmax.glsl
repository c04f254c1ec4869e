// attn_softmax.glsl - ops_softmax_sink over a (token, head)'s scores row, for the weighted sum
// (attn_vsum.glsl) to take each probability as it reads the row; a workgroup of 256 computes the
// row's maximum and inverse sum (attn_softmax_stats), which every workgroup of the head computes
// alike. The maximum (order-free) with the sink's logit; the exponentials exp_c(s - max) (0 for a
// score of -inf) into the contract's 32 lanes of doubles (lane l adds entries l, l + 32, ... in
// order: 256 entries at a time go through shared memory, and invocations 0 .. 31 add them),
// folded by LANES_FOLD; plus exp_c(sink - max) when there is a sink; inv = 1 / (float)sum
// (div_rn); a probability is exp_c(s - max) * inv (attn_prob). With ROUND_F16 each probability
// is rounded to a half, as block_attn.c does before an F16 cache's weighted sum. Include after
// contract.glsl and attn.glsl, in a workgroup of 256.

// 512 floats of shared scratch: a kernel with its own may name it (the weighted sum's products)
#ifndef SOFTMAX_SCRATCH
shared float sm_scratch[512];
#define SOFTMAX_SCRATCH sm_scratch
#endif
#define sm_red(i) SOFTMAX_SCRATCH[(i)]
#define sm_ex(i) SOFTMAX_SCRATCH[256u + (i)]
shared double sm_lanes[32];

// The maximum (with the sink) and the inverse sum of the scores row s of n entries of head h;
// every invocation of the workgroup calls it and gets both.
void attn_softmax_stats(F32s s, uint n, uint h, out float mx, out float inv) {
    uint i = gl_LocalInvocationID.x;
    float m = NEG_INF;
    for (uint j = i; j < n; j += 256u) {
        float x = s.v[j];
        m = x > m ? x : m;
    }
    sm_red(i) = m;
    for (uint w = 128u; w >= 1u; w >>= 1) {
        barrier();
        if (i < w) {
            float o = sm_red(i + w);
            sm_red(i) = o > sm_red(i) ? o : sm_red(i);
        }
    }
    barrier();
    float sink = p.sinks != 0ul ? F32s(p.sinks).v[h] : NEG_INF;
    mx = sm_red(0);
    mx = sink > mx ? sink : mx;
    double lane = 0.0LF;
    for (uint c = 0u; c < n; c += 256u) {
        uint j = c + i;
        float e = 0.0;
        if (j < n) {
            float x = s.v[j];
            precise float d = x - mx;
            e = x == NEG_INF ? 0.0 : exp_c(d);
        }
        sm_ex(i) = e;
        barrier();
        if (i < 32u)
            for (uint k = i; k < 256u && c + k < n; k += 32u) {
                precise double a = lane + double(sm_ex(k));
                lane = a;
            }
        barrier();
    }
    if (i < 32u)
        sm_lanes[i] = lane;
    LANES_FOLD(sm_lanes, i)
    double sum = sm_lanes[0];
    if (sink != NEG_INF) {
        precise float d = sink - mx;
        precise double a = sum + double(exp_c(d));
        sum = a;
    }
    inv = div_rn(1.0, float(sum));
}

// The probability of score x, from its row's attn_softmax_stats.
float attn_prob(float x, float mx, float inv) {
    precise float d = x - mx;
    float e = x == NEG_INF ? 0.0 : exp_c(d);
    precise float pj = e * inv;
#ifdef ROUND_F16
    pj = fp16_to_f32(f32_to_fp16(pj));
#endif
    return pj;
}
