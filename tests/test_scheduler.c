/* test_scheduler.c - the engine thread and its queue: greedy output equals a direct engine run,
 * the prompt cache reuses a shared prefix without changing the output, stop strings end the text
 * before them (even split across tokens), max_tokens ends with "length", a cancel stops the job,
 * and a full queue refuses more; with several slots, jobs side by side give what each gives alone,
 * a job goes to the slot holding its prefix, and a cancel frees a slot within a step; gpt-oss's
 * window rings resume in place while they hold the window, else from a checkpoint. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "harness.h"
#include "model.h"
#include "ops.h"
#include "scheduler.h"
#include "tokenizer.h"

struct fixture {
    struct model *m;
    struct tokenizer *tk;
    struct engine *e;
};

/* Opens a model generated once by sniper-mkmodel with args into file name. */
static bool fixture_open_batch(struct fixture *f, char *path, size_t path_len, const char *name,
                               const char *args, int32_t n_seq, int32_t n_batch) {
    memset(f, 0, sizeof(*f));
    if (!path[0] && test_make_model(path, path_len, name, args) < 0)
        return false;
    char err[256] = "";
    f->m = model_load(path, err, sizeof(err));
    f->tk = f->m ? tokenizer_new(f->m->gguf, err, sizeof(err)) : NULL;
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 256;
    ep.n_threads = 2;
    ep.n_seq = n_seq;
    ep.n_batch = n_batch;
    f->e = f->tk ? engine_new(f->m, &ep, err, sizeof(err)) : NULL;
    CHECK_MSG(f->e != NULL, "%s", err);
    return f->e != NULL;
}

static bool fixture_open_model(struct fixture *f, char *path, size_t path_len, const char *name,
                               const char *args, int32_t n_seq) {
    return fixture_open_batch(f, path, path_len, name, args, n_seq, 512);
}

static bool fixture_open(struct fixture *f) {
    static char path[1024];
    return fixture_open_model(f, path, sizeof(path), "sched.gguf", "--preset tiny --seed 9", 1);
}

/* A hybrid model: Gated DeltaNet layers whose state only checkpoints can roll back. */
static bool fixture_open_hybrid(struct fixture *f) {
    static char path[1024];
    return fixture_open_model(f, path, sizeof(path), "sched35.gguf",
                              "--preset tiny-qwen35moe --seed 9", 1);
}

static void fixture_close(struct fixture *f) {
    engine_free(f->e);
    tokenizer_free(f->tk);
    model_free(f->m);
}

/* What a job produced, filled by the callbacks on the engine thread. */
struct result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char text[8192];
    size_t len;
    int n_text_calls;
    bool done;
    struct job_summary sum;
    char finish[16];
};

static void on_text(void *ctx, const char *text, size_t len, const struct job_token *tok) {
    (void)tok;
    struct result *r = ctx;
    if (r->len + len < sizeof(r->text)) {
        memcpy(r->text + r->len, text, len);
        r->len += len;
    }
    r->n_text_calls++;
}

static void on_done(void *ctx, const struct job_summary *s) {
    struct result *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->sum = *s;
    snprintf(r->finish, sizeof(r->finish), "%s", s->finish_reason);
    r->done = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void result_init(struct result *r) {
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void result_wait(struct result *r) {
    pthread_mutex_lock(&r->mu);
    while (!r->done)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

static const struct job_callbacks cbs = {NULL, on_text, on_done};

static struct job_params greedy(int32_t max_tokens) {
    struct job_params p = {.max_tokens = max_tokens};
    p.sp = sampler_params_default();
    p.sp.temp = 0.0f;
    return p;
}

/* Runs one job to its end. */
static void run(struct scheduler *s, const int32_t *ids, size_t n, const struct job_params *p,
                struct result *r) {
    result_init(r);
    struct job *j = job_new(ids, n, p, &cbs, r);
    CHECK(j != NULL);
    if (!j)
        return;
    CHECK_EQ_INT(scheduler_submit(s, j), 0);
    result_wait(r);
    job_release(j);
}

/* Runs ids to its end; checks it went through with `cached` prompt tokens reused and the text
 * want (a direct run's). */
static void run_expect(struct scheduler *s, const int32_t *ids, size_t n, const struct job_params *p,
                       int32_t cached, const char *want, size_t want_len, struct result *r) {
    run(s, ids, n, p, r);
    CHECK_EQ_INT(r->sum.rc, 0);
    CHECK_EQ_INT(r->sum.cached_tokens, cached);
    CHECK_MSG(r->len == want_len && memcmp(r->text, want, want_len) == 0,
              "scheduler text differs from the direct run (%zu vs %zu bytes)", r->len, want_len);
}

/* The greedy text of a direct engine run (no scheduler), n_gen tokens. */
static size_t direct(struct fixture *f, const int32_t *ids, size_t n, int n_gen, char *out,
                     size_t cap) {
    const int32_t V = f->m->hp.n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)V);
    size_t len = 0;
    engine_truncate(f->e, 0, 0);
    int rc = engine_eval(f->e, 0, ids, (int32_t)n, logits, false);
    struct tokenizer_stream st = {0};
    for (int g = 0; rc == 0 && g < n_gen; g++) {
        int32_t best = ops_argmax(logits, V);
        if (tokenizer_is_eog(f->tk, best))
            break;
        len += tokenizer_decode_stream(f->tk, &st, best, out + len, cap - len);
        rc = engine_eval(f->e, 0, &best, 1, logits, false);
    }
    len += tokenizer_stream_flush(&st, out + len, cap - len);
    free(logits);
    engine_truncate(f->e, 0, 0);
    return len;
}

static void test_greedy_and_prompt_cache(void) {
    struct fixture f;
    if (!fixture_open(&f))
        goto out;
    char err[256];
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)((i * 37 + 5) % f.m->hp.n_vocab);
    char want[8192];
    size_t want_len = direct(&f, ids, 40, 16, want, sizeof(want));
    struct scheduler *s = scheduler_new(f.e, f.tk, 4, err, sizeof(err));
    CHECK_MSG(s != NULL, "%s", err);
    if (!s)
        goto out;
    struct job_params p = greedy(16);
    struct result a, b, c;
    run_expect(s, ids, 40, &p, 0, want, want_len, &a);
    run(s, ids, 40, &p, &b); /* the same prompt again: all but the last token cached */
    CHECK_EQ_INT(b.sum.cached_tokens, 39);
    CHECK(b.len == a.len && memcmp(a.text, b.text, a.len) == 0);
    int32_t other[40];
    memcpy(other, ids, sizeof(ids));
    other[30] = (other[30] + 1) % f.m->hp.n_vocab; /* shares the first 30 */
    run(s, other, 40, &p, &c);
    CHECK_EQ_INT(c.sum.cached_tokens, 30);
    run(s, ids, 40, &p, &b); /* and back: the first 30 are still there */
    CHECK_EQ_INT(b.sum.cached_tokens, 30);
    CHECK(b.len == a.len && memcmp(a.text, b.text, a.len) == 0);
    struct scheduler_stats st;
    scheduler_get_stats(s, &st);
    CHECK_EQ_INT((int64_t)st.jobs_done, 4);
    scheduler_free(s);
out:
    fixture_close(&f);
}

/* A recurrent model reuses a prefix only up to a checkpoint: the prompt's last message header and
 * its next-to-last token; the output is the cold run's either way. */
static void test_hybrid_prompt_cache(void) {
    struct fixture f;
    if (!fixture_open_hybrid(&f))
        goto out;
    CHECK(engine_is_recurrent(f.e));
    char err[256];
    const int32_t msg = tokenizer_find(f.tk, "<|im_start|>");
    CHECK(msg >= 0);
    int32_t ids[40], other[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)((i * 37 + 5) % f.m->hp.n_vocab);
    ids[10] = ids[25] = msg; /* message headers */
    memcpy(other, ids, sizeof(ids));
    other[30] = (other[30] + 1) % f.m->hp.n_vocab; /* shares the first 30 */
    char want[8192], want_other[8192];
    size_t want_len = direct(&f, ids, 40, 16, want, sizeof(want));
    size_t want_other_len = direct(&f, other, 40, 16, want_other, sizeof(want_other));
    struct scheduler *s = scheduler_new(f.e, f.tk, 4, err, sizeof(err));
    CHECK_MSG(s != NULL, "%s", err);
    if (!s)
        goto out;
    struct job_params p = greedy(16);
    struct result a, b, c;
    run_expect(s, ids, 40, &p, 0, want, want_len, &a);
    run_expect(s, ids, 40, &p, 39, want, want_len, &b); /* the checkpoint before the last token */
    /* diverges at 30: resumes at the last header, 25, and says what a cold run says */
    run_expect(s, other, 40, &p, 25, want_other, want_other_len, &c);
    run_expect(s, ids, 40, &p, 25, want, want_len, &b); /* and back */
    scheduler_free(s);
out:
    fixture_close(&f);
}

/* gpt-oss with steps of 4 tokens: its window layers keep rings of 16 - 1 + 4 rows. A prefix the
 * rings have moved past resumes from a checkpoint (the last <|start|>, the next-to-last token), a
 * recent one in place; the output is the cold run's either way. */
static void test_gptoss_prompt_cache(void) {
    struct fixture f;
    static char path[1024];
    if (!fixture_open_batch(&f, path, sizeof(path), "schedoss.gguf",
                            "--preset tiny-gpt-oss --types q8_0 --seed 9", 1, 4))
        goto out;
    CHECK(engine_has_checkpoints(f.e) && !engine_is_recurrent(f.e));
    char err[256];
    const int32_t msg = tokenizer_find(f.tk, "<|start|>");
    CHECK(msg >= 0);
    int32_t ids[40], other[40], late[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)((i * 37 + 5) % f.m->hp.n_vocab);
    ids[10] = ids[25] = msg; /* message headers */
    memcpy(other, ids, sizeof(ids));
    other[30] = (other[30] + 1) % f.m->hp.n_vocab; /* shares the first 30 */
    memcpy(late, ids, sizeof(ids));
    late[38] = (late[38] + 1) % f.m->hp.n_vocab; /* shares the first 38 */
    char want[8192], want_other[8192], want_late[8192];
    size_t want_len = direct(&f, ids, 40, 16, want, sizeof(want));
    size_t want_other_len = direct(&f, other, 40, 16, want_other, sizeof(want_other));
    size_t want_late_len = direct(&f, late, 40, 16, want_late, sizeof(want_late));
    struct scheduler *s = scheduler_new(f.e, f.tk, 4, err, sizeof(err));
    CHECK_MSG(s != NULL, "%s", err);
    if (!s)
        goto out;
    struct job_params p = greedy(16), p2 = greedy(2);
    struct result a, b;
    run_expect(s, ids, 40, &p, 0, want, want_len, &a);
    /* 55 positions fed: the rings hold 36..54, so 39 needs the checkpoint there */
    run_expect(s, ids, 40, &p, 39, want, want_len, &b);
    run_expect(s, other, 40, &p, 25, want_other, want_other_len, &b); /* the last header */
    run(s, ids, 40, &p2, &b); /* two tokens: 41 positions fed, the rings hold 22..40 */
    CHECK_EQ_INT(b.sum.cached_tokens, 25);
    run_expect(s, late, 40, &p, 38, want_late, want_late_len, &b); /* 23..37: in place */
    scheduler_free(s);
out:
    fixture_close(&f);
}

static void test_stop_length_cancel(void) {
    struct fixture f;
    if (!fixture_open(&f))
        goto out;
    char err[256];
    int32_t ids[12];
    for (int i = 0; i < 12; i++)
        ids[i] = (int32_t)((i * 101 + 7) % f.m->hp.n_vocab);
    struct scheduler *s = scheduler_new(f.e, f.tk, 4, err, sizeof(err));
    CHECK_MSG(s != NULL, "%s", err);
    if (!s)
        goto out;
    struct job_params p = greedy(24);
    struct result full, r;
    run(s, ids, 12, &p, &full);
    CHECK_EQ_INT(full.sum.completion_tokens, 24);
    CHECK(strcmp(full.finish, "length") == 0);
    CHECK(full.len >= 8);
    if (full.len >= 8) {
        /* a stop string from the middle of the text (it may span tokens): the text ends before it */
        char stop[5];
        memcpy(stop, full.text + full.len / 2, 4);
        stop[4] = '\0';
        const char *first = strstr(full.text, stop);
        p.stop[0] = stop;
        p.n_stop = 1;
        run(s, ids, 12, &p, &r);
        CHECK(strcmp(r.finish, "stop") == 0);
        CHECK_MSG(first && r.len == (size_t)(first - full.text) &&
                      memcmp(r.text, full.text, r.len) == 0,
                  "stop \"%s\": got %zu bytes, want %td", stop, r.len, first ? first - full.text : -1);
        p.n_stop = 0;
    }
    p.max_tokens = 3;
    run(s, ids, 12, &p, &r);
    CHECK_EQ_INT(r.sum.completion_tokens, 3);
    CHECK(strcmp(r.finish, "length") == 0);
    /* cancelled before it runs: it ends at once, "cancelled" */
    result_init(&r);
    p.max_tokens = 200;
    struct job *j = job_new(ids, 12, &p, &cbs, &r);
    job_cancel(j);
    CHECK_EQ_INT(scheduler_submit(s, j), 0);
    result_wait(&r);
    job_release(j);
    CHECK(strcmp(r.finish, "cancelled") == 0);
    /* too long for the context */
    p.max_tokens = 250;
    run(s, ids, 12, &p, &r);
    CHECK_EQ_INT(r.sum.rc, -ENOSPC);
    scheduler_free(s);
out:
    fixture_close(&f);
}

static void test_queue_full(void) {
    struct fixture f;
    if (!fixture_open(&f))
        goto out;
    char err[256];
    struct scheduler *s = scheduler_new(f.e, f.tk, 2, err, sizeof(err));
    if (!s)
        goto out;
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct job_params p = greedy(200);
    struct result r[8];
    struct job *jobs[8];
    int accepted = 0, refused = 0;
    for (int i = 0; i < 8; i++) {
        result_init(&r[i]);
        jobs[i] = job_new(ids, 8, &p, &cbs, &r[i]);
        int rc = scheduler_submit(s, jobs[i]);
        accepted += rc == 0;
        refused += rc == -EBUSY;
        if (rc != 0) {
            job_release(jobs[i]);
            jobs[i] = NULL;
        }
    }
    CHECK(refused > 0 && accepted >= 2 && accepted <= 3);
    for (int i = 0; i < 8; i++)
        if (jobs[i])
            job_cancel(jobs[i]);
    scheduler_free(s); /* queued ones end "cancelled" */
    for (int i = 0; i < 8; i++)
        if (jobs[i]) {
            CHECK(r[i].done);
            CHECK_MSG(strcmp(r[i].finish, "cancelled") == 0, "job %d ended \"%s\"", i,
                      r[i].finish);
            job_release(jobs[i]);
        }
out:
    fixture_close(&f);
}

/* scheduler_call runs on the engine thread between jobs; scheduler_prefill reuses the cache. */
struct call_ctx {
    const int32_t *ids;
    int32_t cached[2];
    int32_t n_past;
};

static int call_prefill(void *ctx, struct scheduler *s) {
    struct call_ctx *c = ctx;
    int rc = scheduler_prefill(s, c->ids, 20, &c->cached[0]);
    if (rc == 0)
        rc = scheduler_prefill(s, c->ids, 30, &c->cached[1]);
    c->n_past = engine_n_past(scheduler_engine(s), scheduler_call_seq(s));
    return rc;
}

static void test_call(void) {
    struct fixture f;
    if (!fixture_open(&f))
        goto out;
    char err[256];
    struct scheduler *s = scheduler_new(f.e, f.tk, 4, err, sizeof(err));
    if (!s)
        goto out;
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)((i * 13 + 1) % f.m->hp.n_vocab);
    struct call_ctx c = {.ids = ids};
    CHECK_EQ_INT(scheduler_call(s, call_prefill, &c), 0);
    CHECK_EQ_INT(c.cached[0], 0);
    CHECK_EQ_INT(c.cached[1], 20);
    CHECK_EQ_INT(c.n_past, 30);
    struct job_params p = greedy(4);
    struct result r;
    run(s, ids, 40, &p, &r); /* a job after it reuses the 30 positions */
    CHECK_EQ_INT(r.sum.cached_tokens, 30);
    scheduler_free(s);
out:
    fixture_close(&f);
}

/* ---- parallel slots ------------------------------------------------------------------------- */

enum { PAR_SLOTS = 4, PAR_JOBS = 6 };

/* PAR_JOBS jobs of mixed prompt lengths, greedy and seeded sampling, submitted at once to a
 * scheduler of PAR_SLOTS slots: each one's text is what it gives alone in a one-slot scheduler
 * (a slot's steps carry the others' tokens, which must not change a bit of its own). */
static void check_parallel_same_as_alone(bool hybrid) {
    static char paths[2][1024];
    struct fixture one, par;
    const char *name = hybrid ? "sched35.gguf" : "sched.gguf";
    const char *args = hybrid ? "--preset tiny-qwen35moe --seed 9" : "--preset tiny --seed 9";
    if (!fixture_open_model(&one, paths[hybrid], sizeof(paths[0]), name, args, 1) ||
        !fixture_open_model(&par, paths[hybrid], sizeof(paths[0]), name, args, PAR_SLOTS))
        goto out;
    char err[256];
    struct scheduler *s1 = scheduler_new(one.e, one.tk, 8, err, sizeof(err));
    struct scheduler *sp = scheduler_new(par.e, par.tk, 8, err, sizeof(err));
    CHECK(s1 && sp);
    static int32_t ids[PAR_JOBS][90];
    const size_t len[PAR_JOBS] = {90, 7, 33, 2, 61, 12};
    struct job_params p[PAR_JOBS];
    struct result alone[PAR_JOBS], side[PAR_JOBS];
    struct job *jobs[PAR_JOBS] = {0};
    for (int i = 0; i < PAR_JOBS; i++) {
        for (size_t k = 0; k < len[i]; k++)
            ids[i][k] = (int32_t)((k * 37 + 5 + 101 * (size_t)i) % (size_t)one.m->hp.n_vocab);
        p[i] = greedy(10 + 3 * i);
        if (i % 2) { /* seeded sampling */
            p[i].sp.temp = 0.9f;
            p[i].sp.seed = 1000u + (uint32_t)i;
        }
    }
    for (int i = 0; s1 && sp && i < PAR_JOBS; i++)
        run(s1, ids[i], len[i], &p[i], &alone[i]);
    for (int i = 0; s1 && sp && i < PAR_JOBS; i++) {
        result_init(&side[i]);
        jobs[i] = job_new(ids[i], len[i], &p[i], &cbs, &side[i]);
        CHECK_EQ_INT(scheduler_submit(sp, jobs[i]), 0);
    }
    int slots_used = 0;
    for (int i = 0; s1 && sp && i < PAR_JOBS; i++) {
        result_wait(&side[i]);
        job_release(jobs[i]);
        slots_used |= 1 << side[i].sum.slot;
        CHECK_EQ_INT(side[i].sum.rc, 0);
        CHECK_EQ_INT(side[i].sum.completion_tokens, alone[i].sum.completion_tokens);
        CHECK_MSG(side[i].len == alone[i].len && memcmp(side[i].text, alone[i].text,
                                                        alone[i].len) == 0,
                  "job %d (%s) beside others differs from it alone", i,
                  i % 2 ? "sampled" : "greedy");
    }
    CHECK_MSG(slots_used == (1 << PAR_SLOTS) - 1, "slots used: mask %x", slots_used);
    struct scheduler_stats st;
    if (sp) {
        scheduler_get_stats(sp, &st);
        CHECK_EQ_INT(st.n_slots, PAR_SLOTS);
        CHECK_EQ_INT((int64_t)st.jobs_done, PAR_JOBS);
        /* some steps carried several sequences (a multi-token prompt chunk alone would make
         * step_tokens > steps even with the slots run one after another) */
        CHECK_MSG(st.steps > 0 && st.step_seqs > st.steps,
                  "%llu steps carried %llu sequences: the slots ran one after another",
                  (unsigned long long)st.steps, (unsigned long long)st.step_seqs);
    }
    scheduler_free(s1);
    scheduler_free(sp);
out:
    fixture_close(&one);
    fixture_close(&par);
}

static void test_parallel_same_as_alone(void) { check_parallel_same_as_alone(false); }
static void test_parallel_hybrid_same_as_alone(void) { check_parallel_same_as_alone(true); }

/* A job goes to the slot that holds its prompt's longest prefix; with none, to the least recently
 * used idle slot, so other conversations' caches survive. */
static void test_slot_choice(void) {
    static char path[1024];
    struct fixture f;
    if (!fixture_open_model(&f, path, sizeof(path), "sched.gguf", "--preset tiny --seed 9", 2))
        goto out;
    char err[256];
    struct scheduler *s = scheduler_new(f.e, f.tk, 4, err, sizeof(err));
    if (!s)
        goto out;
    int32_t a[30], b[30];
    for (int i = 0; i < 30; i++) {
        a[i] = (int32_t)((i * 11 + 3) % f.m->hp.n_vocab);
        b[i] = (int32_t)((i * 29 + 8) % f.m->hp.n_vocab);
    }
    struct job_params p = greedy(4);
    struct result r;
    run(s, a, 30, &p, &r);
    const int slot_a = r.sum.slot;
    run(s, b, 30, &p, &r); /* the other slot: a's is the most recently used */
    CHECK(r.sum.slot != slot_a);
    CHECK_EQ_INT(r.sum.cached_tokens, 0);
    run(s, a, 30, &p, &r); /* back to a's slot, all but the last token cached */
    CHECK_EQ_INT(r.sum.slot, slot_a);
    CHECK_EQ_INT(r.sum.cached_tokens, 29);
    run(s, b, 30, &p, &r);
    CHECK(r.sum.slot != slot_a);
    CHECK_EQ_INT(r.sum.cached_tokens, 29);
    scheduler_free(s);
out:
    fixture_close(&f);
}

/* With every slot busy a job waits; cancelling a running job frees its slot within a step and the
 * waiting job starts while the other keeps going. */
struct slow_result {
    struct result r;
    struct job *cancel_at;   /* cancelled when this result saw its third token */
    int n_tokens;            /* token callbacks seen (on_done overwrites r.sum with the
                              * scheduler's own count) */
};

static void on_token_cancel(void *ctx, const struct job_token *tok) {
    (void)tok;
    struct slow_result *sr = ctx;
    if (sr->n_tokens++ == 2 && sr->cancel_at)
        job_cancel(sr->cancel_at);
}

static void test_cancel_frees_slot(void) {
    static char path[1024];
    struct fixture f;
    if (!fixture_open_model(&f, path, sizeof(path), "sched.gguf", "--preset tiny --seed 9", 2))
        goto out;
    char err[256];
    struct scheduler *s = scheduler_new(f.e, f.tk, 4, err, sizeof(err));
    if (!s)
        goto out;
    int32_t ids[16];
    for (int i = 0; i < 16; i++)
        ids[i] = (int32_t)((i * 53 + 1) % f.m->hp.n_vocab);
    const struct job_callbacks cb = {on_token_cancel, on_text, on_done};
    struct job_params longp = greedy(200), shortp = greedy(5);
    struct slow_result a = {0}, b = {0}, c = {0};
    result_init(&a.r);
    result_init(&b.r);
    result_init(&c.r);
    struct job *ja = job_new(ids, 16, &longp, &cb, &a);
    struct job *jb = job_new(ids + 1, 15, &longp, &cb, &b);
    struct job *jc = job_new(ids + 2, 14, &shortp, &cb, &c);
    a.cancel_at = ja; /* a cancels itself after its third token */
    CHECK_EQ_INT(scheduler_submit(s, ja), 0);
    CHECK_EQ_INT(scheduler_submit(s, jb), 0);
    CHECK_EQ_INT(scheduler_submit(s, jc), 0); /* waits for a slot */
    result_wait(&c.r);
    CHECK(strcmp(c.r.finish, "length") == 0);
    CHECK(a.r.done && strcmp(a.r.finish, "cancelled") == 0);
    CHECK(!b.r.done); /* b, 200 tokens long, still running beside c */
    job_cancel(jb);
    result_wait(&b.r);
    CHECK(strcmp(b.r.finish, "cancelled") == 0);
    CHECK_EQ_INT(b.r.sum.completion_tokens, b.n_tokens);
    /* stopped within a step of the cancel: what the client saw, and what the summary says */
    CHECK_MSG(a.n_tokens <= 4, "%d tokens after a cancel at the third", a.n_tokens);
    CHECK_EQ_INT(a.r.sum.completion_tokens, a.n_tokens);
    CHECK_EQ_INT(c.r.sum.completion_tokens, c.n_tokens);
    job_release(ja);
    job_release(jb);
    job_release(jc);
    scheduler_free(s);
out:
    fixture_close(&f);
}

static const struct test_case cases[] = {
    {"hybrid_prompt_cache", test_hybrid_prompt_cache},
    {"gptoss_prompt_cache", test_gptoss_prompt_cache},
    {"call", test_call},
    {"greedy_and_prompt_cache", test_greedy_and_prompt_cache},
    {"stop_length_cancel", test_stop_length_cancel},
    {"queue_full", test_queue_full},
    {"parallel_same_as_alone", test_parallel_same_as_alone},
    {"parallel_hybrid_same_as_alone", test_parallel_hybrid_same_as_alone},
    {"slot_choice", test_slot_choice},
    {"cancel_frees_slot", test_cancel_frees_slot},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
