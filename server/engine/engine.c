/* engine.c - the forward pass of qwen3moe, qwen3 and llama over a batch of tokens, with the KV
 * cache of one sequence. Invariants: every buffer is sized in engine_new for n_batch tokens, so
 * engine_eval never allocates; each output value is one vec_dot of a weight row and a quantized
 * activation row, so a token's logits do not depend on how the prompt was split into batches; the
 * order of float operations follows ggml's graph for these architectures (see ops.h). */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "expert_cache.h"
#include "fault.h"
#include "matmul.h"
#include "ops.h"
#include "quant.h"
#include "threadpool.h"

#define ENGINE_ACT_SLOTS 3

struct engine {
    const struct model *m;
    struct engine_params p;
    struct threadpool *tp;
    struct matmul mm;
    int32_t n_past;
    int32_t q_dim, kv_dim, n_ff_max, k_used; /* k_used: experts per token (1 for dense) */

    /* KV cache [n_layer][n_ctx][kv_dim] of p.kv_type */
    size_t kv_row_bytes;  /* one position's K (or V) row: kv_dim elements of p.kv_type */
    size_t kv_head_bytes; /* one head's part of it: head_dim elements */
    uint8_t *k_cache, *v_cache;
    size_t kv_bytes;

    /* scratch, sized for n_batch tokens (rows) */
    float *x;      /* [B][n_embd] residual stream */
    float *xn;     /* [B][n_embd] normalised input of a block */
    float *q;      /* [B][q_dim] */
    float *k;      /* [B][kv_dim] */
    float *v;      /* [B][kv_dim] */
    float *attn;   /* [B][q_dim] attention output before wo */
    float *tmp;    /* [B][n_embd] block output */
    float *ffn_g;  /* [B*k_used][n_ff_max] */
    float *ffn_u;  /* [B*k_used][n_ff_max] */
    float *ffn_d;  /* [B*k_used][n_embd] */
    uint8_t *act[ENGINE_ACT_SLOTS]; /* quantized activation rows (see engine_alloc_all) */
    float *router;   /* [B][n_expert] */
    int32_t *sel;    /* [B][k_used] chosen experts, best first */
    float *sel_w;    /* [B][k_used] their renormalised weights */
    int32_t *exp_n;  /* [n_expert] tokens routed to each expert in this batch */
    int32_t *exp_tok;/* [n_expert][B] activation row (token) of each */
    int32_t *exp_out;/* [n_expert][B] output row (token * k_used + slot) of each */
    int32_t *fetch_ids;             /* [n_expert] experts routed to in this batch */
    const uint8_t **exp_mat;        /* [n_expert * 3] their gate, up, down matrices, by expert */
    int32_t *guess_n;   /* [n_expert] prefetch votes, then the experts still to compute */
    int32_t *guess_ids; /* [n_expert] prefetch guesses, then the experts ready to compute */
    struct expert_cache *experts;   /* borrowed; NULL: experts resident in the model image */
    engine_route_fn route_fn;       /* optional observer of each layer's routed experts */
    void *route_ctx;
    float *rope_cs;  /* [B][n_rot] */
    float *scores;   /* [n_threads][n_ctx] attention scores per thread */
    fp16_t *q16;     /* [n_threads][head_dim] query as fp16 (f16 KV) or q8_0 (q8_0/q4_0 KV) */
    float *vrow;     /* [n_threads][head_dim] a quantized V row, dequantized */
    fp16_t *p16;     /* [n_threads][n_ctx] probabilities as fp16 (f16 KV) */
    size_t scratch_bytes;

    /* per-layer state for the attention tasks */
    int attn_layer;
    int32_t attn_n_tok;
};

struct engine_params engine_params_default(void) {
    return (struct engine_params){.n_threads = 0, .n_ctx = 0, .n_batch = 512,
                                  .kv_type = QTYPE_F16, .prefetch = ENGINE_PREFETCH_PREFILL};
}

/* ---- creation -------------------------------------------------------------------------------- */

static void *engine_alloc(struct engine *e, size_t n, size_t size) {
    void *p = NULL;
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        return NULL;
    bytes = (bytes + 63) & ~(size_t)63;
    if (fault_hit(FAULT_ALLOC) || posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    memset(p, 0, bytes);
    e->scratch_bytes += bytes;
    return p;
}

/* Checks that a weight's type has kernels. */
static int engine_check_weight(const struct weight *w, const char *what, char *err, size_t err_len) {
    if (!w->data)
        return 0;
    if (!quant_kernels(w->type)) {
        err_set(err, err_len, "engine: tensor \"%s\" has type %s, which has no kernels yet",
                w->tensor ? w->tensor->name : what, qtype_name(w->type));
        return -ENOTSUP;
    }
    return 0;
}

static int engine_check_weights(const struct model *m, char *err, size_t err_len) {
    if (!quant_can_dequantize(m->tok_embd.type)) {
        err_set(err, err_len, "engine: token_embd has type %s, which cannot be read yet",
                qtype_name(m->tok_embd.type));
        return -ENOTSUP;
    }
    if (engine_check_weight(&m->output, "output", err, err_len) < 0)
        return -ENOTSUP;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct model_layer *l = &m->layers[il];
        const struct weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate_inp,
                                     &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
                                     &l->ffn_gate, &l->ffn_up, &l->ffn_down};
        for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
            if (engine_check_weight(ws[i], "weight", err, err_len) < 0)
                return -ENOTSUP;
    }
    return 0;
}

static int engine_alloc_all(struct engine *e) {
    const struct model_hparams *hp = &e->m->hp;
    size_t B = (size_t)e->p.n_batch, K = (size_t)e->k_used, T = (size_t)e->p.n_threads;
    size_t n_embd = (size_t)hp->n_embd;
    size_t ne = (size_t)hp->n_expert > 0 ? (size_t)hp->n_expert : 1;
    /* activation rows in their widest format (f32: 4 bytes an element) plus row alignment:
     * slot 0 holds x, the attention output or the dense FFN's hidden rows; slot 1 x; slot 2 x or
     * the experts' hidden rows (B * K of them) */
    size_t wide = n_embd > (size_t)e->q_dim ? n_embd : (size_t)e->q_dim;
    if (hp->n_expert == 0 && (size_t)hp->n_ff > wide)
        wide = (size_t)hp->n_ff;
    size_t slot_bytes[ENGINE_ACT_SLOTS] = {B * (wide * 4 + 64), B * (n_embd * 4 + 64),
                                           B * (n_embd * 4 + 64)};
    if (hp->n_expert > 0 && B * K * ((size_t)hp->n_ff_exp * 4 + 64) > slot_bytes[2])
        slot_bytes[2] = B * K * ((size_t)hp->n_ff_exp * 4 + 64);
    e->x = engine_alloc(e, B * n_embd, sizeof(float));
    e->xn = engine_alloc(e, B * n_embd, sizeof(float));
    e->q = engine_alloc(e, B * (size_t)e->q_dim, sizeof(float));
    e->k = engine_alloc(e, B * (size_t)e->kv_dim, sizeof(float));
    e->v = engine_alloc(e, B * (size_t)e->kv_dim, sizeof(float));
    e->attn = engine_alloc(e, B * (size_t)e->q_dim, sizeof(float));
    e->tmp = engine_alloc(e, B * n_embd, sizeof(float));
    e->ffn_g = engine_alloc(e, B * K * (size_t)e->n_ff_max, sizeof(float));
    e->ffn_u = engine_alloc(e, B * K * (size_t)e->n_ff_max, sizeof(float));
    e->ffn_d = engine_alloc(e, B * K * n_embd, sizeof(float));
    for (int i = 0; i < ENGINE_ACT_SLOTS; i++)
        if (!(e->act[i] = engine_alloc(e, slot_bytes[i], 1)))
            return -ENOMEM;
    e->router = engine_alloc(e, B * ne, sizeof(float));
    e->sel = engine_alloc(e, B * K, sizeof(int32_t));
    e->sel_w = engine_alloc(e, B * K, sizeof(float));
    e->exp_n = engine_alloc(e, ne, sizeof(int32_t));
    e->exp_tok = engine_alloc(e, ne * B, sizeof(int32_t));
    e->exp_out = engine_alloc(e, ne * B, sizeof(int32_t));
    e->fetch_ids = engine_alloc(e, ne, sizeof(int32_t));
    e->guess_n = engine_alloc(e, ne, sizeof(int32_t));
    e->guess_ids = engine_alloc(e, ne, sizeof(int32_t));
    e->exp_mat = engine_alloc(e, ne * 3, sizeof(*e->exp_mat));
    e->rope_cs = engine_alloc(e, B * (size_t)hp->n_rot, sizeof(float));
    e->scores = engine_alloc(e, T * (size_t)e->p.n_ctx, sizeof(float));
    e->vrow = engine_alloc(e, T * (size_t)hp->head_dim, sizeof(float));
    e->q16 = engine_alloc(e, T * (size_t)hp->head_dim, sizeof(fp16_t));
    e->p16 = engine_alloc(e, T * (size_t)e->p.n_ctx, sizeof(fp16_t));
    if (!e->x || !e->xn || !e->q || !e->k || !e->v || !e->attn || !e->tmp || !e->ffn_g ||
        !e->ffn_u || !e->ffn_d || !e->router || !e->sel || !e->sel_w || !e->exp_n || !e->exp_tok ||
        !e->exp_out || !e->fetch_ids || !e->exp_mat || !e->guess_n || !e->guess_ids || !e->rope_cs ||
        !e->scores || !e->q16 || !e->p16 || !e->vrow)
        return -ENOMEM;
    uint64_t row = 0, head = 0;
    qtype_row_bytes(e->p.kv_type, (uint64_t)e->kv_dim, &row);
    qtype_row_bytes(e->p.kv_type, (uint64_t)hp->head_dim, &head);
    e->kv_row_bytes = (size_t)row;
    e->kv_head_bytes = (size_t)head;
    const size_t bytes = (size_t)hp->n_layer * (size_t)e->p.n_ctx * e->kv_row_bytes;
    e->kv_bytes = 2 * bytes;
    if (fault_hit(FAULT_ALLOC) || posix_memalign((void **)&e->k_cache, 64, bytes) != 0) {
        e->k_cache = NULL;
        return -ENOMEM;
    }
    if (fault_hit(FAULT_ALLOC) || posix_memalign((void **)&e->v_cache, 64, bytes) != 0) {
        e->v_cache = NULL;
        return -ENOMEM;
    }
    /* touched now, so the resident set is flat from the start (a RAM budget counts it) */
    memset(e->k_cache, 0, bytes);
    memset(e->v_cache, 0, bytes);
    return 0;
}

struct engine *engine_new(const struct model *m, const struct engine_params *p, char *err,
                          size_t err_len) {
    const struct model_hparams *hp = &m->hp;
    struct engine *e = calloc(1, sizeof(*e));
    if (!e) {
        err_set(err, err_len, "engine: out of memory");
        return NULL;
    }
    e->m = m;
    e->p = p ? *p : engine_params_default();
    const enum qtype kt = e->p.kv_type;
    if (kt != QTYPE_F32 && kt != QTYPE_F16 && kt != QTYPE_Q8_0 && kt != QTYPE_Q4_0) {
        err_set(err, err_len, "engine: kv type %s is not supported (f32, f16, q8_0, q4_0)",
                qtype_name(kt));
        goto err;
    }
    if ((kt == QTYPE_Q8_0 || kt == QTYPE_Q4_0) && hp->head_dim % 32 != 0) {
        err_set(err, err_len, "engine: kv type %s needs a head size that is a multiple of 32 "
                "(this model's is %d)", qtype_name(kt), hp->head_dim);
        goto err;
    }
    if (e->p.n_ctx <= 0)
        e->p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (e->p.n_batch <= 0)
        e->p.n_batch = 512;
    if (e->p.moe_top_k < 0 || (hp->n_expert > 0 && e->p.moe_top_k > hp->n_expert_used) ||
        !(e->p.cache_bias >= 0.0f && e->p.cache_bias <= 1.0f)) {
        err_set(err, err_len, "engine: experts per token %d (1..%d) or cache bias %g (0..1) out of "
                "range", e->p.moe_top_k, hp->n_expert_used, (double)e->p.cache_bias);
        goto err;
    }
    if (e->p.n_ctx > (1 << 24) || e->p.n_batch > 4096) {
        err_set(err, err_len, "engine: context %d or batch %d too large", e->p.n_ctx,
                e->p.n_batch);
        goto err;
    }
    if (engine_check_weights(m, err, err_len) < 0)
        goto err;
    e->tp = threadpool_new(e->p.n_threads);
    if (!e->tp) {
        err_set(err, err_len, "engine: cannot start %d threads", e->p.n_threads);
        goto err;
    }
    e->p.n_threads = threadpool_n_threads(e->tp);
    e->q_dim = hp->n_head * hp->head_dim;
    e->kv_dim = hp->n_head_kv * hp->head_dim;
    e->k_used = hp->n_expert > 0 ? (e->p.moe_top_k > 0 ? e->p.moe_top_k : hp->n_expert_used) : 1;
    e->n_ff_max = hp->n_expert > 0 ? hp->n_ff_exp : hp->n_ff;
    int max_jobs = 2 * (hp->n_expert > 0 ? hp->n_expert : 1) + 8;
    if (matmul_init(&e->mm, e->tp, max_jobs) < 0 || engine_alloc_all(e) < 0) {
        err_set(err, err_len, "engine: out of memory for buffers (context %d, batch %d)",
                e->p.n_ctx, e->p.n_batch);
        goto err;
    }
    return e;
err:
    engine_free(e);
    return NULL;
}

void engine_free(struct engine *e) {
    if (!e)
        return;
    threadpool_free(e->tp);
    matmul_release(&e->mm);
    void *bufs[] = {e->x, e->xn, e->q, e->k, e->v, e->attn, e->tmp, e->ffn_g, e->ffn_u, e->ffn_d,
                    e->act[0], e->act[1], e->act[2], e->router, e->sel, e->sel_w, e->exp_n,
                    e->exp_tok, e->exp_out, (void *)e->fetch_ids, e->guess_n, e->guess_ids,
                    (void *)e->exp_mat, e->rope_cs, e->scores, e->q16, e->p16, e->vrow, e->k_cache,
                    e->v_cache};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    free(e);
}

int32_t engine_n_past(const struct engine *e) { return e->n_past; }
int32_t engine_n_ctx(const struct engine *e) { return e->p.n_ctx; }
int engine_n_threads(const struct engine *e) { return e->p.n_threads; }
int32_t engine_n_batch(const struct engine *e) { return e->p.n_batch; }
size_t engine_kv_bytes(const struct engine *e) { return e->kv_bytes; }
size_t engine_scratch_bytes(const struct engine *e) { return e->scratch_bytes; }

void engine_truncate(struct engine *e, int32_t n) {
    if (n >= 0 && n < e->n_past)
        e->n_past = n;
}

/* ---- KV cache access -------------------------------------------------------------------------- */

struct engine_kv_shape engine_kv_shape(const struct engine *e) {
    return (struct engine_kv_shape){.type = e->p.kv_type, .n_layer = e->m->hp.n_layer,
                                    .kv_dim = e->kv_dim, .n_ctx = e->p.n_ctx,
                                    .row_bytes = e->kv_row_bytes};
}

/* Layer il's rows start at cell il * n_ctx: positions 0 .. n-1 are contiguous. */
static size_t kv_layer_off(const struct engine *e, int32_t il) {
    return (size_t)il * (size_t)e->p.n_ctx * e->kv_row_bytes;
}

int engine_kv_export(const struct engine *e, int32_t il, int32_t n, void *k, void *v) {
    if (il < 0 || il >= e->m->hp.n_layer || n < 0 || n > e->n_past)
        return -EINVAL;
    size_t bytes = (size_t)n * e->kv_row_bytes;
    if (k && bytes)
        memcpy(k, e->k_cache + kv_layer_off(e, il), bytes);
    if (v && bytes)
        memcpy(v, e->v_cache + kv_layer_off(e, il), bytes);
    return 0;
}

int engine_kv_import(struct engine *e, int32_t il, enum qtype type, int32_t kv_dim, int32_t n,
                     const void *k, const void *v) {
    if (type != e->p.kv_type || kv_dim != e->kv_dim || il < 0 || il >= e->m->hp.n_layer ||
        n < 0 || n > e->p.n_ctx)
        return -EINVAL;
    e->n_past = 0;
    size_t bytes = (size_t)n * e->kv_row_bytes;
    if (k && bytes)
        memcpy(e->k_cache + kv_layer_off(e, il), k, bytes);
    if (v && bytes)
        memcpy(e->v_cache + kv_layer_off(e, il), v, bytes);
    return 0;
}

int engine_kv_commit(struct engine *e, int32_t n) {
    if (n < 0 || n > e->p.n_ctx)
        return -EINVAL;
    e->n_past = n;
    return 0;
}

/* ---- matrix products ------------------------------------------------------------------------- */

/* Quantizes n_tok rows of x (n wide, x_stride apart) for w's type into act slot; returns the rows'
 * stride. */
static size_t engine_quantize(struct engine *e, int slot, enum qtype wtype, const float *x,
                              size_t x_stride, int32_t n_tok, int64_t n) {
    size_t stride = 0;
    matmul_quantize(wtype, x, x_stride, n_tok, n, e->act[slot], &stride);
    return stride;
}

/* Queues out[t] = M * act[t] for n_tok rows, M being one matrix of w's shape and type at data. */
static void engine_queue(struct engine *e, const struct weight *w, const uint8_t *data,
                         const uint8_t *act, size_t act_stride, const int32_t *act_idx, float *out,
                         size_t out_stride, const int32_t *out_idx, int32_t n_tok) {
    struct matmul_job job = {
        .k = quant_kernels(w->type),
        .w = data,
        .row_bytes = w->row_bytes,
        .n_in = w->n_in,
        .n_rows = w->n_out,
        .act = act,
        .act_stride = act_stride,
        .act_idx = act_idx,
        .out = out,
        .out_stride = out_stride,
        .out_idx = out_idx,
        .n_tok = n_tok,
    };
    matmul_add(&e->mm, &job);
}

/* out[t] = W * x[t] for n_tok rows, in one dispatch. */
static void engine_matmul(struct engine *e, const struct weight *w, const float *x, size_t x_stride,
                          float *out, size_t out_stride, int32_t n_tok) {
    size_t as = engine_quantize(e, 0, w->type, x, x_stride, n_tok, w->n_in);
    engine_queue(e, w, w->data, e->act[0], as, NULL, out, out_stride, NULL, n_tok);
    matmul_run(&e->mm);
}

/* ---- attention ------------------------------------------------------------------------------- */

static uint8_t *kv_at(const struct engine *e, uint8_t *cache, int il, int32_t pos) {
    return cache + ((size_t)il * (size_t)e->p.n_ctx + (size_t)pos) * e->kv_row_bytes;
}

static void kv_store(struct engine *e, uint8_t *dst, const float *src) {
    if (e->p.kv_type == QTYPE_F32)
        memcpy(dst, src, (size_t)e->kv_dim * sizeof(float));
    else if (e->p.kv_type == QTYPE_F16)
        quant_f16_from_f32(src, dst, e->kv_dim);
    else /* q8_0, q4_0: per head, as heads are multiples of the 32-element blocks */
        quant_quantize_row(e->p.kv_type, src, dst, e->kv_dim);
}

/* q/k head norms, RoPE, then the batch's k and v go into the cache. */
static void engine_qk_rope_store(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const int32_t hd = hp->head_dim;
    for (int32_t t = 0; t < n_tok; t++) {
        const float *cs = e->rope_cs + (size_t)t * hp->n_rot;
        for (int32_t h = 0; h < hp->n_head; h++) {
            float *qh = e->q + (size_t)t * e->q_dim + (size_t)h * hd;
            if (l->attn_q_norm)
                ops_rms_norm(qh, qh, l->attn_q_norm, hd, hp->rms_eps);
            if (hp->rope == MODEL_ROPE_NEOX)
                ops_rope_neox(qh, cs, hp->n_rot);
            else
                ops_rope_norm(qh, cs, hp->n_rot);
        }
        for (int32_t h = 0; h < hp->n_head_kv; h++) {
            float *kh = e->k + (size_t)t * e->kv_dim + (size_t)h * hd;
            if (l->attn_k_norm)
                ops_rms_norm(kh, kh, l->attn_k_norm, hd, hp->rms_eps);
            if (hp->rope == MODEL_ROPE_NEOX)
                ops_rope_neox(kh, cs, hp->n_rot);
            else
                ops_rope_norm(kh, cs, hp->n_rot);
        }
        int32_t pos = e->n_past + t;
        kv_store(e, kv_at(e, e->k_cache, il, pos), e->k + (size_t)t * e->kv_dim);
        kv_store(e, kv_at(e, e->v_cache, il, pos), e->v + (size_t)t * e->kv_dim);
    }
}

/* One (token, head) of causal attention over the cache: task = t * n_head + h. */
static void engine_attn_task(void *ctx, int64_t task, int thread) {
    struct engine *e = ctx;
    const struct model_hparams *hp = &e->m->hp;
    const int32_t hd = hp->head_dim;
    const int32_t t = (int32_t)(task / hp->n_head), h = (int32_t)(task % hp->n_head);
    const int32_t g = h / (hp->n_head / hp->n_head_kv);
    const int32_t n_kv = e->n_past + t + 1;
    const int il = e->attn_layer;
    const float scale = 1.0f / sqrtf((float)hd);
    const float *qh = e->q + (size_t)t * e->q_dim + (size_t)h * hd;
    float *s = e->scores + (size_t)thread * e->p.n_ctx;
    float *out = e->attn + (size_t)t * e->q_dim + (size_t)h * hd;
    const size_t head_off = (size_t)g * e->kv_head_bytes;
    const size_t pos_bytes = e->kv_row_bytes;
    const uint8_t *kc = kv_at(e, e->k_cache, il, 0) + head_off;
    const uint8_t *vc = kv_at(e, e->v_cache, il, 0) + head_off;
    memset(out, 0, (size_t)hd * sizeof(float));
    if (e->p.kv_type == QTYPE_F32) {
        quant_vec_dot_fn dot = quant_kernels(QTYPE_F32)->vec_dot;
        for (int32_t j = 0; j < n_kv; j++) {
            dot(hd, &s[j], kc + (size_t)j * pos_bytes, qh);
            s[j] *= scale;
        }
        ops_softmax(s, n_kv);
        for (int32_t j = 0; j < n_kv; j++)
            ops_axpy_f32(out, s[j], (const float *)(vc + (size_t)j * pos_bytes), hd);
    } else if (e->p.kv_type != QTYPE_F16) { /* q8_0, q4_0: not llama.cpp's path (it needs -fa) */
        const struct quant_kernels *qk = quant_kernels(e->p.kv_type);
        uint8_t *qq = (uint8_t *)(e->q16 + (size_t)thread * hd); /* hd/32 blocks fit in 2*hd */
        float *vr = e->vrow + (size_t)thread * hd;
        qk->from_float(qh, qq, hd);
        for (int32_t j = 0; j < n_kv; j++) {
            qk->vec_dot(hd, &s[j], kc + (size_t)j * pos_bytes, qq);
            s[j] *= scale;
        }
        ops_softmax(s, n_kv);
        for (int32_t j = 0; j < n_kv; j++) {
            quant_dequantize_row(e->p.kv_type, vc + (size_t)j * pos_bytes, vr, hd);
            ops_axpy_f32(out, s[j], vr, hd);
        }
    } else {
        quant_vec_dot_fn dot = quant_kernels(QTYPE_F16)->vec_dot;
        fp16_t *q16 = e->q16 + (size_t)thread * hd;
        quant_f16_from_f32(qh, q16, hd);
        for (int32_t j = 0; j < n_kv; j++) {
            dot(hd, &s[j], kc + (size_t)j * pos_bytes, q16);
            s[j] *= scale;
        }
        ops_softmax(s, n_kv);
        for (int32_t j = 0; j < n_kv; j++) {
            const float pj = fp16_to_f32(f32_to_fp16(s[j])); /* ggml rounds kq to f16 for V */
            ops_axpy_f16(out, pj, (const fp16_t *)(vc + (size_t)j * pos_bytes), hd);
        }
    }
}

/* x += attention(x) for the batch's n_tok tokens in layer il. */
static void engine_attention(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const size_t D = (size_t)hp->n_embd;
    for (int32_t t = 0; t < n_tok; t++)
        ops_rms_norm(e->xn + t * D, e->x + t * D, l->attn_norm, hp->n_embd, hp->rms_eps);
    /* q, k and v in one dispatch; their activation formats may differ (e.g. q4_K vs q5_0) */
    const struct weight *ws[3] = {&l->wq, &l->wk, &l->wv};
    float *outs[3] = {e->q, e->k, e->v};
    size_t out_strides[3] = {(size_t)e->q_dim, (size_t)e->kv_dim, (size_t)e->kv_dim};
    size_t strides[3];
    int slot_of[3];
    for (int i = 0; i < 3; i++) {
        slot_of[i] = i;
        for (int j = 0; j < i; j++)
            if (quant_kernels(ws[j]->type)->vec_dot_type == quant_kernels(ws[i]->type)->vec_dot_type) {
                slot_of[i] = slot_of[j];
                break;
            }
        if (slot_of[i] == i)
            strides[i] = engine_quantize(e, i, ws[i]->type, e->xn, D, n_tok, hp->n_embd);
        else
            strides[i] = strides[slot_of[i]];
        engine_queue(e, ws[i], ws[i]->data, e->act[slot_of[i]], strides[i], NULL, outs[i], out_strides[i],
                     NULL, n_tok);
    }
    matmul_run(&e->mm);
    engine_qk_rope_store(e, il, n_tok);
    e->attn_layer = il;
    e->attn_n_tok = n_tok;
    threadpool_run(e->tp, (int64_t)n_tok * hp->n_head, engine_attn_task, e);
    engine_matmul(e, &l->wo, e->attn, (size_t)e->q_dim, e->tmp, D, n_tok);
    for (size_t i = 0; i < (size_t)n_tok * D; i++)
        e->x[i] = e->tmp[i] + e->x[i];
}

/* ---- feed-forward ---------------------------------------------------------------------------- */

/* The dense FFN of layer il: resident, or streamed through the expert cache as the layer's one
 * expert. The next layer's is prefetched, after the last layer the first's for the next step: a
 * guess that is always right but for the last step. */
static int engine_ffn_dense(struct engine *e, int il, int32_t n_tok) {
    const struct model_layer *l = &e->m->layers[il];
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    const uint8_t *mat[3] = {l->ffn_gate.data, l->ffn_up.data, l->ffn_down.data};
    if (e->experts) {
        const int32_t only = 0;
        int rc = expert_cache_begin(e->experts, il, &only, 1);
        if (rc == 0)
            expert_cache_prefetch(e->experts, (il + 1) % hp->n_layer, &only, 1);
        if (rc < 0 || (rc = expert_cache_get(e->experts, 0, mat, true)) < 0)
            return rc;
    }
    size_t sg = engine_quantize(e, 0, l->ffn_gate.type, e->xn, D, n_tok, hp->n_embd);
    const uint8_t *au = e->act[0];
    size_t su = sg;
    if (quant_kernels(l->ffn_up.type)->vec_dot_type != quant_kernels(l->ffn_gate.type)->vec_dot_type) {
        su = engine_quantize(e, 1, l->ffn_up.type, e->xn, D, n_tok, hp->n_embd);
        au = e->act[1];
    }
    engine_queue(e, &l->ffn_gate, mat[0], e->act[0], sg, NULL, e->ffn_g, F, NULL, n_tok);
    engine_queue(e, &l->ffn_up, mat[1], au, su, NULL, e->ffn_u, F, NULL, n_tok);
    matmul_run(&e->mm);
    ops_swiglu(e->ffn_g, e->ffn_g, e->ffn_u, (int64_t)n_tok * F);
    size_t sd = engine_quantize(e, 0, l->ffn_down.type, e->ffn_g, F, n_tok, hp->n_ff);
    engine_queue(e, &l->ffn_down, mat[2], e->act[0], sd, NULL, e->tmp, D, NULL, n_tok);
    matmul_run(&e->mm);
    return 0;
}

/* Top k of n logits into sel, best first; ties go to the lower index (as ggml's top-k). One pass,
 * inserting into the short sorted list. */
static void engine_top_k(const float *p, int32_t n, int32_t k, int32_t *sel) {
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
 * probable resident expert outside the selection with at least cache_bias times its probability.
 * Lossy (the model computes with other experts than it chose); off by default. */
static void engine_bias_to_cache(const struct engine *e, int il, const float *p, int32_t *sel) {
    const int32_t ne = e->m->hp.n_expert, k = e->k_used;
    for (int32_t i = 0; i < k; i++) {
        if (expert_cache_resident(e->experts, il, sel[i]))
            continue;
        int32_t best = -1;
        for (int32_t x = 0; x < ne; x++) {
            bool taken = false;
            for (int32_t j = 0; j < k; j++)
                taken |= sel[j] == x;
            if (!taken && p[x] >= e->p.cache_bias * p[sel[i]] &&
                (best < 0 || p[x] > p[best]) && expert_cache_resident(e->experts, il, x))
                best = x;
        }
        if (best >= 0)
            sel[i] = best;
    }
}

/* Routes each token: softmax over the router's logits, top-k, weights renormalised to sum 1. */
static void engine_route(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const int32_t ne = hp->n_expert, k = e->k_used;
    memset(e->exp_n, 0, (size_t)ne * sizeof(int32_t));
    for (int32_t t = 0; t < n_tok; t++) {
        float *p = e->router + (size_t)t * ne;
        int32_t *sel = e->sel + (size_t)t * k;
        float *w = e->sel_w + (size_t)t * k;
        ops_softmax(p, ne);
        engine_top_k(p, ne, k, sel);
        if (e->p.cache_bias > 0.0f && e->experts)
            engine_bias_to_cache(e, il, p, sel);
        double sum = 0.0;
        for (int32_t i = 0; i < k; i++)
            sum += (double)(w[i] = p[sel[i]]);
        float fsum = (float)sum;
        if (fsum < 6.103515625e-5f)
            fsum = 6.103515625e-5f;
        for (int32_t i = 0; i < k; i++) {
            w[i] = w[i] / fsum;
            int32_t x = sel[i], n = e->exp_n[x]++;
            e->exp_tok[(size_t)x * e->p.n_batch + n] = t;
            e->exp_out[(size_t)x * e->p.n_batch + n] = t * k + i;
        }
    }
}

/* Next-layer lookahead: layer il's router applied to the residual stream as it enters layer
 * il - 1's FFN guesses which experts il will want; those the cache lacks start reading now, most
 * wanted first, and arrive while this layer computes and il's attention runs. Uses tmp, router and
 * act slot 0, so it runs before this layer's activations are quantized. */
static void engine_prefetch(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    if (il >= hp->n_layer)
        return;
    const struct model_layer *l = &e->m->layers[il];
    const size_t D = (size_t)hp->n_embd;
    const int32_t ne = hp->n_expert, k = e->k_used;
    for (int32_t t = 0; t < n_tok; t++)
        ops_rms_norm(e->tmp + t * D, e->x + t * D, l->ffn_norm, hp->n_embd, hp->rms_eps);
    engine_matmul(e, &l->ffn_gate_inp, e->tmp, D, e->router, (size_t)ne, n_tok);
    memset(e->guess_n, 0, (size_t)ne * sizeof(int32_t));
    int32_t sel[64];
    for (int32_t t = 0; t < n_tok; t++) {
        engine_top_k(e->router + (size_t)t * ne, ne, k < 64 ? k : 64, sel);
        for (int32_t i = 0; i < k && i < 64; i++)
            e->guess_n[sel[i]]++;
    }
    int32_t n = 0;
    for (int32_t x = 0; x < ne; x++) { /* insertion by votes, most first */
        if (!e->guess_n[x])
            continue;
        int32_t j = n++;
        for (; j > 0 && e->guess_n[e->guess_ids[j - 1]] < e->guess_n[x]; j--)
            e->guess_ids[j] = e->guess_ids[j - 1];
        e->guess_ids[j] = x;
    }
    expert_cache_prefetch(e->experts, il, e->guess_ids, n);
}

/* Computes the experts fetch_ids[i] for i in list[0..n) (their matrices in exp_mat): gate and up
 * for their tokens, SwiGLU, down, into ffn_d's rows. Only those experts' rows are touched, so the
 * experts of a layer may be computed in several groups. */
static void engine_experts_run(struct engine *e, int il, const int32_t *list, int32_t n, size_t sg,
                               const uint8_t *au, size_t su) {
    const struct model_layer *l = &e->m->layers[il];
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd, F = (size_t)hp->n_ff_exp, B = (size_t)e->p.n_batch;
    for (int32_t j = 0; j < n; j++) {
        int32_t x = e->fetch_ids[list[j]];
        const int32_t *tok = e->exp_tok + (size_t)x * B, *out = e->exp_out + (size_t)x * B;
        const uint8_t *const *mat = e->exp_mat + (size_t)x * 3;
        engine_queue(e, &l->ffn_gate_exps, mat[0], e->act[0], sg, tok, e->ffn_g, F, out, e->exp_n[x]);
        engine_queue(e, &l->ffn_up_exps, mat[1], au, su, tok, e->ffn_u, F, out, e->exp_n[x]);
    }
    matmul_run(&e->mm);
    const struct quant_kernels *qk = quant_kernels(l->ffn_down_exps.type);
    const size_t sd = (quant_act_row_bytes(l->ffn_down_exps.type, (int64_t)F) + 63) & ~(size_t)63;
    for (int32_t j = 0; j < n; j++) {
        int32_t x = e->fetch_ids[list[j]];
        const int32_t *out = e->exp_out + (size_t)x * B;
        for (int32_t r = 0; r < e->exp_n[x]; r++) {
            float *g = e->ffn_g + (size_t)out[r] * F;
            ops_swiglu(g, g, e->ffn_u + (size_t)out[r] * F, (int64_t)F);
            qk->from_float(g, e->act[2] + (size_t)out[r] * sd, (int64_t)F);
        }
        engine_queue(e, &l->ffn_down_exps, e->exp_mat[(size_t)x * 3 + 2], e->act[2], sd, out,
                     e->ffn_d, D, out, e->exp_n[x]);
    }
    matmul_run(&e->mm);
}

/* The routed experts of layer il for the batch. With an expert cache the union of the batch's
 * experts is looked up once, the next layer's are guessed and prefetched, the experts already
 * resident are computed while the rest arrive, then the rest. Returns 0 or a read error. */
static int engine_ffn_moe(struct engine *e, int il, int32_t n_tok) {
    const struct model_layer *l = &e->m->layers[il];
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    const int32_t k = e->k_used;
    engine_matmul(e, &l->ffn_gate_inp, e->xn, D, e->router, (size_t)hp->n_expert, n_tok);
    engine_route(e, il, n_tok);
    int32_t n = 0;
    for (int32_t x = 0; x < hp->n_expert; x++)
        if (e->exp_n[x])
            e->fetch_ids[n++] = x;
    if (e->route_fn)
        e->route_fn(e->route_ctx, il, e->fetch_ids, n);
    if (e->experts) {
        int rc = expert_cache_begin(e->experts, il, e->fetch_ids, n);
        if (rc < 0)
            return rc;
        if (e->p.prefetch == ENGINE_PREFETCH_ALWAYS ||
            (e->p.prefetch == ENGINE_PREFETCH_PREFILL && n_tok > 1))
            engine_prefetch(e, il + 1, n_tok);
    }
    size_t sg = engine_quantize(e, 0, l->ffn_gate_exps.type, e->xn, D, n_tok, hp->n_embd);
    const uint8_t *au = e->act[0];
    size_t su = sg;
    if (quant_kernels(l->ffn_up_exps.type)->vec_dot_type !=
        quant_kernels(l->ffn_gate_exps.type)->vec_dot_type) {
        su = engine_quantize(e, 1, l->ffn_up_exps.type, e->xn, D, n_tok, hp->n_embd);
        au = e->act[1];
    }
    /* what is resident now first, then each of the rest as soon as it arrives: the experts' rows
     * of ffn_d are independent, so the grouping does not change a bit of the result */
    int32_t *todo = e->guess_n, n_todo = n; /* guess_n is free again once prefetch ran */
    for (int32_t i = 0; i < n; i++)
        todo[i] = i;
    while (n_todo > 0) {
        int32_t *ready = e->guess_ids, n_ready = 0, n_left = 0;
        for (int32_t j = 0; j < n_todo; j++) {
            int32_t i = todo[j], x = e->fetch_ids[i];
            const uint8_t **mat = e->exp_mat + (size_t)x * 3;
            int rc = 1;
            if (e->experts) {
                rc = expert_cache_get(e->experts, i, mat, false);
            } else {
                const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
                for (int m = 0; m < 3; m++)
                    mat[m] = (const uint8_t *)w[m]->data + (size_t)x * w[m]->mat_bytes;
            }
            if (rc < 0)
                return rc;
            if (rc == 1)
                ready[n_ready++] = i;
            else
                todo[n_left++] = i;
        }
        n_todo = n_left;
        if (n_ready > 0)
            engine_experts_run(e, il, ready, n_ready, sg, au, su);
        else if (!expert_cache_wait(e->experts))
            return -EIO; /* an expert still reading with no read in flight: cannot happen */
    }
    /* weighted sum in selection order, as ggml adds the weighted experts one by one */
    for (int32_t t = 0; t < n_tok; t++) {
        float *y = e->tmp + (size_t)t * D;
        const float *w = e->sel_w + (size_t)t * k;
        const float *d0 = e->ffn_d + (size_t)t * k * D;
        for (size_t i = 0; i < D; i++)
            y[i] = d0[i] * w[0];
        for (int32_t s = 1; s < k; s++) {
            const float *ds = d0 + (size_t)s * D;
            for (size_t i = 0; i < D; i++)
                y[i] = y[i] + ds[i] * w[s];
        }
    }
    return 0;
}

/* x += ffn(x) for the batch in layer il. Returns 0 or an expert read error. */
static int engine_ffn(struct engine *e, int il, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const struct model_layer *l = &e->m->layers[il];
    const size_t D = (size_t)hp->n_embd;
    for (int32_t t = 0; t < n_tok; t++)
        ops_rms_norm(e->xn + t * D, e->x + t * D, l->ffn_norm, hp->n_embd, hp->rms_eps);
    if (hp->n_expert > 0) {
        int rc = engine_ffn_moe(e, il, n_tok);
        if (rc < 0)
            return rc;
    } else {
        int rc = engine_ffn_dense(e, il, n_tok);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < (size_t)n_tok * D; i++)
        e->x[i] = e->tmp[i] + e->x[i];
    return 0;
}

/* ---- the pass -------------------------------------------------------------------------------- */

static void engine_embed(struct engine *e, const int32_t *tokens, int32_t n_tok) {
    const struct weight *w = &e->m->tok_embd;
    const size_t D = (size_t)e->m->hp.n_embd;
    for (int32_t t = 0; t < n_tok; t++)
        quant_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)tokens[t] * w->row_bytes,
                             e->x + t * D, (int64_t)D);
}

/* Logits of batch rows [first, n_tok) into out (n_tok - first rows of n_vocab). */
static void engine_output(struct engine *e, int32_t first, int32_t n_tok, float *out) {
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    for (int32_t t = first; t < n_tok; t++)
        ops_rms_norm(e->xn + t * D, e->x + t * D, e->m->output_norm, hp->n_embd, hp->rms_eps);
    engine_matmul(e, &e->m->output, e->xn + first * D, D, out, (size_t)hp->n_vocab, n_tok - first);
}

/* One forward step over n_tok <= n_batch tokens; logits as in engine_eval for this batch. On an
 * error n_past stays: the positions written are overwritten by the next step. */
static int engine_step(struct engine *e, const int32_t *tokens, int32_t n_tok, float *logits,
                       bool all_logits) {
    const struct model_hparams *hp = &e->m->hp;
    engine_embed(e, tokens, n_tok);
    for (int32_t t = 0; t < n_tok; t++)
        ops_rope_cache(e->rope_cs + (size_t)t * hp->n_rot, e->n_past + t, hp->n_rot,
                       hp->rope_freq_base);
    for (int il = 0; il < hp->n_layer; il++) {
        engine_attention(e, il, n_tok);
        int rc = engine_ffn(e, il, n_tok);
        if (rc < 0)
            return rc;
    }
    if (logits)
        engine_output(e, all_logits ? 0 : n_tok - 1, n_tok, logits);
    e->n_past += n_tok;
    return 0;
}

int engine_eval(struct engine *e, const int32_t *tokens, int32_t n, float *logits, bool all_logits) {
    if (n <= 0)
        return 0;
    if (n > e->p.n_ctx - e->n_past)
        return -ENOSPC;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->m->hp.n_vocab)
            return -EINVAL;
    const size_t V = (size_t)e->m->hp.n_vocab;
    for (int32_t i = 0; i < n; i += e->p.n_batch) {
        int32_t nb = n - i < e->p.n_batch ? n - i : e->p.n_batch;
        bool last = i + nb == n;
        float *out = NULL;
        if (logits && all_logits)
            out = logits + (size_t)i * V;
        else if (logits && last)
            out = logits;
        int rc = engine_step(e, tokens + i, nb, out, all_logits);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void engine_set_experts(struct engine *e, struct expert_cache *c) {
    e->experts = c;
}

void engine_set_route_observer(struct engine *e, engine_route_fn fn, void *ctx) {
    e->route_fn = fn;
    e->route_ctx = ctx;
}
