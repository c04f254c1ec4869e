/* test_gpu.c - the Vulkan backend's device layer and kernels, on whatever Vulkan device the machine
 * has (lavapipe on the CPU in CI). Device choice and its errors (no loader, a bad --gpu, the
 * budget, a lost device), buffers, and every kernel of gpu_ops.h against the CPU's kernels with
 * memcmp: the accumulation contract promises the same bits, so the tolerance is zero. Skips,
 * naming why, where the build has no Vulkan backend or the machine no usable device. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deltanet.h"
#include "fault.h"
#include "gpu.h"
#include "gpu_ops.h"
#include "harness.h"
#include "ops.h"
#include "quant.h"
#include "rng.h"

/* The first usable device of any type (lavapipe counts here), or -1 after a skip. */
static int usable_device(void) {
    struct gpu_info in[16];
    char err[256] = "";
    int n = gpu_list(in, 16, err, sizeof(err));
    for (int i = 0; i < n && i < 16; i++)
        if (in[i].usable)
            return i;
    test_skip("no usable Vulkan device (%s): the GPU kernels are NOT checked",
              n < 0 ? err : "none has the features the backend needs");
    return -1;
}

static struct gpu *open_device(uint64_t budget) {
    int i = usable_device();
    if (i < 0)
        return NULL;
    char err[256] = "";
    struct gpu *g = gpu_open(i, budget, err, sizeof(err));
    CHECK_MSG(g != NULL, "gpu_open(%d): %s", i, err);
    return g;
}

/* ---- choosing a device ------------------------------------------------------------------------ */

static void test_choose(void) {
    char err[256] = "";
    CHECK_EQ_INT(gpu_choose("none", err, sizeof(err)), -1);
    CHECK_EQ_INT(gpu_choose("fast", err, sizeof(err)), -EINVAL);
    CHECK_MSG(strstr(err, "auto, none or a device number") || strstr(err, "without the Vulkan"),
              "%s", err);
    if (usable_device() < 0)
        return;
    struct gpu_info in[16];
    int n = gpu_list(in, 16, err, sizeof(err));
    CHECK(n >= 1);
    CHECK_EQ_INT(gpu_choose("99", err, sizeof(err)), -EINVAL);
    CHECK_MSG(strstr(err, "there are"), "%s", err);
    /* auto never picks a CPU device; a number does */
    int automatic = gpu_choose("auto", err, sizeof(err));
    CHECK(automatic == -1 || in[automatic].type != GPU_TYPE_CPU);
    for (int i = 0; i < n && i < 16; i++) {
        char spec[16];
        snprintf(spec, sizeof(spec), "%d", i);
        CHECK_EQ_INT(gpu_choose(spec, err, sizeof(err)), in[i].usable ? i : -EINVAL);
        fprintf(stderr, "  device %d: \"%s\" (%s), type %d, %.1f GiB device-local%s%s%s\n", i,
                in[i].name, in[i].driver, (int)in[i].type,
                (double)in[i].device_bytes / (double)(1u << 30), in[i].unified ? ", unified" : "",
                in[i].int_dot ? ", integer dot product" : "", in[i].usable ? "" : in[i].why_not);
        fprintf(stderr, "    subnormals %s\n", in[i].denorm_preserve ? "kept (promised)" : "not promised");
    }
}

/* Without a loader, listing fails naming the library, and auto falls back to the CPU. */
static void test_no_loader(void) {
    char err[256] = "";
    setenv("SNIPER_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
    struct gpu_info in[4];
    int n = gpu_list(in, 4, err, sizeof(err));
    int automatic = gpu_choose("auto", err, sizeof(err));
    unsetenv("SNIPER_VULKAN_LOADER");
    CHECK(n < 0);
    CHECK_EQ_INT(automatic, -1);
    CHECK_MSG(strstr(err, "/nonexistent/libvulkan.so.1") || strstr(err, "without the Vulkan"),
              "%s", err);
}

/* ---- buffers ---------------------------------------------------------------------------------- */

static void check_buffers(void) {
    struct gpu *g = open_device((uint64_t)1 << 20);
    if (!g)
        return;
    char err[256] = "", desc[512];
    fprintf(stderr, "  %s\n", gpu_describe(g, desc, sizeof(desc)));
    struct gpu_buf *big = gpu_buf_new(g, (size_t)2 << 20, err, sizeof(err));
    CHECK(big == NULL);
    CHECK_MSG(strstr(err, "pass the budget"), "%s", err);
    struct gpu_buf *b = gpu_buf_new(g, 100000, err, sizeof(err));
    CHECK_MSG(b != NULL, "%s", err);
    if (b) {
        CHECK_EQ_INT(gpu_used_bytes(g), 100000);
        uint8_t *src = malloc(100000), *dst = malloc(100000);
        for (int i = 0; i < 100000; i++)
            src[i] = (uint8_t)(i * 31 + 7);
        memset(dst, 0xee, 100000);
        CHECK_EQ_INT(gpu_buf_read(g, b, 0, dst, 1000), 0); /* new buffers are zeroed */
        CHECK(dst[0] == 0 && dst[999] == 0);
        CHECK_EQ_INT(gpu_buf_write(g, b, 0, src, 100000), 0);
        CHECK_EQ_INT(gpu_buf_read(g, b, 0, dst, 100000), 0);
        CHECK(memcmp(src, dst, 100000) == 0);
        CHECK_EQ_INT(gpu_buf_write(g, b, 99999, src, 2), -EINVAL);
        free(src);
        free(dst);
        gpu_buf_free(g, b);
    }
    CHECK_EQ_INT(gpu_used_bytes(g), 0);
    gpu_close(g);
}

/* Mapped (lavapipe's memory is the host's) and through the staging buffer, as on discrete cards. */
static void test_buffers(void) {
    check_buffers();
    setenv("SNIPER_GPU_NO_MAP", "1", 1);
    check_buffers();
    unsetenv("SNIPER_GPU_NO_MAP");
}

/* A lost device fails the submit, names the cause, and stays failed. */
static void test_device_lost(void) {
    struct gpu *g = open_device(0);
    if (!g)
        return;
    CHECK_EQ_INT(gpu_begin(g), 0);
    fault_arm(FAULT_GPU_LOST, 1);
    CHECK_EQ_INT(gpu_submit(g), -EIO);
    fault_arm(FAULT_GPU_LOST, 0);
    CHECK_MSG(strstr(gpu_error(g), "VK_ERROR_DEVICE_LOST"), "%s", gpu_error(g));
    CHECK_EQ_INT(gpu_begin(g), -EIO);
    gpu_close(g);
}

/* ---- kernels against the CPU ------------------------------------------------------------------ */

/* Random rows of n floats with a spread of magnitudes, zeros and (rows of two blocks or more)
 * an all-zero block. */
static void fill_rows(float *x, int64_t n, int32_t rows, uint64_t seed) {
    struct rng r;
    rng_seed(&r, seed);
    for (int64_t i = 0; i < n * rows; i++) {
        float v = (float)rng_uniform(&r) * 2.0f - 1.0f;
        x[i] = i % 97 == 3 ? 0.0f : v * (i % 7 == 0 ? 40.0f : i % 5 == 0 ? 0.01f : 1.0f);
    }
    for (int64_t i = 32; i < 64 && i < n; i++) /* row 0's second block, where there is one */
        x[i] = 0.0f;
}

struct product_case {
    enum qtype type;
    int64_t n_in;
    int32_t n_rows, n_tok;
};

/* The weight type's product on the GPU (activations quantized there) against quant.h's kernels:
 * the activation rows and the outputs equal bit for bit. The weights are fill_rows' times
 * w_scale. */
static void check_product(struct gpu *g, struct gpu_ops *o, const struct product_case *c,
                          float w_scale) {
    /* a device that does not promise float subnormals (the H100's driver flushes them even with
     * DenormPreserve declared) may give 0 where subnormal block scales make the CPU's tiny */
    const bool flush_ok = !gpu_get_info(g)->denorm_preserve && w_scale < 1e-30f;
    const struct quant_kernels *k = quant_kernels(c->type);
    uint64_t rb = 0;
    CHECK_EQ_INT(qtype_row_bytes(c->type, (uint64_t)c->n_in, &rb), 0);
    const size_t row_bytes = (size_t)rb;
    const size_t act_stride = quant_act_row_stride(c->type, c->n_in);
    const size_t w_bytes = row_bytes * (size_t)c->n_rows;
    float *wf = malloc(sizeof(float) * (size_t)c->n_in * (size_t)c->n_rows);
    float *x = malloc(sizeof(float) * (size_t)c->n_in * (size_t)c->n_tok);
    uint8_t *w = malloc(w_bytes), *act = calloc((size_t)c->n_tok, act_stride);
    uint8_t *gact = calloc((size_t)c->n_tok, act_stride);
    float *want = malloc(sizeof(float) * (size_t)c->n_rows * (size_t)c->n_tok);
    float *got = malloc(sizeof(float) * (size_t)c->n_rows * (size_t)c->n_tok);
    char err[256] = "";
    fill_rows(wf, c->n_in, c->n_rows, 1000 + (uint64_t)c->type);
    for (size_t i = 0; i < (size_t)c->n_in * (size_t)c->n_rows; i++)
        wf[i] *= w_scale;
    fill_rows(x, c->n_in, c->n_tok, 2000 + (uint64_t)c->n_in);
    for (int32_t r = 0; r < c->n_rows; r++)
        CHECK_EQ_INT(quant_quantize_row(c->type, wf + (size_t)r * c->n_in, w + (size_t)r * row_bytes,
                                        c->n_in), 0);
    for (int32_t t = 0; t < c->n_tok; t++) {
        k->from_float(x + (size_t)t * c->n_in, act + (size_t)t * act_stride, c->n_in);
        for (int32_t r = 0; r < c->n_rows; r++)
            k->vec_dot(c->n_in, &want[(size_t)t * c->n_rows + r], w + (size_t)r * row_bytes,
                       act + (size_t)t * act_stride);
    }
    struct gpu_buf *bw = gpu_buf_new(g, w_bytes, err, sizeof(err));
    struct gpu_buf *bx = gpu_buf_new(g, sizeof(float) * (size_t)c->n_in * c->n_tok, err, sizeof(err));
    struct gpu_buf *ba = gpu_buf_new(g, act_stride * (size_t)c->n_tok, err, sizeof(err));
    struct gpu_buf *bo = gpu_buf_new(g, sizeof(float) * (size_t)c->n_rows * c->n_tok, err,
                                     sizeof(err));
    CHECK_MSG(bw && bx && ba && bo, "%s", err);
    if (!bw || !bx || !ba || !bo)
        goto out;
    size_t stride = 0;
    CHECK_EQ_INT(gpu_buf_write(g, bw, 0, w, w_bytes), 0);
    CHECK_EQ_INT(gpu_buf_write(g, bx, 0, x, sizeof(float) * (size_t)c->n_in * c->n_tok), 0);
    CHECK_EQ_INT(gpu_begin(g), 0);
    CHECK_EQ_INT(gpu_op_quantize(o, c->type, gpu_buf_addr(bx), (size_t)c->n_in, gpu_buf_addr(ba),
                                 &stride, c->n_in, c->n_tok), 0);
    CHECK_EQ_INT(stride, act_stride);
    gpu_barrier(g);
    CHECK_EQ_INT(gpu_op_matmul(o, c->type, gpu_buf_addr(bw), row_bytes, c->n_in, c->n_rows,
                               gpu_buf_addr(ba), stride, gpu_buf_addr(bo), (size_t)c->n_rows,
                               c->n_tok), 0);
    CHECK_MSG(gpu_submit(g) == 0, "%s", gpu_error(g));
    CHECK_EQ_INT(gpu_buf_read(g, ba, 0, gact, act_stride * (size_t)c->n_tok), 0);
    CHECK_EQ_INT(gpu_buf_read(g, bo, 0, got, sizeof(float) * (size_t)c->n_rows * c->n_tok), 0);
    CHECK_MSG(memcmp(act, gact, act_stride * (size_t)c->n_tok) == 0,
              "%s: the activation rows differ from the CPU's", qtype_name(c->type));
    int bad = 0, flushed = 0;
    for (size_t i = 0; i < (size_t)c->n_rows * c->n_tok; i++) {
        if (memcmp(&want[i], &got[i], sizeof(float)) == 0)
            continue;
        if (flush_ok && got[i] == 0.0f && fabsf(want[i]) < 1e-30f)
            flushed++;
        else if (bad++ < 3)
            test_fail(__FILE__, __LINE__, "%s n_in %lld: out[%zu] %.9g on the GPU, %.9g on the CPU",
                      qtype_name(c->type), (long long)c->n_in, i, got[i], want[i]);
    }
    fprintf(stderr, "  %-6s %5lld x %4d x %d: %s", qtype_name(c->type), (long long)c->n_in,
            c->n_rows, c->n_tok, bad ? "DIFFERENT" : "same bits");
    fprintf(stderr, flushed ? " but %d outputs 0 (subnormals flushed)\n" : "\n", flushed);
out:
    gpu_buf_free(g, bw);
    gpu_buf_free(g, bx);
    gpu_buf_free(g, ba);
    gpu_buf_free(g, bo);
    free(wf);
    free(x);
    free(w);
    free(act);
    free(gact);
    free(want);
    free(got);
}

/* The products of the first n_cases shapes below (0: all). */
static void check_products(size_t n_cases) {
    struct gpu *g = open_device(0);
    if (!g)
        return;
    struct gpu_ops o;
    char err[256] = "";
    CHECK_MSG(gpu_ops_init(&o, g, err, sizeof(err)) == 0, "%s", err);
    /* shapes: a row of few blocks, one whose block count is not a multiple of 4, a tail for the
     * float types, rows past a workgroup's, several tokens, and the limits of the launch shape */
    static const struct product_case cases[] = {
        {QTYPE_F32, 64, 5, 1},    {QTYPE_F32, 1000, 33, 3}, {QTYPE_F16, 96, 3, 2},
        {QTYPE_F16, 2051, 17, 2}, {QTYPE_Q8_0, 32, 7, 1},   {QTYPE_Q8_0, 224, 40, 3},
        {QTYPE_Q8_0, 2048, 70, 2},  {QTYPE_Q8_0, 4160, 5, 2}, /* 130 blocks: three chunks */
        {QTYPE_Q8_0, 32, 65600, 1}, /* more row groups than a dispatch's x takes */
        {QTYPE_Q8_0, 224, 9, 9},    {QTYPE_Q8_0, 4160, 3, 5}, /* token groups of 8, 4 and 2 */
        {QTYPE_Q8_0, 96, 4, 3},
        {QTYPE_BF16, 64, 5, 1},   {QTYPE_BF16, 1000, 33, 3},
        {QTYPE_Q4_0, 32, 7, 1},   {QTYPE_Q4_0, 224, 40, 3},   {QTYPE_Q4_0, 2048, 70, 2},
        {QTYPE_Q4_1, 32, 7, 1},   {QTYPE_Q4_1, 224, 40, 3},   {QTYPE_Q4_1, 2048, 70, 2},
        {QTYPE_Q5_0, 32, 7, 1},   {QTYPE_Q5_0, 224, 40, 3},   {QTYPE_Q5_0, 2048, 70, 2},
        {QTYPE_Q5_1, 32, 7, 1},   {QTYPE_Q5_1, 224, 40, 3},   {QTYPE_Q5_1, 2048, 70, 2},
        {QTYPE_IQ4_NL, 32, 7, 1}, {QTYPE_IQ4_NL, 224, 40, 3}, {QTYPE_IQ4_NL, 2048, 70, 2},
        {QTYPE_MXFP4, 32, 7, 1},  {QTYPE_MXFP4, 224, 40, 3},  {QTYPE_MXFP4, 2048, 70, 2},
        {QTYPE_Q2_K, 256, 7, 1}, {QTYPE_Q2_K, 1792, 40, 3}, {QTYPE_Q2_K, 2560, 70, 2},
        {QTYPE_Q3_K, 256, 7, 1}, {QTYPE_Q3_K, 1792, 40, 3}, {QTYPE_Q3_K, 2560, 70, 2},
        {QTYPE_Q4_K, 256, 7, 1}, {QTYPE_Q4_K, 1792, 40, 3}, {QTYPE_Q4_K, 2560, 70, 2},
        {QTYPE_Q5_K, 256, 7, 1}, {QTYPE_Q5_K, 1792, 40, 3}, {QTYPE_Q5_K, 2560, 70, 2},
        {QTYPE_Q6_K, 256, 7, 1}, {QTYPE_Q6_K, 1792, 40, 3}, {QTYPE_Q6_K, 2560, 70, 2},
        {QTYPE_IQ4_XS, 256, 7, 1}, {QTYPE_IQ4_XS, 1792, 40, 3}, {QTYPE_IQ4_XS, 2560, 20, 2},
        {QTYPE_IQ2_XXS, 256, 7, 1}, {QTYPE_IQ2_XXS, 1792, 40, 3}, {QTYPE_IQ2_XXS, 2560, 20, 2},
        {QTYPE_IQ2_XS, 256, 7, 1}, {QTYPE_IQ2_XS, 1792, 40, 3}, {QTYPE_IQ2_XS, 2560, 20, 2},
        {QTYPE_IQ2_S, 256, 7, 1}, {QTYPE_IQ2_S, 1792, 40, 3}, {QTYPE_IQ2_S, 2560, 20, 2},
        {QTYPE_IQ3_XXS, 256, 7, 1}, {QTYPE_IQ3_XXS, 1792, 40, 3}, {QTYPE_IQ3_XXS, 2560, 20, 2},
        {QTYPE_IQ3_S, 256, 7, 1}, {QTYPE_IQ3_S, 1792, 40, 3}, {QTYPE_IQ3_S, 2560, 20, 2},
        {QTYPE_IQ1_S, 256, 7, 1}, {QTYPE_IQ1_S, 1792, 40, 3}, {QTYPE_IQ1_S, 2560, 20, 2},
        {QTYPE_IQ1_M, 256, 7, 1}, {QTYPE_IQ1_M, 1792, 40, 3}, {QTYPE_IQ1_M, 2560, 20, 2},
    };
    const size_t n_all = sizeof(cases) / sizeof(cases[0]);
    for (size_t i = 0; i < (n_cases && n_cases < n_all ? n_cases : n_all); i++)
        check_product(g, &o, &cases[i], 1.0f);
    /* MXFP4 blocks of exponent 0 and 1, whose scales are float subnormals: the GPU must keep them
     * as the CPU does, or (a device that does not promise subnormals) give 0 */
    static const struct product_case tiny = {QTYPE_MXFP4, 256, 20, 2};
    check_product(g, &o, &tiny, 1e-40f);
    CHECK(!gpu_ops_has_type(&o, QTYPE_COUNT));
    gpu_ops_release(&o);
    CHECK_EQ_INT(gpu_used_bytes(g), 0);
    CHECK(!gpu_ops_has_type(&o, QTYPE_IQ2_XXS)); /* its codebook is gone */
    gpu_close(g);
}

/* gpu_ops_init under a budget too small for the i-quant codebooks fails naming them and holds
 * no device memory. */
static void test_ops_budget(void) {
    struct gpu *g = open_device((uint64_t)16 << 10);
    if (!g)
        return;
    struct gpu_ops o;
    char err[256] = "";
    CHECK_EQ_INT(gpu_ops_init(&o, g, err, sizeof(err)), -ENOMEM);
    CHECK_MSG(strstr(err, "codebooks") && strstr(err, "pass the budget"), "%s", err);
    CHECK_EQ_INT(gpu_used_bytes(g), 0);
    gpu_ops_release(&o);
    gpu_close(g);
}

/* The contract's exp, square root and log (contract.glsl) against the CPU's ops_exp, sqrtf and
 * ops_log, bit for bit: exp on 2^21 floats spread evenly over its whole range (every step of its
 * reduction), the root and the log on a stride through every float, all on the specials. */
/* The probe's inputs: op 0 (exp) 2^21 floats spread evenly over exp's range, ops 1 and 2 (the
 * root, the log) a stride through every float; the specials first. */
static void contract_inputs(float *in, uint32_t n, uint32_t op) {
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283935546875f,
                                    88.7228317f, -87.33654f, -104.0f, 1e-45f, 1.0f, 2.0f};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = i * 2047u + 7u; /* 2047 * 2^21 spans every exponent and both signs */
        memcpy(&in[i], &u, sizeof(float));
        if (op == 0)
            in[i] = -104.0f + 193.0f * (float)i / (float)n;
    }
    memcpy(in, special, sizeof(special));
}

static void test_contract(void) {
    struct gpu *g = open_device(0);
    if (!g)
        return;
    const uint32_t n = 1u << 21;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    char err[256] = "";
    struct gpu_buf *b_in = gpu_buf_new(g, n * sizeof(float), err, sizeof(err));
    struct gpu_buf *b_out = gpu_buf_new(g, n * sizeof(float), err, sizeof(err));
    const int k = gpu_kernel(g, "probe_contract");
    CHECK_MSG(b_in && b_out && k >= 0, "%s", err);
    for (uint32_t op = 0; b_in && b_out && k >= 0 && op < 3; op++) {
        contract_inputs(in, n, op);
        struct { uint64_t in, out; uint32_t n, op; } push = {gpu_buf_addr(b_in), gpu_buf_addr(b_out),
                                                            n, op};
        CHECK_EQ_INT(gpu_buf_write(g, b_in, 0, in, n * sizeof(float)), 0);
        CHECK_EQ_INT(gpu_begin(g), 0);
        gpu_dispatch(g, k, &push, sizeof(push), n / 64, 1, 1);
        CHECK_EQ_INT(gpu_submit(g), 0);
        CHECK_EQ_INT(gpu_buf_read(g, b_out, 0, out, n * sizeof(float)), 0);
        int64_t bad = 0;
        for (uint32_t i = 0; i < n; i++) {
            const float want = op == 0 ? ops_exp(in[i]) : op == 1 ? sqrtf(in[i]) : ops_log(in[i]);
            const bool same = isnan(want) ? isnan(out[i]) : memcmp(&want, &out[i], 4) == 0;
            if (!same && bad++ < 4)
                test_fail(__FILE__, __LINE__, "%s(%a): gpu %a, cpu %a",
                          op == 0 ? "exp" : op == 1 ? "sqrt" : "log",
                          (double)in[i], (double)out[i], (double)want);
        }
        CHECK_EQ_INT(bad, 0);
    }
    gpu_buf_free(g, b_in);
    gpu_buf_free(g, b_out);
    free(in);
    free(out);
    gpu_close(g);
}

/* ---- the DeltaNet steps ------------------------------------------------------------------------ */

/* n floats uniform in [lo, hi). */
static void fill_range(float *x, size_t n, float lo, float hi, uint64_t seed) {
    struct rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (float)rng_uniform(&r);
}

/* A device buffer holding n floats of x (NULL: zeros); NULL after a failed check. */
static struct gpu_buf *upload_floats(struct gpu *g, const float *x, size_t n) {
    char err[256] = "";
    struct gpu_buf *b = gpu_buf_new(g, n * sizeof(float), err, sizeof(err));
    CHECK_MSG(b != NULL, "%s", err);
    if (b && x)
        CHECK_EQ_INT(gpu_buf_write(g, b, 0, x, n * sizeof(float)), 0);
    return b;
}

/* The device's n floats in b equal want's, bit for bit. */
static void check_floats(struct gpu *g, struct gpu_buf *b, const float *want, size_t n,
                         const char *what) {
    float *got = malloc(n * sizeof(float));
    CHECK_EQ_INT(gpu_buf_read(g, b, 0, got, n * sizeof(float)), 0);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ < 3)
            test_fail(__FILE__, __LINE__, "%s[%zu]: %.9g on the GPU, %.9g on the CPU", what, i,
                      (double)got[i], (double)want[i]);
    free(got);
}

struct dn_case {
    int32_t hk, hv, d, d_conv, n_tok, split; /* the GPU runs tokens [0, split) then the rest */
};

/* One DeltaNet layer's steps after its products, for one sequence: the gates, the conv with its
 * state, the q / k L2 norms, the recurrence over the SSM state and the gated norm, on the GPU in
 * two segments against deltanet.h's steps over all tokens at once: every output and both
 * states equal bit for bit. */
static void check_deltanet(struct gpu *g, struct gpu_ops *o, const struct dn_case *c) {
    const int32_t D = c->d, K = c->d_conv, T = c->n_tok, Hv = c->hv, Hk = c->hk;
    const size_t C = (size_t)(2 * Hk + Hv) * (size_t)D, V = (size_t)Hv * (size_t)D;
    const size_t n_rows = (size_t)T * C, n_state = (size_t)(K - 1) * C, n_s = V * (size_t)D;
    const size_t n_g = (size_t)T * (size_t)Hv;
    float *rows = malloc(n_rows * 4), *state = malloc(n_state * 4), *w = malloc(C * (size_t)K * 4);
    float *conv = malloc(n_rows * 4), *beta = malloc(n_g * 4), *gate = malloc(n_g * 4);
    float *dt_bias = malloc((size_t)Hv * 4), *a = malloc((size_t)Hv * 4);
    float *z = malloc((size_t)T * V * 4), *norm_w = malloc((size_t)D * 4), *S = malloc(n_s * 4);
    float *delta = malloc((size_t)D * 4);
    fill_rows(rows, (int64_t)C, T, 71);
    fill_range(state, n_state, -2.0f, 2.0f, 72);
    fill_range(w, C * (size_t)K, -0.7f, 0.7f, 73);
    fill_range(beta, n_g, -6.0f, 6.0f, 74);
    fill_range(gate, n_g, -30.0f, 30.0f, 75); /* both sides of softplus's 20 */
    fill_range(dt_bias, (size_t)Hv, -1.0f, 1.0f, 76);
    fill_range(a, (size_t)Hv, -2.0f, -0.01f, 77);
    fill_rows(z, (int64_t)V, T, 78);
    fill_range(norm_w, (size_t)D, 0.5f, 1.5f, 79);
    fill_range(S, n_s, -0.5f, 0.5f, 80);
    struct gpu_buf *b_rows = upload_floats(g, rows, n_rows), *b_state = upload_floats(g, state, n_state);
    struct gpu_buf *b_w = upload_floats(g, w, C * (size_t)K), *b_conv = upload_floats(g, NULL, n_rows);
    struct gpu_buf *b_beta = upload_floats(g, beta, n_g), *b_gate = upload_floats(g, gate, n_g);
    struct gpu_buf *b_dt = upload_floats(g, dt_bias, (size_t)Hv), *b_a = upload_floats(g, a, (size_t)Hv);
    struct gpu_buf *b_z = upload_floats(g, z, (size_t)T * V), *b_nw = upload_floats(g, norm_w, (size_t)D);
    struct gpu_buf *b_S = upload_floats(g, S, n_s);
    if (!b_rows || !b_state || !b_w || !b_conv || !b_beta || !b_gate || !b_dt || !b_a || !b_z ||
        !b_nw || !b_S)
        goto out;
    /* the CPU: block_deltanet's order over the whole segment */
    const float eps = 1e-6f, scale = 1.0f / sqrtf((float)D);
    deltanet_gates(beta, gate, dt_bias, a, T, Hv);
    deltanet_conv(rows, state, w, conv, T, (int32_t)C, K);
    for (int32_t t = 0; t < T; t++)
        for (int32_t h = 0; h < 2 * Hk; h++)
            deltanet_l2_norm(conv + (size_t)t * C + (size_t)h * D, D, eps);
    for (int32_t t = 0; t < T; t++)
        for (int32_t h = 0; h < Hv; h++) {
            float *ct = conv + (size_t)t * C;
            deltanet_head_token(S + (size_t)h * D * D, ct + (size_t)(h % Hk) * D,
                                ct + (size_t)(Hk + h % Hk) * D, ct + (size_t)(2 * Hk + h) * D,
                                ops_exp(gate[(size_t)t * Hv + h]), beta[(size_t)t * Hv + h], delta,
                                D, scale);
        }
    for (int32_t t = 0; t < T; t++)
        for (int32_t h = 0; h < Hv; h++)
            deltanet_gated_norm(conv + (size_t)t * C + (size_t)(2 * Hk + h) * D,
                                z + (size_t)t * V + (size_t)h * D, norm_w, D, eps);
    /* the GPU: the gates over the batch, the conv and the recurrence per segment */
    const uint64_t a_conv = gpu_buf_addr(b_conv), a_rows = gpu_buf_addr(b_rows);
    const int32_t first[2] = {0, c->split}, n[2] = {c->split, T - c->split};
    CHECK_EQ_INT(gpu_begin(g), 0);
    CHECK_EQ_INT(gpu_op_deltanet_gates(o, gpu_buf_addr(b_beta), gpu_buf_addr(b_gate),
                                       gpu_buf_addr(b_dt), gpu_buf_addr(b_a), Hv, T), 0);
    for (int s = 0; s < 2; s++) {
        CHECK_EQ_INT(gpu_op_deltanet_conv(o, a_rows + (uint64_t)first[s] * C * 4, C,
                                          gpu_buf_addr(b_state), gpu_buf_addr(b_w),
                                          a_conv + (uint64_t)first[s] * C * 4, C, (int32_t)C, K,
                                          n[s]), 0);
        gpu_barrier(g);
    }
    CHECK_EQ_INT(gpu_op_l2_norm(o, a_conv, C, 2 * Hk, D, eps, T), 0);
    gpu_barrier(g);
    for (int s = 0; s < 2; s++) {
        const struct gpu_deltanet r = {
            .S = gpu_buf_addr(b_S), .conv = a_conv + (uint64_t)first[s] * C * 4,
            .gate = gpu_buf_addr(b_gate) + (uint64_t)first[s] * Hv * 4,
            .beta = gpu_buf_addr(b_beta) + (uint64_t)first[s] * Hv * 4, .conv_stride = C,
            .n_hk = Hk, .n_hv = Hv, .d = D, .n_tok = n[s], .scale = scale};
        CHECK_EQ_INT(gpu_op_deltanet_recur(o, &r), 0);
        gpu_barrier(g);
    }
    CHECK_EQ_INT(gpu_op_gated_norm(o, a_conv + (uint64_t)2 * Hk * D * 4, C, gpu_buf_addr(b_z), V,
                                   gpu_buf_addr(b_nw), Hv, D, eps, T), 0);
    CHECK_MSG(gpu_submit(g) == 0, "%s", gpu_error(g));
    check_floats(g, b_beta, beta, n_g, "beta");
    check_floats(g, b_gate, gate, n_g, "gate");
    check_floats(g, b_state, state, n_state, "conv state");
    check_floats(g, b_conv, conv, n_rows, "conv rows (q, k normalised; the heads' output)");
    check_floats(g, b_S, S, n_s, "ssm state");
    fprintf(stderr, "  deltanet hk %d hv %d d %d d_conv %d, %d + %d tokens: compared\n", Hk, Hv, D, K,
            c->split, T - c->split);
out:
    gpu_buf_free(g, b_rows);
    gpu_buf_free(g, b_state);
    gpu_buf_free(g, b_w);
    gpu_buf_free(g, b_conv);
    gpu_buf_free(g, b_beta);
    gpu_buf_free(g, b_gate);
    gpu_buf_free(g, b_dt);
    gpu_buf_free(g, b_a);
    gpu_buf_free(g, b_z);
    gpu_buf_free(g, b_nw);
    gpu_buf_free(g, b_S);
    free(rows);
    free(state);
    free(w);
    free(conv);
    free(beta);
    free(gate);
    free(dt_bias);
    free(a);
    free(z);
    free(norm_w);
    free(S);
    free(delta);
}

/* Shapes: a head of whole 32-element steps, one with a tail, one of a tail only; one token after a
 * prompt (decode), and a conv state longer than the first segment. */
static void test_deltanet(void) {
    struct gpu *g = open_device(0);
    if (!g)
        return;
    struct gpu_ops o;
    char err[256] = "";
    CHECK_MSG(gpu_ops_init(&o, g, err, sizeof(err)) == 0, "%s", err);
    static const struct dn_case cases[] = {
        {2, 4, 64, 4, 6, 2}, {1, 2, 48, 4, 5, 4}, {2, 2, 20, 4, 3, 1}, {2, 6, 128, 4, 2, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_deltanet(g, &o, &cases[i]);
    gpu_ops_release(&o);
    gpu_close(g);
}

static void test_products(void) {
    check_products(0);
}

/* The float and Q8_0 products again with every buffer copied through the staging buffer. */
static void test_products_staged(void) {
    setenv("SNIPER_GPU_NO_MAP", "1", 1);
    check_products(13);
    unsetenv("SNIPER_GPU_NO_MAP");
}

static const struct test_case cases[] = {
    {"choose", test_choose},
    {"no_loader", test_no_loader},
    {"buffers", test_buffers},
    {"device_lost", test_device_lost},
    {"contract", test_contract},
    {"deltanet", test_deltanet},
    {"products", test_products},
    {"products_staged", test_products_staged},
    {"ops_budget", test_ops_budget},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
