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

#endif
