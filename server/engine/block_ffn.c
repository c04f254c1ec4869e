/* block_ffn.c - the dense SwiGLU FFN: down(silu(gate x) * up x) (GeGLU, gelu for silu, for
 * gemma4), and the same arithmetic for the shared expert. A dense model's FFN may stream through the expert cache as its layer's one
 * "expert"; the next layer's (after the last, the first's for the next step) is always read ahead,
 * a guess that is right but for the last step. Works in its own scratch (struct ffn_scratch),
 * wholly inside one call: a block may run it in the middle of its own work. */
#include "engine_impl.h"
#include "expert_cache.h"
#include "ops.h"
#include "quant.h"

/* The SwiGLU over matrices at mat[3] (gate, up, down) of shapes gate/up/down. Returns 0 or a
 * product's error. */
static int swiglu_run(struct engine *e, const struct weight *gate, const struct weight *up,
                      const struct weight *down, const uint8_t *const mat[3], float *out,
                      int32_t n_tok) {
    struct ffn_scratch *f = &e->ffn;
    const size_t D = (size_t)e->m->hp.n_embd, F = (size_t)gate->n_out;
    size_t sg = 0, su = 0, sd = 0;
    const uint8_t *au = f->act_in;
    int rc = matmul_quantize(gate->type, e->xn, D, n_tok, (int64_t)D, f->act_in, &sg);
    su = sg;
    if (rc == 0 && quant_kernels(up->type)->vec_dot_type != quant_kernels(gate->type)->vec_dot_type) {
        rc = matmul_quantize(up->type, e->xn, D, n_tok, (int64_t)D, f->act_up, &su);
        au = f->act_up;
    }
    if (rc < 0 || (rc = engine_queue(e, gate, mat[0], f->act_in, sg, NULL, f->g, F, NULL,
                                     n_tok)) < 0 ||
        (rc = engine_queue(e, up, mat[1], au, su, NULL, f->u, F, NULL, n_tok)) < 0)
        return rc;
    matmul_run(&e->mm);
    engine_trace(e, "ffn_gate", f->g, n_tok, (int64_t)F, F);
    engine_trace(e, "ffn_up", f->u, n_tok, (int64_t)F, F);
    if (e->m->hp.act == MODEL_ACT_GEGLU) /* gemma4's dense FFNs */
        ops_geglu(f->g, f->g, f->u, (int64_t)n_tok * F);
    else
        ops_swiglu(f->g, f->g, f->u, (int64_t)n_tok * F);
    engine_trace(e, "ffn_act", f->g, n_tok, (int64_t)F, F);
    if ((rc = matmul_quantize(down->type, f->g, F, n_tok, (int64_t)F, f->act_hidden, &sd)) < 0 ||
        (rc = engine_queue(e, down, mat[2], f->act_hidden, sd, NULL, out, D, NULL, n_tok)) < 0)
        return rc;
    matmul_run(&e->mm);
    engine_trace(e, "ffn_down", out, n_tok, (int64_t)D, D);
    return 0;
}

int block_ffn_swiglu(struct engine *e, const struct weight *gate, const struct weight *up,
                     const struct weight *down, float *out, int32_t n_tok) {
    const uint8_t *mat[3] = {gate->data, up->data, down->data};
    return swiglu_run(e, gate, up, down, mat, out, n_tok);
}

int block_ffn_dense(struct engine *e, int il, int32_t n_tok) {
    const struct model_layer *l = &e->m->layers[il];
    const uint8_t *mat[3] = {l->ffn_gate.data, l->ffn_up.data, l->ffn_down.data};
    if (e->experts) {
        const int32_t only = 0;
        int rc = expert_cache_begin(e->experts, il, &only, 1);
        if (rc == 0)
            expert_cache_prefetch(e->experts, (il + 1) % e->m->hp.n_layer, &only, 1);
        if (rc < 0 || (rc = expert_cache_get(e->experts, 0, mat, true, NULL)) < 0)
            return rc;
    }
    return swiglu_run(e, &l->ffn_gate, &l->ffn_up, &l->ffn_down, mat, e->y, n_tok);
}
