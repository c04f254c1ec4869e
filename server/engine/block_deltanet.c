/* block_deltanet.c - the Gated DeltaNet mixer (qwen35*). Per token t of one sequence:
 *   qkv = attn_qkv x, z = attn_gate x, beta = sigmoid(ssm_beta x),
 *   g = softplus(ssm_alpha x + dt_bias) * ssm_a                   (one per V head; exp(g) < 1)
 *   c = silu(causal depthwise conv of qkv over the last d_conv tokens), split into q | k | v heads
 *   q, k L2-normalised per head; V head h reads Q/K head h mod Hk
 *   S = exp(g) S;  d = beta (v - S^T k);  S = S + k d^T;  o = S^T q / sqrt(Dk)
 *   out = ssm_out (rmsnorm(o per head) * ssm_norm * silu(z))
 * The state S of a head is kept as Dv rows of Dk (row j is S's column j), the conv state as the
 * last d_conv - 1 qkv rows, both in the sequence. A step's tokens come in segments, each one
 * sequence's consecutive tokens; each token's arithmetic depends only on its own sequence's state
 * before it, so the result is the same however a prompt is split into batches and whichever other
 * sequences share the step. The arithmetic of each step is deltanet.c's (shared with the GPU's
 * tests). */
#include <math.h>
#include <string.h>

#include "deltanet.h"
#include "engine_impl.h"
#include "ops.h"
#include "threadpool.h"

/* The causal conv of segment g (its qkv rows in the batch's rows of qkv, after the first
 * d_conv - 1) with its sequence's conv state. */
static void conv_seg(struct engine *e, int il, const struct engine_seg *g) {
    const int32_t C = e->conv_ch, K = e->m->hp.ssm_d_conv;
    const float *rows = e->dn.qkv + (size_t)(K - 1 + g->first) * C;
    deltanet_conv(rows, sequence_conv(e->seqs[g->seq], e->rec_layer[il]),
                  e->m->layers[il].ssm_conv1d, e->dn.conv + (size_t)g->first * C, g->n, C, K);
}

/* One V head of one segment, over its tokens in order, in the layer of ctx (a struct
 * engine_task): task = segment * Hv + head. Each token's output of the head goes over the head's
 * v rows in conv, which no other task reads. */
static void recurrence_task(void *ctx, int64_t task, int thread) {
    const struct engine_task *tc = ctx;
    const struct engine *e = tc->e;
    const struct deltanet_scratch *dn = &e->dn;
    const struct model_hparams *hp = &e->m->hp;
    const int32_t Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank;
    const int32_t h = (int32_t)(task % Hv);
    const struct engine_seg *g = &e->seg[task / Hv];
    const int32_t D = hp->ssm_d_state, C = e->conv_ch, kh = h % Hk;
    const float scale = 1.0f / sqrtf((float)D);
    float *S = sequence_ssm(e->seqs[g->seq], e->rec_layer[tc->il]) + (size_t)h * D * D;
    float *delta = dn->delta + (size_t)thread * D;
    for (int32_t t = g->first; t < g->first + g->n; t++) {
        float *c = dn->conv + (size_t)t * C;
        const float *q = c + (size_t)kh * D, *k = c + (size_t)(Hk + kh) * D;
        float *v = c + (size_t)2 * Hk * D + (size_t)h * D;
        deltanet_head_token(S, q, k, v, ops_exp(dn->gate[(size_t)t * Hv + h]),
                            dn->beta[(size_t)t * Hv + h], delta, D, scale);
    }
}

int block_deltanet(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    struct deltanet_scratch *dn = &e->dn;
    const size_t E = (size_t)hp->n_embd, C = (size_t)e->conv_ch, V = (size_t)e->ssm_v_dim;
    const int32_t Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank, D = hp->ssm_d_state;
    float *qkv_rows = dn->qkv + (size_t)(hp->ssm_d_conv - 1) * C;
    const struct weight *ws[3] = {&l->ssm_qkv, &l->ssm_z, &l->ssm_beta};
    float *outs[3] = {qkv_rows, dn->z, dn->beta};
    const size_t strides[3] = {C, V, (size_t)Hv};
    int rc = engine_matmul_multi(e, ws, outs, strides, e->xn, n_tok, 3);
    if (rc < 0 || (rc = engine_matmul(e, &l->ssm_alpha, e->xn, E, dn->gate, (size_t)Hv, n_tok)) < 0)
        return rc;
    deltanet_gates(dn->beta, dn->gate, l->ssm_dt_bias, l->ssm_a, n_tok, Hv);
    for (int32_t i = 0; i < e->n_seg; i++)
        conv_seg(e, il, &e->seg[i]);
    for (int32_t t = 0; t < n_tok; t++)
        for (int32_t h = 0; h < 2 * Hk; h++) /* q heads then k heads */
            deltanet_l2_norm(dn->conv + (size_t)t * C + (size_t)h * D, D, hp->rms_eps);
    struct engine_task task = {.e = e, .il = il};
    threadpool_run(e->tp, (int64_t)e->n_seg * Hv, recurrence_task, &task);
    float *heads = dn->conv + (size_t)2 * Hk * D; /* the v rows, now the heads' output */
    for (int32_t t = 0; t < n_tok; t++)
        for (int32_t h = 0; h < Hv; h++)
            deltanet_gated_norm(heads + (size_t)t * C + (size_t)h * D,
                                dn->z + (size_t)t * V + (size_t)h * D, l->ssm_norm, D,
                                hp->rms_eps);
    return engine_matmul(e, &l->ssm_out, heads, C, e->y, E, n_tok);
}
