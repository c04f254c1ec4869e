/* http_client.c - libcurl behind http_request(); see http_client.h. Bodies are capped (64 MiB)
 * because a server is untrusted. */
#include "clock.h"
#include "http_client.h"
#include "err.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HTTP_MAX_BODY_BYTES ((size_t)64 << 20)

struct transfer {
    CURL *curl;
    struct http_response *resp;
    size_t cap;
    http_chunk_fn on_chunk;
    void *ctx;
    volatile sig_atomic_t *cancel;
    bool chunk_stopped;   /* on_chunk asked to stop */
    bool too_big;
    double idle_limit_s;  /* streamed: the longest silence; 0: none */
    double last_data_s;   /* monotonic time of the last bytes (or the start) */
    bool idle_timed_out;
};

int http_global_init(void) {
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

void http_global_cleanup(void) {
    curl_global_cleanup();
}

/* Appends to the collected body, keeping it NUL-terminated. Returns false when over the cap. */
static bool transfer_collect(struct transfer *t, const char *data, size_t n) {
    struct http_response *r = t->resp;
    if (n > HTTP_MAX_BODY_BYTES - r->body_bytes) {
        t->too_big = true;
        return false;
    }
    if (r->body_bytes + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < r->body_bytes + n + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b)
            return false;
        r->body = b;
        t->cap = cap;
    }
    memcpy(r->body + r->body_bytes, data, n);
    r->body_bytes += n;
    r->body[r->body_bytes] = '\0';
    return true;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp) {
    struct transfer *t = userp;
    size_t n = size * nmemb;
    long status = 0;
    t->last_data_s = clock_now_s();
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    if (t->on_chunk && status >= 200 && status < 300) {
        if (t->on_chunk(t->ctx, data, n) != 0) {
            t->chunk_stopped = true;
            return 0;
        }
        return n;
    }
    return transfer_collect(t, data, n) ? n : 0;
}

static int on_progress(void *userp, curl_off_t dlt, curl_off_t dln, curl_off_t ult,
                       curl_off_t uln) {
    (void)dlt, (void)dln, (void)ult, (void)uln;
    struct transfer *t = userp;
    if (t->idle_limit_s > 0 && clock_now_s() - t->last_data_s > t->idle_limit_s) {
        t->idle_timed_out = true;
        return 1;
    }
    return t->cancel && *t->cancel ? 1 : 0;
}

/* Maps a failed transfer to an errno-style code and a message naming the url. */
static int transfer_error(struct transfer *t, CURLcode cc, const char *url, const char *detail,
                          char *err, size_t err_len) {
    if (t->idle_timed_out) {
        err_set(err, err_len, "request to %s timed out: nothing received for %.1f s", url,
                t->idle_limit_s);
        return -ETIMEDOUT;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK || t->chunk_stopped) {
        err_set(err, err_len, "cancelled");
        return -ECANCELED;
    }
    if (t->too_big) {
        err_set(err, err_len, "response from %s is larger than %zu bytes", url,
                HTTP_MAX_BODY_BYTES);
        return -EIO;
    }
    const char *why = detail[0] ? detail : curl_easy_strerror(cc);
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        err_set(err, err_len, "cannot reach %s: %s (is the server running?)", url, why);
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        err_set(err, err_len, "request to %s timed out: %s", url, why);
        return -ETIMEDOUT;
    case CURLE_OUT_OF_MEMORY:
        err_set(err, err_len, "out of memory talking to %s", url);
        return -ENOMEM;
    default:
        err_set(err, err_len, "request to %s failed: %s", url, why);
        return -EIO;
    }
}

int http_request(const struct http_client *hc, const char *method, const char *url,
                 const char *body, http_chunk_fn on_chunk, void *ctx,
                 struct http_response *resp, char *err, size_t err_len) {
    memset(resp, 0, sizeof(*resp));
    struct transfer t = { .resp = resp, .on_chunk = on_chunk, .ctx = ctx, .cancel = hc->cancel };
    struct curl_slist *headers = NULL;
    char *auth = NULL;
    char detail[CURL_ERROR_SIZE] = "";
    int rc = -ENOMEM;
    if (!(t.curl = curl_easy_init()))
        goto out;
    headers = curl_slist_append(headers, "Accept: application/json, text/event-stream");
    if (body)
        headers = curl_slist_append(headers, "Content-Type: application/json");
    if (hc->api_key && *hc->api_key) {
        if (asprintf(&auth, "Authorization: Bearer %s", hc->api_key) < 0) {
            auth = NULL;
            goto out;
        }
        headers = curl_slist_append(headers, auth);
    }
    CURL *c = t.curl;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sniper/0.1");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    /* a stream may rightly last longer than any total limit: limit its silence instead */
    if (hc->timeout_s > 0 && on_chunk)
        t.idle_limit_s = hc->timeout_s;
    else if (hc->timeout_s > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(hc->timeout_s * 1000));
    t.last_data_s = clock_now_s();
    if (hc->connect_timeout_s > 0)
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(hc->connect_timeout_s * 1000));
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    CURLcode cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    rc = cc == CURLE_OK ? 0 : transfer_error(&t, cc, url, detail, err, err_len);
    if (rc == 0 && !resp->body && !transfer_collect(&t, "", 0))
        rc = -ENOMEM;
out:
    if (rc == -ENOMEM && !t.curl)
        err_set(err, err_len, "out of memory");
    curl_slist_free_all(headers);
    free(auth);
    curl_easy_cleanup(t.curl);
    return rc;
}

char *http_escape(const char *s) {
    char *e = curl_easy_escape(NULL, s, 0);
    char *copy = e ? strdup(e) : NULL;
    curl_free(e);
    return copy;
}

void http_response_release(struct http_response *r) {
    if (!r)
        return;
    free(r->body);
    memset(r, 0, sizeof(*r));
}
