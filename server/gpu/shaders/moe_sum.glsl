// moe_sum.glsl - the routed experts' weighted sum of one element in block_moe.c's order, shared by
// moe_sum.comp and rms_norm.comp (which adds it to the residual before the next norm): for token t
// and element i, y = d[t k][i] * w[t k], then y + d[t k + s][i] * w[t k + s] for s = 1 .. k - 1
// (each product rounded before its sum), then with a shared expert y + shexp[t][i] * (1 / (1 +
// e^-gate[t])). d's rows and shexp's are n floats apart. Include after common.glsl and
// contract.glsl.
#ifndef MOE_SUM_GLSL
#define MOE_SUM_GLSL

float moe_sum_at(uint64_t d, uint64_t w, uint k, uint n, uint64_t shexp, uint64_t shexp_gate,
                 uint t, uint i) {
    uint64_t r0 = uint64_t(t) * k;
    precise float y = f32_at(d, r0 * n + i) * f32_at(w, r0);
    for (uint s = 1u; s < k; s++) {
        precise float acc = y + f32_at(d, (r0 + s) * n + i) * f32_at(w, r0 + s);
        y = acc;
    }
    if (shexp != 0ul) {
        float g = sigmoid_c(f32_at(shexp_gate, t));
        precise float acc = y + f32_at(shexp, uint64_t(t) * n + i) * g;
        y = acc;
    }
    return y;
}

#endif
