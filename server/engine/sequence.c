/* sequence.c - one conversation's KV rows, recurrent state and checkpoints (see sequence.h). All
 * memory is allocated and touched in sequence_new, so the resident set is flat from the start. */
#include "sequence.h"

#include <stdlib.h>
#include <string.h>

#include "fault.h"

static void *seq_alloc(struct sequence *s, size_t n, size_t size) {
    size_t bytes;
    void *p = NULL;
    if (__builtin_mul_overflow(n, size, &bytes))
        return NULL;
    if (fault_hit(FAULT_ALLOC) || posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    memset(p, 0, bytes ? bytes : 64);
    s->bytes += bytes;
    return p;
}

struct sequence *sequence_new(const struct sequence_shape *shape) {
    struct sequence *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->shape = *shape;
    uint64_t row = 0;
    if (qtype_row_bytes(shape->kv_type, (uint64_t)shape->kv_dim, &row) < 0)
        goto err;
    s->kv_row_bytes = (size_t)row;
    const size_t kv_rows = (size_t)shape->n_kv_layer * (size_t)shape->n_ctx;
    s->rec_floats = (size_t)shape->n_rec_layer * (shape->conv_floats + shape->ssm_floats);
    if (!(s->k = seq_alloc(s, kv_rows, s->kv_row_bytes)) ||
        !(s->v = seq_alloc(s, kv_rows, s->kv_row_bytes)) ||
        !(s->rec = seq_alloc(s, s->rec_floats, sizeof(float))))
        goto err;
    if (shape->n_rec_layer > 0) {
        if (shape->n_checkpoints < 1)
            s->shape.n_checkpoints = 1;
        s->ckpt = calloc((size_t)s->shape.n_checkpoints, sizeof(*s->ckpt));
        if (!s->ckpt)
            goto err;
        for (int32_t i = 0; i < s->shape.n_checkpoints; i++) {
            s->ckpt[i].pos = -1;
            if (!(s->ckpt[i].state = seq_alloc(s, s->rec_floats, sizeof(float))))
                goto err;
        }
    } else {
        s->shape.n_checkpoints = 0;
    }
    return s;
err:
    sequence_free(s);
    return NULL;
}

void sequence_free(struct sequence *s) {
    if (!s)
        return;
    for (int32_t i = 0; s->ckpt && i < s->shape.n_checkpoints; i++)
        free(s->ckpt[i].state);
    free(s->ckpt);
    free(s->k);
    free(s->v);
    free(s->rec);
    free(s);
}

uint8_t *sequence_k_row(const struct sequence *s, int32_t kv_il, int32_t pos) {
    return s->k + ((size_t)kv_il * (size_t)s->shape.n_ctx + (size_t)pos) * s->kv_row_bytes;
}

uint8_t *sequence_v_row(const struct sequence *s, int32_t kv_il, int32_t pos) {
    return s->v + ((size_t)kv_il * (size_t)s->shape.n_ctx + (size_t)pos) * s->kv_row_bytes;
}

float *sequence_conv(const struct sequence *s, int32_t rec_il) {
    return s->rec + (size_t)rec_il * (s->shape.conv_floats + s->shape.ssm_floats);
}

float *sequence_ssm(const struct sequence *s, int32_t rec_il) {
    return sequence_conv(s, rec_il) + s->shape.conv_floats;
}

bool sequence_is_recurrent(const struct sequence *s) {
    return s->shape.n_rec_layer > 0;
}

/* The slot a new checkpoint takes: a free one, else the one whose removal leaves the smallest
 * gap between its neighbours (the newest is kept: it is what the next turn most likely needs). */
static int32_t ckpt_victim(const struct sequence *s) {
    int32_t n = s->shape.n_checkpoints, newest = -1, best = -1;
    for (int32_t i = 0; i < n; i++) {
        if (s->ckpt[i].pos < 0)
            return i;
        if (newest < 0 || s->ckpt[i].pos > s->ckpt[newest].pos)
            newest = i;
    }
    if (n == 1)
        return 0;
    int64_t best_gap = INT64_MAX;
    for (int32_t i = 0; i < n; i++) {
        if (i == newest)
            continue;
        int32_t p = s->ckpt[i].pos, prev = 0, next = INT32_MAX;
        for (int32_t j = 0; j < n; j++) {
            int32_t q = s->ckpt[j].pos;
            if (j != i && q <= p && q >= prev)
                prev = q;
            if (j != i && q > p && q < next)
                next = q;
        }
        const int64_t gap = (int64_t)next - prev; /* ties: the older goes */
        if (gap < best_gap || (gap == best_gap && p < s->ckpt[best].pos)) {
            best_gap = gap;
            best = i;
        }
    }
    return best;
}

void sequence_checkpoint(struct sequence *s) {
    if (!sequence_is_recurrent(s))
        return;
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        if (s->ckpt[i].pos == s->n_past)
            return;
    int32_t v = ckpt_victim(s);
    memcpy(s->ckpt[v].state, s->rec, s->rec_floats * sizeof(float));
    s->ckpt[v].pos = s->n_past;
}

/* The newest checkpoint at or before n, or -1. */
static int32_t ckpt_at_or_before(const struct sequence *s, int32_t n) {
    int32_t best = -1;
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        if (s->ckpt[i].pos >= 0 && s->ckpt[i].pos <= n &&
            (best < 0 || s->ckpt[i].pos > s->ckpt[best].pos))
            best = i;
    return best;
}

int32_t sequence_reusable(const struct sequence *s, int32_t n) {
    if (n >= s->n_past)
        return s->n_past;
    if (!sequence_is_recurrent(s))
        return n < 0 ? 0 : n;
    int32_t c = ckpt_at_or_before(s, n);
    return c < 0 ? 0 : s->ckpt[c].pos;
}

/* A recurrent sequence goes back to its newest checkpoint at or before n (0 and a zero state
 * when there is none); the checkpoints past it go. */
static int32_t ckpt_restore(struct sequence *s, int32_t n) {
    int32_t c = ckpt_at_or_before(s, n);
    if (c < 0) {
        memset(s->rec, 0, s->rec_floats * sizeof(float));
        s->n_past = 0;
    } else {
        memcpy(s->rec, s->ckpt[c].state, s->rec_floats * sizeof(float));
        s->n_past = s->ckpt[c].pos;
    }
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        if (s->ckpt[i].pos > s->n_past)
            s->ckpt[i].pos = -1;
    return s->n_past;
}

int32_t sequence_rollback(struct sequence *s, int32_t n) {
    if (n >= s->n_past)
        return s->n_past;
    if (n < 0)
        n = 0;
    if (!sequence_is_recurrent(s)) {
        s->n_past = n;
        return n;
    }
    return ckpt_restore(s, n);
}

int32_t sequence_restore(struct sequence *s) {
    return sequence_is_recurrent(s) ? ckpt_restore(s, s->n_past) : s->n_past;
}

void sequence_reset(struct sequence *s) {
    s->n_past = 0;
    memset(s->rec, 0, s->rec_floats * sizeof(float));
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        s->ckpt[i].pos = -1;
}
