/* bench_gpu.c - what the Vulkan backend's kernels reach on a device, against its memory bandwidth:
 * a device-to-device copy (the bound), and each weight type's product for a decode step (1 token)
 * and a prefill batch, as GB/s of weights read and tokens/s of that one matrix; for a type with
 * a tiled kernel the prefill twice, tiled and on the per-token drivers (--sweep: also at 4 .. 64
 * tokens, where gpu_ops.c's threshold between them is chosen).
 *
 *     bench-gpu [--gpu N] [--rows R] [--cols C] [--tokens T] [--reps K] [--types q4_K,q6_K,...]
 *               [--sweep 1]
 *
 * Each figure is the best of three submits of K back-to-back dispatches (one command buffer). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gpu.h"
#include "gpu_ops.h"
#include "quant.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct bench_opts {
    const char *gpu;
    const char *types; /* comma-separated type names (qtype_name, any case), NULL: all */
    int64_t rows, cols;
    int32_t tokens, reps;
    bool sweep;
};

/* Seconds of the best of three submits of reps copies of src into dst: by the copy engine
 * (vkCmdCopyBuffer), or by copy_words (kernel >= 0, one workgroup per 16 KiB up to 65535). */
static double time_copies(struct gpu *g, struct gpu_buf *dst, struct gpu_buf *src, int reps,
                          int kernel) {
    double best = 1e30;
    struct { uint64_t src, dst; uint32_t n; } push = {gpu_buf_addr(src), gpu_buf_addr(dst),
                                                      (uint32_t)(gpu_buf_bytes(src) / 16)};
    const uint32_t n_groups = push.n / 1024 < 65535 ? push.n / 1024 + 1 : 65535;
    for (int k = 0; k < 3; k++) {
        if (gpu_begin(g) < 0)
            return -1;
        for (int r = 0; r < reps; r++)
            if (kernel < 0)
                gpu_copy(g, dst, 0, src, 0, gpu_buf_bytes(src));
            else
                gpu_dispatch(g, kernel, &push, sizeof(push), n_groups, 1, 1);
        double t0 = now_s();
        if (gpu_submit(g) < 0)
            return -1;
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* Seconds of the best of three submits of reps products of weights w (type t) with n_tok rows. */
static double time_products(struct gpu *g, struct gpu_ops *o, enum qtype t, struct gpu_buf *w,
                            size_t row_bytes, const struct bench_opts *b, struct gpu_buf *act,
                            size_t act_stride, struct gpu_buf *out, int32_t n_tok) {
    double best = 1e30;
    for (int k = 0; k < 3; k++) {
        if (gpu_begin(g) < 0)
            return -1;
        for (int r = 0; r < b->reps; r++)
            gpu_op_matmul(o, t, gpu_buf_addr(w), row_bytes, b->cols, b->rows, gpu_buf_addr(act),
                          act_stride, gpu_buf_addr(out), (size_t)b->rows, n_tok);
        double t0 = now_s();
        if (gpu_submit(g) < 0)
            return -1;
        double s = now_s() - t0;
        best = s < best ? s : best;
    }
    return best;
}

/* True when list (comma-separated names, any case; NULL: every type) names t. */
static bool type_listed(const char *list, enum qtype t) {
    const char *name = qtype_name(t);
    const size_t n = strlen(name);
    for (const char *s = list; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        if (strncasecmp(s, name, n) == 0 && (s[n] == ',' || s[n] == '\0'))
            return true;
    return list == NULL;
}

/* True when every name of list is a type's. */
static bool types_known(const char *list) {
    for (const char *s = list; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
        const size_t n = strcspn(s, ",");
        bool found = false;
        for (int t = 0; t < QTYPE_COUNT && !found; t++)
            found = strlen(qtype_name((enum qtype)t)) == n &&
                    strncasecmp(s, qtype_name((enum qtype)t), n) == 0;
        if (!found)
            return false;
    }
    return true;
}

static int bench_type(struct gpu *g, struct gpu_ops *o, enum qtype t, const struct bench_opts *b,
                      struct gpu_buf *act, struct gpu_buf *out) {
    uint64_t rb = 0;
    if (!gpu_ops_has_type(o, t) || !type_listed(b->types, t) ||
        qtype_row_bytes(t, (uint64_t)b->cols, &rb) < 0)
        return 0;
    char err[256] = "";
    const size_t w_bytes = (size_t)rb * (size_t)b->rows;
    struct gpu_buf *w = gpu_buf_new(g, w_bytes, err, sizeof(err));
    if (!w) {
        fprintf(stderr, "bench-gpu: %s\n", err);
        return -ENOMEM;
    }
    /* weights: zero bytes are valid blocks of every type; speed does not depend on the values */
    const size_t act_stride = quant_act_row_stride(t, b->cols);
    const int32_t sweep[] = {4, 8, 16, 32, 64}, n_sweep = b->sweep ? 5 : 0;
    const int32_t tile_min = o->tile_min_tok;
    int rc = 0;
    for (int i = -1; rc == 0 && i <= n_sweep; i++) {
        const int32_t n_tok = i < 0 ? 1 : i < n_sweep ? sweep[i] : b->tokens;
        if (i >= 0 && i < n_sweep && n_tok >= b->tokens) /* the sweep stops below --tokens */
            continue;
        /* pass 0: the tiled kernel (where the type has one), pass 1: the per-token drivers */
        const bool both = o->matmul_tile[t] >= 0 && n_tok > 1;
        for (int pass = both ? 0 : 1; rc == 0 && pass < 2; pass++) {
            const bool tiled = pass == 0;
            const bool taken = o->tile_taken[t];
            o->tile_min_tok = tiled ? 1 : INT32_MAX;
            o->tile_taken[t] = true;
            double s = time_products(g, o, t, w, (size_t)rb, b, act, act_stride, out, n_tok);
            o->tile_min_tok = tile_min;
            o->tile_taken[t] = taken;
            if (s < 0) {
                fprintf(stderr, "bench-gpu: %s\n", gpu_error(g));
                rc = -EIO;
                break;
            }
            double per = s / b->reps;
            printf("%-7s %5lld x %5lld, %3d token%s: %8.1f us  %7.1f GB/s of weights  %9.0f tok/s"
                   "%s%s\n", qtype_name(t), (long long)b->rows, (long long)b->cols, n_tok,
                   n_tok == 1 ? " " : "s", per * 1e6, (double)w_bytes / per * 1e-9,
                   (double)n_tok / per, !both ? "" : tiled ? "  tiled" : "  per-token",
                   both && tiled == (n_tok >= tile_min && o->tile_taken[t]) ? " (taken)" : "");
        }
    }
    gpu_buf_free(g, w);
    return rc;
}

static int parse(int argc, char **argv, struct bench_opts *b) {
    *b = (struct bench_opts){.gpu = "auto", .rows = 4096, .cols = 4096, .tokens = 512, .reps = 50};
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -EINVAL;
        if (strcmp(argv[i], "--gpu") == 0)
            b->gpu = v;
        else if (strcmp(argv[i], "--rows") == 0)
            b->rows = atoll(v);
        else if (strcmp(argv[i], "--cols") == 0)
            b->cols = atoll(v);
        else if (strcmp(argv[i], "--tokens") == 0)
            b->tokens = atoi(v);
        else if (strcmp(argv[i], "--reps") == 0)
            b->reps = atoi(v);
        else if (strcmp(argv[i], "--types") == 0)
            b->types = v;
        else if (strcmp(argv[i], "--sweep") == 0)
            b->sweep = atoi(v) != 0;
        else
            return -EINVAL;
    }
    return b->rows > 0 && b->cols > 0 && b->cols % 256 == 0 && b->tokens > 0 && b->reps > 0 &&
                   (!b->types || types_known(b->types))
               ? 0 : -EINVAL;
}

int main(int argc, char **argv) {
    struct bench_opts b;
    char err[256] = "", desc[512];
    if (parse(argc, argv, &b) < 0) {
        fprintf(stderr, "usage: bench-gpu [--gpu N] [--rows R] [--cols C (a multiple of 256)] "
                        "[--tokens T] [--reps K] [--types q4_K,q6_K,...] [--sweep 1]\n");
        return 2;
    }
    int idx = gpu_choose(b.gpu, err, sizeof(err));
    struct gpu *g = idx >= 0 ? gpu_open(idx, 0, err, sizeof(err)) : NULL;
    struct gpu_ops o;
    if (!g || gpu_ops_init(&o, g, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench-gpu: %s\n", err[0] ? err : "no device");
        gpu_close(g);
        return 1;
    }
    const struct gpu_info *in = gpu_get_info(g);
    printf("device: %s (%s)\n%s\n", in->name, in->driver, gpu_describe(g, desc, sizeof(desc)));
    const size_t copy_bytes = (size_t)256 << 20;
    struct gpu_buf *c0 = gpu_buf_new(g, copy_bytes, err, sizeof(err));
    struct gpu_buf *c1 = c0 ? gpu_buf_new(g, copy_bytes, err, sizeof(err)) : NULL;
    for (int by_kernel = 0; c1 && by_kernel < 2; by_kernel++) {
        double s = time_copies(g, c1, c0, 10, by_kernel ? gpu_kernel(g, "copy_words") : -1);
        if (s > 0)
            printf("copy    %zu MiB device to device by %s: %.0f GB/s (read + write)\n",
                   copy_bytes >> 20, by_kernel ? "a kernel" : "the copy engine",
                   2.0 * (double)copy_bytes * 10 / s * 1e-9);
    }
    gpu_buf_free(g, c0);
    gpu_buf_free(g, c1);
    const size_t act_bytes = (size_t)b.tokens * quant_act_row_stride(QTYPE_F32, b.cols);
    struct gpu_buf *act = gpu_buf_new(g, act_bytes, err, sizeof(err));
    struct gpu_buf *out = act ? gpu_buf_new(g, sizeof(float) * (size_t)b.rows * b.tokens, err,
                                            sizeof(err)) : NULL;
    int rc = out ? 0 : -ENOMEM;
    for (int t = 0; rc == 0 && t < QTYPE_COUNT; t++)
        rc = bench_type(g, &o, (enum qtype)t, &b, act, out);
    if (!out)
        fprintf(stderr, "bench-gpu: %s\n", err);
    gpu_buf_free(g, act);
    gpu_buf_free(g, out);
    gpu_close(g);
    return rc < 0 ? 1 : 0;
}
