/* route_trace.c - route traces (read, recorded, written) and their replay against eviction
 * policies: frecency and LIRS are the expert cache's own code (server/experts/cache_policy.c, one
 * entry per key), lru, arc and belady are kept here. Replay invariants: the resident bytes never
 * pass the cache's; the lookup being served never loses an expert it pinned (unless it is larger
 * than the cache: then it goes in groups, as the engine's); a key is on at most one list.
 * Bookkeeping is O(1) per expert looked up (victim searches skip pinned keys) except belady's,
 * which scans: it is the bound, not a policy a cache could run. The three levels' replay puts the
 * GPU's VRAM slots (backend_vulkan_experts.c) before it. */
#include "route_trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_vulkan_experts.h"
#include "cache_policy.h"
#include "err.h"

#define RT_MAX_LAYERS 4096
#define RT_MAX_EXPERTS 65536

/* ---- the trace ------------------------------------------------------------------------------- */

struct route_trace *route_trace_new(int32_t n_layer, int32_t n_expert, int32_t n_used,
                                    uint64_t expert_bytes) {
    if (n_layer < 1 || n_layer > RT_MAX_LAYERS || n_expert < 1 || n_expert > RT_MAX_EXPERTS ||
        n_used < 1 || n_used > n_expert)
        return NULL;
    struct route_trace *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->n_layer = n_layer;
    t->n_expert = n_expert;
    t->n_used = n_used;
    t->expert_bytes = calloc((size_t)n_layer, sizeof(*t->expert_bytes));
    if (!t->expert_bytes) {
        free(t);
        return NULL;
    }
    for (int32_t l = 0; l < n_layer; l++)
        t->expert_bytes[l] = expert_bytes;
    return t;
}

void route_trace_free(struct route_trace *t) {
    if (!t)
        return;
    free(t->expert_bytes);
    free(t->look);
    free(t->ids);
    free(t->weights);
    free(t);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t first) {
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

int route_trace_add(struct route_trace *t, int32_t layer, const int32_t *ids, const float *weights,
                    int32_t n, bool decode) {
    if (layer < 0 || layer >= t->n_layer || n < 0 || n > t->n_expert)
        return -EINVAL;
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_expert)
            return -EINVAL;
    if (grow((void **)&t->look, &t->cap_look, t->n_look + 1, sizeof(*t->look), 1024) < 0 ||
        grow((void **)&t->ids, &t->cap_ids, t->n_ids + (size_t)n, sizeof(*t->ids), 16384) < 0 ||
        grow((void **)&t->weights, &t->cap_weights, t->n_ids + (size_t)n, sizeof(*t->weights),
             16384) < 0)
        return -ENOMEM;
    /* a decode lookup of a layer not after the previous lookup's starts a token */
    if (decode && (t->n_look == 0 || !t->look[t->n_look - 1].decode ||
                   layer <= t->look[t->n_look - 1].layer))
        t->n_decode_tokens++;
    t->look[t->n_look++] = (struct route_lookup){layer, n, t->n_ids, decode};
    if (n > 0) /* a lookup of none (the three levels' replay: every expert in VRAM) has no ids */
        memcpy(t->ids + t->n_ids, ids, (size_t)n * sizeof(*ids));
    for (int32_t i = 0; i < n; i++)
        t->weights[t->n_ids + (size_t)i] = weights ? weights[i] : 0.0f;
    t->n_ids += (size_t)n;
    return 0;
}

uint64_t route_trace_token_bytes(const struct route_trace *t) {
    uint64_t b = 0;
    for (int32_t l = 0; l < t->n_layer; l++)
        b += t->expert_bytes[l] * (uint64_t)t->n_used;
    return b;
}

uint64_t route_trace_all_bytes(const struct route_trace *t) {
    uint64_t b = 0;
    for (int32_t l = 0; l < t->n_layer; l++)
        b += t->expert_bytes[l] * (uint64_t)t->n_expert;
    return b;
}

/* ---- reading --------------------------------------------------------------------------------- */

static const char RT_MAGIC[] = "# route_trace v1";
static const char RT_COLUMNS[] = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes";

struct reader {
    const char *path;
    long line;
    char *err;
    size_t err_len;
    int32_t n_layer, n_expert, n_used;
    uint64_t *layer_bytes; /* [RT_MAX_LAYERS] 0: not given */
    struct route_trace *t;
    /* the lookup being gathered */
    long long key[4]; /* turn, phase, layer, step (decode only; -1 in prefill) */
    int32_t *ids;
    float *w;
    int32_t n;
    uint32_t *mark; /* [n_expert] lookup number + 1 where the expert was last added */
    uint32_t n_marks;
};

static int rd_fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int rd_fail(struct reader *r, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    err_set(r->err, r->err_len, "route_trace_read: %s at '%s' line %ld", msg, r->path, r->line);
    return -EINVAL;
}

/* An integer that is all of s, in [lo, hi]. */
static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A '#' line before the columns: key=value words (n_layer, n_expert, n_expert_used; layer with
 * expert_bytes); others are kept for people (model=, arch=, dense_bytes=). */
static int rd_comment(struct reader *r, char *s) {
    long long layer = -1, bytes = -1;
    char *save = NULL;
    for (char *w = strtok_r(s + 1, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(w, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *v = eq + 1;
        long long x;
        if (!strcmp(w, "n_layer") || !strcmp(w, "n_expert") || !strcmp(w, "n_expert_used")) {
            long long hi = !strcmp(w, "n_layer") ? RT_MAX_LAYERS : RT_MAX_EXPERTS;
            if (!parse_int(v, 1, hi, &x))
                return rd_fail(r, "bad %s '%s'", w, v);
            *(!strcmp(w, "n_layer") ? &r->n_layer : !strcmp(w, "n_expert") ? &r->n_expert
                                                                            : &r->n_used) =
                (int32_t)x;
        } else if (!strcmp(w, "layer")) {
            if (!parse_int(v, 0, RT_MAX_LAYERS - 1, &layer))
                return rd_fail(r, "bad layer '%s'", v);
        } else if (!strcmp(w, "expert_bytes")) {
            if (!parse_int(v, 1, (long long)1 << 40, &bytes))
                return rd_fail(r, "bad expert_bytes '%s'", v);
        }
    }
    if ((layer >= 0) != (bytes > 0))
        return rd_fail(r, "a layer line needs both layer= and expert_bytes=");
    if (layer >= 0) {
        if (r->layer_bytes[layer])
            return rd_fail(r, "layer %lld given twice", layer);
        r->layer_bytes[layer] = (uint64_t)bytes;
    }
    return 0;
}

/* The columns line: the header is complete, the trace can be made. */
static int rd_columns(struct reader *r) {
    if (!r->n_layer || !r->n_expert || !r->n_used)
        return rd_fail(r, "the header lacks n_layer, n_expert or n_expert_used");
    if (r->n_used > r->n_expert)
        return rd_fail(r, "n_expert_used %d > n_expert %d", r->n_used, r->n_expert);
    for (int32_t l = 0; l < RT_MAX_LAYERS; l++)
        if ((l < r->n_layer) != (r->layer_bytes[l] != 0))
            return rd_fail(r, l < r->n_layer ? "no expert_bytes for layer %d"
                                             : "expert_bytes for layer %d beyond n_layer",
                           l);
    r->t = route_trace_new(r->n_layer, r->n_expert, r->n_used, 1);
    r->ids = malloc(sizeof(*r->ids) * (size_t)r->n_expert);
    r->w = malloc(sizeof(*r->w) * (size_t)r->n_expert);
    r->mark = calloc((size_t)r->n_expert, sizeof(*r->mark));
    if (!r->t || !r->ids || !r->w || !r->mark)
        return rd_fail(r, "out of memory");
    memcpy(r->t->expert_bytes, r->layer_bytes, sizeof(uint64_t) * (size_t)r->n_layer);
    return 0;
}

static int rd_flush(struct reader *r) {
    if (r->n == 0)
        return 0;
    int rc = route_trace_add(r->t, (int32_t)r->key[2], r->ids, r->w, r->n, r->key[1] == 1);
    r->n = 0;
    r->n_marks++;
    return rc < 0 ? rd_fail(r, "out of memory") : 0;
}

/* One CSV row: nine fields, each in range. */
static int rd_row(struct reader *r, char *s) {
    char *f[9];
    int n = 0;
    for (char *p = s;; p++) {
        if (n < 9)
            f[n] = p;
        n++;
        p = strchr(p, ',');
        if (!p)
            break;
        *p = '\0';
    }
    if (n != 9)
        return rd_fail(r, "%d columns, want 9", n);
    long long v[9];
    static const char *const names[9] = {"turn", "phase", "step", "layer", "slot",
                                         "expert", "weight", "residency", "expert_bytes"};
    const long long hi[9] = {INT32_MAX, 1, INT32_MAX, r->n_layer - 1, r->n_used - 1,
                             r->n_expert - 1, 0, 1, (long long)1 << 40};
    for (int i = 0; i < 9; i++)
        if (i != 6 && !parse_int(f[i], 0, hi[i], &v[i]))
            return rd_fail(r, "%s '%s' out of range 0..%lld", names[i], f[i], hi[i]);
    char *end;
    double w = strtod(f[6], &end);
    if (end == f[6] || *end != '\0' || !isfinite(w) || w < 0.0)
        return rd_fail(r, "bad weight '%s'", f[6]);
    const long long key[4] = {v[0], v[1], v[3], v[1] == 1 ? v[2] : -1};
    if (r->n > 0 && memcmp(key, r->key, sizeof(key)) != 0 && rd_flush(r) < 0)
        return -EINVAL;
    memcpy(r->key, key, sizeof(key));
    const int32_t e = (int32_t)v[5];
    if (r->mark[e] == r->n_marks + 1) { /* again in this lookup: a prefill batch's union */
        if (v[1] == 1)
            return rd_fail(r, "expert %d twice in decode step %lld of layer %lld", e, v[2], v[3]);
        for (int32_t i = 0; i < r->n; i++)
            if (r->ids[i] == e && (float)w > r->w[i])
                r->w[i] = (float)w;
        return 0;
    }
    r->mark[e] = r->n_marks + 1;
    r->ids[r->n] = e;
    r->w[r->n++] = (float)w;
    return 0;
}

struct route_trace *route_trace_read(const char *path, char *err, size_t err_len) {
    struct reader r = {.path = path, .err = err, .err_len = err_len};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        err_set(err, err_len, "route_trace_read: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    r.layer_bytes = calloc(RT_MAX_LAYERS, sizeof(*r.layer_bytes));
    if (!r.layer_bytes) {
        rc = rd_fail(&r, "out of memory");
        goto out;
    }
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        r.line++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if ((size_t)len != strlen(line))
            rc = rd_fail(&r, "a NUL byte");
        else if (r.line == 1)
            rc = strcmp(line, RT_MAGIC) ? rd_fail(&r, "not a route trace (want '%s')", RT_MAGIC)
                                        : 0;
        else if (len == 0)
            continue;
        else if (!r.t && line[0] == '#')
            rc = rd_comment(&r, line);
        else if (!r.t)
            rc = strcmp(line, RT_COLUMNS) ? rd_fail(&r, "want the columns '%s'", RT_COLUMNS)
                                          : rd_columns(&r);
        else
            rc = rd_row(&r, line);
    }
    if (rc == 0 && r.line == 0)
        rc = rd_fail(&r, "empty file");
    else if (rc == 0 && !r.t)
        rc = rd_fail(&r, "no columns line");
    else if (rc == 0 && (rc = rd_flush(&r)) == 0 && r.t->n_look == 0)
        rc = rd_fail(&r, "no lookups");
out:
    fclose(f);
    free(line);
    free(r.layer_bytes);
    free(r.ids);
    free(r.w);
    free(r.mark);
    if (rc < 0) {
        route_trace_free(r.t);
        return NULL;
    }
    return r.t;
}

int route_trace_write(const struct route_trace *t, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f, "%s\n# model=recorded n_layer=%d n_expert=%d n_expert_used=%d\n", RT_MAGIC,
            t->n_layer, t->n_expert, t->n_used);
    for (int32_t l = 0; l < t->n_layer; l++)
        fprintf(f, "# layer=%d expert_bytes=%llu\n", l, (unsigned long long)t->expert_bytes[l]);
    fprintf(f, "%s\n", RT_COLUMNS);
    long long step = 0; /* of decode: each token its own */
    for (size_t k = 0; k < t->n_look; k++) {
        const struct route_lookup *l = &t->look[k];
        if (k > 0 && l->decode && l->layer <= t->look[k - 1].layer)
            step++;
        for (int32_t i = 0; i < l->n; i++) /* a prefill union as rows of n_used experts each: */
            fprintf(f, "0,%d,%lld,%d,%d,%d,%.6g,0,%llu\n", l->decode, /* the reader joins them */
                    l->decode ? step : (long long)(i / t->n_used), l->layer, i % t->n_used,
                    t->ids[l->off + (size_t)i], t->weights[l->off + (size_t)i],
                    (unsigned long long)t->expert_bytes[l->layer]);
    }
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* ---- replay ---------------------------------------------------------------------------------- */

#define RP_HEADS 4   /* list heads: lru 1, arc 4 */

enum { ARC_NONE, ARC_T1, ARC_T2, ARC_B1, ARC_B2 };

struct replay {
    const struct route_trace *t;
    enum route_policy pol;
    int32_t n_keys;
    uint64_t cap, used;
    int32_t *prev, *next;  /* [n_keys + RP_HEADS]: keys, then the list heads */
    int32_t *len;          /* [RP_HEADS] keys on each list */
    bool *res;             /* [n_keys] resident */
    uint64_t *pin, *prot;  /* [n_keys] epoch of the lookup that pinned / protects it */
    uint64_t epoch;
    bool spare_prot;       /* the victim being sought spares the protected keys */
    struct cache_policy *cp; /* frecency and lirs: the expert cache's, an entry per key */
    uint8_t *arc;          /* [n_keys] which arc list */
    double arc_p, arc_c;   /* target size of T1, cache size, in experts */
    size_t *next_use;      /* [n_ids] belady: index of the same key's next lookup, or SIZE_MAX */
    size_t *knext;         /* [n_keys] belady: of the resident key's last lookup */
};

static int32_t head(const struct replay *r, int h) {
    return r->n_keys + h;
}

static void rp_unlink(struct replay *r, int32_t k, int h) {
    r->next[r->prev[k]] = r->next[k];
    r->prev[r->next[k]] = r->prev[k];
    r->prev[k] = r->next[k] = k;
    r->len[h]--;
}

/* Puts k (on no list) at the newest end of list h. */
static void rp_push(struct replay *r, int32_t k, int h) {
    int32_t hd = head(r, h);
    r->prev[k] = r->prev[hd];
    r->next[k] = hd;
    r->next[r->prev[hd]] = k;
    r->prev[hd] = k;
    r->len[h]++;
}

static bool rp_evictable(const struct replay *r, int32_t k, bool spare_prot) {
    return r->res[k] && r->pin[k] != r->epoch && !(spare_prot && r->prot[k] == r->epoch);
}

/* The oldest evictable key of list h, or -1. */
static int32_t rp_oldest(const struct replay *r, int h, bool spare_prot) {
    for (int32_t k = r->next[head(r, h)]; k != head(r, h); k = r->next[k])
        if (rp_evictable(r, k, spare_prot))
            return k;
    return -1;
}

/* The expert cache's policy may evict key k (ctx: the replay). */
static bool rp_can_go(const void *ctx, int32_t k) {
    const struct replay *r = ctx;
    return rp_evictable(r, k, r->spare_prot);
}

static int32_t rp_victim(struct replay *r, bool spare_prot) {
    int32_t v = -1;
    switch (r->pol) {
    case ROUTE_LRU:
        return rp_oldest(r, 0, spare_prot);
    case ROUTE_LIRS:
    case ROUTE_FRECENCY: /* taken off the policy's lists already */
        r->spare_prot = spare_prot;
        return cache_policy_victim(r->cp, rp_can_go, r);
    case ROUTE_ARC: {
        bool t1 = r->len[0] > 0 && r->len[0] > r->arc_p;
        v = rp_oldest(r, t1 ? 0 : 1, spare_prot);
        return v >= 0 ? v : rp_oldest(r, t1 ? 1 : 0, spare_prot);
    }
    case ROUTE_BELADY:
        for (int32_t k = 0; k < r->n_keys; k++)
            if (rp_evictable(r, k, spare_prot) && (v < 0 || r->knext[k] > r->knext[v]))
                v = k;
        return v;
    default:
        return -1;
    }
}

static void rp_evict(struct replay *r, int32_t k) {
    r->res[k] = false;
    r->used -= r->t->expert_bytes[k / r->t->n_expert];
    switch (r->pol) {
    case ROUTE_LRU:
        rp_unlink(r, k, 0);
        break;
    case ROUTE_ARC: /* into the ghost list of its kind */
        rp_unlink(r, k, r->arc[k] == ARC_T1 ? 0 : 1);
        r->arc[k] = r->arc[k] == ARC_T1 ? ARC_B1 : ARC_B2;
        rp_push(r, k, r->arc[k] == ARC_B1 ? 2 : 3);
        break;
    default: /* lirs and frecency: their victim left the policy's lists */
        break;
    }
}

/* ARC, before a miss of k is made room for: a ghost hit moves the target of T1 its way. */
static void arc_miss(struct replay *r, int32_t k) {
    const double b1 = r->len[2], b2 = r->len[3];
    if (r->arc[k] == ARC_B1) {
        r->arc_p += b2 > b1 ? b2 / b1 : 1.0;
        r->arc_p = r->arc_p < r->arc_c ? r->arc_p : r->arc_c;
        rp_unlink(r, k, 2);
    } else if (r->arc[k] == ARC_B2) {
        r->arc_p -= b1 > b2 ? b1 / b2 : 1.0;
        r->arc_p = r->arc_p > 0.0 ? r->arc_p : 0.0;
        rp_unlink(r, k, 3);
    } else {
        return;
    }
    r->arc[k] = ARC_B2 + 1; /* a ghost hit: goes to T2 on its touch */
}

/* ARC's ghosts: T1 + B1 at most c experts, all four lists at most 2c. */
static void arc_trim(struct replay *r) {
    while (r->len[2] > 0 && r->len[0] + r->len[2] > r->arc_c) {
        int32_t k = r->next[head(r, 2)];
        rp_unlink(r, k, 2);
        r->arc[k] = ARC_NONE;
    }
    while (r->len[3] > 0 && r->len[0] + r->len[1] + r->len[2] + r->len[3] > 2 * r->arc_c) {
        int32_t k = r->next[head(r, 3)];
        rp_unlink(r, k, 3);
        r->arc[k] = ARC_NONE;
    }
}

/* A lookup of k, now resident (hit: it was before). */
static void rp_touch(struct replay *r, int32_t k, bool hit, size_t access) {
    switch (r->pol) {
    case ROUTE_LRU:
        if (hit)
            rp_unlink(r, k, 0);
        rp_push(r, k, 0);
        break;
    case ROUTE_LIRS:
    case ROUTE_FRECENCY:
        cache_policy_touch(r->cp, k, k, hit);
        break;
    case ROUTE_ARC:
        if (hit)
            rp_unlink(r, k, r->arc[k] == ARC_T1 ? 0 : 1);
        r->arc[k] = hit || r->arc[k] == ARC_B2 + 1 ? ARC_T2 : ARC_T1;
        rp_push(r, k, r->arc[k] == ARC_T1 ? 0 : 1);
        arc_trim(r);
        break;
    case ROUTE_BELADY:
        r->knext[k] = r->next_use[access];
        break;
    default:
        break;
    }
}

/* Makes room for bytes: evicts victims, sparing the protected while anything else can go, and
 * releasing the pins of the lookup's earlier experts (a new group) when only they are left. */
static int rp_make_room(struct replay *r, uint64_t bytes, const struct route_lookup *l,
                        int32_t from) {
    while (r->used + bytes > r->cap) {
        int32_t v = rp_victim(r, true);
        if (v < 0)
            v = rp_victim(r, false);
        if (v < 0) {
            r->epoch++;
            for (int32_t i = from; i < l->n; i++) {
                int32_t k = l->layer * r->t->n_expert + r->t->ids[l->off + (size_t)i];
                if (r->res[k])
                    r->pin[k] = r->epoch;
            }
            v = rp_victim(r, false);
        }
        if (v < 0)
            return -EINVAL;
        rp_evict(r, v);
    }
    return 0;
}

static void rp_protect(struct replay *r, size_t from, int lookahead) {
    const struct route_trace *t = r->t;
    for (size_t j = from; j < t->n_look && j < from + (size_t)lookahead; j++)
        for (int32_t i = 0; i < t->look[j].n; i++)
            r->prot[t->look[j].layer * t->n_expert + t->ids[t->look[j].off + (size_t)i]] =
                r->epoch;
}

static int rp_lookup(struct replay *r, size_t li, int lookahead, struct route_result *out) {
    const struct route_trace *t = r->t;
    const struct route_lookup *l = &t->look[li];
    if (r->cp)
        cache_policy_cycle(r->cp, l->layer);
    r->epoch++;
    for (int32_t i = 0; i < l->n; i++)
        r->pin[l->layer * t->n_expert + t->ids[l->off + (size_t)i]] = r->epoch;
    if (lookahead > 0)
        rp_protect(r, li + 1, lookahead);
    const uint64_t bytes = t->expert_bytes[l->layer];
    for (int32_t i = 0; i < l->n; i++) {
        const int32_t k = l->layer * t->n_expert + t->ids[l->off + (size_t)i];
        const bool hit = r->res[k];
        if (!hit) {
            if (r->pol == ROUTE_ARC)
                arc_miss(r, k);
            int rc = rp_make_room(r, bytes, l, i);
            if (rc < 0)
                return rc;
            r->res[k] = true;
            r->used += bytes;
        }
        rp_touch(r, k, hit, l->off + (size_t)i);
        r->pin[k] = r->epoch;
        if (l->decode) {
            out->hits += hit;
            out->misses += !hit;
            out->missed_bytes += hit ? 0 : bytes;
        } else {
            out->prefill_misses += !hit;
        }
    }
    return 0;
}

/* Belady's future: for each lookup of an expert, the index of its key's next lookup. */
static int rp_next_uses(struct replay *r) {
    const struct route_trace *t = r->t;
    size_t *last = malloc(sizeof(*last) * (size_t)r->n_keys);
    r->next_use = malloc(sizeof(*r->next_use) * (t->n_ids ? t->n_ids : 1));
    if (!last || !r->next_use) {
        free(last);
        return -ENOMEM;
    }
    for (int32_t k = 0; k < r->n_keys; k++)
        last[k] = SIZE_MAX;
    for (size_t j = t->n_look; j-- > 0;)
        for (int32_t i = t->look[j].n; i-- > 0;) {
            size_t a = t->look[j].off + (size_t)i;
            int32_t k = t->look[j].layer * t->n_expert + t->ids[a];
            r->next_use[a] = last[k];
            last[k] = a;
        }
    free(last);
    return 0;
}

static void rp_release(struct replay *r) {
    free(r->prev);
    free(r->next);
    free(r->len);
    free(r->res);
    free(r->pin);
    free(r->prot);
    cache_policy_free(r->cp);
    free(r->arc);
    free(r->next_use);
    free(r->knext);
}

static int rp_init(struct replay *r, const struct route_trace *t, enum route_policy p,
                   uint64_t cache_bytes) {
    const size_t n = (size_t)t->n_layer * (size_t)t->n_expert;
    *r = (struct replay){.t = t, .pol = p, .n_keys = (int32_t)n, .cap = cache_bytes};
    r->prev = malloc(sizeof(*r->prev) * (n + RP_HEADS));
    r->next = malloc(sizeof(*r->next) * (n + RP_HEADS));
    r->len = calloc(RP_HEADS, sizeof(*r->len));
    r->res = calloc(n, sizeof(*r->res));
    r->pin = calloc(n, sizeof(*r->pin));
    r->prot = calloc(n, sizeof(*r->prot));
    r->arc = calloc(n, sizeof(*r->arc));
    r->knext = calloc(n, sizeof(*r->knext));
    if (p == ROUTE_LIRS || p == ROUTE_FRECENCY)
        r->cp = cache_policy_new(p == ROUTE_LIRS ? CACHE_POLICY_LIRS : CACHE_POLICY_FRECENCY,
                                 (int32_t)n, (int32_t)n, t->n_used);
    if (!r->prev || !r->next || !r->len || !r->res || !r->pin || !r->prot || !r->arc ||
        !r->knext || ((p == ROUTE_LIRS || p == ROUTE_FRECENCY) && !r->cp) ||
        (p == ROUTE_BELADY && rp_next_uses(r) < 0))
        return -ENOMEM;
    for (size_t i = 0; i < n + RP_HEADS; i++)
        r->prev[i] = r->next[i] = (int32_t)i;
    /* sizes in experts, for the policies that count them: of the average layer */
    const double slots = (double)cache_bytes * t->n_layer * t->n_expert / route_trace_all_bytes(t);
    r->arc_c = slots;
    if (r->cp) /* lirs: its LIR set's size */
        cache_policy_resize(r->cp, (int32_t)slots);
    return 0;
}

const char *route_policy_name(enum route_policy p) {
    static const char *const names[ROUTE_POLICY_COUNT] = {"lru", "lirs", "arc", "frecency",
                                                          "belady"};
    return p >= 0 && p < ROUTE_POLICY_COUNT ? names[p] : "?";
}

int route_replay(const struct route_trace *t, enum route_policy p, uint64_t cache_bytes,
                 int lookahead, struct route_result *out) {
    memset(out, 0, sizeof(*out));
    uint64_t biggest = 0;
    for (int32_t l = 0; l < t->n_layer; l++)
        biggest = t->expert_bytes[l] > biggest ? t->expert_bytes[l] : biggest;
    if (p < 0 || p >= ROUTE_POLICY_COUNT || cache_bytes / (uint64_t)t->n_used < biggest)
        return -EINVAL;
    struct replay r;
    int rc = rp_init(&r, t, p, cache_bytes);
    for (size_t li = 0; rc == 0 && li < t->n_look; li++)
        rc = rp_lookup(&r, li, lookahead, out);
    rp_release(&r);
    const uint64_t n = out->hits + out->misses;
    out->hit_rate = n ? (double)out->hits / (double)n : 0.0;
    out->bytes_per_token =
        t->n_decode_tokens ? (double)out->missed_bytes / t->n_decode_tokens : 0.0;
    return rc;
}

/* ---- three levels ---------------------------------------------------------------------------- */

int route_replay_vram(const struct route_trace *t, int32_t n_slots, struct route_trace **cpu,
                      struct route_vram *out) {
    struct vk_tier *tier = vk_tier_new(t->n_layer, t->n_expert, t->n_used, NULL, n_slots);
    struct route_trace *c = route_trace_new(t->n_layer, t->n_expert, t->n_used, 1);
    int32_t *gpu = malloc(3 * (size_t)t->n_expert * sizeof(*gpu));
    int32_t *sel = malloc((size_t)t->n_expert * sizeof(*sel));
    int32_t *ids = malloc((size_t)t->n_expert * sizeof(*ids));
    int rc = tier && c && gpu && sel && ids ? 0 : -ENOMEM;
    uint64_t *pairs_gpu = &out->pairs_gpu, *pairs_cpu = &out->pairs_cpu;
    uint64_t *promoted = &out->promoted_bytes;
    *pairs_gpu = *pairs_cpu = *promoted = 0;
    if (c)
        memcpy(c->expert_bytes, t->expert_bytes, (size_t)t->n_layer * sizeof(*c->expert_bytes));
    for (size_t k = 0; rc == 0 && k < t->n_look; k++) {
        const struct route_lookup *l = &t->look[k];
        if (k > 0 && l->layer <= t->look[k - 1].layer) { /* a new step: the last one's moves */
            for (int32_t i = 0; t->look[k - 1].decode && i < tier->n_promote; i++)
                *promoted += t->expert_bytes[tier->promote[i].il];
            vk_tier_promote(tier, NULL, NULL);
        }
        const int32_t n_gpu =
            vk_tier_split(tier, l->layer, t->ids + l->off, l->n, gpu, (size_t)t->n_expert, sel);
        int32_t m = 0;
        for (int32_t p = 0; p < l->n; p++)
            if (sel[p] >= 0)
                ids[m++] = sel[p];
        if (l->decode) {
            *pairs_gpu += (uint64_t)n_gpu;
            *pairs_cpu += (uint64_t)m;
        }
        rc = route_trace_add(c, l->layer, ids, NULL, m, l->decode);
    }
    free(gpu);
    free(sel);
    free(ids);
    vk_tier_free(tier);
    if (rc < 0) {
        route_trace_free(c);
        return rc;
    }
    *cpu = c;
    return 0;
}
