/* test_step_fault.c - a step the engine cannot run reaches the client as an error, never as a
 * wrong token: with the fault injector failing a product (a full job queue, a quantization without
 * a path) the scheduler ends the job with finish "error" and the engine's rc, the text it sent
 * before is a prefix of the good run's, and the slot then serves the same job as before. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fault.h"
#include "harness.h"
#include "model.h"
#include "scheduler.h"
#include "tokenizer.h"

/* What a job produced, filled by the callbacks on the engine thread. */
struct result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char text[8192];
    size_t len;
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

static const struct job_callbacks cbs = {NULL, on_text, on_done};

/* Runs a greedy job of max_tokens to its end into r. */
static void run(struct scheduler *s, const int32_t *ids, size_t n, int32_t max_tokens,
                struct result *r) {
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    struct job_params p = {.max_tokens = max_tokens};
    p.sp = sampler_params_default();
    p.sp.temp = 0.0f;
    struct job *j = job_new(ids, n, &p, &cbs, r);
    CHECK(j != NULL);
    if (!j)
        return;
    CHECK_EQ_INT(scheduler_submit(s, j), 0);
    pthread_mutex_lock(&r->mu);
    while (!r->done)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
    job_release(j);
}

/* Fails the nth product (site) from the job's start: the job must end in "error" with rc, its
 * text a proper prefix of want's when the fault hit after the prompt (decode), empty when it hit
 * the prompt's step; then the same job again gives want. */
static void check_fault(struct scheduler *s, const int32_t *ids, size_t n, enum fault_site site,
                        long nth, int rc, const struct result *want, bool in_decode) {
    struct result r;
    fault_arm(site, nth);
    run(s, ids, n, 48, &r);
    fault_arm(site, 0);
    CHECK_MSG(r.sum.rc == rc && strcmp(r.finish, "error") == 0, "product %ld failed: the job "
              "ended with rc %d, finish \"%s\" (want rc %d, \"error\")", nth, r.sum.rc, r.finish,
              rc);
    CHECK_MSG(r.len <= want->len && memcmp(r.text, want->text, r.len) == 0,
              "product %ld failed: the text sent is not the good run's prefix", nth);
    if (in_decode)
        CHECK_MSG(r.len > 0 && r.len < want->len, "product %ld: %zu of %zu bytes sent, the fault "
                  "did not land in a decode step", nth, r.len, want->len);
    else
        CHECK_MSG(r.len == 0, "product %ld of the prompt's step failed, yet %zu bytes were sent",
                  nth, r.len);
    run(s, ids, n, 48, &r);
    CHECK_MSG(r.sum.rc == 0 && r.len == want->len && memcmp(r.text, want->text, r.len) == 0,
              "after the failed job the same job gives other text (rc %d)", r.sum.rc);
}

static void check_model(const char *name, const char *args) {
    static char path[1024];
    if (test_make_model(path, sizeof(path), name, args) < 0) {
        CHECK_MSG(false, "cannot make %s", name);
        return;
    }
    char err[256] = "";
    struct model *m = model_load(path, err, sizeof(err));
    struct tokenizer *tk = m ? tokenizer_new(m->gguf, err, sizeof(err)) : NULL;
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 256;
    ep.n_threads = 2;
    struct engine *e = tk ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    struct scheduler *s = e ? scheduler_new(e, tk, 4, err, sizeof(err)) : NULL;
    CHECK_MSG(s != NULL, "%s: %s", name, err);
    if (!s)
        goto out;
    int32_t ids[8];
    for (int i = 0; i < 8; i++)
        ids[i] = 100 + 37 * i;
    struct result want;
    run(s, ids, 8, 48, &want);
    CHECK_MSG(want.sum.rc == 0 && want.len > 8, "%s: the good run: rc %d, %zu bytes", name,
              want.sum.rc, want.len);
    check_fault(s, ids, 8, FAULT_QUEUE, 3, -ENOSPC, &want, false);
    check_fault(s, ids, 8, FAULT_QUANTIZE, 5, -ENOTSUP, &want, false);
    /* a tiny model's step has 20 to 60 products: these land some steps into the decode */
    check_fault(s, ids, 8, FAULT_QUEUE, 300, -ENOSPC, &want, true);
    check_fault(s, ids, 8, FAULT_QUANTIZE, 150, -ENOTSUP, &want, true);
out:
    scheduler_free(s);
    engine_free(e);
    tokenizer_free(tk);
    model_free(m);
}

static void test_scheduler_moe(void) {
    check_model("fault-moe.gguf", "--preset tiny --types q8_0 --seed 21");
}

static void test_scheduler_qwen35moe(void) {
    check_model("fault-35moe.gguf", "--preset tiny-qwen35moe --types q4_k_m --seed 22");
}

static const struct test_case cases[] = {
    {"scheduler_moe", test_scheduler_moe},
    {"scheduler_qwen35moe", test_scheduler_qwen35moe},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
