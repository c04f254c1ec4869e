// deltanet.glsl - what the DeltaNet kernels (deltanet_*.comp) share: block_deltanet.c's SiLU
// and softplus (its sigmoid is contract.glsl's sigmoid_c), and the end of ggml's f32 dot product
// (ops_dot_f32), each in the row ops' contract. Include after common.glsl and contract.glsl.
#ifndef DELTANET_GLSL
#define DELTANET_GLSL

// x / (1 + exp(-x))
float silu_c(float x) {
    precise float d = 1.0 + exp_c(-x);
    return div_rn(x, d);
}

// x above 20, else log(1 + exp(x))
float softplus_c(float x) {
    precise float s = 1.0 + exp_c(x);
    return x > 20.0 ? x : log_c(s);
}

// The end of ops_dot_f32 of x[0 .. n) and y[0 .. n): its 32 accumulators s (lane l of
// accumulator j is s[8 j + l]), each the fused multiply-adds of its elements of the 32-element
// steps before np, are added (0 + 2) + (1 + 3) per lane, the 8 lanes as lo + hi, then
// (0 + 1) + (2 + 3); the tail (elements np .. n) added in float.
float dot_ggml_fold(float s[32], F32s x, F32s y, uint np, uint n) {
    float t0[4];
    for (uint l = 0u; l < 4u; l++) {
        precise float lo = (s[l] + s[16u + l]) + (s[8u + l] + s[24u + l]);
        precise float hi = (s[4u + l] + s[20u + l]) + (s[12u + l] + s[28u + l]);
        precise float t = lo + hi;
        t0[l] = t;
    }
    precise float sum = (t0[0] + t0[1]) + (t0[2] + t0[3]);
    for (uint i = np; i < n; i++) {
        precise float p = x.v[i] * y.v[i];
        precise float q = sum + p;
        sum = q;
    }
    return sum;
}

#endif
