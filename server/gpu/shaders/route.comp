// route.comp - a MoE layer's routing on the GPU, block_moe.c's route_token bit for bit: per token
// (one workgroup of 128, the row in shared memory; the contract's 32 lanes are its first 32
// invocations), the router's logits (plus the router's bias, when there is one), then
//  - softmax gating: the softmax over every expert (ops_softmax: max, exp_c, the 32-lane sum,
//    times 1 / (float)sum), the top k (ties to the lower index), their weights divided by their
//    float sum (the sum in double in order, at least 2^-14);
//  - softmax-weight gating (gpt-oss): the top k of the logits, then the softmax over those k;
// and writes the pairs the experts' products take: ids[t k + s] = the expert, act[t k + s] = t,
// out[t k + s] = t k + s, w[t k + s] = its weight (gpu_op_route).
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "contract.glsl"

layout(local_size_x = 128) in;
#define GROUP 128u

#define ROUTE_MAX 1024u // experts a router may have here (gpu_op_route refuses more)

layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32s { int v[]; };

layout(push_constant) uniform Push {
    uint64_t logits;   // [n_tok][n_expert] floats
    uint64_t bias;     // [n_expert] floats, or 0
    uint64_t pairs;    // ids, then act, then out (int32), then w (float): 4 arrays of n_tok k
    uint64_t log;      // n_tok k int32: the chosen experts again (a host buffer), or 0
    uint n_expert;
    uint k;
    uint n_tok;
    uint softmax_all;  // 1: softmax gating; 0: softmax over the top k
} p;

shared double lanes[32];
shared float smax[32];
shared int sel[32];
shared float row[ROUTE_MAX];   // the token's logits, then probabilities (softmax gating)
shared float sw[32];           // the chosen k's weights
shared float best_v[32];
shared int best_i[32];
shared bool nan_seen;          // a NaN logit: the top k by rounds (top_k_rounds)
shared float fsum;             // the chosen k's probabilities' sum (softmax gating)

// The float at i of the token's row (logit plus bias).
float logit(uint t, uint i) {
    float x = F32s(p.logits).v[t * p.n_expert + i];
    if (p.bias != 0ul) {
        precise float s = x + F32s(p.bias).v[i];
        x = s;
    }
    return x;
}

// Softmax over v[0 .. n) in place (ops_softmax_sink without a sink): the max and the sum by the
// first 32 invocations, each exp and product by an element's own (every invocation reaches the
// barriers); v is `row` (n <= ROUTE_MAX) or `sw` (n <= 32), named by which.
void softmax(bool which_row, uint n, uint i) {
    bool lane = i < 32u;
    float m = uintBitsToFloat(0xff800000u);
    for (uint j = i; lane && j < n; j += 32u)
        m = max(m, which_row ? row[j] : sw[j]);
    if (lane)
        smax[i] = m;
    barrier();
    if (i == 0u) {
        for (uint j = 1u; j < 32u; j++)
            m = max(m, smax[j]);
        smax[0] = m;
    }
    barrier();
    m = smax[0];
    // each element's exp by an invocation of its own (the 32 lanes took four each in a row), then
    // the lanes add them in the contract's order
    for (uint j = i; j < n; j += GROUP) {
        float x = which_row ? row[j] : sw[j];
        float e = isinf(x) && x < 0.0 ? 0.0 : exp_c(x - m);
        if (which_row)
            row[j] = e;
        else
            sw[j] = e;
    }
    barrier();
    double acc = 0.0LF;
    for (uint j = i; lane && j < n; j += 32u) {
        precise double s = acc + double(which_row ? row[j] : sw[j]);
        acc = s;
    }
    if (lane)
        lanes[i] = acc;
    LANES_FOLD(lanes, i)
    float inv = div_rn(1.0, float(lanes[0]));
    for (uint j = i; j < n; j += GROUP) {
        precise float y = (which_row ? row[j] : sw[j]) * inv;
        if (which_row)
            row[j] = y;
        else
            sw[j] = y;
    }
    barrier();
}

// The k largest of row[0 .. n) into sel, best first, ties to the lower index: block_moe.c's
// top_k. Each expert's rank is the count of experts before it in that order (a larger logit, or
// an equal one at a lower index); the k of rank below k take their places. One pass and one
// barrier: a round per chosen expert, each a tree of barriers, took 20 us a token on the H100.
// The order is total only without NaNs (top_k_rounds takes a row with one).
// The row is read eight entries at a time, each eight loaded before they are compared: a loop of
// one load and one compare a round, stopping at rank k, took 5.7 us of a 128-expert row (H200).
void top_k_rank(uint n, uint k, uint i) {
    for (uint j = i; j < n; j += GROUP) {
        float v = row[j];
        uint r = 0u;
        for (uint q0 = 0u; q0 < n; q0 += 8u) {
            float u[8];
            [[unroll]] for (uint a = 0u; a < 8u; a++)
                u[a] = row[min(q0 + a, ROUTE_MAX - 1u)];
            [[unroll]] for (uint a = 0u; a < 8u; a++) {
                uint q = q0 + a;
                r += q < n && (u[a] > v || (u[a] == v && q < j)) ? 1u : 0u;
            }
        }
        if (r < k)
            sel[r] = int(j);
    }
    barrier();
}

// The same by k rounds of a parallel argmax over what is not chosen yet (first 32 invocations),
// for a row with a NaN, where ranks need not be distinct: every chosen index stays in range.
void top_k_rounds(uint n, uint k, uint i) {
    bool lane = i < 32u;
    for (uint s = 0u; s < k; s++) {
        float bv = uintBitsToFloat(0xff800000u);
        int bi = -1;
        for (uint j = i; lane && j < n; j += 32u) {
            bool taken = false;
            for (uint q = 0u; q < s; q++)
                taken = taken || sel[q] == int(j);
            if (!taken && (bi < 0 || row[j] > bv)) { // j rises: equals keep the lower index
                bv = row[j];
                bi = int(j);
            }
        }
        if (lane) {
            best_v[i] = bv;
            best_i[i] = bi;
        }
        for (uint w = 16u; w >= 1u; w >>= 1) {
            barrier();
            if (i < w) {
                float v2 = best_v[i + w];
                int i2 = best_i[i + w];
                if (i2 >= 0 && (best_i[i] < 0 || v2 > best_v[i] ||
                                (v2 == best_v[i] && i2 < best_i[i]))) {
                    best_v[i] = v2;
                    best_i[i] = i2;
                }
            }
        }
        barrier();
        if (i == 0u)
            sel[s] = best_i[0];
        barrier();
    }
}

void main() {
    uint t = gl_WorkGroupID.x, i = gl_LocalInvocationID.x;
    uint ne = p.n_expert, k = p.k;
    if (i == 0u)
        nan_seen = false;
    barrier();
    for (uint j = i; j < ne; j += GROUP)
        row[j] = logit(t, j);
    barrier();
    if (p.softmax_all != 0u)
        softmax(true, ne, i);
    for (uint j = i; j < ne; j += GROUP) // what is ranked: a logit, or a probability
        if (isnan(row[j]))
            nan_seen = true;
    barrier();
    if (nan_seen)
        top_k_rounds(ne, k, i);
    else
        top_k_rank(ne, k, i);
    I32s ids = I32s(p.pairs), act = I32s(p.pairs + uint64_t(p.n_tok) * k * 4u),
         out_ = I32s(p.pairs + uint64_t(p.n_tok) * k * 8u);
    F32s w = F32s(p.pairs + uint64_t(p.n_tok) * k * 12u);
    uint base = t * k;
    if (p.softmax_all == 0u) { // the softmax over the k chosen logits
        if (i < k)
            sw[i] = row[sel[i]];
        barrier();
        softmax(false, k, i);
        if (i < k)
            w.v[base + i] = sw[i];
    } else { // the sum in order by one invocation, the k divisions side by side
        if (i == 0u) {
            double sum = 0.0LF;
            for (uint s = 0u; s < k; s++) {
                precise double a = sum + double(row[sel[s]]);
                sum = a;
            }
            fsum = max(float(sum), 6.103515625e-5);
        }
        barrier();
        if (i < k)
            w.v[base + i] = div_rn(row[sel[i]], fsum);
    }
    if (i < k) {
        ids.v[base + i] = sel[i];
        act.v[base + i] = int(t);
        out_.v[base + i] = int(base + i);
        if (p.log != 0ul)
            I32s(p.log).v[base + i] = sel[i];
    }
}
