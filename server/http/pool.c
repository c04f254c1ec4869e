/* pool.c - the models a daemon serves (see pool.h).
 * Invariants: entries are added before the first acquire and never move; an entry's state, hold
 * count and figures change under p->mu; its pool_model is written only by the loader thread, while
 * the state is POOL_LOADING (or under mu when it is unloaded, at no holds), and read by holders
 * only in POOL_READY; a model with holders is never unloaded. Budget decisions read the process's
 * resident set, so whatever else the process holds counts too. */
#include "pool.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "clock.h"
#include "ctxfile.h"
#include "err.h"
#include "gguf.h"
#include "os.h"
#include "procstat.h"

struct entry {
    struct pool_model_opts o;
    struct pool_model pm;         /* valid in POOL_READY */
    enum pool_state state;
    bool unusable;                /* the file's header could not be read: never loaded */
    bool unnamed;                 /* added without an id: named after the model (general.name) */
    char error[512];
    char arch[32], quant[32];
    bool generated;               /* general.name says sniper-mkmodel wrote it */
    uint64_t file_bytes, fingerprint;
    uint64_t estimate;            /* its bytes in RAM with its engine (budget_estimate) */
    uint64_t measured;            /* what its last load added to the resident set (0: unknown) */
    int32_t n_ctx;                /* the context its engine gets */
    struct model_progress prog;   /* of the load in progress */
    int in_use;
    uint64_t loads, unloads;
    double last_used;             /* clock_now_s of its last release or load; 0: never */
};

struct pool {
    struct pool_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t changed;       /* a load ended, a hold was released */
    pthread_cond_t work;          /* the loader has an entry to load, or must stop */
    struct entry *entries;
    int n, cap;
    pthread_t loader;
    bool loader_started, stop;
    bool gpu_held;                /* a loaded model's steps run on cfg.gpu */
    uint64_t loads, unloads;
};

const char *pool_state_name(enum pool_state s) {
    static const char *const names[] = {"unloaded", "loading", "loaded", "failed"};
    return (unsigned)s < 4 ? names[s] : "unknown";
}

/* ---- reading a file's header ------------------------------------------------------------------ */

/* The type most of the tensors' bytes are, as a file name would say it ("q4_K"). */
static void dominant_type(const struct gguf *g, char *out, size_t len) {
    uint64_t bytes[QTYPE_COUNT] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if ((unsigned)g->tensors[i].type < QTYPE_COUNT)
            bytes[g->tensors[i].type] += g->tensors[i].n_bytes;
    int best = 0;
    for (int t = 1; t < QTYPE_COUNT; t++)
        if (bytes[t] > bytes[best])
            best = t;
    snprintf(out, len, "%s", qtype_name((enum qtype)best));
}

/* Fills the entry's header facts; an unreadable file marks it unusable with the reason. */
static void entry_read_header(struct entry *en) {
    char err[256] = "";
    struct gguf *g = gguf_open(en->o.path, err, sizeof(err));
    struct model_hparams hp;
    if (g && model_read_hparams(g, &hp, err, sizeof(err)) < 0) {
        gguf_free(g);
        g = NULL;
    }
    if (!g) {
        en->unusable = true;
        en->state = POOL_FAILED;
        snprintf(en->error, sizeof(en->error), "%s", err[0] ? err : "cannot read the file");
        return;
    }
    const char *name = gguf_get_str(g, "general.name");
    if (en->unnamed && name && name[0]) /* -m without --alias: the model's name */
        snprintf(en->o.id, sizeof(en->o.id), "%s", name);
    en->generated = name && strncmp(name, "sniper-mkmodel-", 15) == 0;
    const char *arch = gguf_get_str(g, "general.architecture");
    snprintf(en->arch, sizeof(en->arch), "%s", arch ? arch : "");
    dominant_type(g, en->quant, sizeof(en->quant));
    en->file_bytes = g->file_bytes;
    en->fingerprint = ctxfile_fingerprint(g);
    en->estimate = budget_estimate(g, &en->o.ep);
    en->n_ctx = en->o.ep.n_ctx > 0 ? en->o.ep.n_ctx
                                   : hp.n_ctx_train < 4096 ? hp.n_ctx_train : 4096;
    gguf_free(g);
}

/* ---- loading and unloading -------------------------------------------------------------------- */

static void pm_free(struct pool_model *pm) {
    scheduler_free(pm->sched);
    engine_free(pm->e);
    expert_cache_free(pm->cache);
    tokenizer_free(pm->tk);
    model_free(pm->m);
    memset(pm, 0, sizeof(*pm));
}

/* Unloads en (no holds, called with mu held): its memory goes back to the system. */
static void entry_unload(struct pool *p, struct entry *en) {
    if (p->cfg.log)
        fprintf(stderr, "sniperd: unloading \"%s\" (idle; the budget needs its memory)\n",
                en->o.id);
    if (en->pm.on_gpu)
        p->gpu_held = false;
    pm_free(&en->pm);
    os_mem_trim(); /* what the allocator kept of the freed buffers goes back too */
    en->state = POOL_UNLOADED;
    en->unloads++;
    p->unloads++;
}

/* The least recently used loaded entry nobody holds, other than skip; NULL when none. */
static struct entry *idle_victim(struct pool *p, const struct entry *skip) {
    struct entry *best = NULL;
    for (int i = 0; i < p->n; i++) {
        struct entry *en = &p->entries[i];
        if (en != skip && en->state == POOL_READY && en->in_use == 0 &&
            (!best || en->last_used < best->last_used))
            best = en;
    }
    return best;
}

/* True when some loaded entry other than skip is held: waiting may free room. */
static bool others_held(const struct pool *p, const struct entry *skip) {
    for (int i = 0; i < p->n; i++)
        if (&p->entries[i] != skip && p->entries[i].state == POOL_READY &&
            p->entries[i].in_use > 0)
            return true;
    return false;
}

/* Bytes en takes in RAM: what its last load measured, else the estimate from its header. */
static uint64_t entry_size(const struct entry *en) {
    return en->measured > en->estimate ? en->measured : en->estimate;
}

/* Bytes en must find free under the budget before it loads: its own budget, or its size in RAM
 * (at most the whole budget: what does not fit is streamed). */
static uint64_t entry_need(const struct pool *p, const struct entry *en) {
    if (en->o.ram_budget)
        return en->o.ram_budget;
    return entry_size(en) < p->cfg.ram_budget ? entry_size(en) : p->cfg.ram_budget;
}

/* Makes room for en under the process budget (mu held): unloads idle models, least recently used
 * first, and waits for held ones to be released, up to the load timeout. Returns 0, or -EBUSY
 * when the budget is still held by models in use. */
static int make_room(struct pool *p, struct entry *en) {
    const uint64_t budget = p->cfg.ram_budget, need = entry_need(p, en);
    if (!budget || en->o.stream)
        return 0;
    const double deadline = clock_now_s() + p->cfg.load_timeout_s;
    for (;;) {
        if (procstat_rss_bytes() + need <= budget)
            return 0;
        struct entry *victim = idle_victim(p, en);
        if (victim) {
            entry_unload(p, victim);
            continue;
        }
        /* nothing idle to unload: a streamed load takes what is left, or held models end */
        if (!en->o.ram_budget && procstat_rss_bytes() < budget && !others_held(p, en))
            return 0;
        struct timespec until = clock_deadline_ms(100);
        if (clock_now_s() > deadline)
            return others_held(p, en) ? -EBUSY : 0;
        pthread_cond_timedwait(&p->changed, &p->mu, &until);
    }
}

/* Loads en's model (mu NOT held: en is POOL_LOADING, nobody else touches its pm); *size gets
 * what the load added to the resident set. Returns 0 or a negative error with a message in err. */
static int entry_load(struct pool *p, struct entry *en, uint64_t *size, char *err,
                      size_t err_len) {
    struct pool_model *pm = &en->pm;
    const uint64_t rss = procstat_rss_bytes(), budget = p->cfg.ram_budget;
    const bool stream = en->o.stream || en->o.ram_budget || (budget && rss + entry_size(en) > budget);
    uint64_t cap = budget; /* the process's cap, or this model's share of it */
    if (en->o.ram_budget && (!budget || rss + en->o.ram_budget < budget))
        cap = rss + en->o.ram_budget;
    memset(pm, 0, sizeof(*pm));
    atomic_store(&en->prog.done, 0);
    atomic_store(&en->prog.total, 0);
    /* streamed, the engine's memory (every slot's KV, recurrent state and checkpoints) is checked
     * against the cap before it is touched: a budget too small for the slots is refused, not
     * overrun (in RAM, the estimate make_room and stream went by counted them) */
    if (!(pm->m = model_open_progress(en->o.path, stream, &en->prog, err, err_len)) ||
        !(pm->tk = tokenizer_new(pm->m->gguf, err, err_len)) ||
        (stream && budget_check(pm->m, &en->o.ep, cap, err, err_len) < 0) ||
        !(pm->e = engine_new(pm->m, &en->o.ep, err, err_len)))
        goto fail;
    if (p->cfg.log)
        budget_print_memory(pm->e, en->o.ep.n_checkpoints, stderr);
    if (stream && !(pm->cache = budget_cache_new(pm->m, pm->e, cap, &en->o.cache,
                                                 p->cfg.log ? stderr : NULL, err, err_len)))
        goto fail;
    if (p->cfg.gpu && !p->gpu_held && /* streamed: the experts on three levels */
        budget_place_gpu(pm->e, p->cfg.gpu, p->cfg.log ? stderr : NULL))
        p->gpu_held = pm->on_gpu = true;
    if (!(pm->sched = scheduler_new(pm->e, pm->tk, en->o.queue > 0 ? en->o.queue : 16, err,
                                    err_len)))
        goto fail;
    pm->id = en->o.id;
    pm->n_ctx = engine_n_ctx(pm->e);
    pm->ram_budget = stream ? cap : 0;
    pm->family = chat_family_detect(gguf_get_str(pm->m->gguf, "tokenizer.chat_template"));
    if (chat_family_from_name(en->o.chat_template) >= 0)
        pm->family = (enum chat_family)chat_family_from_name(en->o.chat_template);
    const uint64_t now = procstat_rss_bytes();
    *size = now > rss ? now - rss : 0;
    if (p->cfg.log)
        fprintf(stderr, "sniperd: loaded \"%s\" (%s, %s, context %d, %d slot%s%s)\n", en->o.id,
                en->arch, en->quant, pm->n_ctx, engine_n_seq(pm->e),
                engine_n_seq(pm->e) > 1 ? "s" : "", stream ? ", experts streamed" : ", in RAM");
    return 0;
fail:
    if (pm->on_gpu)
        p->gpu_held = false;
    pm_free(pm);
    return -EIO;
}

/* The loader thread: loads the entries requests asked for, one at a time. */
static void *loader_main(void *arg) {
    struct pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct entry *en = NULL;
        for (int i = 0; i < p->n && !en; i++)
            if (p->entries[i].state == POOL_LOADING)
                en = &p->entries[i];
        if (p->stop)
            break;
        if (!en) {
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        char err[512] = "";
        uint64_t size = 0;
        int rc = make_room(p, en);
        if (rc < 0)
            snprintf(err, sizeof(err), "the RAM budget is held by models serving requests; "
                     "\"%s\" needs %llu MiB", en->o.id,
                     (unsigned long long)(entry_need(p, en) >> 20));
        pthread_mutex_unlock(&p->mu);
        if (rc == 0)
            rc = entry_load(p, en, &size, err, sizeof(err));
        pthread_mutex_lock(&p->mu);
        if (rc == 0) {
            en->state = POOL_READY;
            en->loads++;
            p->loads++;
            en->last_used = clock_now_s();
            en->error[0] = '\0';
            en->measured = size;
        } else {
            en->state = POOL_FAILED;
            snprintf(en->error, sizeof(en->error), "%s", err);
            if (p->cfg.log)
                fprintf(stderr, "sniperd: loading \"%s\" failed: %s\n", en->o.id, err);
        }
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- the pool --------------------------------------------------------------------------------- */

struct pool *pool_new(const struct pool_config *cfg, char *err, size_t err_len) {
    struct pool *p = calloc(1, sizeof(*p));
    if (!p) {
        err_set(err, err_len, "pool: out of memory");
        return NULL;
    }
    p->cfg = *cfg;
    if (p->cfg.load_timeout_s <= 0)
        p->cfg.load_timeout_s = 600;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->changed, NULL);
    pthread_cond_init(&p->work, NULL);
    if (pthread_create(&p->loader, NULL, loader_main, p) != 0) {
        err_set(err, err_len, "pool: cannot start the loader thread");
        pool_free(p);
        return NULL;
    }
    p->loader_started = true;
    return p;
}

void pool_free(struct pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    if (p->loader_started)
        pthread_join(p->loader, NULL);
    for (int i = 0; i < p->n; i++)
        if (p->entries[i].state == POOL_READY)
            pm_free(&p->entries[i].pm);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->changed);
    pthread_cond_destroy(&p->work);
    free(p->entries);
    free(p);
}

/* The id of a model named by its file: the base name without ".gguf", or for a split model's shard
 * without "-00001-of-00003.gguf" too. */
static void file_id(const char *base, char *id, size_t id_len) {
    size_t prefix_len;
    uint32_t no, count;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot > base ? (size_t)(dot - base) : strlen(base);
    if (gguf_split_name_parse(base, &prefix_len, &no, &count))
        n = prefix_len;
    snprintf(id, id_len, "%.*s", (int)n, base);
}

int pool_add(struct pool *p, const struct pool_model_opts *o) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->entries[i].o.id, o->id) == 0)
            return -EEXIST;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        struct entry *e = realloc(p->entries, sizeof(*e) * (size_t)cap);
        if (!e)
            return -ENOMEM;
        p->entries = e;
        p->cap = cap;
    }
    struct entry *en = &p->entries[p->n];
    memset(en, 0, sizeof(*en));
    en->o = *o;
    if (!en->o.id[0]) { /* named by the file until its header says better */
        const char *base = strrchr(o->path, '/');
        base = base ? base + 1 : o->path;
        file_id(base, en->o.id, sizeof(en->o.id));
        en->unnamed = true;
    }
    entry_read_header(en);
    p->n++;
    return 0;
}

/* True for "x.gguf" names (not hidden) that name a model: of a split model only its first shard,
 * which opens the others. */
static bool gguf_name(const char *name) {
    size_t n = strlen(name), prefix_len;
    uint32_t no, count;
    if (gguf_split_name_parse(name, &prefix_len, &no, &count) && no > 0)
        return false;
    return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".gguf") == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A growing list of file names relative to a models directory. */
struct name_list {
    char **v;
    size_t n, cap;
};

static int name_list_add(struct name_list *l, const char *rel, const char *name) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **g = realloc(l->v, cap * sizeof(*g));
        if (!g)
            return -ENOMEM;
        l->v = g;
        l->cap = cap;
    }
    size_t n = strlen(rel) + strlen(name) + 1;
    if (!(l->v[l->n] = malloc(n)))
        return -ENOMEM;
    snprintf(l->v[l->n++], n, "%s%s", rel, name);
    return 0;
}

/* Collects the model files of dir/rel (rel "" or ending in '/'), and with depth > 0 those of its
 * subdirectories (not hidden): the pull cache's USER/REPO/FILE is depth 2. Returns 0, -ENOMEM, or
 * -errno when the top directory cannot be read (a subdirectory that cannot is skipped). */
static int dir_collect(const char *dir, const char *rel, int depth, struct name_list *l) {
    char path[POOL_PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    DIR *d = opendir(path);
    if (!d)
        return rel[0] ? 0 : -errno;
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d)) != NULL;) {
        if (gguf_name(de->d_name)) {
            rc = name_list_add(l, rel, de->d_name);
        } else if (depth > 0 && de->d_name[0] != '.' &&
                   (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)) {
            char sub[POOL_PATH_MAX];
            if (snprintf(sub, sizeof(sub), "%s%s/", rel, de->d_name) < (int)sizeof(sub))
                rc = dir_collect(dir, sub, depth - 1, l);
        }
    }
    closedir(d);
    return rc;
}

int pool_add_dir(struct pool *p, const char *dir, const struct pool_model_opts *defaults,
                 char *err, size_t err_len) {
    struct name_list l = {0};
    int rc = dir_collect(dir, "", 2, &l);
    if (rc < 0 && rc != -ENOMEM) {
        err_set(err, err_len, "cannot read the models directory \"%s\": %s", dir,
                strerror(-rc));
        return rc;
    }
    if (l.n)
        qsort(l.v, l.n, sizeof(*l.v), cmp_str);
    int added = 0;
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        struct pool_model_opts o = *defaults;
        const char *base = strrchr(l.v[i], '/');
        base = base ? base + 1 : l.v[i];
        char id[POOL_ID_MAX];
        file_id(base, id, sizeof(id));
        if (snprintf(o.id, sizeof(o.id), "%.*s%s", (int)(base - l.v[i]), l.v[i], id) >=
                (int)sizeof(o.id) ||
            snprintf(o.path, sizeof(o.path), "%s/%s", dir, l.v[i]) >= (int)sizeof(o.path))
            continue;
        int r = pool_add(p, &o);
        if (r == -ENOMEM)
            rc = r;
        added += r == 0;
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i]);
    free(l.v);
    if (rc < 0)
        err_set(err, err_len, "out of memory listing \"%s\"", dir);
    return rc < 0 ? rc : added;
}

int pool_size(const struct pool *p) {
    return p->n;
}

/* The default entry: the first one added whose file could be read (else the first). */
static struct entry *entry_default(struct pool *p) {
    for (int i = 0; i < p->n; i++)
        if (!p->entries[i].unusable)
            return &p->entries[i];
    return p->n ? &p->entries[0] : NULL;
}

/* The entry id names (NULL or "": the default), or NULL. */
static struct entry *entry_find(struct pool *p, const char *id) {
    if (!id || !id[0])
        return entry_default(p);
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->entries[i].o.id, id) == 0)
            return &p->entries[i];
    return NULL;
}

/* The load's progress in [0, 1] (mu held). */
static double entry_progress(const struct entry *en) {
    uint64_t total = atomic_load(&en->prog.total), done = atomic_load(&en->prog.done);
    return en->state == POOL_READY ? 1.0 : total ? (double)done / (double)total : 0.0;
}

/* Waits (mu held) until en is no longer loading or the deadline passed. */
static void wait_loaded(struct pool *p, struct entry *en, double deadline) {
    while (en->state == POOL_LOADING && clock_now_s() < deadline) {
        struct timespec until = clock_deadline_ms(100);
        pthread_cond_timedwait(&p->changed, &p->mu, &until);
    }
}

struct pool_model *pool_acquire(struct pool *p, const char *id, struct oai_error *e) {
    pthread_mutex_lock(&p->mu);
    struct entry *en = entry_find(p, id);
    struct pool_model *pm = NULL;
    if (!en) {
        oai_fail(e, 404, "invalid_request_error", "model", "model_not_found",
                 "the model \"%s\" does not exist (GET /v1/models lists them)", id ? id : "");
        goto out;
    }
    if (en->unusable) {
        oai_fail(e, 500, "server_error", "model", "model_load_failed",
                 "the model \"%s\" cannot be used: %s", en->o.id, en->error);
        goto out;
    }
    if (en->state == POOL_UNLOADED || en->state == POOL_FAILED) {
        en->state = POOL_LOADING; /* a failed load is tried again only when asked again */
        pthread_cond_signal(&p->work);
    }
    wait_loaded(p, en, clock_now_s() + p->cfg.load_timeout_s);
    if (en->state == POOL_LOADING) {
        oai_fail(e, 503, "server_error", "model", "model_loading",
                 "the model \"%s\" is still loading (%.0f%%); try again shortly", en->o.id,
                 100 * entry_progress(en));
    } else if (en->state == POOL_FAILED) {
        oai_fail(e, strstr(en->error, "held by models") ? 503 : 500, "server_error", "model",
                 "model_load_failed", "loading the model \"%s\" failed: %s", en->o.id,
                 en->error);
    } else {
        en->in_use++;
        en->last_used = clock_now_s();
        pm = &en->pm;
    }
out:
    pthread_mutex_unlock(&p->mu);
    return pm;
}

int pool_preload(struct pool *p, void (*progress)(void *ctx, double f), void *ctx, char *err,
                 size_t err_len) {
    pthread_mutex_lock(&p->mu);
    struct entry *en = entry_find(p, NULL);
    int rc = 0;
    if (!en || en->unusable) {
        err_set(err, err_len, "%s", en ? en->error : "no model");
        rc = -EIO;
        goto out;
    }
    if (en != &p->entries[0]) { /* -m's model is the first: it could not be read */
        err_set(err, err_len, "%s", p->entries[0].error);
        rc = -EIO;
        goto out;
    }
    if (en->state != POOL_READY) {
        en->state = POOL_LOADING;
        pthread_cond_signal(&p->work);
    }
    while (en->state == POOL_LOADING) {
        struct timespec until = clock_deadline_ms(100);
        pthread_cond_timedwait(&p->changed, &p->mu, &until);
        if (progress) {
            double f = entry_progress(en);
            pthread_mutex_unlock(&p->mu);
            progress(ctx, f);
            pthread_mutex_lock(&p->mu);
        }
    }
    if (en->state != POOL_READY) {
        err_set(err, err_len, "%s", en->error);
        rc = -EIO;
    }
out:
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void pool_release(struct pool *p, struct pool_model *pm) {
    if (!pm)
        return;
    pthread_mutex_lock(&p->mu);
    struct entry *en = (struct entry *)((char *)pm - offsetof(struct entry, pm));
    en->in_use--;
    en->last_used = clock_now_s();
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->mu);
}

struct pool_model *pool_acquire_recent(struct pool *p) {
    pthread_mutex_lock(&p->mu);
    struct entry *best = NULL;
    for (int i = 0; i < p->n; i++) {
        struct entry *en = &p->entries[i];
        if (en->state == POOL_READY && (!best || en->last_used > best->last_used))
            best = en;
    }
    if (best)
        best->in_use++;
    pthread_mutex_unlock(&p->mu);
    return best ? &best->pm : NULL;
}

int pool_default(struct pool *p) {
    struct entry *en = entry_default(p);
    return en ? (int)(en - p->entries) : -1;
}

int pool_find_fingerprint(struct pool *p, uint64_t fp) {
    for (int i = 0; i < p->n; i++)
        if (p->entries[i].fingerprint == fp && fp != 0)
            return i;
    return -1;
}

bool pool_entry(struct pool *p, int i, struct pool_entry_info *out) {
    if (i < 0 || i >= p->n)
        return false;
    pthread_mutex_lock(&p->mu);
    const struct entry *en = &p->entries[i];
    memset(out, 0, sizeof(*out));
    snprintf(out->id, sizeof(out->id), "%s", en->o.id);
    out->state = en->state;
    snprintf(out->error, sizeof(out->error), "%s", en->error);
    snprintf(out->arch, sizeof(out->arch), "%s", en->arch);
    snprintf(out->quant, sizeof(out->quant), "%s", en->quant);
    out->generated = en->generated;
    out->file_bytes = en->file_bytes;
    out->fingerprint = en->fingerprint;
    out->progress = en->state == POOL_LOADING || en->state == POOL_READY ? entry_progress(en) : 0;
    out->in_use = en->in_use;
    out->loads = en->loads;
    out->unloads = en->unloads;
    out->last_used_s = en->last_used > 0 ? clock_now_s() - en->last_used : -1;
    out->n_ctx = en->n_ctx;
    out->streamed = en->state == POOL_READY && en->pm.cache != NULL;
    out->bytes = entry_size(en);
    pthread_mutex_unlock(&p->mu);
    return true;
}

void pool_counts(struct pool *p, uint64_t *loads, uint64_t *unloads, uint64_t *budget) {
    pthread_mutex_lock(&p->mu);
    *loads = p->loads;
    *unloads = p->unloads;
    *budget = p->cfg.ram_budget;
    pthread_mutex_unlock(&p->mu);
}
