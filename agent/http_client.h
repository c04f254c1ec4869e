/* http_client.h - the agent's only use of libcurl: one blocking request at a time, with a
 * timeout, optional bearer key, a cancel flag polled while the transfer runs (Ctrl-C), and the
 * body either collected or streamed to a callback.
 *
 *     struct http_client hc = { .api_key = key, .timeout_s = 30, .cancel = &flag };
 *     struct http_response r;
 *     if (http_request(&hc, "GET", url, NULL, NULL, NULL, &r, err, sizeof(err)) == 0) ...
 *     http_response_release(&r);
 */
#ifndef SNIPER_AGENT_HTTP_CLIENT_H
#define SNIPER_AGENT_HTTP_CLIENT_H

#include <signal.h>
#include <stddef.h>

struct http_client {
    const char *api_key;             /* borrowed; NULL: no Authorization header */
    double timeout_s;                /* whole request; when streamed, the longest silence
                                        (checked about once a second); 0: none */
    double connect_timeout_s;        /* 0: libcurl's default */
    volatile sig_atomic_t *cancel;   /* borrowed; non-zero aborts the transfer; may be NULL */
};

struct http_response {
    long status;        /* HTTP status; 0 when no response came */
    char *body;         /* NUL-terminated, owned; the whole body unless streamed with a 2xx */
    size_t body_bytes;
};

/* Called with each piece of a 2xx body when streaming. Returns 0 to go on, non-zero to abort. */
typedef int (*http_chunk_fn)(void *ctx, const char *data, size_t n);

/* Initialises libcurl once per process. Returns 0 or -EIO. */
int http_global_init(void);
void http_global_cleanup(void);

/* Runs one request. body (borrowed, may be NULL) is sent as application/json. With on_chunk, a
 * 2xx body goes to on_chunk as it arrives and resp->body stays empty; other statuses are collected
 * so the caller can read the error. Returns 0 when a response came (any status: check
 * resp->status), or -ECONNREFUSED (cannot connect), -ETIMEDOUT, -ECANCELED (the cancel flag or
 * on_chunk stopped it), -ENOMEM, -EIO (anything else); err names the URL and libcurl's reason.
 * resp is always initialised; release it with http_response_release(). */
int http_request(const struct http_client *hc, const char *method, const char *url,
                 const char *body, http_chunk_fn on_chunk, void *ctx,
                 struct http_response *resp, char *err, size_t err_len);

/* Percent-encodes s for a query string. Returns a malloc'd string (caller frees) or NULL. */
char *http_escape(const char *s);

void http_response_release(struct http_response *r);

#endif
