/* sequence.h - everything one conversation owns in the engine: the KV rows of its attention
 * layers, the conv and SSM state of its recurrent (Gated DeltaNet) layers, its position, and
 * checkpoints of the recurrent state at chosen positions.
 *
 * A KV cache can be cut back to any shorter prefix; a recurrent state cannot (it folds every
 * token in). So rolling back to n restores the newest checkpoint at or before n, and a model with
 * recurrent layers resumes from there. Checkpoints always lie on the sequence's current tokens: a
 * rollback drops the ones past the new end.
 *
 *     struct sequence *s = sequence_new(&shape);
 *     ... engine steps write sequence_kv_row / sequence_conv / sequence_ssm, then s->n_past += n ...
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
    int32_t n_ctx;          /* positions the KV cache holds */
    enum qtype kv_type;     /* QTYPE_F32, F16, Q8_0 or Q4_0 */
    int32_t n_kv_layer;     /* attention layers */
    int32_t kv_dim;         /* elements of one K (or V) row */
    int32_t n_rec_layer;    /* recurrent layers */
    size_t conv_floats;     /* conv state of one recurrent layer: (d_conv - 1) * channels */
    size_t ssm_floats;      /* SSM state of one recurrent layer: Hv * Dv * Dk */
    int32_t n_checkpoints;  /* checkpoints kept (recurrent models; >= 1 there) */
};

struct sequence_checkpoint {
    int32_t pos;            /* the state after tokens 0 .. pos-1; -1: unused */
    float *state;           /* [n_rec_layer][conv_floats + ssm_floats] */
};

struct sequence {
    struct sequence_shape shape;
    int32_t n_past;             /* tokens in the state */
    size_t kv_row_bytes;        /* one position's K (or V) row of kv_dim elements */
    uint8_t *k, *v;             /* [n_kv_layer][n_ctx][kv_row_bytes] */
    float *rec;                 /* [n_rec_layer][conv_floats + ssm_floats]: the state now */
    size_t rec_floats;          /* floats of rec */
    struct sequence_checkpoint *ckpt; /* [n_checkpoints] */
    size_t bytes;               /* everything above: what the RAM budget counts */
};

/* Allocates and zeroes (touches) the state for shape. Returns it or NULL (out of memory or a
 * shape that overflows). */
struct sequence *sequence_new(const struct sequence_shape *shape);

void sequence_free(struct sequence *s);

/* K or V row of attention layer kv_il at position pos. */
uint8_t *sequence_k_row(const struct sequence *s, int32_t kv_il, int32_t pos);
uint8_t *sequence_v_row(const struct sequence *s, int32_t kv_il, int32_t pos);

/* Conv state [d_conv - 1][channels] (oldest row first) and SSM state [Hv][Dv][Dk] of recurrent
 * layer rec_il. */
float *sequence_conv(const struct sequence *s, int32_t rec_il);
float *sequence_ssm(const struct sequence *s, int32_t rec_il);

/* True when the sequence has recurrent layers. */
bool sequence_is_recurrent(const struct sequence *s);

/* Saves the recurrent state at n_past as a checkpoint (a no-op without recurrent layers, or when
 * one is already at n_past). When all are used, the one whose removal leaves the smallest gap
 * between its neighbours goes (never the newest; of equal gaps the older). */
void sequence_checkpoint(struct sequence *s);

/* Cuts the sequence back to at most n tokens (n <= n_past) and returns its new length: n without
 * recurrent layers; otherwise the position of the newest checkpoint at or before n, whose state
 * is restored (0 with a zero state when there is none). Checkpoints past it are dropped. */
int32_t sequence_rollback(struct sequence *s, int32_t n);

/* After an update of the state that stopped half way: a recurrent sequence goes back to its newest
 * checkpoint at or before n_past (whose state it restores) and returns its new length; one without
 * recurrent layers is left as it is (KV rows past n_past are simply overwritten later). */
int32_t sequence_restore(struct sequence *s);

/* The position rollback(n) would return, changing nothing. */
int32_t sequence_reusable(const struct sequence *s, int32_t n);

/* Forgets everything: n_past 0, zero state, no checkpoints. */
void sequence_reset(struct sequence *s);

#endif
