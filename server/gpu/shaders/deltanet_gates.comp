// deltanet_gates.comp - block_deltanet.c's gates in place, an invocation per (token, V head):
// beta = sigmoid(beta), gate = softplus(gate + dt_bias[h]) * a[h] (deltanet_gates).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "deltanet.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t beta;     // [n_tok][n_head]
    uint64_t gate;     // [n_tok][n_head]
    uint64_t dt_bias;  // [n_head]
    uint64_t a;        // [n_head]
    uint n_head;
    uint n;            // n_tok n_head
} p;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint h = i % p.n_head;
    F32s beta = F32s(p.beta), gate = F32s(p.gate);
    beta.v[i] = sigmoid_c(beta.v[i]);
    precise float g = gate.v[i] + F32s(p.dt_bias).v[h];
    precise float y = softplus_c(g) * F32s(p.a).v[h];
    gate.v[i] = y;
}
