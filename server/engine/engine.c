/* engine.c - the step driver: for each layer of a batch of tokens from one or several sequences,
 * the mixer block the layer names (attention or Gated DeltaNet), then its FFN block (dense or
 * experts); plus creation, checkpoints and the KV / recurrent-state access contexts use.
 * Invariants: every buffer is sized in engine_new for n_batch tokens from one table
 * (engine_buffers, which engine_free walks too), so engine_eval_batch never allocates; a product
 * that cannot run fails its step; each output value is one vec_dot of a weight row and a
 * quantized activation row and every recurrence runs token by token on its own sequence's state,
 * so a token's logits do not depend on how the prompt was split into batches nor on the other
 * sequences of its step; the order of float operations follows ggml's graph for these
 * architectures (see ops.h). */
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

/* The types the engine keeps K and V rows in. */
static const enum qtype engine_kv_types[] = {QTYPE_F32, QTYPE_F16, QTYPE_Q8_0, QTYPE_Q4_0};
#define ENGINE_N_KV_TYPES (sizeof(engine_kv_types) / sizeof(engine_kv_types[0]))

enum qtype engine_kv_type_named(const char *name) {
    for (size_t i = 0; i < ENGINE_N_KV_TYPES; i++)
        if (strcmp(qtype_name(engine_kv_types[i]), name) == 0)
            return engine_kv_types[i];
    return QTYPE_COUNT;
}

static bool engine_kv_type_ok(enum qtype t) {
    for (size_t i = 0; i < ENGINE_N_KV_TYPES; i++)
        if (engine_kv_types[i] == t)
            return true;
    return false;
}

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
    if (m->ple_embd.data && !quant_can_dequantize(m->ple_embd.type)) {
        err_set(err, err_len, "engine: per_layer_token_embd has type %s, which cannot be read yet",
                qtype_name(m->ple_embd.type));
        return -ENOTSUP;
    }
    if (engine_check_weight(&m->output, "output", err, err_len) < 0 ||
        engine_check_weight(&m->ple_proj, "per_layer_model_proj", err, err_len) < 0)
        return -ENOTSUP;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct model_layer *l = &m->layers[il];
        const struct weight *ws[] = {
            &l->wq, &l->wk, &l->wv, &l->wo, &l->ssm_qkv, &l->ssm_z, &l->ssm_beta, &l->ssm_alpha,
            &l->ssm_out, &l->ffn_gate_inp, &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
            &l->ffn_gate_inp_shexp, &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp,
            &l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->ple_gate, &l->ple_out};
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
        e->rec_layer[il] = rec ? sh.n_rec_layer++ : -1;
        if (l->kv_src >= 0) { /* reads an earlier layer's rows: none of its own */
            e->kv_layer[il] = e->kv_layer[l->kv_src];
            continue;
        }
        if (!rec)
            e->kv_swa[sh.n_kv_layer] = l->swa;
        e->kv_layer[il] = rec ? -1 : sh.n_kv_layer++;
    }
    if (sh.n_rec_layer > 0) {
        sh.conv_floats = (size_t)(hp->ssm_d_conv - 1) * (size_t)e->conv_ch;
        sh.ssm_floats = (size_t)hp->ssm_dt_rank * (size_t)hp->ssm_d_state * hp->ssm_d_state;
    }
    return sh;
}

/* ---- the buffer table ------------------------------------------------------------------------ */

/* One buffer the engine owns: where its pointer lives, and n elements of size bytes. */
struct engine_buf {
    void **p;
    size_t n, size;
};

#define ENGINE_MAX_BUFS 64
#define ENGINE_BUF(ptr, count) {(void **)&(ptr), (count), sizeof(*(ptr))}

/* Bytes of an act row of n elements in any format: f32's, the widest, plus the row alignment
 * (quant_act_row_stride). Sized so, a buffer's bytes do not depend on the weights' types, and
 * budget.c's estimate from the header alone stays the engine's size. */
static size_t act_row_bytes(int64_t n) {
    return (size_t)n * sizeof(float) + 64;
}

/* The widest act row that the present weights ws[0..n) take, or wider. */
static size_t act_stride_max(size_t wide, const struct weight *const *ws, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ws[i]->data)
            wide = max_z(wide, act_row_bytes(ws[i]->n_in));
    return wide;
}

/* up's act rows when their format differs from gate's (their own buffer then), else 0. */
static size_t act_stride_up(const struct weight *gate, const struct weight *up) {
    const struct quant_kernels *kg = gate->data ? quant_kernels(gate->type) : NULL;
    const struct quant_kernels *ku = up->data ? quant_kernels(up->type) : NULL;
    if (!kg || !ku || kg->vec_dot_type == ku->vec_dot_type)
        return 0;
    return act_row_bytes(up->n_in);
}

/* What the layers ask of the scratch: each act buffer's row bytes for the weights it feeds (the
 * product helpers' slot i >= 1 only takes the i-th of the three products engine_matmul_multi
 * runs), the dense FFN's and shared expert's widest hidden size, and which blocks' optional rows
 * exist. */
struct engine_widths {
    size_t mm_act[ENGINE_ACT_SLOTS];
    size_t ffn_act_in, ffn_act_up, ffn_act_hidden, ffn_hidden;
    size_t moe_act_in, moe_act_up, moe_act_hidden;
    bool gated;                   /* a layer has gated attention (qg) */
    bool shexp;                   /* a layer has a shared expert */
    bool router_x;                /* a layer's router has its own input (gemma4) */
};

static struct engine_widths engine_widths(const struct model *m) {
    struct engine_widths w = {0};
    const struct weight *out[] = {&m->output, &m->ple_proj};
    w.mm_act[0] = act_stride_max(0, out, 2);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct model_layer *l = &m->layers[il];
        const struct weight *mm[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ssm_qkv, &l->ssm_z,
                                     &l->ssm_beta, &l->ssm_alpha, &l->ssm_out, &l->ffn_gate_inp,
                                     &l->ffn_gate_inp_shexp, &l->ple_gate, &l->ple_out};
        const struct weight *multi[2][ENGINE_ACT_SLOTS] = {{&l->wq, &l->wk, &l->wv},
                                                           {&l->ssm_qkv, &l->ssm_z, &l->ssm_beta}};
        const struct weight *ffn_in[] = {&l->ffn_gate, &l->ffn_gate_shexp};
        const struct weight *ffn_hidden[] = {&l->ffn_down, &l->ffn_down_shexp};
        w.mm_act[0] = act_stride_max(w.mm_act[0], mm, sizeof(mm) / sizeof(mm[0]));
        for (int i = 1; i < ENGINE_ACT_SLOTS; i++)
            w.mm_act[i] = act_stride_max(act_stride_max(w.mm_act[i], &multi[0][i], 1),
                                         &multi[1][i], 1);
        w.ffn_act_in = act_stride_max(w.ffn_act_in, ffn_in, 2);
        w.ffn_act_up = max_z(max_z(w.ffn_act_up, act_stride_up(&l->ffn_gate, &l->ffn_up)),
                             act_stride_up(&l->ffn_gate_shexp, &l->ffn_up_shexp));
        w.ffn_act_hidden = act_stride_max(w.ffn_act_hidden, ffn_hidden, 2);
        for (int i = 0; i < 2; i++)
            if (ffn_hidden[i]->data)
                w.ffn_hidden = max_z(w.ffn_hidden, (size_t)ffn_hidden[i]->n_in);
        const struct weight *moe_in[] = {&l->ffn_gate_exps}, *moe_hidden[] = {&l->ffn_down_exps};
        w.moe_act_in = act_stride_max(w.moe_act_in, moe_in, 1);
        w.moe_act_up = max_z(w.moe_act_up, act_stride_up(&l->ffn_gate_exps, &l->ffn_up_exps));
        w.moe_act_hidden = act_stride_max(w.moe_act_hidden, moe_hidden, 1);
        w.gated |= l->mixer == MODEL_MIXER_ATTN_GATED;
        w.shexp |= l->ffn_up_shexp.data != NULL;
        w.router_x |= l->ffn_gate_inp_s != NULL;
    }
    return w;
}

/* Every buffer the engine owns, sized for n_batch tokens (B), n_threads (T) and n_seq (S): the
 * driver's, the product helpers', each block's scratch, the step's. engine_new allocates and
 * engine_free frees this one list. Returns its length. */
static size_t engine_buffers(struct engine *e, struct engine_buf *tab) {
    const struct model_hparams *hp = &e->m->hp;
    const struct engine_widths w = engine_widths(e->m);
    const size_t B = (size_t)e->p.n_batch, K = (size_t)e->k_used, T = (size_t)e->p.n_threads;
    const size_t S = (size_t)e->p.n_seq, L = (size_t)hp->n_layer, D = (size_t)hp->n_embd;
    const size_t ne = hp->n_expert > 0 ? (size_t)hp->n_expert : 1;
    const size_t Bm = hp->n_expert > 0 ? B : 0; /* rows of the experts' buffers */
    const size_t Q = (size_t)e->q_dim, KV = (size_t)e->kv_dim, hd = (size_t)e->head_dim_max;
    const size_t C = (size_t)e->conv_ch, V = (size_t)e->ssm_v_dim;
    const size_t Hv = (size_t)(hp->ssm_dt_rank > 0 ? hp->ssm_dt_rank : 1);
    const size_t conv_rows = hp->ssm_d_conv > 0 ? B + (size_t)hp->ssm_d_conv - 1 : 0;
    const size_t Fe = (size_t)hp->n_ff_exp, Ff = w.ffn_hidden;
    const size_t P = (size_t)hp->n_embd_per_layer, LP = P * L;
    struct attn_scratch *a = &e->attn;
    struct deltanet_scratch *dn = &e->dn;
    struct ffn_scratch *f = &e->ffn;
    struct moe_scratch *mo = &e->moe;
    struct prefetch_scratch *pf = &e->pf;
    const struct engine_buf bufs[] = {
        /* the driver, the product helpers, the step */
        ENGINE_BUF(e->x, B * D), ENGINE_BUF(e->xn, B * D), ENGINE_BUF(e->y, B * D),
        ENGINE_BUF(e->rope_cs, B * (size_t)hp->n_rot),
        ENGINE_BUF(e->rope_cs_swa, B * (size_t)hp->n_rot_swa),
        ENGINE_BUF(e->embd_row, e->m->tok_embd.row_bytes),
        ENGINE_BUF(e->ple, B * LP), ENGINE_BUF(e->ple_tok, LP), ENGINE_BUF(e->ple_g, B * P),
        ENGINE_BUF(e->ple_row, e->m->ple_embd.row_bytes),
        ENGINE_BUF(e->act[0], B * w.mm_act[0]), ENGINE_BUF(e->act[1], B * w.mm_act[1]),
        ENGINE_BUF(e->act[2], B * w.mm_act[2]),
        ENGINE_BUF(e->kv_layer, L), ENGINE_BUF(e->rec_layer, L), ENGINE_BUF(e->kv_swa, L),
        ENGINE_BUF(e->tok_id, B), ENGINE_BUF(e->tok_seq, B), ENGINE_BUF(e->tok_pos, B),
        ENGINE_BUF(e->seg, S), ENGINE_BUF(e->out, S), ENGINE_BUF(e->seqs, S),
        /* block_attn */
        ENGINE_BUF(a->q, B * Q), ENGINE_BUF(a->qg, (w.gated ? B : 0) * 2 * Q),
        ENGINE_BUF(a->k, B * KV), ENGINE_BUF(a->v, B * KV), ENGINE_BUF(a->heads, B * Q),
        ENGINE_BUF(a->scores, T * (size_t)e->p.n_ctx), ENGINE_BUF(a->q16, T * hd),
        ENGINE_BUF(a->vrow, T * hd),
        /* block_deltanet */
        ENGINE_BUF(dn->qkv, conv_rows * C), ENGINE_BUF(dn->conv, B * C), ENGINE_BUF(dn->z, B * V),
        ENGINE_BUF(dn->beta, B * Hv), ENGINE_BUF(dn->gate, B * Hv),
        ENGINE_BUF(dn->delta, T * (size_t)hp->ssm_d_state),
        /* block_ffn */
        ENGINE_BUF(f->act_in, B * w.ffn_act_in), ENGINE_BUF(f->act_up, B * w.ffn_act_up),
        ENGINE_BUF(f->act_hidden, B * w.ffn_act_hidden), ENGINE_BUF(f->g, B * Ff),
        ENGINE_BUF(f->u, B * Ff),
        /* block_moe */
        ENGINE_BUF(mo->router, Bm * ne), ENGINE_BUF(mo->sel, Bm * K), ENGINE_BUF(mo->sel_w, Bm * K),
        ENGINE_BUF(mo->exp_n, ne), ENGINE_BUF(mo->exp_tok, ne * Bm),
        ENGINE_BUF(mo->exp_out, ne * Bm), ENGINE_BUF(mo->ids, ne), ENGINE_BUF(mo->exp_mat, ne * 3),
        ENGINE_BUF(mo->todo, ne), ENGINE_BUF(mo->ready, ne),
        ENGINE_BUF(mo->act_in, Bm * w.moe_act_in), ENGINE_BUF(mo->act_up, Bm * w.moe_act_up),
        ENGINE_BUF(mo->act_hidden, Bm * K * w.moe_act_hidden), ENGINE_BUF(mo->g, Bm * K * Fe),
        ENGINE_BUF(mo->u, Bm * K * Fe), ENGINE_BUF(mo->out, Bm * K * D),
        ENGINE_BUF(mo->shexp, (w.shexp ? B : 0) * D), ENGINE_BUF(mo->shexp_gate, w.shexp ? B : 0),
        ENGINE_BUF(mo->router_x, (w.router_x ? Bm : 0) * D),
        /* block_moe's prefetch */
        ENGINE_BUF(pf->xn, Bm * D), ENGINE_BUF(pf->router, Bm * ne), ENGINE_BUF(pf->votes, ne),
        ENGINE_BUF(pf->ids, ne),
    };
    const size_t n = sizeof(bufs) / sizeof(bufs[0]);
    _Static_assert(sizeof(bufs) / sizeof(bufs[0]) <= ENGINE_MAX_BUFS, "ENGINE_MAX_BUFS");
    memcpy(tab, bufs, sizeof(bufs));
    return n;
}

/* Adds up into e->scratch_bytes what allocating the buffer table would take (engine_size).
 * Returns 0, or -ENOMEM when a size overflows. */
static int engine_buffers_bytes(struct engine *e) {
    struct engine_buf tab[ENGINE_MAX_BUFS];
    const size_t n = engine_buffers(e, tab);
    for (size_t i = 0; i < n; i++) {
        size_t bytes;
        if (!engine_buf_bytes(tab[i].n, tab[i].size, &bytes) ||
            __builtin_add_overflow(e->scratch_bytes, bytes, &e->scratch_bytes))
            return -ENOMEM;
    }
    return 0;
}

static int engine_alloc_all(struct engine *e) {
    struct engine_buf tab[ENGINE_MAX_BUFS];
    const size_t n = engine_buffers(e, tab);
    for (size_t i = 0; i < n; i++)
        if (!(*tab[i].p = engine_alloc(e, tab[i].n, tab[i].size)))
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
    if (!engine_kv_type_ok(kt)) {
        err_set(err, err_len, "engine: kv type %s is not supported (" ENGINE_KV_TYPE_NAMES ")",
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
    e->head_dim_max = e->kv_dim = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct model_layer *l = &e->m->layers[il];
        e->head_dim_max = l->head_dim > e->head_dim_max ? l->head_dim : e->head_dim_max;
        e->kv_dim = l->n_head_kv * l->head_dim > e->kv_dim ? l->n_head_kv * l->head_dim
                                                            : e->kv_dim;
    }
    e->q_dim = hp->n_head * e->head_dim_max;
    e->k_used = hp->n_expert > 0 ? (e->p.moe_top_k > 0 ? e->p.moe_top_k : hp->n_expert_used) : 1;
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
    if (engine_buffers_bytes(e) < 0 || (rc = sequence_size(&sh, &ss)) < 0) {
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
    if (hp->n_rot_swa > 0)
        e->rope_swa = ops_rope_init(hp->n_rot_swa, hp->rope_freq_base_swa, hp->rope_freq_scale,
                                    hp->rope_ext_factor, hp->rope_attn_factor,
                                    hp->rope_n_ctx_orig, 32.0f, 1.0f);
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
    engine_vk_free(e->vk);
    threadpool_free(e->tp);
    matmul_release(&e->mm);
    for (int32_t i = 0; e->seqs && i < e->p.n_seq; i++)
        sequence_free(e->seqs[i]);
    struct engine_buf tab[ENGINE_MAX_BUFS];
    const size_t n = engine_buffers(e, tab);
    for (size_t i = 0; i < n; i++)
        free(*tab[i].p);
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
struct contention *engine_contention(struct engine *e) { return threadpool_contention(e->tp); }
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
    const int32_t before = s->n_past;
    int32_t kept = sequence_rollback(s, n);
    if (kept < before && engine_vk_rec_follow(e, seq) < 0) {
        sequence_reset(s); /* the device's state could not follow (a lost device): start over */
        kept = 0;
    }
    engine_fit_experts(e);
    return kept;
}

int32_t engine_reusable(const struct engine *e, int32_t seq, int32_t n) {
    const struct sequence *s = engine_seq(e, seq);
    return s ? sequence_reusable(s, n) : 0;
}

/* sequence_checkpoint, and on the GPU the device's copy of the state into the slot. A copy that
 * fails means a lost device: the next step drops the GPU and every sequence starts over. */
static void engine_seq_checkpoint(struct engine *e, int32_t seq) {
    sequence_checkpoint(e->seqs[seq]);
    (void)engine_vk_rec_checkpoint(e, seq);
}

void engine_checkpoint(struct engine *e, int32_t seq) {
    if (engine_seq(e, seq))
        engine_seq_checkpoint(e, seq);
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
    if (e->vk)
        return engine_vk_kv_read(e, seq, il, first, n - first, k, v);
    sequence_kv_get(s, il, first, n - first, k, v);
    return 0;
}

int engine_kv_import(struct engine *e, int32_t seq, int32_t il, enum qtype type, int32_t kv_dim,
                     int32_t n, const void *k, const void *v) {
    struct sequence *s = engine_seq(e, seq);
    if (!s || type != e->p.kv_type || kv_dim != e->kv_dim || il < 0 ||
        il >= s->shape.n_kv_layer || n < 0 || n > e->p.n_ctx)
        return -EINVAL;
    if (s->n_past != 0) {
        sequence_reset(s);
        (void)engine_vk_rec_follow(e, seq); /* a lost device: the next step says so */
    }
    sequence_take(s, n);
    engine_fit_experts(e); /* room first: the rows are written next */
    const int32_t first = sequence_kv_first(s, il, n);
    if (e->vk)
        return engine_vk_kv_write(e, seq, il, first, n - first, k, v);
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
    if (e->vk)
        return engine_vk_state_move(e, seq, buf, n, false);
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
    if (e->vk)
        return engine_vk_state_move(e, seq, (void *)buf, n, true);
    if (n)
        memcpy(s->rec, buf, n);
    return 0;
}

int engine_kv_commit(struct engine *e, int32_t seq, int32_t n) {
    struct sequence *s = engine_seq(e, seq);
    if (!s || n < 0 || n > e->p.n_ctx)
        return -EINVAL;
    sequence_commit(s, n);
    return engine_vk_rec_checkpoint(e, seq);
}

/* ---- matrix products ------------------------------------------------------------------------- */

int engine_queue(struct engine *e, const struct weight *w, const uint8_t *data,
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
    return matmul_add(&e->mm, &job);
}

int engine_matmul(struct engine *e, const struct weight *w, const float *x, size_t x_stride,
                  float *out, size_t out_stride, int32_t n_tok) {
    size_t as = 0;
    int rc = matmul_quantize(w->type, x, x_stride, n_tok, w->n_in, e->act[0], &as);
    if (rc < 0 || (rc = engine_queue(e, w, w->data, e->act[0], as, NULL, out, out_stride, NULL,
                                     n_tok)) < 0)
        return rc;
    matmul_run(&e->mm);
    return 0;
}

int engine_matmul_multi(struct engine *e, const struct weight *const *ws, float *const *outs,
                        const size_t *out_strides, const float *x, int32_t n_tok, int n) {
    const size_t D = (size_t)e->m->hp.n_embd;
    size_t strides[ENGINE_ACT_SLOTS];
    int slot_of[ENGINE_ACT_SLOTS];
    for (int i = 0; i < n; i++) {
        int rc = 0;
        slot_of[i] = i;
        for (int j = 0; j < i; j++)
            if (quant_kernels(ws[j]->type)->vec_dot_type == quant_kernels(ws[i]->type)->vec_dot_type) {
                slot_of[i] = slot_of[j];
                break;
            }
        if (slot_of[i] == i)
            rc = matmul_quantize(ws[i]->type, x, D, n_tok, (int64_t)D, e->act[i], &strides[i]);
        else
            strides[i] = strides[slot_of[i]];
        if (rc < 0 || (rc = engine_queue(e, ws[i], ws[i]->data, e->act[slot_of[i]], strides[i],
                                         NULL, outs[i], out_strides[i], NULL, n_tok)) < 0)
            return rc;
    }
    matmul_run(&e->mm);
    return 0;
}

/* ---- the pass -------------------------------------------------------------------------------- */

int engine_table_row(struct engine *e, const struct weight *w, bool on_disk, uint8_t *buf,
                     int32_t token, const uint8_t **row) {
    if (!on_disk) {
        *row = (const uint8_t *)w->data + (size_t)token * w->row_bytes;
        return 0;
    }
    int rc = gguf_read_tensor_range(e->m->gguf, w->tensor, (uint64_t)token * w->row_bytes, buf,
                                    w->row_bytes); /* on its shard of a split model */
    if (rc < 0)
        return rc;
    *row = buf;
    return 0;
}

/* x[i] *= s over n values (ggml_scale, and ggml_mul by a one-element tensor). */
static void engine_scale(float *x, float s, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] * s;
}

/* y = rmsnorm(y) * w for the batch's rows: a norm after a block (gemma4's post norms), the trace
 * point op (none without w). */
static void engine_post_norm(struct engine *e, const float *w, int32_t n_tok, const char *op) {
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    for (int32_t t = 0; w && t < n_tok; t++)
        ops_rms_norm(e->y + t * D, e->y + t * D, w, hp->n_embd, hp->rms_eps);
    if (w)
        engine_trace(e, op, e->y, n_tok, hp->n_embd, D);
}

static int engine_embed(struct engine *e, const int32_t *tokens, int32_t n_tok) {
    const struct weight *w = &e->m->tok_embd;
    const size_t D = (size_t)e->m->hp.n_embd;
    for (int32_t t = 0; t < n_tok; t++) {
        const uint8_t *row = NULL;
        int rc = engine_table_row(e, w, e->m->embd_on_disk, e->embd_row, tokens[t], &row);
        if (rc < 0)
            return rc;
        quant_dequantize_row(w->type, row, e->x + t * D, (int64_t)D);
        if (e->m->hp.embd_scale > 0.0f) /* gemma4: times sqrt(n_embd), as ggml_scale */
            engine_scale(e->x + t * D, e->m->hp.embd_scale, D);
    }
    e->trace_il = -1;
    engine_trace(e, "embd", e->x, n_tok, (int64_t)D, D);
    return e->m->ple_embd.data ? block_ple_inputs(e, tokens, n_tok) : 0;
}

/* xn = rmsnorm(x) * w for the batch's rows; the trace point op. */
static void engine_norm(struct engine *e, const float *w, int32_t n_tok, const char *op) {
    const struct model_hparams *hp = &e->m->hp;
    const size_t D = (size_t)hp->n_embd;
    for (int32_t t = 0; t < n_tok; t++)
        ops_rms_norm(e->xn + t * D, e->x + t * D, w, hp->n_embd, hp->rms_eps);
    engine_trace(e, op, e->xn, n_tok, hp->n_embd, D);
}

/* x += y for the batch's rows: a block's output joins the residual stream; the trace point op. */
static void engine_add_y(struct engine *e, int32_t n_tok, const char *op) {
    const size_t D = (size_t)e->m->hp.n_embd;
    for (size_t i = 0; i < (size_t)n_tok * D; i++)
        e->x[i] = e->y[i] + e->x[i];
    engine_trace(e, op, e->x, n_tok, (int64_t)D, D);
}

/* x += mixer(rmsnorm(x)) for the batch in layer il. Returns 0 or the block's error. */
static int engine_mixer(struct engine *e, int il, int32_t n_tok) {
    const struct model_layer *l = &e->m->layers[il];
    e->trace_il = il;
    engine_norm(e, l->attn_norm, n_tok, "attn_norm");
    int rc = l->mixer == MODEL_MIXER_DELTANET ? block_deltanet(e, il, n_tok)
                                               : block_attn(e, il, n_tok);
    engine_post_norm(e, rc == 0 ? l->attn_post_norm : NULL, n_tok, "attn_post_norm");
    if (rc == 0)
        engine_add_y(e, n_tok, "x_attn");
    return rc;
}

/* x += ffn(rmsnorm(x)) for the batch in layer il. Returns 0 or the block's error. */
static int engine_ffn(struct engine *e, int il, int32_t n_tok) {
    const struct model_layer *l = &e->m->layers[il];
    engine_norm(e, l->ffn_norm, n_tok, "ffn_norm");
    double t0 = clock_now_s();
    int rc = l->ffn == MODEL_FFN_MOE ? block_moe(e, il, n_tok) : block_ffn_dense(e, il, n_tok);
    e->timing.ffn_s += clock_now_s() - t0;
    engine_post_norm(e, rc == 0 ? l->ffn_post_norm : NULL, n_tok, "ffn_post_norm");
    if (rc == 0)
        engine_add_y(e, n_tok, "x_ffn");
    if (rc == 0 && l->ple_gate.data && (rc = block_ple(e, il, n_tok)) == 0) {
        /* gemma4's per-layer embedding */
        engine_post_norm(e, l->ple_post_norm, n_tok, "ple_post_norm");
        engine_add_y(e, n_tok, "x_ple");
    }
    const size_t D = (size_t)e->m->hp.n_embd;
    if (rc == 0 && l->out_scale != 1.0f) { /* gemma4's layer output scale */
        engine_scale(e->x, l->out_scale, (size_t)n_tok * D);
        engine_trace(e, "out_scale", e->x, n_tok, (int64_t)D, D);
    }
    return rc;
}

/* logits = c tanh(logits / c) (gemma4's final soft-capping, as ggml: scale, tanh, scale). */
static void engine_softcap(float *x, size_t n, float c) {
    const float inv = 1.0f / c;
    for (size_t i = 0; i < n; i++)
        x[i] = tanhf(x[i] * inv) * c;
}

/* The logits rows the step's out[] asks for: their normalised rows are packed at the front of xn
 * (a decode step of several sequences wants every row, a prefill step only its segments' last),
 * quantized once, and each request's product goes straight to its destination, in one dispatch. */
static int engine_output(struct engine *e) {
    const struct model_hparams *hp = &e->m->hp;
    const struct weight *w = &e->m->output;
    const size_t D = (size_t)hp->n_embd;
    int32_t n = 0;
    for (int32_t o = 0; o < e->n_out; o++)
        for (int32_t r = 0; r < e->out[o].n; r++, n++)
            ops_rms_norm(e->xn + n * D, e->x + (size_t)(e->out[o].row + r) * D, e->m->output_norm,
                         hp->n_embd, hp->rms_eps);
    if (n == 0)
        return 0;
    size_t as = 0;
    int rc = matmul_quantize(w->type, e->xn, D, n, w->n_in, e->act[0], &as);
    n = 0;
    for (int32_t o = 0; rc == 0 && o < e->n_out; o++) {
        rc = engine_queue(e, w, w->data, e->act[0] + (size_t)n * as, as, NULL, e->out[o].dst,
                          (size_t)hp->n_vocab, NULL, e->out[o].n);
        n += e->out[o].n;
    }
    if (rc == 0)
        matmul_run(&e->mm);
    return rc;
}

/* Logits a soft-capping task takes (engine_output_softcap). */
#define ENGINE_CAP_CHUNK 16384

/* Chunks of ENGINE_CAP_CHUNK logits in request o's rows (its last may be shorter). */
static int64_t softcap_chunks(const struct engine *e, int32_t o) {
    const size_t n = (size_t)e->out[o].n * (size_t)e->m->hp.n_vocab;
    return (int64_t)((n + ENGINE_CAP_CHUNK - 1) / ENGINE_CAP_CHUNK);
}

/* The request holding chunk `task` of the step: the last o whose cap_first is at most task (every
 * request has at least one chunk, so cap_first rises strictly). */
static int32_t softcap_request(const struct engine *e, int64_t task) {
    int32_t lo = 0, hi = e->n_out - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (e->out[mid].cap_first <= task)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Soft-caps chunk `task` of the step's logits rows: the requests' chunks in out[] order, numbered
 * by engine_output_softcap (ctx: the engine). */
static void softcap_task(void *ctx, int64_t task, int thread) {
    struct engine *e = ctx;
    (void)thread;
    const struct engine_out *out = &e->out[softcap_request(e, task)];
    const size_t n = (size_t)out->n * (size_t)e->m->hp.n_vocab;
    const size_t at = (size_t)(task - out->cap_first) * ENGINE_CAP_CHUNK;
    engine_softcap(out->dst + at, n - at < ENGINE_CAP_CHUNK ? n - at : ENGINE_CAP_CHUNK,
                   e->m->hp.logit_softcap);
}

/* The step's logits rows soft-capped where the model caps them (gemma4), on either backend: on
 * the host, where tanhf is the C library's (the GPU has no kernel that promises its bits), over
 * the threads (a 262,144-word vocabulary's row is about 1.6 ms on one core). Each request's first
 * chunk is numbered here, once a step (a prefix sum), for the tasks to find their request. */
static void engine_output_softcap(struct engine *e) {
    if (!(e->m->hp.logit_softcap > 0.0f))
        return;
    int64_t n_tasks = 0;
    for (int32_t o = 0; o < e->n_out; o++) {
        e->out[o].cap_first = n_tasks;
        n_tasks += softcap_chunks(e, o);
    }
    if (n_tasks > 0)
        threadpool_run(e->tp, n_tasks, softcap_task, e);
}

/* The trace points of the step's logits rows (op: before or after the soft-capping). */
static void engine_output_trace(struct engine *e, const char *op) {
    const int64_t V = e->m->hp.n_vocab;
    e->trace_il = -1;
    for (int32_t o = 0; e->trace_fn && o < e->n_out; o++)
        engine_trace(e, op, e->out[o].dst, e->out[o].n, V, (size_t)V);
}

/* Puts every sequence of the step back where it was before it: n_past unchanged, a recurrent
 * state half updated restored from its newest checkpoint; drops the products a failed block had
 * queued. */
static void engine_step_abort(struct engine *e) {
    matmul_discard(&e->mm);
    for (int32_t i = 0; i < e->n_seg; i++) {
        sequence_restore(e->seqs[e->seg[i].seq]);
        (void)engine_vk_rec_follow(e, e->seg[i].seq); /* a lost device: dropped next */
    }
}

/* The device failed: the sequences' rows were there, so every sequence starts over, and the
 * steps run on the CPU from now on. */
static void engine_drop_gpu(struct engine *e) {
    fprintf(stderr, "gpu: the device failed; the engine continues on the CPU and every sequence "
                    "starts over\n");
    engine_vk_free(e->vk);
    e->vk = NULL;
    for (int32_t s = 0; s < e->p.n_seq; s++)
        sequence_reset(e->seqs[s]);
}

/* One forward step over the n_tok <= n_batch tokens staged in tok_id / tok_seq / tok_pos (the
 * segments in seg[], the logits rows wanted in out[]). Returns 0 or the error of a block or of the
 * logits' product; every sequence of the step then ends at its n_past, or for a recurrent model at
 * its newest checkpoint. */
static int engine_step(struct engine *e, int32_t n_tok) {
    const struct model_hparams *hp = &e->m->hp;
    const double t0 = clock_now_s();
    int rc = engine_embed(e, e->tok_id, n_tok);
    if (rc < 0)
        return rc;
    for (int32_t t = 0; t < n_tok; t++) {
        ops_rope_cache_ff(e->rope_cs + (size_t)t * hp->n_rot, e->tok_pos[t], &e->rope,
                          e->m->rope_freqs);
        if (hp->n_rot_swa > 0)
            ops_rope_cache(e->rope_cs_swa + (size_t)t * hp->n_rot_swa, e->tok_pos[t],
                           &e->rope_swa);
    }
    for (int32_t i = 0; i < e->n_seg; i++)
        sequence_reserve(e->seqs[e->seg[i].seq], e->seg[i].n);
    if (e->vk) {
        if ((rc = engine_vk_step(e, n_tok)) < 0)
            goto fail;
    } else {
        engine_fit_experts(e); /* before the rows are written: the cache makes room for them */
        for (int il = 0; il < hp->n_layer; il++)
            if ((rc = engine_mixer(e, il, n_tok)) < 0 || (rc = engine_ffn(e, il, n_tok)) < 0)
                goto fail;
        if ((rc = engine_output(e)) < 0)
            goto fail;
    }
    engine_output_trace(e, "logits");
    engine_output_softcap(e);
    if (e->m->hp.logit_softcap > 0.0f)
        engine_output_trace(e, "softcap");
    for (int32_t i = 0; i < e->n_seg; i++)
        e->seqs[e->seg[i].seq]->n_past += e->seg[i].n;
    e->timing.n_steps++;
    e->timing.n_step_tokens += (uint64_t)n_tok;
    e->timing.n_step_seqs += (uint64_t)e->n_seg;
    e->timing.step_s += clock_now_s() - t0;
    return 0;
fail:
    engine_step_abort(e);
    if (e->vk && rc == -EIO && engine_vk_device_failed(e))
        engine_drop_gpu(e);
    return rc;
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
                engine_seq_checkpoint(e, e->seg[i].seq);
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

void engine_set_trace(struct engine *e, engine_trace_fn fn, void *ctx) {
    e->trace_fn = fn;
    e->trace_ctx = ctx;
}

void engine_set_route_replay(struct engine *e, struct replay *r) {
    e->replay = r;
}
