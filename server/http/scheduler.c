/* scheduler.c - the engine thread, its slots and its queue (see scheduler.h).
 * Invariants: a slot's cache_ids[0..cache_n) are exactly the tokens in its engine sequence's KV
 * cache (engine_n_past(e, seq) == cache_n); a job is referenced by its submitter until
 * job_release and by the scheduler from submit until its done callback returned; callbacks run on
 * the engine thread only; the slots are touched by the engine thread only, /v1/stats reads a
 * snapshot taken under the mutex after each step. */
#include "clock.h"
#include "scheduler.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "err.h"
#include "json_grammar.h"
#include "stop_text.h"
#include "token_logits.h"

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
    double t_submit;
    struct job *next;
};

/* A slot: one engine sequence and the job running on it. */
struct slot {
    int32_t seq;                /* its engine sequence (= its index) */
    enum scheduler_slot_state state;
    int32_t *cache_ids;         /* [n_ctx] the tokens in its KV cache */
    int32_t cache_n;
    uint64_t last_used;         /* when its last job ended: the LRU order of idle slots */
    uint64_t admitted;          /* when its job got the slot: prompts are read in this order */
    struct job *job;            /* the running job, or NULL when idle */
    size_t marks[2];            /* models with checkpoints: prompt positions to take them at */
    int n_marks, next_mark;
    int32_t next;               /* decoding: the token the next step feeds */
    int32_t fed_now;            /* tokens the step being run feeds */
    struct sampler *smp;
    struct tokenizer_stream ts;
    struct stop_text held;      /* decoded text held back while it may begin a stop string */
    struct json_grammar jg;
    struct job_summary sum;
    double t_start, t_first, t_end; /* admitted; its prompt read; its end (0: running) */
    float *logits;              /* [n_vocab] after its last token */
    uint64_t jobs;
};

struct scheduler {
    struct engine *e;
    const struct tokenizer *tk;
    int32_t n_vocab, n_ctx, n_batch;
    int n_slots;
    struct slot *slots;         /* [n_slots] */
    struct engine_part *parts;  /* [n_slots] the step being built */
    struct slot **part_slot;    /* [n_slots] the slot of each part */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards the queue, stop, the stats snapshot */
    pthread_cond_t cv;
    pthread_cond_t done_cv; /* signalled when a call job finished */
    struct job *head, *tail;
    int queued, queue_max;
    bool stop;
    uint64_t tick;      /* counts admissions and endings, for the slots' order */
    float *masked;      /* [n_vocab] logits with the tokens a constraint forbids at -inf */
    int32_t msg_start;  /* the token that opens a chat message (<|im_start|>, <|start|> ...),
                         * or -1 */
    struct slot *call_slot; /* the slot a running call works on */
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

/* Where stop_text shows a job's text: its text callback, with the token that completed it. */
struct job_shown {
    const struct job *j;
    const struct job_token *tok; /* NULL: text released later */
};

static void job_show(void *ctx, const char *text, size_t len) {
    const struct job_shown *w = ctx;
    w->j->cb.text(w->j->ctx, text, len, w->tok);
}

/* ---- slots: choosing one, starting a job ---------------------------------------------------- */

/* Copies what /v1/stats shows of the slots into s->stats (the engine thread, with mu held: the
 * slots themselves are never read by another thread). */
static void slots_snapshot(struct scheduler *s) {
    s->stats.busy = false;
    for (int i = 0; i < s->n_slots; i++) {
        const struct slot *l = &s->slots[i];
        struct scheduler_slot_stats *o = &s->stats.slot[i];
        o->state = l->state;
        o->cached = l->cache_n;
        o->jobs = l->jobs;
        o->prompt_tokens = l->sum.prompt_tokens;
        o->completion_tokens = l->sum.completion_tokens;
        double dt = l->t_first > 0.0 ? (l->t_end > 0.0 ? l->t_end : clock_now_s()) - l->t_first
                                     : 0.0;
        o->decode_tok_s = dt > 0.0 && o->completion_tokens > 1
                              ? (double)(o->completion_tokens - 1) / dt : 0.0;
        s->stats.busy |= l->state != SLOT_IDLE;
    }
}

/* Tokens of ids[0..n) slot l can reuse: the common prefix with its cache, cut back to where its
 * sequence can really resume (a recurrent model's checkpoint); with logits, at least the last
 * token is fed again, so that its row is computed. */
static int32_t slot_reusable(const struct scheduler *s, const struct slot *l, const int32_t *ids,
                             size_t n, bool logits) {
    size_t p = 0;
    while (p < (size_t)l->cache_n && p < n && l->cache_ids[p] == ids[p])
        p++;
    if (logits && p == n && p > 0)
        p--;
    return engine_reusable(s->e, l->seq, (int32_t)p);
}

/* The idle slot for prompt ids[0..n): the longest reusable prefix, then the least recently used.
 * NULL when every slot is busy. */
static struct slot *slot_choose(struct scheduler *s, const int32_t *ids, size_t n, bool logits) {
    struct slot *best = NULL;
    int32_t best_p = -1;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *l = &s->slots[i];
        if (l->state != SLOT_IDLE)
            continue;
        int32_t p = ids ? slot_reusable(s, l, ids, n, logits) : 0;
        if (p > best_p || (p == best_p && l->last_used < best->last_used)) {
            best = l;
            best_p = p;
        }
    }
    return best;
}

/* Where a model with checkpoints (recurrent state, window rings) takes one inside a prompt being
 * fed from p: before the last message
 * header in ids[p+1 .. n-1) (the next turn of a chat re-renders everything before it, but maybe
 * not what follows: a reasoning block dropped, another generation prompt), or 0 for none. */
static size_t last_message_start(const struct scheduler *s, const int32_t *ids, size_t p,
                                 size_t n) {
    for (size_t i = n - 1; s->msg_start >= 0 && i > p + 1; i--)
        if (ids[i - 1] == s->msg_start)
            return i - 1;
    return 0;
}

/* Cuts slot l's cache back to what ids[0..n) can reuse (its length goes to *cached) and plans the
 * checkpoints a model with them takes while reading the rest: before the prompt's last message
 * header and before its last token, so the next turn or the same prompt again (which refeeds the
 * last token for its logits) resume there. */
static void slot_prepare(struct scheduler *s, struct slot *l, const int32_t *ids, size_t n,
                         bool logits, int32_t *cached) {
    int32_t p = slot_reusable(s, l, ids, n, logits);
    l->cache_n = engine_truncate(s->e, l->seq, p);
    *cached = l->cache_n;
    l->n_marks = l->next_mark = 0;
    if (engine_has_checkpoints(s->e) && n > (size_t)l->cache_n + 1) {
        size_t marks[2] = {last_message_start(s, ids, (size_t)l->cache_n, n), n - 1};
        for (int m = 0; m < 2; m++)
            if (marks[m] > (size_t)l->cache_n &&
                (l->n_marks == 0 || marks[m] > l->marks[l->n_marks - 1]))
                l->marks[l->n_marks++] = marks[m];
    }
}

/* Where slot l's prompt reading stops next: its next checkpoint mark, or the prompt's end. */
static size_t slot_prefill_end(const struct slot *l, size_t n) {
    return l->next_mark < l->n_marks ? l->marks[l->next_mark] : n;
}

/* Records that the step fed k tokens of src to slot l: its cache grows, and a sequence with
 * checkpoints that reached a mark takes one there. */
static void slot_fed(struct scheduler *s, struct slot *l, const int32_t *src, int32_t k) {
    memcpy(l->cache_ids + l->cache_n, src, (size_t)k * sizeof(int32_t));
    l->cache_n += k;
    while (l->next_mark < l->n_marks && (size_t)l->cache_n >= l->marks[l->next_mark]) {
        if ((size_t)l->cache_n == l->marks[l->next_mark])
            engine_checkpoint(s->e, l->seq);
        l->next_mark++;
    }
}

/* Stats of the job's end, the done callback, the slot idle again. */
static void slot_finish(struct scheduler *s, struct slot *l) {
    struct job *j = l->job;
    struct job_summary *sum = &l->sum;
    char piece[512]; /* what the decoder and the stop strings held back is text after all */
    size_t len = tokenizer_stream_flush(&l->ts, piece, sizeof(piece));
    struct job_shown shown = {j, NULL};
    if (len > 0 && stop_text_push(&l->held, piece, len, job_show, &shown))
        sum->finish_reason = "stop";
    else
        stop_text_flush(&l->held, job_show, &shown);
    const double t2 = clock_now_s();
    if (l->t_first == 0.0)
        l->t_first = t2;
    l->t_end = t2;
    sum->prefill_ms = 1e3 * (l->t_first - l->t_start);
    sum->decode_ms = 1e3 * (t2 - l->t_first);
    pthread_mutex_lock(&s->mu);
    s->stats.jobs_done++;
    s->stats.jobs_cancelled += strcmp(sum->finish_reason, "cancelled") == 0;
    s->stats.prompt_tokens += (uint64_t)sum->prompt_tokens;
    s->stats.cached_tokens += (uint64_t)sum->cached_tokens;
    s->stats.completion_tokens += (uint64_t)sum->completion_tokens;
    s->stats.prefill_s += l->t_first - l->t_start;
    s->stats.decode_s += t2 - l->t_first;
    pthread_mutex_unlock(&s->mu);
    j->cb.done(j->ctx, sum);
    sampler_free(l->smp);
    l->smp = NULL;
    job_release(j);
    l->job = NULL;
    l->state = SLOT_IDLE;
    l->last_used = ++s->tick;
    pthread_mutex_lock(&s->mu);
    slots_snapshot(s);
    pthread_mutex_unlock(&s->mu);
}

/* Starts job j on idle slot l: checks it fits, cuts the cache back to its reusable prefix, makes
 * its sampler. A job that cannot start ends at once (done called). */
static void slot_start(struct scheduler *s, struct slot *l, struct job *j) {
    l->job = j;
    l->sum = (struct job_summary){.finish_reason = "error", .prompt_tokens = (int32_t)j->n,
                                  .slot = (int)(l - s->slots)};
    l->t_start = clock_now_s();
    l->t_first = l->t_end = 0.0;
    l->sum.queue_ms = 1e3 * (l->t_start - j->t_submit);
    l->ts = (struct tokenizer_stream){0};
    stop_text_init(&l->held, j->p.stop, j->p.n_stop);
    json_grammar_init(&l->jg);
    l->admitted = ++s->tick;
    l->jobs++;
    l->state = SLOT_PREFILL;
    if (j->n == 0 || j->n + (size_t)j->p.max_tokens > (size_t)s->n_ctx) {
        l->sum.rc = -ENOSPC;
        slot_finish(s, l);
        return;
    }
    if (atomic_load(&j->cancelled)) {
        l->sum.finish_reason = "cancelled";
        slot_finish(s, l);
        return;
    }
    if (!(l->smp = sampler_new(&j->p.sp, s->n_vocab))) {
        l->sum.rc = -ENOMEM;
        slot_finish(s, l);
        return;
    }
    for (size_t i = 0; i < j->n; i++)
        sampler_accept(l->smp, j->ids[i]);
    slot_prepare(s, l, j->ids, j->n, true, &l->sum.cached_tokens);
}

/* ---- slots: generating ----------------------------------------------------------------------- */

/* Samples slot l's next token from its logits, shows it, and decides whether the job goes on
 * (the slot then decodes that token in the next step) or ends (done called). */
static void slot_sample(struct scheduler *s, struct slot *l) {
    struct job *j = l->job;
    struct job_summary *sum = &l->sum;
    char piece[512];
    sum->finish_reason = NULL;
    if (j->p.json_object &&
        token_logits_json_mask(s->tk, &l->jg, l->logits, s->n_vocab, s->masked) == 0)
        sum->finish_reason = "stop"; /* cannot happen: some byte always continues JSON */
    struct job_token tok = {0};
    if (!sum->finish_reason) {
        tok.id = sampler_sample(l->smp, j->p.json_object ? s->masked : l->logits);
        if (j->p.logprobs)
            tok.logprob = token_logits_logprob(l->logits, s->n_vocab, tok.id, j->p.top_logprobs,
                                               tok.top_id, tok.top_logprob, &tok.n_top);
        sampler_accept(l->smp, tok.id);
        if (tokenizer_is_eog(s->tk, tok.id))
            sum->finish_reason = "stop";
    }
    if (!sum->finish_reason) {
        sum->completion_tokens++;
        if (j->cb.token)
            j->cb.token(j->ctx, &tok);
        if (j->p.json_object) {
            size_t raw_len = 0;
            const char *raw = tokenizer_piece(s->tk, tok.id, &raw_len);
            json_grammar_feed(&l->jg, raw, raw_len); /* allowed by the mask: it cannot fail */
        }
        size_t len = tokenizer_decode_stream(s->tk, &l->ts, tok.id, piece, sizeof(piece));
        struct job_shown shown = {j, &tok};
        if (stop_text_push(&l->held, piece, len, job_show, &shown)) {
            sum->finish_reason = "stop";
            l->ts.n_pending = 0;
        } else if (j->p.json_object && json_grammar_done(&l->jg)) {
            sum->finish_reason = "stop";
        } else if (sum->completion_tokens >= j->p.max_tokens) {
            sum->finish_reason = "length";
        } else if (atomic_load(&j->cancelled)) {
            sum->finish_reason = "cancelled";
        }
    }
    if (sum->finish_reason) {
        slot_finish(s, l);
        return;
    }
    l->next = tok.id;
    l->state = SLOT_DECODE;
}

/* ---- the step -------------------------------------------------------------------------------- */

/* Prompt tokens a step reads while other slots decode: a step costs about as long as its prompt
 * chunk takes, so the decoding slots' tokens come at most this chunk's time apart. */
#define SCHED_CHUNK_WHILE_DECODING 64

/* Builds the step: every decoding slot's next token, then chunks of the prompts being read, oldest
 * admission first, while the batch has room. Returns the number of parts. */
static int step_build(struct scheduler *s) {
    int n = 0;
    int32_t used = 0;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *l = &s->slots[i];
        if (l->state != SLOT_DECODE)
            continue;
        l->fed_now = 1;
        s->part_slot[n] = l;
        s->parts[n++] = (struct engine_part){.seq = l->seq, .tokens = &l->next, .n = 1,
                                             .logits = l->logits};
        used++;
    }
    int32_t room = s->n_batch - used;
    if (used > 0 && room > SCHED_CHUNK_WHILE_DECODING)
        room = SCHED_CHUNK_WHILE_DECODING;
    for (;;) {
        struct slot *next = NULL;
        for (int i = 0; i < s->n_slots; i++) {
            struct slot *l = &s->slots[i];
            bool taken = false;
            for (int k = 0; k < n; k++)
                taken |= s->part_slot[k] == l;
            if (l->state == SLOT_PREFILL && !taken && (!next || l->admitted < next->admitted))
                next = l;
        }
        if (!next || room <= 0)
            break;
        const struct job *j = next->job;
        size_t end = slot_prefill_end(next, j->n), from = (size_t)next->cache_n;
        int32_t k = end - from < (size_t)room ? (int32_t)(end - from) : room;
        next->fed_now = k;
        s->part_slot[n] = next;
        s->parts[n++] = (struct engine_part){
            .seq = next->seq, .tokens = j->ids + from, .n = k,
            .logits = from + (size_t)k == j->n ? next->logits : NULL};
        room -= k;
    }
    return n;
}

/* After a failed step: each slot of it keeps what its sequence still holds (the tokens of the
 * engine's earlier steps, or a recurrent model's checkpoint), and its job ends with the error. */
static void step_failed(struct scheduler *s, int n_parts, int rc) {
    for (int i = 0; i < n_parts; i++) {
        struct slot *l = s->part_slot[i];
        int32_t now = engine_n_past(s->e, l->seq);
        if (now > l->cache_n)
            memcpy(l->cache_ids + l->cache_n, s->parts[i].tokens,
                   (size_t)(now - l->cache_n) * sizeof(int32_t));
        l->cache_n = now;
        l->sum.rc = rc;
        l->sum.finish_reason = "error";
        slot_finish(s, l);
    }
}

/* Copies what /v1/stats shows of the slots and of this step. */
static void step_stats(struct scheduler *s, int n_parts, const struct engine_timing *t0,
                       const struct engine_timing *t1, double secs) {
    pthread_mutex_lock(&s->mu);
    struct scheduler_stats *st = &s->stats;
    st->slots_active = n_parts;
    st->steps += t1->n_steps - t0->n_steps;
    st->step_tokens += t1->n_step_tokens - t0->n_step_tokens;
    st->step_seqs += t1->n_step_seqs - t0->n_step_seqs;
    st->step_union_experts += t1->n_union_experts - t0->n_union_experts;
    st->step_moe_layers += t1->n_moe_layer_steps - t0->n_moe_layer_steps;
    st->last_batch_tokens = (int32_t)(t1->n_step_tokens - t0->n_step_tokens);
    st->last_batch_seqs = n_parts;
    uint64_t layers = t1->n_moe_layer_steps - t0->n_moe_layer_steps;
    st->last_union_experts =
        layers ? (double)(t1->n_union_experts - t0->n_union_experts) / (double)layers : 0.0;
    st->busy_s += secs;
    slots_snapshot(s);
    pthread_mutex_unlock(&s->mu);
}

/* Runs one step of every active slot; the slots whose step produced logits sample from them. */
static void step_run(struct scheduler *s) {
    int n = step_build(s);
    if (n == 0)
        return;
    struct engine_timing t0, t1;
    engine_get_timing(s->e, &t0);
    double start = clock_now_s();
    int rc = engine_eval_batch(s->e, s->parts, n);
    engine_get_timing(s->e, &t1);
    step_stats(s, n, &t0, &t1, clock_now_s() - start);
    if (rc < 0) {
        step_failed(s, n, rc);
        return;
    }
    for (int i = 0; i < n; i++) {
        struct slot *l = s->part_slot[i];
        slot_fed(s, l, s->parts[i].tokens, l->fed_now);
        if (l->state == SLOT_PREFILL && (size_t)l->cache_n < l->job->n)
            continue;
        if (l->state == SLOT_PREFILL)
            l->t_first = clock_now_s();
        slot_sample(s, l);
    }
}

/* Ends the jobs of active slots whose client cancelled. */
static void slots_reap_cancelled(struct scheduler *s) {
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *l = &s->slots[i];
        if (l->state != SLOT_IDLE && atomic_load(&l->job->cancelled)) {
            l->sum.finish_reason = "cancelled";
            l->sum.rc = 0;
            slot_finish(s, l);
        }
    }
}

/* ---- the engine thread ----------------------------------------------------------------------- */

/* A call job: fn runs on this thread with an idle slot; the caller waits on done_cv. */
static void run_call(struct scheduler *s, struct job *j) {
    s->call_slot = slot_choose(s, NULL, 0, false);
    int rc = j->call(j->ctx, s);
    s->call_slot = NULL;
    pthread_mutex_lock(&s->mu);
    j->call_rc = rc;
    j->call_done = true;
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
}

static int slots_active(const struct scheduler *s) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++)
        n += s->slots[i].state != SLOT_IDLE;
    return n;
}

/* Takes queued jobs while a slot is idle (called with mu held; releases it around each start). A
 * call job runs as soon as it reaches the head and a slot is idle. */
static void admit(struct scheduler *s) {
    while (s->head && !s->stop && slots_active(s) < s->n_slots) {
        struct job *j = s->head;
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        pthread_mutex_unlock(&s->mu);
        if (j->call) {
            run_call(s, j);
            job_release(j);
        } else {
            slot_start(s, slot_choose(s, j->ids, j->n, true), j);
        }
        pthread_mutex_lock(&s->mu);
        slots_snapshot(s);
    }
}

static void *engine_thread(void *arg) {
    struct scheduler *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && !s->head && slots_active(s) == 0) {
            s->stats.slots_active = 0;
            pthread_cond_wait(&s->cv, &s->mu);
        }
        admit(s);
        if (s->stop && slots_active(s) == 0)
            break;
        pthread_mutex_unlock(&s->mu);
        slots_reap_cancelled(s);
        step_run(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the scheduler --------------------------------------------------------------------------- */

static void slots_free(struct scheduler *s) {
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        free(s->slots[i].cache_ids);
        free(s->slots[i].logits);
    }
    free(s->slots);
    free(s->parts);
    free(s->part_slot);
}

static int slots_alloc(struct scheduler *s) {
    s->n_slots = engine_n_seq(s->e);
    s->slots = calloc((size_t)s->n_slots, sizeof(*s->slots));
    s->parts = calloc((size_t)s->n_slots, sizeof(*s->parts));
    s->part_slot = calloc((size_t)s->n_slots, sizeof(*s->part_slot));
    if (!s->slots || !s->parts || !s->part_slot)
        return -ENOMEM;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *l = &s->slots[i];
        l->seq = i;
        l->cache_ids = malloc(sizeof(int32_t) * (size_t)s->n_ctx);
        l->logits = calloc((size_t)s->n_vocab, sizeof(float));
        if (!l->cache_ids || !l->logits)
            return -ENOMEM;
        engine_truncate(s->e, i, 0);
    }
    return 0;
}

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
    s->n_ctx = engine_n_ctx(e);
    s->n_batch = engine_n_batch(e);
    s->msg_start = -1; /* the first family's marker the vocabulary has, in chat.h's order */
    for (int f = 0; f < CHAT_N_FAMILIES && s->msg_start < 0; f++)
        s->msg_start = tokenizer_find(tk, chat_family_message_start((enum chat_family)f));
    s->queue_max = queue_max > 0 ? queue_max : 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    s->masked = calloc((size_t)s->n_vocab, sizeof(float));
    if (!s->masked || slots_alloc(s) < 0 ||
        pthread_create(&s->thread, NULL, engine_thread, s) != 0) {
        err_set(err, err_len, "scheduler: cannot start the engine thread");
        scheduler_free(s);
        return NULL;
    }
    s->stats.n_slots = s->n_slots;
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
                                  .prompt_tokens = (int32_t)q->n, .slot = -1};
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
    slots_free(s);
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
    j->t_submit = clock_now_s();
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

int32_t scheduler_call_seq(struct scheduler *s) {
    return s->call_slot ? s->call_slot->seq : -1;
}

int scheduler_prefill(struct scheduler *s, const int32_t *ids, size_t n, int32_t *cached) {
    if (n > (size_t)s->n_ctx)
        return -ENOSPC;
    struct slot *l = slot_choose(s, ids, n, false);
    if (!l)
        return -EBUSY;
    s->call_slot = l;
    int32_t dummy;
    slot_prepare(s, l, ids, n, false, cached ? cached : &dummy);
    while ((size_t)l->cache_n < n) {
        size_t end = slot_prefill_end(l, n), from = (size_t)l->cache_n;
        int32_t k = end - from < (size_t)s->n_batch ? (int32_t)(end - from) : s->n_batch;
        int rc = engine_eval(s->e, l->seq, ids + from, k, NULL, false);
        if (rc < 0) {
            l->cache_n = engine_n_past(s->e, l->seq) < l->cache_n ? engine_n_past(s->e, l->seq)
                                                                 : l->cache_n;
            return rc;
        }
        slot_fed(s, l, ids + from, k);
    }
    l->last_used = ++s->tick;
    return 0;
}

void scheduler_set_cached(struct scheduler *s, const int32_t *ids, int32_t n) {
    struct slot *l = s->call_slot;
    if (!l)
        return;
    if (n > 0)
        memcpy(l->cache_ids, ids, (size_t)n * sizeof(int32_t));
    l->cache_n = n;
    l->last_used = ++s->tick;
}
