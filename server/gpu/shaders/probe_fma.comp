// probe_fma.comp - out[i] = fma(a[i], b[i], c[i]) with the device's own fma (FMA_FUSED left 1):
// gpu_open compares the answers with C's fmaf to learn whether the device rounds fma once.
#version 450
#include "common.glsl"

layout(local_size_x = 1) in;

layout(push_constant) uniform Push {
    uint64_t in_;   // n triples a, b, c
    uint64_t out_;  // n floats
    uint n;
} p;

void main() {
    F32s x = F32s(p.in_), y = F32s(p.out_);
    for (uint i = 0u; i < p.n; i++)
        y.v[i] = fma(x.v[3u * i], x.v[3u * i + 1u], x.v[3u * i + 2u]);
}
