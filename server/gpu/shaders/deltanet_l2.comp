// deltanet_l2.comp - L2 norms in place, a workgroup of 32 per head of a token (deltanet_l2_norm):
// the sum of squares in double over the contract's lanes, then x * (1 / max(sqrt(sum), eps)).
#version 450
#include "common.glsl"
#include "contract.glsl"

layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
    uint64_t x;        // head h of token t at x + t tok_stride + h n floats
    uint tok_stride;
    uint n_head;
    uint n;
    float eps;
} p;

shared double lanes[32];

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, i = gl_LocalInvocationID.x;
    F32s x = F32s(p.x + (uint64_t(t) * p.tok_stride + uint64_t(h) * p.n) * 4u);
    double acc = 0.0LF;
    for (uint j = i; j < p.n; j += 32u) {
        precise float sq = x.v[j] * x.v[j];
        precise double s = acc + double(sq);
        acc = s;
    }
    lanes[i] = acc;
    LANES_FOLD(lanes, i)
    float scale = div_rn(1.0, max(sqrt_rn(float(lanes[0])), p.eps));
    for (uint j = i; j < p.n; j += 32u) {
        precise float y = x.v[j] * scale;
        x.v[j] = y;
    }
}
