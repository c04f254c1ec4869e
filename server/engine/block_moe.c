/* block_moe.c - routed experts (softmax router, top-k, weights renormalised to sum 1; or gpt-oss's
 * biased router, top-k of the logits and a softmax over those; lossy --moe-top-k / --cache-bias
 * variants; expert biases and gpt-oss's clamped SwiGLU; --route-replay's routing from a trace) and
 * the gated shared expert of qwen35moe.
 * Under a RAM budget the union of the batch's experts is looked up in the expert cache once, the
 * next layer's are guessed and read ahead, the resident ones are computed while the rest arrive,
 * each missed expert as soon as it lands: experts write disjoint rows, so the grouping changes no
 * bit of the result. Routing and the experts work in struct moe_scratch, the lookahead in struct
 * prefetch_scratch, the shared expert's SwiGLU in block_ffn's. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "engine_impl.h"
#include "expert_cache.h"
#include "ops.h"
#include "quant.h"
#include "replay.h"

/* Top k of n logits into sel, best first; ties go to the lower index (as ggml's top-k). One pass,
 * inserting into the short sorted list. */
static void top_k(const float *p, int32_t n, int32_t k, int32_t *sel) {
    int32_t m = 0;
    for (int32_t x = 0; x < n; x++) {
        if (m == k && p[x] <= p[sel[k - 1]])
            continue;
        int32_t i = m < k ? m++ : k - 1;
        for (; i > 0 && p[sel[i - 1]] < p[x]; i--)
            sel[i] = sel[i - 1];
        sel[i] = x;
    }
}

/* --cache-bias: each selected expert of layer il that is not resident gives its place to the most
 * probable resident expert outside the selection with at least cache_bias times its probability
 * (p: probabilities, or with `logits` the logits of a softmax over all experts). Lossy (the model
 * computes with other experts than it chose); off by default. */
static void bias_to_cache(const struct engine *e, int il, const float *p, bool logits,
                          int32_t *sel) {
    const int32_t ne = e->m->hp.n_expert, k = e->k_used;
    const float log_r = logf(e->p.cache_bias);
    for (int32_t i = 0; i < k; i++) {
        if (expert_cache_resident(e->experts, il, sel[i]))
            continue;
        int32_t best = -1;
        for (int32_t x = 0; x < ne; x++) {
            bool taken = false;
            for (int32_t j = 0; j < k; j++)
                taken |= sel[j] == x;
            const bool likely = logits ? p[x] - p[sel[i]] >= log_r
                                       : p[x] >= e->p.cache_bias * p[sel[i]];
            if (!taken && likely &&
                (best < 0 || p[x] > p[best]) && expert_cache_resident(e->experts, il, x))
                best = x;
        }
        if (best >= 0)
            sel[i] = best;
    }
}

/* Adds the router's bias (gpt-oss) to n_tok rows of logits. */
static void router_bias(const struct engine *e, const struct model_layer *l, float *logits,
                        int32_t n_tok) {
    const int32_t ne = e->m->hp.n_expert;
    for (int32_t t = 0; l->ffn_gate_inp_b && t < n_tok; t++)
        ops_add(logits + (size_t)t * ne, l->ffn_gate_inp_b, ne);
}

/* Token t's experts (sel, best first) and weights (w) from its router logits p: softmax over all,
 * top-k, weights renormalised to sum 1 (MODEL_GATING_SOFTMAX); or top-k of the logits and a
 * softmax over those k (MODEL_GATING_SOFTMAX_WEIGHT), as ggml's build_moe_ffn. */
static void route_token(struct engine *e, int il, float *p, int32_t *sel, float *w) {
    const int32_t ne = e->m->hp.n_expert, k = e->k_used;
    const bool softmax_all = e->m->hp.gating == MODEL_GATING_SOFTMAX;
    if (softmax_all)
        ops_softmax(p, ne);
    top_k(p, ne, k, sel);
    if (e->p.cache_bias > 0.0f && e->experts)
        bias_to_cache(e, il, p, !softmax_all, sel);
    if (!softmax_all) {
        for (int32_t i = 0; i < k; i++)
            w[i] = p[sel[i]];
        ops_softmax(w, k);
        return;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < k; i++)
        sum += (double)(w[i] = p[sel[i]]);
    float fsum = (float)sum;
    if (fsum < 6.103515625e-5f)
        fsum = 6.103515625e-5f;
    for (int32_t i = 0; i < k; i++)
        w[i] = w[i] / fsum;
}

/* --route-replay: token t's experts from the trace (replay.h); where the trace routes fewer than k,
 * the rest are the model's own most probable experts outside them (ties to the lower index).
 * Weights: the trace's, the model's probabilities (a softmax over all its experts) for the filled
 * ones, renormalised to sum 1. The output is meaningless: only which experts are read matters. */
static void route_token_replayed(struct engine *e, int il, int32_t t, float *p, int32_t *sel,
                                 float *w) {
    const int32_t ne = e->m->hp.n_expert, k = e->k_used;
    ops_softmax(p, ne);
    int32_t n = replay_token(e->replay, il, t, k, sel, w);
    for (; n < k; n++) {
        int32_t best = -1;
        for (int32_t x = 0; x < ne; x++) {
            bool taken = false;
            for (int32_t j = 0; j < n; j++)
                taken |= sel[j] == x;
            if (!taken && (best < 0 || p[x] > p[best]))
                best = x;
        }
        sel[n] = best;
        w[n] = p[best];
    }
    double sum = 0.0;
    for (int32_t i = 0; i < k; i++)
        sum += (double)w[i];
    for (int32_t i = 0; i < k; i++)
        w[i] = sum > 0.0 ? (float)(w[i] / sum) : 1.0f / (float)k;
}

/* Routes each token and groups the batch's tokens by expert. */
static void route(struct engine *e, int il, int32_t n_tok) {
    struct moe_scratch *mo = &e->moe;
    const struct model_hparams *hp = &e->m->hp;
    const int32_t ne = hp->n_expert, k = e->k_used;
    router_bias(e, &e->m->layers[il], mo->router, n_tok);
    memset(mo->exp_n, 0, (size_t)ne * sizeof(int32_t));
    if (e->replay)
        replay_layer(e->replay, il, n_tok, e->step_reads_prompt);
    for (int32_t t = 0; t < n_tok; t++) {
        int32_t *sel = mo->sel + (size_t)t * k;
        if (e->replay)
            route_token_replayed(e, il, t, mo->router + (size_t)t * ne, sel,
                                 mo->sel_w + (size_t)t * k);
        else
            route_token(e, il, mo->router + (size_t)t * ne, sel, mo->sel_w + (size_t)t * k);
        for (int32_t i = 0; i < k; i++) {
            int32_t x = sel[i], n = mo->exp_n[x]++;
            mo->exp_tok[(size_t)x * e->p.n_batch + n] = t;
            mo->exp_out[(size_t)x * e->p.n_batch + n] = t * k + i;
        }
    }
}

/* The router's input rows: xn, or for gemma4 its own, x rms-normalised without a weight, times
 * 1 / sqrt(n_embd), times ffn_gate_inp.scale (into out, rows D apart). */
static const float *router_input(struct engine *e, const struct model_layer *l, const float *x,
                                 float *out, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    if (!l->ffn_gate_inp_s)
        return e->xn;
    const float inv = 1.0f / sqrtf((float)hp->n_embd);
    for (int32_t t = 0; t < n_tok; t++) {
        float *r = out + t * D;
        ops_rms_norm(r, x + t * D, NULL, hp->n_embd, hp->rms_eps);
        for (size_t i = 0; i < D; i++)
            r[i] = (r[i] * inv) * l->ffn_gate_inp_s[i];
    }
    return out;
}

/* Next-layer lookahead: layer il's router applied to the residual stream as it enters layer
 * il - 1's FFN guesses which experts il will want; those the cache lacks start reading now, most
 * wanted first, and arrive while this layer computes and il's attention runs. Works in its own
 * scratch (struct prefetch_scratch). Returns 0 or the router product's error. */
static int prefetch(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    if (il >= hp->n_layer)
        return 0;
    const struct model_layer *l = &e->m->layers[il];
    const size_t D = (size_t)hp->n_embd;
    const int32_t ne = hp->n_expert, k = e->k_used;
    struct prefetch_scratch *pf = &e->pf;
    for (int32_t t = 0; !l->ffn_gate_inp_s && t < n_tok; t++)
        ops_rms_norm(pf->xn + t * D, e->x + t * D, l->ffn_norm, hp->n_embd, hp->rms_eps);
    if (l->ffn_gate_inp_s) /* gemma4: the router's own input */
        router_input(e, l, e->x, pf->xn, n_tok);
    int rc = engine_matmul(e, &l->ffn_gate_inp, pf->xn, D, pf->router, (size_t)ne, n_tok);
    if (rc < 0)
        return rc;
    router_bias(e, l, pf->router, n_tok);
    memset(pf->votes, 0, (size_t)ne * sizeof(int32_t));
    int32_t sel[64];
    for (int32_t t = 0; t < n_tok; t++) {
        top_k(pf->router + (size_t)t * ne, ne, k < 64 ? k : 64, sel);
        for (int32_t i = 0; i < k && i < 64; i++)
            pf->votes[sel[i]]++;
    }
    int32_t n = 0;
    for (int32_t x = 0; x < ne; x++) { /* insertion by votes, most first */
        if (!pf->votes[x])
            continue;
        int32_t j = n++;
        for (; j > 0 && pf->votes[pf->ids[j - 1]] < pf->votes[x]; j--)
            pf->ids[j] = pf->ids[j - 1];
        pf->ids[j] = x;
    }
    expert_cache_prefetch(e->experts, il, pf->ids, n);
    return 0;
}

/* Computes the experts ids[i] for i in list[0..n) (their matrices in exp_mat): gate and up for
 * their tokens (xn's act rows: act_in for gate, au for up, sg / su bytes apart), SwiGLU, down,
 * into out's rows (rows of n_embd, the exp_out rows). Only those experts' rows are touched, so
 * the experts of a layer may be computed in several groups. Returns 0 or a product's error. */
static int experts_run(struct engine *e, int il, const int32_t *list, int32_t n, size_t sg,
                       const uint8_t *au, size_t su, float *dst) {
    struct moe_scratch *mo = &e->moe;
    const struct model_layer *l = &e->m->layers[il];
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd, F = (size_t)hp->n_ff_exp, B = (size_t)e->p.n_batch;
    for (int32_t j = 0; j < n; j++) {
        int32_t x = mo->ids[list[j]];
        const int32_t *tok = mo->exp_tok + (size_t)x * B, *out = mo->exp_out + (size_t)x * B;
        const uint8_t *const *mat = mo->exp_mat + (size_t)x * 3;
        int rc = engine_queue(e, &l->ffn_gate_exps, mat[0], mo->act_in, sg, tok, mo->g, F, out,
                              mo->exp_n[x]);
        if (rc < 0 ||
            (rc = engine_queue(e, &l->ffn_up_exps, mat[1], au, su, tok, mo->u, F, out,
                               mo->exp_n[x])) < 0)
            return rc;
    }
    matmul_run(&e->mm);
    const struct quant_kernels *qk = quant_kernels(l->ffn_down_exps.type);
    const size_t sd = quant_act_row_stride(l->ffn_down_exps.type, (int64_t)F);
    for (int32_t j = 0; j < n; j++) {
        int32_t x = mo->ids[list[j]];
        const int32_t *out = mo->exp_out + (size_t)x * B;
        for (int32_t r = 0; r < mo->exp_n[x]; r++) {
            float *g = mo->g + (size_t)out[r] * F, *u = mo->u + (size_t)out[r] * F;
            if (l->ffn_gate_exps_b) /* ggml's add_id: the expert's bias row */
                ops_add(g, l->ffn_gate_exps_b + (size_t)x * F, (int64_t)F);
            if (l->ffn_up_exps_b)
                ops_add(u, l->ffn_up_exps_b + (size_t)x * F, (int64_t)F);
            if (hp->act == MODEL_ACT_SWIGLU_OAI)
                ops_swiglu_oai(g, g, u, (int64_t)F);
            else if (hp->act == MODEL_ACT_GEGLU)
                ops_geglu(g, g, u, (int64_t)F);
            else
                ops_swiglu(g, g, u, (int64_t)F);
            qk->from_float(g, mo->act_hidden + (size_t)out[r] * sd, (int64_t)F);
        }
        int rc = engine_queue(e, &l->ffn_down_exps, mo->exp_mat[(size_t)x * 3 + 2],
                              mo->act_hidden, sd, out, dst, D, out, mo->exp_n[x]);
        if (rc < 0)
            return rc;
    }
    matmul_run(&e->mm);
    for (int32_t j = 0; l->ffn_down_exps_s && j < n; j++) { /* gemma4: the expert's scale */
        int32_t x = mo->ids[list[j]];
        const int32_t *out = mo->exp_out + (size_t)x * B;
        for (int32_t r = 0; r < mo->exp_n[x]; r++) {
            float *o = dst + (size_t)out[r] * D;
            for (size_t i = 0; i < D; i++)
                o[i] = o[i] * l->ffn_down_exps_s[x];
        }
    }
    for (int32_t j = 0; l->ffn_down_exps_b && j < n; j++) {
        int32_t x = mo->ids[list[j]];
        const int32_t *out = mo->exp_out + (size_t)x * B;
        for (int32_t r = 0; r < mo->exp_n[x]; r++)
            ops_add(dst + (size_t)out[r] * D, l->ffn_down_exps_b + (size_t)x * D, (int64_t)D);
    }
    return 0;
}

/* The shared expert's output into shexp and its gate's logit into shexp_gate. It is resident, so
 * it runs while the routed experts' misses are read. Returns 0 or a product's error. */
static int shared_expert_run(struct engine *e, const struct model_layer *l, int32_t n_tok) {
    struct moe_scratch *mo = &e->moe;
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    int rc = block_ffn_swiglu(e, &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp,
                              mo->shexp, n_tok);
    for (int32_t t = 0; rc == 0 && l->ffn_post_norm_1 && t < n_tok; t++) /* gemma4 */
        ops_rms_norm(mo->shexp + t * D, mo->shexp + t * D, l->ffn_post_norm_1, hp->n_embd,
                     hp->rms_eps);
    if (rc == 0 && l->ffn_post_norm_1)
        engine_trace(e, "post_norm_1", mo->shexp, n_tok, hp->n_embd, D);
    if (rc < 0 || !l->ffn_gate_inp_shexp.data)
        return rc;
    return engine_matmul(e, &l->ffn_gate_inp_shexp, e->xn, D, mo->shexp_gate, 1, n_tok);
}

/* y += shexp * sigmoid(shexp_gate), per token: after the routed experts' sum, as ggml adds; a
 * shared expert without a gate (gemma4's dense half): y = shexp + y. */
static void shared_expert_add(struct engine *e, const struct model_layer *l, int32_t n_tok) {
    const struct moe_scratch *mo = &e->moe;
    const size_t D = (size_t)e->m->hp.n_embd;
    const bool gated = l->ffn_gate_inp_shexp.data != NULL;
    for (int32_t t = 0; t < n_tok; t++) {
        const float g = gated ? 1.0f / (1.0f + ops_exp(-mo->shexp_gate[t])) : 1.0f;
        float *y = e->y + (size_t)t * D;
        const float *s = mo->shexp + (size_t)t * D;
        if (!gated)
            for (size_t i = 0; i < D; i++)
                y[i] = s[i] + y[i];
        else
            for (size_t i = 0; i < D; i++)
                y[i] = y[i] + s[i] * g;
    }
}

/* Gemma 4: the experts' own input, xn = rmsnorm(x) * pre_ffw_norm_2, once the dense half has read
 * xn (normalised by ffn_norm). */
static void experts_input(struct engine *e, const struct model_layer *l, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    for (int32_t t = 0; l->ffn_pre_norm_2 && t < n_tok; t++)
        ops_rms_norm(e->xn + t * D, e->x + t * D, l->ffn_pre_norm_2, hp->n_embd, hp->rms_eps);
    if (l->ffn_pre_norm_2)
        engine_trace(e, "experts_in", e->xn, n_tok, hp->n_embd, D);
}

/* The trace points of the routed experts' rows, pair t k + s for token t's s-th expert: up (with
 * its bias), the activation, and the output (with its scale and bias). */
static void experts_trace(const struct engine *e, int32_t n_tok) {
    const size_t D = (size_t)e->m->hp.n_embd, F = (size_t)e->m->hp.n_ff_exp;
    const int32_t P = n_tok * e->k_used;
    engine_trace(e, "moe_up", e->moe.u, P, (int64_t)F, F);
    engine_trace(e, "moe_act", e->moe.g, P, (int64_t)F, F);
    engine_trace(e, "moe_out", e->moe.out, P, (int64_t)D, D);
}

/* Computes the experts ids[first .. first+n), the current lookup's 0 .. n-1: what is resident
 * now first, then each of the rest as soon as it arrives. The experts' rows of out are
 * independent, so the grouping does not change a bit of the result. Returns 0, a read error
 * or a product's error. */
static int experts_group(struct engine *e, int il, int32_t first, int32_t n, size_t sg,
                         const uint8_t *au, size_t su, float *dst) {
    const struct model_layer *l = &e->m->layers[il];
    struct moe_scratch *mo = &e->moe;
    int32_t *todo = mo->todo, n_todo = n;
    for (int32_t i = 0; i < n; i++)
        todo[i] = first + i;
    while (n_todo > 0) {
        int32_t *ready = mo->ready, n_ready = 0, n_left = 0;
        for (int32_t j = 0; j < n_todo; j++) {
            int32_t i = todo[j], x = mo->ids[i];
            const uint8_t **mat = mo->exp_mat + (size_t)x * 3;
            int rc = 0;
            bool here = true;
            if (e->experts) {
                rc = expert_cache_get(e->experts, i - first, mat, false, &here);
            } else {
                const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
                for (int m = 0; m < 3; m++)
                    mat[m] = (const uint8_t *)w[m]->data + (size_t)x * w[m]->mat_stride;
            }
            if (rc < 0)
                return rc;
            if (here)
                ready[n_ready++] = i;
            else
                todo[n_left++] = i;
        }
        n_todo = n_left;
        if (n_ready > 0) {
            int rc = experts_run(e, il, ready, n_ready, sg, au, su, dst);
            if (rc < 0)
                return rc;
        } else if (!expert_cache_wait(e->experts)) {
            return -EIO; /* an expert still reading with no read in flight: cannot happen */
        }
    }
    return 0;
}

int32_t block_moe_union(struct engine *e, int il) {
    struct moe_scratch *mo = &e->moe;
    int32_t n = 0;
    for (int32_t x = 0; x < e->m->hp.n_expert; x++)
        if (mo->exp_n[x])
            mo->ids[n++] = x;
    if (e->route_fn)
        e->route_fn(e->route_ctx, il, mo->ids, n);
    e->timing.n_moe_layer_steps++;
    e->timing.n_union_experts += (uint64_t)n;
    return n;
}

/* The expert cache's lookup of the union's first group (moe.ids[0 .. n), at most the cache's
 * slots: *group) and, when that group is the whole union, the lookahead of layer il + 1 (e->x: the
 * residual entering this FFN). Without a cache *group is n. Returns 0 or the lookup's or the
 * lookahead's error. */
static int experts_begin(struct engine *e, int il, int32_t n, int32_t n_tok, int32_t *group) {
    *group = n;
    if (!e->experts || n == 0)
        return 0;
    const int32_t slots = expert_cache_n_slots(e->experts);
    *group = n < slots ? n : slots;
    int rc = expert_cache_begin(e->experts, il, e->moe.ids, *group);
    if (rc == 0 && *group == n &&
        (e->p.prefetch == ENGINE_PREFETCH_ALWAYS ||
         (e->p.prefetch == ENGINE_PREFETCH_PREFILL && e->step_reads_prompt)))
        rc = prefetch(e, il + 1, n_tok);
    return rc;
}

/* The routed experts moe.ids[0 .. n) of layer il (their tokens in exp_n / exp_tok / exp_out) on
 * xn's rows, in groups of `group` (the first group's lookup begun: experts_begin), into dst's
 * rows. Returns 0, a read error or a product's error. */
static int experts_compute(struct engine *e, int il, int32_t n, int32_t group, int32_t n_tok,
                           float *dst) {
    const struct model_layer *l = &e->m->layers[il];
    const struct model_hparams *hp = &e->m->hp;
    struct moe_scratch *mo = &e->moe;
    const size_t D = (size_t)hp->n_embd;
    size_t sg = 0, su = 0;
    int rc;
    if (n == 0)
        return 0;
    if ((rc = matmul_quantize(l->ffn_gate_exps.type, e->xn, D, n_tok, hp->n_embd, mo->act_in,
                              &sg)) < 0)
        return rc;
    const uint8_t *au = mo->act_in;
    su = sg;
    if (quant_kernels(l->ffn_up_exps.type)->vec_dot_type !=
        quant_kernels(l->ffn_gate_exps.type)->vec_dot_type) {
        if ((rc = matmul_quantize(l->ffn_up_exps.type, e->xn, D, n_tok, hp->n_embd, mo->act_up,
                                  &su)) < 0)
            return rc;
        au = mo->act_up;
    }
    for (int32_t first = 0; first < n; first += group) {
        const int32_t cnt = n - first < group ? n - first : group;
        rc = first > 0 ? expert_cache_begin(e->experts, il, mo->ids + first, cnt) : 0;
        if (rc < 0 || (rc = experts_group(e, il, first, cnt, sg, au, su, dst)) < 0)
            return rc;
    }
    return 0;
}

int block_moe(struct engine *e, int il, int32_t n_tok) {
    const struct model_layer *l = &e->m->layers[il];
    const struct model_hparams *hp = &e->m->hp;
    struct moe_scratch *mo = &e->moe;
    const size_t D = (size_t)hp->n_embd;
    const int32_t k = e->k_used;
    const float *rx = router_input(e, l, e->x, mo->router_x, n_tok);
    if (rx == mo->router_x)
        engine_trace(e, "router_in", rx, n_tok, (int64_t)D, D);
    int rc = engine_matmul(e, &l->ffn_gate_inp, rx, D, mo->router, (size_t)hp->n_expert, n_tok);
    if (rc < 0)
        return rc;
    engine_trace(e, "router", mo->router, n_tok, hp->n_expert, (size_t)hp->n_expert);
    route(e, il, n_tok);
    engine_trace(e, "moe_weights", mo->sel_w, n_tok, k, (size_t)k);
    const int32_t n = block_moe_union(e, il);
    /* a cache smaller than the batch's experts of this layer takes them in groups that fit: each
     * group's lookup releases the previous group's pins */
    int32_t group = n;
    if ((rc = experts_begin(e, il, n, n_tok, &group)) < 0)
        return rc;
    if (l->ffn_up_shexp.data && (rc = shared_expert_run(e, l, n_tok)) < 0)
        return rc;
    experts_input(e, l, n_tok);
    if ((rc = experts_compute(e, il, n, group, n_tok, mo->out)) < 0)
        return rc;
    experts_trace(e, n_tok);
    /* weighted sum in selection order, as ggml adds the weighted experts one by one */
    for (int32_t t = 0; t < n_tok; t++) {
        float *y = e->y + (size_t)t * D;
        const float *w = mo->sel_w + (size_t)t * k;
        const float *d0 = mo->out + (size_t)t * k * D;
        for (size_t i = 0; i < D; i++)
            y[i] = d0[i] * w[0];
        for (int32_t s = 1; s < k; s++) {
            const float *ds = d0 + (size_t)s * D;
            for (size_t i = 0; i < D; i++)
                y[i] = y[i] + ds[i] * w[s];
        }
    }
    engine_trace(e, "moe_sum", e->y, n_tok, (int64_t)D, D);
    for (int32_t t = 0; l->ffn_post_norm_2 && t < n_tok; t++) /* gemma4 */
        ops_rms_norm(e->y + t * D, e->y + t * D, l->ffn_post_norm_2, hp->n_embd, hp->rms_eps);
    if (l->ffn_post_norm_2)
        engine_trace(e, "post_norm_2", e->y, n_tok, (int64_t)D, D);
    if (l->ffn_up_shexp.data) {
        shared_expert_add(e, l, n_tok);
        engine_trace(e, "shexp_add", e->y, n_tok, (int64_t)D, D);
    }
    return 0;
}

int block_moe_experts(struct engine *e, int il, const int32_t *sel, int32_t n_tok, float *out) {
    struct moe_scratch *mo = &e->moe;
    const int32_t ne = e->m->hp.n_expert, k = e->k_used;
    const size_t B = (size_t)e->p.n_batch;
    memset(mo->exp_n, 0, (size_t)ne * sizeof(int32_t));
    for (int32_t p = 0; p < n_tok * k; p++) {
        const int32_t x = sel[p];
        if (x < 0 || x >= ne)
            continue;
        const int32_t n = mo->exp_n[x]++;
        mo->exp_tok[(size_t)x * B + (size_t)n] = p / k;
        mo->exp_out[(size_t)x * B + (size_t)n] = p;
    }
    int32_t n = 0;
    for (int32_t x = 0; x < ne; x++)
        if (mo->exp_n[x])
            mo->ids[n++] = x;
    int32_t group = n;
    int rc = experts_begin(e, il, n, n_tok, &group);
    return rc < 0 ? rc : experts_compute(e, il, n, group, n_tok, out);
}
