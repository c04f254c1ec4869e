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
// Shaped for latency (a decode step's row is one workgroup): a row of up to ROW_REG * 256
// elements is held in registers from one round trip of loads (x, r or the k experts' rows MOE_STEP
// at a time, w) through the scale pass, and quantize_tail reads y from shared memory; a wider row
// takes the loop over memory (norm_loop). Only the loops of loads are [[unroll]]: glslc's unroller
// drops the copies' NoContraction (precise), which let a driver fuse their multiply-adds (the
// driver unrolls the others itself: their bounds are constants).
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "contract.glsl"

layout(local_size_x = 256) in;

// row_s holds the row's squares (read by the 32 lanes), then its y (read by quantize_tail_row)
#include "row_held.glsl"
#include "moe_sum.glsl"

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

#define MOE_STEP 4u // experts whose rows are loaded together

// Element j of what this invocation holds (l + 256 j), or the row's last past its end: every
// load of a row is unconditional, and so in flight with the others (a load behind a condition
// waited for the one before: 4.9 us to load a 2048-float row and its weights on the H200).
uint held(uint l, uint j) {
    return min(l + 256u * j, p.n - 1u);
}

// xv[j] (element l + 256 j of token t's row) += moe_sum_at(.., t, that element), in moe_sum.glsl's
// order; MOE_STEP experts' elements (and the shared expert's, with the first) loaded before use
// (an expert past k loads expert k - 1's, unused).
void moe_add(inout float xv[ROW_REG], uint t, uint l) {
    uint64_t r0 = uint64_t(t) * p.k;
    float yv[ROW_REG], sv[ROW_REG];
    uint64_t sh = p.shexp != 0ul ? p.shexp : p.d; // where the loads go without a shared expert
    [[unroll]] for (uint j = 0u; j < ROW_REG; j++)
        sv[j] = f32_at(sh, uint64_t(t) * p.n + held(l, j));
    for (uint s0 = 0u; s0 < p.k; s0 += MOE_STEP) {
        float dv[MOE_STEP][ROW_REG], wv[MOE_STEP];
        [[unroll]] for (uint u = 0u; u < MOE_STEP; u++) {
            uint64_t e = r0 + min(s0 + u, p.k - 1u);
            wv[u] = f32_at(p.dw, e);
            [[unroll]] for (uint j = 0u; j < ROW_REG; j++)
                dv[u][j] = f32_at(p.d, e * p.n + held(l, j));
        }
        for (uint u = 0u; u < MOE_STEP; u++)
            for (uint j = 0u; j < ROW_REG; j++) {
                precise float prod = dv[u][j] * wv[u];
                if (s0 + u == 0u) {
                    yv[j] = prod;
                } else if (s0 + u < p.k) {
                    precise float acc = yv[j] + prod;
                    yv[j] = acc;
                }
            }
    }
    float g = p.shexp != 0ul ? sigmoid_c(f32_at(p.shexp_gate, t)) : 0.0;
    for (uint j = 0u; j < ROW_REG; j++) {
        if (p.shexp != 0ul) {
            precise float acc = yv[j] + sv[j] * g;
            yv[j] = acc;
        }
        precise float sum = yv[j] + xv[j];
        xv[j] = sum;
    }
}

// The row of a workgroup whose n <= ROW_FAST: every element this invocation takes (l + 256 j)
// loaded at once, the sum written back, the squares to row_s; the 32 lanes' sums from row_s, eight
// of a lane's squares read ahead of its adds; y from the registers, into memory and row_s.
void norm_fast(uint row, uint l) {
    F32s x = F32s(p.x + uint64_t(row) * p.x_stride * 4u);
    F32s y = F32s(p.y + uint64_t(row) * p.y_stride * 4u);
    F32s r = F32s(p.r + uint64_t(row) * p.x_stride * 4u);
    F32s w = F32s(p.w != 0ul ? p.w : p.x); // without a weight or a residual, x's row is read
    if (p.d != 0ul || p.r == 0ul)           // in their place (unused)
        r = x;
    float xv[ROW_REG], wv[ROW_REG], rv[ROW_REG];
    [[unroll]] for (uint j = 0u; j < ROW_REG; j++) {
        xv[j] = x.v[held(l, j)];
        wv[j] = w.v[held(l, j)];
        rv[j] = r.v[held(l, j)];
    }
    if (p.d != 0ul) {
        moe_add(xv, row, l);
    } else if (p.r != 0ul) {
        for (uint j = 0u; j < ROW_REG; j++) {
            precise float sum = rv[j] + xv[j];
            xv[j] = sum;
        }
    }
    for (uint j = 0u; j < ROW_REG; j++) {
        uint i = l + 256u * j;
        if (i < p.n) {
            if (p.d != 0ul || p.r != 0ul)
                x.v[i] = xv[j];
            precise float q = xv[j] * xv[j];
            row_s[i] = q;
        }
    }
    barrier();
    if (l < 32u) {
        double acc = 0.0LF;
        for (uint i0 = l; i0 < p.n; i0 += 256u) {
            float q[8];
            [[unroll]] for (uint u = 0u; u < 8u; u++)
                q[u] = i0 + 32u * u < p.n ? row_s[i0 + 32u * u] : 0.0;
            for (uint u = 0u; u < 8u; u++)
                if (i0 + 32u * u < p.n) {
                    precise double s = acc + double(q[u]);
                    acc = s;
                }
        }
        lanes[l] = acc;
    }
    LANES_FOLD(lanes, l) // its last barrier: every lane has read row_s
    float scale = rms_scale_c(lanes[0], p.inv_n, p.eps);
    for (uint j = 0u; j < ROW_REG; j++) {
        uint i = l + 256u * j;
        if (i < p.n) {
            precise float v = xv[j] * scale;
            if (p.w != 0ul) {
                precise float vw = v * wv[j];
                v = vw;
            }
            y.v[i] = v;
            row_s[i] = v;
        }
    }
    quantize_tail_row(p.y + uint64_t(row) * p.y_stride * 4u, p.n, p.qfmt,
                      p.qdst + uint64_t(row) * p.q_stride, l);
}

// The row of a workgroup whose n passes ROW_FAST: each pass over memory.
void norm_loop(uint row, uint l) {
    F32s x = F32s(p.x + uint64_t(row) * p.x_stride * 4u);
    F32s y = F32s(p.y + uint64_t(row) * p.y_stride * 4u);
    F32s r = F32s(p.r + uint64_t(row) * p.x_stride * 4u);
    for (uint i = l; i < p.n; i += 256u) {
        float xi = x.v[i];
        if (p.d != 0ul) {
            precise float sum = moe_sum_at(p.d, p.dw, p.k, p.n, p.shexp, p.shexp_gate, row, i) + xi;
            x.v[i] = sum;
        } else if (p.r != 0ul) {
            precise float sum = r.v[i] + xi;
            x.v[i] = sum;
        }
    }
    memoryBarrierBuffer(); // the sums written back to x, read by the lanes
    barrier();
    if (l < 32u) {
        double acc = 0.0LF;
        for (uint i = l; i < p.n; i += 32u) {
            precise float q = x.v[i] * x.v[i];
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

void main() {
    uint l = gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n_rows) // the whole workgroup leaves together
        return;
    if (p.n <= ROW_FAST)
        norm_fast(row, l);
    else
        norm_loop(row, l);
}
