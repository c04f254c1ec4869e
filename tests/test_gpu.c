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
#include "engine_impl.h"
#include "fault.h"
#include "gpu.h"
#include "gpu_ops.h"
#include "harness.h"
#include "matmul.h"
#include "ops.h"
#include "quant.h"
#include "rng.h"

/* The first usable device of any type (lavapipe counts here), or -1 after a skip; the list is
 * read once a process (each read is an instance made and destroyed). */
static int usable_device(void) {
    static struct gpu_info in[16];
    static char err[256] = "";
    static int n = -2;
    if (n == -2)
        n = gpu_list(in, 16, err, sizeof(err));
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
        /* matmul_split.glsl: 16 rows of one block per workgroup past n_rows, a row's blocks
         * across two rounds (7 blocks, 8 rows), token groups of 8 with 2 rows of 3 blocks and a
         * partial group of tokens, a row of 3 rounds */
        {QTYPE_Q4_K, 256, 37, 1},  {QTYPE_Q6_K, 1792, 21, 1}, {QTYPE_Q3_K, 768, 37, 11},
        {QTYPE_Q5_K, 768, 5, 6},   {QTYPE_Q2_K, 1792, 9, 4},  {QTYPE_IQ4_XS, 24576, 3, 1},
        {QTYPE_IQ2_XXS, 768, 37, 11}, {QTYPE_IQ1_M, 1792, 21, 1}, {QTYPE_IQ3_S, 256, 37, 1},
        /* q4_K's, q5_K's and q6_K's lane chains (quant.h) across rounds: rows of 3 rounds, and
         * rows of 33 blocks for a group of 4 tokens and a partial one */
        {QTYPE_Q4_K, 24576, 3, 1}, {QTYPE_Q5_K, 8448, 6, 5}, {QTYPE_Q6_K, 24576, 3, 1},
        {QTYPE_Q6_K, 8448, 6, 5},
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

/* The word-reading products refuse addresses their words would misalign, recording nothing. */
static void test_products_align(void) {
    struct gpu *g = open_device(0);
    if (!g)
        return;
    struct gpu_ops o;
    char err[256] = "";
    CHECK_MSG(gpu_ops_init(&o, g, err, sizeof(err)) == 0, "%s", err);
    struct gpu_buf *b = gpu_buf_new(g, 4096, err, sizeof(err));
    CHECK_MSG(b != NULL, "%s", err);
    if (b && gpu_begin(g) == 0) {
        const uint64_t a = gpu_buf_addr(b);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_Q4_K, a + 8, 144, 256, 1, a, 320, a, 1, 1), -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_Q5_K, a, 168, 256, 1, a, 320, a, 1, 1), -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_IQ4_XS, a + 4, 136, 256, 1, a, 320, a, 1, 1),
                     -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_IQ4_XS, a, 136, 256, 1, a + 8, 320, a, 1, 1),
                     -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_Q2_K, a, 84, 256, 2, a, 328, a, 1, 2), -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_Q2_K, a + 2, 84, 256, 1, a, 320, a, 1, 1), -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_Q6_K, a + 1, 210, 256, 1, a, 320, a, 1, 1), -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_Q3_K, a, 111, 256, 1, a, 320, a, 1, 1), -EINVAL);
        CHECK_EQ_INT(gpu_op_matmul(&o, QTYPE_IQ1_M, a + 4, 56, 256, 1, a, 320, a, 1, 1), -EINVAL);
        CHECK_MSG(gpu_submit(g) == 0, "%s", gpu_error(g));
    }
    gpu_buf_free(g, b);
    gpu_ops_release(&o);
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
                                    88.7228317f, -87.33654f, -104.0f, 1.2e-38f, 1.0f, 2.0f};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = i * 2047u + 7u; /* 2047 * 2^21 spans every exponent and both signs */
        if ((u & 0x7f800000u) == 0)  /* no subnormal roots: a device may flush them (the H100 */
            u |= 0x00800000u;        /* does), and the engine's are of mean + eps */
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
    float *rows = malloc(n_rows * 4), *state = malloc(n_state * 4);
    float *w = malloc(C * (size_t)K * 4);
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
    struct gpu_buf *b_rows = upload_floats(g, rows, n_rows);
    struct gpu_buf *b_state = upload_floats(g, state, n_state);
    struct gpu_buf *b_w = upload_floats(g, w, C * (size_t)K);
    struct gpu_buf *b_conv = upload_floats(g, NULL, n_rows);
    struct gpu_buf *b_beta = upload_floats(g, beta, n_g), *b_gate = upload_floats(g, gate, n_g);
    struct gpu_buf *b_dt = upload_floats(g, dt_bias, (size_t)Hv);
    struct gpu_buf *b_a = upload_floats(g, a, (size_t)Hv);
    struct gpu_buf *b_z = upload_floats(g, z, (size_t)T * V);
    struct gpu_buf *b_nw = upload_floats(g, norm_w, (size_t)D);
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
    fprintf(stderr, "  deltanet hk %d hv %d d %d d_conv %d, %d + %d tokens: compared\n", Hk, Hv,
            D, K, c->split, T - c->split);
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

/* The tiled driver (matmul_tile.glsl) of every type that has one, against the CPU (the integer
 * dot product's kernel and the plain one, each taken by gpu_op_matmul here): token counts
 * below, at and past a tile's 16 (from the threshold, and from 1 with the threshold lowered),
 * rows not a multiple of a tile's 16 or of an invocation's 4, rows of few and of many blocks. */
static void test_products_tiled(void) {
    struct gpu *g = open_device(0);
    if (!g)
        return;
    struct gpu_ops o;
    char err[256] = "";
    CHECK_MSG(gpu_ops_init(&o, g, err, sizeof(err)) == 0, "%s", err);
    static const enum qtype tiled[] = {QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_Q8_0, QTYPE_Q5_K,
                                       QTYPE_Q3_K, QTYPE_Q2_K, QTYPE_IQ4_XS, QTYPE_MXFP4};
    static const struct { int64_t blocks; int32_t n_rows, n_tok, min_tok; } shapes[] = {
        {1, 37, 17, 0}, {7, 16, 16, 0}, {10, 70, 33, 0}, {3, 5, 1, 1}, {9, 23, 7, 1},
    };
    for (size_t i = 0; i < sizeof(tiled) / sizeof(tiled[0]); i++) {
        const enum qtype t = tiled[i];
        char name[64];
        snprintf(name, sizeof(name), "matmul_tile_%s_dot", qtype_name(t));
        const int dot = gpu_kernel(g, name);
        name[strlen(name) - 4] = '\0';
        const int plain = gpu_kernel(g, name), chosen = o.matmul_tile[t];
        CHECK_MSG(plain >= 0 && chosen == (dot >= 0 ? dot : plain),
                  "%s: the tiled kernel is not the one wanted", qtype_name(t));
        /* the integer dot product's kernel where there is one, then the plain one */
        const bool taken = o.tile_taken[t];
        o.tile_taken[t] = true; /* gpu_op_matmul takes the kernel under test from the threshold */
        for (int k = dot >= 0 ? 0 : 1; k < 2; k++) {
            o.matmul_tile[t] = k ? plain : dot;
            fprintf(stderr, " %s\n", k ? name : "with the integer dot product:");
            const int64_t qk = qtype_block_elems(t);
            for (size_t j = 0; j < sizeof(shapes) / sizeof(shapes[0]); j++) {
                const int32_t keep = o.tile_min_tok;
                o.tile_min_tok = shapes[j].min_tok ? shapes[j].min_tok : keep;
                const struct product_case c = {t, shapes[j].blocks * qk, shapes[j].n_rows,
                                               shapes[j].n_tok};
                check_product(g, &o, &c, 1.0f);
                o.tile_min_tok = keep;
            }
        }
        o.matmul_tile[t] = chosen;
        o.tile_taken[t] = taken;
    }
    gpu_ops_release(&o);
    gpu_close(g);
}

/* The float and Q8_0 products again with every buffer copied through the staging buffer. */
static void test_products_staged(void) {
    setenv("SNIPER_GPU_NO_MAP", "1", 1);
    check_products(13);
    unsetenv("SNIPER_GPU_NO_MAP");
}

/* ---- the row ops against ops.c and the blocks ------------------------------------------------- */

/* One row-op check's device, ops and buffers (freed by rowdev_close). */
struct rowdev {
    struct gpu *g;
    struct gpu_ops o;
    struct gpu_buf *buf[12];
    int n_buf;
};

/* Opens the first usable device with its ops; false after a skip or a failure. */
static bool rowdev_open(struct rowdev *d) {
    *d = (struct rowdev){0};
    d->g = open_device(0);
    if (!d->g)
        return false;
    char err[256] = "";
    if (gpu_ops_init(&d->o, d->g, err, sizeof(err)) == 0)
        return true;
    CHECK_MSG(false, "gpu_ops_init: %s", err);
    gpu_close(d->g);
    return false;
}

/* Frees the buffers of the check before. */
static void rowdev_free_bufs(struct rowdev *d) {
    for (int i = 0; i < d->n_buf; i++)
        gpu_buf_free(d->g, d->buf[i]);
    d->n_buf = 0;
}

static void rowdev_close(struct rowdev *d) {
    rowdev_free_bufs(d);
    gpu_ops_release(&d->o);
    gpu_close(d->g);
}

/* A device buffer of n bytes holding host's (zeroed where host is NULL): its address, 0 after a
 * failure. */
static uint64_t rowdev_put(struct rowdev *d, const void *host, size_t n) {
    char err[256] = "";
    struct gpu_buf *b = d->n_buf < 12 ? gpu_buf_new(d->g, n, err, sizeof(err)) : NULL;
    CHECK_MSG(b != NULL, "gpu_buf_new(%zu): %s", n, err);
    if (!b)
        return 0;
    d->buf[d->n_buf++] = b;
    if (host)
        CHECK_EQ_INT(gpu_buf_write(d->g, b, 0, host, n), 0);
    return gpu_buf_addr(b);
}

/* Reads n bytes at the start of the buffer at addr into host. */
static void rowdev_get(struct rowdev *d, uint64_t addr, void *host, size_t n) {
    for (int i = 0; i < d->n_buf; i++)
        if (gpu_buf_addr(d->buf[i]) == addr) {
            CHECK_EQ_INT(gpu_buf_read(d->g, d->buf[i], 0, host, n), 0);
            return;
        }
    CHECK_MSG(false, "no buffer at 0x%llx", (unsigned long long)addr);
}

/* Submits what was recorded since gpu_begin; false (with a failure) when it failed. */
static bool rowdev_submit(struct rowdev *d) {
    int rc = gpu_submit(d->g);
    CHECK_MSG(rc == 0, "gpu_submit: %d %s", rc, gpu_error(d->g));
    return rc == 0;
}

/* Runs check on a device of its own (nothing after a skip). */
static void with_rowdev(void (*check)(struct rowdev *d)) {
    struct rowdev d;
    if (!rowdev_open(&d))
        return;
    check(&d);
    rowdev_close(&d);
}

/* memcmp of n bytes, the first differing floats of a float array named (or bytes) reported. */
static bool same_bytes(const char *what, const void *want, const void *got, size_t n, bool floats) {
    if (memcmp(want, got, n) == 0)
        return true;
    int shown = 0;
    for (size_t i = 0; floats && i < n / 4 && shown < 3; i++)
        if (memcmp((const float *)want + i, (const float *)got + i, 4) != 0 && ++shown)
            test_fail(__FILE__, __LINE__, "%s: [%zu] %a on the GPU, %a on the CPU", what, i,
                      (double)((const float *)got)[i], (double)((const float *)want)[i]);
    for (size_t i = 0; !floats && i < n && shown < 3; i++)
        if (((const uint8_t *)want)[i] != ((const uint8_t *)got)[i] && ++shown)
            test_fail(__FILE__, __LINE__, "%s: byte %zu 0x%02x on the GPU, 0x%02x on the CPU", what,
                      i, ((const uint8_t *)got)[i], ((const uint8_t *)want)[i]);
    return false;
}

/* n random floats: fill_rows' spread of magnitudes times scale. malloc'd. */
static float *random_floats(size_t n, uint64_t seed, float scale) {
    float *x = malloc(n * sizeof(float));
    fill_rows(x, (int64_t)n, 1, seed);
    for (size_t i = 0; i < n; i++)
        x[i] *= scale;
    return x;
}

struct rms_case {
    int64_t n;
    int32_t rows;
    size_t x_stride, y_stride; /* y_stride 0: in place */
    bool weight;
    bool add;                  /* gpu_op_add_rms_norm: x = r + x first (y_stride must not be 0) */
    enum qtype quant;          /* not F32: gpu_op_rms_norm_quantize for a weight of this type, the
                                * first 256 elements of row 0 zero (an all-zero block) */
    int32_t moe_k;             /* with add: gpu_op_moe_add_rms_norm, what is added the weighted
                                * sum of moe_k experts' rows (moe_sum_ref) */
    bool shexp;                /* and a shared expert's */
};

/* block_moe.c's weighted sum of n_tok tokens' k expert rows dd (n floats apart) with weights w,
 * then (shexp) the shared expert's rows s gated by sigmoid(gate[t]), into y's rows (ys apart). */
static void moe_sum_ref(float *y, size_t ys, const float *dd, const float *w, const float *s,
                        const float *gate, int32_t k, int64_t n, int32_t n_tok, bool shexp) {
    for (int32_t t = 0; t < n_tok; t++) {
        float *yt = y + (size_t)t * ys;
        const float *wt = w + (size_t)t * k, *d0 = dd + (size_t)t * k * n;
        for (int64_t i = 0; i < n; i++)
            yt[i] = d0[i] * wt[0];
        for (int32_t e = 1; e < k; e++)
            for (int64_t i = 0; i < n; i++)
                yt[i] = yt[i] + d0[e * n + i] * wt[e];
        const float gt = 1.0f / (1.0f + ops_exp(-gate[t]));
        for (int64_t i = 0; shexp && i < n; i++)
            yt[i] = yt[i] + s[(size_t)t * n + i] * gt;
    }
}

/* The rows y (ys floats apart) quantized as the CPU's from_float for a weight of type t, rows
 * quant_act_row_stride apart (the pad zero), against what the GPU wrote at addr. */
static void check_quant_rows(struct rowdev *d, enum qtype t, const float *y, size_t ys, int64_t n,
                             int32_t rows, uint64_t addr, const char *what) {
    const size_t stride = quant_act_row_stride(t, n), bytes = stride * (size_t)rows;
    uint8_t *want = calloc(bytes, 1), *got = calloc(bytes, 1);
    for (int32_t r = 0; r < rows; r++)
        quant_kernels(t)->from_float(y + (size_t)r * ys, want + (size_t)r * stride, n);
    rowdev_get(d, addr, got, bytes);
    char name[96];
    snprintf(name, sizeof(name), "%s quantized for %s", what, qtype_name(t));
    same_bytes(name, want, got, bytes, false);
    free(want);
    free(got);
}

/* gpu_op_rms_norm (or its add, or its quantized rows) against ops_rms_norm row by row. */
static void check_rms_norm(struct rowdev *d, const struct rms_case *c) {
    const size_t nx = c->x_stride * (size_t)c->rows, ys = c->y_stride ? c->y_stride : c->x_stride;
    const size_t ny = ys * (size_t)c->rows;
    float *x = random_floats(nx, 30 + (uint64_t)c->n, 3.0f), *w = random_floats((size_t)c->n, 31, 1.0f);
    float *want = calloc(ny, sizeof(float)), *got = calloc(ny, sizeof(float));
    float *res = c->add ? random_floats(nx, 32 + (uint64_t)c->n, 2.0f) : NULL;
    const size_t nd = (size_t)c->rows * (size_t)(c->moe_k > 0 ? c->moe_k : 1) * (size_t)c->n;
    float *md = c->moe_k ? random_floats(nd, 33, 3.0f) : NULL;
    float *mw = c->moe_k ? random_floats((size_t)c->rows * c->moe_k, 34, 1.0f) : NULL;
    float *ms = c->moe_k ? random_floats((size_t)c->rows * c->n, 35, 3.0f) : NULL;
    float *mg = c->moe_k ? random_floats((size_t)c->rows, 36, 6.0f) : NULL;
    for (int64_t i = 0; c->quant && i < c->n && i < 256; i++) {
        x[i] = 0.0f;
        if (res)
            res[i] = 0.0f;
        for (int32_t e = 0; e < c->moe_k; e++) /* token 0's experts, and its shared one */
            md[e * c->n + i] = ms[i] = 0.0f;
    }
    if (c->moe_k) /* what is added: the weighted sum, the pad as it was */
        moe_sum_ref(res, c->x_stride, md, mw, ms, mg, c->moe_k, c->n, c->rows, c->shexp);
    float *sum = c->add ? malloc(nx * sizeof(float)) : NULL;
    if (!c->y_stride)
        memcpy(want, x, nx * sizeof(float));
    for (size_t i = 0; c->add && i < nx; i++) /* engine.c's engine_add_y; the pad kept */
        sum[i] = (int64_t)(i % c->x_stride) < c->n ? res[i] + x[i] : x[i];
    for (int32_t r = 0; r < c->rows; r++)
        ops_rms_norm(want + (size_t)r * ys, (c->add ? sum : x) + (size_t)r * c->x_stride,
                     c->weight ? w : NULL, c->n, 1e-6f);
    const uint64_t bx = rowdev_put(d, x, nx * sizeof(float));
    const uint64_t br = c->add && !c->moe_k ? rowdev_put(d, res, nx * sizeof(float)) : 0;
    const struct gpu_moe_rows m = {
        .d = c->moe_k ? rowdev_put(d, md, nd * sizeof(float)) : 0,
        .w = c->moe_k ? rowdev_put(d, mw, (size_t)c->rows * c->moe_k * sizeof(float)) : 0,
        .shexp = c->shexp ? rowdev_put(d, ms, (size_t)c->rows * c->n * sizeof(float)) : 0,
        .shexp_gate = c->shexp ? rowdev_put(d, mg, (size_t)c->rows * sizeof(float)) : 0,
        .k = c->moe_k};
    const uint64_t bw = c->weight ? rowdev_put(d, w, (size_t)c->n * sizeof(float)) : 0;
    const uint64_t by = c->y_stride ? rowdev_put(d, NULL, ny * sizeof(float)) : bx;
    size_t q_stride = 0;
    const struct gpu_quant_out q = {
        .wtype = c->quant, .stride = &q_stride,
        .dst = c->quant ? rowdev_put(d, NULL, quant_act_row_stride(c->quant, c->n) * (size_t)c->rows)
                        : 0};
    if (bx && by && gpu_begin(d->g) == 0) {
        if (c->moe_k)
            CHECK_EQ_INT(gpu_op_moe_add_rms_norm(&d->o, bx, c->x_stride, &m, bw, by, ys, c->n,
                                                 1e-6f, c->rows, c->quant ? &q : NULL), 0);
        else if (c->quant)
            CHECK_EQ_INT(gpu_op_rms_norm_quantize(&d->o, bx, c->x_stride, br, bw, by, ys, c->n,
                                                  1e-6f, c->rows, &q), 0);
        else if (c->add)
            CHECK_EQ_INT(gpu_op_add_rms_norm(&d->o, bx, c->x_stride, br, bw, by, ys, c->n, 1e-6f,
                                             c->rows), 0);
        else
            CHECK_EQ_INT(gpu_op_rms_norm(&d->o, bx, c->x_stride, bw, by, ys, c->n, 1e-6f, c->rows),
                         0);
        if (rowdev_submit(d)) {
            rowdev_get(d, by, got, ny * sizeof(float));
            char what[64];
            snprintf(what, sizeof(what), "%s n %lld x %d",
                     c->moe_k ? "moe_add_rms_norm" : c->add ? "add_rms_norm" : "rms_norm",
                     (long long)c->n, c->rows);
            same_bytes(what, want, got, ny * sizeof(float), true);
            if (c->quant) {
                CHECK_EQ_INT(q_stride, quant_act_row_stride(c->quant, c->n));
                check_quant_rows(d, c->quant, want, ys, c->n, c->rows, q.dst, what);
            }
            if (c->add) { /* and x holds the sums */
                float *xs = malloc(nx * sizeof(float));
                rowdev_get(d, bx, xs, nx * sizeof(float));
                same_bytes("add_rms_norm's x", sum, xs, nx * sizeof(float), true);
                free(xs);
            }
        }
    }
    free(res);
    free(md);
    free(mw);
    free(ms);
    free(mg);
    free(sum);
    free(x);
    free(w);
    free(want);
    free(got);
}

/* Rows of odd lengths, strides past the row, in place, without a weight, and more rows than a
 * dispatch's x takes. */
static void rows_rms_norm(struct rowdev *d) {
    static const struct rms_case cases[] = {
        {1, 1, 1, 1, true, false, QTYPE_F32, 0, false},
        {37, 5, 40, 45, true, false, QTYPE_F32, 0, false},
        {64, 3, 64, 0, true, false, QTYPE_F32, 0, false},
        {2061, 4, 2070, 0, false, false, QTYPE_F32, 0, false},
        {4096, 2, 4096, 4100, true, false, QTYPE_F32, 0, false},
        {3, 66000, 3, 0, true, false, QTYPE_F32, 0, false},
        /* past the kernel's shared row: the lanes read x */
        {5000, 3, 5003, 5000, true, false, QTYPE_F32, 0, false},
        /* with the add */
        {2048, 3, 2048, 2048, true, true, QTYPE_F32, 0, false},
        {5000, 2, 5001, 5000, true, true, QTYPE_F32, 0, false},
        /* quantized for the next product: Q8_K four blocks at a time (8, 3 and 16 blocks), Q8_0,
         * Q8_1, f16, bf16 */
        {2048, 3, 2048, 2048, true, true, QTYPE_Q4_K, 0, false},
        {768, 2, 770, 768, true, false, QTYPE_Q6_K, 0, false},
        {4096, 1, 4096, 4096, true, true, QTYPE_IQ4_XS, 0, false},
        {2880, 2, 2880, 2880, true, true, QTYPE_Q8_0, 0, false},
        {1024, 2, 1030, 1024, false, false, QTYPE_Q4_1, 0, false},
        {100, 3, 100, 100, true, false, QTYPE_F16, 0, false},
        {64, 2, 64, 64, true, true, QTYPE_BF16, 0, false},
        /* the experts' weighted sum added (a MoE layer's end): with and without a shared expert,
         * quantized or not, a row past the shared row */
        {2048, 3, 2048, 2048, true, true, QTYPE_Q4_K, 8, false},
        {96, 4, 100, 96, true, true, QTYPE_F32, 4, true},
        {5000, 2, 5001, 5000, false, true, QTYPE_F32, 1, true},
        {2880, 2, 2880, 2880, true, true, QTYPE_Q8_0, 4, false},
        /* k not a multiple of the experts the kernel loads together (rms_norm.comp's MOE_STEP) */
        {768, 2, 770, 768, true, true, QTYPE_Q6_K, 6, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_rms_norm(d, &cases[i]);
        rowdev_free_bufs(d);
    }
    rowdev_free_bufs(d);
}

static void test_rms_norm(void) {
    with_rowdev(rows_rms_norm);
}


/* gpu_op_rope (neox or normal pairs) against ops_rope_neox / ops_rope_norm: n_tok tokens of n_head
 * heads of head_dim, n_rot of them rotated (YaRN's table), rows padded past their heads. */
static void check_rope(struct rowdev *d, bool neox, int32_t n_head, int32_t head_dim, int32_t n_rot,
                       int32_t n_tok) {
    const size_t head_stride = (size_t)head_dim + 3, tok_stride = head_stride * (size_t)n_head + 5;
    const size_t nx = tok_stride * (size_t)n_tok;
    float *x = random_floats(nx, 40 + (uint64_t)n_rot, 2.0f), *want = malloc(nx * sizeof(float));
    float *got = malloc(nx * sizeof(float)), *cs = malloc((size_t)n_tok * n_rot * sizeof(float));
    const struct ops_rope r = ops_rope_init(n_rot, 1e6f, 0.25f, 1.0f, 1.0f, 4096, 32.0f, 1.0f);
    memcpy(want, x, nx * sizeof(float));
    for (int32_t t = 0; t < n_tok; t++) {
        ops_rope_cache(cs + (size_t)t * n_rot, 1000 * t + 7 * t * t, &r);
        for (int32_t h = 0; h < n_head; h++) {
            float *xh = want + t * tok_stride + h * head_stride;
            if (neox)
                ops_rope_neox(xh, cs + (size_t)t * n_rot, n_rot);
            else
                ops_rope_norm(xh, cs + (size_t)t * n_rot, n_rot);
        }
    }
    const uint64_t bx = rowdev_put(d, x, nx * sizeof(float));
    const uint64_t bcs = rowdev_put(d, cs, (size_t)n_tok * n_rot * sizeof(float));
    if (bx && bcs && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_rope(&d->o, neox, bx, tok_stride, head_stride, n_head, bcs, n_rot,
                                 n_tok), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, bx, got, nx * sizeof(float));
            same_bytes(neox ? "rope neox" : "rope norm", want, got, nx * sizeof(float), true);
        }
    }
    free(x);
    free(want);
    free(got);
    free(cs);
}

static void rows_rope(struct rowdev *d) {
    for (int neox = 0; neox < 2; neox++) {
        check_rope(d, neox, 3, 40, 32, 5); /* partial rotation */
        rowdev_free_bufs(d);
        check_rope(d, neox, 33, 128, 128, 3); /* more pairs a token than a workgroup */
        rowdev_free_bufs(d);
        check_rope(d, neox, 1, 6, 6, 1);
        rowdev_free_bufs(d);
    }
    rowdev_free_bufs(d);
}

static void test_rope(void) {
    with_rowdev(rows_rope);
}

/* gpu_op_add (a bias row, or row for row) and gpu_op_add_id (an expert's bias row per row) against
 * ops_add. */
static void check_add(struct rowdev *d, int64_t n, int32_t rows, size_t y_stride, int mode) {
    enum { ADD_BIAS, ADD_ROWS, ADD_ID };
    const int32_t n_b = 5; /* the bias rows of add_id */
    const size_t ny = y_stride * (size_t)rows, b_stride = mode == ADD_ROWS ? (size_t)n + 2 : 0;
    const size_t nb = mode == ADD_ROWS ? b_stride * (size_t)rows : (size_t)n * n_b;
    float *y = random_floats(ny, 50 + (uint64_t)mode, 1.0f), *b = random_floats(nb, 51, 3.0f);
    float *want = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    int32_t *ids = malloc((size_t)rows * sizeof(int32_t));
    memcpy(want, y, ny * sizeof(float));
    for (int32_t r = 0; r < rows; r++) {
        ids[r] = (r * 7 + 3) % n_b;
        const float *br = mode == ADD_ROWS ? b + r * b_stride
                        : mode == ADD_ID   ? b + (size_t)ids[r] * n : b;
        ops_add(want + r * y_stride, br, n);
    }
    const uint64_t by = rowdev_put(d, y, ny * sizeof(float)), bb = rowdev_put(d, b, nb * sizeof(float));
    const uint64_t bi = rowdev_put(d, ids, (size_t)rows * sizeof(int32_t));
    if (by && bb && bi && gpu_begin(d->g) == 0) {
        if (mode == ADD_ID)
            CHECK_EQ_INT(gpu_op_add_id(&d->o, by, y_stride, bb, bi, n, rows), 0);
        else
            CHECK_EQ_INT(gpu_op_add(&d->o, by, y_stride, bb, b_stride, n, rows), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, by, got, ny * sizeof(float));
            same_bytes(mode == ADD_ID ? "add_id" : "add", want, got, ny * sizeof(float), true);
        }
    }
    free(y);
    free(b);
    free(want);
    free(got);
    free(ids);
}

static void rows_add(struct rowdev *d) {
    for (int mode = 0; mode < 3; mode++) {
        check_add(d, 37, 4, 41, mode);
        rowdev_free_bufs(d);
        check_add(d, 2880, 9, 2880, mode);
        rowdev_free_bufs(d);
    }
    rowdev_free_bufs(d);
}

static void test_add(void) {
    with_rowdev(rows_add);
}

/* gpu_op_swiglu against ops_swiglu / ops_swiglu_oai, into a third buffer or in place over g; the
 * inputs reach past the clamps (7) and exp's limits. */
/* gpu_op_swiglu over n (or with quant not F32, gpu_op_swiglu_quantize over rows of `row`
 * elements, quantized for a weight of type quant) against ops_swiglu / ops_swiglu_oai. */
static void check_swiglu(struct rowdev *d, bool oai, int64_t n, bool in_place, enum qtype quant,
                         int64_t row) {
    float *g = random_floats((size_t)n, 60, 30.0f), *u = random_floats((size_t)n, 61, 12.0f);
    float *want = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
    g[0] = -120.0f; /* e^120 overflows: g / inf */
    g[n - 1] = 95.0f;
    if (oai)
        ops_swiglu_oai(want, g, u, n);
    else
        ops_swiglu(want, g, u, n);
    const int32_t rows = quant ? (int32_t)(n / row) : 0;
    const uint64_t bg = rowdev_put(d, g, (size_t)n * sizeof(float));
    const uint64_t bu = rowdev_put(d, u, (size_t)n * sizeof(float));
    const uint64_t by = in_place ? bg : rowdev_put(d, NULL, (size_t)n * sizeof(float));
    size_t q_stride = 0;
    const struct gpu_quant_out q = {
        .wtype = quant, .stride = &q_stride,
        .dst = quant ? rowdev_put(d, NULL, quant_act_row_stride(quant, row) * (size_t)rows) : 0};
    char what[64];
    snprintf(what, sizeof(what), "%s%s", oai ? "swiglu_oai" : "swiglu", quant ? " by rows" : "");
    if (bg && bu && by && gpu_begin(d->g) == 0) {
        if (quant)
            CHECK_EQ_INT(gpu_op_swiglu_quantize(&d->o, oai, by, bg, bu, (size_t)row, row, rows, &q),
                         0);
        else
            CHECK_EQ_INT(gpu_op_swiglu(&d->o, oai, by, bg, bu, n), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, by, got, (size_t)n * sizeof(float));
            same_bytes(what, want, got, (size_t)n * sizeof(float), true);
            if (quant)
                check_quant_rows(d, quant, want, (size_t)row, row, rows, q.dst, what);
        }
    }
    free(g);
    free(u);
    free(want);
    free(got);
}

static void rows_swiglu(struct rowdev *d) {
    for (int oai = 0; oai < 2; oai++) {
        check_swiglu(d, oai, 1, false, QTYPE_F32, 0);
        rowdev_free_bufs(d);
        check_swiglu(d, oai, 100003, oai, QTYPE_F32, 0);
        rowdev_free_bufs(d);
    }
    check_swiglu(d, false, (int64_t)65535 * 64 + 1000, false, QTYPE_F32, 0); /* past a dispatch's x */
    rowdev_free_bufs(d);
    /* by rows, quantized for the down product: the experts' widths of the bench presets */
    check_swiglu(d, false, 8 * 768, true, QTYPE_Q4_K, 768);
    rowdev_free_bufs(d);
    check_swiglu(d, true, 5 * 2880, false, QTYPE_MXFP4, 2880);
    rowdev_free_bufs(d);
    check_swiglu(d, false, 3 * 512, false, QTYPE_Q6_K, 512);
    rowdev_free_bufs(d);
    check_swiglu(d, false, 2 * 1024, true, QTYPE_Q5_1, 1024);
    rowdev_free_bufs(d);
    /* rows past what swiglu_quant.comp holds in registers (4096): the loop over memory */
    check_swiglu(d, false, 2 * 5120, false, QTYPE_Q4_K, 5120);
    rowdev_free_bufs(d);
}

static void test_swiglu(void) {
    with_rowdev(rows_swiglu);
}

/* gpu_op_sigmoid_mul against block_attn.c's gate: y * (1 / (1 + e^-g)). */
static void rows_sigmoid_mul(struct rowdev *d) {
    const int64_t n = 200;
    const int32_t rows = 6;
    const size_t ys = 203, gs = 2 * (size_t)n; /* the gate rows of a qg buffer */
    float *y = random_floats(ys * rows, 70, 4.0f), *g = random_floats(gs * rows, 71, 40.0f);
    float *want = malloc(ys * rows * sizeof(float)), *got = malloc(ys * rows * sizeof(float));
    memcpy(want, y, ys * rows * sizeof(float));
    for (int32_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            want[r * ys + i] = want[r * ys + i] * (1.0f / (1.0f + ops_exp(-g[r * gs + i])));
    const uint64_t by = rowdev_put(d, y, ys * rows * sizeof(float));
    const uint64_t bg = rowdev_put(d, g, gs * rows * sizeof(float));
    if (by && bg && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_sigmoid_mul(&d->o, by, ys, bg, gs, n, rows), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, by, got, ys * rows * sizeof(float));
            same_bytes("sigmoid_mul", want, got, ys * rows * sizeof(float), true);
        }
    }
    free(y);
    free(g);
    free(want);
    free(got);
    rowdev_free_bufs(d);
}

static void test_sigmoid_mul(void) {
    with_rowdev(rows_sigmoid_mul);
}

/* gpu_op_geglu against ops_geglu row by row, in place over g with u rows further apart (gemma4's
 * per-layer inputs), over (-14, 14) and the edges of gelu's ranges: -10 and 10 themselves, and
 * inputs just inside them that round to +-10 in f16 (the table's entries, not the edges' values). */
static void rows_geglu(struct rowdev *d) {
    const int64_t n = 300;
    const int32_t rows = 5;
    const size_t gs = 307, us = 1000;
    float *g = random_floats(gs * rows, 80, 14.0f), *u = random_floats(us * rows, 81, 3.0f);
    float *want = malloc(gs * rows * sizeof(float)), *got = malloc(gs * rows * sizeof(float));
    uint16_t *table = malloc(65536 * sizeof(*table));
    const float edges[] = {-10.0f, 10.0f, -9.999f, 9.999f, -10.001f, 10.001f, 0.0f, -0.0f};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        g[gs + i] = edges[i];
    memcpy(want, g, gs * rows * sizeof(float));
    for (int32_t r = 0; r < rows; r++)
        ops_geglu(want + r * gs, g + r * gs, u + r * us, n);
    ops_gelu_f16_table(table);
    const uint64_t bg = rowdev_put(d, g, gs * rows * sizeof(float));
    const uint64_t bu = rowdev_put(d, u, us * rows * sizeof(float));
    const uint64_t bt = rowdev_put(d, table, 65536 * sizeof(*table));
    if (bg && bu && bt && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_geglu(&d->o, bg, gs, bg, gs, bu, us, bt, n, rows), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, bg, got, gs * rows * sizeof(float));
            same_bytes("geglu", want, got, gs * rows * sizeof(float), true);
        }
    }
    free(g);
    free(u);
    free(want);
    free(got);
    free(table);
    rowdev_free_bufs(d);
}

static void test_geglu(void) {
    with_rowdev(rows_geglu);
}

/* gpu_op_scale (one factor, then a weight per element, or none) and gpu_op_scale_id (a factor per
 * row by id) against the CPU's products: gemma4's router input, its layer output scale and its
 * experts' output scales. */
static void rows_scale(struct rowdev *d) {
    const int64_t n = 260;
    const int32_t rows = 7;
    const size_t xs = 263, ys = 270;
    const float a = 1.0f / sqrtf(2816.0f);
    float *x = random_floats(xs * rows, 90, 50.0f), *w = random_floats((size_t)n, 91, 2.0f);
    float *s = random_floats(16, 92, 3.0f);
    float *want = calloc(ys * rows, sizeof(float)), *got = malloc(ys * rows * sizeof(float));
    float *want_id = malloc(xs * rows * sizeof(float));
    int32_t ids[7] = {3, 0, 15, 3, 9, 1, 12};
    memcpy(want_id, x, xs * rows * sizeof(float));
    for (int32_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            want[r * ys + i] = (x[r * xs + i] * a) * w[i];
            want_id[r * xs + i] = x[r * xs + i] * s[ids[r]];
        }
    const uint64_t bx = rowdev_put(d, x, xs * rows * sizeof(float));
    const uint64_t bw = rowdev_put(d, w, (size_t)n * sizeof(float));
    const uint64_t bs = rowdev_put(d, s, 16 * sizeof(float));
    const uint64_t bi = rowdev_put(d, ids, sizeof(ids));
    const uint64_t by = rowdev_put(d, NULL, ys * rows * sizeof(float));
    if (bx && bw && bs && bi && by && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_scale(&d->o, by, ys, bx, xs, a, bw, n, rows), 0);
        gpu_barrier(d->g);
        CHECK_EQ_INT(gpu_op_scale_id(&d->o, bx, xs, bs, bi, n, rows), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, by, got, ys * rows * sizeof(float));
            for (int32_t r = 0; r < rows; r++) /* the rows' pads are the buffer's zeros */
                memset(got + r * ys + n, 0, (ys - (size_t)n) * sizeof(float));
            same_bytes("scale", want, got, ys * rows * sizeof(float), true);
            float *got_id = malloc(xs * rows * sizeof(float));
            rowdev_get(d, bx, got_id, xs * rows * sizeof(float));
            same_bytes("scale_id", want_id, got_id, xs * rows * sizeof(float), true);
            free(got_id);
        }
    }
    if (gpu_begin(d->g) == 0) { /* no weight: x * a alone, in place */
        for (int32_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++)
                want_id[r * xs + i] = want_id[r * xs + i] * 0.5f;
        CHECK_EQ_INT(gpu_op_scale(&d->o, bx, xs, bx, xs, 0.5f, 0, n, rows), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, bx, got, xs * rows * sizeof(float));
            same_bytes("scale without a weight", want_id, got, xs * rows * sizeof(float), true);
        }
    }
    free(x);
    free(w);
    free(s);
    free(want);
    free(got);
    free(want_id);
    rowdev_free_bufs(d);
}

static void test_scale(void) {
    with_rowdev(rows_scale);
}

/* gpu_op_moe_sum against block_moe.c's weighted sum (and shared expert) over n_tok tokens of k
 * experts. */
static void check_moe_sum(struct rowdev *d, int32_t k, int64_t n, int32_t n_tok, bool shexp) {
    const size_t nd = (size_t)n_tok * k * n, ny = (size_t)n_tok * n;
    float *dd = random_floats(nd, 80, 5.0f), *w = random_floats((size_t)n_tok * k, 81, 1.0f);
    float *s = random_floats(ny, 82, 5.0f), *gate = random_floats((size_t)n_tok, 83, 8.0f);
    float *want = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    moe_sum_ref(want, (size_t)n, dd, w, s, gate, k, n, n_tok, shexp);
    const uint64_t bd = rowdev_put(d, dd, nd * sizeof(float));
    const uint64_t bw = rowdev_put(d, w, (size_t)n_tok * k * sizeof(float));
    const uint64_t bs = rowdev_put(d, s, ny * sizeof(float));
    const uint64_t bgate = rowdev_put(d, gate, (size_t)n_tok * sizeof(float));
    const uint64_t by = rowdev_put(d, NULL, ny * sizeof(float));
    if (bd && bw && bs && bgate && by && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_moe_sum(&d->o, by, bd, bw, k, n, shexp ? bs : 0, shexp ? bgate : 0,
                                    n_tok), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, by, got, ny * sizeof(float));
            same_bytes(shexp ? "moe_sum with the shared expert" : "moe_sum", want, got,
                       ny * sizeof(float), true);
        }
    }
    free(dd);
    free(w);
    free(s);
    free(gate);
    free(want);
    free(got);
}

static void rows_moe_sum(struct rowdev *d) {
    check_moe_sum(d, 1, 37, 2, false);
    rowdev_free_bufs(d);
    check_moe_sum(d, 8, 2050, 3, false);
    rowdev_free_bufs(d);
    check_moe_sum(d, 4, 130, 5, true);
    rowdev_free_bufs(d);
}

static void test_moe_sum(void) {
    with_rowdev(rows_moe_sum);
}

/* The routing's expected choice by its definition: the k largest of p, best first, ties to the
 * lower index (a selection by repeated scans, not the CPU's insertion nor the GPU's ranks). */
static void route_want_ids(const float *p, int32_t n, int32_t k, int32_t *sel) {
    for (int32_t s = 0; s < k; s++) {
        int32_t best = -1;
        for (int32_t j = 0; j < n; j++) {
            bool taken = false;
            for (int32_t q = 0; q < s; q++)
                taken |= sel[q] == j;
            if (!taken && (best < 0 || p[j] > p[best]))
                best = j;
        }
        sel[s] = best;
    }
}

/* gpu_op_route on n_tok rows of n logits (mode 0: random, 1: four values only, so ties abound,
 * 2: random with -inf entries, 3: a NaN in row 0: only checked to choose k distinct experts in
 * range) against route_want_ids and block_moe's weights (softmax_all: the softmax, then the
 * chosen probabilities over their double sum; else the softmax of the chosen logits). */
static void check_route(struct rowdev *d, int32_t n, int32_t k, bool softmax_all, int mode) {
    const int32_t n_tok = 3;
    const size_t nl = (size_t)n_tok * (size_t)n, P = (size_t)n_tok * (size_t)k;
    float *x = random_floats(nl, 90 + (uint64_t)mode, 4.0f);
    for (size_t i = 0; i < nl; i++) {
        if (mode == 1)
            x[i] = (float)((i * 2654435761u >> 7) % 4) - 1.5f;
        if (mode == 2 && i % 5 == 1)
            x[i] = -INFINITY;
    }
    if (mode == 3)
        x[3] = NAN;
    int32_t *ids = malloc(P * sizeof(int32_t)), *got_ids = malloc(P * 4 * sizeof(int32_t));
    float *w = malloc(P * sizeof(float)), *p = malloc((size_t)n * sizeof(float));
    for (int32_t t = 0; t < n_tok; t++) {
        memcpy(p, x + (size_t)t * n, (size_t)n * sizeof(float));
        if (softmax_all)
            ops_softmax(p, n);
        int32_t *sel = ids + (size_t)t * k;
        float *wt = w + (size_t)t * k;
        route_want_ids(p, n, k, sel);
        double sum = 0.0;
        for (int32_t s = 0; s < k; s++)
            sum += (double)(wt[s] = p[sel[s]]);
        if (!softmax_all) {
            ops_softmax(wt, k);
            continue;
        }
        const float fsum = (float)sum < 6.103515625e-5f ? 6.103515625e-5f : (float)sum;
        for (int32_t s = 0; s < k; s++)
            wt[s] = wt[s] / fsum;
    }
    const uint64_t bx = rowdev_put(d, x, nl * sizeof(float));
    const uint64_t bp = rowdev_put(d, NULL, P * 4 * sizeof(int32_t));
    char what[96];
    snprintf(what, sizeof(what), "route of %d experts, top %d, %s gating, mode %d", n, k,
             softmax_all ? "softmax" : "top-k softmax", mode);
    if (bx && bp && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_route(&d->o, bx, 0, softmax_all, n, k, bp, 0, n_tok), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, bp, got_ids, P * 4 * sizeof(int32_t));
            for (int32_t t = 0; mode == 3 && t < n_tok; t++)
                for (int32_t s = 0; s < k; s++) {
                    const int32_t e = got_ids[(size_t)t * k + (size_t)s];
                    bool again = false;
                    for (int32_t q = 0; q < s; q++)
                        again |= got_ids[(size_t)t * k + (size_t)q] == e;
                    CHECK_MSG(e >= 0 && e < n && !again, "%s: token %d slot %d chose %d", what,
                              t, s, e);
                }
            if (mode != 3) {
                same_bytes(what, ids, got_ids, P * sizeof(int32_t), false);
                same_bytes(what, w, got_ids + 3 * P, P * sizeof(float), true);
            }
            for (size_t i = 0; i < P; i++) /* the pairs: token t's slot s is output row t k + s */
                CHECK_MSG(got_ids[P + i] == (int32_t)(i / (size_t)k) &&
                              got_ids[2 * P + i] == (int32_t)i,
                          "%s: pair %zu reads token %d into row %d", what, i, got_ids[P + i],
                          got_ids[2 * P + i]);
        }
    }
    free(x);
    free(ids);
    free(got_ids);
    free(w);
    free(p);
}

static void rows_route(struct rowdev *d) {
    static const struct { int32_t n, k; } shapes[] = {{128, 8}, {256, 8}, {32, 4}, {1000, 32}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (int mode = 0; mode < 4; mode++)
            for (int softmax_all = 0; softmax_all < 2; softmax_all++) {
                check_route(d, shapes[i].n, shapes[i].k, softmax_all, mode);
                rowdev_free_bufs(d);
            }
}

static void test_route(void) {
    with_rowdev(rows_route);
}

/* Stores kv_dim floats of x as block_attn.c's kv_store does in a row of type t (the store's
 * reference, in check_kv_store and the attention prologue's cases). */
static void prep_store(enum qtype t, uint8_t *row, const float *x, int64_t kv_dim) {
    if (t == QTYPE_F32)
        memcpy(row, x, (size_t)kv_dim * sizeof(float));
    else if (t == QTYPE_F16)
        quant_f16_from_f32(x, row, kv_dim);
    else
        CHECK_EQ_INT(quant_quantize_row(t, x, row, kv_dim), 0);
}

/* gpu_op_kv_store against block_attn.c's kv_store: n_tok tokens' rows (src_stride past kv_dim)
 * into a ring of ring_rows rows (row_bytes past the row's bytes, the padding left alone) from
 * position pos0, so that they wrap; one token's first block all zero. */
static void check_kv_store(struct rowdev *d, enum qtype t, int64_t kv_dim, int32_t n_tok,
                           int32_t ring_rows, int32_t pos0) {
    uint64_t rb = 0;
    CHECK_EQ_INT(qtype_row_bytes(t, (uint64_t)kv_dim, &rb), 0);
    const size_t row_bytes = ((size_t)rb + 8) / 4 * 4, src_stride = (size_t)kv_dim + 11;
    const size_t ring_bytes = row_bytes * (size_t)ring_rows;
    float *src = malloc(src_stride * n_tok * sizeof(float));
    struct rng rg;
    rng_seed(&rg, 90 + (uint64_t)t);
    for (size_t i = 0; i < src_stride * n_tok; i++) /* every code of the block in use */
        src[i] = (float)rng_uniform(&rg) * 12.0f - 6.0f;
    uint8_t *want = malloc(ring_bytes), *got = malloc(ring_bytes);
    for (int64_t i = 0; i < 32 && i < kv_dim; i++)
        src[src_stride + (size_t)i] = 0.0f;
    for (size_t i = 0; i < ring_bytes; i++)
        want[i] = (uint8_t)(i * 13 + 5);
    const uint64_t bd = rowdev_put(d, want, ring_bytes);
    const uint64_t bs = rowdev_put(d, src, src_stride * n_tok * sizeof(float));
    for (int32_t i = 0; i < n_tok; i++) {
        uint8_t *row = want + (size_t)((pos0 + i) % ring_rows) * row_bytes;
        prep_store(t, row, src + (size_t)i * src_stride, kv_dim);
    }
    if (bd && bs && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_kv_store(&d->o, t, bs, src_stride, bd, row_bytes, ring_rows, pos0,
                                     kv_dim, n_tok), 0);
        if (rowdev_submit(d)) {
            rowdev_get(d, bd, got, ring_bytes);
            char what[64];
            snprintf(what, sizeof(what), "kv_store %s", qtype_name(t));
            same_bytes(what, want, got, ring_bytes, false);
        }
    }
    free(src);
    free(want);
    free(got);
}

static void rows_kv_store(struct rowdev *d) {
    static const enum qtype types[] = {QTYPE_F32, QTYPE_F16, QTYPE_Q8_0, QTYPE_Q4_0};
    for (size_t i = 0; i < 4; i++) {
        const bool blocks = types[i] == QTYPE_Q8_0 || types[i] == QTYPE_Q4_0;
        check_kv_store(d, types[i], blocks ? 160 : 37, 5, 7, 4); /* rows 4, 5, 6, 0, 1 */
        rowdev_free_bufs(d);
        check_kv_store(d, types[i], 2880, 3, 64, 61);
        rowdev_free_bufs(d);
    }
    rowdev_free_bufs(d);
}

static void test_kv_store(void) {
    with_rowdev(rows_kv_store);
}

/* One gpu_op_attn_prep check: the cache's type, the pairs, the weights, V's treatment, the heads'
 * shape, the segment's tokens and positions on a ring of ring_rows, and gated queries (rows 2
 * head_dim apart with a gate row between, which must stay as it was). */
struct prep_case {
    enum qtype t;
    bool neox, weights;
    enum gpu_v_norm vn;
    int32_t n_head, n_head_kv, hd, n_rot, n_tok, ring_rows, pos0;
    bool gated;
};

/* block_attn.c's qk_rope_store on the host for c: q turned in place, the ring's rows stored. */
static void prep_reference(const struct prep_case *c, float *q, size_t qs, size_t qh, float *k,
                           float *v, const float *qw, const float *kw, const float *cs,
                           uint8_t *ring, size_t row_bytes) {
    const int32_t hd = c->hd;
    const size_t kvd = (size_t)c->n_head_kv * hd;
    for (int32_t t = 0; t < c->n_tok; t++) {
        const float *ct = cs + (size_t)t * c->n_rot;
        for (int32_t h = 0; h < c->n_head + c->n_head_kv; h++) {
            const bool is_q = h < c->n_head;
            float *x = is_q ? q + t * qs + h * qh : k + t * kvd + (size_t)(h - c->n_head) * hd;
            float *vh = v + t * kvd + (size_t)(h - c->n_head) * hd;
            if (!is_q && c->vn == GPU_V_FROM_K)
                memcpy(vh, x, (size_t)hd * sizeof(float));
            if (c->weights)
                ops_rms_norm(x, x, is_q ? qw : kw, hd, 1e-6f);
            if (!is_q && c->vn != GPU_V_AS_IS)
                ops_rms_norm(vh, vh, NULL, hd, 1e-6f);
            if (c->neox)
                ops_rope_neox(x, ct, c->n_rot);
            else
                ops_rope_norm(x, ct, c->n_rot);
        }
        uint8_t *row = ring + (size_t)((c->pos0 + t) % c->ring_rows) * row_bytes;
        if (c->n_head_kv == 0)
            continue;
        prep_store(c->t, row, k + t * kvd, (int64_t)kvd);
        prep_store(c->t, row + (size_t)c->ring_rows * row_bytes, v + t * kvd, (int64_t)kvd);
    }
}

/* gpu_op_attn_prep against the CPU's norms, RoPE and KV store (prep_reference): the queries and
 * the whole cache (the rows the segment does not write included) byte for byte. */
static void check_attn_prep(struct rowdev *d, const struct prep_case *c) {
    const int32_t hd = c->hd;
    const size_t qh = (c->gated ? 2 : 1) * (size_t)hd, qs = qh * (size_t)c->n_head + 3;
    const size_t kvd = (size_t)c->n_head_kv * hd, kvs = kvd > 0 ? kvd : 1;
    const size_t nq = qs * (size_t)c->n_tok, nkv = kvs * (size_t)c->n_tok;
    uint64_t rb = 0;
    CHECK_EQ_INT(qtype_row_bytes(c->t, kvd ? kvd : 32, &rb), 0);
    const size_t row_bytes = ((size_t)rb + 8) / 4 * 4, ring = row_bytes * (size_t)c->ring_rows * 2;
    float *q = random_floats(nq, 60 + (uint64_t)hd, 3.0f), *k = random_floats(nkv, 61, 2.0f);
    float *v = random_floats(nkv, 62, 4.0f), *qw = random_floats((size_t)hd, 63, 1.0f);
    float *kw = random_floats((size_t)hd, 64, 1.0f), *got = malloc(nq * sizeof(float));
    float *cs = malloc((size_t)c->n_tok * c->n_rot * sizeof(float) + 4);
    uint8_t *want = malloc(ring), *gring = malloc(ring);
    const struct ops_rope r = ops_rope_init(c->n_rot, 1e6f, 0.25f, 1.0f, 1.0f, 4096, 32.0f, 1.0f);
    for (int32_t t = 0; t < c->n_tok; t++)
        ops_rope_cache(cs + (size_t)t * c->n_rot, c->pos0 + t, &r);
    for (size_t i = 0; i < ring; i++)
        want[i] = (uint8_t)(i * 29 + 3);
    const uint64_t bq = rowdev_put(d, q, nq * sizeof(float));
    const uint64_t bk = rowdev_put(d, k, nkv * sizeof(float));
    const uint64_t bv = rowdev_put(d, v, nkv * sizeof(float));
    const uint64_t bqw = rowdev_put(d, qw, (size_t)hd * sizeof(float));
    const uint64_t bkw = rowdev_put(d, kw, (size_t)hd * sizeof(float));
    const uint64_t bcs = rowdev_put(d, cs, (size_t)c->n_tok * c->n_rot * sizeof(float) + 4);
    const uint64_t bring = rowdev_put(d, want, ring);
    prep_reference(c, q, qs, qh, k, v, qw, kw, cs, want, row_bytes);
    const struct gpu_attn_prep a = {
        .kv_type = c->t, .neox = c->neox, .q = bq, .q_tok_stride = qs, .q_head_stride = qh,
        .k = bk, .v = bv, .kv_stride = kvs, .q_norm = c->weights ? bqw : 0,
        .k_norm = c->weights ? bkw : 0, .v_norm = c->vn, .cs = bcs, .n_rot = c->n_rot,
        .k_rows = bring, .v_rows = bring + (uint64_t)c->ring_rows * row_bytes,
        .row_bytes = row_bytes, .ring_rows = c->ring_rows, .pos0 = c->pos0,
        .n_head = c->n_head, .n_head_kv = c->n_head_kv, .head_dim = hd, .n_tok = c->n_tok,
        .eps = 1e-6f};
    if (bq && bk && bv && bqw && bkw && bcs && bring && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_attn_prep(&d->o, &a), 0);
        if (rowdev_submit(d)) {
            char what[96];
            snprintf(what, sizeof(what), "attn_prep %s neox %d weights %d v %d hd %d: queries",
                     qtype_name(c->t), c->neox, c->weights, (int)c->vn, hd);
            rowdev_get(d, bq, got, nq * sizeof(float));
            same_bytes(what, q, got, nq * sizeof(float), true);
            snprintf(what, sizeof(what), "attn_prep %s neox %d weights %d v %d hd %d: K and V rows",
                     qtype_name(c->t), c->neox, c->weights, (int)c->vn, hd);
            rowdev_get(d, bring, gring, ring);
            same_bytes(what, want, gring, ring, false);
        }
    }
    free(q);
    free(k);
    free(v);
    free(qw);
    free(kw);
    free(got);
    free(cs);
    free(want);
    free(gring);
}

static void rows_attn_prep(struct rowdev *d) {
    static const enum qtype types[] = {QTYPE_F32, QTYPE_F16, QTYPE_Q8_0, QTYPE_Q4_0};
    for (size_t i = 0; i < 4; i++)
        for (int neox = 0; neox < 2; neox++)
            for (int wts = 0; wts < 2; wts++) {
                const enum gpu_v_norm vn = (enum gpu_v_norm)((i + (size_t)wts) % 3);
                /* qwen3's shape, partial rotation, three tokens wrapping a ring of 5 rows */
                const struct prep_case a = {types[i], neox, wts, vn, 4, 2, 64, 48, 3, 5, 3, false};
                check_attn_prep(d, &a);
                rowdev_free_bufs(d);
                /* gated queries, one decode token far into a full context */
                const struct prep_case b = {types[i], neox, wts, (enum gpu_v_norm)((i + 1) % 3),
                                            3, 1, 128, 128, 1, 64, 1000, true};
                check_attn_prep(d, &b);
                rowdev_free_bufs(d);
            }
    /* gemma4's global heads (512: the shared memory's whole row), V from K; queries only */
    const struct prep_case g = {QTYPE_Q8_0, true, true, GPU_V_FROM_K, 2, 1, 512, 128, 2, 9, 7,
                                false};
    check_attn_prep(d, &g);
    rowdev_free_bufs(d);
    const struct prep_case qo = {QTYPE_F16, false, true, GPU_V_AS_IS, 5, 0, 96, 64, 4, 8, 2, false};
    check_attn_prep(d, &qo);
    rowdev_free_bufs(d);
    /* the refusals: a head past the shared row, blocks across heads, an odd rotation */
    struct gpu_attn_prep bad = {.kv_type = QTYPE_Q8_0, .n_head = 1, .n_head_kv = 1, .head_dim = 48,
                                .n_rot = 48, .n_tok = 1, .ring_rows = 1, .row_bytes = 64,
                                .q_tok_stride = 48, .q_head_stride = 48, .kv_stride = 48};
    CHECK_EQ_INT(gpu_op_attn_prep(&d->o, &bad), -EINVAL);
    CHECK(!gpu_attn_prep_takes(QTYPE_F32, 520) && gpu_attn_prep_takes(QTYPE_F16, 40));
    bad.kv_type = QTYPE_F32, bad.n_rot = 47, bad.row_bytes = 192;
    CHECK_EQ_INT(gpu_op_attn_prep(&d->o, &bad), -EINVAL);
}

static void test_attn_prep(void) {
    with_rowdev(rows_attn_prep);
}

/* gpu_op_matmul_id against quant.h's kernels: n_pairs pairs of n_exp matrices, activation rows
 * picked by act_idx and outputs placed by out_idx (or both identity), out rows padded. */
/* How check_matmul_id's pairs choose their experts (of 5). */
enum pair_spread {
    PAIRS_SPREAD,  /* (3p + 1) % 5: every expert, neighbours apart */
    PAIRS_UNEVEN,  /* most on expert 1, a few on 2 and 4, none on 0 and 3 */
    PAIRS_ONE,     /* all on expert 3 */
};

static int32_t pair_expert(enum pair_spread spread, int32_t p) {
    switch (spread) {
    case PAIRS_UNEVEN: return p % 7 < 5 ? 1 : p % 7 == 5 ? 2 : 4;
    case PAIRS_ONE: return 3;
    default: return (p * 3 + 1) % 5;
    }
}

/* gpu_op_group_pairs' table for n_pairs pairs of experts ids (of n_exp), read back: every pair
 * listed once, each tile's pairs of one expert, 1 to 16 of them, and as many tiles as the experts'
 * counts need. */
static void check_groups(struct rowdev *d, uint64_t table, size_t bytes, const int32_t *ids,
                         int32_t n_pairs, int32_t n_exp) {
    uint32_t *tb = calloc(bytes, 1);
    int32_t *seen = calloc((size_t)n_pairs, sizeof(int32_t)), count[8] = {0};
    rowdev_get(d, table, tb, bytes);
    int32_t need = 0;
    for (int32_t p = 0; p < n_pairs; p++)
        count[ids[p]]++;
    for (int32_t e = 0; e < n_exp; e++)
        need += (count[e] + 15) / 16;
    CHECK_EQ_INT(tb[0], need);
    const uint32_t *order = tb + tb[1] / 4;
    for (uint32_t y = 0; y < tb[0] && y < (uint32_t)need; y++) {
        const uint32_t first = tb[4 + 2 * y], n = tb[5 + 2 * y];
        CHECK_MSG(n >= 1 && n <= 16 && first + n <= (uint32_t)n_pairs, "tile %u: %u at %u", y, n,
                  first);
        const bool fits = n <= 16 && first + n <= (uint32_t)n_pairs;
        const int32_t e0 = fits && order[first] < (uint32_t)n_pairs ? ids[order[first]] : -1;
        for (uint32_t s = 0; fits && s < n; s++) {
            const uint32_t pr = order[first + s];
            CHECK_MSG(pr < (uint32_t)n_pairs && ids[pr] == e0, "tile %u: pair %u of another expert",
                      y, pr);
            if (pr < (uint32_t)n_pairs)
                seen[pr]++;
        }
    }
    for (int32_t p = 0; p < n_pairs; p++)
        CHECK_MSG(seen[p] == 1, "pair %d listed %d times", p, seen[p]);
    free(tb);
    free(seen);
}

/* Pairs of 5 experts (spread) against the CPU, through index arrays (identity: none), per pair
 * (gpu_op_matmul_id) or grouped by expert (gpu_op_group_pairs, gpu_op_matmul_grouped). */
static void check_matmul_id(struct rowdev *d, enum qtype t, int64_t n_in, int32_t n_rows,
                            int32_t n_pairs, bool identity, enum pair_spread spread,
                            bool grouped) {
    const int32_t n_exp = 5, n_act = identity ? n_pairs : 3;
    const struct quant_kernels *k = quant_kernels(t);
    uint64_t rb = 0;
    CHECK_EQ_INT(qtype_row_bytes(t, (uint64_t)n_in, &rb), 0);
    const size_t row_bytes = (size_t)rb, mat_bytes = row_bytes * n_rows + 64;
    const size_t act_stride = quant_act_row_stride(t, n_in), out_stride = (size_t)n_rows + 3;
    float *wf = random_floats((size_t)n_in * n_rows * n_exp, 100 + (uint64_t)t, 1.0f);
    float *x = random_floats((size_t)n_in * n_act, 101, 1.0f);
    uint8_t *w = calloc((size_t)n_exp, mat_bytes), *act = calloc((size_t)n_act, act_stride);
    const size_t n_out = out_stride * n_pairs;
    float *want = calloc(n_out, sizeof(float)), *got = calloc(n_out, sizeof(float));
    int32_t *ids = malloc((size_t)n_pairs * 3 * sizeof(int32_t));
    int32_t *aidx = ids + n_pairs, *oidx = ids + 2 * n_pairs;
    for (int32_t e = 0; e < n_exp; e++)
        for (int32_t r = 0; r < n_rows; r++)
            CHECK_EQ_INT(quant_quantize_row(t, wf + ((size_t)e * n_rows + r) * n_in,
                                            w + e * mat_bytes + r * row_bytes, n_in), 0);
    for (int32_t a = 0; a < n_act; a++)
        k->from_float(x + (size_t)a * n_in, act + a * act_stride, n_in);
    /* through index arrays, the experts' biases too (gpu_op_matmul_grouped_bias): added to the
     * product's result, as block_moe adds them */
    float *bias = identity ? NULL : random_floats((size_t)n_exp * n_rows, 102, 3.0f);
    for (int32_t p = 0; p < n_pairs; p++) {
        ids[p] = pair_expert(spread, p);
        aidx[p] = identity ? p : p % n_act;
        oidx[p] = identity ? p : (p * 5 + 2) % n_pairs; /* a permutation: n_pairs prime to 5 */
        for (int32_t r = 0; r < n_rows; r++) {
            float *y = &want[(size_t)oidx[p] * out_stride + r];
            k->vec_dot(n_in, y, w + ids[p] * mat_bytes + r * row_bytes, act + aidx[p] * act_stride);
            if (bias)
                *y = *y + bias[(size_t)ids[p] * n_rows + r];
        }
    }
    const uint64_t bw = rowdev_put(d, w, mat_bytes * n_exp);
    const uint64_t ba = rowdev_put(d, act, act_stride * n_act);
    const uint64_t bi = rowdev_put(d, ids, (size_t)n_pairs * 3 * sizeof(int32_t));
    const uint64_t bo = rowdev_put(d, NULL, n_out * sizeof(float));
    const uint64_t bb = bias ? rowdev_put(d, bias, (size_t)n_exp * n_rows * sizeof(float)) : 0;
    const size_t table_bytes = gpu_pair_groups_bytes(n_pairs, n_exp);
    const uint64_t bt = grouped ? rowdev_put(d, NULL, table_bytes) : 1;
    struct gpu_pair_groups grp = {0};
    if (bw && ba && bi && bo && bt && (bb || !bias) && gpu_begin(d->g) == 0) {
        const uint64_t ba_idx = identity ? 0 : bi + (size_t)n_pairs * 4;
        const uint64_t bo_idx = identity ? 0 : bi + (size_t)n_pairs * 8;
        const bool taken = d->o.tile_taken[t];
        d->o.tile_taken[t] = grouped; /* the tiles whether or not the type takes them by default */
        if (grouped) {
            CHECK_EQ_INT(gpu_op_group_pairs(&d->o, bi, n_exp, n_pairs, bt, &grp), 0);
            CHECK(n_pairs < d->o.tile_min_tok || grp.addr == bt);
            gpu_barrier(d->g);
        }
        CHECK_EQ_INT(gpu_op_matmul_grouped_bias(&d->o, t, bw, mat_bytes, row_bytes, n_in, n_rows,
                                                bi, ba, act_stride, ba_idx, bo, out_stride, bo_idx,
                                                n_pairs, grouped ? &grp : NULL, bb), 0);
        d->o.tile_taken[t] = taken;
        if (rowdev_submit(d)) {
            if (grp.addr)
                check_groups(d, bt, table_bytes, ids, n_pairs, n_exp);
            rowdev_get(d, bo, got, n_out * sizeof(float));
            char what[64];
            snprintf(what, sizeof(what), "matmul_id %s %lld x %d, %d pairs%s%s", qtype_name(t),
                     (long long)n_in, n_rows, n_pairs, grp.addr ? " in tiles" : "",
                     bias ? " with biases" : "");
            same_bytes(what, want, got, n_out * sizeof(float), true);
        }
    }
    free(wf);
    free(x);
    free(w);
    free(act);
    free(want);
    free(got);
    free(ids);
    free(bias);
}

/* Both drivers (float and blocks), 256-element types (q4_K, q5_K, q6_K: quant.h's lane
 * contract), and pairs in groups of 8, 4, 2 and 1. */
static void rows_matmul_id(struct rowdev *d) {
    static const struct product_case cases[] = {
        {QTYPE_F32, 1000, 33, 7}, {QTYPE_F16, 96, 3, 2},   {QTYPE_Q8_0, 224, 40, 11},
        {QTYPE_Q8_0, 4160, 5, 3}, {QTYPE_MXFP4, 2880, 9, 8}, {QTYPE_Q4_K, 1792, 17, 13},
        {QTYPE_Q5_K, 2560, 9, 6}, {QTYPE_Q6_K, 1792, 9, 6},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (int identity = 0; identity < 2; identity++) {
            check_matmul_id(d, cases[i].type, cases[i].n_in, cases[i].n_rows, cases[i].n_tok,
                            identity, PAIRS_SPREAD, false);
            rowdev_free_bufs(d);
        }
    rowdev_free_bufs(d);
}

static void test_matmul_id(void) {
    with_rowdev(rows_matmul_id);
}

/* The experts' pairs grouped by expert on the tiled driver: uneven counts (an expert of several
 * tiles, two of none), all pairs on one expert, every expert, through index arrays or not; and
 * fewer pairs than the threshold (nothing grouped: the per-pair drivers). */
static void rows_matmul_grouped(struct rowdev *d) {
    static const struct { struct product_case c; enum pair_spread spread; } cases[] = {
        {{QTYPE_Q4_K, 1792, 17, 47}, PAIRS_UNEVEN}, {{QTYPE_Q8_0, 224, 40, 37}, PAIRS_ONE},
        {{QTYPE_Q6_K, 512, 21, 53}, PAIRS_SPREAD},  {{QTYPE_MXFP4, 2880, 9, 23}, PAIRS_UNEVEN},
        {{QTYPE_Q5_K, 256, 6, 33}, PAIRS_ONE},      {{QTYPE_Q4_K, 512, 9, 11}, PAIRS_UNEVEN},
        {{QTYPE_Q5_K, 2560, 7, 35}, PAIRS_UNEVEN}, {{QTYPE_Q6_K, 2560, 7, 35}, PAIRS_UNEVEN},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (int identity = 0; identity < 2; identity++) {
            check_matmul_id(d, cases[i].c.type, cases[i].c.n_in, cases[i].c.n_rows,
                            cases[i].c.n_tok, identity, cases[i].spread, true);
            rowdev_free_bufs(d);
        }
    struct gpu_pair_groups grp;
    CHECK_EQ_INT(gpu_op_group_pairs(&d->o, 0, 1025, 64, 0, &grp), -EINVAL);
    CHECK_EQ_INT(gpu_op_group_pairs(&d->o, 0, 8, 64, 4, &grp), -EINVAL);
}

static void test_matmul_grouped(void) {
    with_rowdev(rows_matmul_grouped);
}

/* Shapes the row ops cannot take are refused before anything is recorded; a released o has no
 * kernels. */
static void test_rowops_errors(void) {
    struct rowdev d;
    if (!rowdev_open(&d))
        return;
    struct gpu_ops *o = &d.o;
    const uint64_t a = rowdev_put(&d, NULL, (size_t)1 << 16); /* room for a wrong acceptance */
    CHECK_EQ_INT(gpu_begin(d.g), 0);
    CHECK_EQ_INT(gpu_op_kv_store(o, QTYPE_Q4_1, a, 64, a, 64, 4, 0, 64, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_kv_store(o, QTYPE_Q8_0, a, 64, a, 64, 4, 0, 40, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_kv_store(o, QTYPE_Q8_0, a, 64, a, 67, 4, 0, 64, 1), -EINVAL); /* < 68 */
    CHECK_EQ_INT(gpu_op_kv_store(o, QTYPE_F32, a, 64, a, 64, 0, 0, 16, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_kv_store(o, QTYPE_F16, a, 64, a + 1, 64, 4, 0, 16, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_rope(o, true, a, 64, 64, 2, a, 31, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_rms_norm(o, a, 64, 0, a, 64, 0, 1e-6f, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_rms_norm(o, a, (size_t)1 << 33, 0, a, 64, 64, 1e-6f, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_moe_sum(o, a, a, a, 0, 64, 0, 0, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_moe_sum(o, a, a, a, 2, 64, a, 0, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_add_id(o, a, 64, a, 0, 64, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_swiglu(o, false, a, a, a, -1), -EINVAL);
    CHECK_EQ_INT(gpu_op_geglu(o, a, 64, a, 64, a, 64, 0, 64, 1), -EINVAL); /* no table */
    CHECK_EQ_INT(gpu_op_scale_id(o, a, 64, a, 0, 64, 1), -EINVAL);
    CHECK_EQ_INT(gpu_op_add(o, a, 64, a, 0, (int64_t)65536 * 64, 1), -EINVAL); /* x too wide */
    CHECK_EQ_INT(gpu_op_matmul_id(o, QTYPE_Q8_0, a, 0, 34, 0, 1, a, a, 34, 0, a, 1, 0, 1),
                 -EINVAL);
    CHECK_EQ_INT(gpu_submit(d.g), 0);
    gpu_ops_release(o);
    CHECK_EQ_INT(gpu_op_rms_norm(o, a, 64, 0, a, 64, 64, 1e-6f, 1), -ENOTSUP);
    CHECK_EQ_INT(gpu_op_kv_store(o, QTYPE_F32, a, 64, a, 256, 4, 0, 64, 1), -ENOTSUP);
    CHECK_EQ_INT(gpu_op_matmul_id(o, QTYPE_Q8_0, a, 0, 34, 32, 1, a, a, 34, 0, a, 1, 0, 1),
                 -ENOTSUP);
    rowdev_close(&d);
}

/* Every row op but the big SwiGLU again with each buffer copied through the staging buffer, as on
 * discrete cards. */
static void rows_staged(struct rowdev *d) {
    rows_rms_norm(d);
    rows_rope(d);
    rows_add(d);
    rows_sigmoid_mul(d);
    rows_moe_sum(d);
    rows_kv_store(d);
    rows_matmul_id(d);
}

static void test_rowops_staged(void) {
    setenv("SNIPER_GPU_NO_MAP", "1", 1);
    with_rowdev(rows_staged);
    unsetenv("SNIPER_GPU_NO_MAP");
}

/* ---- attention against block_attn.c's ------------------------------------------------------- */

struct attn_case {
    enum qtype kv_type;
    int32_t head_dim, n_head_kv, gqa; /* n_head = n_head_kv gqa */
    int32_t pos0, n_tok, window, ring_rows;
    bool sinks, gated;                /* gated: query heads 2 head_dim apart (qwen35's layout) */
    bool wide;                        /* rows twice the heads' bytes (a narrower layer's heads in
                                       * rows of a wider one's: gemma4) */
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
            uint64_t head_bytes = 0; /* the heads packed from the row's start */
            CHECK_EQ_INT(qtype_row_bytes(c->kv_type, (uint64_t)hd, &head_bytes), 0);
            const size_t head_off = (size_t)g * (size_t)head_bytes;
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
    const size_t row_bytes = (size_t)rb * (c->wide ? 2 : 1);
    const size_t cache_bytes = row_bytes * (size_t)c->ring_rows;
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
    fprintf(stderr, "  %-4s hd %3d heads %2d/%d pos %4d+%-2d window %2d ring %4d%s%s%s: %s\n",
            qtype_name(c->kv_type), hd, n_head, c->n_head_kv, c->pos0, c->n_tok, c->window,
            c->ring_rows, c->sinks ? " sinks" : "", c->gated ? " gated" : "",
            c->wide ? " wide rows" : "",
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
    a.head_dim = 576, a.row_bytes = 2 * 576 * 2;
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
    a = ok, a.row_bytes = 2 * 64 * 2 + 4; /* rows 260 bytes apart: F16 reads 8 */
    CHECK_EQ_INT(gpu_op_attn(o, &a), -EINVAL);
    a = ok, a.kv_type = QTYPE_Q4_1;
    CHECK_EQ_INT(gpu_op_attn(o, &a), -ENOTSUP);
}

/* Every KV type: head_dim 64, 128 and 512 (and 80, a tail for the float types), GQA 1 and 4, decode
 * and prefill segments from pos0 > 0, windows over rings (ring_rows = window) and the whole
 * context, sinks on and off, query heads packed or 2 head_dim apart, rows as wide as the heads or
 * twice (gemma4's narrower layers). */
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
            {t, 64, 2, 1, 100, 1, 0, 101, false, false, false},
            {t, 128, 2, 4, 77, 1, 32, 32, true, false, false},
            {t, 64, 1, 4, 40, 7, 16, 16, true, true, false},
            {t, 128, 2, 1, 120, 40, 0, 163, false, false, false},
            {t, 128, 1, 4, 1000, 9, 50, 50, true, false, false},
            {t, 64, 2, 4, 600, 1, 0, 601, true, true, false},
            {t, 64, 2, 4, 40, 7, 16, 16, false, false, true},
            {t, 128, 1, 2, 30, 3, 0, 33, true, false, true},
            {t, 512, 2, 2, 20, 5, 0, 25, true, false, false}, /* gemma4's global heads */
        };
        for (size_t j = 0; j < sizeof(cases) / sizeof(cases[0]); j++)
            check_attn(g, &o, &cases[j]);
        if (t == QTYPE_F32 || t == QTYPE_F16) {
            const struct attn_case tail = {t, 80, 2, 2, 20, 5, 0, 25, true, false, false};
            check_attn(g, &o, &tail);
        }
    }
    check_attn_refusals(&o);
    gpu_ops_release(&o);
    gpu_close(g);
}

/* The Q8_K quantizer where the largest magnitude comes twice with opposite signs (the first
 * decides the sign of every code) and in an all-zero block, against matmul_quantize's bytes. */
static void rows_quantize_ties(struct rowdev *d) {
    const int64_t n = 1024;
    const int32_t rows = 3;
    float *x = random_floats((size_t)n * rows, 77, 0.5f);
    for (int32_t r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * n;
        xr[10 + r] = 7.0f, xr[200 - r] = -7.0f;            /* block 0: + first */
        xr[256 + 5] = -3.0f, xr[256 + 100 + r] = 3.0f;     /* block 1: - first */
        xr[512 + 31] = 2.0f, xr[512 + 32] = -2.0f, xr[512 + 255] = 2.0f; /* block 2 */
        memset(xr + 768, 0, 256 * sizeof(float));          /* block 3: all zero */
    }
    size_t stride = 0;
    uint8_t *want = calloc((size_t)rows, quant_act_row_stride(QTYPE_Q4_K, n));
    uint8_t *got = calloc((size_t)rows, quant_act_row_stride(QTYPE_Q4_K, n));
    CHECK_EQ_INT(matmul_quantize(QTYPE_Q4_K, x, (size_t)n, rows, n, want, &stride), 0);
    const size_t bytes = stride * (size_t)rows;
    const uint64_t bx = rowdev_put(d, x, (size_t)n * rows * sizeof(float));
    const uint64_t bq = rowdev_put(d, NULL, bytes);
    size_t gs = 0;
    if (bx && bq && gpu_begin(d->g) == 0) {
        CHECK_EQ_INT(gpu_op_quantize(&d->o, QTYPE_Q4_K, bx, (size_t)n, bq, &gs, n, rows), 0);
        CHECK_EQ_INT(gs, stride);
        if (rowdev_submit(d)) {
            rowdev_get(d, bq, got, bytes);
            same_bytes("q8_K with tied maxima", want, got, bytes, false);
        }
    }
    free(x);
    free(want);
    free(got);
}

static void test_quantize_ties(void) {
    with_rowdev(rows_quantize_ties);
}

static const struct test_case cases[] = {
    {"choose", test_choose},
    {"no_loader", test_no_loader},
    {"buffers", test_buffers},
    {"device_lost", test_device_lost},
    {"contract", test_contract},
    {"deltanet", test_deltanet},
    {"products", test_products},
    {"products_tiled", test_products_tiled},
    {"products_staged", test_products_staged},
    {"products_align", test_products_align},
    {"ops_budget", test_ops_budget},
    {"quantize_ties", test_quantize_ties},
    {"rms_norm", test_rms_norm},
    {"rope", test_rope},
    {"add", test_add},
    {"swiglu", test_swiglu},
    {"geglu", test_geglu},
    {"scale", test_scale},
    {"sigmoid_mul", test_sigmoid_mul},
    {"moe_sum", test_moe_sum},
    {"route", test_route},
    {"kv_store", test_kv_store},
    {"attn_prep", test_attn_prep},
    {"matmul_id", test_matmul_id},
    {"matmul_grouped", test_matmul_grouped},
    {"rowops_errors", test_rowops_errors},
    {"rowops_staged", test_rowops_staged},
    {"attention", test_attention},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
