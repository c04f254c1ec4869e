/* block_attn.c - the attention mixer: q, k and v projections (with biases: gpt-oss), q/k head
 * norms (and V's without a weight: gemma4), RoPE on the first n_rot dimensions of each head (the
 * layer's own head size, KV heads, rotation and RoPE table: gemma4's window and global layers
 * differ), causal GQA over the KV rows of the
 * token's own sequence (the last n_swa positions in a sliding-window layer, read from its ring),
 * a sink logit per head in the softmax (gpt-oss), an optional output gate (sigmoid of per-head
 * gate rows interleaved with the query's in attn_q: qwen35), then attn_output (and its bias).
 * Scores and the weighted sum follow ggml's non-flash path per KV type (f32, f16 with the
 * probabilities rounded to f16, or q8_0/q4_0 with a q8_0 query), so a token's output does not
 * depend on the batch it ran in nor on the other sequences in it. */
#include <math.h>
#include <string.h>

#include "engine_impl.h"
#include "ops.h"
#include "quant.h"
#include "threadpool.h"

/* Stores kv_dim values of a K or V row (the layer's; the sequence's rows are e->kv_dim wide). */
static void kv_store(const struct engine *e, uint8_t *dst, const float *src, int64_t kv_dim) {
    const enum qtype t = e->p.kv_type;
    if (t == QTYPE_F32)
        memcpy(dst, src, (size_t)kv_dim * sizeof(float));
    else if (t == QTYPE_F16)
        quant_f16_from_f32(src, dst, kv_dim);
    else /* q8_0, q4_0: per head, as heads are multiples of the 32-element blocks */
        quant_quantize_row(t, src, dst, kv_dim);
}

static void rope(const struct model_hparams *hp, int32_t n_rot, float *x, const float *cs) {
    if (hp->rope == MODEL_ROPE_NEOX)
        ops_rope_neox(x, cs, n_rot);
    else
        ops_rope_norm(x, cs, n_rot);
}

/* Token t's RoPE table for layer l: the window layers' own when the model has one (gemma4). */
static const float *rope_table(const struct engine *e, const struct model_layer *l, int32_t t) {
    if (l->swa && e->m->hp.n_rot_swa > 0)
        return e->rope_cs_swa + (size_t)t * e->m->hp.n_rot_swa;
    return e->rope_cs + (size_t)t * e->m->hp.n_rot;
}

/* rows[t] += b for n_tok rows of n values, stride apart (ggml adds a bias after its product). */
static void add_bias(float *rows, size_t stride, const float *b, int64_t n, int32_t n_tok) {
    for (int32_t t = 0; t < n_tok; t++)
        ops_add(rows + (size_t)t * stride, b, n);
}

/* Gated layers: splits qg's per-head (query, gate) rows into q and, in place, the gate. */
static void split_gate(struct engine *e, int32_t n_tok) {
    const int32_t hd = e->m->hp.head_dim, nh = e->m->hp.n_head;
    for (int32_t t = 0; t < n_tok; t++) {
        const float *src = e->attn.qg + (size_t)t * 2 * e->q_dim;
        float *q = e->attn.q + (size_t)t * e->q_dim;
        float *g = e->attn.qg + (size_t)t * e->q_dim; /* packed in front, behind the reads */
        for (int32_t h = 0; h < nh; h++)
            memcpy(q + (size_t)h * hd, src + (size_t)2 * h * hd, (size_t)hd * sizeof(float));
        for (int32_t h = 0; h < nh; h++)
            memmove(g + (size_t)h * hd, src + (size_t)(2 * h + 1) * hd, (size_t)hd * sizeof(float));
    }
}

/* q/k head norms (and V's without a weight), each head on its own. */
static void qk_norm(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const int32_t hd = l->head_dim;
    for (int32_t t = 0; t < n_tok; t++) {
        for (int32_t h = 0; l->attn_q_norm && h < hp->n_head; h++) {
            float *qh = e->attn.q + (size_t)t * e->q_dim + (size_t)h * hd;
            ops_rms_norm(qh, qh, l->attn_q_norm, hd, hp->rms_eps);
        }
        for (int32_t h = 0; l->kv_src < 0 && h < l->n_head_kv; h++) {
            float *kh = e->attn.k + (size_t)t * e->kv_dim + (size_t)h * hd;
            float *vh = e->attn.v + (size_t)t * e->kv_dim + (size_t)h * hd;
            if (l->attn_k_norm)
                ops_rms_norm(kh, kh, l->attn_k_norm, hd, hp->rms_eps);
            if (l->v_norm)
                ops_rms_norm(vh, vh, NULL, hd, hp->rms_eps);
        }
    }
}

/* The trace points of layer l's q (a gated layer's, interleaved with its gate, are left out), k
 * and v rows, named q_op, k_op, v_op (NULL: not traced); k and v only where the layer keeps KV. */
static void qkv_trace(const struct engine *e, const struct model_layer *l, int32_t n_tok,
                      const char *q_op, const char *k_op, const char *v_op) {
    const int64_t q_n = (int64_t)e->m->hp.n_head * l->head_dim;
    const int64_t kv_n = (int64_t)l->n_head_kv * l->head_dim;
    if (l->mixer != MODEL_MIXER_ATTN_GATED)
        engine_trace(e, q_op, e->attn.q, n_tok, q_n, (size_t)e->q_dim);
    if (l->kv_src < 0 && k_op)
        engine_trace(e, k_op, e->attn.k, n_tok, kv_n, (size_t)e->kv_dim);
    if (l->kv_src < 0 && v_op)
        engine_trace(e, v_op, e->attn.v, n_tok, kv_n, (size_t)e->kv_dim);
}

/* RoPE of q and k, then each token's k and v go into its sequence's rows of layer il, at the
 * token's position (a layer reading another's KV only prepares its queries). */
static void rope_store(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const int32_t hd = l->head_dim, kv_il = e->kv_layer[il];
    const int64_t kv_dim = (int64_t)l->n_head_kv * hd;
    for (int32_t t = 0; t < n_tok; t++) {
        const float *cs = rope_table(e, l, t);
        for (int32_t h = 0; h < hp->n_head; h++)
            rope(hp, l->n_rot, e->attn.q + (size_t)t * e->q_dim + (size_t)h * hd, cs);
        if (l->kv_src >= 0)
            continue;
        for (int32_t h = 0; h < l->n_head_kv; h++)
            rope(hp, l->n_rot, e->attn.k + (size_t)t * e->kv_dim + (size_t)h * hd, cs);
        const struct sequence *seq = engine_tok_seq(e, t);
        const int32_t pos = e->tok_pos[t];
        kv_store(e, sequence_k_row(seq, kv_il, pos), e->attn.k + (size_t)t * e->kv_dim, kv_dim);
        kv_store(e, sequence_v_row(seq, kv_il, pos), e->attn.v + (size_t)t * e->kv_dim, kv_dim);
    }
}

/* The positions query token t of layer il sees: first .. pos (its window in a window layer). */
static int32_t attn_first(const struct engine *e, int il, int32_t t) {
    const int32_t pos = e->tok_pos[t], n_swa = e->m->hp.n_swa;
    return e->m->layers[il].swa && pos - n_swa + 1 > 0 ? pos - n_swa + 1 : 0;
}

/* Walks a layer's rows position by position from `first`, wrapping around a ring. */
struct kv_walk {
    const uint8_t *base;
    size_t bytes;
    int32_t rows, row;
};

static const uint8_t *kv_walk_next(struct kv_walk *w) {
    const uint8_t *p = w->base + (size_t)w->row * w->bytes;
    if (++w->row == w->rows)
        w->row = 0;
    return p;
}

/* Contract in engine_impl.h: attn_task's arithmetic, unchanged, for any caller. */
void attn_head(const struct attn_head *a, float *out, float *s, void *qbuf, float *vrow) {
    const int32_t hd = a->head_dim, n_kv = a->n_kv;
    struct kv_walk kw = {a->k, a->row_bytes, a->rows, a->first % a->rows};
    struct kv_walk vw = {a->v, a->row_bytes, a->rows, a->first % a->rows};
    memset(out, 0, (size_t)hd * sizeof(float));
    if (a->kv_type == QTYPE_F32) {
        quant_vec_dot_fn dot = quant_kernels(QTYPE_F32)->vec_dot;
        for (int32_t j = 0; j < n_kv; j++) {
            dot(hd, &s[j], kv_walk_next(&kw), a->q);
            s[j] *= a->scale;
        }
        ops_softmax_sink(s, n_kv, a->sink);
        for (int32_t j = 0; j < n_kv; j++)
            ops_axpy_f32(out, s[j], (const float *)kv_walk_next(&vw), hd);
    } else if (a->kv_type != QTYPE_F16) { /* q8_0, q4_0: not llama.cpp's path (it needs -fa) */
        const struct quant_kernels *qk = quant_kernels(a->kv_type);
        qk->from_float(a->q, qbuf, hd);
        for (int32_t j = 0; j < n_kv; j++) {
            qk->vec_dot(hd, &s[j], kv_walk_next(&kw), qbuf);
            s[j] *= a->scale;
        }
        ops_softmax_sink(s, n_kv, a->sink);
        for (int32_t j = 0; j < n_kv; j++) {
            quant_dequantize_row(a->kv_type, kv_walk_next(&vw), vrow, hd);
            ops_axpy_f32(out, s[j], vrow, hd);
        }
    } else {
        quant_vec_dot_fn dot = quant_kernels(QTYPE_F16)->vec_dot;
        fp16_t *q16 = qbuf;
        quant_f16_from_f32(a->q, q16, hd);
        for (int32_t j = 0; j < n_kv; j++) {
            dot(hd, &s[j], kv_walk_next(&kw), q16);
            s[j] *= a->scale;
        }
        ops_softmax_sink(s, n_kv, a->sink);
        for (int32_t j = 0; j < n_kv; j++) {
            const float pj = fp16_to_f32(f32_to_fp16(s[j])); /* ggml rounds kq to f16 for V */
            ops_axpy_f16(out, pj, (const fp16_t *)kv_walk_next(&vw), hd);
        }
    }
}

/* One (token, head) of causal attention over the token's sequence's cache, in the layer of ctx
 * (a struct engine_task): task = t * n_head + h. */
static void attn_task(void *ctx, int64_t task, int thread) {
    const struct engine_task *c = ctx;
    const struct engine *e = c->e;
    const struct attn_scratch *a = &e->attn;
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[c->il];
    const int32_t hd = l->head_dim;
    const int32_t t = (int32_t)(task / hp->n_head), h = (int32_t)(task % hp->n_head);
    const int32_t g = h / (hp->n_head / l->n_head_kv);
    const struct sequence *seq = engine_tok_seq(e, t);
    const int32_t first = attn_first(e, c->il, t);
    const int32_t kv_il = e->kv_layer[c->il];
    uint64_t head_bytes = 0; /* a head's bytes in the KV type (heads are whole blocks) */
    qtype_row_bytes(e->p.kv_type, (uint64_t)hd, &head_bytes);
    const size_t head_off = (size_t)g * (size_t)head_bytes;
    const struct attn_head ah = {
        .kv_type = e->p.kv_type,
        .q = a->q + (size_t)t * e->q_dim + (size_t)h * hd,
        .k = sequence_k_row(seq, kv_il, 0) + head_off,
        .v = sequence_v_row(seq, kv_il, 0) + head_off,
        .row_bytes = seq->kv_row_bytes,
        .rows = seq->rows[kv_il],
        .first = first,
        .n_kv = e->tok_pos[t] + 1 - first,
        .head_dim = hd,
        .scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hd),
        .sink = l->attn_sinks ? l->attn_sinks[h] : -INFINITY,
    };
    /* q16 holds hd halves, or the hd/32 q8_0 blocks of 34 bytes (which fit in 2 hd bytes) */
    attn_head(&ah, a->heads + (size_t)t * e->q_dim + (size_t)h * hd,
              a->scores + (size_t)thread * e->p.n_ctx, a->q16 + (size_t)thread * hd,
              a->vrow + (size_t)thread * hd);
}

int block_attn(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    struct attn_scratch *a = &e->attn;
    const size_t D = (size_t)hp->n_embd;
    const bool gated = l->mixer == MODEL_MIXER_ATTN_GATED;
    const struct weight *ws[3] = {&l->wq, &l->wk, &l->wv};
    float *outs[3] = {gated ? a->qg : a->q, a->k, a->v};
    const size_t strides[3] = {(size_t)(gated ? 2 : 1) * e->q_dim, (size_t)e->kv_dim,
                               (size_t)e->kv_dim};
    /* q only in a layer reading another's KV; q and k where V is K's projection (gemma4) */
    const int n_proj = l->kv_src >= 0 ? 1 : l->wv.data ? 3 : 2;
    int rc = engine_matmul_multi(e, ws, outs, strides, e->xn, n_tok, n_proj);
    if (rc < 0)
        return rc;
    if (n_proj == 2)
        memcpy(a->v, a->k, (size_t)n_tok * (size_t)e->kv_dim * sizeof(float));
    const float *const biases[3] = {l->bq, l->bk, l->bv};
    for (int i = 0; i < 3; i++)
        if (biases[i])
            add_bias(outs[i], strides[i], biases[i], ws[i]->n_out, n_tok);
    if (gated)
        split_gate(e, n_tok);
    qkv_trace(e, l, n_tok, "q", "k", l->wv.data ? "v" : NULL);
    qk_norm(e, il, n_tok);
    qkv_trace(e, l, n_tok, "q_norm", "k_norm", "v_norm");
    rope_store(e, il, n_tok);
    qkv_trace(e, l, n_tok, "q_rope", "k_rope", NULL);
    struct engine_task task = {.e = e, .il = il};
    threadpool_run(e->tp, (int64_t)n_tok * hp->n_head, attn_task, &task);
    if (gated) /* out * sigmoid(gate), elementwise */
        for (size_t i = 0; i < (size_t)n_tok * e->q_dim; i++)
            a->heads[i] = a->heads[i] * (1.0f / (1.0f + ops_exp(-a->qg[i])));
    engine_trace(e, "attn", a->heads, n_tok, (int64_t)hp->n_head * l->head_dim,
                 (size_t)e->q_dim);
    if ((rc = engine_matmul(e, &l->wo, a->heads, (size_t)e->q_dim, e->y, D, n_tok)) < 0)
        return rc;
    if (l->bo)
        add_bias(e->y, D, l->bo, (int64_t)D, n_tok);
    engine_trace(e, "attn_out", e->y, n_tok, (int64_t)D, D);
    return 0;
}
