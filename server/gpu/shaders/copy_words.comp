// copy_words.comp - dst[i] = src[i] over n 16-byte words, each invocation striding the grid: what
// a kernel can read and write of device memory (bench-gpu's bandwidth bound; vkCmdCopyBuffer runs
// on a copy engine that reaches less).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer V4s { uvec4 v[]; };

layout(push_constant) uniform Push {
    uint64_t src;
    uint64_t dst;
    uint n;        // 16-byte words
} p;

void main() {
    V4s s = V4s(p.src), d = V4s(p.dst);
    uint stride = gl_NumWorkGroups.x * 256u;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
        d.v[i] = s.v[i];
}
