// route.comp - a MoE layer's routing on the GPU, block_moe.c's route_token bit for bit: per token
// (one workgroup of 32), the router's logits (plus the router's bias, when there is one), then
//  - softmax gating: the softmax over every expert (ops_softmax: max, exp_c, the 32-lane sum,
//    times 1 / (float)sum), the top k (ties to the lower index), their weights divided by their
//    float sum (the sum in double in order, at least 2^-14);
//  - softmax-weight gating (gpt-oss): the top k of the logits, then the softmax over those k;
// and writes the pairs the experts' products take: ids[t k + s] = the expert, act[t k + s] = t,
// out[t k + s] = t k + s, w[t k + s] = its weight (gpu_op_route).
#version 450
#include "common.glsl"
#include "contract.glsl"

layout(local_size_x = 32) in;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32s { int v[]; };

layout(push_constant) uniform Push {
    uint64_t logits;   // [n_tok][n_expert] floats
    uint64_t bias;     // [n_expert] floats, or 0
    uint64_t pairs;    // ids, then act, then out (int32), then w (float): 4 arrays of n_tok k
    uint64_t scratch;  // [n_tok][n_expert] floats: the probabilities
    uint n_expert;
    uint k;
    uint n_tok;
    uint softmax_all;  // 1: softmax gating; 0: softmax over the top k
} p;

shared double lanes[32];
shared float smax[32];
shared int sel[32];

// The float at i of the token's row (logit plus bias).
float logit(uint t, uint i) {
    float x = F32s(p.logits).v[t * p.n_expert + i];
    if (p.bias != 0ul) {
        precise float s = x + F32s(p.bias).v[i];
        x = s;
    }
    return x;
}

// Softmax over row[0 .. n) in place (ops_softmax_sink without a sink), by the 32 invocations.
void softmax(F32s row, uint n, uint i) {
    float m = uintBitsToFloat(0xff800000u);
    for (uint j = i; j < n; j += 32u)
        m = max(m, row.v[j]);
    smax[i] = m;
    barrier();
    if (i == 0u) {
        for (uint j = 1u; j < 32u; j++)
            m = max(m, smax[j]);
        smax[0] = m;
    }
    barrier();
    m = smax[0];
    double acc = 0.0LF;
    for (uint j = i; j < n; j += 32u) {
        float x = row.v[j];
        float e = isinf(x) && x < 0.0 ? 0.0 : exp_c(x - m);
        row.v[j] = e;
        precise double s = acc + double(e);
        acc = s;
    }
    lanes[i] = acc;
    LANES_FOLD(lanes, i)
    float inv = div_rn(1.0, float(lanes[0]));
    for (uint j = i; j < n; j += 32u) {
        precise float y = row.v[j] * inv;
        row.v[j] = y;
    }
    barrier();
}

void main() {
    uint t = gl_WorkGroupID.x, i = gl_LocalInvocationID.x;
    uint ne = p.n_expert, k = p.k;
    F32s row = F32s(p.scratch + uint64_t(t) * ne * 4u);
    for (uint j = i; j < ne; j += 32u)
        row.v[j] = logit(t, j);
    barrier();
    if (p.softmax_all != 0u)
        softmax(row, ne, i);
    if (i == 0u) { // block_moe.c's top_k: one pass, inserting into the short sorted list
        uint m = 0u;
        for (uint x = 0u; x < ne; x++) {
            float v = row.v[x];
            if (m == k && v <= row.v[sel[k - 1u]])
                continue;
            uint j = m < k ? m++ : k - 1u;
            for (; j > 0u && row.v[sel[j - 1u]] < v; j--)
                sel[j] = sel[j - 1u];
            sel[j] = int(x);
        }
    }
    barrier();
    I32s ids = I32s(p.pairs), act = I32s(p.pairs + uint64_t(p.n_tok) * k * 4u),
         out_ = I32s(p.pairs + uint64_t(p.n_tok) * k * 8u);
    F32s w = F32s(p.pairs + uint64_t(p.n_tok) * k * 12u);
    uint base = t * k;
    if (p.softmax_all == 0u) {
        // the softmax over the k chosen logits, in a row of its own (the scratch row's tail is
        // past ne: use w itself)
        if (i < k)
            w.v[base + i] = row.v[sel[i]];
        barrier();
        softmax(F32s(p.pairs + (uint64_t(p.n_tok) * k * 12u + uint64_t(base) * 4u)), k, i);
    } else if (i == 0u) {
        double sum = 0.0LF;
        for (uint s = 0u; s < k; s++) {
            precise double a = sum + double(row.v[sel[s]]);
            sum = a;
        }
        float fsum = max(float(sum), 6.103515625e-5);
        for (uint s = 0u; s < k; s++)
            w.v[base + s] = div_rn(row.v[sel[s]], fsum);
    }
    if (i < k) {
        ids.v[base + i] = sel[i];
        act.v[base + i] = int(t);
        out_.v[base + i] = int(base + i);
    }
}
