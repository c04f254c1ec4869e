// rms_norm.comp - y rows = x rows * scale (* w): ops_rms_norm bit for bit. A workgroup of 256
// takes one row: the squares go to shared memory, then invocation l < 32 is the contract's lane l (x[i] * x[i] rounded to float, added in double
// for i = l, l + 32 ... in order), the lanes folded (LANES_FOLD), mean = float(sum * inv_n) with
// inv_n = 1.0 / n from the CPU (Vulkan's double division is not correctly rounded), scale =
// 1 / sqrt(mean + eps), then each element (x * scale) * w. y may be x: every read of a row comes
// before the barriers and each invocation writes only the elements it read. Rows on x, then z.
// With r (not 0): first x = r + x (the residual's add, engine.c's engine_add_y), written back to
// x, then the norm of the sum: one kernel for the two steps of a layer's end. With qfmt (not
// QFMT_NONE) the rows are then quantized for the next product (quantize_tail.glsl). With d (not
// 0) what is added is the routed experts' weighted sum (moe_sum.glsl) instead of r's rows: a MoE
// layer's sum, the residual's add and the next norm in one kernel.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#include "common.glsl"
#include "contract.glsl"
#include "quantize_tail.glsl"
#include "moe_sum.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint64_t x;        // rows of n floats, x_stride floats apart
    uint64_t w;        // n floats, or 0: no weight
    uint64_t y;        // rows, y_stride floats apart
    uint64_t r;        // rows added to x first (x_stride apart), or 0
    uint64_t qdst;     // the rows quantized (qfmt), q_stride bytes apart
    uint64_t d;        // or 0; else row t adds moe_sum_at(d, dw, k, n, shexp, shexp_gate, t, i)
    uint64_t dw;
    uint64_t shexp;
    uint64_t shexp_gate;
    double inv_n;      // 1.0 / n, rounded on the CPU
    uint x_stride;
    uint y_stride;
    uint n;
    uint n_rows;
    float eps;
    uint qfmt;
    uint q_stride;
    uint k;            // the experts a token (with d)
} p;

shared double lanes[32];
// the row's squares, read by the 256 invocations at once: the 32 lanes' sequential double sums
// then run on shared memory instead of waiting on a global load per step (a 2048-wide row took
// 42 us on the H100 that way)
#define ROW_SHARED 4096u
shared float sq[ROW_SHARED];

void main() {
    uint l = gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n_rows) // the whole workgroup leaves together
        return;
    F32s x = F32s(p.x + uint64_t(row) * p.x_stride * 4u);
    F32s y = F32s(p.y + uint64_t(row) * p.y_stride * 4u);
    F32s r = F32s(p.r + uint64_t(row) * p.x_stride * 4u);
    bool staged = p.n <= ROW_SHARED;
    for (uint i = l; i < p.n; i += 256u) {
        float xi = x.v[i];
        if (p.d != 0ul) {
            precise float sum = moe_sum_at(p.d, p.dw, p.k, p.n, p.shexp, p.shexp_gate, row, i) + xi;
            xi = sum;
            x.v[i] = xi;
        } else if (p.r != 0ul) {
            precise float sum = r.v[i] + xi;
            xi = sum;
            x.v[i] = xi;
        }
        precise float q = xi * xi;
        if (staged)
            sq[i] = q;
    }
    memoryBarrierBuffer(); // the sums written back to x, for the lanes of a row past ROW_SHARED
    barrier();
    if (l < 32u) {
        double acc = 0.0LF;
        for (uint i = l; i < p.n; i += 32u) {
            float q;
            if (staged) {
                q = sq[i];
            } else {
                precise float qq = x.v[i] * x.v[i];
                q = qq;
            }
            precise double s = acc + double(q);
            acc = s;
        }
        lanes[l] = acc;
    }
    LANES_FOLD(lanes, l)
    float scale = rms_scale_c(lanes[0], p.inv_n, p.eps);
    for (uint i = l; i < p.n; i += 256u) {
        precise float v = x.v[i] * scale;
        if (p.w != 0ul) {
            precise float vw = v * F32s(p.w).v[i];
            v = vw;
        }
        y.v[i] = v;
    }
    quantize_tail(p.y + uint64_t(row) * p.y_stride * 4u, p.n, p.qfmt,
                  p.qdst + uint64_t(row) * p.q_stride, l);
}
