/* hub.c - see hub.h. Reading order: names, the repo's file list (the hub's API or the cache
 * directory, one shape), picking the files of a quantization, fetching them, hub_pull.
 * Invariants: a file in the cache under its own name is complete (and verified when the hub gave a
 * sha256); only FILE.part is ever written to. */
#include "hub.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "download.h"
#include "err.h"
#include "gguf.h"
#include "paths.h"

#define HUB_NAME_MAX 256  /* user, repo and quant: the hub allows 96 for a repo */
#define HUB_QUANTS_MAX 1024 /* the listed quantizations in a message */

/* ---- names ----------------------------------------------------------------------------------- */

struct hub_ref {
    char user[HUB_NAME_MAX], repo[HUB_NAME_MAX];
    char quant[HUB_NAME_MAX]; /* "" when the name has none */
};

static bool name_char_ok(char c) {
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* Copies s[0..n) into out when it is a non-empty name of [A-Za-z0-9._-] (not "." or ".."). */
static bool name_take(const char *s, size_t n, char *out) {
    if (n == 0 || n >= HUB_NAME_MAX || (s[0] == '.' && (n == 1 || (n == 2 && s[1] == '.'))))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok(s[i]))
            return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

/* "[hf:]user/repo[:QUANT]" into r. Returns 0 or -EINVAL with a message. */
static int ref_parse(const char *s, struct hub_ref *r, char *err, size_t err_len) {
    const char *name = hub_ref_is(s) ? s + 3 : s;
    const char *slash = strchr(name, '/'), *colon = slash ? strchr(slash, ':') : NULL;
    const char *end = colon ? colon : name + strlen(name);
    memset(r, 0, sizeof(*r));
    if (!slash || !name_take(name, (size_t)(slash - name), r->user) ||
        !name_take(slash + 1, (size_t)(end - slash - 1), r->repo) ||
        (colon && !name_take(colon + 1, strlen(colon + 1), r->quant))) {
        err_set(err, err_len, "\"%s\" is not a model name: expected user/repo or "
                "user/repo:QUANT (for example unsloth/Qwen3-30B-A3B-GGUF:Q4_K_M)", s);
        return -EINVAL;
    }
    return 0;
}

bool hub_ref_is(const char *s) {
    return s && strncmp(s, "hf:", 3) == 0;
}

/* The base name of a repo path. */
static const char *base_of(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static bool is_gguf(const char *name) {
    size_t n = strlen(name);
    return n > 5 && strcasecmp(name + n - 5, ".gguf") == 0 && !strcasestr(name, "mmproj");
}

/* The model a file belongs to: its path without ".gguf" and a split suffix, into out. */
static void stem_of(const char *name, char *out, size_t len) {
    size_t n = strlen(name) - 5, prefix_len;
    uint32_t no, count;
    if (gguf_split_name_parse(name, &prefix_len, &no, &count))
        n = prefix_len;
    snprintf(out, len, "%.*s", (int)n, name);
}

/* The quantization tag of a file: the last '-' or '.' separated part of its base name's stem
 * ("Qwen3-30B-A3B-Q4_K_M-00001-of-00003.gguf": "Q4_K_M"), into out. */
static void quant_of(const char *name, char *out, size_t len) {
    char stem[HUB_PATH_MAX];
    stem_of(base_of(name), stem, sizeof(stem));
    const char *a = strrchr(stem, '-'), *b = strrchr(stem, '.');
    const char *cut = a > b ? a : b;
    if (snprintf(out, len, "%s", cut ? cut + 1 : stem) >= (int)len)
        out[0] = '\0'; /* no tag that long: matches nothing */
}

/* ---- the repo's files ------------------------------------------------------------------------ */

struct hub_file {
    char *name;         /* path in the repo (or the cache directory's file name) */
    uint64_t size;      /* bytes */
    char sha256[65];    /* hex, "" when the hub gave none (a non-LFS file, the cache) */
};

struct hub_list {
    struct hub_file *f;
    size_t n, cap;
};

static void list_release(struct hub_list *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->f[i].name);
    free(l->f);
    memset(l, 0, sizeof(*l));
}

/* Appends a GGUF file (others are skipped). Returns 0 or -ENOMEM. */
static int list_add(struct hub_list *l, const char *name, uint64_t size, const char *sha256) {
    if (!is_gguf(name))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct hub_file *f = realloc(l->f, cap * sizeof(*f));
        if (!f)
            return -ENOMEM;
        l->f = f;
        l->cap = cap;
    }
    struct hub_file *f = &l->f[l->n];
    memset(f, 0, sizeof(*f));
    if (!(f->name = strdup(name)))
        return -ENOMEM;
    f->size = size;
    if (sha256 && strlen(sha256) == 64)
        memcpy(f->sha256, sha256, 65);
    l->n++;
    return 0;
}

/* The model API's answer: {"siblings": [{"rfilename", "size", "lfs": {"sha256", "size"}}]}. */
static int list_parse(const char *body, struct hub_list *l, char *err, size_t err_len) {
    json_error_t je;
    json_t *root = json_loads(body, 0, &je), *sib = json_object_get(root, "siblings");
    int rc = json_is_array(sib) ? 0 : -EIO;
    if (rc < 0)
        err_set(err, err_len, "the hub's file list is not what its API documents (%s)",
                root ? "no \"siblings\" array" : je.text);
    for (size_t i = 0; rc == 0 && i < json_array_size(sib); i++) {
        json_t *f = json_array_get(sib, i), *lfs = json_object_get(f, "lfs");
        const char *name = json_string_value(json_object_get(f, "rfilename"));
        json_t *size = json_object_get(lfs ? lfs : f, "size");
        if (!name || !json_is_integer(size) || json_integer_value(size) < 0)
            continue; /* no size (an API without blobs=true): not fetchable safely */
        rc = list_add(l, name, (uint64_t)json_integer_value(size),
                      json_string_value(json_object_get(lfs, "sha256")));
    }
    if (rc == -ENOMEM)
        err_set(err, err_len, "out of memory");
    json_decref(root);
    return rc;
}

/* Collects a GET's body. */
struct hub_body {
    char *d;
    size_t n;
};

static size_t body_write(char *p, size_t sz, size_t n, void *ctx) {
    struct hub_body *b = ctx;
    char *d = b->n + n < (64u << 20) ? realloc(b->d, b->n + n + 1) : NULL;
    if (!d)
        return 0;
    memcpy(d + b->n, p, n);
    b->n += n;
    d[b->n] = '\0';
    b->d = d;
    (void)sz;
    return n;
}

/* The message for an HTTP status of the hub: 401/403 gated, 404 missing. Returns the errno. */
static int status_fail(long status, const char *what, const char *endpoint, char *err,
                       size_t err_len) {
    if (status == 401 || status == 403) {
        err_set(err, err_len, "access to %s denied (HTTP %ld): the repo is gated or private; "
                "accept its terms on the hub and set HF_TOKEN to a token that has access",
                what, status);
        return -EACCES;
    }
    if (status == 404) {
        err_set(err, err_len, "%s not found on %s (HTTP 404)", what, endpoint);
        return -ENOENT;
    }
    err_set(err, err_len, "%s: HTTP %ld from %s", what, status, endpoint);
    return -EIO;
}

/* GETs the repo's file list from the hub's model API into l. */
static int list_fetch(const struct hub_opts *o, const struct hub_ref *r, struct hub_list *l,
                      char *err, size_t err_len) {
    char url[2048], auth[600], what[600];
    struct hub_body b = {0};
    struct curl_slist *hdr = NULL;
    long status = 0;
    CURL *h = curl_easy_init();
    if (!h) {
        err_set(err, err_len, "out of memory");
        return -ENOMEM;
    }
    snprintf(url, sizeof(url), "%s/api/models/%s/%s?blobs=true", o->endpoint, r->user, r->repo);
    snprintf(what, sizeof(what), "repo \"%s/%s\"", r->user, r->repo);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sniper");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    if (o->token[0]) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", o->token);
        hdr = curl_slist_append(hdr, auth);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    }
    CURLcode c = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    int rc = 0;
    if (c == CURLE_COULDNT_RESOLVE_HOST || c == CURLE_COULDNT_CONNECT ||
        c == CURLE_COULDNT_RESOLVE_PROXY || (c == CURLE_OPERATION_TIMEDOUT && status == 0)) {
        err_set(err, err_len, "cannot reach the hub at %s (%s): no network? a model already "
                "downloaded is used offline with HF_HUB_OFFLINE=1", o->endpoint,
                curl_easy_strerror(c));
        rc = -EHOSTUNREACH;
    } else if (c != CURLE_OK) {
        err_set(err, err_len, "listing %s failed: %s", what, curl_easy_strerror(c));
        rc = -EIO;
    } else if (status != 200) {
        rc = status_fail(status, what, o->endpoint, err, err_len);
    } else {
        rc = list_parse(b.d ? b.d : "", l, err, err_len);
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    free(b.d);
    return rc;
}

/* The complete GGUF files in the cache directory dir (parts are not complete). */
static int list_cached(const char *dir, struct hub_list *l) {
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d)) != NULL;) {
        char path[HUB_PATH_MAX];
        struct stat st;
        bool fits = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < (int)sizeof(path);
        if (fits && de->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            rc = list_add(l, de->d_name, (uint64_t)st.st_size, NULL);
    }
    closedir(d);
    return rc;
}

/* ---- picking the files of a quantization ----------------------------------------------------- */

static int cmp_file(const void *a, const void *b) {
    return strcmp(((const struct hub_file *)a)->name, ((const struct hub_file *)b)->name);
}

/* The distinct quantization tags of l (sorted by file name), ", "-joined into out. */
static void quants_list(const struct hub_list *l, char *out, size_t len) {
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < l->n; i++) {
        char q[HUB_NAME_MAX];
        quant_of(l->f[i].name, q, sizeof(q));
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            char p[HUB_NAME_MAX];
            quant_of(l->f[j].name, p, sizeof(p));
            seen = strcasecmp(p, q) == 0;
        }
        if (!seen && n + strlen(q) + 3 < len)
            n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : "", q);
    }
}

/* True when l has a file of quantization q. */
static bool has_quant(const struct hub_list *l, const char *q) {
    for (size_t i = 0; i < l->n; i++) {
        char p[HUB_NAME_MAX];
        quant_of(l->f[i].name, p, sizeof(p));
        if (strcasecmp(p, q) == 0)
            return true;
    }
    return false;
}

/* The quantization to fetch: the name's, else HUB_DEFAULT_QUANT when the repo has it, else the
 * repo's only one. Returns 0 or -ENOENT with the repo's quantizations in err. */
static int quant_choose(const struct hub_list *l, const struct hub_ref *r, char *q, size_t len,
                        char *err, size_t err_len) {
    char all[HUB_QUANTS_MAX];
    quants_list(l, all, sizeof(all));
    if (r->quant[0] && has_quant(l, r->quant)) {
        snprintf(q, len, "%s", r->quant);
        return 0;
    }
    if (!r->quant[0] && has_quant(l, HUB_DEFAULT_QUANT)) {
        snprintf(q, len, "%s", HUB_DEFAULT_QUANT);
        return 0;
    }
    if (!r->quant[0] && l->n > 0 && !strchr(all, ',')) {
        const int n = snprintf(q, len, "%s", all);
        if (n >= 0 && (size_t)n < len)
            return 0;
        err_set(err, err_len, "\"%s/%s\": a quantization name longer than %zu bytes", r->user,
                r->repo, len - 1);
        return -ENAMETOOLONG;
    }
    if (l->n == 0)
        err_set(err, err_len, "\"%s/%s\" has no GGUF file", r->user, r->repo);
    else if (r->quant[0])
        err_set(err, err_len, "\"%s/%s\" has no file for quantization \"%s\"; it has: %s",
                r->user, r->repo, r->quant, all);
    else
        err_set(err, err_len, "\"%s/%s\" has several quantizations: %s; name one, as in "
                "%s/%s:QUANT", r->user, r->repo, all, r->user, r->repo);
    return -ENOENT;
}

/* Marks in pick[] the files to fetch for quantization q: the first model (by name) of that tag,
 * a whole file or every shard of a split one. Returns the count, or -ENOENT with a message when a
 * split model's list lacks shards. */
static int files_pick(const struct hub_list *l, const char *q, bool *pick, char *err,
                      size_t err_len) {
    char stem[HUB_PATH_MAX] = "";
    int n = 0;
    uint32_t want = 1;
    for (size_t i = 0; i < l->n; i++) {
        char p[HUB_NAME_MAX], s[HUB_PATH_MAX];
        size_t prefix_len;
        uint32_t no, count = 1;
        quant_of(l->f[i].name, p, sizeof(p));
        stem_of(l->f[i].name, s, sizeof(s));
        if (strcasecmp(p, q) != 0 || (stem[0] && strcmp(s, stem) != 0))
            continue;
        gguf_split_name_parse(l->f[i].name, &prefix_len, &no, &count);
        if (!stem[0]) { /* the first file of q names the model */
            snprintf(stem, sizeof(stem), "%s", s);
            want = count;
        }
        if (count != want)
            continue;
        pick[i] = true;
        n++;
    }
    if ((uint32_t)n != want) {
        err_set(err, err_len, "\"%s\" is split in %" PRIu32 " files, %d of them found", stem,
                want, n);
        return -ENOENT;
    }
    return n;
}

/* ---- fetching -------------------------------------------------------------------------------- */

/* Creates dir and the directories above it. Returns 0 or -errno with a message. */
static int dir_make(const char *dir, char *err, size_t err_len) {
    int rc = paths_make_parent(dir);
    if (rc == 0 && mkdir(dir, 0755) < 0 && errno != EEXIST)
        rc = -errno;
    if (rc < 0)
        err_set(err, err_len, "cannot create the models directory \"%s\": %s", dir,
                strerror(-rc));
    return rc;
}

/* The URL of a repo file: each segment of its path percent-encoded, the slashes kept. Returns
 * 0 or -ENOMEM. */
static int file_url(const struct hub_opts *o, const struct hub_ref *r, const char *name,
                    char *url, size_t len) {
    size_t n = (size_t)snprintf(url, len, "%s/%s/%s/resolve/main", o->endpoint, r->user, r->repo);
    for (const char *seg = name; *seg && n < len;) {
        const char *end = strchr(seg, '/');
        size_t seg_len = end ? (size_t)(end - seg) : strlen(seg);
        char *esc = curl_easy_escape(NULL, seg, (int)seg_len);
        if (!esc)
            return -ENOMEM;
        n += (size_t)snprintf(url + n, len - n, "/%s", esc);
        curl_free(esc);
        seg += seg_len + (end ? 1 : 0);
    }
    return 0;
}

/* Brings one file of the repo into dir (a pass when it is there whole): resumes FILE.part,
 * checks the sha256 (a mismatch removes the part and downloads once more), renames. */
static int file_fetch(const struct hub_opts *o, const struct hub_ref *r, const struct hub_file *f,
                      const char *dir, char *err, size_t err_len) {
    char final[HUB_PATH_MAX], part[HUB_PATH_MAX + 8], url[HUB_PATH_MAX + 1024], what[600];
    struct stat st;
    snprintf(final, sizeof(final), "%s/%s", dir, base_of(f->name));
    snprintf(part, sizeof(part), "%s.part", final);
    if (stat(final, &st) == 0 && (uint64_t)st.st_size == f->size)
        return 0;
    if (file_url(o, r, f->name, url, sizeof(url)) < 0) {
        err_set(err, err_len, "out of memory");
        return -ENOMEM;
    }
    struct download_opts d = {.token = o->token, .label = base_of(f->name),
                              .progress = o->progress, .tty = o->tty, .cancel = o->cancel};
    for (int attempt = 0;; attempt++) {
        long status;
        int rc = download_resume(&d, url, part, f->size, &status, err, err_len);
        if (rc == -EPROTO) {
            snprintf(what, sizeof(what), "\"%s\" of \"%s/%s\"", f->name, r->user, r->repo);
            return status_fail(status, what, o->endpoint, err, err_len);
        }
        if (rc < 0)
            return rc;
        char got[65] = "";
        if (f->sha256[0] && (rc = download_sha256_file(part, got)) < 0) {
            err_set(err, err_len, "cannot read \"%s\": %s", part, strerror(-rc));
            return rc;
        }
        if (f->sha256[0] && strcmp(got, f->sha256) != 0) {
            unlink(part);
            if (attempt == 0) {
                if (o->progress)
                    fprintf(o->progress, "%s: checksum mismatch, downloading it again\n",
                            base_of(f->name));
                continue;
            }
            err_set(err, err_len, "\"%s\" failed its checksum twice (sha256 %s, the hub says %s):"
                    " removed", f->name, got, f->sha256);
            return -EBADMSG;
        }
        if (rename(part, final) < 0) {
            rc = -errno;
            err_set(err, err_len, "cannot rename \"%s\": %s", part, strerror(errno));
            return rc;
        }
        return 0;
    }
}

/* ---- hub_pull -------------------------------------------------------------------------------- */

void hub_opts_from_env(struct hub_opts *o) {
    const char *e = getenv("HF_ENDPOINT"), *t = getenv("HF_TOKEN");
    const char *dir = getenv("SNIPER_MODELS_DIR"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME"), *off = getenv("HF_HUB_OFFLINE");
    memset(o, 0, sizeof(*o));
    snprintf(o->endpoint, sizeof(o->endpoint), "%s", e && *e ? e : HUB_DEFAULT_ENDPOINT);
    size_t n = strlen(o->endpoint);
    while (n > 0 && o->endpoint[n - 1] == '/')
        o->endpoint[--n] = '\0';
    snprintf(o->token, sizeof(o->token), "%s", t ? t : "");
    if (dir && *dir)
        snprintf(o->models_dir, sizeof(o->models_dir), "%s", dir);
    else if (xdg && *xdg)
        snprintf(o->models_dir, sizeof(o->models_dir), "%s/sniper/models", xdg);
    else
        snprintf(o->models_dir, sizeof(o->models_dir), "%s/.cache/sniper/models",
                 home && *home ? home : ".");
    o->offline = off && (strcmp(off, "1") == 0 || strcasecmp(off, "true") == 0);
    o->progress = stderr;
    o->tty = isatty(STDERR_FILENO);
}

/* Picks q's files of l and fetches them (or, from the cache, only checks them) into dir; path
 * gets the first's. */
static int pull_files(const struct hub_opts *o, const struct hub_ref *r, struct hub_list *l,
                      const char *dir, bool fetch, char *path, size_t path_len, char *err,
                      size_t err_len) {
    char q[HUB_NAME_MAX];
    qsort(l->f, l->n, sizeof(*l->f), cmp_file);
    int rc = quant_choose(l, r, q, sizeof(q), err, err_len);
    bool *pick = rc == 0 ? calloc(l->n, sizeof(*pick)) : NULL;
    if (rc == 0 && !pick) {
        err_set(err, err_len, "out of memory");
        rc = -ENOMEM;
    }
    if (rc == 0 && (rc = files_pick(l, q, pick, err, err_len)) > 0)
        rc = 0;
    if (rc == 0 && fetch)
        rc = dir_make(dir, err, err_len);
    bool first = true;
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        if (!pick[i])
            continue;
        if (fetch)
            rc = file_fetch(o, r, &l->f[i], dir, err, err_len);
        if (rc == 0 && first)
            snprintf(path, path_len, "%s/%s", dir, base_of(l->f[i].name));
        first = false;
    }
    free(pick);
    return rc;
}

int hub_pull(const struct hub_opts *o, const char *ref, char *path, size_t path_len, char *err,
             size_t err_len) {
    struct hub_ref r;
    struct hub_list l = {0};
    char dir[HUB_PATH_MAX], why[512] = "";
    int rc = ref_parse(ref, &r, err, err_len);
    if (rc < 0)
        return rc;
    snprintf(dir, sizeof(dir), "%s/%s/%s", o->models_dir, r.user, r.repo);
    if (!o->offline) {
        rc = list_fetch(o, &r, &l, why, sizeof(why));
        if (rc == 0)
            rc = pull_files(o, &r, &l, dir, true, path, path_len, err, err_len);
        else if (rc != -EHOSTUNREACH)
            err_set(err, err_len, "%s", why);
        list_release(&l);
        if (rc != -EHOSTUNREACH || !why[0]) /* the list came: the cache knows no better */
            return rc;
        if (o->progress) /* no network: what the cache holds will do */
            fprintf(o->progress, "%s; looking in the cache\n", why);
    }
    rc = list_cached(dir, &l);
    if (rc == 0)
        rc = pull_files(o, &r, &l, dir, false, path, path_len, err, err_len);
    if (rc == -ENOENT && l.n == 0)
        err_set(err, err_len, "\"%s/%s\" is not in the cache (\"%s\")%s%s", r.user, r.repo, dir,
                why[0] ? ": " : "", why);
    list_release(&l);
    return rc;
}
