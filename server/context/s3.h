/* s3.h - a small client for S3-compatible object stores (Cloudflare R2, AWS S3, MinIO, moto) on
 * libcurl: requests signed with SigV4 (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3"), path-style URLs
 * (endpoint/bucket/key), objects streamed from and to files.
 *
 *     struct s3_config c;
 *     if (s3_config_from_env(&c) < 0) ... not configured
 *     struct s3_progress p = {0};        // another thread may read p.done_bytes / p.total_bytes
 *     struct s3_status st;
 *     if (s3_put_file(&c, "kv-cache/review", "/ctx/review", &p, &st, err, sizeof(err)) < 0)
 *         ... st.http_status, st.code ("SignatureDoesNotMatch"), err names all of it
 *
 * Functions are thread-safe (one curl handle per call) and never exit; a transfer can be
 * cancelled from another thread through its progress struct. */
#ifndef SNIPER_S3_H
#define SNIPER_S3_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3_CONTEXT_PREFIX "kv-cache/" /* where contexts live in the bucket */

struct s3_config {
    char endpoint[512];   /* "https://ACCOUNT.r2.cloudflarestorage.com", "http://127.0.0.1:5000" */
    char bucket[256];
    char access_key[256];
    char secret_key[256];
    char region[64];      /* "auto" (R2) unless set */
    int list_page_keys;   /* max-keys per ListObjectsV2 page; 0: the store's default (1000) */
};

/* Counters of a running transfer, written by the transfer's thread, readable from any other. */
struct s3_progress {
    _Atomic uint64_t done_bytes;
    _Atomic uint64_t total_bytes; /* 0 until known */
    atomic_bool cancel;           /* set to abort the transfer (-ECANCELED) */
};

/* What the store answered. */
struct s3_status {
    long http_status;  /* 0 when no HTTP answer came (connection refused, timeout ...) */
    char code[64];     /* the error body's <Code>, "" when none */
    char message[256]; /* its <Message>, "" when none */
};

/* One object of a listing. */
struct s3_object {
    char *key;
    uint64_t bytes;
    char last_modified[40]; /* as the store wrote it: "2026-11-22T15:31:48.000Z" */
};

struct s3_list {
    struct s3_object *objects; /* [n] */
    size_t n;
};

/* Fills c from the environment: SNIPER_S3_ENDPOINT, SNIPER_S3_BUCKET, SNIPER_S3_ACCESS_KEY,
 * SNIPER_S3_SECRET_KEY, SNIPER_S3_REGION (default "auto"), each falling back to the seed's
 * R2_ENDPOINT, R2_BUCKET, R2_ACCESS_KEY, R2_SECRET_KEY. Fields already set in c are kept (so a
 * config file's values, put there first, win). Returns 0 when c is complete, -ENOENT otherwise. */
int s3_config_from_env(struct s3_config *c);

/* True when endpoint, bucket and both keys are set. */
bool s3_config_complete(const struct s3_config *c);

/* Errors of the functions below: -ENOENT (404), -EACCES (401, 403), -ECANCELED, -EIO (any other
 * HTTP error or a transport failure), -errno for local files, -ENOMEM. st (may be NULL) gets the
 * store's answer, err one line: method, key, HTTP status, <Code> and <Message>. */

/* Uploads the file at path as key, streamed. p may be NULL. */
int s3_put_file(const struct s3_config *c, const char *key, const char *path,
                struct s3_progress *p, struct s3_status *st, char *err, size_t err_len);

/* Downloads key into a new file at path (created exclusively; removed again on any failure), so
 * path should be a temp name the caller verifies and renames. p may be NULL. */
int s3_get_file(const struct s3_config *c, const char *key, const char *path,
                struct s3_progress *p, struct s3_status *st, char *err, size_t err_len);

/* Deletes key (deleting an absent key succeeds, as S3 does). */
int s3_delete(const struct s3_config *c, const char *key, struct s3_status *st, char *err,
              size_t err_len);

/* The size of key in *bytes; -ENOENT when absent. */
int s3_head(const struct s3_config *c, const char *key, uint64_t *bytes, struct s3_status *st,
            char *err, size_t err_len);

/* Every object whose key starts with prefix (all pages of ListObjectsV2), in out (free with
 * s3_list_release). */
int s3_list(const struct s3_config *c, const char *prefix, struct s3_list *out,
            struct s3_status *st, char *err, size_t err_len);

void s3_list_release(struct s3_list *l);

/* Parsers of the store's XML (exposed for tests). s3_parse_list appends a ListObjectsV2 page's
 * objects to out and says whether more pages follow (<IsTruncated>); returns 0 or -EIO for a
 * malformed document. s3_parse_error fills st's code and message from an <Error> body (left empty
 * when absent). */
int s3_parse_list(const char *xml, size_t n, struct s3_list *out, bool *truncated);
void s3_parse_error(const char *xml, size_t n, struct s3_status *st);

/* Percent-encodes s as SigV4 wants (unreserved characters kept; '/' kept when keep_slash).
 * Returns 0 or -ENAMETOOLONG when out is too small. */
int s3_uri_encode(const char *s, bool keep_slash, char *out, size_t out_len);

#endif
