/* replay.c - routing from a route trace (replay.h): the trace's lookups indexed by (decode token,
 * layer) and by prefill layer, and a cursor over the engine's steps. Invariants: every decode
 * token of the trace has a lookup for every layer and so has the prefill (checked when opened);
 * the cursor only moves forward, decode tokens wrapping around the trace's. */
#include "replay.h"

#include <limits.h>
#include <stdlib.h>

#include "err.h"
#include "route_trace.h"

struct replay {
    struct route_trace *t;
    int32_t n_layer;
    size_t *dec;        /* [n_decode_tokens][n_layer] index into t->look */
    size_t *pre;        /* [n_layer] the layer's (first) prefill lookup */
    /* the cursor */
    int last_il;        /* the layer of the last replay_layer call; INT_MAX: none yet */
    int64_t first;      /* decode tokens consumed before the current step */
    int32_t step_dec;   /* decode tokens of the current step (0 in prefill) */
    bool prefill;       /* the current step reads a prompt chunk */
};

void replay_free(struct replay *r) {
    if (!r)
        return;
    route_trace_free(r->t);
    free(r->dec);
    free(r->pre);
    free(r);
}

/* Fills r->dec and r->pre from r->t; every slot must be found. Returns 0, or -1 with the message
 * in err. */
static int replay_index(struct replay *r, const char *path, char *err, size_t err_len) {
    const struct route_trace *t = r->t;
    const size_t n = (size_t)t->n_decode_tokens * (size_t)t->n_layer;
    for (size_t i = 0; i < n; i++)
        r->dec[i] = SIZE_MAX;
    for (int32_t l = 0; l < t->n_layer; l++)
        r->pre[l] = SIZE_MAX;
    int64_t tok = -1; /* as route_trace_add counts decode tokens */
    for (size_t k = 0; k < t->n_look; k++) {
        const struct route_lookup *lk = &t->look[k];
        if (!lk->decode) {
            if (r->pre[lk->layer] == SIZE_MAX)
                r->pre[lk->layer] = k;
            continue;
        }
        if (k == 0 || !t->look[k - 1].decode || lk->layer <= t->look[k - 1].layer)
            tok++;
        r->dec[(size_t)tok * (size_t)t->n_layer + (size_t)lk->layer] = k;
    }
    for (int32_t l = 0; l < t->n_layer; l++) {
        if (r->pre[l] == SIZE_MAX) {
            err_set(err, err_len, "replay_open: '%s' has no prefill lookup of layer %d", path, l);
            return -1;
        }
        for (int32_t d = 0; d < t->n_decode_tokens; d++)
            if (r->dec[(size_t)d * (size_t)t->n_layer + (size_t)l] == SIZE_MAX) {
                err_set(err, err_len, "replay_open: '%s': decode token %d lacks layer %d", path,
                        d, l);
                return -1;
            }
    }
    return 0;
}

struct replay *replay_open(const char *path, int32_t n_layer, int32_t n_expert, char *err,
                           size_t err_len) {
    struct replay *r = calloc(1, sizeof(*r));
    if (!r) {
        err_set(err, err_len, "replay_open: out of memory");
        return NULL;
    }
    r->last_il = INT_MAX;
    r->t = route_trace_read(path, err, err_len);
    if (!r->t)
        goto fail;
    const struct route_trace *t = r->t;
    if (t->n_layer != n_layer || t->n_expert != n_expert) {
        err_set(err, err_len,
                "replay_open: '%s' routes %d layers x %d experts, the model has %d layers x %d "
                "experts: refusing to replay it",
                path, t->n_layer, t->n_expert, n_layer, n_expert);
        goto fail;
    }
    if (t->n_decode_tokens < 1) {
        err_set(err, err_len, "replay_open: '%s' has no decode tokens", path);
        goto fail;
    }
    r->n_layer = n_layer;
    r->dec = calloc((size_t)t->n_decode_tokens * (size_t)n_layer, sizeof(*r->dec));
    r->pre = calloc((size_t)n_layer, sizeof(*r->pre));
    if (!r->dec || !r->pre) {
        err_set(err, err_len, "replay_open: out of memory");
        goto fail;
    }
    if (replay_index(r, path, err, err_len) < 0)
        goto fail;
    return r;
fail:
    replay_free(r);
    return NULL;
}

int32_t replay_n_used(const struct replay *r) {
    return r->t->n_used;
}

int32_t replay_n_decode_tokens(const struct replay *r) {
    return r->t->n_decode_tokens;
}

void replay_layer(struct replay *r, int il, int32_t n_tok, bool prefill) {
    if (il <= r->last_il) { /* a new step */
        r->first += r->step_dec;
        r->step_dec = prefill ? 0 : n_tok;
        r->prefill = prefill;
    }
    r->last_il = il;
}

int32_t replay_token(const struct replay *r, int il, int32_t t, int32_t k, int32_t *sel,
                     float *w) {
    const struct route_trace *tr = r->t;
    size_t look;
    if (r->prefill) {
        look = r->pre[il];
    } else {
        const int64_t d = (r->first + t) % tr->n_decode_tokens;
        look = r->dec[(size_t)d * (size_t)r->n_layer + (size_t)il];
    }
    const struct route_lookup *lk = &tr->look[look];
    const int32_t *ids = tr->ids + lk->off;
    const float *ws = tr->weights + lk->off;
    int32_t m = tr->n_used < k ? tr->n_used : k;
    if (m > lk->n)
        m = lk->n;
    /* decode: the token's own experts, best first; prefill: token t's share of the union, which
     * the step's tokens cover together once there are enough of them */
    const int32_t start = r->prefill ? (int32_t)(((int64_t)t * m) % lk->n) : 0;
    for (int32_t i = 0; i < m; i++) {
        const int32_t j = (start + i) % lk->n;
        sel[i] = ids[j];
        w[i] = ws[j];
    }
    return m;
}
