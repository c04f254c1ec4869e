/* gpu_route.c - gpu_op_route: a MoE layer's routing on the GPU (shaders/route.comp). */
#include <errno.h>

#include "gpu_ops.h"

struct route_push {
    uint64_t logits, bias, pairs, log;
    uint32_t n_expert, k, n_tok, softmax_all;
};

int gpu_op_route(struct gpu_ops *o, uint64_t logits, uint64_t bias, bool softmax_all,
                 int32_t n_expert, int32_t k, uint64_t pairs, uint64_t log, int32_t n_tok) {
    const int kern = gpu_kernel(o->g, "route");
    if (kern < 0 || k < 1 || k > 32 || k > n_expert || n_expert > 1024)
        return kern < 0 ? -ENOTSUP : -EINVAL;
    struct route_push p = {.logits = logits, .bias = bias, .pairs = pairs, .log = log,
                           .n_expert = (uint32_t)n_expert, .k = (uint32_t)k,
                           .n_tok = (uint32_t)n_tok, .softmax_all = softmax_all};
    gpu_dispatch(o->g, kern, &p, sizeof(p), (uint32_t)n_tok, 1, 1);
    return 0;
}
