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

#include "engine_impl.h"
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

/* The contract's exp and square root (contract.glsl) against the CPU's ops_exp and sqrtf, bit
 * for bit: exp on 2^21 floats spread evenly over its whole range (every step of its reduction),
 * the root on a stride through every float, both on the specials. */
/* The probe's inputs: op 0 (exp) 2^21 floats spread evenly over exp's range, op 1 (the root) a
 * stride through every float; the specials first. */
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
    for (uint32_t op = 0; b_in && b_out && k >= 0 && op < 2; op++) {
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
            const float want = op == 0 ? ops_exp(in[i]) : sqrtf(in[i]);
            const bool same = isnan(want) ? isnan(out[i]) : memcmp(&want, &out[i], 4) == 0;
            if (!same && bad++ < 4)
                test_fail(__FILE__, __LINE__, "%s(%a): gpu %a, cpu %a", op ? "sqrt" : "exp",
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

static void test_products(void) {
    check_products(0);
}

/* The float and Q8_0 products again with every buffer copied through the staging buffer. */
static void test_products_staged(void) {
    setenv("SNIPER_GPU_NO_MAP", "1", 1);
    check_products(13);
    unsetenv("SNIPER_GPU_NO_MAP");
}

/* ---- attention against block_attn.c's ------------------------------------------------------- */

struct attn_case {
    enum qtype kv_type;
    int32_t head_dim, n_head_kv, gqa; /* n_head = n_head_kv gqa */
    int32_t pos0, n_tok, window, ring_rows;
    bool sinks, gated;                /* gated: query heads 2 head_dim apart (qwen35's layout) */
};

/* n values uniform in (-amp, amp). */
static void fill_uniform(float *x, size_t n, float amp, uint64_t seed) {
    struct rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = ((float)rng_uniform(&r) * 2.0f - 1.0f) * amp;
}

/* rows rows of kv_dim random floats as the cache stores them (block_attn.c's kv_store). */
static uint8_t *attn_cache(enum qtype t, int32_t rows, int32_t kv_dim, size_t row_bytes,
                           float amp, uint64_t seed) {
    float *x = malloc(sizeof(float) * (size_t)kv_dim);
    uint8_t *c = calloc((size_t)rows, row_bytes);
    for (int32_t r = 0; r < rows; r++) {
        fill_uniform(x, (size_t)kv_dim, amp, seed + (uint64_t)r);
        uint8_t *dst = c + (size_t)r * row_bytes;
        if (t == QTYPE_F32)
            memcpy(dst, x, sizeof(float) * (size_t)kv_dim);
        else if (t == QTYPE_F16)
            quant_f16_from_f32(x, dst, kv_dim);
        else
            CHECK_EQ_INT(quant_quantize_row(t, x, dst, kv_dim), 0);
    }
    free(x);
    return c;
}

/* The buffers of one attention case, on both sides. */
struct attn_bufs {
    float *q, *sinks, *want, *got;
    uint8_t *k, *v;
    struct gpu_buf *bq, *bk, *bv, *bs, *bscr, *bo;
};

/* block_attn.c's attn_head for every (token, head) of c into b->want. */
static void attn_reference(const struct attn_case *c, struct attn_bufs *b, size_t row_bytes,
                           size_t q_head_stride) {
    const int32_t hd = c->head_dim, n_head = c->n_head_kv * c->gqa;
    float *s = malloc(sizeof(float) * (size_t)c->ring_rows), *vrow = malloc(sizeof(float) * hd);
    uint16_t *qbuf = malloc(sizeof(uint16_t) * (size_t)hd);
    for (int32_t t = 0; t < c->n_tok; t++)
        for (int32_t h = 0; h < n_head; h++) {
            const int32_t pos = c->pos0 + t, g = h / c->gqa;
            const int32_t first = c->window && pos + 1 > c->window ? pos + 1 - c->window : 0;
            const size_t head_off = (size_t)g * (row_bytes / (size_t)c->n_head_kv);
            const struct attn_head ah = {
                .kv_type = c->kv_type,
                .q = b->q + ((size_t)t * n_head + h) * q_head_stride,
                .k = b->k + head_off, .v = b->v + head_off, .row_bytes = row_bytes,
                .rows = c->ring_rows, .first = first, .n_kv = pos + 1 - first, .head_dim = hd,
                .scale = 1.0f / sqrtf((float)hd), .sink = c->sinks ? b->sinks[h] : -INFINITY};
            attn_head(&ah, b->want + ((size_t)t * n_head + h) * hd, s, qbuf, vrow);
        }
    free(s);
    free(vrow);
    free(qbuf);
}

static void attn_bufs_free(struct gpu *g, struct attn_bufs *b) {
    gpu_buf_free(g, b->bq);
    gpu_buf_free(g, b->bk);
    gpu_buf_free(g, b->bv);
    gpu_buf_free(g, b->bs);
    gpu_buf_free(g, b->bscr);
    gpu_buf_free(g, b->bo);
    free(b->q);
    free(b->sinks);
    free(b->want);
    free(b->got);
    free(b->k);
    free(b->v);
}

/* The case's attention on the GPU against block_attn.c's, bit for bit. */
static void check_attn(struct gpu *g, struct gpu_ops *o, const struct attn_case *c) {
    const int32_t hd = c->head_dim, n_head = c->n_head_kv * c->gqa;
    const int32_t kv_dim = hd * c->n_head_kv;
    const size_t q_head_stride = (size_t)hd * (c->gated ? 2 : 1);
    const size_t n_q = (size_t)c->n_tok * n_head * q_head_stride;
    const size_t n_out = (size_t)c->n_tok * n_head * hd;
    uint64_t rb = 0;
    CHECK_EQ_INT(qtype_row_bytes(c->kv_type, (uint64_t)kv_dim, &rb), 0);
    const size_t row_bytes = (size_t)rb, cache_bytes = row_bytes * (size_t)c->ring_rows;
    const int32_t last = c->pos0 + c->n_tok;
    const int32_t n_kv_max = c->window && last > c->window ? c->window : last;
    const uint64_t seed = 7000 + (uint64_t)c->kv_type * 100 + (uint64_t)hd + (uint64_t)c->pos0;
    char err[256] = "";
    struct attn_bufs b = {.q = malloc(sizeof(float) * n_q), .sinks = malloc(sizeof(float) * n_head),
                          .want = malloc(sizeof(float) * n_out), .got = malloc(sizeof(float) * n_out)};
    fill_uniform(b.q, n_q, 2.0f, seed);
    fill_uniform(b.sinks, (size_t)n_head, 3.0f, seed + 1);
    b.k = attn_cache(c->kv_type, c->ring_rows, kv_dim, row_bytes, 2.0f, seed + 2);
    b.v = attn_cache(c->kv_type, c->ring_rows, kv_dim, row_bytes, 1.0f, seed + 3);
    attn_reference(c, &b, row_bytes, q_head_stride);
    b.bq = gpu_buf_new(g, sizeof(float) * n_q, err, sizeof(err));
    b.bk = gpu_buf_new(g, cache_bytes, err, sizeof(err));
    b.bv = gpu_buf_new(g, cache_bytes, err, sizeof(err));
    b.bs = gpu_buf_new(g, sizeof(float) * n_head, err, sizeof(err));
    b.bscr = gpu_buf_new(g, gpu_attn_scratch_bytes(c->n_tok, n_head, n_kv_max), err, sizeof(err));
    b.bo = gpu_buf_new(g, sizeof(float) * n_out, err, sizeof(err));
    CHECK_MSG(b.bq && b.bk && b.bv && b.bs && b.bscr && b.bo, "%s", err);
    if (!b.bq || !b.bk || !b.bv || !b.bs || !b.bscr || !b.bo)
        goto out;
    CHECK_EQ_INT(gpu_buf_write(g, b.bq, 0, b.q, sizeof(float) * n_q), 0);
    CHECK_EQ_INT(gpu_buf_write(g, b.bk, 0, b.k, cache_bytes), 0);
    CHECK_EQ_INT(gpu_buf_write(g, b.bv, 0, b.v, cache_bytes), 0);
    CHECK_EQ_INT(gpu_buf_write(g, b.bs, 0, b.sinks, sizeof(float) * n_head), 0);
    const struct gpu_attn a = {
        .kv_type = c->kv_type, .q = gpu_buf_addr(b.bq), .q_tok_stride = n_head * q_head_stride,
        .q_head_stride = q_head_stride, .k = gpu_buf_addr(b.bk), .v = gpu_buf_addr(b.bv),
        .row_bytes = row_bytes, .ring_rows = c->ring_rows, .out = gpu_buf_addr(b.bo),
        .out_stride = (size_t)n_head * hd, .sinks = c->sinks ? gpu_buf_addr(b.bs) : 0,
        .scratch = gpu_buf_addr(b.bscr), .n_head = n_head, .n_head_kv = c->n_head_kv,
        .head_dim = hd, .pos0 = c->pos0, .n_tok = c->n_tok, .window = c->window,
        .scale = 1.0f / sqrtf((float)hd)};
    CHECK_EQ_INT(gpu_begin(g), 0);
    CHECK_EQ_INT(gpu_op_attn(o, &a), 0);
    CHECK_MSG(gpu_submit(g) == 0, "%s", gpu_error(g));
    CHECK_EQ_INT(gpu_buf_read(g, b.bo, 0, b.got, sizeof(float) * n_out), 0);
    int bad = 0;
    for (size_t i = 0; i < n_out; i++)
        if (memcmp(&b.want[i], &b.got[i], sizeof(float)) != 0 && bad++ < 3)
            test_fail(__FILE__, __LINE__, "%s hd %d pos0 %d: out[%zu] (token %zu, head %zu) %.9g "
                      "on the GPU, %.9g on the CPU", qtype_name(c->kv_type), hd, c->pos0, i,
                      i / ((size_t)n_head * hd), i / hd % n_head, b.got[i], b.want[i]);
    fprintf(stderr, "  %-4s hd %3d heads %2d/%d pos %4d+%-2d window %2d ring %4d%s%s: %s\n",
            qtype_name(c->kv_type), hd, n_head, c->n_head_kv, c->pos0, c->n_tok, c->window,
            c->ring_rows, c->sinks ? " sinks" : "", c->gated ? " gated" : "",
            bad ? "DIFFERENT" : "same bits");
out:
    attn_bufs_free(g, &b);
}

/* Shapes gpu_op_attn refuses, and a KV type it has no kernels for. */
static void check_attn_refusals(struct gpu_ops *o) {
    const struct gpu_attn ok = {.kv_type = QTYPE_F16, .row_bytes = 2 * 64 * 2, .ring_rows = 64,
                                .n_head = 8, .n_head_kv = 2, .head_dim = 64, .pos0 = 10,
                                .n_tok = 3, .window = 0, .scale = 0.125f};
    struct gpu_attn a = ok;
    a.head_dim = 320, a.row_bytes = 2 * 320 * 2;
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.n_head = 7;
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.ring_rows = 12; /* the last token sees 13 positions */
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.row_bytes = 2 * 64 * 2 - 2;
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.kv_type = QTYPE_Q8_0, a.head_dim = 48, a.row_bytes = 2 * 51;
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.n_tok = 0;
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.k = 4; /* F16 scores read K four halves at a time */
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.row_bytes = 2 * 132; /* heads 132 bytes apart */
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.kv_type = QTYPE_Q4_1;
    CHECK_EQ_INT(gpu_op_attn(o, &a), -ENOTSUP);
}

/* Every KV type: head_dim 64 and 128 (and 80, a tail for the float types), GQA 1 and 4, decode
 * and prefill segments from pos0 > 0, windows over rings (ring_rows = window) and the whole
 * context, sinks on and off, query heads packed or 2 head_dim apart. */
static void test_attention(void) {
    struct gpu *g = open_device(0);
    if (!g)
        return;
    struct gpu_ops o;
    char err[256] = "";
    CHECK_MSG(gpu_ops_init(&o, g, err, sizeof(err)) == 0, "%s", err);
    static const enum qtype types[] = {QTYPE_F32, QTYPE_F16, QTYPE_Q8_0, QTYPE_Q4_0};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const enum qtype t = types[i];
        const struct attn_case cases[] = {
            {t, 64, 2, 1, 100, 1, 0, 101, false, false},
            {t, 128, 2, 4, 77, 1, 32, 32, true, false},
            {t, 64, 1, 4, 40, 7, 16, 16, true, true},
            {t, 128, 2, 1, 120, 40, 0, 163, false, false},
            {t, 128, 1, 4, 1000, 9, 50, 50, true, false},
            {t, 64, 2, 4, 600, 1, 0, 601, true, true},
        };
        for (size_t j = 0; j < sizeof(cases) / sizeof(cases[0]); j++)
            check_attn(g, &o, &cases[j]);
        if (t == QTYPE_F32 || t == QTYPE_F16) {
            const struct attn_case tail = {t, 80, 2, 2, 20, 5, 0, 25, true, false};
            check_attn(g, &o, &tail);
        }
    }
    check_attn_refusals(&o);
    gpu_ops_release(&o);
    gpu_close(g);
}

static const struct test_case cases[] = {
    {"choose", test_choose},
    {"no_loader", test_no_loader},
    {"buffers", test_buffers},
    {"device_lost", test_device_lost},
    {"contract", test_contract},
    {"products", test_products},
    {"products_staged", test_products_staged},
    {"ops_budget", test_ops_budget},
    {"attention", test_attention},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
