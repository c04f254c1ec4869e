/* sequence.c - one conversation's KV rows (full layers and window rings), recurrent state and
 * checkpoints (see sequence.h). All memory is allocated and touched in sequence_new, so the
 * resident set is flat from the start (sequence_size says how much from the same layout, before);
 * an elastic sequence then gives back the full layers' pages past its rows in use and takes them
 * again as it grows. */
#include "sequence.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"
#include "os.h"

/* An elastic sequence takes and gives back its full layers' rows in runs of this many positions,
 * so that a conversation going back and forth by a few tokens does not fault pages in and out. */
#define SEQ_KV_RUN 64

static size_t page_up(size_t x) {
    const size_t p = os_page_bytes();
    return (x + p - 1) / p * p;
}

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

/* Lays out the attention layers' rows: n_ctx each, swa_rows for a window layer, each layer's from
 * a page boundary (so that an elastic sequence can give its pages back). Returns the bytes of K
 * (or V), or 0 on a bad shape. */
static size_t seq_layout(struct sequence *s, const struct sequence_shape *sh) {
    size_t total = 0;
    for (int32_t i = 0; i < sh->n_kv_layer; i++) {
        const bool swa = sh->kv_swa && sh->kv_swa[i];
        s->swa[i] = swa;
        s->rows[i] = swa ? sh->swa_rows : sh->n_ctx;
        s->row_off[i] = total;
        s->n_swa_layer += swa;
        const size_t bytes = page_up((size_t)s->rows[i] * s->kv_row_bytes);
        s->kv_ring_bytes += swa ? 2 * bytes : 0;
        total += bytes;
    }
    if (s->n_swa_layer > 0 && (sh->n_swa < 1 || sh->swa_rows < 1 || sh->swa_rows > sh->n_ctx ||
                               (sh->swa_rows < sh->n_swa - 1 && sh->swa_rows != sh->n_ctx)))
        return 0; /* a ring must hold the window before a step (or the whole context) */
    return total;
}

/* Maps bytes of zeroes and touches them. Returns NULL when out of memory. */
static uint8_t *seq_map(struct sequence *s, size_t bytes) {
    void *p = fault_hit(FAULT_ALLOC) ? MAP_FAILED
                                     : mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, bytes);
    s->bytes += bytes;
    return p;
}

/* The struct and its layout for shape, nothing of the state yet: kv_map_bytes, rec_floats,
 * tail_bytes and shape.n_checkpoints are what sequence_new allocates. Returns it or NULL (out of
 * memory or a bad shape). */
static struct sequence *seq_plan(const struct sequence_shape *shape) {
    struct sequence *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->shape = *shape;
    s->shape.kv_swa = NULL;
    uint64_t row = 0;
    size_t n_layer = shape->n_kv_layer > 0 ? (size_t)shape->n_kv_layer : 1;
    if (qtype_row_bytes(shape->kv_type, (uint64_t)shape->kv_dim, &row) < 0 ||
        !(s->rows = calloc(n_layer, sizeof(*s->rows))) ||
        !(s->swa = calloc(n_layer, sizeof(*s->swa))) ||
        !(s->row_off = calloc(n_layer, sizeof(*s->row_off))))
        goto err;
    s->kv_row_bytes = (size_t)row;
    const size_t kv_half = seq_layout(s, shape);
    if (kv_half == 0 && shape->n_kv_layer > 0)
        goto err;
    s->kv_map_bytes = kv_half;
    s->kv_hw = shape->n_ctx;
    s->rec_floats = (size_t)shape->n_rec_layer * (shape->conv_floats + shape->ssm_floats);
    if (shape->n_rec_layer == 0 && s->n_swa_layer == 0) {
        s->shape.n_checkpoints = 0;
        return s;
    }
    if (shape->n_checkpoints < 1)
        s->shape.n_checkpoints = 1;
    s->tail_bytes = s->n_swa_layer ? (size_t)s->n_swa_layer * 2 * (size_t)(shape->n_swa - 1) *
                                         s->kv_row_bytes : 0;
    return s;
err:
    sequence_free(s);
    return NULL;
}

struct sequence *sequence_new(const struct sequence_shape *shape) {
    struct sequence *s = seq_plan(shape);
    if (!s)
        return NULL;
    if (!(s->k = seq_map(s, s->kv_map_bytes)) || !(s->v = seq_map(s, s->kv_map_bytes)) ||
        !(s->rec = seq_alloc(s, s->rec_floats, sizeof(float))))
        goto err;
    s->kv_bytes = s->bytes - s->rec_floats * sizeof(float);
    if (s->shape.n_checkpoints == 0)
        return s;
    s->ckpt = calloc((size_t)s->shape.n_checkpoints, sizeof(*s->ckpt));
    if (!s->ckpt)
        goto err;
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++) {
        s->ckpt[i].pos = -1;
        if (!(s->ckpt[i].state = seq_alloc(s, s->rec_floats, sizeof(float))) ||
            !(s->ckpt[i].tail = seq_alloc(s, s->tail_bytes, 1)))
            goto err;
    }
    return s;
err:
    sequence_free(s);
    return NULL;
}

int sequence_size(const struct sequence_shape *shape, struct sequence_size *out) {
    struct sequence *s = seq_plan(shape);
    if (!s)
        return -EINVAL;
    size_t state;
    int rc = 0;
    memset(out, 0, sizeof(*out));
    if (__builtin_mul_overflow(s->rec_floats, sizeof(float), &state) ||
        __builtin_mul_overflow(s->kv_map_bytes, (size_t)2, &out->kv_bytes) ||
        __builtin_add_overflow(state, s->tail_bytes, &out->checkpoint_bytes)) {
        rc = -EOVERFLOW;
        goto out;
    }
    out->state_bytes = state;
    out->n_checkpoints = s->shape.n_checkpoints;
out:
    sequence_free(s);
    return rc;
}

void sequence_free(struct sequence *s) {
    if (!s)
        return;
    for (int32_t i = 0; s->ckpt && i < s->shape.n_checkpoints; i++) {
        free(s->ckpt[i].state);
        free(s->ckpt[i].tail);
    }
    free(s->ckpt);
    if (s->k)
        munmap(s->k, s->kv_map_bytes ? s->kv_map_bytes : 1);
    if (s->v)
        munmap(s->v, s->kv_map_bytes ? s->kv_map_bytes : 1);
    free(s->rows);
    free(s->swa);
    free(s->row_off);
    free(s->rec);
    free(s);
}

/* ---- KV rows ------------------------------------------------------------------------------- */

static size_t kv_row_at(const struct sequence *s, int32_t kv_il, int32_t pos) {
    return s->row_off[kv_il] + (size_t)(pos % s->rows[kv_il]) * s->kv_row_bytes;
}

uint8_t *sequence_k_row(const struct sequence *s, int32_t kv_il, int32_t pos) {
    return s->k + kv_row_at(s, kv_il, pos);
}

uint8_t *sequence_v_row(const struct sequence *s, int32_t kv_il, int32_t pos) {
    return s->v + kv_row_at(s, kv_il, pos);
}

/* ---- elastic KV pages ---------------------------------------------------------------------- */

/* Positions 0 .. n-1 rounded up to a whole run, at most n_ctx. */
static int32_t kv_run_up(const struct sequence *s, int32_t n) {
    const int64_t r = ((int64_t)n + SEQ_KV_RUN - 1) / SEQ_KV_RUN * SEQ_KV_RUN;
    return r < s->shape.n_ctx ? (int32_t)r : s->shape.n_ctx;
}

/* An elastic sequence gives back the full layers' pages past the run that holds n_past. */
static void kv_trim(struct sequence *s) {
    const int32_t keep = kv_run_up(s, s->n_past);
    if (!s->elastic || keep >= s->kv_hw)
        return;
    const size_t from = page_up((size_t)keep * s->kv_row_bytes);
    const size_t to = page_up((size_t)s->kv_hw * s->kv_row_bytes);
    for (int32_t il = 0; il < s->shape.n_kv_layer; il++) {
        if (!s->swa[il] && to > from) {
            os_pages_release(s->k + s->row_off[il] + from, to - from);
            os_pages_release(s->v + s->row_off[il] + from, to - from);
        }
    }
    s->kv_hw = keep;
}

void sequence_kv_elastic(struct sequence *s) {
    s->elastic = true;
    /* small pages: a transparent huge page would bring back a whole 2 MiB around a row written,
     * and khugepaged could refill what was given back */
    os_pages_huge(s->k, s->kv_map_bytes, false);
    os_pages_huge(s->v, s->kv_map_bytes, false);
    kv_trim(s);
}

void sequence_take(struct sequence *s, int32_t n) {
    const int32_t hw = kv_run_up(s, n);
    if (hw > s->kv_hw)
        s->kv_hw = hw;
}

size_t sequence_kv_resident(const struct sequence *s) {
    if (!s->elastic)
        return s->kv_bytes;
    const size_t n_full = (size_t)(s->shape.n_kv_layer - s->n_swa_layer);
    return s->kv_ring_bytes + 2 * n_full * page_up((size_t)s->kv_hw * s->kv_row_bytes);
}

int32_t sequence_kv_first(const struct sequence *s, int32_t kv_il, int32_t n) {
    if (!s->swa[kv_il])
        return 0;
    return n - (s->shape.n_swa - 1) > 0 ? n - (s->shape.n_swa - 1) : 0;
}

void sequence_kv_get(const struct sequence *s, int32_t kv_il, int32_t first, int32_t n,
                     void *k, void *v) {
    for (int32_t i = 0; i < n; i++) {
        const size_t off = (size_t)i * s->kv_row_bytes;
        if (k)
            memcpy((uint8_t *)k + off, sequence_k_row(s, kv_il, first + i), s->kv_row_bytes);
        if (v)
            memcpy((uint8_t *)v + off, sequence_v_row(s, kv_il, first + i), s->kv_row_bytes);
    }
}

void sequence_kv_put(struct sequence *s, int32_t kv_il, int32_t first, int32_t n,
                     const void *k, const void *v) {
    sequence_take(s, first + n);
    for (int32_t i = 0; i < n; i++) {
        const size_t off = (size_t)i * s->kv_row_bytes;
        if (k)
            memcpy(sequence_k_row(s, kv_il, first + i), (const uint8_t *)k + off, s->kv_row_bytes);
        if (v)
            memcpy(sequence_v_row(s, kv_il, first + i), (const uint8_t *)v + off, s->kv_row_bytes);
    }
}

bool sequence_kv_intact(const struct sequence *s, int32_t n) {
    if (s->n_swa_layer == 0 || n <= 0)
        return true;
    const int32_t need = n - (s->shape.n_swa - 1);
    return (need > 0 ? need : 0) >= s->ring_lo;
}

void sequence_reserve(struct sequence *s, int32_t n) {
    sequence_take(s, s->n_past + n);
    const int32_t lost = s->n_past + n - s->shape.swa_rows; /* positions below it are overwritten */
    if (s->n_swa_layer > 0 && lost > s->ring_lo)
        s->ring_lo = lost;
}

/* ---- recurrent state ------------------------------------------------------------------------ */

float *sequence_conv(const struct sequence *s, int32_t rec_il) {
    return s->rec + (size_t)rec_il * (s->shape.conv_floats + s->shape.ssm_floats);
}

float *sequence_ssm(const struct sequence *s, int32_t rec_il) {
    return sequence_conv(s, rec_il) + s->shape.conv_floats;
}

bool sequence_is_recurrent(const struct sequence *s) {
    return s->shape.n_rec_layer > 0;
}

bool sequence_has_checkpoints(const struct sequence *s) {
    return s->shape.n_checkpoints > 0;
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

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

/* Copies each window layer's rows before pos between the rings and a checkpoint's tail (out:
 * ring to tail; in: tail to ring). */
static void ckpt_tail(struct sequence *s, uint8_t *tail, int32_t pos, bool out) {
    const size_t half = (size_t)(s->shape.n_swa - 1) * s->kv_row_bytes;
    int32_t w = 0;
    for (int32_t il = 0; il < s->shape.n_kv_layer && s->n_swa_layer > 0; il++) {
        if (!s->swa[il])
            continue;
        const int32_t first = sequence_kv_first(s, il, pos);
        uint8_t *k = tail + (size_t)w * 2 * half, *v = k + half;
        if (out)
            sequence_kv_get(s, il, first, pos - first, k, v);
        else
            sequence_kv_put(s, il, first, pos - first, k, v);
        w++;
    }
}

void sequence_checkpoint(struct sequence *s) {
    if (!sequence_has_checkpoints(s))
        return;
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        if (s->ckpt[i].pos == s->n_past)
            return;
    int32_t v = ckpt_victim(s);
    memcpy(s->ckpt[v].state, s->rec, s->rec_floats * sizeof(float));
    ckpt_tail(s, s->ckpt[v].tail, s->n_past, true);
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

/* True when n can be kept as it is: the rings hold what it needs and no recurrent state. */
static bool seq_can_cut(const struct sequence *s, int32_t n) {
    return !sequence_is_recurrent(s) && sequence_kv_intact(s, n);
}

int32_t sequence_reusable(const struct sequence *s, int32_t n) {
    if (n >= s->n_past)
        return s->n_past;
    if (n < 0)
        n = 0;
    if (seq_can_cut(s, n))
        return n;
    int32_t c = ckpt_at_or_before(s, n);
    return c < 0 ? 0 : s->ckpt[c].pos;
}

/* Drops the checkpoints past n_past. */
static void ckpt_drop_past(struct sequence *s) {
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        if (s->ckpt[i].pos > s->n_past)
            s->ckpt[i].pos = -1;
}

/* The sequence goes back to its newest checkpoint at or before n (0 and a zero state when there
 * is none); the checkpoints past it go. */
static int32_t ckpt_restore(struct sequence *s, int32_t n) {
    int32_t c = ckpt_at_or_before(s, n);
    if (c < 0) {
        memset(s->rec, 0, s->rec_floats * sizeof(float));
        s->n_past = 0;
        s->ring_lo = 0;
    } else {
        memcpy(s->rec, s->ckpt[c].state, s->rec_floats * sizeof(float));
        s->n_past = s->ckpt[c].pos;
        ckpt_tail(s, s->ckpt[c].tail, s->n_past, false);
        const int32_t lo = s->n_past - (s->shape.n_swa - 1);
        s->ring_lo = lo > 0 ? lo : 0;
    }
    ckpt_drop_past(s);
    kv_trim(s);
    return s->n_past;
}

int32_t sequence_rollback(struct sequence *s, int32_t n) {
    if (n >= s->n_past)
        return s->n_past;
    if (n < 0)
        n = 0;
    if (seq_can_cut(s, n)) {
        s->n_past = n;
        if (n == 0)
            s->ring_lo = 0;
        ckpt_drop_past(s);
        kv_trim(s);
        return n;
    }
    return ckpt_restore(s, n);
}

int32_t sequence_restore(struct sequence *s) {
    return sequence_is_recurrent(s) ? ckpt_restore(s, s->n_past) : s->n_past;
}

void sequence_reset(struct sequence *s) {
    s->n_past = 0;
    s->ring_lo = 0;
    memset(s->rec, 0, s->rec_floats * sizeof(float));
    for (int32_t i = 0; i < s->shape.n_checkpoints; i++)
        s->ckpt[i].pos = -1;
    kv_trim(s);
}

void sequence_commit(struct sequence *s, int32_t n) {
    s->n_past = n;
    const int32_t lo = n - (s->shape.n_swa - 1);
    s->ring_lo = s->n_swa_layer > 0 && lo > 0 ? lo : 0;
    sequence_checkpoint(s); /* a later prompt that diverges after n resumes from here */
}
