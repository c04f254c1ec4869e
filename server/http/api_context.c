/* api_context.c - the /v1/context routes: a processed prompt's KV cache saved to the context
 * directory, loaded back into the engine (so the next completion that starts with those tokens
 * skips their prefill), listed, deleted, and moved to and from an S3-compatible store.
 * Save and load run on the engine thread (scheduler_call), between generation jobs. Transfers run
 * on the connection's thread; one at a time, its progress visible in /v1/stats. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "api_internal.h"
#include "ctxfile.h"
#include "s3.h"

/* mkdir -p path (mode 0700 for what it creates). Returns 0 or -errno. */
static int make_dirs(const char *path) {
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "%s", path);
    if (n <= 0 || (size_t)n >= sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0700) < 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    return mkdir(buf, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

/* o as compact JSON text (malloc'd; NULL on no memory); o is released. */
static char *dump(json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    return s;
}

/* The body as a JSON object, or NULL with a 400 in out. */
static json_t *body_object(const struct http_request *rq, struct http_response *out) {
    json_error_t je;
    json_t *root = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(root)) {
        char msg[256];
        snprintf(msg, sizeof(msg), "the body must be a JSON object%s%s", root ? "" : ": ",
                 root ? "" : je.text);
        api_reply_fail(out, 400, "invalid_request_error", "", "invalid_json", msg);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* Refuses fields outside allowed (NULL-terminated). Returns 0, or -1 with a 400 in out. */
static int only_fields(const json_t *o, const char *const *allowed, struct http_response *out) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char msg[160];
            snprintf(msg, sizeof(msg), "unknown parameter: '%.64s'", key);
            api_reply_fail(out, 400, "invalid_request_error", key, "unknown_parameter", msg);
            return -1;
        }
    }
    return 0;
}

/* The optional boolean field key of o into *out (false when absent). Returns 0, or -1 with a 400
 * in out. */
static int optional_bool(const json_t *o, const char *key, bool *val, struct http_response *out) {
    json_t *v = json_object_get(o, key);
    if (v && !json_is_boolean(v)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "'%s' must be a boolean", key);
        api_reply_fail(out, 400, "invalid_request_error", key, "invalid_type", msg);
        return -1;
    }
    *val = json_is_true(v);
    return 0;
}

/* The "name" field, checked; path receives <context_dir>/<name>. NULL with a 400 in out. */
static const char *context_name(struct api *a, const json_t *o, char *path, size_t path_len,
                                struct http_response *out) {
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name || !ctx_name_valid(name)) {
        api_reply_fail(out, 400, "invalid_request_error", "name", "invalid_value",
                       "'name' must be 1-64 of A-Z a-z 0-9 . _ - and not start with '.'");
        return NULL;
    }
    snprintf(path, path_len, "%s/%s", a->context_dir, name);
    return name;
}

/* An error of ctxfile_* or of the file system as an HTTP reply. */
static void reply_ctx_error(struct http_response *out, int rc, const char *msg) {
    static const struct {
        int rc, status;
        const char *code;
    } map[] = {{CTXFILE_EMODEL, 409, "model_mismatch"},     {-ENOENT, 404, "not_found"},
               {CTXFILE_ECORRUPT, 422, "corrupt_context"},  {CTXFILE_EVERSION, 422,
                                                             "unsupported_version"},
               {CTXFILE_ESHAPE, 422, "context_too_large"}, {-ENOSPC, 507, "disk_full"}};
    int status = 500;
    const char *code = "server_error";
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (map[i].rc == rc) {
            status = map[i].status;
            code = map[i].code;
        }
    api_reply_fail(out, status, status == 500 ? "server_error" : "invalid_request_error", "name",
                   code, msg);
}

/* The context directory, made on first use (mode 0700). False with a 500 in out. */
static bool dir_ready(struct api *a, struct http_response *out) {
    int rc = make_dirs(a->context_dir);
    if (rc < 0) {
        char msg[1200];
        snprintf(msg, sizeof(msg), "cannot make the context directory \"%s\": %s", a->context_dir,
                 strerror(-rc));
        api_reply_fail(out, 500, "server_error", "", "", msg);
    }
    return rc == 0;
}

/* ---- save and load (on the engine thread) ---------------------------------------------------- */

struct save_call {
    struct pool_model *pm;
    const char *path;
    const int32_t *ids;
    size_t n;
    const char *meta;
    struct ctxfile_opts opts;
    struct ctxfile_info info;
    int32_t cached;
    char err[512];
};

static int save_on_engine(void *ctx, struct scheduler *s) {
    struct save_call *c = ctx;
    int rc = scheduler_prefill(s, c->ids, c->n, &c->cached);
    if (rc < 0) {
        snprintf(c->err, sizeof(c->err), "prefill failed: %s", strerror(-rc));
        return rc;
    }
    return ctxfile_save(c->path, c->pm->m, scheduler_engine(s), scheduler_call_seq(s), c->ids,
                        (int32_t)c->n, c->meta, &c->opts, &c->info, c->err, sizeof(c->err));
}

struct load_call {
    struct pool_model *pm;
    const char *path;
    int32_t *ids;
    int32_t n;
    char *meta;
    struct ctxfile_info info;
    char err[512];
};

static int load_on_engine(void *ctx, struct scheduler *s) {
    struct load_call *c = ctx;
    scheduler_set_cached(s, NULL, 0); /* whatever happens, the cache no longer holds the old ids */
    int rc = ctxfile_load(c->path, c->pm->m, scheduler_engine(s), scheduler_call_seq(s), &c->ids,
                          &c->n, &c->meta, &c->info, c->err, sizeof(c->err));
    if (rc == 0)
        scheduler_set_cached(s, c->ids, c->n);
    return rc;
}

/* The "model" a context request names (optional; a string when present). Returns 0, or -1 with a
 * 400 in out. */
static int model_field(json_t *o, const char **model, struct http_response *out) {
    json_t *m = json_object_get(o, "model");
    *model = json_string_value(m);
    if (m && !json_is_string(m)) {
        api_reply_fail(out, 400, "invalid_request_error", "model", "invalid_type",
                       "'model' must be a string");
        return -1;
    }
    return 0;
}

/* POST /v1/context/save {"name", "messages" | "prompt", "model"?, "metadata"?, "storage"?,
 * "zstd"?} */
static bool upload_saved(struct api *a, const char *name, const char *path, json_t *reply);

static void handle_save(struct api *a, const struct http_request *hr, struct http_response *out) {
    static const char *const fields[] = {"name", "messages", "prompt", "metadata", "storage",
                                         "zstd", "enable_thinking", "tools", "model", NULL};
    char path[1400];
    const char *model = NULL;
    struct oai_error e;
    json_t *o = body_object(hr, out);
    struct save_call c = {.path = path, .opts = ctxfile_opts_default()};
    if (!o || only_fields(o, fields, out) < 0 || !context_name(a, o, path, sizeof(path), out) ||
        model_field(o, &model, out) < 0)
        goto done;
    if (!(c.pm = api_model(a, model, &e))) {
        api_reply_error(out, &e);
        goto done;
    }
    if (!dir_ready(a, out))
        goto done;
    const char *storage = json_string_value(json_object_get(o, "storage"));
    if (json_object_get(o, "storage") && (!storage || ctxfile_store_parse(storage, &c.opts.store) < 0)) {
        api_reply_fail(out, 400, "invalid_request_error", "storage", "invalid_value",
                       "'storage' must be \"exact\", \"f16\", \"q8_0\" or \"q4_0\"");
        goto done;
    }
    if (optional_bool(o, "zstd", &c.opts.zstd, out) < 0)
        goto done;
    json_t *meta_in = json_object_get(o, "metadata");
    if (meta_in && !json_is_object(meta_in)) {
        api_reply_fail(out, 400, "invalid_request_error", "metadata", "invalid_type",
                       "'metadata' must be an object");
        goto done;
    }
    /* the prompt through the same checks and template as a completion */
    bool chat = json_object_get(o, "messages") != NULL;
    if (chat == (json_object_get(o, "prompt") != NULL)) {
        api_reply_fail(out, 400, "invalid_request_error", "messages", "missing_required_parameter",
                       "give exactly one of 'messages' and 'prompt'");
        goto done;
    }
    json_t *req = json_object();
    const char *copy[] = {"messages", "prompt", "enable_thinking", "tools"};
    for (size_t i = 0; i < 4; i++)
        if (json_object_get(o, copy[i]))
            json_object_set(req, copy[i], json_object_get(o, copy[i]));
    char *req_text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    struct oai_limits lim = {.max_messages = 4096, .max_message_bytes = 8u << 20,
                             .max_tokens = c.pm->n_ctx, .max_stop_bytes = 256};
    struct oai_request rq;
    int rc = req_text ? (chat ? oai_parse_chat : oai_parse_completion)(req_text, strlen(req_text),
                                                                      &lim, &rq, &e)
                      : oai_fail(&e, 500, "server_error", "", "", "out of memory");
    free(req_text);
    if (rc < 0) {
        api_reply_error(out, &e);
        goto done;
    }
    size_t n = 0;
    int32_t *ids = api_prefix_ids(c.pm, &rq, &n, &e);
    oai_request_free(&rq);
    if (!ids) {
        api_reply_error(out, &e);
        goto done;
    }
    if ((int64_t)n >= c.pm->n_ctx) {
        api_reply_fail(out, 400, "invalid_request_error", "messages", "context_length_exceeded",
                       "the prompt does not fit the context");
        free(ids);
        goto done;
    }
    /* the metadata kept in the file: what the context was made from, to resume it */
    json_t *meta = json_object();
    json_object_set(meta, chat ? "messages" : "prompt",
                    json_object_get(o, chat ? "messages" : "prompt"));
    if (meta_in)
        json_object_set(meta, "metadata", meta_in);
    json_object_set_new(meta, "model", json_string(c.pm->id));
    char *meta_text = json_dumps(meta, JSON_COMPACT);
    json_decref(meta);
    c.ids = ids;
    c.n = n;
    c.meta = meta_text;
    double t0 = (1e3 * clock_now_s());
    rc = meta_text ? scheduler_call(c.pm->sched, save_on_engine, &c) : -ENOMEM;
    double ms = (1e3 * clock_now_s()) - t0;
    if (rc == -EBUSY)
        api_reply_fail(out, 503, "server_error", "", "queue_full", "the server is busy");
    else if (rc < 0)
        reply_ctx_error(out, rc, c.err[0] ? c.err : strerror(-rc));
    else {
        const char *name = json_string_value(json_object_get(o, "name"));
        json_t *r = json_pack("{s:s, s:i, s:I, s:i, s:f, s:s, s:b}", "name", name, "tokens", (int)n,
                              "bytes", (json_int_t)c.info.file_bytes, "cached_tokens",
                              (int)c.cached, "ms", ms, "storage", qtype_name(c.info.store_type),
                              "zstd", c.info.zstd);
        if (r && a->cfg.upload_on_save && a->s3_ok)
            upload_saved(a, name, path, r);
        api_reply_json(out, 200, dump(r));
    }
    free(meta_text);
    free(ids);
done:
    pool_release(a->pool, c.pm);
    json_decref(o);
}

/* The model a context file goes to: the one the request names, else the one whose fingerprint
 * the file carries (else the default: ctxfile_load then refuses it naming both fingerprints).
 * Held; NULL with e set. */
static struct pool_model *context_model(struct api *a, const char *path, const char *model,
                                        struct oai_error *e) {
    struct ctxfile_info info;
    char err[256];
    struct pool_entry_info in;
    if (!model && a->by_name && ctxfile_info(path, &info, NULL, err, sizeof(err)) == 0 &&
        pool_entry(a->pool, pool_find_fingerprint(a->pool, info.fingerprint), &in))
        return api_model(a, in.id, e);
    return api_model(a, model, e);
}

/* POST /v1/context/load {"name", "model"?} */
static void load_named(struct api *a, const char *name, const char *path, const char *model,
                       struct http_response *out) {
    struct oai_error e;
    struct load_call c = {.path = path};
    if (!(c.pm = context_model(a, path, model, &e))) {
        api_reply_error(out, &e);
        return;
    }
    double t0 = (1e3 * clock_now_s());
    int rc = scheduler_call(c.pm->sched, load_on_engine, &c);
    double ms = (1e3 * clock_now_s()) - t0;
    if (rc == -EBUSY) {
        api_reply_fail(out, 503, "server_error", "", "queue_full", "the server is busy");
    } else if (rc < 0) {
        reply_ctx_error(out, rc, c.err[0] ? c.err : strerror(-rc));
    } else {
        json_t *meta = json_loads(c.meta ? c.meta : "", 0, NULL);
        json_t *r = json_pack("{s:s, s:i, s:f, s:I, s:s, s:o}", "name", name, "tokens", (int)c.n,
                              "ms", ms, "created", (json_int_t)c.info.created, "model", c.pm->id,
                              "metadata", meta ? meta : json_object());
        api_reply_json(out, 200, dump(r));
    }
    pool_release(a->pool, c.pm);
    free(c.ids);
    free(c.meta);
}

static void handle_load(struct api *a, const struct http_request *hr, struct http_response *out) {
    static const char *const fields[] = {"name", "model", NULL};
    char path[1400];
    json_t *o = body_object(hr, out);
    const char *name, *model = NULL;
    if (o && only_fields(o, fields, out) == 0 && model_field(o, &model, out) == 0 &&
        (name = context_name(a, o, path, sizeof(path), out)))
        load_named(a, name, path, model, out);
    json_decref(o);
}

/* ---- list and delete ------------------------------------------------------------------------- */

static json_t *local_list(struct api *a) {
    json_t *arr = json_array();
    DIR *d = opendir(a->context_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!ctx_name_valid(de->d_name))
            continue; /* also skips the temp files of saves in progress (they start with '.') */
        char path[1400], err[256];
        snprintf(path, sizeof(path), "%s/%s", a->context_dir, de->d_name);
        struct ctxfile_info info;
        if (ctxfile_info(path, &info, NULL, err, sizeof(err)) < 0) {
            json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "name", de->d_name,
                                                 "location", "local", "error", err));
            continue;
        }
        json_array_append_new(arr, json_pack("{s:s, s:s, s:i, s:I, s:I, s:s, s:b}", "name",
                                             de->d_name, "location", "local", "tokens",
                                             (int)info.n_tokens, "bytes",
                                             (json_int_t)info.file_bytes, "created",
                                             (json_int_t)info.created, "storage",
                                             qtype_name(info.store_type), "zstd", info.zstd));
    }
    if (d)
        closedir(d);
    return arr;
}

static void handle_list(struct api *a, struct http_response *out) {
    json_t *r = json_pack("{s:s, s:o}", "object", "list", "data", local_list(a));
    if (a->s3_ok) {
        struct s3_list l = {0};
        struct s3_status st;
        char err[512];
        if (s3_list(&a->s3, S3_CONTEXT_PREFIX, &l, &st, err, sizeof(err)) == 0) {
            json_t *remote = json_array();
            for (size_t i = 0; i < l.n; i++)
                json_array_append_new(remote, json_pack("{s:s, s:s, s:I, s:s}", "name",
                                                        l.objects[i].key + strlen(S3_CONTEXT_PREFIX),
                                                        "location", "remote", "bytes",
                                                        (json_int_t)l.objects[i].bytes, "modified",
                                                        l.objects[i].last_modified));
            json_object_set_new(r, "remote", remote);
        } else {
            json_object_set_new(r, "remote_error", json_string(err));
        }
        s3_list_release(&l);
    }
    api_reply_json(out, 200, dump(r));
}

static void handle_delete(struct api *a, const char *name, struct http_response *out) {
    char path[1400];
    if (!ctx_name_valid(name)) {
        api_reply_fail(out, 400, "invalid_request_error", "name", "invalid_value",
                       "a context name is 1-64 of A-Z a-z 0-9 . _ - and does not start with '.'");
        return;
    }
    snprintf(path, sizeof(path), "%s/%s", a->context_dir, name);
    if (unlink(path) < 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "context '%s': %s", name, strerror(errno));
        reply_ctx_error(out, -errno, msg);
        return;
    }
    api_reply_json(out, 200, dump(json_pack("{s:s, s:b}", "name", name, "deleted", 1)));
}

/* ---- upload and download --------------------------------------------------------------------- */

/* Takes the one transfer slot; false when a transfer is running. */
static bool transfer_take(struct api *a, const char *kind, const char *name) {
    pthread_mutex_lock(&a->mu);
    bool free_slot = !a->transfer_kind[0];
    if (free_slot) {
        snprintf(a->transfer_kind, sizeof(a->transfer_kind), "%s", kind);
        snprintf(a->transfer_name, sizeof(a->transfer_name), "%s", name);
        atomic_store(&a->transfer.done_bytes, 0);
        atomic_store(&a->transfer.total_bytes, 0);
        atomic_store(&a->transfer.cancel, false);
    }
    pthread_mutex_unlock(&a->mu);
    return free_slot;
}

/* transfer_take, with a 409 in out when a transfer is running. */
static bool transfer_begin(struct api *a, const char *kind, const char *name,
                           struct http_response *out) {
    bool free_slot = transfer_take(a, kind, name);
    if (!free_slot)
        api_reply_fail(out, 409, "invalid_request_error", "", "transfer_running",
                       "another upload or download is running; try again when it ends");
    return free_slot;
}

static void transfer_end(struct api *a) {
    pthread_mutex_lock(&a->mu);
    a->transfer_kind[0] = '\0';
    pthread_mutex_unlock(&a->mu);
}

/* A store error as a reply: 502 with the store's status, code and message. */
static void reply_store_error(struct http_response *out, int rc, const struct s3_status *st,
                              const char *err) {
    int status = rc == -ENOENT ? 404 : 502;
    char msg[700];
    snprintf(msg, sizeof(msg), "the store answered: %s", err);
    api_reply_fail(out, status, status == 404 ? "invalid_request_error" : "server_error", "name",
                   st->code[0] ? st->code : rc == -ENOENT ? "not_found" : "store_error", msg);
}

static bool store_configured(struct api *a, struct http_response *out) {
    if (!a->s3_ok)
        api_reply_fail(out, 400, "invalid_request_error", "", "no_store",
                       "no object store is configured (s3_* settings or SNIPER_S3_* / R2_* "
                       "variables)");
    return a->s3_ok;
}

/* Puts the local context file `path` to the store under its key (written to key[128]), with the
 * transfer slot taken. Returns 0 or s3_put_file's error (st and err say more). */
static int put_context(struct api *a, const char *name, const char *path, char *key,
                       struct s3_status *st, char *err, size_t err_len) {
    snprintf(key, 128, "%s%s", S3_CONTEXT_PREFIX, name);
    return s3_put_file(&a->s3, key, path, &a->transfer, st, err, err_len);
}

/* --upload-on-save: puts a context just saved to the store and says so in the save's reply:
 * "uploaded" true, or false with "upload_error" (the context stays saved locally either way).
 * Returns the "uploaded" value. */
static bool upload_saved(struct api *a, const char *name, const char *path, json_t *reply) {
    char key[128], err[512] = "another upload or download is running";
    struct s3_status st = {0};
    int rc = -EBUSY;
    if (transfer_take(a, "upload", name)) {
        rc = put_context(a, name, path, key, &st, err, sizeof(err));
        transfer_end(a);
    }
    json_object_set_new(reply, "uploaded", json_boolean(rc == 0));
    if (rc == 0)
        json_object_set_new(reply, "key", json_string(key));
    else
        json_object_set_new(reply, "upload_error", json_string(err));
    return rc == 0;
}

static void handle_upload(struct api *a, const struct http_request *hr, struct http_response *out) {
    static const char *const fields[] = {"name", NULL};
    char path[1400], key[128], err[512];
    json_t *o = body_object(hr, out);
    const char *name;
    if (!o || only_fields(o, fields, out) < 0 || !(name = context_name(a, o, path, sizeof(path), out)) ||
        !store_configured(a, out))
        goto done;
    if (access(path, R_OK) < 0) {
        reply_ctx_error(out, -ENOENT, "no local context of that name");
        goto done;
    }
    if (!transfer_begin(a, "upload", name, out))
        goto done;
    struct s3_status st = {0};
    double t0 = (1e3 * clock_now_s());
    int rc = put_context(a, name, path, key, &st, err, sizeof(err));
    double ms = (1e3 * clock_now_s()) - t0;
    uint64_t bytes = atomic_load(&a->transfer.done_bytes);
    transfer_end(a);
    if (rc < 0)
        reply_store_error(out, rc, &st, err);
    else
        api_reply_json(out, 200, dump(json_pack("{s:s, s:s, s:I, s:f}", "name", name, "key",
                                                      key, "bytes", (json_int_t)bytes, "ms", ms)));
done:
    json_decref(o);
}

static void handle_download(struct api *a, const struct http_request *hr,
                            struct http_response *out) {
    static const char *const fields[] = {"name", "load", "model", NULL};
    char path[1400], tmp[1500], key[128], err[512];
    json_t *o = body_object(hr, out);
    const char *name;
    if (!o || only_fields(o, fields, out) < 0 || !(name = context_name(a, o, path, sizeof(path), out)) ||
        !store_configured(a, out))
        goto done;
    bool load;
    if (optional_bool(o, "load", &load, out) < 0)
        goto done;
    if (!dir_ready(a, out) || !transfer_begin(a, "download", name, out))
        goto done;
    snprintf(key, sizeof(key), "%s%s", S3_CONTEXT_PREFIX, name);
    snprintf(tmp, sizeof(tmp), "%s/.download-%s-%d", a->context_dir, name, (int)getpid());
    unlink(tmp);
    struct s3_status st = {0};
    double t0 = (1e3 * clock_now_s());
    int rc = s3_get_file(&a->s3, key, tmp, &a->transfer, &st, err, sizeof(err));
    uint64_t bytes = atomic_load(&a->transfer.done_bytes);
    transfer_end(a);
    if (rc < 0) {
        reply_store_error(out, rc, &st, err);
        goto done;
    }
    /* verified before it takes the name: a bad download leaves nothing behind */
    struct ctxfile_info info;
    err[0] = '\0';
    if ((rc = ctxfile_verify(tmp, &info, err, sizeof(err))) < 0 || rename(tmp, path) < 0) {
        unlink(tmp);
        reply_ctx_error(out, rc < 0 ? rc : -errno, rc < 0 ? err : strerror(errno));
        goto done;
    }
    if (load) {
        const char *model = NULL;
        if (model_field(o, &model, out) == 0)
            load_named(a, name, path, model, out);
    } else {
        double ms = (1e3 * clock_now_s()) - t0;
        api_reply_json(out, 200, dump(json_pack("{s:s, s:I, s:i, s:f}", "name", name,
                                                      "bytes", (json_int_t)bytes, "tokens",
                                                      (int)info.n_tokens, "ms", ms)));
    }
done:
    json_decref(o);
}

/* ---- routing --------------------------------------------------------------------------------- */

bool api_context_route(struct api *a, const struct http_request *rq, struct http_response *out) {
    const char *p = rq->path;
    bool get = !strcmp(rq->method, "GET"), post = !strcmp(rq->method, "POST");
    if (!strcmp(p, "/v1/context") || !strcmp(p, "/v1/context/list")) {
        if (get)
            handle_list(a, out);
        else
            api_reply_fail(out, 405, "invalid_request_error", "", "method_not_allowed",
                           "this path takes GET");
        return true;
    }
    static const struct {
        const char *path;
        void (*fn)(struct api *, const struct http_request *, struct http_response *);
    } posts[] = {{"/v1/context/save", handle_save}, {"/v1/context/load", handle_load},
                 {"/v1/context/upload", handle_upload}, {"/v1/context/download", handle_download}};
    for (size_t i = 0; i < sizeof(posts) / sizeof(posts[0]); i++)
        if (!strcmp(p, posts[i].path)) {
            if (post)
                posts[i].fn(a, rq, out);
            else
                api_reply_fail(out, 405, "invalid_request_error", "", "method_not_allowed",
                               "this path takes POST");
            return true;
        }
    if (!strncmp(p, "/v1/context/", 12)) {
        if (!strcmp(rq->method, "DELETE"))
            handle_delete(a, p + 12, out);
        else
            api_reply_fail(out, 405, "invalid_request_error", "", "method_not_allowed",
                           "a context's path takes DELETE");
        return true;
    }
    return false;
}
