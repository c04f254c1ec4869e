/* test_quant.c - the quant spec pinned: fp16/bf16 conversions against F16C and hand values,
 * hand-built golden blocks for every bit layout, ggml's activation quantizers on hand-computed
 * cases (ties, zero blocks, fp16 scales, q8_K signs and bsums), reference dequantization of the
 * fixture tensors against gguf-py's, vec_dot against dequantize-then-dot within a named tolerance
 * (and the dispatched kernels against the reference bit for bit), weight quantizer round-trip
 * bounds, and the dispatch table. */
#include "gguf.h"
#include "harness.h"
#include "os.h"
#include "quant.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* vec_dot_ref vs dot(dequant(w), dequant(a)) in double, relative to sum |w_i * a_i|: only the
 * float rounding of the per-block scale product and of the final sum separate them. */
#define TOL_DOT_REL 2e-6
/* fixtures: exact or within this relative error (README) */
#define TOL_FIXTURE_REL 1e-6

/* ==== helpers ================================================================================= */

static uint32_t rng_state;

static void rng_seed(uint32_t seed) {
    rng_state = seed * 2654435761u + 12345u;
}

/* uniform in [-1, 1) */
static float rng_uniform(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

static void fill_random(float *x, int64_t n, uint32_t seed, float scale) {
    rng_seed(seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = scale * rng_uniform();
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Dequantizes one block-row of type t and checks n values against want exactly. */
static void check_dequant_exact(enum qtype t, const void *blk, const float *want, int n) {
    float got[QK_K];
    CHECK_EQ_INT(quant_dequantize_row(t, blk, got, n), 0);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (bits_of(got[i]) != bits_of(want[i]) && bad++ < 4)
            test_fail(__FILE__, __LINE__, "%s element %d: got %.9g want %.9g", qtype_name(t), i,
                      got[i], want[i]);
    }
}

/* ==== fp16 / bf16 ============================================================================= */

/* The CPU's own conversions: F16C on x86, FCVT (GCC's __fp16) on arm64. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HW_FP16 "F16C"
static bool hw_has_fp16(void) {
    __builtin_cpu_init();
    return os_cpu_x86_f16c();
}

__attribute__((target("f16c"))) static uint16_t hw_f32_to_fp16(float f) {
    return (uint16_t)_cvtss_sh(f, 0);
}

__attribute__((target("f16c"))) static float hw_fp16_to_f32(uint16_t h) {
    return _cvtsh_ss(h);
}
#elif defined(__aarch64__)
#define HW_FP16 "FCVT"
static bool hw_has_fp16(void) {
    return true; /* every Armv8-A CPU converts halves */
}

static uint16_t hw_f32_to_fp16(float f) {
    __fp16 h = (__fp16)f;
    uint16_t u;
    memcpy(&u, &h, sizeof(u));
    return u;
}

static float hw_fp16_to_f32(uint16_t u) {
    __fp16 h;
    memcpy(&h, &u, sizeof(h));
    return (float)h;
}
#else
#define HW_FP16 "half conversion"
static bool hw_has_fp16(void) {
    return false;
}

static uint16_t hw_f32_to_fp16(float f) {
    (void)f;
    return 0;
}

static float hw_fp16_to_f32(uint16_t u) {
    (void)u;
    return 0.0f;
}
#endif

static int fp16_mismatches;

static void check_f32_to_fp16_hw(float f) {
    uint16_t got = f32_to_fp16(f), want = hw_f32_to_fp16(f);
    if (got != want && fp16_mismatches++ < 8)
        test_fail(__FILE__, __LINE__, "f32_to_fp16(0x%08x) = 0x%04x, " HW_FP16 " says 0x%04x",
                  bits_of(f), got, want);
}

static void test_fp16_vs_f16c(void) {
    if (!hw_has_fp16()) {
        test_skip("this CPU has no " HW_FP16 ": fp16 conversions not compared with hardware");
        return;
    }
    fp16_mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; h++) { /* every half, NaNs included, bit for bit */
        float got = fp16_to_f32((fp16_t)h), want = hw_fp16_to_f32((uint16_t)h);
        if (bits_of(got) != bits_of(want) && fp16_mismatches++ < 8)
            test_fail(__FILE__, __LINE__, "fp16_to_f32(0x%04x) = 0x%08x, " HW_FP16 " says 0x%08x", h,
                      bits_of(got), bits_of(want));
    }
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093) /* a stride through every float class */
        check_f32_to_fp16_hw(float_of((uint32_t)u));
    for (uint32_t h = 0; h < 0x7c00; h++) { /* ties between neighbouring halves, and 1 ulp off */
        double lo = fp16_to_f32((fp16_t)h), hi = fp16_to_f32((fp16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
        float mids[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            check_f32_to_fp16_hw(mids[k]);
            check_f32_to_fp16_hw(-mids[k]);
        }
    }
    const float edges[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, INFINITY, -INFINITY,
                           NAN, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1p-26f, 0x1.8p-24f,
                           0x1p-14f, 0x1.ff8p-15f, 1e-45f, 3.0e38f};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        check_f32_to_fp16_hw(edges[i]);
    check_f32_to_fp16_hw(float_of(0x7f800001)); /* signalling NaN: quieted, payload kept */
    check_f32_to_fp16_hw(float_of(0xffa5a5a5));
}

static void test_fp16_hand_values(void) {
    CHECK_EQ_INT(f32_to_fp16(1.0f), 0x3c00);
    CHECK_EQ_INT(f32_to_fp16(-2.0f), 0xc000);
    CHECK_EQ_INT(f32_to_fp16(65504.0f), 0x7bff);
    CHECK_EQ_INT(f32_to_fp16(65520.0f), 0x7c00);             /* tie above max: to inf */
    CHECK_EQ_INT(f32_to_fp16(1.0f + 0x1p-11f), 0x3c00);      /* tie: to even (down) */
    CHECK_EQ_INT(f32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  /* tie: to even (up) */
    CHECK_EQ_INT(f32_to_fp16(0x1p-24f), 0x0001);             /* smallest subnormal */
    CHECK_EQ_INT(f32_to_fp16(0x1p-25f), 0x0000);             /* tie with zero: to even */
    CHECK_EQ_INT(f32_to_fp16(0x1.8p-24f), 0x0002);           /* 1.5 ulp: to even 2 */
    CHECK_EQ_INT(f32_to_fp16(0x1.ff8p-15f), 0x03ff);         /* largest subnormal, exact */
    CHECK_EQ_INT(f32_to_fp16(0x1.ffcp-15f), 0x0400);         /* tie: up into the normals */
    CHECK_EQ_INT(f32_to_fp16(-0.0f), 0x8000);
    CHECK_EQ_INT(fp16_to_f32(0x0001) == 0x1p-24f, 1);
    CHECK_EQ_INT(fp16_to_f32(0x7bff) == 65504.0f, 1);
    CHECK(isinf(fp16_to_f32(0xfc00)) && fp16_to_f32(0xfc00) < 0);
    CHECK(isnan(fp16_to_f32(0x7e00)));
}

static void test_bf16(void) {
    CHECK_EQ_INT(f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(f32_to_bf16(float_of(0x3f808000)), 0x3f80); /* tie, even stays */
    CHECK_EQ_INT(f32_to_bf16(float_of(0x3f818000)), 0x3f82); /* tie, odd rounds up */
    CHECK_EQ_INT(f32_to_bf16(float_of(0x3f808001)), 0x3f81); /* above the tie */
    CHECK_EQ_INT(f32_to_bf16(float_of(0xbf80ffff)), 0xbf81);
    CHECK_EQ_INT(f32_to_bf16(float_of(0x7f7fffff)), 0x7f80); /* max float rounds to inf */
    CHECK_EQ_INT(f32_to_bf16(INFINITY), 0x7f80);
    CHECK_EQ_INT(f32_to_bf16(float_of(0x7f800001)), 0x7fc0); /* NaN forced quiet */
    CHECK_EQ_INT(f32_to_bf16(float_of(0xff812345)), 0xffc1);
    CHECK_EQ_INT(f32_to_bf16(float_of(0x00018000)), 0x0002); /* subnormal: rounded, not flushed */
    CHECK_EQ_INT(bits_of(bf16_to_f32(0xc040)), 0xc0400000);
    for (uint32_t h = 0; h < 0x10000; h++) { /* every non-NaN bf16 survives a round trip */
        float f = bf16_to_f32((bf16_t)h);
        if (!isnan(f) && f32_to_bf16(f) != h) {
            test_fail(__FILE__, __LINE__, "bf16 0x%04x does not round-trip", h);
            break;
        }
    }
}

/* ==== golden blocks =========================================================================== */

static void test_golden_q4_0(void) {
    struct block_q4_0 b = {.d = 0x3800}; /* 0.5 */
    memset(b.qs, 0x88, sizeof(b.qs));
    b.qs[0] = 0x1f; /* element 0: 15-8, element 16: 1-8 */
    b.qs[1] = 0x80; /* element 1: 0-8, element 17: 8-8 */
    float want[32] = {0};
    want[0] = 3.5f;
    want[16] = -3.5f;
    want[1] = -4.0f;
    check_dequant_exact(QTYPE_Q4_0, &b, want, 32);
}

static void test_golden_q4_1(void) {
    struct block_q4_1 b = {.d = 0x3800, .m = 0xbc00}; /* 0.5, -1 */
    memset(b.qs, 0x22, sizeof(b.qs));
    b.qs[0] = 0x1f;
    float want[32];
    for (int i = 0; i < 32; i++)
        want[i] = 0.0f; /* 2 * 0.5 - 1 */
    want[0] = 6.5f;
    want[16] = -0.5f;
    check_dequant_exact(QTYPE_Q4_1, &b, want, 32);
}

/* qh as a little-endian u32: bit j is the fifth bit of element j. */
static void test_golden_q5(void) {
    struct block_q5_0 b0 = {.d = 0x3c00, .qh = {0x01, 0x00, 0x01, 0x80}}; /* bits 0, 16, 31 */
    b0.qs[0] = 0x21;
    b0.qs[15] = 0xf0;
    float want[32];
    for (int i = 0; i < 32; i++)
        want[i] = -16.0f;
    want[0] = 1.0f;   /* 1 | 16 */
    want[16] = 2.0f;  /* 2 | 16 */
    want[15] = -16.0f; /* 0, bit 15 clear */
    want[31] = 15.0f; /* 15 | 16 */
    check_dequant_exact(QTYPE_Q5_0, &b0, want, 32);

    struct block_q5_1 b1 = {.d = 0x3c00, .m = 0x3800, .qh = {0x01, 0x00, 0x01, 0x80}};
    memcpy(b1.qs, b0.qs, sizeof(b1.qs));
    for (int i = 0; i < 32; i++)
        want[i] += 16.5f; /* codes unsigned, plus m = 0.5 */
    check_dequant_exact(QTYPE_Q5_1, &b1, want, 32);
}

static void test_golden_q8(void) {
    struct block_q8_0 b = {.d = 0x3400}; /* 0.25 */
    float want[QK_K];
    for (int j = 0; j < 32; j++) {
        b.qs[j] = (int8_t)(j - 16);
        want[j] = (float)(j - 16) * 0.25f;
    }
    check_dequant_exact(QTYPE_Q8_0, &b, want, 32);

    /* q8_K in a file is ggml's layout (float d, then the codes), not the activations' */
    uint8_t k[292] = {0};
    const float kd = -0.5f;
    memcpy(k, &kd, sizeof(kd));
    for (int j = 0; j < QK_K; j++) {
        k[4 + j] = (uint8_t)(int8_t)(j - 128);
        want[j] = -0.5f * (float)(j - 128);
    }
    check_dequant_exact(QTYPE_Q8_K, k, want, QK_K);

    const fp16_t h[6] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x03ff, 0xfc00};
    const float hw[6] = {1.0f, -2.0f, 0x1p-24f, 65504.0f, 1023 * 0x1p-24f, -INFINITY};
    check_dequant_exact(QTYPE_F16, h, hw, 6);
    const bf16_t bh[3] = {0x3f80, 0xc040, 0x0001};
    const float bw[3] = {1.0f, -3.0f, 0x1p-133f};
    check_dequant_exact(QTYPE_BF16, bh, bw, 3);
}

/* Sub-block scales {1,2,3,4,33,50,63,17} and mins {0,5,10,63,20,1,40,7}, packed by hand:
 * bytes 0-3 = sc0-3 | (sc4-7 >> 4) << 6, bytes 4-7 = m0-3 | (m4-7 >> 4) << 6,
 * bytes 8-11 = (sc4-7 & 15) | (m4-7 & 15) << 4. */
static const int k_sc[8] = {1, 2, 3, 4, 33, 50, 63, 17};
static const int k_mn[8] = {0, 5, 10, 63, 20, 1, 40, 7};
static const uint8_t k_scales_packed[12] = {0x81, 0xc2, 0xc3, 0x44, 0x40, 0x05,
                                            0x8a, 0x3f, 0x41, 0x12, 0x8f, 0x71};

static void test_golden_q4_K(void) {
    struct block_q4_K b = {.d = 0x3c00, .dmin = 0x3800}; /* 1.0, 0.5 */
    memcpy(b.scales, k_scales_packed, 12);
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)((i % 16) | (15 - i % 16) << 4);
    float want[QK_K];
    /* qs[32c + l]: low nibble is element l of sub-block 2c, high nibble of sub-block 2c+1 */
    for (int s = 0; s < 8; s++) {
        for (int l = 0; l < 32; l++) {
            uint8_t byte = b.qs[32 * (s / 2) + l];
            int q = s % 2 ? byte >> 4 : byte & 15;
            want[32 * s + l] = (float)(k_sc[s] * q) - 0.5f * (float)k_mn[s];
        }
    }
    check_dequant_exact(QTYPE_Q4_K, &b, want, QK_K);
    float got[QK_K];
    quant_dequantize_row(QTYPE_Q4_K, &b, got, QK_K);
    CHECK_NEAR(got[0], 0.0f, 0);      /* sc 1, q 0, m 0 */
    CHECK_NEAR(got[32], 27.5f, 0);    /* sc 2, q 15, m 5 */
    CHECK_NEAR(got[197], 295.0f, 0);  /* sub-block 6: sc 63, q 5, m 40 */
    CHECK_NEAR(got[224], 251.5f, 0);  /* sub-block 7: sc 17, q 15, m 7 */
    CHECK_NEAR(got[255], -3.5f, 0);
}

static void test_golden_q5_K(void) {
    struct block_q5_K b = {.d = 0x3c00, .dmin = 0x3800};
    memcpy(b.scales, k_scales_packed, 12);
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)((i % 16) | (15 - i % 16) << 4);
    for (int l = 0; l < 32; l++)
        b.qh[l] = (uint8_t)(l * 37 + 5);
    float want[QK_K];
    /* qh[l] bit s is the fifth bit of element l of sub-block s */
    for (int s = 0; s < 8; s++) {
        for (int l = 0; l < 32; l++) {
            uint8_t byte = b.qs[32 * (s / 2) + l];
            int q = (s % 2 ? byte >> 4 : byte & 15) | ((b.qh[l] >> s) & 1) << 4;
            want[32 * s + l] = (float)(k_sc[s] * q) - 0.5f * (float)k_mn[s];
        }
    }
    check_dequant_exact(QTYPE_Q5_K, &b, want, QK_K);
    float got[QK_K];
    quant_dequantize_row(QTYPE_Q5_K, &b, got, QK_K);
    CHECK_NEAR(got[0], 16.0f, 0);    /* qh[0] = 5: bit 0 set -> q 16, sc 1 */
    CHECK_NEAR(got[32], 27.5f, 0);   /* bit 1 clear */
    CHECK_NEAR(got[64], 48.0f - 5.0f, 0); /* bit 2 set: q 16, sc 3, m 10 */
}

static void test_golden_q6_K(void) {
    struct block_q6_K b = {.d = 0x3800}; /* 0.5 */
    for (int g = 0; g < 16; g++)
        b.scales[g] = (int8_t)(g < 8 ? g - 8 : g - 5);
    b.ql[0] = 0x21;
    b.qh[0] = 0xe4;
    b.ql[32] = 0x0f;
    b.ql[64] = 0x5a;
    b.qh[32] = 0x1b;
    float want[QK_K];
    /* ggml's formulation: per half, l in 0..31, four elements from ql[l], ql[l+32], qh[l] */
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b.ql + 64 * h, *qh = b.qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            int q[4] = {(ql[l] & 15) | (qh[l] & 3) << 4,
                        (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4,
                        (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4,
                        (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4};
            for (int k = 0; k < 4; k++) {
                int e = 128 * h + 32 * k + l;
                want[e] = 0.5f * (float)b.scales[e / 16] * (float)(q[k] - 32);
            }
        }
    }
    check_dequant_exact(QTYPE_Q6_K, &b, want, QK_K);
    float got[QK_K];
    quant_dequantize_row(QTYPE_Q6_K, &b, got, QK_K);
    CHECK_NEAR(got[0], 124.0f, 0);   /* code 1: 0.5 * -8 * -31 */
    CHECK_NEAR(got[32], 3.0f, 0);    /* code 31: 0.5 * -6 * -1 */
    CHECK_NEAR(got[64], -4.0f, 0);   /* code 34: 0.5 * -4 * 2 */
    CHECK_NEAR(got[96], -16.0f, 0);  /* code 48: 0.5 * -2 * 16 */
    CHECK_NEAR(got[128], 39.0f, 0);  /* code 58: 0.5 * 3 * 26 */
    CHECK_NEAR(got[192], -38.5f, 0); /* code 21: 0.5 * 7 * -11 */
    CHECK_NEAR(got[1], 128.0f, 0);   /* code 0: 0.5 * -8 * -32 */
}

/* q2_K: scales[j] = 4-bit scale | 4-bit min << 4 per 16 elements; qs[32h + l] holds elements
 * 128h + 32k + l in bits 2k..2k+1. Here scale j = j, min j = 15 - j, d = 0.5, dmin = 0.25. Spot
 * values from gguf-py on the same block. */
static void test_golden_q2_K(void) {
    struct block_q2_K b = {.d = 0x3800, .dmin = 0x3400};
    for (int j = 0; j < 16; j++)
        b.scales[j] = (uint8_t)(j | (15 - j) << 4);
    for (int i = 0; i < 64; i++)
        b.qs[i] = (uint8_t)(i * 37 + 11);
    float want[QK_K];
    /* the layout as ggml's reference loops state it: per half, four shifts, 16 + 16 elements */
    for (int h = 0, is = 0; h < 2; h++) {
        for (int k = 0; k < 4; k++) {
            for (int half = 0; half < 2; half++, is++) {
                int sc = b.scales[is];
                for (int l = 0; l < 16; l++) {
                    int q = (b.qs[32 * h + 16 * half + l] >> (2 * k)) & 3;
                    want[128 * h + 32 * k + 16 * half + l] =
                        0.5f * (float)(sc & 15) * (float)q - 0.25f * (float)(sc >> 4);
                }
            }
        }
    }
    check_dequant_exact(QTYPE_Q2_K, &b, want, QK_K);
    static const struct { int i; float v; } spot[] = {
        {0, -3.75f}, {32, -1.25f}, {64, -2.75f}, {96, -2.25f}, {127, 5.0f},
        {128, 10.25f}, {160, 8.75f}, {200, 5.25f}, {255, 0.0f},
    };
    float got[QK_K];
    quant_dequantize_row(QTYPE_Q2_K, &b, got, QK_K);
    for (size_t k = 0; k < sizeof(spot) / sizeof(spot[0]); k++)
        CHECK_NEAR(got[spot[k].i], spot[k].v, 0);
}

/* q3_K: 2-bit codes as q2_K's, minus 4 where bit e/32 of hmask[e % 32] is clear; 16 signed 6-bit
 * scales: low nibbles in bytes 0-7 (scales 0-7 low halves, 8-15 high halves), top 2 bits in
 * bytes 8-11. Scale j = j - 8 here (packed 08 19 2a 3b 4c 5d 6e 7f a5 a5 a5 a5), d = 1. */
static void test_golden_q3_K(void) {
    struct block_q3_K b = {.d = 0x3c00};
    static const uint8_t sc[12] = {0x08, 0x19, 0x2a, 0x3b, 0x4c, 0x5d,
                                   0x6e, 0x7f, 0xa5, 0xa5, 0xa5, 0xa5};
    memcpy(b.scales, sc, sizeof(sc));
    for (int l = 0; l < 32; l++)
        b.hmask[l] = (uint8_t)(l * 7);
    for (int i = 0; i < 64; i++)
        b.qs[i] = (uint8_t)(i * 29 + 3);
    float want[QK_K];
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int q = ((b.qs[32 * h + l] >> (2 * k)) & 3) - (b.hmask[l] & (1 << (4 * h + k)) ? 0 : 4);
        want[e] = (float)(e / 16 - 8) * (float)q;
    }
    check_dequant_exact(QTYPE_Q3_K, &b, want, QK_K);
    static const struct { int i; float v; } spot[] = {
        {0, 8.0f}, {32, 24.0f}, {63, 15.0f}, {64, 16.0f}, {100, -2.0f}, {200, -16.0f},
    };
    float got[QK_K];
    quant_dequantize_row(QTYPE_Q3_K, &b, got, QK_K);
    for (size_t k = 0; k < sizeof(spot) / sizeof(spot[0]); k++)
        CHECK_NEAR(got[spot[k].i], spot[k].v, 0);
}

/* The IQ4_NL table and MXFP4 (doubled e2m1 values, scale 2^(e-128)) against golden blocks:
 * codes (7j + 3) % 16 as tools/derive_quant_values.py prints them with gguf-py's values. */
static void test_golden_nl_tables(void) {
    struct block_iq4_nl nl = {.d = 0xb600}; /* -0.375 */
    struct block_mxfp4 mx = {.e = 125};
    for (int j = 0; j < 16; j++) {
        int lo = (7 * j + 3) % 16, hi = (7 * (j + 16) + 3) % 16;
        nl.qs[j] = mx.qs[j] = (uint8_t)(lo | hi << 4);
    }
    static const float want_nl[16] = {24.375f, -9.375f, 39.0f,   -0.375f, -42.375f, 8.25f,
                                      -25.875f, 18.375f, -14.25f, 31.125f, -4.875f, 47.625f,
                                      3.75f,   -33.375f, 13.125f, -19.875f};
    static const float want_mx[16] = {0.375f, -0.25f, 0.125f, 0.0f,  -1.5f,   1.0f,
                                      -0.75f, 0.5f,   -0.375f, 0.25f, -0.125f, 0.0f,
                                      1.5f,   -1.0f,  0.75f,  -0.5f};
    float w_nl[32], w_mx[32], w_e1[32];
    for (int i = 0; i < 32; i++) {
        w_nl[i] = want_nl[i % 16];
        w_mx[i] = want_mx[i % 16];
        w_e1[i] = want_mx[i % 16] * 0x1p-124f; /* e = 1: 2^-127 per doubled unit, subnormal */
    }
    check_dequant_exact(QTYPE_IQ4_NL, &nl, w_nl, 32);
    check_dequant_exact(QTYPE_MXFP4, &mx, w_mx, 32);
    mx.e = 1;
    check_dequant_exact(QTYPE_MXFP4, &mx, w_e1, 32);
    CHECK(quant_e8m0_half(0) == 0x1p-128f && quant_e8m0_half(128) == 1.0f);
    CHECK(quant_e8m0_half(255) == 0x1p127f);
}

/* iq4_xs: 8 sub-blocks of 32; scale j = (nibble j%2 of scales_l[j/2] | bits 2j..2j+1 of scales_h
 * << 4) - 32; each sub-block's 16 qs bytes as iq4_nl's. Scale j = 3(j - 4) here, d = 0.5. */
static void test_golden_iq4_xs(void) {
    struct block_iq4_xs b = {.d = 0x3800, .scales_h = 0xaa55, .scales_l = {0x74, 0xda, 0x30, 0x96}};
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)(i * 13 + 5);
    float want[QK_K];
    for (int j = 0; j < 8; j++) {
        float dl = 0.5f * (float)(3 * (j - 4));
        for (int l = 0; l < 16; l++) {
            want[32 * j + l] = dl * (float)quant_iq4nl_values[b.qs[16 * j + l] & 15];
            want[32 * j + l + 16] = dl * (float)quant_iq4nl_values[b.qs[16 * j + l] >> 4];
        }
    }
    check_dequant_exact(QTYPE_IQ4_XS, &b, want, QK_K);
    static const struct { int i; float v; } spot[] = {
        {0, 210.0f},   {1, 498.0f},    {16, 762.0f},  {31, -318.0f}, {32, 157.5f},
        {48, -310.5f}, {100, -19.5f}, {160, -52.5f}, {224, -157.5f}, {255, -45.0f},
    };
    float got[QK_K];
    quant_dequantize_row(QTYPE_IQ4_XS, &b, got, QK_K);
    for (size_t k = 0; k < sizeof(spot) / sizeof(spot[0]); k++)
        CHECK_NEAR(got[spot[k].i], spot[k].v, 0);
}

/* ==== activation quantizers =================================================================== */

static void test_act_q8_0(void) {
    float x[64] = {0};
    /* block 0: amax 127 makes the multiplier exactly 1: ties show the rounding */
    const float ties[8] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, -126.5f};
    const int want_ties[8] = {127, 0, 2, 2, 0, -2, -2, -126};
    memcpy(x, ties, sizeof(ties));
    /* block 1: amax 1.0: d = 1/127 is stored as fp16 0x2008 (1/127.0077); the multiplier is
     * 127/amax = 127, so 0.3425 -> 43.4975 -> 43; 1/fp16(d) would give 43.5002 -> 44 */
    x[32] = 1.0f;
    x[33] = 0.3425f;
    x[34] = -0.25f; /* -31.75 -> -32 */
    struct block_q8_0 y[2];
    quant_q8_0_from_f32(x, y, 64);
    CHECK_EQ_INT(y[0].d, 0x3c00);
    for (int j = 0; j < 8; j++)
        CHECK_EQ_INT(y[0].qs[j], want_ties[j]);
    CHECK_EQ_INT(y[1].d, 0x2008);
    CHECK_EQ_INT(y[1].qs[0], 127);
    CHECK_EQ_INT(y[1].qs[1], 43);
    CHECK_EQ_INT(y[1].qs[2], -32);
    CHECK_EQ_INT(y[1].qs[3], 0);

    /* amax 1.01, x = amax/2: 127/amax makes x * id exactly 63.5, a tie that goes to 64, as
     * llama.cpp 34af94c's quantize_row_q8_0 gives (d 0x2012); the multiplier 1/d, d = amax/127 in
     * float, is a little smaller (63.49999...) and gives 63 */
    float t[32] = {1.01f, 0.505f};
    quant_q8_0_from_f32(t, y, 32);
    CHECK_EQ_INT(y[0].d, 0x2012);
    CHECK_EQ_INT(y[0].qs[0], 127);
    CHECK_EQ_INT(y[0].qs[1], 64);

    float z[32] = {0};
    memset(y, 0x55, sizeof(y));
    quant_q8_0_from_f32(z, y, 32);
    CHECK_EQ_INT(y[0].d, 0);
    for (int j = 0; j < 32; j++)
        CHECK_EQ_INT(y[0].qs[j], 0);
}

static void test_act_q8_1(void) {
    float x[32] = {0};
    const float v[6] = {-127.0f, 0.5f, 1.5f, 2.5f, 10.0f, 3.0f};
    memcpy(x, v, sizeof(v));
    struct block_q8_1 y;
    quant_q8_1_from_f32(x, &y, 32);
    CHECK_EQ_INT(y.d, 0x3c00);
    CHECK_EQ_INT(y.qs[0], -127);
    CHECK_EQ_INT(y.qs[1], 0);
    CHECK_EQ_INT(y.qs[2], 2);
    CHECK_EQ_INT(y.qs[3], 2);
    CHECK_EQ_INT(y.s, f32_to_fp16(-127.0f + 0 + 2 + 2 + 10 + 3)); /* d * sum = -110 */
    /* s uses the float d, not the fp16 one: amax 1 -> d = 1/127, codes 127 + 8 = 135:
     * fp16(135/127) = 0x3c41, while fp16(fp16(d) * 135) would be 0x3c40 */
    float w[32] = {1.0f, 0.06f};
    quant_q8_1_from_f32(w, &y, 32);
    CHECK_EQ_INT(y.qs[1], 8);
    CHECK_EQ_INT(y.s, 0x3c41);
}

static void test_act_q8_K(void) {
    float x[2 * QK_K] = {0};
    /* block 0: max -127 (negative): iscale = -127/-127 = 1, d = 1, codes = rint(x) */
    x[0] = 0.5f;
    x[1] = 1.5f;
    x[2] = 2.5f;
    x[3] = -127.0f;
    x[4] = 126.5f;
    x[17] = -3.5f;
    /* block 1: max +2 first, then -2 (ties keep the first): iscale = -63.5, d = 1/-63.5 */
    x[256] = 2.0f;
    x[257] = -2.0f;
    x[258] = 1.0f;   /* -63.5 -> -64 */
    x[259] = 0.25f;  /* -15.875 -> -16 */
    struct block_q8_K y[2];
    quant_q8_K_from_f32(x, y, 2 * QK_K);
    CHECK(y[0].d == 1.0f);
    CHECK_EQ_INT(y[0].qs[0], 0);
    CHECK_EQ_INT(y[0].qs[1], 2);
    CHECK_EQ_INT(y[0].qs[2], 2);
    CHECK_EQ_INT(y[0].qs[3], -127);
    CHECK_EQ_INT(y[0].qs[4], 126);
    CHECK_EQ_INT(y[0].qs[17], -4);
    CHECK_EQ_INT(y[0].bsums[0], 0 + 2 + 2 - 127 + 126);
    CHECK_EQ_INT(y[0].bsums[1], -4);
    CHECK_EQ_INT(y[0].bsums[2], 0);
    CHECK(y[1].d == 1.0f / (-127.0f / 2.0f));
    CHECK(y[1].d < 0);
    CHECK_EQ_INT(y[1].qs[0], -127);
    CHECK_EQ_INT(y[1].qs[1], 127);
    CHECK_EQ_INT(y[1].qs[2], -64);
    CHECK_EQ_INT(y[1].qs[3], -16);
    CHECK_EQ_INT(y[1].bsums[0], -127 + 127 - 64 - 16);

    /* max 1.01, x = max/2: iscale = -127/max puts x at -63.5 exactly, which goes to -64, and
     * d = 1/iscale is -0x1.04988cp-7, as llama.cpp 34af94c's quantize_row_q8_K_ref gives; an
     * iscale of 1/(max/-127) gives -63, and d = max/-127 is -0x1.04988ep-7 */
    float t[QK_K] = {1.01f, 0.505f};
    quant_q8_K_from_f32(t, y, QK_K);
    CHECK(y[0].d == -0x1.04988cp-7f);
    CHECK_EQ_INT(y[0].qs[0], -127);
    CHECK_EQ_INT(y[0].qs[1], -64);

    float z[QK_K] = {0};
    memset(y, 0x55, sizeof(y));
    quant_q8_K_from_f32(z, y, QK_K);
    CHECK(y[0].d == 0.0f);
    for (int j = 0; j < QK_K; j++)
        CHECK_EQ_INT(y[0].qs[j], 0);
    for (int g = 0; g < QK_K / 16; g++)
        CHECK_EQ_INT(y[0].bsums[g], 0);
}

/* bsums equal the sums of the codes on random data, and codes stay in [-127, 127]. */
static void test_act_q8_K_random(void) {
    float x[4 * QK_K];
    struct block_q8_K y[4];
    fill_random(x, 4 * QK_K, 7, 3.0f);
    quant_q8_K_from_f32(x, y, 4 * QK_K);
    for (int b = 0; b < 4; b++) {
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) {
                sum += y[b].qs[16 * g + j];
                CHECK(y[b].qs[16 * g + j] >= -127);
            }
            CHECK_EQ_INT(y[b].bsums[g], sum);
        }
        for (int j = 0; j < QK_K; j++)
            CHECK_NEAR(y[b].d * (float)y[b].qs[j], x[b * QK_K + j], fabsf(y[b].d) * 0.5001f);
    }
}

/* ==== fixtures ================================================================================ */

static void check_fixture(const char *dir, const char *file, json_t *e) {
    const char *model = json_string_value(json_object_get(e, "model"));
    const char *tname = json_string_value(json_object_get(e, "tensor"));
    json_int_t n_values = json_integer_value(json_object_get(e, "values"));
    char path[4096], err[256];
    CHECK_MSG(model && tname && n_values > 0, "index.json entry \"%s\" incomplete", file);
    if (!model || !tname || n_values <= 0)
        return;
    snprintf(path, sizeof(path), "%s/models/%s", dir, model);
    struct gguf *g = gguf_open(path, err, sizeof(err));
    size_t ref_bytes = 0;
    snprintf(path, sizeof(path), "%s/dequant/%s", dir, file);
    float *want = test_read_file(path, &ref_bytes);
    void *raw = NULL;
    float *got = NULL;
    CHECK_MSG(g != NULL, "cannot open \"%s\": %s", model, err);
    CHECK_MSG(want && ref_bytes == (size_t)n_values * sizeof(float), "bad reference \"%s\"", file);
    if (!g || !want || ref_bytes != (size_t)n_values * sizeof(float))
        goto out;
    const struct gguf_tensor *t = gguf_find_tensor(g, tname);
    CHECK_MSG(t != NULL, "no tensor \"%s\" in \"%s\"", tname, model);
    if (!t)
        goto out;
    if (!quant_can_dequantize(t->type)) { /* the grid i-quants of issue 13, not built yet */
        test_skip("\"%s\" of %s: no dequantizer for %s yet: NOT checked", tname, model,
                  qtype_name(t->type));
        goto out;
    }
    uint64_t n_bytes;
    if (qtype_row_bytes(t->type, (uint64_t)n_values, &n_bytes) < 0 || n_bytes > t->n_bytes) {
        test_fail(__FILE__, __LINE__, "\"%s\": %lld values do not fit", tname,
                  (long long)n_values);
        goto out;
    }
    raw = malloc(n_bytes);
    got = calloc((size_t)n_values, sizeof(*got));
    if (!raw || !got || gguf_read_tensor_range(g, t, 0, raw, n_bytes) < 0) {
        test_fail(__FILE__, __LINE__, "\"%s\": cannot read %llu bytes", tname,
                  (unsigned long long)n_bytes);
        goto out;
    }
    CHECK_EQ_INT(quant_dequantize_row(t->type, raw, got, n_values), 0);
    int bad = 0, exact = 0;
    for (json_int_t i = 0; i < n_values; i++) {
        double tol = TOL_FIXTURE_REL * fabs((double)want[i]);
        exact += bits_of(got[i]) == bits_of(want[i]);
        if (fabs((double)got[i] - (double)want[i]) > tol && bad++ < 4)
            test_fail(__FILE__, __LINE__, "%s [%s] %lld: got %.9g want %.9g", file,
                      qtype_name(t->type), (long long)i, got[i], want[i]);
    }
    printf("  %-52s %-5s %lld values, %d bit-exact, %d off\n", file, qtype_name(t->type),
           (long long)n_values, exact, bad);
out:
    free(got);
    free(raw);
    free(want);
    gguf_free(g);
}

static void test_fixture_dequant(void) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures folder absent: dequantizers NOT checked against gguf-py");
        return;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/dequant/index.json", dir);
    json_error_t jerr;
    json_t *index = json_load_file(path, 0, &jerr);
    CHECK_MSG(index && json_is_object(index), "cannot read \"%s\": %s", path, jerr.text);
    if (!index)
        return;
    const char *file;
    json_t *e;
    int n = 0;
    json_object_foreach(index, file, e) {
        check_fixture(dir, file, e);
        n++;
    }
    CHECK(n >= 5);
    json_decref(index);
}

/* ==== vec_dot and round trips ================================================================= */

static const enum qtype weight_types[] = {
    QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q4_0,   QTYPE_Q4_1,   QTYPE_Q5_0,
    QTYPE_Q5_1, QTYPE_Q8_0, QTYPE_Q2_K, QTYPE_Q3_K,   QTYPE_Q4_K,   QTYPE_Q5_K,
    QTYPE_Q6_K, QTYPE_MXFP4, QTYPE_IQ4_NL, QTYPE_IQ4_XS,
};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))
#define DOT_N 1024

/* dot(dequant(w), dequant(a)) in double, and sum |w_i a_i|. For q8_1 activations, ggml's semantics
 * take the min term from the stored s (fp16 of d*sum(codes) with the float d), not from the codes:
 * the expected value does the same. */
static double dot_expected(enum qtype t, const void *wq, const void *aq, int n, double *mag) {
    const struct quant_kernels *k = quant_kernels_ref(t);
    float *w = calloc((size_t)n, sizeof(float)), *a = calloc((size_t)n, sizeof(float));
    double sum = 0.0;
    *mag = 0.0;
    quant_dequantize_row(t, wq, w, n);
    if (k->vec_dot_type == QTYPE_Q8_K) { /* the activations' layout is not the file's */
        const struct block_q8_K *y = aq;
        for (int i = 0; i < n; i++)
            a[i] = y[i / QK_K].d * (float)y[i / QK_K].qs[i % QK_K];
    } else {
        quant_dequantize_row(k->vec_dot_type, aq, a, n);
    }
    for (int i = 0; i < n; i++) {
        sum += (double)w[i] * a[i];
        *mag += fabs((double)w[i] * a[i]);
    }
    if (k->vec_dot_type == QTYPE_Q8_1) {
        const struct block_q8_1 *y = aq;
        for (int b = 0; b < n / 32; b++) {
            float m = fp16_to_f32(t == QTYPE_Q4_1 ? ((const struct block_q4_1 *)wq)[b].m
                                                   : ((const struct block_q5_1 *)wq)[b].m);
            double csum = 0.0;
            for (int j = 0; j < 32; j++)
                csum += y[b].qs[j];
            sum += (double)m * (fp16_to_f32(y[b].s) - fp16_to_f32(y[b].d) * csum);
        }
    }
    free(w);
    free(a);
    return sum;
}

static void test_vec_dot_ref(void) {
    float *w = malloc(DOT_N * sizeof(float)), *x = malloc(DOT_N * sizeof(float));
    uint8_t *wq = malloc(DOT_N * 4), *aq = malloc(DOT_N * 4);
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        enum qtype t = weight_types[i];
        const struct quant_kernels *k = quant_kernels_ref(t);
        CHECK_MSG(k && k->type == t && strcmp(k->isa, "ref") == 0, "no ref kernels for %s",
                  qtype_name(t));
        if (!k)
            continue;
        for (uint32_t seed = 1; seed <= 3; seed++) {
            fill_random(w, DOT_N, 100 + seed, 0.05f);
            fill_random(x, DOT_N, 200 + seed, 2.0f);
            CHECK_EQ_INT(quant_quantize_row(t, w, wq, DOT_N), 0);
            k->from_float(x, aq, DOT_N);
            float got;
            k->vec_dot(DOT_N, &got, wq, aq);
            double mag, want = dot_expected(t, wq, aq, DOT_N, &mag);
            CHECK_MSG(fabs(got - want) <= TOL_DOT_REL * mag + 1e-30,
                      "%s seed %u: vec_dot %.9g vs dequantized %.9g (mag %.3g)", qtype_name(t),
                      seed, got, want, mag);
        }
    }
    free(w);
    free(x);
    free(wq);
    free(aq);
}

/* The dispatched kernels (SIMD where present) against the reference: from_float byte-identical,
 * vec_dot bit-identical (the accumulation contract). */
static void test_vec_dot_dispatch(void) {
    float *w = malloc(4096 * sizeof(float)), *x = malloc(4096 * sizeof(float));
    uint8_t *wq = malloc(4096 * 4), *a_ref = malloc(4096 * 4), *a_best = malloc(4096 * 4);
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        enum qtype t = weight_types[i];
        const struct quant_kernels *ref = quant_kernels_ref(t), *best = quant_kernels(t);
        CHECK_MSG(best != NULL, "no kernels for %s", qtype_name(t));
        if (!best || !ref)
            continue;
        CHECK_EQ_INT(best->vec_dot_type, ref->vec_dot_type);
        size_t act = quant_act_row_bytes(t, 4096);
        fill_random(w, 4096, 11, 0.05f);
        fill_random(x, 4096, 12, 4.0f);
        quant_quantize_row(t, w, wq, 4096);
        ref->from_float(x, a_ref, 4096);
        best->from_float(x, a_best, 4096);
        CHECK_MSG(memcmp(a_ref, a_best, act) == 0, "%s: %s from_float differs from ref",
                  qtype_name(t), best->isa);
        float s_ref, s_best;
        ref->vec_dot(4096, &s_ref, wq, a_ref);
        best->vec_dot(4096, &s_best, wq, a_ref);
        CHECK_MSG(memcmp(&s_ref, &s_best, sizeof(float)) == 0, "%s: %s vec_dot %.9g vs ref %.9g",
                  qtype_name(t), best->isa, s_best, s_ref);
    }
    free(w);
    free(x);
    free(wq);
    free(a_ref);
    free(a_best);
}

/* Max |dequant(quant(x)) - x| as a fraction of the row's max |x|, per weight type. q4_0/q5_0 put
 * the block's extreme on code -8/-16 (as ggml does), so an opposite-sign element near the extreme
 * clamps at +7/+15: their bound is one step (1/8, 1/16), not half a step; q3_K likewise (-4..3:
 * 1/4, plus its 6-bit scale's rounding). q2_K: half of a 3-step grid over a sub-block's range
 * (<= 2 max|x|), plus its rounded-up 4-bit scale: 1/3 + 2/90. iq4_nl/iq4_xs: the table's ends,
 * -127 for the extreme and 113 for an opposite one: 14/127 (+ iq4_xs's 6-bit scale). mxfp4: half
 * the top gap of e2m1 (8 to 12, doubled) at a scale >= max|x| / 12: 1/3. */
static void test_quantize_round_trip(void) {
    static const struct { enum qtype t; double bound; } cases[] = {
        {QTYPE_F32, 0.0},     {QTYPE_F16, 1.0 / 2048}, {QTYPE_BF16, 1.0 / 256},
        {QTYPE_Q8_0, 0.0045}, {QTYPE_Q4_0, 0.126},     {QTYPE_Q4_1, 0.068},
        {QTYPE_Q5_0, 0.0635}, {QTYPE_Q5_1, 0.034},     {QTYPE_Q4_K, 0.085},
        {QTYPE_Q5_K, 0.045},  {QTYPE_Q6_K, 0.019},     {QTYPE_Q2_K, 0.356},
        {QTYPE_Q3_K, 0.27},   {QTYPE_IQ4_NL, 0.111},   {QTYPE_IQ4_XS, 0.13},
        {QTYPE_MXFP4, 0.334},
    };
    const int n = 2048;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint8_t *q = malloc((size_t)n * 4);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (uint32_t seed = 1; seed <= 4; seed++) {
            fill_random(x, n, seed * 31, 0.1f);
            if (seed == 2) { /* all-positive blocks (K-quant mins 0) */
                for (int i = 0; i < n; i++)
                    x[i] = fabsf(x[i]);
            }
            if (seed == 3) /* an all-zero block must come back as zeros */
                memset(x, 0, QK_K * sizeof(float));
            double amax = 0.0, err = 0.0;
            CHECK_EQ_INT(quant_quantize_row(cases[c].t, x, q, n), 0);
            CHECK_EQ_INT(quant_dequantize_row(cases[c].t, q, y, n), 0);
            for (int i = 0; i < n; i++) {
                amax = fmax(amax, fabs(x[i]));
                err = fmax(err, fabs((double)y[i] - x[i]));
            }
            CHECK_MSG(err <= cases[c].bound * amax, "%s seed %u: max error %.3g > %.3g * %.3g",
                      qtype_name(cases[c].t), seed, err, cases[c].bound, amax);
            if (seed == 3) {
                for (int i = 0; i < QK_K; i++)
                    CHECK_MSG(y[i] == 0.0f, "%s: zero block element %d = %g",
                              qtype_name(cases[c].t), i, y[i]);
            }
        }
    }
    free(x);
    free(y);
    free(q);
}

/* ==== dispatch and argument checks ============================================================ */

static void test_tables(void) {
    static const struct { enum qtype t, vdt; } want[] = {
        {QTYPE_F32, QTYPE_F32},     {QTYPE_F16, QTYPE_F16},     {QTYPE_BF16, QTYPE_BF16},
        {QTYPE_Q4_0, QTYPE_Q8_0},   {QTYPE_Q4_1, QTYPE_Q8_1},   {QTYPE_Q5_0, QTYPE_Q8_0},
        {QTYPE_Q5_1, QTYPE_Q8_1},   {QTYPE_Q8_0, QTYPE_Q8_0},   {QTYPE_Q4_K, QTYPE_Q8_K},
        {QTYPE_Q5_K, QTYPE_Q8_K},   {QTYPE_Q6_K, QTYPE_Q8_K},   {QTYPE_Q2_K, QTYPE_Q8_K},
        {QTYPE_Q3_K, QTYPE_Q8_K},   {QTYPE_IQ4_XS, QTYPE_Q8_K}, {QTYPE_IQ4_NL, QTYPE_Q8_0},
        {QTYPE_MXFP4, QTYPE_Q8_0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct quant_kernels *k = quant_kernels_ref(want[i].t);
        CHECK_MSG(k && k->vec_dot_type == want[i].vdt && k->from_float && k->vec_dot,
                  "%s: wrong ref kernels", qtype_name(want[i].t));
    }
    CHECK(quant_kernels_ref(QTYPE_TQ1_0) == NULL);
    CHECK(quant_kernels_ref(QTYPE_Q8_K) == NULL);
    CHECK(quant_kernels_ref(QTYPE_COUNT) == NULL);
    CHECK(quant_kernels(QTYPE_TQ2_0) == NULL);
    CHECK(quant_kernels(QTYPE_Q4_K) == quant_kernels(QTYPE_Q4_K));
    CHECK(quant_can_dequantize(QTYPE_Q8_K) && quant_can_dequantize(QTYPE_Q8_1));
    CHECK(!quant_can_dequantize(QTYPE_TQ1_0) && !quant_can_dequantize(QTYPE_I32));
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_Q4_K, 512), 2 * 320);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_Q4_0, 64), 2 * 34);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_Q4_1, 64), 2 * 36);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_F16, 3), 6);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_F32, 3), 12);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_Q4_K, 128), 0);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_Q2_K, 256), 320);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_MXFP4, 64), 2 * 34);
    CHECK_EQ_INT(quant_act_row_bytes(QTYPE_TQ2_0, 256), 0);
    CHECK_EQ_INT(quant_act_row_stride(QTYPE_Q4_0, 64), 128); /* 68 bytes: the next line */
    CHECK_EQ_INT(quant_act_row_stride(QTYPE_Q4_K, 512), 640); /* whole lines already */
    CHECK_EQ_INT(quant_act_row_stride(QTYPE_TQ2_0, 256), 0);
    float f[QK_K] = {0};
    uint8_t buf[512];
    CHECK_EQ_INT(quant_dequantize_row(QTYPE_Q4_0, buf, f, 31), -EINVAL);
    CHECK_EQ_INT(quant_dequantize_row(QTYPE_TQ1_0, buf, f, 256), -EINVAL);
    CHECK_EQ_INT(quant_dequantize_row(QTYPE_IQ4_NL, buf, f, 48), -EINVAL);
    CHECK_EQ_INT(quant_dequantize_row(QTYPE_Q4_K, buf, f, -256), -EINVAL);
    CHECK_EQ_INT(quant_quantize_row(QTYPE_Q8_K, f, buf, 256), -EINVAL);
    CHECK_EQ_INT(quant_quantize_row(QTYPE_Q6_K, f, buf, 128), -EINVAL);
    CHECK_EQ_INT(quant_quantize_row(QTYPE_Q8_0, f, buf, 0), 0);
    const struct quant_kernels *k = quant_kernels(QTYPE_Q8_0);
    printf("  dispatch: q8_0 -> %s, q4_K -> %s (SNIPER_ISA=%s)\n", k ? k->isa : "none",
           quant_kernels(QTYPE_Q4_K) ? quant_kernels(QTYPE_Q4_K)->isa : "none",
           getenv("SNIPER_ISA") ? getenv("SNIPER_ISA") : "");
}

static const struct test_case cases[] = {
    {"fp16_vs_f16c", test_fp16_vs_f16c},
    {"fp16_hand_values", test_fp16_hand_values},
    {"bf16", test_bf16},
    {"golden_q4_0", test_golden_q4_0},
    {"golden_q4_1", test_golden_q4_1},
    {"golden_q5", test_golden_q5},
    {"golden_q8", test_golden_q8},
    {"golden_q4_K", test_golden_q4_K},
    {"golden_q5_K", test_golden_q5_K},
    {"golden_q6_K", test_golden_q6_K},
    {"golden_q2_K", test_golden_q2_K},
    {"golden_q3_K", test_golden_q3_K},
    {"golden_nl_tables", test_golden_nl_tables},
    {"golden_iq4_xs", test_golden_iq4_xs},
    {"act_q8_0", test_act_q8_0},
    {"act_q8_1", test_act_q8_1},
    {"act_q8_K", test_act_q8_K},
    {"act_q8_K_random", test_act_q8_K_random},
    {"fixture_dequant", test_fixture_dequant},
    {"vec_dot_ref", test_vec_dot_ref},
    {"vec_dot_dispatch", test_vec_dot_dispatch},
    {"quantize_round_trip", test_quantize_round_trip},
    {"tables", test_tables},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
