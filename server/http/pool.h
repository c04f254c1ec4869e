/* pool.h - the models a daemon serves. Each entry is a GGUF file with an id (its alias) and its
 * options; its header is read when it is added (architecture, quantization, size, fingerprint; a
 * file that cannot be read stays listed with its error). A model is loaded on demand, on the
 * pool's loader thread, into a struct pool_model (model, tokenizer, engine, expert cache,
 * scheduler), within one process-wide RAM budget: when the next model does not fit, the least
 * recently used model that no request holds is unloaded first. Requests for a model being loaded
 * wait for it, up to a timeout; a failed load is reported to its waiters and not retried until a
 * new request asks again.
 *
 *     struct pool *p = pool_new(&cfg, err, sizeof(err));
 *     pool_add(p, &opts);                          // per file (or pool_add_dir)
 *     struct pool_model *pm = pool_acquire(p, "qwen3-30b", &e);  // NULL: e says why (404, 503)
 *     ... scheduler_submit(pm->sched, job) ...
 *     pool_release(p, pm);                         // when the request is over
 *     pool_free(p);                                // after the HTTP server stopped */
#ifndef SNIPER_POOL_H
#define SNIPER_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "chat.h"
#include "engine.h"
#include "expert_cache.h"
#include "model.h"
#include "openai.h"
#include "scheduler.h"
#include "tokenizer.h"

#define POOL_ID_MAX 128
#define POOL_PATH_MAX 4096

/* One model's file and options. */
struct pool_model_opts {
    char id[POOL_ID_MAX];         /* what requests name it by; "": the model's general.name, or
                                   * the file's name without its extension */
    char path[POOL_PATH_MAX];
    uint64_t ram_budget;          /* bytes its load may take (experts streamed within it); 0: in
                                   * RAM when it fits what the process budget leaves, else
                                   * streamed within that */
    bool stream;                  /* experts on disk even when it would fit (-m with
                                   * --ram-budget: the budget is the model's) */
    struct engine_params ep;      /* context, KV type, slots (ep.n_seq), threads, batch ... */
    struct expert_cache_options cache;
    const char *chat_template;    /* a chat_family_name(), or NULL: from the model */
    int queue;                    /* requests waiting beyond its slots */
};

struct pool_config {
    uint64_t ram_budget;          /* the process's resident-memory cap, bytes; 0: none */
    double load_timeout_s;        /* how long a request waits for its model to load */
    bool log;                     /* load and unload lines on stderr */
    struct gpu *gpu;              /* borrowed; the first model loaded in RAM runs on it (one at a
                                   * time: the device records one step at once), NULL: none */
};

/* A loaded model, held between pool_acquire and pool_release: everything is read-only for the
 * holder but the scheduler, which is thread-safe. */
struct pool_model {
    const char *id;
    struct model *m;
    struct tokenizer *tk;
    struct engine *e;
    struct expert_cache *cache;   /* NULL: all in RAM */
    struct scheduler *sched;
    enum chat_family family;
    int32_t n_ctx;
    uint64_t ram_budget;          /* the cap its expert cache was sized for (0: in RAM) */
    bool on_gpu;                  /* its steps run on the pool's GPU */
};

enum pool_state { POOL_UNLOADED, POOL_LOADING, POOL_READY, POOL_FAILED };

/* One entry as /v1/models and /v1/stats show it. */
struct pool_entry_info {
    char id[POOL_ID_MAX];
    enum pool_state state;
    char error[512];              /* why the last load failed, or why the file is unusable */
    char arch[32];                /* general.architecture ("" when unreadable) */
    char quant[32];               /* the type most of its bytes are ("q4_K" ...) */
    uint64_t file_bytes;
    uint64_t bytes;               /* what it takes in RAM: measured at its last load, else the
                                   * estimate from its header */
    uint64_t fingerprint;         /* ctxfile_fingerprint of its header (0: unreadable) */
    double progress;              /* of a load in progress, 0..1 */
    int in_use;                   /* requests holding it */
    uint64_t loads, unloads;
    double last_used_s;           /* seconds since it last served (-1: never) */
    int32_t n_ctx;
    bool streamed;                /* loaded with its experts on disk */
    bool generated;               /* written by sniper-mkmodel (random weights: gibberish) */
};

struct pool;

/* Starts the pool and its loader thread. Returns it or NULL with a message in err. */
struct pool *pool_new(const struct pool_config *cfg, char *err, size_t err_len);

/* Unloads every model (no request may hold one) and stops the loader. Accepts NULL. */
void pool_free(struct pool *p);

/* Adds a model (o copied). Its file's header is read now: a file that cannot be read is added all
 * the same, in state POOL_FAILED with the reason (listed, never loaded). Returns 0, -EEXIST for an
 * id already taken or -ENOMEM. The first model added whose file can be read is the default. */
int pool_add(struct pool *p, const struct pool_model_opts *o);

/* Adds every *.gguf file of dir and of its subdirectories two levels down (the `sniper pull`
 * cache's USER/REPO/FILE), sorted by path; the id is the path without .gguf ("m",
 * "user/repo/m"), a split model listed once by its first shard without the shard suffix. With
 * the options of defaults (its id and path ignored). Returns the number added, or a negative
 * error with a message in err (the directory cannot be read). */
int pool_add_dir(struct pool *p, const char *dir, const struct pool_model_opts *defaults,
                 char *err, size_t err_len);

/* Models in the pool. */
int pool_size(const struct pool *p);

/* The loaded model id names (NULL or "": the default), loading it first if needed (unloading
 * idle models the budget needs), waiting at most the configured timeout. Holds it loaded until
 * pool_release. Returns it, or NULL with e filled: 404 model_not_found for an unknown id, 503
 * model_loading when the load did not finish in time or the budget is held by models in use, 500
 * model_load_failed with the load's error. Thread-safe. */
struct pool_model *pool_acquire(struct pool *p, const char *id, struct oai_error *e);

/* Loads the default model now and waits for it (sniperd -m: serving starts loaded). Returns 0 or
 * -EIO with the load's error in err. progress, when not NULL, is called from the waiting thread
 * with the load's progress in [0, 1] every 100 ms. */
int pool_preload(struct pool *p, void (*progress)(void *ctx, double f), void *ctx, char *err,
                 size_t err_len);

/* Ends one pool_acquire's hold. Accepts NULL. */
void pool_release(struct pool *p, struct pool_model *pm);

/* The default model's index: the first added whose file could be read (-1: no models). */
int pool_default(struct pool *p);

/* The model whose fingerprint is fp: its index, or -1. */
int pool_find_fingerprint(struct pool *p, uint64_t fp);

/* Entry i (0 .. pool_size-1) as it is now. Returns false when i is out of range. */
bool pool_entry(struct pool *p, int i, struct pool_entry_info *out);

/* The most recently used loaded model, held (release it), or NULL when none is loaded: what
 * /v1/stats shows the engine figures of. */
struct pool_model *pool_acquire_recent(struct pool *p);

/* Totals: loads and unloads done, and the process budget (0: none). */
void pool_counts(struct pool *p, uint64_t *loads, uint64_t *unloads, uint64_t *budget);

const char *pool_state_name(enum pool_state s);

#endif
