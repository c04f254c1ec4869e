/* test_ops.c - the row operations (ops.c), the thread pool and the batched matmul dispatcher. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "matmul.h"
#include "ops.h"
#include "quant.h"
#include "threadpool.h"

static void test_rms_norm(void) {
    float x[4] = {1, -2, 3, -4}, w[4] = {1, 2, 0.5f, 1}, y[4];
    ops_rms_norm(y, x, w, 4, 0.0f);
    double rms = sqrt((1 + 4 + 9 + 16) / 4.0);
    CHECK_NEAR(y[0], 1 / rms, 1e-6);
    CHECK_NEAR(y[1], -4 / rms, 1e-6);
    CHECK_NEAR(y[2], 1.5 / rms, 1e-6);
    CHECK_NEAR(y[3], -4 / rms, 1e-6);
    ops_rms_norm(x, x, NULL, 4, 1e6f); /* eps dominates: tiny outputs, in place */
    CHECK_NEAR(x[3], -4 / sqrt(7.5 + 1e6), 1e-6);
}

/* ggml's rms_norm on 100 values with full mantissas (x[i] = (i * 7911 % 10007) / 10007 - 0.5, each
 * division correctly rounded): its output, computed by llama.cpp 34af94c's ggml_rms_norm, is x[i]
 * times the scale 0x1.bb8eep+1 (y[0] = -0x1.bb8eep+0 for x[0] = -0.5). The sum of squares in float
 * (0x1.bb8edcp+1) or the mean as a float division (the same) lands elsewhere: those plants fail. */
static void test_rms_norm_ggml(void) {
    enum { N = 100 };
    float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 7911) % 10007) / 10007.0f - 0.5f;
    ops_rms_norm(y, x, NULL, N, 1e-6f);
    CHECK(y[0] == -0x1.bb8eep+0f);
    CHECK(y[33] == -0x1.6d7534p+0f); /* spot values of ggml's output */
    CHECK(y[99] == -0x1.a283bcp-1f);
    int off = 0;
    for (int i = 0; i < N; i++)
        off += y[i] != x[i] * 0x1.bb8eep+1f;
    CHECK_EQ_INT(off, 0);
}

static void test_argmax(void) {
    const float x[6] = {-3, -INFINITY, 2, -1, 2, 1};
    CHECK_EQ_INT(ops_argmax(x, 6), 2); /* the first of two equal maxima */
    CHECK_EQ_INT(ops_argmax(x, 2), 0);
    CHECK_EQ_INT(ops_argmax(x + 5, 1), 0);
}

static void test_softmax(void) {
    float x[5] = {1, 2, 3, -INFINITY, 3};
    ops_softmax(x, 5);
    double z = exp(-2) + exp(-1) + 1 + 1;
    CHECK_NEAR(x[0], exp(-2) / z, 1e-7);
    CHECK_NEAR(x[2], 1 / z, 1e-7);
    CHECK(x[3] == 0.0f);
    float big[3] = {1000, 1000, -1000};
    ops_softmax(big, 3);
    CHECK_NEAR(big[0], 0.5, 1e-7);
    CHECK(big[2] == 0.0f);
}

static void test_swiglu(void) {
    float g[3] = {0, 1, -2}, u[3] = {5, 2, 3}, y[3];
    ops_swiglu(y, g, u, 3);
    CHECK_NEAR(y[0], 0, 1e-7);
    CHECK_NEAR(y[1], 2 / (1 + exp(-1)), 1e-6);
    CHECK_NEAR(y[2], 3 * -2 / (1 + exp(2)), 1e-6);
}

/* RoPE against the closed form: neox rotates (i, i + d/2) by pos * base^(-2i/d). */
static void test_rope(void) {
    enum { D = 8 };
    float cs[D], x[D], y[D];
    const struct ops_rope r = ops_rope_init(D, 10000.0f, 1.0f, 0.0f, 1.0f, 4096, 32.0f, 1.0f);
    for (int i = 0; i < D; i++)
        x[i] = y[i] = (float)(i + 1);
    ops_rope_cache(cs, 7, &r);
    ops_rope_neox(x, cs, D);
    for (int i = 0; i < D / 2; i++) {
        double th = 7 * pow(10000.0, -2.0 * i / D);
        CHECK_NEAR(x[i], y[i] * cos(th) - y[i + D / 2] * sin(th), 1e-4);
        CHECK_NEAR(x[i + D / 2], y[i] * sin(th) + y[i + D / 2] * cos(th), 1e-4);
    }
    for (int i = 0; i < D; i++)
        x[i] = (float)(i + 1);
    ops_rope_norm(x, cs, D);
    for (int i = 0; i < D / 2; i++) {
        double th = 7 * pow(10000.0, -2.0 * i / D);
        CHECK_NEAR(x[2 * i], y[2 * i] * cos(th) - y[2 * i + 1] * sin(th), 1e-4);
        CHECK_NEAR(x[2 * i + 1], y[2 * i] * sin(th) + y[2 * i + 1] * cos(th), 1e-4);
    }
    ops_rope_cache(cs, 0, &r); /* position 0 is the identity */
    for (int i = 0; i < D; i++)
        x[i] = y[i];
    ops_rope_neox(x, cs, D);
    CHECK(memcmp(x, y, sizeof(x)) == 0);
}

/* Gemma 4's freq factors: pair i turns by its angle / ff[i], so factor 1 is plain RoPE bit for bit
 * and 1e30 leaves the pair alone (cos 1, sin 0 to float precision); without factors the table is
 * ops_rope_cache's. */
static void test_rope_freq_factors(void) {
    enum { D = 8 };
    float plain[D], cs[D], x[D], y[D];
    const float ff[D / 2] = {1.0f, 1.0f, 1e30f, 1e30f};
    const struct ops_rope r = ops_rope_init(D, 1e6f, 1.0f, 0.0f, 1.0f, 4096, 32.0f, 1.0f);
    ops_rope_cache(plain, 11, &r);
    ops_rope_cache_ff(cs, 11, &r, ff);
    CHECK(memcmp(cs, plain, 2 * 2 * sizeof(float)) == 0); /* pairs 0 and 1: factor 1 */
    for (int i = 2; i < D / 2; i++) {
        CHECK(cs[2 * i] == 1.0f);
        CHECK(fabsf(cs[2 * i + 1]) < 1e-20f);
    }
    for (int i = 0; i < D; i++)
        x[i] = y[i] = (float)(i + 1);
    ops_rope_neox(x, cs, D); /* neox pairs (i, i + 4): pairs 2, 3 are dims 2, 6 and 3, 7 */
    CHECK(x[2] == y[2] && x[3] == y[3] && x[6] == y[6] && x[7] == y[7]);
    CHECK(x[0] != y[0] && x[4] != y[4]);
    ops_rope_cache_ff(cs, 11, &r, NULL);
    CHECK(memcmp(cs, plain, sizeof(cs)) == 0);
}

/* ggml's gelu and GeGLU (GGML_GELU_FP16) on fixed inputs, the expected values computed by the
 * pinned llama.cpp build's ggml_gelu and ggml_geglu_split: among them x = -1.99902, the one f16
 * input whose table entry needs the fused multiply-add ggml's build uses, and the clamps at -10
 * and 10. {x, u, gelu(x), gelu(x) * u}, compared bit for bit. */
static void test_gelu_ggml(void) {
    static const float v[][4] = {
        {-0x1.ffcp+0f, 0x1.8p+0f, -0x1.74cp-5f, -0x1.179p-4f},
        {0x1p-1f, 0x1.4p+0f, 0x1.62p-2f, 0x1.ba8p-2f},
        {0x1p+0f, 0x1p+0f, 0x1.aecp-1f, 0x1.aecp-1f},
        {0x1.8p+1f, 0x1.8p-1f, 0x1.7f8p+1f, 0x1.1fap+1f},
        {-0x1.333334p-2f, 0x1p-1f, -0x1.d58p-4f, -0x1.d58p-5f},
        {0x1.3fae14p+3f, 0x1p-2f, 0x1.3fcp+3f, 0x1.3fcp+1f},
        {0x1.4p+3f, 0x0p+0f, 0x1.4p+3f, 0x0p+0f},
        {-0x1.4p+3f, -0x1p-2f, 0x0p+0f, 0x0p+0f},
        {0x1.9p+3f, -0x1p-1f, 0x1.9p+3f, -0x1.9p+2f},
        {0x1.f9adbcp-4f, -0x1.8p-1f, 0x1.15cp-4f, -0x1.a0ap-5f},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        float g, y;
        ops_gelu(&g, &v[i][0], 1);
        ops_geglu(&y, &v[i][0], &v[i][1], 1);
        CHECK_MSG(g == v[i][2] && y == v[i][3], "gelu(%a) = %a (want %a), times %a = %a (want %a)",
                  (double)v[i][0], (double)g, (double)v[i][2], (double)v[i][1], (double)y,
                  (double)v[i][3]);
    }
}

/* A sink is one more logit with no entry: the weights sum to 1 - its share; -inf is no sink. */
static void test_softmax_sink(void) {
    float x[3] = {1, 2, 3}, y[3] = {1, 2, 3};
    ops_softmax_sink(x, 3, 0.5f);
    double den = exp(-2.0) + exp(-1.0) + 1 + exp(0.5 - 3);
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(x[i], exp(i - 2.0) / den, 1e-6);
    float z[3] = {1, 2, 3};
    ops_softmax_sink(z, 3, 10.0f); /* a sink above every logit sets the maximum */
    den = exp(-9.0) + exp(-8.0) + exp(-7.0) + 1;
    CHECK_NEAR(z[2], exp(-7.0) / den, 1e-7);
    memcpy(x, y, sizeof(x));
    ops_softmax_sink(x, 3, -INFINITY);
    ops_softmax(y, 3);
    CHECK(memcmp(x, y, sizeof(x)) == 0);
}

/* gpt-oss's SwiGLU: the gate clamped above at 7, the up value to [-7, 7], plus 1. */
static void test_swiglu_oai(void) {
    const float g[4] = {-10, 0.5f, 8, 3}, u[4] = {-9, 1, 10, -2};
    float y[4];
    ops_swiglu_oai(y, g, u, 4);
    for (int i = 0; i < 4; i++) {
        double x = g[i] < 7 ? g[i] : 7, v = u[i] < -7 ? -7 : u[i] > 7 ? 7 : u[i];
        CHECK_NEAR(y[i], x / (1 + exp(-1.702 * x)) * (v + 1), 1e-5 * (1 + fabs(y[i])));
    }
    CHECK_NEAR(y[2], 7 / (1 + exp(-1.702 * 7)) * 8, 1e-4); /* both clamps */
}

/* YaRN as gpt-oss runs it (base 150000, 64 dims, factor 32 over 4096 positions): correction dims
 * 8 and 18; pairs below keep pos * base^(-2i/64), pairs above take it / 32, between a linear
 * blend; cos and sin are 1 + 0.1 ln 32 times longer. Plain RoPE is the same table with no
 * scaling. */
static void test_rope_yarn(void) {
    enum { D = 64 };
    const struct ops_rope r = ops_rope_init(D, 150000.0f, 1.0f / 32, 1.0f, 1.0f, 4096, 32, 1);
    CHECK_NEAR(r.corr[0], 8, 0);
    CHECK_NEAR(r.corr[1], 18, 0);
    float cs[D];
    const int pos = 1000;
    ops_rope_cache(cs, pos, &r);
    const double mscale = 1 + 0.1 * log(32.0);
    for (int i = 0; i < D / 2; i++) {
        double ramp = 1 - fmin(1, fmax(0, (i - 8) / 10.0));
        double th = pos * pow(150000.0, -2.0 * i / D);
        th = th / 32 * (1 - ramp) + th * ramp;
        CHECK_NEAR(cs[2 * i], cos(th) * mscale, 2e-3);
        CHECK_NEAR(cs[2 * i + 1], sin(th) * mscale, 2e-3);
    }
    float plain[D], base[D];
    const struct ops_rope p = ops_rope_init(D, 150000.0f, 1.0f, 0.0f, 1.0f, 4096, 32, 1);
    ops_rope_cache(plain, pos, &p);
    for (int i = 0; i < D / 2; i++) { /* the old formula, bit for bit */
        float theta = (float)pos * powf(150000.0f, -2.0f * (float)i / D);
        base[2 * i] = cosf(theta);
        base[2 * i + 1] = sinf(theta);
    }
    CHECK_NEAR(plain[0], base[0], 0);
    CHECK_NEAR(plain[1], base[1], 0);
    CHECK_NEAR(plain[6], cs[6] / mscale, 1e-5); /* pair 3, under corr[0]: only the magnitude */
}

/* axpy: the SIMD path gives exactly the scalar multiply-then-add per element, tails included. */
static void test_axpy(void) {
    enum { N = 67 };
    float y32[N], y16[N], x[N], want32[N], want16[N];
    uint16_t h[N];
    for (int i = 0; i < N; i++) {
        x[i] = sinf((float)i * 0.7f) * 3.0f;
        h[i] = f32_to_fp16(x[i]);
        y32[i] = y16[i] = want32[i] = want16[i] = cosf((float)i);
    }
    const float a = 0.3779f;
    for (int i = 0; i < N; i++) {
        float p32 = a * x[i], p16 = a * fp16_to_f32(h[i]);
        want32[i] = want32[i] + p32;
        want16[i] = want16[i] + p16;
    }
    ops_axpy_f32(y32, a, x, N);
    ops_axpy_f16(y16, a, h, N);
    CHECK(memcmp(y32, want32, sizeof(y32)) == 0);
    CHECK(memcmp(y16, want16, sizeof(y16)) == 0);
}

struct count_ctx {
    atomic_int hits[1000];
    atomic_int threads_seen;
};

static void count_task(void *ctx, int64_t task, int thread) {
    struct count_ctx *c = ctx;
    atomic_fetch_add(&c->hits[task], 1);
    atomic_fetch_or(&c->threads_seen, 1 << thread);
}

/* ggml's f32 dot and mad: the SIMD twin gives the portable twin's bits (tails included), the dot
 * is the float sum it claims (fixed values), and it is not a plain left-to-right sum. */
static void test_dot_mad_ggml(void) {
    enum { N = 128 + 7 };
    float x[N], y[N], m1[N], m2[N];
    for (int i = 0; i < N; i++) {
        x[i] = sinf((float)i * 0.37f) * 1.7f;
        y[i] = cosf((float)i * 1.3f) / (1.0f + (float)i);
        m1[i] = m2[i] = sinf((float)i);
    }
    for (int n = 0; n <= N; n += 9) {
        float a = ops_dot_f32(x, y, n), b = ops_dot_f32_ref(x, y, n);
        CHECK_MSG(memcmp(&a, &b, sizeof(a)) == 0, "n %d: %.9g vs %.9g", n, (double)a, (double)b);
        double exact = 0;
        for (int i = 0; i < n; i++)
            exact += (double)x[i] * y[i];
        CHECK(fabs(a - exact) < 1e-5);
    }
    /* the order, pinned: 1e8 in accumulator 0 and 4 in accumulators 1 and 3 (lane 0 each); ggml
     * adds 1 to 3 first (8), then 0 to 1: 1e8 + 8 is a float. Left to right, each 4 is a tie
     * that rounds back to 1e8. */
    float big[32] = {0}, ones[32];
    for (int i = 0; i < 32; i++)
        ones[i] = 1.0f;
    big[0] = 1e8f;
    big[8] = big[24] = 4.0f;
    CHECK(ops_dot_f32(big, ones, 32) == 100000008.0f);
    CHECK(ops_dot_f32_ref(big, ones, 32) == 100000008.0f);
    /* the mad is fused on the 32-element steps: (1 + 2^-12)^2 - 1 keeps its 2^-24 */
    float fy[32], fx[32];
    for (int i = 0; i < 32; i++) {
        fx[i] = 1.0f + 0x1p-12f;
        fy[i] = -1.0f;
    }
    ops_mad_f32(fy, fx, 1.0f + 0x1p-12f, 32);
    CHECK(fy[0] == 0x1p-11f + 0x1p-24f && fy[31] == fy[0]);
    ops_mad_f32(m1, x, 0.731f, N);
    ops_mad_f32_ref(m2, x, 0.731f, N);
    CHECK(memcmp(m1, m2, sizeof(m1)) == 0);
}

static void test_threadpool(void) {
    struct threadpool *tp = threadpool_new(3);
    CHECK(tp != NULL);
    if (!tp)
        return;
    CHECK_EQ_INT(threadpool_n_threads(tp), 3);
    static struct count_ctx c;
    for (int round = 0; round < 200; round++) {
        int n = 1 + round * 5 % 1000;
        memset(&c, 0, sizeof(c));
        threadpool_run(tp, n, count_task, &c);
        for (int i = 0; i < n; i++)
            CHECK_MSG(c.hits[i] == 1, "round %d: task %d ran %d times", round, i, (int)c.hits[i]);
        for (int i = n; i < 1000; i++)
            CHECK(c.hits[i] == 0);
    }
    threadpool_free(tp);
    threadpool_free(NULL);
}

/* The dispatcher gathers, scatters and runs several jobs at once; each output equals vec_dot. */
static void test_matmul_jobs(void) {
    enum { N = 64, ROWS = 37, TOK = 5 };
    struct threadpool *tp = threadpool_new(2);
    struct matmul mm;
    CHECK(tp && matmul_init(&mm, tp, 4) == 0);
    float *w = malloc(sizeof(float) * N * ROWS), *x = malloc(sizeof(float) * N * TOK);
    for (int i = 0; i < N * ROWS; i++)
        w[i] = sinf((float)i);
    for (int i = 0; i < N * TOK; i++)
        x[i] = cosf((float)i * 0.3f);
    uint8_t wq[ROWS * 34 * (N / 32)];
    for (int r = 0; r < ROWS; r++)
        CHECK(quant_quantize_row(QTYPE_Q8_0, w + r * N, wq + r * 34 * (N / 32), N) == 0);
    uint8_t act[TOK * 128];
    size_t stride;
    CHECK(matmul_quantize(QTYPE_Q8_0, x, N, TOK, N, act, &stride) == 0);
    float out1[TOK][ROWS], out2[2 * TOK][ROWS];
    memset(out2, 0, sizeof(out2));
    int32_t gather[TOK] = {4, 3, 2, 1, 0}, scatter[TOK] = {9, 7, 5, 3, 1};
    const struct quant_kernels *k = quant_kernels(QTYPE_Q8_0);
    struct matmul_job j1 = {k, wq, 34 * (N / 32), N, ROWS, act, stride, NULL, &out1[0][0], ROWS,
                            NULL, TOK};
    struct matmul_job j2 = j1;
    j2.act_idx = gather;
    j2.out = &out2[0][0];
    j2.out_idx = scatter;
    CHECK(matmul_add(&mm, &j1) == 0 && matmul_add(&mm, &j2) == 0);
    matmul_run(&mm);
    for (int t = 0; t < TOK; t++)
        for (int r = 0; r < ROWS; r++) {
            float want;
            k->vec_dot(N, &want, wq + r * 34 * (N / 32), act + t * stride);
            CHECK(out1[t][r] == want);
            CHECK(out2[scatter[TOK - 1 - t]][r] == want); /* token t was gathered into slot 4-t */
        }
    for (int i = 0; i < 5; i++)
        CHECK(matmul_add(&mm, &j1) == (i < 4 ? 0 : -ENOSPC));
    free(w);
    free(x);
    matmul_release(&mm);
    threadpool_free(tp);
}

/* ops_exp against e^x rounded once from a long double: within one ulp everywhere in its range
 * and equal on a sample of 2.2 million floats, 0 below FLT_MIN, inf above FLT_MAX, NaN kept. */
static void test_exp_contract(void) {
    int64_t n = 0, off = 0, far = 0;
    for (uint32_t u = 0; u < 0xffffffffu - 1021u; u += 1021u) { /* a stride through every float */
        float x;
        memcpy(&x, &u, sizeof(x));
        if (!(x > -87.0f && x < 88.7f))
            continue;
        const float got = ops_exp(x), want = (float)expl((long double)x);
        n++;
        if (got != want) {
            off++;
            far += fabsf(got - want) > fabsf(nextafterf(want, INFINITY) - want);
        }
    }
    CHECK(n > 1000000);
    CHECK_EQ_INT(far, 0);
    if (getenv("SNIPER_TEST_VERBOSE"))
        fprintf(stderr, "exp: %lld of %lld not correctly rounded\n", (long long)off, (long long)n);
    CHECK_EQ_INT(off, 0); /* over this sample every one is correctly rounded */
    CHECK(ops_exp(0.0f) == 1.0f);
    CHECK(ops_exp(-88.0f) == 0.0f); /* e^-88 is below FLT_MIN: the contract flushes it */
    CHECK(ops_exp(-87.0f) > 0.0f);
    CHECK(ops_exp(-INFINITY) == 0.0f);
    CHECK(isinf(ops_exp(89.0f)) && isinf(ops_exp(INFINITY)));
    CHECK(isnan(ops_exp(NAN)));
}

/* ops_log against long double's log over a stride through every positive normal float: never
 * more than one ulp away, and the specials as ops.h says. */
static void test_log_contract(void) {
    int64_t n = 0, off = 0, far = 0;
    for (uint32_t u = 0x00800000u; u < 0x7f800000u; u += 509u) {
        float x;
        memcpy(&x, &u, sizeof(x));
        const float got = ops_log(x), want = (float)logl((long double)x);
        n++;
        if (got != want) {
            off++;
            far += fabsf(got - want) > fabsf(nextafterf(want, INFINITY) - want);
        }
    }
    CHECK(n > 1000000);
    CHECK_EQ_INT(far, 0);
    if (getenv("SNIPER_TEST_VERBOSE"))
        fprintf(stderr, "log: %lld of %lld not correctly rounded\n", (long long)off, (long long)n);
    CHECK_EQ_INT(off, 0); /* over this sample every one is correctly rounded */
    CHECK(ops_log(1.0f) == 0.0f);
    CHECK(ops_log(2.0f) == 0x1.62e43p-1f);
    CHECK(ops_log(0.0f) == -INFINITY && ops_log(-0.0f) == -INFINITY);
    CHECK(ops_log(1e-40f) == -INFINITY); /* subnormals flushed */
    CHECK(isnan(ops_log(-1.0f)) && isnan(ops_log(-INFINITY)) && isnan(ops_log(NAN)));
    CHECK(ops_log(INFINITY) == INFINITY);
}

/* The 32 lanes: element i goes to lane i % 32, the lanes are folded 16, 8, 4, 2, 1. Values chosen
 * so that any other order rounds differently. */
static void test_lanes_order(void) {
    struct ops_lanes s;
    ops_lanes_clear(&s);
    double want_lane[32] = {0};
    for (int i = 0; i < 100; i++) {
        const double v = i % 3 == 0 ? 1e16 : i % 3 == 1 ? 1.0 + i : -1e16 + 3.0;
        ops_lanes_add(&s, v);
        want_lane[i % 32] += v;
    }
    for (int w = 16; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            want_lane[l] += want_lane[l + w];
    double seq = 0.0;
    for (int i = 0; i < 100; i++)
        seq += i % 3 == 0 ? 1e16 : i % 3 == 1 ? 1.0 + i : -1e16 + 3.0;
    const double got = ops_lanes_total(&s);
    CHECK(got == want_lane[0]);
    CHECK(got != seq); /* the values do tell the orders apart */
}

/* Every token-group path of the dispatcher (one token: vec_dot_rows4; two: vec_dot2; three or
 * four: vec_dot4; on arm64's i8mm the two-row vec_dot_2xn for groups of two and four, an odd last
 * row of a chunk through the one-row kernels) gives each output vec_dot's bits, for a type with
 * a 2xn kernel there (q8_0, q4_K) and one without (f32). 19 rows: chunks of 16 and 3. */
static void test_matmul_token_groups(void) {
    enum { N = 256, ROWS = 19, TOK = 6 };
    static const enum qtype types[] = {QTYPE_Q8_0, QTYPE_Q4_K, QTYPE_F32};
    struct threadpool *tp = threadpool_new(2);
    struct matmul mm = {0};
    CHECK(tp && matmul_init(&mm, tp, 1) == 0);
    float *w = malloc(sizeof(float) * N * ROWS), *x = malloc(sizeof(float) * N * TOK);
    uint8_t *wq = malloc((size_t)ROWS * N * 4), *act = malloc((size_t)TOK * N * 4 + 64);
    float *out = malloc(sizeof(float) * ROWS * TOK);
    if (!tp || !w || !x || !wq || !act || !out)
        goto out;
    for (int i = 0; i < N * ROWS; i++)
        w[i] = sinf((float)i * 1.7f);
    for (int i = 0; i < N * TOK; i++)
        x[i] = cosf((float)i * 0.3f) * (1.0f + (float)(i % 7));
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const enum qtype t = types[ti];
        const struct quant_kernels *k = quant_kernels(t);
        uint64_t rb = 0;
        CHECK(k && qtype_row_bytes(t, N, &rb) == 0);
        if (!k)
            continue;
        for (int r = 0; r < ROWS; r++)
            CHECK(quant_quantize_row(t, w + r * N, wq + r * rb, N) == 0);
        size_t stride;
        CHECK(matmul_quantize(t, x, N, TOK, N, act, &stride) == 0);
        for (int32_t n_tok = 1; n_tok <= TOK; n_tok++) {
            memset(out, 0xA5, sizeof(float) * ROWS * TOK);
            struct matmul_job j = {k, wq, rb, N, ROWS, act, stride, NULL, out, ROWS, NULL, n_tok};
            CHECK(matmul_add(&mm, &j) == 0);
            matmul_run(&mm);
            for (int32_t tk = 0; tk < n_tok; tk++)
                for (int r = 0; r < ROWS; r++) {
                    float want;
                    k->vec_dot(N, &want, wq + r * rb, act + tk * stride);
                    CHECK_MSG(memcmp(&out[tk * ROWS + r], &want, sizeof(want)) == 0,
                              "%s (%s) %d tokens: token %d row %d: %.9g, vec_dot %.9g",
                              qtype_name(t), k->isa, n_tok, tk, r, out[tk * ROWS + r], want);
                }
        }
    }
out:
    free(w);
    free(x);
    free(wq);
    free(act);
    free(out);
    matmul_release(&mm);
    threadpool_free(tp);
}

static const struct test_case cases[] = {
    {"exp_contract", test_exp_contract},
    {"log_contract", test_log_contract},
    {"lanes_order", test_lanes_order},
    {"dot_mad_ggml", test_dot_mad_ggml},
    {"rms_norm", test_rms_norm},
    {"rms_norm_ggml", test_rms_norm_ggml},
    {"argmax", test_argmax},
    {"softmax", test_softmax},
    {"swiglu", test_swiglu},
    {"rope", test_rope},
    {"softmax_sink", test_softmax_sink},
    {"swiglu_oai", test_swiglu_oai},
    {"rope_yarn", test_rope_yarn},
    {"rope_freq_factors", test_rope_freq_factors},
    {"gelu_ggml", test_gelu_ggml},
    {"axpy", test_axpy},
    {"threadpool", test_threadpool},
    {"matmul_jobs", test_matmul_jobs},
    {"matmul_token_groups", test_matmul_token_groups},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
