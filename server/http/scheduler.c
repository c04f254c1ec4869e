/* scheduler.c - the engine thread and its queue.
 * Invariants: cache_ids[0..cache_n) are exactly the tokens in the engine's KV cache (engine_n_past
 * == cache_n); a job is referenced by its submitter until job_release and by the scheduler from
 * submit until its done callback returned; callbacks run on the engine thread only. */
#include "clock.h"
#include "scheduler.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "json_grammar.h"

struct job {
    int (*call)(void *ctx, struct scheduler *s); /* a call job (scheduler_call), or NULL */
    int call_rc;
    bool call_done;
    atomic_int refs;
    atomic_bool cancelled;
    int32_t *ids;
    size_t n;
    struct job_params p;
    char *stop[JOB_MAX_STOP];
    struct job_callbacks cb;
    void *ctx;
    struct job *next;
};

struct scheduler {
    struct engine *e;
    const struct tokenizer *tk;
    int32_t n_vocab;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards the queue, stop, busy and stats */
    pthread_cond_t cv;
    pthread_cond_t done_cv; /* signalled when a call job finished */
    struct job *head, *tail;
    int queued, queue_max;
    bool stop, busy;
    int32_t *cache_ids; /* [n_ctx] the KV cache's tokens */
    int32_t cache_n;
    float *logits;      /* [n_vocab] */
    float *masked;      /* [n_vocab] logits with the tokens a constraint forbids at -inf */
    int32_t msg_start;  /* the token that opens a chat message (<|im_start|> ...), or -1 */
    struct scheduler_stats stats;
};

/* ---- jobs ------------------------------------------------------------------------------------ */

struct job *job_new(const int32_t *ids, size_t n, const struct job_params *p,
                    const struct job_callbacks *cb, void *ctx) {
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    atomic_init(&j->refs, 1);
    atomic_init(&j->cancelled, false);
    j->ids = malloc((n ? n : 1) * sizeof(*ids));
    j->n = n;
    j->p = *p;
    j->cb = *cb;
    j->ctx = ctx;
    bool ok = j->ids != NULL;
    if (ok)
        memcpy(j->ids, ids, n * sizeof(*ids));
    j->p.n_stop = p->n_stop < JOB_MAX_STOP ? p->n_stop : JOB_MAX_STOP;
    for (int i = 0; i < j->p.n_stop; i++) {
        j->stop[i] = strdup(p->stop[i]);
        j->p.stop[i] = j->stop[i];
        ok &= j->stop[i] != NULL && j->stop[i][0] != '\0';
    }
    if (!ok) {
        job_release(j);
        return NULL;
    }
    return j;
}

void job_cancel(struct job *j) {
    atomic_store(&j->cancelled, true);
}

void job_release(struct job *j) {
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1)
        return;
    for (int i = 0; i < JOB_MAX_STOP; i++)
        free(j->stop[i]);
    free(j->ids);
    free(j);
}

/* ---- generation ------------------------------------------------------------------------------ */

/* Text decoded but not yet shown, because its tail may begin a stop string. */
struct holdback {
    char buf[4096];
    size_t len;
};

/* Length of the longest suffix of h that is a proper prefix of one of the stop strings. */
static size_t stop_tail(const struct job *j, const struct holdback *h) {
    size_t best = 0;
    for (int i = 0; i < j->p.n_stop; i++) {
        size_t sl = strlen(j->stop[i]);
        for (size_t k = sl - 1 < h->len ? sl - 1 : h->len; k > best; k--)
            if (memcmp(h->buf + h->len - k, j->stop[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

/* Appends text and shows what can no longer be part of a stop string. Returns true when a stop
 * string completed (the text before it was shown, the rest dropped). */
static bool holdback_push(const struct job *j, struct holdback *h, const char *text, size_t len,
                          const struct job_token *tok) {
    while (len > 0) {
        size_t take = sizeof(h->buf) - h->len < len ? sizeof(h->buf) - h->len : len;
        memcpy(h->buf + h->len, text, take);
        h->len += take;
        text += take;
        len -= take;
        size_t first = h->len;
        for (int i = 0; i < j->p.n_stop; i++) {
            const char *at = memmem(h->buf, h->len, j->stop[i], strlen(j->stop[i]));
            if (at && (size_t)(at - h->buf) < first)
                first = (size_t)(at - h->buf);
        }
        if (first < h->len) {
            if (first > 0)
                j->cb.text(j->ctx, h->buf, first, tok);
            h->len = 0;
            return true;
        }
        size_t keep = stop_tail(j, h);
        if (keep == h->len && h->len == sizeof(h->buf))
            keep = 0; /* cannot happen with stop strings shorter than the buffer */
        if (h->len > keep)
            j->cb.text(j->ctx, h->buf, h->len - keep, tok);
        memmove(h->buf, h->buf + h->len - keep, keep);
        h->len = keep;
    }
    return false;
}

/* logprob of id and the top alternatives, from raw logits. */
static void token_logprobs(const float *logits, int32_t n_vocab, int n_top, struct job_token *t) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)(logits[i] - mx));
    const float lse = mx + (float)log(sum);
    t->logprob = logits[t->id] - lse;
    /* the n_top best in one pass: an insertion into a short sorted list (ties: lower id first) */
    t->n_top = 0;
    for (int32_t i = 0; i < n_vocab && n_top > 0; i++) {
        if (t->n_top == n_top && logits[i] <= logits[t->top_id[n_top - 1]])
            continue;
        int k = t->n_top < n_top ? t->n_top++ : n_top - 1;
        for (; k > 0 && logits[t->top_id[k - 1]] < logits[i]; k--)
            t->top_id[k] = t->top_id[k - 1];
        t->top_id[k] = i;
    }
    for (int k = 0; k < t->n_top; k++)
        t->top_logprob[k] = logits[t->top_id[k]] - lse;
}

/* Copies the logits into s->masked with every token that would break the JSON object g has read
 * so far set to -inf (the end of generation is allowed once the object is closed; special tokens
 * never). Returns how many tokens remain allowed. */
static int32_t json_mask(struct scheduler *s, const struct json_grammar *g) {
    const bool done = json_grammar_done(g);
    int32_t allowed = 0;
    for (int32_t v = 0; v < s->n_vocab; v++) {
        bool ok;
        if (tokenizer_is_eog(s->tk, v)) {
            ok = done;
        } else if (tokenizer_is_special(s->tk, v)) {
            ok = false;
        } else {
            size_t len = 0;
            const char *piece = tokenizer_piece(s->tk, v, &len);
            struct json_grammar t = *g;
            ok = piece && len > 0 && json_grammar_feed(&t, piece, len);
        }
        s->masked[v] = ok ? s->logits[v] : -INFINITY;
        allowed += ok;
    }
    return allowed;
}

/* Feeds ids[from .. to) a batch at a time on top of the cache, checking cancel (may be NULL)
 * between batches; logits of the last token into s->logits when wanted. Returns 0, -ECANCELED or
 * the engine's error (the cache then ends wherever the engine does). */
static int feed_range(struct scheduler *s, const int32_t *ids, size_t from, size_t to, bool logits,
                      const atomic_bool *cancel) {
    const int32_t nb = engine_n_batch(s->e);
    for (size_t i = from; i < to; i += (size_t)nb) {
        if (cancel && atomic_load(cancel))
            return -ECANCELED;
        int32_t k = to - i < (size_t)nb ? (int32_t)(to - i) : nb;
        int rc = engine_eval(s->e, ids + i, k, logits ? s->logits : NULL, false);
        if (rc < 0) {
            s->cache_n = engine_n_past(s->e);
            return rc;
        }
        memcpy(s->cache_ids + s->cache_n, ids + i, (size_t)k * sizeof(int32_t));
        s->cache_n += k;
    }
    return 0;
}

/* Where a recurrent model checkpoints inside a prompt being fed from p: before the last message
 * header in ids[p+1 .. n-1) (the next turn of a chat re-renders everything before it, but maybe
 * not what follows: a reasoning block dropped, another generation prompt), or 0 for none. */
static size_t last_message_start(const struct scheduler *s, const int32_t *ids, size_t p,
                                 size_t n) {
    for (size_t i = n - 1; s->msg_start >= 0 && i > p + 1; i--)
        if (ids[i - 1] == s->msg_start)
            return i - 1;
    return 0;
}

/* Makes the cache hold exactly ids[0..n): keeps the longest prefix it can reuse (the prompt
 * cache; its length goes to *cached) and feeds the rest. A model with recurrent state reuses up to
 * its newest checkpoint within the common prefix, and checkpoints this prompt before its last
 * message header and before its last token, so the next turn or the same prompt again (which
 * refeeds the last token for its logits) resume there. With logits, at least the last token is
 * fed, so that s->logits holds its row. Returns 0, -ECANCELED or the engine's error. */
static int feed_prefix(struct scheduler *s, const int32_t *ids, size_t n, bool logits,
                       const atomic_bool *cancel, int32_t *cached) {
    size_t p = 0;
    while (p < (size_t)s->cache_n && p < n && s->cache_ids[p] == ids[p])
        p++;
    if (logits && p == n && p > 0)
        p--;
    p = (size_t)engine_truncate(s->e, (int32_t)p);
    s->cache_n = (int32_t)p;
    if (cached)
        *cached = (int32_t)p;
    if (engine_is_recurrent(s->e) && n > p + 1) {
        size_t marks[2] = {last_message_start(s, ids, p, n), n - 1};
        for (int m = 0; m < 2; m++) {
            if (marks[m] <= (size_t)s->cache_n)
                continue;
            int rc = feed_range(s, ids, (size_t)s->cache_n, marks[m], false, cancel);
            if (rc < 0)
                return rc;
            engine_checkpoint(s->e);
        }
    }
    return feed_range(s, ids, (size_t)s->cache_n, n, logits, cancel);
}

static void run_job(struct scheduler *s, struct job *j) {
    struct job_summary sum = {.finish_reason = "error", .prompt_tokens = (int32_t)j->n};
    const int32_t n_ctx = engine_n_ctx(s->e);
    struct sampler *smp = NULL;
    double t0 = clock_now_s(), t1 = t0;
    if (j->n == 0 || j->n + (size_t)j->p.max_tokens > (size_t)n_ctx) {
        sum.rc = -ENOSPC;
        goto done;
    }
    if ((sum.rc = feed_prefix(s, j->ids, j->n, true, &j->cancelled, &sum.cached_tokens)) < 0) {
        sum.finish_reason = sum.rc == -ECANCELED ? "cancelled" : "error";
        sum.rc = sum.rc == -ECANCELED ? 0 : sum.rc;
        goto done;
    }
    t1 = clock_now_s();
    smp = sampler_new(&j->p.sp, s->n_vocab);
    if (!smp) {
        sum.rc = -ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < j->n; i++)
        sampler_accept(smp, j->ids[i]);
    struct tokenizer_stream ts = {0};
    struct holdback hb = {.len = 0};
    char piece[512];
    struct json_grammar jg;
    json_grammar_init(&jg);
    for (;;) {
        if (j->p.json_object && json_mask(s, &jg) == 0) {
            sum.finish_reason = "stop"; /* cannot happen: some byte always continues JSON */
            break;
        }
        struct job_token tok = {.id = sampler_sample(smp, j->p.json_object ? s->masked
                                                                           : s->logits)};
        if (j->p.logprobs)
            token_logprobs(s->logits, s->n_vocab, j->p.top_logprobs, &tok);
        sampler_accept(smp, tok.id);
        if (tokenizer_is_eog(s->tk, tok.id)) {
            sum.finish_reason = "stop";
            break;
        }
        sum.completion_tokens++;
        if (j->cb.token)
            j->cb.token(j->ctx, &tok);
        if (j->p.json_object) {
            size_t raw_len = 0;
            const char *raw = tokenizer_piece(s->tk, tok.id, &raw_len);
            json_grammar_feed(&jg, raw, raw_len); /* allowed by the mask: it cannot fail */
        }
        size_t len = tokenizer_decode_stream(s->tk, &ts, tok.id, piece, sizeof(piece));
        if (holdback_push(j, &hb, piece, len, &tok)) {
            sum.finish_reason = "stop";
            hb.len = 0;
            ts.n_pending = 0;
            break;
        }
        if (j->p.json_object && json_grammar_done(&jg)) {
            sum.finish_reason = "stop";
            break;
        }
        if (sum.completion_tokens >= j->p.max_tokens) {
            sum.finish_reason = "length";
            break;
        }
        if (atomic_load(&j->cancelled)) {
            sum.finish_reason = "cancelled";
            break;
        }
        if ((sum.rc = engine_eval(s->e, &tok.id, 1, s->logits, false)) < 0) {
            s->cache_n = engine_n_past(s->e); /* a recurrent model went back to a checkpoint */
            break;
        }
        s->cache_ids[s->cache_n++] = tok.id;
    }
    /* what the decoder and the stop strings held back is text after all */
    size_t len = tokenizer_stream_flush(&ts, piece, sizeof(piece));
    bool stopped = len > 0 && holdback_push(j, &hb, piece, len, NULL);
    if (stopped)
        sum.finish_reason = "stop";
    else if (hb.len > 0)
        j->cb.text(j->ctx, hb.buf, hb.len, NULL);
done:
    sampler_free(smp);
    double t2 = clock_now_s();
    sum.prefill_ms = 1e3 * (t1 - t0);
    sum.decode_ms = 1e3 * (t2 - t1);
    pthread_mutex_lock(&s->mu);
    s->stats.jobs_done++;
    s->stats.jobs_cancelled += strcmp(sum.finish_reason, "cancelled") == 0;
    s->stats.prompt_tokens += (uint64_t)sum.prompt_tokens;
    s->stats.cached_tokens += (uint64_t)sum.cached_tokens;
    s->stats.completion_tokens += (uint64_t)sum.completion_tokens;
    s->stats.prefill_s += t1 - t0;
    s->stats.decode_s += t2 - t1;
    pthread_mutex_unlock(&s->mu);
    j->cb.done(j->ctx, &sum);
}

/* A call job: fn runs on this thread; the caller waits on the scheduler's condition. */
static void run_call(struct scheduler *s, struct job *j) {
    int rc = j->call(j->ctx, s);
    pthread_mutex_lock(&s->mu);
    j->call_rc = rc;
    j->call_done = true;
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
}

static void *engine_thread(void *arg) {
    struct scheduler *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && !s->head)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop)
            break;
        struct job *j = s->head;
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        if (j->call)
            run_call(s, j);
        else
            run_job(s, j);
        job_release(j);
        pthread_mutex_lock(&s->mu);
        s->busy = false;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the scheduler --------------------------------------------------------------------------- */

struct scheduler *scheduler_new(struct engine *e, const struct tokenizer *tk, int queue_max,
                                char *err, size_t err_len) {
    struct scheduler *s = calloc(1, sizeof(*s));
    if (!s) {
        err_set(err, err_len, "scheduler: out of memory");
        return NULL;
    }
    s->e = e;
    s->tk = tk;
    s->n_vocab = tokenizer_n_vocab(tk);
    s->msg_start = tokenizer_find(tk, "<|im_start|>");
    if (s->msg_start < 0)
        s->msg_start = tokenizer_find(tk, "<|start_header_id|>");
    s->queue_max = queue_max > 0 ? queue_max : 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    s->cache_ids = malloc(sizeof(int32_t) * (size_t)engine_n_ctx(e));
    s->logits = calloc((size_t)s->n_vocab, sizeof(float));
    s->masked = calloc((size_t)s->n_vocab, sizeof(float));
    engine_truncate(e, 0);
    if (!s->cache_ids || !s->logits || !s->masked || pthread_create(&s->thread, NULL, engine_thread, s) != 0) {
        err_set(err, err_len, "scheduler: cannot start the engine thread");
        scheduler_free(s);
        return NULL;
    }
    s->started = true;
    return s;
}

void scheduler_free(struct scheduler *s) {
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    struct job *q = s->head;
    s->head = s->tail = NULL;
    s->queued = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started)
        pthread_join(s->thread, NULL);
    while (q) { /* the queued jobs never ran */
        struct job *next = q->next;
        struct job_summary sum = {.rc = -ECANCELED, .finish_reason = "cancelled",
                                  .prompt_tokens = (int32_t)q->n};
        if (q->call) { /* callers must not be waiting past scheduler_free: wake any anyway */
            pthread_mutex_lock(&s->mu);
            q->call_done = true;
            q->call_rc = -ECANCELED;
            pthread_cond_broadcast(&s->done_cv);
            pthread_mutex_unlock(&s->mu);
        } else
            q->cb.done(q->ctx, &sum);
        job_release(q);
        q = next;
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->done_cv);
    free(s->cache_ids);
    free(s->logits);
    free(s->masked);
    free(s);
}

int scheduler_submit(struct scheduler *s, struct job *j) {
    pthread_mutex_lock(&s->mu);
    if (s->stop || s->queued >= s->queue_max) {
        pthread_mutex_unlock(&s->mu);
        return -EBUSY;
    }
    atomic_fetch_add(&j->refs, 1);
    j->next = NULL;
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->queued++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void scheduler_get_stats(struct scheduler *s, struct scheduler_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->queued = s->queued;
    out->busy = s->busy;
    pthread_mutex_unlock(&s->mu);
}

/* ---- calls on the engine thread -------------------------------------------------------------- */

int scheduler_call(struct scheduler *s, int (*fn)(void *ctx, struct scheduler *s), void *ctx) {
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    atomic_init(&j->refs, 1);
    atomic_init(&j->cancelled, false);
    j->call = fn;
    j->ctx = ctx;
    int rc = scheduler_submit(s, j);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        while (!j->call_done)
            pthread_cond_wait(&s->done_cv, &s->mu);
        rc = j->call_rc;
        pthread_mutex_unlock(&s->mu);
    }
    job_release(j);
    return rc;
}

struct engine *scheduler_engine(struct scheduler *s) {
    return s->e;
}

int scheduler_prefill(struct scheduler *s, const int32_t *ids, size_t n, int32_t *cached) {
    if (n > (size_t)engine_n_ctx(s->e))
        return -ENOSPC;
    return feed_prefix(s, ids, n, false, NULL, cached);
}

void scheduler_set_cached(struct scheduler *s, const int32_t *ids, int32_t n) {
    if (n > 0)
        memcpy(s->cache_ids, ids, (size_t)n * sizeof(int32_t));
    s->cache_n = n;
}
