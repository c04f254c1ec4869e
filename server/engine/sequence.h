/* sequence.h - everything one conversation owns in the engine: the KV rows of its attention
 * layers (a sliding-window layer keeps a ring of its last positions, not the whole context), the
 * conv and SSM state of its recurrent (Gated DeltaNet) layers, its position, and checkpoints of
 * the state that cannot be cut back at chosen positions.
 *
 * A full attention layer's rows can be cut back to any shorter prefix. A recurrent state cannot
 * (it folds every token in), nor can a window ring once it has overwritten the positions a
 * shorter prefix needs. So rolling back to n keeps n when every ring still holds the n_swa - 1
 * positions before n and there is no recurrent state; otherwise it restores the newest checkpoint
 * at or before n (a checkpoint holds the recurrent state and each ring's last n_swa - 1 rows).
 * Checkpoints always lie on the sequence's current tokens: a rollback drops the ones past the new
 * end.
 *
 *     struct sequence *s = sequence_new(&shape);
 *     sequence_reserve(s, n);          // a step will write positions n_past .. n_past+n-1
 *     ... the step writes sequence_k_row / sequence_conv / sequence_ssm, then s->n_past += n ...
 *     sequence_checkpoint(s);          // remember the state at n_past
 *     int32_t p = sequence_rollback(s, 10);   // p <= 10: where the sequence now ends
 *     sequence_free(s); */
#ifndef SNIPER_SEQUENCE_H
#define SNIPER_SEQUENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qtype.h"

struct sequence_shape {
    int32_t n_ctx;          /* positions a full attention layer holds */
    enum qtype kv_type;     /* QTYPE_F32, F16, Q8_0 or Q4_0 */
    int32_t n_kv_layer;     /* attention layers */
    int32_t kv_dim;         /* elements of one K (or V) row */
    const bool *kv_swa;     /* [n_kv_layer] true for a sliding-window layer; NULL: none. Read by
                             * sequence_new only */
    int32_t n_swa;          /* their window: a query at p sees positions p - n_swa + 1 .. p */
    int32_t swa_rows;       /* rows of a window layer's ring, n_swa - 1 + the most positions one
                             * step writes (<= n_ctx) */
    int32_t n_rec_layer;    /* recurrent layers */
    size_t conv_floats;     /* conv state of one recurrent layer: (d_conv - 1) * channels */
    size_t ssm_floats;      /* SSM state of one recurrent layer: Hv * Dv * Dk */
    int32_t n_checkpoints;  /* checkpoints kept (models with recurrent or window layers) */
};

struct sequence_checkpoint {
    int32_t pos;            /* the state after tokens 0 .. pos-1; -1: unused */
    float *state;           /* [n_rec_layer][conv_floats + ssm_floats] */
    uint8_t *tail;          /* [n_swa_layer][K, V][n_swa - 1][kv_row_bytes]: each window layer's
                             * rows of positions max(0, pos - n_swa + 1) .. pos - 1 */
};

struct sequence {
    struct sequence_shape shape; /* kv_swa is NULL here: see swa */
    int32_t n_past;             /* tokens in the state */
    size_t kv_row_bytes;        /* one position's K (or V) row of kv_dim elements */
    uint8_t *k, *v;             /* every attention layer's rows, layer kv_il's from row_off */
    size_t *row_off;            /* [n_kv_layer] byte offsets, on page boundaries */
    size_t kv_map_bytes;        /* bytes of k (and of v) */
    size_t kv_ring_bytes;       /* the window layers' K and V, always resident */
    bool elastic;               /* the full layers' pages past kv_hw are given back */
    int32_t kv_hw;              /* positions of the full layers whose pages may be resident:
                                 * n_ctx, or for an elastic sequence whole runs of positions
                                 * covering what was reserved since it was last cut back */
    bool *swa;                  /* [n_kv_layer] a sliding-window layer */
    int32_t *rows;              /* [n_kv_layer] n_ctx, or swa_rows for a window layer: a ring
                                 * with position p at row p % swa_rows */
    int32_t n_swa_layer;
    int32_t ring_lo;            /* the rings hold positions >= ring_lo of the current tokens */
    size_t kv_bytes;            /* k and v */
    float *rec;                 /* [n_rec_layer][conv_floats + ssm_floats]: the state now */
    size_t rec_floats;          /* floats of rec */
    struct sequence_checkpoint *ckpt; /* [n_checkpoints] */
    size_t tail_bytes;          /* one checkpoint's window rows */
    size_t bytes;               /* everything above: what the RAM budget counts */
};

/* What sequence_new(shape) allocates and touches, in bytes: the K and V rows (kv_bytes), the
 * recurrent state (state_bytes) and each of n_checkpoints checkpoints (its state and window rows;
 * n_checkpoints is 0 for a shape with neither recurrent nor window layers). Their sum is the
 * sequence's bytes. */
struct sequence_size {
    size_t kv_bytes;
    size_t state_bytes;
    size_t checkpoint_bytes;
    int32_t n_checkpoints;
};

/* Fills out for shape without allocating the state (what a RAM budget checks before it does).
 * Returns 0, -EINVAL for a shape sequence_new would refuse (or no memory for the few bytes of
 * its layout) or -EOVERFLOW. */
int sequence_size(const struct sequence_shape *shape, struct sequence_size *out);

/* Allocates and zeroes (touches) the state for shape. Returns it or NULL (out of memory or a
 * shape that overflows). */
struct sequence *sequence_new(const struct sequence_shape *shape);

void sequence_free(struct sequence *s);

/* From now on s gives back its full attention layers' pages past the positions in use (in runs of
 * positions) and takes them again as steps reserve positions, so that its resident KV follows the
 * conversation's length rather than n_ctx. Gives back what is unused now. */
void sequence_kv_elastic(struct sequence *s);

/* Positions 0 .. n-1 may be written: an elastic sequence counts their pages as resident. Called by
 * sequence_reserve and sequence_kv_put; a caller that must make room first calls it before. */
void sequence_take(struct sequence *s, int32_t n);

/* Bytes of K and V pages that may be resident now: kv_bytes, or for an elastic sequence the window
 * rings and the full layers' pages up to kv_hw. */
size_t sequence_kv_resident(const struct sequence *s);

/* K or V row of attention layer kv_il at position pos (its ring row for a window layer). */
uint8_t *sequence_k_row(const struct sequence *s, int32_t kv_il, int32_t pos);
uint8_t *sequence_v_row(const struct sequence *s, int32_t kv_il, int32_t pos);

/* The first position attention layer kv_il keeps for a sequence of n tokens: 0, or for a window
 * layer the oldest of the n_swa - 1 the next token sees. */
int32_t sequence_kv_first(const struct sequence *s, int32_t kv_il, int32_t n);

/* Copies layer kv_il's K and V rows of positions first .. first+n-1, oldest first, out to k and v
 * or in from them (each n * kv_row_bytes; either may be NULL). */
void sequence_kv_get(const struct sequence *s, int32_t kv_il, int32_t first, int32_t n,
                     void *k, void *v);
void sequence_kv_put(struct sequence *s, int32_t kv_il, int32_t first, int32_t n,
                     const void *k, const void *v);

/* True when every window ring still holds what a sequence cut back to n tokens needs (always
 * without window layers). */
bool sequence_kv_intact(const struct sequence *s, int32_t n);

/* Conv state [d_conv - 1][channels] (oldest row first) and SSM state [Hv][Dv][Dk] of recurrent
 * layer rec_il. */
float *sequence_conv(const struct sequence *s, int32_t rec_il);
float *sequence_ssm(const struct sequence *s, int32_t rec_il);

/* True when the sequence has recurrent layers. */
bool sequence_is_recurrent(const struct sequence *s);

/* True when the sequence keeps checkpoints (it has recurrent or window layers). */
bool sequence_has_checkpoints(const struct sequence *s);

/* Before a step writes positions n_past .. n_past+n-1 (n <= what swa_rows allows): the rings'
 * rows those positions take are no longer held, and an elastic sequence takes their pages
 * (sequence_take). */
void sequence_reserve(struct sequence *s, int32_t n);

/* Saves the recurrent state and the rings' last rows at n_past as a checkpoint (a no-op without
 * checkpoints, or when one is already at n_past). When all are used, the one whose removal
 * leaves the smallest gap between its neighbours goes (never the newest; of equal gaps the
 * older). */
void sequence_checkpoint(struct sequence *s);

/* Cuts the sequence back to at most n tokens (n <= n_past) and returns its new length: n when
 * sequence_kv_intact(n) and there is no recurrent state; otherwise the position of the newest
 * checkpoint at or before n, whose state and ring rows are restored (0 with a zero state when
 * there is none). Checkpoints past it are dropped. An elastic sequence gives back the pages past
 * its new length's run. */
int32_t sequence_rollback(struct sequence *s, int32_t n);

/* After a step that stopped half way: a recurrent sequence goes back to its newest checkpoint at
 * or before n_past (whose state it restores) and returns its new length; one without recurrent
 * layers is left as it is (rows past n_past are simply overwritten later; sequence_reserve
 * already gave up the ring rows the step took). */
int32_t sequence_restore(struct sequence *s);

/* The position rollback(n) would return, changing nothing. */
int32_t sequence_reusable(const struct sequence *s, int32_t n);

/* Forgets everything: n_past 0, zero state, no checkpoints (an elastic sequence's full layers'
 * pages given back). */
void sequence_reset(struct sequence *s);

/* Declares positions 0 .. n-1 valid after the rows a sequence of n tokens keeps (and the state)
 * were written in: n_past = n, then a checkpoint there. */
void sequence_commit(struct sequence *s, int32_t n);

#endif
