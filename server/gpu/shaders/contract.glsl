// contract.glsl - the row ops' contract (server/engine/ops.h), the GPU's side: exp_c is ops_exp
// step for step in double, sqrt_rn is C's sqrtf (correctly rounded), and the 32-lane double sum
// (lane l adds elements l, l + 32 ... in order; then lane l += lane l + w for w = 16 .. 1) is
// lanes_fold over a workgroup's shared array. Include after common.glsl.
#ifndef CONTRACT_GLSL
#define CONTRACT_GLSL

// 2^(j/32) as doubles (low word, high word): ops.c's exp_table, bit for bit.
const uint EXP_TABLE[64] = uint[](
    0x00000000u, 0x3ff00000u, 0xd3158574u, 0x3ff059b0u, 0x6cf9890fu, 0x3ff0b558u, 0xd0125b51u,
    0x3ff11301u, 0x3c7d517bu, 0x3ff172b8u, 0x3168b9aau, 0x3ff1d487u, 0x6e756238u, 0x3ff2387au,
    0xf51fdee1u, 0x3ff29e9du, 0x0a31b715u, 0x3ff306feu, 0x373aa9cbu, 0x3ff371a7u, 0x4c123422u,
    0x3ff3dea6u, 0x6061892du, 0x3ff44e08u, 0xd5362a27u, 0x3ff4bfdau, 0x569d4f82u, 0x3ff5342bu,
    0xdd485429u, 0x3ff5ab07u, 0xb03a5585u, 0x3ff6247eu, 0x667f3bcdu, 0x3ff6a09eu, 0xe8ec5f74u,
    0x3ff71f75u, 0x73eb0187u, 0x3ff7a114u, 0x994cce13u, 0x3ff82589u, 0x422aa0dbu, 0x3ff8ace5u,
    0xb0cdc5e5u, 0x3ff93737u, 0x82a3f090u, 0x3ff9c491u, 0xb23e255du, 0x3ffa5503u, 0x995ad3adu,
    0x3ffae89fu, 0xf2fb5e47u, 0x3ffb7f76u, 0xdd85529cu, 0x3ffc199bu, 0xdcef9069u, 0x3ffcb720u,
    0xdcfba487u, 0x3ffd5818u, 0x337b9b5fu, 0x3ffdfc97u, 0xa2a490dau, 0x3ffea4afu, 0x5b6e4540u,
    0x3fff5076u);

double dbits(uint lo, uint hi) {
    return packDouble2x32(uvec2(lo, hi));
}

// ops_exp: e^x in float.
float exp_c(float x) {
    if (isnan(x))
        return x;
    if (x >= 88.72283935546875)
        return uintBitsToFloat(0x7f800000u);
    if (x < -104.0)
        return 0.0;
    precise double xd = double(x);
    precise double shift = dbits(0x00000000u, 0x43380000u);         // 0x1.8p52
    precise double z = xd * dbits(0x652b82feu, 0x40471547u);        // 32 / ln 2
    precise double kd = (z + shift) - shift;
    precise double r = (xd - kd * dbits(0xfefa39efu, 0x3f962e42u))  // ln 2 / 32, high part
                       - kd * dbits(0x00000000u, 0x3c2ac000u);      // and the low
    int k = int(kd);
    precise double p = 1.0LF + r * (1.0LF + r * (dbits(0x00000000u, 0x3fe00000u) +
                       r * (dbits(0x55555555u, 0x3fc55555u) + r * (dbits(0x55555555u, 0x3fa55555u) +
                       r * dbits(0x11111111u, 0x3f811111u)))));
    uint j = uint(k & 31);
    double scale = dbits(0u, uint(1023 + (k >> 5)) << 20);          // 2^(k >> 5), exact
    precise double v = dbits(EXP_TABLE[2u * j], EXP_TABLE[2u * j + 1u]) * scale * p;
    return v < dbits(0u, 0x38100000u) ? 0.0 : float(v);            // below 2^-126: 0
}

// sqrtf: the float nearest the square root of a >= 0 of normal size (a subnormal a is the device's
// business: the H100 flushes it to 0; the engine's roots are of mean + eps) (the double root rounded, then moved to
// whichever neighbour the exact comparison with the midpoints says; squares of 25-bit numbers are
// exact in double).
float sqrt_rn(float a) {
    if (!(a > 0.0) || isinf(a))
        return a < 0.0 ? uintBitsToFloat(0x7fc00000u) : a;
    float f = float(sqrt(double(a)));
    float lo = uintBitsToFloat(floatBitsToUint(f) - 1u), hi = uintBitsToFloat(floatBitsToUint(f) + 1u);
    precise double mlo = (double(f) + double(lo)) * 0.5LF, mhi = (double(f) + double(hi)) * 0.5LF;
    precise double ml2 = mlo * mlo, mh2 = mhi * mhi;
    if (double(a) < ml2)
        return lo;
    if (double(a) > mh2)
        return hi;
    return f;
}

// Folds 32 lanes held in a shared array, called by every invocation of the workgroup (each of
// invocations 0 .. 31 folds lane i; all reach the barriers). The total is left in lanes[0].
#define LANES_FOLD(lanes, i)                                                        \
    for (uint w_ = 16u; w_ >= 1u; w_ >>= 1) {                                       \
        barrier();                                                                  \
        if ((i) < w_) {                                                             \
            precise double s_ = lanes[(i)] + lanes[(i) + w_];                       \
            lanes[(i)] = s_;                                                        \
        }                                                                           \
    }                                                                               \
    barrier();

#endif
