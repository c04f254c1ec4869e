// contract.glsl - the row ops' contract (server/engine/ops.h), the GPU's side: exp_c is ops_exp
// and log_c ops_log step for step in double, sqrt_rn is C's sqrtf (correctly rounded), and the
// 32-lane double sum (lane l adds elements l, l + 32 ... in order; then lane l += lane l + w for
// w = 16 .. 1) is lanes_fold over a workgroup's shared array. Include after common.glsl.
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

// 1 / (1 + j/32) and ln(1 + j/32) as doubles (low word, high word): ops.c's log_inv and
// log_table, bit for bit.
const uint LOG_INV[64] = uint[](
    0x00000000u, 0x3ff00000u, 0xf07c1f08u, 0x3fef07c1u, 0x1e1e1e1eu, 0x3fee1e1eu, 0x1d41d41du,
    0x3fed41d4u, 0x1c71c71cu, 0x3fec71c7u, 0x14c1bad0u, 0x3febacf9u, 0xbca1af28u, 0x3feaf286u,
    0x1a41a41au, 0x3fea41a4u, 0x9999999au, 0x3fe99999u, 0x8f9c18fau, 0x3fe8f9c1u, 0x18618618u,
    0x3fe86186u, 0x417d05f4u, 0x3fe7d05fu, 0x745d1746u, 0x3fe745d1u, 0x16c16c17u, 0x3fe6c16cu,
    0x590b2164u, 0x3fe642c8u, 0x2b931057u, 0x3fe5c988u, 0x55555555u, 0x3fe55555u, 0xa72f0539u,
    0x3fe4e5e0u, 0x47ae147bu, 0x3fe47ae1u, 0x14141414u, 0x3fe41414u, 0x13b13b14u, 0x3fe3b13bu,
    0xfb2b78c1u, 0x3fe3521cu, 0xbda12f68u, 0x3fe2f684u, 0x29e4129eu, 0x3fe29e41u, 0x92492492u,
    0x3fe24924u, 0x7dc11f70u, 0x3fe1f704u, 0x611a7b96u, 0x3fe1a7b9u, 0x5f75270du, 0x3fe15b1eu,
    0x11111111u, 0x3fe11111u, 0x4fbcda3bu, 0x3fe0c971u, 0x08421084u, 0x3fe08421u, 0x10410410u,
    0x3fe04104u);
const uint LOG_TABLE[64] = uint[](
    0x00000000u, 0x00000000u, 0x0e783300u, 0x3f9f829bu, 0xc01162a6u, 0x3faf0a30u, 0x8ae56b4cu,
    0x3fb6f0d2u, 0x6e2af2e6u, 0x3fbe2707u, 0xf81ff523u, 0x3fc29552u, 0x70a793d4u, 0x3fc5ff30u,
    0x9cf456b4u, 0x3fc9525au, 0xc79a9a22u, 0x3fcc8ff7u, 0x6d5e3e2bu, 0x3fcfb918u, 0xababa60eu,
    0x3fd1675cu, 0xbae11d31u, 0x3fd2e8e2u, 0xc21c5ec2u, 0x3fd4618bu, 0xbf5809cau, 0x3fd5d1bdu,
    0xf6bbd007u, 0x3fd739d7u, 0x86c1425bu, 0x3fd89a33u, 0xecbf984cu, 0x3fd9f323u, 0x7bcc8f63u,
    0x3fdb44f7u, 0xc79a9a22u, 0x3fdc8ff7u, 0x04c1c4a1u, 0x3fddd46au, 0x5faf06edu, 0x3fdf128fu,
    0xa5a5d0ffu, 0x3fe02552u, 0xe4252a83u, 0x3fe0be72u, 0xd2f4d5eau, 0x3fe154c3u, 0x5e7040d0u,
    0x3fe1e85fu, 0x1289b11bu, 0x3fe2795eu, 0x334f10beu, 0x3fe307d7u, 0xd3562a1au, 0x3fe393e0u,
    0xe84672aeu, 0x3fe41d8fu, 0x5db03ebbu, 0x3fe4a4f8u, 0x265bc5abu, 0x3fe52a2du, 0x4c359f2du,
    0x3fe5ad40u);

// ops_log: ln x in float, read from x's bits (a subnormal is 0 whether or not the device keeps
// it).
float log_c(float x) {
    uint u = floatBitsToUint(x);
    if (isnan(x) || u == 0x7f800000u)
        return x;
    if ((u >> 31) != 0u && (u & 0x7fffffffu) != 0u)
        return uintBitsToFloat(0x7fc00000u);
    if ((u >> 23) == 0u || u == 0x80000000u)
        return uintBitsToFloat(0xff800000u);
    int e = int(u >> 23) - 127;
    uint j = (u >> 18) & 31u;
    double m = double(uintBitsToFloat((u & 0x7fffffu) | 0x3f800000u));
    precise double r = m * dbits(LOG_INV[2u * j], LOG_INV[2u * j + 1u]) - 1.0LF;
    precise double p = r * (1.0LF + r * (-0.5LF + r * (dbits(0x55555555u, 0x3fd55555u) +
                       r * (-0.25LF + r * (dbits(0x9999999au, 0x3fc99999u) +
                       r * (-dbits(0x55555555u, 0x3fc55555u) + r * (dbits(0x92492492u, 0x3fc24924u) +
                       r * -0.125LF)))))));
    precise double v = (double(e) * dbits(0xfefa39efu, 0x3fe62e42u) +
                        dbits(LOG_TABLE[2u * j], LOG_TABLE[2u * j + 1u])) + p;
    return float(v);
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

// ops_exp's logistic as the CPU writes it: 1 / (1 + e^-g), each step rounded as C rounds it.
float sigmoid_c(float g) {
    precise float den = 1.0 + exp_c(-g);
    return div_rn(1.0, den);
}

// ops_rms_norm's scale from a row's folded sum of squares: mean = float(sum * inv_n) (inv_n =
// 1.0 / n from the CPU), then 1 / sqrt(mean + eps).
float rms_scale_c(double sum, double inv_n, float eps) {
    precise double m = sum * inv_n;
    precise float mean_eps = float(m) + eps;
    return div_rn(1.0, sqrt_rn(mean_eps));
}

// One RoPE pair (x0, x1) turned by (c, s) as ops_rope_neox / ops_rope_norm: each product rounded
// before its sum.
vec2 rope_pair_c(float x0, float x1, float c, float s) {
    precise float r0 = x0 * c - x1 * s;
    precise float r1 = x0 * s + x1 * c;
    return vec2(r0, r1);
}

#endif
