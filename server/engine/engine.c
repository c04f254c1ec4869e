/* engine.c - the step driver: for each layer of a batch of tokens from one or several sequences,
 * the mixer block the layer names (attention or Gated DeltaNet), then its FFN block (dense or
 * experts); plus creation, checkpoints and the KV / recurrent-state access contexts use.
 * Invariants: every buffer is sized in engine_new for n_batch tokens, so engine_eval_batch never
 * allocates; each output value is one vec_dot of a weight row and a quantized activation row and
 * every recurrence runs token by token on its own sequence's state, so a token's logits do not
 * depend on how the prompt was split into batches nor on the other sequences of its step; the
 * order of float operations follows ggml's graph for these architectures (see ops.h). */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "clock.h"
#include "err.h"
#include "expert_cache.h"
#include "fault.h"
#include "ops.h"
#include "quant.h"
#include "threadpool.h"

struct engine_params engine_params_default(void) {
    return (struct engine_params){.n_threads = 0, .n_ctx = 0, .n_batch = 512,
                                  .kv_type = QTYPE_F16, .prefetch = ENGINE_PREFETCH_PREFILL,
                                  .n_checkpoints = 4, .checkpoint_every = 512, .n_seq = 1};
}

/* ---- creation -------------------------------------------------------------------------------- */

/* Bytes of a buffer of n elements of size bytes, rounded to 64; false on overflow. */
static bool engine_buf_bytes(size_t n, size_t size, size_t *bytes) {
    if (__builtin_mul_overflow(n, size, bytes) || *bytes > SIZE_MAX - 63)
        return false;
    *bytes = (*bytes + 63) & ~(size_t)63;
    return true;
}

static void *engine_alloc(struct engine *e, size_t n, size_t size) {
    void *p = NULL;
    size_t bytes;
    if (!engine_buf_bytes(n, size, &bytes))
        return NULL;
    if (fault_hit(FAULT_ALLOC) || posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    memset(p, 0, bytes ? bytes : 64);
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
        const struct weight *ws[] = {
            &l->wq, &l->wk, &l->wv, &l->wo, &l->ssm_qkv, &l->ssm_z, &l->ssm_beta, &l->ssm_alpha,
            &l->ssm_out, &l->ffn_gate_inp, &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
            &l->ffn_gate_inp_shexp, &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp,
            &l->ffn_gate, &l->ffn_up, &l->ffn_down};
        for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
            if (engine_check_weight(ws[i], "weight", err, err_len) < 0)
                return -ENOTSUP;
    }
    return 0;
}

static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }

/* The sequence's shape: KV rows for the attention layers (a ring of n_swa - 1 + n_batch rows, at
 * most n_ctx, for a window layer: what one step's tokens and the window before them need), conv
 * + SSM state for the DeltaNet ones; fills the layer-to-state maps. */
static struct sequence_shape engine_seq_shape(struct engine *e) {
    const struct model_hparams *hp = &e->m->hp;
    struct sequence_shape sh = {.n_ctx = e->p.n_ctx, .kv_type = e->p.kv_type,
                                .kv_dim = e->kv_dim, .n_checkpoints = e->p.n_checkpoints,
                                .kv_swa = e->kv_swa, .n_swa = hp->n_swa};
    const int64_t ring = (int64_t)hp->n_swa - 1 + e->p.n_batch;
    sh.swa_rows = ring < e->p.n_ctx ? (int32_t)ring : e->p.n_ctx;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct model_layer *l = &e->m->layers[il];
        bool rec = l->mixer == MODEL_MIXER_DELTANET;
        if (!rec)
            e->kv_swa[sh.n_kv_layer] = l->swa;
        e->kv_layer[il] = rec ? -1 : sh.n_kv_layer++;
        e->rec_layer[il] = rec ? sh.n_rec_layer++ : -1;
    }
    if (sh.n_rec_layer > 0) {
        sh.conv_floats = (size_t)(hp->ssm_d_conv - 1) * (size_t)e->conv_ch;
        sh.ssm_floats = (size_t)hp->ssm_dt_rank * (size_t)hp->ssm_d_state * hp->ssm_d_state;
    }
    return sh;
}

/* Allocates the scratch buffers (alloc), or only adds up the bytes they would take into
 * e->scratch_bytes (engine_size). Returns 0 or -ENOMEM. */
static int engine_buffers(struct engine *e, bool alloc) {
    const struct model_hparams *hp = &e->m->hp;
    size_t B = (size_t)e->p.n_batch, K = (size_t)e->k_used, T = (size_t)e->p.n_threads;
    size_t S = (size_t)e->p.n_seq;
    size_t n_embd = (size_t)hp->n_embd;
    size_t ne = (size_t)hp->n_expert > 0 ? (size_t)hp->n_expert : 1;
    size_t mix = max_z((size_t)e->q_dim, (size_t)e->ssm_v_dim); /* a mixer's output width */
    /* activation rows in their widest format (f32: 4 bytes an element) plus row alignment:
     * slot 0 holds x, a mixer's output or the dense FFN's hidden rows; slot 1 x; slot 2 x or
     * the experts' hidden rows (B * K of them) */
    size_t wide = max_z(max_z(n_embd, mix), max_z((size_t)hp->n_ff, (size_t)hp->n_ff_shexp));
    size_t slot_bytes[ENGINE_ACT_SLOTS] = {B * (wide * 4 + 64), B * (n_embd * 4 + 64),
                                           B * (n_embd * 4 + 64)};
    if (hp->n_expert > 0 && B * K * ((size_t)hp->n_ff_exp * 4 + 64) > slot_bytes[2])
        slot_bytes[2] = B * K * ((size_t)hp->n_ff_exp * 4 + 64);
    size_t ff = max_z((size_t)e->n_ff_max, (size_t)hp->n_ff_shexp);
    size_t C = (size_t)e->conv_ch, Hv = (size_t)(hp->ssm_dt_rank > 0 ? hp->ssm_dt_rank : 1);
    size_t conv_rows = hp->ssm_d_conv > 0 ? B + (size_t)hp->ssm_d_conv - 1 : 0;
    struct { void **p; size_t n, size; } bufs[] = {
        {(void **)&e->x, B * n_embd, 4}, {(void **)&e->xn, B * n_embd, 4},
        {(void **)&e->q, B * (size_t)e->q_dim, 4}, {(void **)&e->qg, B * 2 * (size_t)e->q_dim, 4},
        {(void **)&e->k, B * (size_t)e->kv_dim, 4}, {(void **)&e->v, B * (size_t)e->kv_dim, 4},
        {(void **)&e->attn, B * mix, 4}, {(void **)&e->tmp, B * n_embd, 4},
        {(void **)&e->ffn_g, B * K * ff, 4}, {(void **)&e->ffn_u, B * K * ff, 4},
        {(void **)&e->ffn_d, B * K * n_embd, 4}, {(void **)&e->shexp, B * n_embd, 4},
        {(void **)&e->shexp_gate, B, 4}, {(void **)&e->act[0], slot_bytes[0], 1},
        {(void **)&e->act[1], slot_bytes[1], 1}, {(void **)&e->act[2], slot_bytes[2], 1},
        {(void **)&e->router, B * ne, 4}, {(void **)&e->sel, B * K, 4},
        {(void **)&e->sel_w, B * K, 4}, {(void **)&e->exp_n, ne, 4},
        {(void **)&e->exp_tok, ne * B, 4}, {(void **)&e->exp_out, ne * B, 4},
        {(void **)&e->fetch_ids, ne, 4}, {(void **)&e->guess_n, ne, 4},
        {(void **)&e->guess_ids, ne, 4}, {(void **)&e->exp_mat, ne * 3, sizeof(void *)},
        {(void **)&e->rope_cs, B * (size_t)hp->n_rot, 4},
        {(void **)&e->scores, T * (size_t)e->p.n_ctx, 4},
        {(void **)&e->vrow, T * (size_t)hp->head_dim, 4},
        {(void **)&e->q16, T * (size_t)hp->head_dim, 2}, {(void **)&e->p16, T * (size_t)e->p.n_ctx, 2},
        {(void **)&e->qkv, conv_rows * C, 4}, {(void **)&e->conv, B * C, 4},
        {(void **)&e->z, B * (size_t)e->ssm_v_dim, 4}, {(void **)&e->beta, B * Hv, 4},
        {(void **)&e->gate, B * Hv, 4}, {(void **)&e->delta, T * (size_t)hp->ssm_d_state, 4},
        {(void **)&e->kv_layer, (size_t)hp->n_layer, 4}, {(void **)&e->rec_layer, (size_t)hp->n_layer, 4},
        {(void **)&e->kv_swa, (size_t)hp->n_layer, sizeof(bool)},
        {(void **)&e->embd_row, e->m->tok_embd.row_bytes, 1},
        {(void **)&e->tok_id, B, 4}, {(void **)&e->tok_seq, B, 4}, {(void **)&e->tok_pos, B, 4},
        {(void **)&e->seg, S, sizeof(*e->seg)}, {(void **)&e->out, S, sizeof(*e->out)},
        {(void **)&e->seqs, S, sizeof(*e->seqs)},
    };
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
        size_t bytes;
        if (!alloc) {
            if (!engine_buf_bytes(bufs[i].n, bufs[i].size, &bytes) ||
                __builtin_add_overflow(e->scratch_bytes, bytes, &e->scratch_bytes))
                return -ENOMEM;
        } else if (!(*bufs[i].p = engine_alloc(e, bufs[i].n, bufs[i].size))) {
            return -ENOMEM;
        }
    }
    return 0;
}

static int engine_alloc_all(struct engine *e) {
    if (engine_buffers(e, true) < 0)
        return -ENOMEM;
    struct sequence_shape sh = engine_seq_shape(e);
    for (int32_t i = 0; i < e->p.n_seq; i++)
        if (!(e->seqs[i] = sequence_new(&sh)))
            return -ENOMEM;
    return 0;
}

/* Checks the parameters against the model; fills defaults. Returns 0 or -EINVAL with a message. */
static int engine_check_params(struct engine *e, char *err, size_t err_len) {
    const struct model_hparams *hp = &e->m->hp;
    const enum qtype kt = e->p.kv_type;
    if (kt != QTYPE_F32 && kt != QTYPE_F16 && kt != QTYPE_Q8_0 && kt != QTYPE_Q4_0) {
        err_set(err, err_len, "engine: kv type %s is not supported (f32, f16, q8_0, q4_0)",
                qtype_name(kt));
        return -EINVAL;
    }
    if ((kt == QTYPE_Q8_0 || kt == QTYPE_Q4_0) && hp->head_dim % 32 != 0) {
        err_set(err, err_len, "engine: kv type %s needs a head size that is a multiple of 32 "
                "(this model's is %d)", qtype_name(kt), hp->head_dim);
        return -EINVAL;
    }
    if (e->p.n_ctx <= 0)
        e->p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (e->p.n_batch <= 0)
        e->p.n_batch = 512;
    if (e->p.moe_top_k < 0 || (hp->n_expert > 0 && e->p.moe_top_k > hp->n_expert_used) ||
        !(e->p.cache_bias >= 0.0f && e->p.cache_bias <= 1.0f)) {
        err_set(err, err_len, "engine: experts per token %d (1..%d) or cache bias %g (0..1) out of "
                "range", e->p.moe_top_k, hp->n_expert_used, (double)e->p.cache_bias);
        return -EINVAL;
    }
    if (e->p.n_ctx > (1 << 24) || e->p.n_batch > 4096) {
        err_set(err, err_len, "engine: context %d or batch %d too large", e->p.n_ctx,
                e->p.n_batch);
        return -EINVAL;
    }
    if (e->p.n_checkpoints < 1 || e->p.n_checkpoints > 64 || e->p.checkpoint_every < 0) {
        err_set(err, err_len, "engine: checkpoints %d (1..64) or checkpoint interval %d (>= 0) "
                "out of range", e->p.n_checkpoints, e->p.checkpoint_every);
        return -EINVAL;
    }
    if (e->p.n_seq < 1 || e->p.n_seq > ENGINE_MAX_SEQ) {
        err_set(err, err_len, "engine: %d sequences out of range (1..%d)", e->p.n_seq,
                ENGINE_MAX_SEQ);
        return -EINVAL;
    }
    return 0;
}

/* The widths the buffers and sequences are sized by, from the model and e->p. */
static void engine_derive(struct engine *e) {
    const struct model_hparams *hp = &e->m->hp;
    e->q_dim = hp->n_head * hp->head_dim;
    e->kv_dim = hp->n_head_kv * hp->head_dim;
    e->k_used = hp->n_expert > 0 ? (e->p.moe_top_k > 0 ? e->p.moe_top_k : hp->n_expert_used) : 1;
    e->n_ff_max = hp->n_expert > 0 ? hp->n_ff_exp : hp->n_ff;
    e->ssm_v_dim = hp->ssm_dt_rank * hp->ssm_d_state;
    e->conv_ch = 2 * hp->ssm_n_group * hp->ssm_d_state + e->ssm_v_dim;
}

int engine_size(const struct model *m, const struct engine_params *p, struct engine_size *out,
                char *err, size_t err_len) {
    const size_t n_layer = m->hp.n_layer > 0 ? (size_t)m->hp.n_layer : 1;
    struct engine *e = calloc(1, sizeof(*e));
    int rc = -ENOMEM;
    memset(out, 0, sizeof(*out));
    if (!e || !(e->kv_layer = calloc(n_layer, sizeof(*e->kv_layer))) ||
        !(e->rec_layer = calloc(n_layer, sizeof(*e->rec_layer))) ||
        !(e->kv_swa = calloc(n_layer, sizeof(*e->kv_swa)))) {
        err_set(err, err_len, "engine: out of memory");
        goto out;
    }
    e->m = m;
    e->p = p ? *p : engine_params_default();
    if ((rc = engine_check_params(e, err, err_len)) < 0)
        goto out;
    if (e->p.n_threads <= 0) { /* as threadpool_new counts them */
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        e->p.n_threads = n > 0 ? (int)n : 1;
    }
    engine_derive(e);
    struct sequence_shape sh = engine_seq_shape(e);
    struct sequence_size ss;
    if (engine_buffers(e, false) < 0 || (rc = sequence_size(&sh, &ss)) < 0) {
        err_set(err, err_len, "engine: context %d or batch %d too large", e->p.n_ctx,
                e->p.n_batch);
        rc = -EOVERFLOW;
        goto out;
    }
    const size_t S = (size_t)e->p.n_seq, rec = ss.state_bytes +
                     (size_t)ss.n_checkpoints * ss.checkpoint_bytes;
    out->n_seq = e->p.n_seq;
    out->n_ctx = e->p.n_ctx;
    out->n_checkpoints = ss.n_checkpoints;
    out->seq_kv_bytes = ss.kv_bytes;
    out->seq_rec_bytes = rec;
    out->kv_bytes = S * ss.kv_bytes;
    out->rec_bytes = S * rec;
    out->scratch_bytes = e->scratch_bytes;
    rc = 0;
out:
    if (e) {
        free(e->kv_layer);
        free(e->rec_layer);
        free(e->kv_swa);
    }
    free(e);
    return rc;
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
    if (engine_check_params(e, err, err_len) < 0 || engine_check_weights(m, err, err_len) < 0)
        goto err;
    e->tp = threadpool_new(e->p.n_threads);
    if (!e->tp) {
        err_set(err, err_len, "engine: cannot start %d threads", e->p.n_threads);
        goto err;
    }
    e->p.n_threads = threadpool_n_threads(e->tp);
    engine_derive(e);
    e->rope = ops_rope_init(hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale,
                            hp->rope_ext_factor, hp->rope_attn_factor, hp->rope_n_ctx_orig, 32.0f,
                            1.0f);
    int max_jobs = 2 * (hp->n_expert > 0 ? hp->n_expert : 1) + 8 + e->p.n_seq;
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
    void *bufs[] = {e->x, e->xn, e->q, e->qg, e->k, e->v, e->attn, e->tmp, e->ffn_g, e->ffn_u,
                    e->ffn_d, e->shexp, e->shexp_gate, e->act[0], e->act[1], e->act[2], e->router,
                    e->sel, e->sel_w, e->exp_n, e->exp_tok, e->exp_out, e->fetch_ids, e->guess_n,
                    e->guess_ids, (void *)e->exp_mat, e->rope_cs, e->scores, e->q16, e->p16,
                    e->vrow, e->qkv, e->conv, e->z, e->beta, e->gate, e->delta, e->kv_layer,
                    e->rec_layer, e->kv_swa, e->embd_row, e->tok_id, e->tok_seq, e->tok_pos,
                    e->seg, e->out};
    for (int32_t i = 0; e->seqs && i < e->p.n_seq; i++)
        sequence_free(e->seqs[i]);
    free(e->seqs);
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    free(e);
}

/* The sequence seq, or NULL when it is out of range. */
static struct sequence *engine_seq(const struct engine *e, int32_t seq) {
    return seq >= 0 && seq < e->p.n_seq ? e->seqs[seq] : NULL;
}

int32_t engine_n_past(const struct engine *e, int32_t seq) {
    const struct sequence *s = engine_seq(e, seq);
    return s ? s->n_past : 0;
}
int32_t engine_n_seq(const struct engine *e) { return e->p.n_seq; }
int32_t engine_n_ctx(const struct engine *e) { return e->p.n_ctx; }
int engine_n_threads(const struct engine *e) { return e->p.n_threads; }
int32_t engine_n_batch(const struct engine *e) { return e->p.n_batch; }
size_t engine_scratch_bytes(const struct engine *e) { return e->scratch_bytes; }
bool engine_is_recurrent(const struct engine *e) { return sequence_is_recurrent(e->seqs[0]); }
bool engine_has_checkpoints(const struct engine *e) {
    return sequence_has_checkpoints(e->seqs[0]);
}

size_t engine_kv_bytes(const struct engine *e) {
    return (size_t)e->p.n_seq * e->seqs[0]->kv_bytes;
}

size_t engine_kv_resident_bytes(const struct engine *e) {
    size_t n = 0;
    for (int32_t i = 0; i < e->p.n_seq; i++)
        n += sequence_kv_resident(e->seqs[i]);
    return n;
}

/* With an expert cache: it gets what the KV pages that may be resident leave of the room the two
 * share (see engine_set_experts). Between steps, and before a step's rows are written. */
static void engine_fit_experts(struct engine *e) {
    if (!e->experts)
        return;
    const size_t used = engine_kv_resident_bytes(e);
    expert_cache_set_bytes(e->experts, e->kv_room > used ? e->kv_room - used : 0);
}

size_t engine_rec_bytes(const struct engine *e) {
    return (size_t)e->p.n_seq * e->seqs[0]->bytes - engine_kv_bytes(e);
}

/* ---- positions and checkpoints ---------------------------------------------------------------- */

int32_t engine_truncate(struct engine *e, int32_t seq, int32_t n) {
    struct sequence *s = engine_seq(e, seq);
    if (!s)
        return 0;
    const int32_t kept = sequence_rollback(s, n);
    engine_fit_experts(e);
    return kept;
}

int32_t engine_reusable(const struct engine *e, int32_t seq, int32_t n) {
    const struct sequence *s = engine_seq(e, seq);
    return s ? sequence_reusable(s, n) : 0;
}

void engine_checkpoint(struct engine *e, int32_t seq) {
    struct sequence *s = engine_seq(e, seq);
    if (s)
        sequence_checkpoint(s);
}

/* ---- KV cache and recurrent state access ------------------------------------------------------ */

struct engine_kv_shape engine_kv_shape(const struct engine *e) {
    const struct sequence *s = e->seqs[0];
    return (struct engine_kv_shape){.type = e->p.kv_type, .n_layer = s->shape.n_kv_layer,
                                    .kv_dim = e->kv_dim, .n_ctx = e->p.n_ctx,
                                    .row_bytes = s->kv_row_bytes, .n_swa_layer = s->n_swa_layer,
                                    .n_swa = s->n_swa_layer ? s->shape.n_swa : 0};
}

int32_t engine_kv_first(const struct engine *e, int32_t il, int32_t n) {
    return il >= 0 && il < e->seqs[0]->shape.n_kv_layer ? sequence_kv_first(e->seqs[0], il, n) : 0;
}

int engine_kv_export(const struct engine *e, int32_t seq, int32_t il, int32_t n, void *k, void *v) {
    const struct sequence *s = engine_seq(e, seq);
    if (!s || il < 0 || il >= s->shape.n_kv_layer || n < 0 || n > s->n_past ||
        !sequence_kv_intact(s, n))
        return -EINVAL;
    const int32_t first = sequence_kv_first(s, il, n);
    sequence_kv_get(s, il, first, n - first, k, v);
    return 0;
}

int engine_kv_import(struct engine *e, int32_t seq, int32_t il, enum qtype type, int32_t kv_dim,
                     int32_t n, const void *k, const void *v) {
    struct sequence *s = engine_seq(e, seq);
    if (!s || type != e->p.kv_type || kv_dim != e->kv_dim || il < 0 ||
        il >= s->shape.n_kv_layer || n < 0 || n > e->p.n_ctx)
        return -EINVAL;
    if (s->n_past != 0)
        sequence_reset(s);
    sequence_take(s, n);
    engine_fit_experts(e); /* room first: the rows are written next */
    const int32_t first = sequence_kv_first(s, il, n);
    sequence_kv_put(s, il, first, n - first, k, v);
    return 0;
}

size_t engine_state_size(const struct engine *e) {
    return e->seqs[0]->rec_floats * sizeof(float);
}

int engine_state_export(const struct engine *e, int32_t seq, void *buf, size_t n) {
    const struct sequence *s = engine_seq(e, seq);
    if (!s || n != engine_state_size(e))
        return -EINVAL;
    if (n)
        memcpy(buf, s->rec, n);
    return 0;
}

int engine_state_import(struct engine *e, int32_t seq, const void *buf, size_t n) {
    struct sequence *s = engine_seq(e, seq);
    if (!s || n != engine_state_size(e))
        return -EINVAL;
    if (s->n_past != 0) {
        sequence_reset(s);
        engine_fit_experts(e);
    }
    if (n)
        memcpy(s->rec, buf, n);
    return 0;
}

int engine_kv_commit(struct engine *e, int32_t seq, int32_t n) {
    struct sequence *s = engine_seq(e, seq);
    if (!s || n < 0 || n > e->p.n_ctx)
        return -EINVAL;
    sequence_commit(s, n);
    return 0;
}

/* ---- matrix products ------------------------------------------------------------------------- */

size_t engine_quantize(struct engine *e, int slot, enum qtype wtype, const float *x,
                       size_t x_stride, int32_t n_tok, int64_t n) {
    size_t stride = 0;
    matmul_quantize(wtype, x, x_stride, n_tok, n, e->act[slot], &stride);
    return stride;
}

void engine_queue(struct engine *e, const struct weight *w, const uint8_t *data,
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

void engine_matmul(struct engine *e, const struct weight *w, const float *x, size_t x_stride,
                   float *out, size_t out_stride, int32_t n_tok) {
    size_t as = engine_quantize(e, 0, w->type, x, x_stride, n_tok, w->n_in);
    engine_queue(e, w, w->data, e->act[0], as, NULL, out, out_stride, NULL, n_tok);
    matmul_run(&e->mm);
}

void engine_matmul_multi(struct engine *e, const struct weight *const *ws, float *const *outs,
                         const size_t *out_strides, const float *x, int32_t n_tok, int n) {
    const size_t D = (size_t)e->m->hp.n_embd;
    size_t strides[ENGINE_ACT_SLOTS];
    int slot_of[ENGINE_ACT_SLOTS];
    for (int i = 0; i < n; i++) {
        slot_of[i] = i;
        for (int j = 0; j < i; j++)
            if (quant_kernels(ws[j]->type)->vec_dot_type == quant_kernels(ws[i]->type)->vec_dot_type) {
                slot_of[i] = slot_of[j];
                break;
            }
        if (slot_of[i] == i)
            strides[i] = engine_quantize(e, i, ws[i]->type, x, D, n_tok, (int64_t)D);
        else
            strides[i] = strides[slot_of[i]];
        engine_queue(e, ws[i], ws[i]->data, e->act[slot_of[i]], strides[i], NULL, outs[i],
                     out_strides[i], NULL, n_tok);
    }
    matmul_run(&e->mm);
}

/* ---- the pass -------------------------------------------------------------------------------- */

/* The token's embedding row: in the image, or read from the file when the model left it there. */
static int engine_embd_row(struct engine *e, int32_t token, const uint8_t **row) {
    const struct weight *w = &e->m->tok_embd;
    if (!e->m->embd_on_disk) {
        *row = (const uint8_t *)w->data + (size_t)token * w->row_bytes;
        return 0;
    }
    off_t off = (off_t)(w->tensor->data_off + (uint64_t)token * w->row_bytes);
    uint8_t *dst = e->embd_row;
    size_t left = w->row_bytes;
    while (left > 0) {
        ssize_t r = fault_hit(FAULT_READ) ? (errno = EIO, -1)
                                          : pread(e->m->gguf->fd, dst, left, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO; /* the file shrank */
        dst += r;
        left -= (size_t)r;
        off += r;
    }
    *row = e->embd_row;
    return 0;
}

static int engine_embed(struct engine *e, const int32_t *tokens, int32_t n_tok) {
    const struct weight *w = &e->m->tok_embd;
    const size_t D = (size_t)e->m->hp.n_embd;
    for (int32_t t = 0; t < n_tok; t++) {
        const uint8_t *row = NULL;
        int rc = engine_embd_row(e, tokens[t], &row);
        if (rc < 0)
            return rc;
        quant_dequantize_row(w->type, row, e->x + t * D, (int64_t)D);
    }
    return 0;
}

/* xn = rmsnorm(x) * w for the batch's rows. */
static void engine_norm(struct engine *e, const float *w, int32_t first, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    for (int32_t t = first; t < n_tok; t++)
        ops_rms_norm(e->xn + t * D, e->x + t * D, w, hp->n_embd, hp->rms_eps);
}

/* x += ffn(rmsnorm(x)) for the batch in layer il. Returns 0 or an expert read error. */
static int engine_ffn(struct engine *e, int il, int32_t n_tok) {
    const struct model_layer *l = &e->m->layers[il];
    engine_norm(e, l->ffn_norm, 0, n_tok);
    double t0 = clock_now_s();
    int rc = l->ffn == MODEL_FFN_MOE ? block_moe(e, il, n_tok) : block_ffn_dense(e, il, n_tok);
    e->timing.ffn_s += clock_now_s() - t0;
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < (size_t)n_tok * (size_t)e->m->hp.n_embd; i++)
        e->x[i] = e->tmp[i] + e->x[i];
    return 0;
}

/* The logits rows the step's out[] asks for: their normalised rows are packed at the front of xn
 * (a decode step of several sequences wants every row, a prefill step only its segments' last),
 * quantized once, and each request's product goes straight to its destination, in one dispatch. */
static void engine_output(struct engine *e) {
    const struct model_hparams *hp = &e->m->hp;
    const struct weight *w = &e->m->output;
    const size_t D = (size_t)hp->n_embd;
    int32_t n = 0;
    for (int32_t o = 0; o < e->n_out; o++)
        for (int32_t r = 0; r < e->out[o].n; r++, n++)
            ops_rms_norm(e->xn + n * D, e->x + (size_t)(e->out[o].row + r) * D, e->m->output_norm,
                         hp->n_embd, hp->rms_eps);
    if (n == 0)
        return;
    size_t as = engine_quantize(e, 0, w->type, e->xn, D, n, w->n_in);
    n = 0;
    for (int32_t o = 0; o < e->n_out; o++) {
        engine_queue(e, w, w->data, e->act[0] + (size_t)n * as, as, NULL, e->out[o].dst,
                     (size_t)hp->n_vocab, NULL, e->out[o].n);
        n += e->out[o].n;
    }
    matmul_run(&e->mm);
}

/* Puts every sequence of the step back where it was before it: n_past unchanged, a recurrent
 * state half updated restored from its newest checkpoint. */
static void engine_step_abort(struct engine *e) {
    for (int32_t i = 0; i < e->n_seg; i++)
        sequence_restore(e->seqs[e->seg[i].seq]);
}

/* One forward step over the n_tok <= n_batch tokens staged in tok_id / tok_seq / tok_pos (the
 * segments in seg[], the logits rows wanted in out[]). On an error every sequence of the step ends
 * at its n_past, or for a recurrent model at its newest checkpoint. */
static int engine_step(struct engine *e, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const double t0 = clock_now_s();
    int rc = engine_embed(e, e->tok_id, n_tok);
    if (rc < 0)
        return rc;
    for (int32_t t = 0; t < n_tok; t++)
        ops_rope_cache(e->rope_cs + (size_t)t * hp->n_rot, e->tok_pos[t], &e->rope);
    for (int32_t i = 0; i < e->n_seg; i++)
        sequence_reserve(e->seqs[e->seg[i].seq], e->seg[i].n);
    engine_fit_experts(e); /* before the rows are written: the cache makes room for their pages */
    for (int il = 0; il < hp->n_layer; il++) {
        const struct model_layer *l = &e->m->layers[il];
        engine_norm(e, l->attn_norm, 0, n_tok);
        if (l->mixer == MODEL_MIXER_DELTANET)
            block_deltanet(e, il, n_tok);
        else
            block_attn(e, il, n_tok);
        if ((rc = engine_ffn(e, il, n_tok)) < 0) {
            engine_step_abort(e);
            return rc;
        }
    }
    engine_output(e);
    for (int32_t i = 0; i < e->n_seg; i++)
        e->seqs[e->seg[i].seq]->n_past += e->seg[i].n;
    e->timing.n_steps++;
    e->timing.n_step_tokens += (uint64_t)n_tok;
    e->timing.n_step_seqs += (uint64_t)e->n_seg;
    e->timing.step_s += clock_now_s() - t0;
    return 0;
}

/* Tokens of sequence s the next step may take, at most left: for a model with checkpoints the
 * segment ends at the next multiple of checkpoint_every, where one is saved. */
static int32_t engine_seg_len(const struct engine *e, const struct sequence *s, int32_t left) {
    const int32_t every = e->p.checkpoint_every;
    if (every > 0 && sequence_has_checkpoints(s)) {
        int32_t to_next = every - s->n_past % every;
        if (to_next < left)
            left = to_next;
    }
    return left;
}

/* Checks the parts before anything is fed. Returns 0, -EINVAL or -ENOSPC. */
static int engine_check_parts(const struct engine *e, const struct engine_part *parts,
                              int n_parts) {
    uint64_t seen = 0;
    if (n_parts < 0 || n_parts > e->p.n_seq)
        return -EINVAL;
    for (int i = 0; i < n_parts; i++) {
        const struct engine_part *pt = &parts[i];
        const struct sequence *s = engine_seq(e, pt->seq);
        if (!s || (seen >> pt->seq & 1) || pt->n < 0)
            return -EINVAL;
        seen |= (uint64_t)1 << pt->seq;
        for (int32_t k = 0; k < pt->n; k++)
            if (pt->tokens[k] < 0 || pt->tokens[k] >= e->m->hp.n_vocab)
                return -EINVAL;
        if (pt->n > e->p.n_ctx - s->n_past)
            return -ENOSPC;
    }
    return 0;
}

/* Stages the next step from the parts' unfed tokens (done[i] of part i are fed): segments in part
 * order while the batch has room. Returns the step's token count. */
static int32_t engine_stage(struct engine *e, const struct engine_part *parts, int n_parts,
                            const int32_t *done) {
    const size_t V = (size_t)e->m->hp.n_vocab;
    int32_t n_tok = 0;
    e->n_seg = e->n_out = 0;
    e->step_reads_prompt = false;
    for (int i = 0; i < n_parts && n_tok < e->p.n_batch; i++) {
        const struct engine_part *pt = &parts[i];
        const struct sequence *s = e->seqs[pt->seq];
        int32_t left = pt->n - done[i], room = e->p.n_batch - n_tok;
        int32_t n = engine_seg_len(e, s, left < room ? left : room);
        if (n <= 0)
            continue;
        e->seg[e->n_seg++] = (struct engine_seg){.seq = pt->seq, .first = n_tok, .n = n};
        e->step_reads_prompt |= n > 1;
        for (int32_t k = 0; k < n; k++) {
            e->tok_id[n_tok + k] = pt->tokens[done[i] + k];
            e->tok_seq[n_tok + k] = pt->seq;
            e->tok_pos[n_tok + k] = s->n_past + k;
        }
        if (pt->logits && pt->all_logits)
            e->out[e->n_out++] = (struct engine_out){.row = n_tok, .n = n,
                                                    .dst = pt->logits + (size_t)done[i] * V};
        else if (pt->logits && done[i] + n == pt->n)
            e->out[e->n_out++] = (struct engine_out){.row = n_tok + n - 1, .n = 1,
                                                    .dst = pt->logits};
        n_tok += n;
    }
    return n_tok;
}

int engine_eval_batch(struct engine *e, const struct engine_part *parts, int n_parts) {
    int rc = engine_check_parts(e, parts, n_parts);
    if (rc < 0)
        return rc;
    int32_t done[ENGINE_MAX_SEQ] = {0};
    for (;;) {
        int32_t n_tok = engine_stage(e, parts, n_parts, done);
        if (n_tok == 0)
            return 0;
        if ((rc = engine_step(e, n_tok)) < 0)
            return rc;
        for (int32_t i = 0, j = 0; i < e->n_seg; i++) {
            while (parts[j].seq != e->seg[i].seq)
                j++;
            done[j] += e->seg[i].n;
            struct sequence *s = e->seqs[e->seg[i].seq];
            if (e->p.checkpoint_every > 0 && s->n_past % e->p.checkpoint_every == 0)
                sequence_checkpoint(s);
        }
    }
}

int engine_eval(struct engine *e, int32_t seq, const int32_t *tokens, int32_t n, float *logits,
                bool all_logits) {
    const struct engine_part part = {.seq = seq, .tokens = tokens, .n = n, .logits = logits,
                                     .all_logits = all_logits};
    return engine_eval_batch(e, &part, 1);
}

void engine_get_timing(const struct engine *e, struct engine_timing *out) {
    *out = e->timing;
}

void engine_set_experts(struct engine *e, struct expert_cache *c) {
    e->experts = c;
    if (!c)
        return;
    struct expert_cache_stats st;
    expert_cache_get_stats(c, &st);
    e->kv_room = (size_t)st.n_slots * st.slot_bytes + engine_kv_resident_bytes(e);
    for (int32_t i = 0; i < e->p.n_seq; i++)
        sequence_kv_elastic(e->seqs[i]);
    engine_fit_experts(e);
}

void engine_set_route_observer(struct engine *e, engine_route_fn fn, void *ctx) {
    e->route_fn = fn;
    e->route_ctx = ctx;
}
