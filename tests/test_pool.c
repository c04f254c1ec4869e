/* test_pool.c - the daemon's model pool on models made by sniper-mkmodel: a directory of models
 * and a corrupt file is listed (the corrupt one with its error, never loaded); an unknown id is a
 * 404; a model loads on the first acquire (two waiters share one load) and serves jobs; under a
 * budget that holds two models the least recently used idle one is unloaded for a third, and
 * reloaded when asked again; a model held by a request is never unloaded (the load that needs
 * its room fails with 503 instead); a split model (three shards) is listed once, under its name
 * without the shard suffix, with all its shards' bytes, and loads. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pool.h"
#include "procstat.h"

static char dir[1024];

/* A directory (list/ in the test's) with three tiny models (a.gguf, b.gguf, c.gguf: same shapes,
 * other seeds) and a corrupt bad.gguf. */
static bool make_dir(void) {
    if (dir[0])
        return true;
    char path[1024];
    const char *names[3] = {"list/a.gguf", "list/b.gguf", "list/c.gguf"};
    snprintf(path, sizeof(path), "%s/list", test_tmpdir());
    CHECK(mkdir(path, 0755) == 0);
    const char *args[3] = {"--preset tiny --types q8_0 --seed 1", "--preset tiny --types q8_0 "
                           "--seed 2", "--preset tiny --types q8_0 --seed 3"};
    for (int i = 0; i < 3; i++)
        if (test_make_model(path, sizeof(path), names[i], args[i]) < 0)
            return false;
    snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(path, '/') - path), path);
    char bad[1100];
    snprintf(bad, sizeof(bad), "%s/bad.gguf", dir);
    FILE *f = fopen(bad, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("GGUF but not really a model", f);
        fclose(f);
    }
    return f != NULL;
}

static struct pool_model_opts defaults(void) {
    struct pool_model_opts o = {.queue = 4};
    o.ep = engine_params_default();
    o.ep.n_ctx = 256;
    o.ep.n_threads = 2;
    return o;
}

/* A pool over dir with the process budget given (0: none). */
static struct pool *pool_over_dir(uint64_t budget, double timeout_s) {
    char err[256];
    struct pool_config cfg = {.ram_budget = budget, .load_timeout_s = timeout_s};
    struct pool *p = pool_new(&cfg, err, sizeof(err));
    CHECK_MSG(p != NULL, "%s", err);
    struct pool_model_opts o = defaults();
    if (p)
        CHECK_EQ_INT(pool_add_dir(p, dir, &o, err, sizeof(err)), 4);
    return p;
}

static struct pool_entry_info info(struct pool *p, const char *id) {
    struct pool_entry_info in = {0};
    for (int i = 0; pool_entry(p, i, &in); i++)
        if (strcmp(in.id, id) == 0)
            return in;
    memset(&in, 0, sizeof(in));
    return in;
}

/* What a greedy job of 8 tokens gives on a held model (its text). */
struct result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    char text[512];
    size_t len;
};

static void on_text(void *ctx, const char *t, size_t n, const struct job_token *tok) {
    (void)tok;
    struct result *r = ctx;
    if (r->len + n < sizeof(r->text)) {
        memcpy(r->text + r->len, t, n);
        r->len += n;
    }
}

static void on_done(void *ctx, const struct job_summary *s) {
    (void)s;
    struct result *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static size_t generate(struct pool_model *pm, char *out, size_t cap) {
    struct result r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const int32_t ids[4] = {1, 2, 3, 4};
    struct job_params jp = {.max_tokens = 8};
    jp.sp = sampler_params_default();
    jp.sp.temp = 0;
    const struct job_callbacks cb = {NULL, on_text, on_done};
    struct job *j = job_new(ids, 4, &jp, &cb, &r);
    CHECK(j && scheduler_submit(pm->sched, j) == 0);
    pthread_mutex_lock(&r.mu);
    while (j && !r.done)
        pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);
    job_release(j);
    size_t n = r.len < cap ? r.len : cap;
    memcpy(out, r.text, n);
    return n;
}

/* A directory laid out as `sniper pull`'s cache: a whole file at the top (w.gguf), a split model
 * two levels down (test/tiny/s-0000K-of-00003.gguf), and a file three levels down (not a model of
 * the cache: not listed). Two models, "w" and "test/tiny/s", the split one once, sized by all
 * three shards, and it loads. */
static void test_split_listed_once(void) {
    char path[1200], sub[1100], err[256];
    const char *dirs[] = {"split", "split/test", "split/test/tiny", "split/a", "split/a/b",
                          "split/a/b/c"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(sub, sizeof(sub), "%s/%s", test_tmpdir(), dirs[i]);
        CHECK(mkdir(sub, 0755) == 0);
    }
    snprintf(sub, sizeof(sub), "%s/split", test_tmpdir());
    if (test_make_model(path, sizeof(path), "split/test/tiny/s.gguf",
                        "--preset tiny --types q4_k_m --seed 4 --split-max-size 2M") < 0 ||
        test_make_model(path, sizeof(path), "split/w.gguf", "--preset tiny --types q8_0") < 0 ||
        test_make_model(path, sizeof(path), "split/a/b/c/deep.gguf", "--preset tiny") < 0)
        return;
    uint64_t shard_bytes = 0;
    for (int k = 1; k <= 3; k++) {
        struct stat st;
        snprintf(path, sizeof(path), "%s/test/tiny/s-%05d-of-00003.gguf", sub, k);
        CHECK_MSG(stat(path, &st) == 0, "no shard \"%s\"", path);
        shard_bytes += (uint64_t)st.st_size;
    }
    struct pool_config cfg = {.load_timeout_s = 30};
    struct pool *p = pool_new(&cfg, err, sizeof(err));
    CHECK_MSG(p != NULL, "%s", err);
    if (!p)
        return;
    struct pool_model_opts o = defaults();
    CHECK_EQ_INT(pool_add_dir(p, sub, &o, err, sizeof(err)), 2);
    CHECK_EQ_INT(pool_size(p), 2);
    struct pool_entry_info s = info(p, "test/tiny/s");
    CHECK_MSG(s.state == POOL_UNLOADED && strcmp(s.arch, "qwen3moe") == 0, "s: %s %s",
              pool_state_name(s.state), s.error);
    CHECK_EQ_INT(s.file_bytes, shard_bytes);
    CHECK(info(p, "w").state == POOL_UNLOADED);
    struct oai_error e;
    struct pool_model *pm = pool_acquire(p, "test/tiny/s", &e);
    CHECK(pm != NULL);
    char text[512];
    CHECK(pm && generate(pm, text, sizeof(text)) > 0);
    if (pm)
        pool_release(p, pm);
    pool_free(p);
}

static void test_list_and_errors(void) {
    if (!make_dir())
        return;
    struct pool *p = pool_over_dir(0, 30);
    if (!p)
        return;
    CHECK_EQ_INT(pool_size(p), 4);
    struct pool_entry_info a = info(p, "a"), bad = info(p, "bad");
    CHECK(a.state == POOL_UNLOADED && strcmp(a.arch, "qwen3moe") == 0 &&
          strcmp(a.quant, "q8_0") == 0 && a.file_bytes > 0 && a.fingerprint != 0);
    CHECK_MSG(bad.state == POOL_FAILED && bad.error[0], "bad: %s %s",
              pool_state_name(bad.state), bad.error);
    struct oai_error e;
    CHECK(pool_acquire(p, "nope", &e) == NULL && e.status == 404);
    CHECK(pool_acquire(p, "bad", &e) == NULL && e.status == 500);
    CHECK(info(p, "bad").loads == 0);
    CHECK(pool_find_fingerprint(p, a.fingerprint) == 0);
    pool_free(p);
}

struct waiter {
    struct pool *p;
    struct pool_model *pm;
};

static void *acquire_b(void *arg) {
    struct waiter *w = arg;
    struct oai_error e;
    w->pm = pool_acquire(w->p, "b", &e);
    return NULL;
}

static void test_load_on_demand(void) {
    if (!make_dir())
        return;
    struct pool *p = pool_over_dir(0, 30);
    if (!p)
        return;
    struct waiter w[2] = {{.p = p}, {.p = p}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, acquire_b, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(w[0].pm && w[0].pm == w[1].pm);
    struct pool_entry_info b = info(p, "b");
    CHECK_EQ_INT((int64_t)b.loads, 1); /* two waiters, one load */
    CHECK_EQ_INT(b.in_use, 2);
    CHECK(b.state == POOL_READY && b.bytes > 0);
    char text[512];
    CHECK(w[0].pm && generate(w[0].pm, text, sizeof(text)) > 0);
    pool_release(p, w[0].pm);
    pool_release(p, w[1].pm);
    CHECK_EQ_INT(info(p, "b").in_use, 0);
    struct oai_error e;
    struct pool_model *def = pool_acquire(p, NULL, &e); /* the default: the first, a */
    CHECK(def && strcmp(def->id, "a") == 0);
    pool_release(p, def);
    pool_free(p);
}

/* Under a budget for two models, a third unloads the least recently used idle one; a held model
 * is never unloaded. Outputs after a reload are the first load's. */
static void test_budget_unloads_lru(void) {
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer keeps freed memory in quarantine and adds shadow memory: the resident set
     * the budget is measured on says nothing then */
    test_skip("budget_unloads_lru: the resident set is meaningless under AddressSanitizer");
    return;
#endif
    if (!make_dir())
        return;
    struct pool *probe = pool_over_dir(0, 30);
    struct oai_error e;
    struct pool_model *pm = probe ? pool_acquire(probe, "a", &e) : NULL;
    char first[512] = "";
    size_t first_len = pm ? generate(pm, first, sizeof(first)) : 0;
    pool_release(probe, pm);
    const uint64_t one = info(probe, "a").bytes;
    pool_free(probe);
    CHECK(one > 0);
    /* what the allocator kept of the probe's buffers goes back first, as an unload's does: else
     * the first unload's trim returns it too and the budget holds a third model */
    malloc_trim(0);
    const uint64_t budget = procstat_rss_bytes() + one * 5 / 2;
    struct pool *p = pool_over_dir(budget, 2);
    if (!p || !one)
        goto out;
    const char *order[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        pm = pool_acquire(p, order[i], &e);
        CHECK_MSG(pm != NULL, "%s: %s", order[i], e.message);
        pool_release(p, pm);
    }
    uint64_t loads, unloads, b;
    pool_counts(p, &loads, &unloads, &b);
    CHECK_EQ_INT((int64_t)loads, 3);
    CHECK_EQ_INT((int64_t)unloads, 1);
    CHECK(info(p, "a").state == POOL_UNLOADED); /* the least recently used */
    CHECK(info(p, "b").state == POOL_READY && info(p, "c").state == POOL_READY);
    pm = pool_acquire(p, "a", &e); /* back: b goes now */
    char again[512] = "";
    size_t again_len = pm ? generate(pm, again, sizeof(again)) : 0;
    CHECK(again_len == first_len && memcmp(first, again, first_len) == 0);
    CHECK(info(p, "b").state == POOL_UNLOADED);
    /* a and c held: b cannot find room, and neither held model goes */
    struct pool_model *c = pool_acquire(p, "c", &e);
    CHECK(pm && c);
    struct pool_model *bm = pool_acquire(p, "b", &e);
    CHECK_MSG(bm == NULL && e.status == 503, "b with a and c held: %p %d %s", (void *)bm,
              e.status, e.message);
    CHECK(info(p, "a").state == POOL_READY && info(p, "c").state == POOL_READY);
    pool_release(p, c);
    pool_release(p, bm);
    bm = pool_acquire(p, "b", &e); /* c is idle now: it goes, b loads */
    CHECK_MSG(bm != NULL, "%s", e.message);
    CHECK(info(p, "c").state == POOL_UNLOADED && info(p, "a").state == POOL_READY);
    pool_release(p, bm);
    pool_release(p, pm);
out:
    pool_free(p);
}

static const struct test_case cases[] = {
    {"split_listed_once", test_split_listed_once},
    {"list_and_errors", test_list_and_errors},
    {"load_on_demand", test_load_on_demand},
    {"budget_unloads_lru", test_budget_unloads_lru},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
