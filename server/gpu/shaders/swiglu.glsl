// swiglu.glsl - one element of SwiGLU as the CPU computes it: ops_swiglu (g / (1 + e^-g), times
// u) or, with oai, ops_swiglu_oai (gpt-oss: g clamped above at 7, u to [-7, 7], g / (1 + e^(1.702
// * -g)) times (u + 1)), every step rounded as the CPU rounds it. Include after contract.glsl.
float swiglu_c(float g, float u, bool oai) {
    precise float out_;
    if (!oai) {
        precise float den = 1.0 + exp_c(-g);
        out_ = div_rn(g, den) * u;
    } else {
        const float alpha = uintBitsToFloat(0x3fd9db23u), limit = 7.0; // 1.702f, as C rounds it
        float x = g < limit ? g : limit;
        float v = u < -limit ? -limit : u > limit ? limit : u;
        precise float ax = alpha * (-x);
        precise float den = 1.0 + exp_c(ax);
        out_ = div_rn(x, den) * (v + 1.0);
    }
    return out_;
}
