// probe_contract.comp - out[i] = exp_c(in[i]) (op 0), sqrt_rn(in[i]) (op 1) or log_c(in[i]) (op
// 2): test_gpu compares them with ops_exp, sqrtf and ops_log over millions of floats.
#version 450
#include "common.glsl"
#include "contract.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t in_;
    uint64_t out_;
    uint n;
    uint op;
} p;

void main() {
    uint i = gl_GlobalInvocationID.y * 65535u * 64u + gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float x = F32s(p.in_).v[i];
    F32s(p.out_).v[i] = p.op == 0u ? exp_c(x) : p.op == 1u ? sqrt_rn(x) : log_c(x);
}
