// deltanet_norm.comp - the DeltaNet heads' gated RMSNorm in place, a workgroup of 32 per head of a
// token (deltanet_gated_norm): o = ops_rms_norm(o) * w (the sum of squares over the contract's
// lanes, the mean as the sum times 1 / n), then o * silu(z).
#version 450
#include "common.glsl"
#include "contract.glsl"
#include "deltanet.glsl"

layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
    uint64_t o;        // head h of token t at o + t o_stride + h n floats
    uint64_t z;        // its gate at z + t z_stride + h n floats
    uint64_t w;        // [n]
    double inv_n;      // 1.0 / n, computed on the CPU
    uint o_stride;
    uint z_stride;
    uint n;
    float eps;
} p;

shared double lanes[32];

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, i = gl_LocalInvocationID.x;
    F32s o = F32s(p.o + (uint64_t(t) * p.o_stride + uint64_t(h) * p.n) * 4u);
    F32s z = F32s(p.z + (uint64_t(t) * p.z_stride + uint64_t(h) * p.n) * 4u);
    F32s w = F32s(p.w);
    double acc = 0.0LF;
    for (uint j = i; j < p.n; j += 32u) {
        precise float sq = o.v[j] * o.v[j];
        precise double s = acc + double(sq);
        acc = s;
    }
    lanes[i] = acc;
    LANES_FOLD(lanes, i)
    precise double md = lanes[0] * p.inv_n;
    precise float me = float(md) + p.eps;
    float scale = div_rn(1.0, sqrt_rn(me));
    for (uint j = i; j < p.n; j += 32u) {
        precise float y = (o.v[j] * scale) * w.v[j];
        precise float g = y * silu_c(z.v[j]);
        o.v[j] = g;
    }
}
