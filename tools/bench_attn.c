/* bench_attn.c - what the GPU's attention (gpu_op_attn) takes per layer: one decode token and a
 * prefill segment over a cache of each context length, in the shapes of the presets' attention
 * layers, as microseconds and GB/s of K and V rows read (each position's rows of the layer's
 * kv heads, once) against the device's copy bandwidth.
 *
 *     bench-attn [--gpu N] [--kv f16|q8_0|q4_0|f32] [--reps K] [--prefill T]
 *
 * Each figure is the best of three submits of K back-to-back calls (one command buffer). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "gpu.h"
#include "gpu_ops.h"
#include "quant.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An attention layer's shape, as in the presets' GGUFs. */
struct attn_shape {
    const char *name;
    int32_t n_head, n_head_kv, head_dim, window;
    bool sinks;
};

static const struct attn_shape shapes[] = {
    {"qwen3-30b-a3b", 32, 4, 128, 0, false},
    {"gpt-oss-20b", 64, 8, 64, 0, true},
    {"gpt-oss-20b swa", 64, 8, 64, 128, true},
    {"qwen3.5-35b-a3b", 16, 2, 256, 0, false},
};

struct bench_opts {
    const char *gpu;
    enum qtype kv;
    int32_t reps, prefill;
};

/* Seconds of the best of three submits of reps calls of a. */
static double time_attn(struct gpu_ops *o, const struct gpu_attn *a, int32_t reps) {
    double best = 1e30;
    for (int k = 0; k < 3; k++) {
        if (gpu_begin(o->g) < 0)
            return -1;
        for (int r = 0; r < reps; r++) {
            if (gpu_op_attn(o, a) < 0)
                return -1;
            gpu_barrier(o->g);
        }
        double t0 = now_s();
        if (gpu_submit(o->g) < 0)
            return -1;
        double s = now_s() - t0;
        best = s < best ? s : best;
    }
    return best;
}

/* Times shape s at context n_ctx: a decode token at position n_ctx - 1 and, when n_ctx holds it,
 * a prefill segment of the last opt->prefill positions. Buffers: q, out (f32), K and V of n_ctx
 * rows (zeros: speed does not depend on the values), sinks, scratch. */
static int bench_shape(struct gpu_ops *o, const struct attn_shape *s, int32_t n_ctx,
                       const struct bench_opts *b) {
    char err[256] = "";
    uint64_t head_bytes = 0;
    if (qtype_row_bytes(b->kv, (uint64_t)s->head_dim, &head_bytes) < 0)
        return -EINVAL;
    const size_t row_bytes = (size_t)head_bytes * (size_t)s->n_head_kv;
    const int32_t rows = s->window ? s->window + b->prefill : n_ctx;
    const int32_t n_tok_max = b->prefill > 1 ? b->prefill : 1;
    const size_t q_floats = (size_t)n_tok_max * s->n_head * s->head_dim;
    const int32_t seen = s->window ? s->window : n_ctx;
    struct gpu_buf *q = gpu_buf_new(o->g, q_floats * 4, err, sizeof(err));
    struct gpu_buf *out = gpu_buf_new(o->g, q_floats * 4, err, sizeof(err));
    struct gpu_buf *k = gpu_buf_new(o->g, row_bytes * (size_t)rows, err, sizeof(err));
    struct gpu_buf *v = gpu_buf_new(o->g, row_bytes * (size_t)rows, err, sizeof(err));
    struct gpu_buf *sk = gpu_buf_new(o->g, sizeof(float) * (size_t)s->n_head, err, sizeof(err));
    struct gpu_buf *scr = gpu_buf_new(o->g, gpu_attn_scratch_bytes(n_tok_max, s->n_head, seen),
                                      err, sizeof(err));
    int rc = q && out && k && v && sk && scr ? 0 : -ENOMEM;
    if (rc < 0)
        fprintf(stderr, "bench-attn: %s\n", err);
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
        const int32_t n_tok = pass == 0 ? 1 : b->prefill;
        if (pass == 1 && (b->prefill < 2 || n_tok > n_ctx))
            break;
        struct gpu_attn a = {
            .kv_type = b->kv, .q = gpu_buf_addr(q), .q_tok_stride = (size_t)s->n_head * s->head_dim,
            .q_head_stride = (size_t)s->head_dim, .k = gpu_buf_addr(k), .v = gpu_buf_addr(v),
            .row_bytes = row_bytes, .ring_rows = rows, .out = gpu_buf_addr(out),
            .out_stride = (size_t)s->n_head * s->head_dim,
            .sinks = s->sinks ? gpu_buf_addr(sk) : 0, .scratch = gpu_buf_addr(scr),
            .n_head = s->n_head, .n_head_kv = s->n_head_kv, .head_dim = s->head_dim,
            .pos0 = n_ctx - n_tok, .n_tok = n_tok, .window = s->window,
            .scale = 1.0f / sqrtf((float)s->head_dim)};
        const double t = time_attn(o, &a, b->reps);
        if (t < 0) {
            fprintf(stderr, "bench-attn: %s\n", gpu_error(o->g));
            rc = -EIO;
            break;
        }
        const double per = t / b->reps;
        const double kv_bytes = 2.0 * (double)row_bytes * (double)(n_ctx < seen ? n_ctx : seen);
        printf("%-16s %-4s ctx %5d, %3d token%s: %8.1f us  %7.1f GB/s of K and V\n", s->name,
               qtype_name(b->kv), n_ctx, n_tok, n_tok == 1 ? " " : "s", per * 1e6,
               kv_bytes / per * 1e-9);
    }
    gpu_buf_free(o->g, q);
    gpu_buf_free(o->g, out);
    gpu_buf_free(o->g, k);
    gpu_buf_free(o->g, v);
    gpu_buf_free(o->g, sk);
    gpu_buf_free(o->g, scr);
    return rc;
}

static int parse(int argc, char **argv, struct bench_opts *b) {
    *b = (struct bench_opts){.gpu = "auto", .kv = QTYPE_F16, .reps = 20, .prefill = 512};
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -EINVAL;
        if (strcmp(argv[i], "--gpu") == 0)
            b->gpu = v;
        else if (strcmp(argv[i], "--kv") == 0)
            b->kv = engine_kv_type_named(v);
        else if (strcmp(argv[i], "--reps") == 0)
            b->reps = atoi(v);
        else if (strcmp(argv[i], "--prefill") == 0)
            b->prefill = atoi(v);
        else
            return -EINVAL;
    }
    return b->kv != QTYPE_COUNT && b->reps > 0 && b->prefill >= 0 ? 0 : -EINVAL;
}

int main(int argc, char **argv) {
    struct bench_opts b;
    char err[256] = "";
    if (parse(argc, argv, &b) < 0) {
        fprintf(stderr, "usage: bench-attn [--gpu N] [--kv f16|q8_0|q4_0|f32] [--reps K] "
                        "[--prefill T]\n");
        return 2;
    }
    int idx = gpu_choose(b.gpu, err, sizeof(err));
    struct gpu *g = idx >= 0 ? gpu_open(idx, 0, err, sizeof(err)) : NULL;
    struct gpu_ops o;
    if (!g || gpu_ops_init(&o, g, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench-attn: %s\n", err[0] ? err : "no device");
        gpu_close(g);
        return 1;
    }
    const struct gpu_info *in = gpu_get_info(g);
    setvbuf(stdout, NULL, _IOLBF, 0); /* a line at a time: a long run shows where it is */
    printf("device: %s (%s)\n", in->name, in->driver);
    static const int32_t ctxs[] = {512, 1024, 2048, 4096};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (size_t c = 0; rc == 0 && c < sizeof(ctxs) / sizeof(ctxs[0]); c++)
            rc = bench_shape(&o, &shapes[i], ctxs[c], &b);
    gpu_ops_release(&o);
    gpu_close(g);
    return rc < 0 ? 1 : 0;
}
