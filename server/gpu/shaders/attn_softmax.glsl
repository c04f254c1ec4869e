// attn_softmax.glsl - ops_softmax_sink over each (token, head)'s scores row, in place, a workgroup
// of 256 per row (heads on x, tokens on y): the maximum (order-free) with the sink's logit; the
// exponentials exp_c(s - max) (0 for a score of -inf) into the contract's 32 lanes of doubles
// (lane l adds entries l, l + 32, ... in order: 256 entries at a time go through shared memory,
// and invocations 0 .. 31 add them), folded by LANES_FOLD; plus exp_c(sink - max) when there is a
// sink; inv = 1 / (float)sum (div_rn); probabilities e * inv. With ROUND_F16 each probability is
// rounded to a half, as block_attn.c does before an F16 cache's weighted sum. Each invocation
// reads back only the entries it wrote.
layout(local_size_x = 256) in;

shared float red[256];
shared float ex[256];
shared double lanes[32];

void main() {
    uint i = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    uint n = attn_n_kv(t);
    F32s s = F32s(attn_probs(t, h));
    float m = NEG_INF;
    for (uint j = i; j < n; j += 256u) {
        float x = s.v[j];
        m = x > m ? x : m;
    }
    red[i] = m;
    for (uint w = 128u; w >= 1u; w >>= 1) {
        barrier();
        if (i < w) {
            float o = red[i + w];
            red[i] = o > red[i] ? o : red[i];
        }
    }
    barrier();
    float sink = p.sinks != 0ul ? F32s(p.sinks).v[h] : NEG_INF;
    float mx = red[0];
    mx = sink > mx ? sink : mx;
    double lane = 0.0LF;
    for (uint c = 0u; c < n; c += 256u) {
        uint j = c + i;
        float e = 0.0;
        if (j < n) {
            float x = s.v[j];
            precise float d = x - mx;
            e = x == NEG_INF ? 0.0 : exp_c(d);
            s.v[j] = e;
        }
        ex[i] = e;
        barrier();
        if (i < 32u)
            for (uint k = i; k < 256u && c + k < n; k += 32u) {
                precise double a = lane + double(ex[k]);
                lane = a;
            }
        barrier();
    }
    if (i < 32u)
        lanes[i] = lane;
    LANES_FOLD(lanes, i)
    double sum = lanes[0];
    if (sink != NEG_INF) {
        precise float d = sink - mx;
        precise double a = sum + double(exp_c(d));
        sum = a;
    }
    float inv = div_rn(1.0, float(sum));
    for (uint j = i; j < n; j += 256u) {
        precise float pj = s.v[j] * inv;
#ifdef ROUND_F16
        pj = fp16_to_f32(f32_to_fp16(pj));
#endif
        s.v[j] = pj;
    }
}
