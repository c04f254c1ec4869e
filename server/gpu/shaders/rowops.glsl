// rowops.glsl - the launch shapes of the forward pass's row ops (gpu_rowops.c): a row's elements
// on the dispatch's x (64 invocations a workgroup), its rows on y, spilling onto z past 65535
// (every device takes that many on each); a flat op's elements on x, spilling onto y. Include after
// common.glsl.
#ifndef ROWOPS_GLSL
#define ROWOPS_GLSL

#include "contract.glsl"

// Every row-op kernel's workgroup (gpu_rowops.c's ROW_GROUP), declared before grid_col reads it.
layout(local_size_x = 64) in;

// The row this workgroup works on (rows on y, then z).
uint grid_row() {
    return gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y;
}

// The element this invocation works on: within its row (rowed ops), or of the whole op (flat ops,
// whose x spills onto y).
uint grid_col() {
    return gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
}

uint grid_flat() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
           gl_LocalInvocationID.x;
}

// The float at index i of the floats at base (an index past 2^32 elements kept exact).
float f32_at(uint64_t base, uint64_t i) {
    return F32s(base + i * 4ul).v[0];
}

// ops_exp's logistic as the CPU writes it: 1 / (1 + e^-g), each step rounded as C rounds it.
float sigmoid_c(float g) {
    precise float den = 1.0 + exp_c(-g);
    return div_rn(1.0, den);
}

#endif
