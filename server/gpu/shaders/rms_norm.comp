// rms_norm.comp - y rows = x rows * scale (* w): ops_rms_norm bit for bit. A workgroup of 32 takes
// one row: invocation l is the contract's lane l (x[i] * x[i] rounded to float, added in double
// for i = l, l + 32 ... in order), the lanes folded (LANES_FOLD), mean = float(sum * inv_n) with
// inv_n = 1.0 / n from the CPU (Vulkan's double division is not correctly rounded), scale =
// 1 / sqrt(mean + eps), then each element (x * scale) * w. y may be x: every read of a row comes
// before the barriers and each invocation writes only the elements it read. Rows on x, then z.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#include "common.glsl"
#include "contract.glsl"

layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
    uint64_t x;        // rows of n floats, x_stride floats apart
    uint64_t w;        // n floats, or 0: no weight
    uint64_t y;        // rows, y_stride floats apart
    double inv_n;      // 1.0 / n, rounded on the CPU
    uint x_stride;
    uint y_stride;
    uint n;
    uint n_rows;
    float eps;
} p;

shared double lanes[32];

void main() {
    uint l = gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n_rows) // the whole workgroup leaves together
        return;
    F32s x = F32s(p.x + uint64_t(row) * p.x_stride * 4u);
    F32s y = F32s(p.y + uint64_t(row) * p.y_stride * 4u);
    double acc = 0.0LF;
    for (uint i = l; i < p.n; i += 32u) {
        precise float sq = x.v[i] * x.v[i];
        precise double s = acc + double(sq);
        acc = s;
    }
    lanes[l] = acc;
    LANES_FOLD(lanes, l)
    precise double m = lanes[0] * p.inv_n;
    precise float mean_eps = float(m) + p.eps;
    float scale = div_rn(1.0, sqrt_rn(mean_eps));
    for (uint i = l; i < p.n; i += 32u) {
        precise float v = x.v[i] * scale;
        if (p.w != 0ul) {
            precise float vw = v * F32s(p.w).v[i];
            v = vw;
        }
        y.v[i] = v;
    }
}
