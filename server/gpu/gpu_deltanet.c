/* gpu_deltanet.c - the Gated DeltaNet mixer's steps on the GPU (shaders/deltanet_*.comp), each
 * deltanet.h's step bit for bit (test_gpu's deltanet case compares them with memcmp).
 * Every token's work depends only on its own sequence's state, so a step records the conv and
 * the recurrence once per segment (one sequence's consecutive tokens), the rest over the batch. */
#include <errno.h>

#include "gpu_ops.h"

#define DN_GROUP 64 /* invocations of the per-element kernels' workgroups */

static uint32_t dn_groups(int64_t n) {
    return (uint32_t)((n + DN_GROUP - 1) / DN_GROUP);
}

struct gates_push {
    uint64_t beta, gate, dt_bias, a;
    uint32_t n_head, n;
};

int gpu_op_deltanet_gates(struct gpu_ops *o, uint64_t beta, uint64_t gate, uint64_t dt_bias,
                          uint64_t a, int32_t n_head, int32_t n_tok) {
    const int k = gpu_kernel(o->g, "deltanet_gates");
    if (k < 0)
        return -ENOTSUP;
    struct gates_push p = {.beta = beta, .gate = gate, .dt_bias = dt_bias, .a = a,
                           .n_head = (uint32_t)n_head, .n = (uint32_t)(n_head * n_tok)};
    gpu_dispatch(o->g, k, &p, sizeof(p), dn_groups(p.n), 1, 1);
    return 0;
}

struct conv_push {
    uint64_t rows, state, w, out;
    uint32_t row_stride, out_stride, n_ch, d_conv, n_tok;
};

int gpu_op_deltanet_conv(struct gpu_ops *o, uint64_t rows, size_t row_stride, uint64_t state,
                         uint64_t w, uint64_t out, size_t out_stride, int32_t n_ch, int32_t d_conv,
                         int32_t n_tok) {
    const int k = gpu_kernel(o->g, "deltanet_conv");
    if (k < 0)
        return -ENOTSUP;
    if (d_conv < 1)
        return -EINVAL;
    struct conv_push p = {.rows = rows, .state = state, .w = w, .out = out,
                          .row_stride = (uint32_t)row_stride, .out_stride = (uint32_t)out_stride,
                          .n_ch = (uint32_t)n_ch, .d_conv = (uint32_t)d_conv,
                          .n_tok = (uint32_t)n_tok};
    gpu_dispatch(o->g, k, &p, sizeof(p), dn_groups(n_ch), 1, 1);
    return 0;
}

struct l2_push {
    uint64_t x;
    uint32_t tok_stride, n_head, n;
    float eps;
};

int gpu_op_l2_norm(struct gpu_ops *o, uint64_t x, size_t tok_stride, int32_t n_head, int64_t n,
                   float eps, int32_t n_tok) {
    const int k = gpu_kernel(o->g, "deltanet_l2");
    if (k < 0)
        return -ENOTSUP;
    struct l2_push p = {.x = x, .tok_stride = (uint32_t)tok_stride, .n_head = (uint32_t)n_head,
                        .n = (uint32_t)n, .eps = eps};
    gpu_dispatch(o->g, k, &p, sizeof(p), (uint32_t)n_head, (uint32_t)n_tok, 1);
    return 0;
}

struct recur_push {
    uint64_t S, conv, gate, beta;
    uint32_t conv_stride, n_tok, n_hk, n_hv, d;
    float scale;
};

int gpu_op_deltanet_recur(struct gpu_ops *o, const struct gpu_deltanet *r) {
    const int k = gpu_kernel(o->g, "deltanet_recur");
    if (k < 0)
        return -ENOTSUP;
    if (r->n_hk < 1 || r->n_hv < 1 || r->d < 1)
        return -EINVAL;
    struct recur_push p = {.S = r->S, .conv = r->conv, .gate = r->gate, .beta = r->beta,
                           .conv_stride = (uint32_t)r->conv_stride, .n_tok = (uint32_t)r->n_tok,
                           .n_hk = (uint32_t)r->n_hk, .n_hv = (uint32_t)r->n_hv,
                           .d = (uint32_t)r->d, .scale = r->scale};
    gpu_dispatch(o->g, k, &p, sizeof(p), (uint32_t)r->n_hv, dn_groups(r->d), 1);
    return 0;
}

struct norm_push {
    uint64_t o, z, w;
    double inv_n;
    uint32_t o_stride, z_stride, n;
    float eps;
};

int gpu_op_gated_norm(struct gpu_ops *o, uint64_t x, size_t x_stride, uint64_t z, size_t z_stride,
                      uint64_t w, int32_t n_head, int64_t n, float eps, int32_t n_tok) {
    const int k = gpu_kernel(o->g, "deltanet_norm");
    if (k < 0)
        return -ENOTSUP;
    struct norm_push p = {.o = x, .z = z, .w = w, .inv_n = 1.0 / (double)n,
                          .o_stride = (uint32_t)x_stride, .z_stride = (uint32_t)z_stride,
                          .n = (uint32_t)n, .eps = eps};
    gpu_dispatch(o->g, k, &p, sizeof(p), (uint32_t)n_head, (uint32_t)n_tok, 1);
    return 0;
}
