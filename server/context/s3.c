/* s3.c - the S3 client (s3.h): one curl easy handle per request, SigV4 by libcurl, bodies streamed
 * from and to file descriptors, error and listing bodies kept in memory (bounded) and read with
 * libxml2. Invariant: a download that fails leaves no file at its path. */
#include "s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

#define S3_MAX_BODY (16u << 20) /* a listing page or an error: far below this */

/* ---- configuration --------------------------------------------------------------------------- */

static void env_fill(char *dst, size_t len, const char *name, const char *fallback) {
    const char *v = getenv(name);
    if (!v || !*v)
        v = fallback ? getenv(fallback) : NULL;
    if (!dst[0] && v && *v)
        snprintf(dst, len, "%s", v);
}

bool s3_config_complete(const struct s3_config *c) {
    return c->endpoint[0] && c->bucket[0] && c->access_key[0] && c->secret_key[0];
}

int s3_config_from_env(struct s3_config *c) {
    env_fill(c->endpoint, sizeof(c->endpoint), "SNIPER_S3_ENDPOINT", "R2_ENDPOINT");
    env_fill(c->bucket, sizeof(c->bucket), "SNIPER_S3_BUCKET", "R2_BUCKET");
    env_fill(c->access_key, sizeof(c->access_key), "SNIPER_S3_ACCESS_KEY", "R2_ACCESS_KEY");
    env_fill(c->secret_key, sizeof(c->secret_key), "SNIPER_S3_SECRET_KEY", "R2_SECRET_KEY");
    env_fill(c->region, sizeof(c->region), "SNIPER_S3_REGION", NULL);
    if (!c->region[0])
        snprintf(c->region, sizeof(c->region), "auto");
    return s3_config_complete(c) ? 0 : -ENOENT;
}

int s3_uri_encode(const char *s, bool keep_slash, char *out, size_t out_len) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
                     *p == '~' || (keep_slash && *p == '/');
        if (o + (plain ? 1 : 3) >= out_len)
            return -ENAMETOOLONG;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (out_len == 0)
        return -ENAMETOOLONG;
    out[o] = '\0';
    return 0;
}

/* ---- XML ------------------------------------------------------------------------------------- */

static pthread_once_t s3_once = PTHREAD_ONCE_INIT;

static void s3_global_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
}

static xmlDocPtr xml_read(const char *xml, size_t n) {
    pthread_once(&s3_once, s3_global_init);
    if (n > S3_MAX_BODY)
        return NULL;
    return xmlReadMemory(xml, (int)n, NULL, NULL,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

/* The text of node's first child element called name, or NULL (free with xmlFree). */
static xmlChar *xml_child_text(xmlNodePtr node, const char *name) {
    for (xmlNodePtr ch = node->children; ch; ch = ch->next)
        if (ch->type == XML_ELEMENT_NODE && strcmp((const char *)ch->name, name) == 0)
            return xmlNodeGetContent(ch);
    return NULL;
}

static void copy_text(char *dst, size_t len, xmlChar *t) {
    snprintf(dst, len, "%s", t ? (const char *)t : "");
    xmlFree(t);
}

void s3_parse_error(const char *xml, size_t n, struct s3_status *st) {
    st->code[0] = st->message[0] = '\0';
    xmlDocPtr d = n ? xml_read(xml, n) : NULL;
    xmlNodePtr root = d ? xmlDocGetRootElement(d) : NULL;
    if (root && strcmp((const char *)root->name, "Error") == 0) {
        copy_text(st->code, sizeof(st->code), xml_child_text(root, "Code"));
        copy_text(st->message, sizeof(st->message), xml_child_text(root, "Message"));
    }
    xmlFreeDoc(d);
}

static int list_add(struct s3_list *out, xmlNodePtr contents) {
    xmlChar *key = xml_child_text(contents, "Key"), *size = xml_child_text(contents, "Size");
    int rc = key && size ? 0 : -EIO;
    struct s3_object *grown = rc ? NULL : realloc(out->objects, (out->n + 1) * sizeof(*grown));
    if (!rc && grown) {
        struct s3_object *o = &grown[out->n];
        char *end = NULL;
        out->objects = grown;
        o->bytes = strtoull((const char *)size, &end, 10);
        o->key = strdup((const char *)key);
        copy_text(o->last_modified, sizeof(o->last_modified),
                  xml_child_text(contents, "LastModified"));
        rc = o->key ? 0 : -ENOMEM;
        out->n += rc == 0;
    } else if (!rc) {
        rc = -ENOMEM;
    }
    xmlFree(key);
    xmlFree(size);
    return rc;
}

int s3_parse_list(const char *xml, size_t n, struct s3_list *out, bool *truncated) {
    xmlDocPtr d = xml_read(xml, n);
    xmlNodePtr root = d ? xmlDocGetRootElement(d) : NULL;
    int rc = root && strcmp((const char *)root->name, "ListBucketResult") == 0 ? 0 : -EIO;
    *truncated = false;
    for (xmlNodePtr ch = root && rc == 0 ? root->children : NULL; ch && rc == 0; ch = ch->next) {
        if (ch->type != XML_ELEMENT_NODE)
            continue;
        if (strcmp((const char *)ch->name, "Contents") == 0) {
            rc = list_add(out, ch);
        } else if (strcmp((const char *)ch->name, "IsTruncated") == 0) {
            xmlChar *t = xmlNodeGetContent(ch);
            *truncated = t && strcmp((const char *)t, "true") == 0;
            xmlFree(t);
        }
    }
    xmlFreeDoc(d);
    return rc;
}

void s3_list_release(struct s3_list *l) {
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->objects[i].key);
    free(l->objects);
    l->objects = NULL;
    l->n = 0;
}

/* ---- requests -------------------------------------------------------------------------------- */

struct s3_req {
    const char *method;     /* PUT GET DELETE HEAD */
    const char *key;        /* for messages; NULL: the bucket */
    char url[2048];
    int in_fd;              /* PUT: the body, in_bytes long; -1 otherwise */
    uint64_t in_bytes;
    int out_fd;             /* GET: where a 2xx body goes; -1: into body */
    char *body;             /* error bodies, listings */
    size_t n_body;
    int local_errno;        /* a failed read or write of a local file */
    curl_off_t content_length; /* of the answer, -1 when unknown */
    struct s3_progress *p;
    CURL *h;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx) {
    struct s3_req *rq = ctx;
    size_t n = size * nmemb;
    long code = 0;
    curl_easy_getinfo(rq->h, CURLINFO_RESPONSE_CODE, &code);
    if (rq->out_fd >= 0 && code >= 200 && code < 300) {
        for (size_t done = 0; done < n;) {
            ssize_t w = write(rq->out_fd, data + done, n - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                rq->local_errno = w < 0 ? errno : EIO;
                return 0; /* aborts the transfer */
            }
            done += (size_t)w;
        }
        return n;
    }
    if (rq->n_body + n > S3_MAX_BODY)
        return 0;
    char *grown = realloc(rq->body, rq->n_body + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + rq->n_body, data, n);
    rq->body = grown;
    rq->n_body += n;
    rq->body[rq->n_body] = '\0';
    return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ctx) {
    struct s3_req *rq = ctx;
    for (;;) {
        ssize_t r = read(rq->in_fd, buf, size * nmemb);
        if (r >= 0)
            return (size_t)r;
        if (errno != EINTR) {
            rq->local_errno = errno;
            return CURL_READFUNC_ABORT;
        }
    }
}

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    struct s3_req *rq = ctx;
    if (!rq->p)
        return 0;
    bool up = rq->in_fd >= 0;
    curl_off_t total = up ? ultotal : dltotal, now = up ? ulnow : dlnow;
    if (total > 0)
        atomic_store(&rq->p->total_bytes, (uint64_t)total);
    atomic_store(&rq->p->done_bytes, (uint64_t)now);
    return atomic_load(&rq->p->cancel) ? 1 : 0;
}

static int s3_url(const struct s3_config *c, const char *key, const char *query, char *out,
                  size_t len) {
    char b[768], k[1536];
    size_t n_ep = strlen(c->endpoint);
    while (n_ep > 0 && c->endpoint[n_ep - 1] == '/')
        n_ep--;
    if (s3_uri_encode(c->bucket, false, b, sizeof(b)) < 0 ||
        s3_uri_encode(key ? key : "", true, k, sizeof(k)) < 0)
        return -ENAMETOOLONG;
    int r = snprintf(out, len, "%.*s/%s%s%s%s%s", (int)n_ep, c->endpoint, b, key ? "/" : "", k,
                     query ? "?" : "", query ? query : "");
    return r < 0 || (size_t)r >= len ? -ENAMETOOLONG : 0;
}

static int status_errno(long http) {
    if (http == 404)
        return -ENOENT;
    if (http == 401 || http == 403)
        return -EACCES;
    return -EIO;
}

/* Runs rq; returns 0 for a 2xx answer, else an error with st and err filled. */
static int s3_perform(const struct s3_config *c, struct s3_req *rq, struct s3_status *st,
                      char *err, size_t err_len) {
    char sigv4[128];
    struct curl_slist *hdr = NULL;
    int rc = -ENOMEM;
    pthread_once(&s3_once, s3_global_init);
    memset(st, 0, sizeof(*st));
    snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", c->region[0] ? c->region : "auto");
    rq->h = curl_easy_init();
    /* the body is not hashed into the signature (it is streamed): S3's documented alternative */
    /* (no "Expect:" override: curl 7.88 would sign the header it then leaves out) */
    hdr = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!rq->h || !hdr) {
        err_set(err, err_len, "s3: out of memory");
        goto out;
    }
    CURL *h = rq->h;
    curl_easy_setopt(h, CURLOPT_URL, rq->url);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, c->access_key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, c->secret_key);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, rq);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, rq);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L); /* stalled for a minute: give up */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    if (rq->in_fd >= 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, rq);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->in_bytes);
    } else if (strcmp(rq->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(rq->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    }
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st->http_status);
    curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &rq->content_length);
    const char *what = rq->key ? rq->key : c->bucket;
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        err_set(err, err_len, "s3: %s \"%s\": cancelled", rq->method, what);
        rc = -ECANCELED;
    } else if (rq->local_errno) {
        rc = -rq->local_errno;
        err_set(err, err_len, "s3: %s \"%s\": local file: %s", rq->method, what, strerror(-rc));
    } else if (cc != CURLE_OK && (st->http_status < 300 || cc != CURLE_WRITE_ERROR)) {
        err_set(err, err_len, "s3: %s \"%s\" at %s: %s", rq->method, what, c->endpoint,
                curl_easy_strerror(cc));
        rc = -EIO;
    } else if (st->http_status < 200 || st->http_status >= 300) {
        s3_parse_error(rq->body, rq->n_body, st);
        err_set(err, err_len, "s3: %s \"%s\": HTTP %ld%s%s%s%s", rq->method, what,
                st->http_status, st->code[0] ? " " : "", st->code, st->message[0] ? ": " : "",
                st->message);
        rc = status_errno(st->http_status);
    } else {
        rc = 0;
    }
out:
    curl_slist_free_all(hdr);
    curl_easy_cleanup(rq->h);
    rq->h = NULL;
    return rc;
}

/* A request of method on key (NULL: the bucket itself) with query (or NULL), its URL built.
 * Returns 0, or -ENAMETOOLONG with err set. */
static int req_init(struct s3_req *rq, const struct s3_config *c, const char *method,
                    const char *key, const char *query, struct s3_progress *p, char *err,
                    size_t err_len) {
    memset(rq, 0, sizeof(*rq));
    rq->method = method;
    rq->key = key;
    rq->in_fd = rq->out_fd = -1;
    rq->p = p;
    if (s3_url(c, key, query, rq->url, sizeof(rq->url)) < 0) {
        err_set(err, err_len, "s3: URL too long for \"%s\"%s%s", key ? key : c->bucket,
                query ? "?" : "", query ? query : "");
        return -ENAMETOOLONG;
    }
    return 0;
}

/* s3_perform for key with no body either way. */
static int s3_simple(const struct s3_config *c, const char *method, const char *key,
                     struct s3_req *rq, struct s3_status *st, char *err, size_t err_len) {
    struct s3_status dummy;
    int rc = req_init(rq, c, method, key, NULL, NULL, err, err_len);
    if (rc < 0)
        return rc;
    rc = s3_perform(c, rq, st ? st : &dummy, err, err_len);
    free(rq->body);
    rq->body = NULL;
    return rc;
}

int s3_put_file(const struct s3_config *c, const char *key, const char *path,
                struct s3_progress *p, struct s3_status *st, char *err, size_t err_len) {
    struct s3_status dummy;
    struct s3_req rq;
    struct stat sb;
    int rc = req_init(&rq, c, "PUT", key, NULL, p, err, err_len);
    if (rc < 0)
        return rc;
    rq.in_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (rq.in_fd < 0 || fstat(rq.in_fd, &sb) < 0) {
        rc = -errno;
        err_set(err, err_len, "s3: cannot read \"%s\": %s", path, strerror(-rc));
        if (rq.in_fd >= 0)
            close(rq.in_fd);
        return rc;
    }
    rq.in_bytes = (uint64_t)sb.st_size;
    if (p) {
        atomic_store(&p->total_bytes, rq.in_bytes);
        atomic_store(&p->done_bytes, 0);
    }
    rc = s3_perform(c, &rq, st ? st : &dummy, err, err_len);
    close(rq.in_fd);
    free(rq.body);
    return rc;
}

int s3_get_file(const struct s3_config *c, const char *key, const char *path,
                struct s3_progress *p, struct s3_status *st, char *err, size_t err_len) {
    struct s3_status dummy;
    struct s3_req rq;
    int rc = req_init(&rq, c, "GET", key, NULL, p, err, err_len);
    if (rc < 0)
        return rc;
    rq.out_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (rq.out_fd < 0) {
        rc = -errno;
        err_set(err, err_len, "s3: cannot create \"%s\": %s", path, strerror(-rc));
        return rc;
    }
    if (p) {
        atomic_store(&p->total_bytes, 0);
        atomic_store(&p->done_bytes, 0);
    }
    rc = s3_perform(c, &rq, st ? st : &dummy, err, err_len);
    if (rc == 0 && fsync(rq.out_fd) < 0) {
        rc = -errno;
        err_set(err, err_len, "s3: writing \"%s\": %s", path, strerror(-rc));
    }
    if (close(rq.out_fd) < 0 && rc == 0) {
        rc = -errno;
        err_set(err, err_len, "s3: writing \"%s\": %s", path, strerror(-rc));
    }
    if (rc < 0)
        unlink(path);
    free(rq.body);
    return rc;
}

int s3_delete(const struct s3_config *c, const char *key, struct s3_status *st, char *err,
              size_t err_len) {
    struct s3_req rq;
    return s3_simple(c, "DELETE", key, &rq, st, err, err_len);
}

int s3_head(const struct s3_config *c, const char *key, uint64_t *bytes, struct s3_status *st,
            char *err, size_t err_len) {
    struct s3_req rq;
    int rc = s3_simple(c, "HEAD", key, &rq, st, err, err_len);
    if (rc == 0)
        *bytes = rq.content_length > 0 ? (uint64_t)rq.content_length : 0;
    return rc;
}

/* Pages are chained with start-after (the last key seen) rather than continuation tokens: keys
 * of contexts hold only URL-safe characters, while tokens may hold '+', '=' and '/', which
 * libcurl versions canonicalize differently when signing the query. */
int s3_list(const struct s3_config *c, const char *prefix, struct s3_list *out,
            struct s3_status *st, char *err, size_t err_len) {
    char after[1536] = "", prefix_enc[1024], query[2700];
    struct s3_status dummy;
    bool truncated = false;
    int rc = 0;
    memset(out, 0, sizeof(*out));
    if (s3_uri_encode(prefix ? prefix : "", true, prefix_enc, sizeof(prefix_enc)) < 0) {
        err_set(err, err_len, "s3: prefix too long");
        return -ENAMETOOLONG;
    }
    do {
        struct s3_req rq;
        size_t n_before = out->n;
        /* parameters in SigV4's canonical (sorted) order */
        char page[32] = "";
        if (c->list_page_keys > 0)
            snprintf(page, sizeof(page), "&max-keys=%d", c->list_page_keys);
        snprintf(query, sizeof(query), "list-type=2%s&prefix=%s%s%s", page, prefix_enc,
                 after[0] ? "&start-after=" : "", after);
        if ((rc = req_init(&rq, c, "GET", NULL, query, NULL, err, err_len)) < 0)
            break;
        rc = s3_perform(c, &rq, st ? st : &dummy, err, err_len);
        if (rc == 0 && s3_parse_list(rq.body, rq.n_body, out, &truncated) < 0) {
            err_set(err, err_len, "s3: listing \"%s\": malformed answer", c->bucket);
            rc = -EIO;
        }
        free(rq.body);
        if (rc == 0 && truncated && (out->n == n_before ||
            s3_uri_encode(out->objects[out->n - 1].key, true, after, sizeof(after)) < 0)) {
            err_set(err, err_len, "s3: listing \"%s\": cannot page on", c->bucket);
            rc = -EIO;
        }
    } while (rc == 0 && truncated);
    if (rc < 0)
        s3_list_release(out);
    return rc;
}
