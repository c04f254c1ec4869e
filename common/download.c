/* download.c - see download.h. Invariants: bytes reach the part file only from a 200 or 206 body
 * (never an error page); a 200 while the part held bytes truncates it first (the server ignored
 * the range); a failed write stops the transfer at once, keeping what was written. */
#include "download.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

#define DL_BAR_WIDTH 24
#define DL_REDRAW_S 0.25    /* a terminal's bar at most 4 times a second */
#define DL_SHA_CHUNK (1u << 20)

/* One transfer's state, shared by libcurl's callbacks. */
struct dl {
    const struct download_opts *o;
    CURL *h;
    int fd;
    int write_errno;  /* the write that failed, 0 if none */
    uint64_t have;    /* bytes in the part before this transfer's body */
    uint64_t got;     /* bytes written by this transfer */
    uint64_t size;    /* the whole file */
    double t0, drawn_s;
    int tenth;        /* plain lines: the last 10% printed */
};

/* ---- progress ------------------------------------------------------------------------------- */

/* n bytes as "1.23 GB" (decimal units, as download sizes are quoted). */
static void fmt_bytes(uint64_t n, char *out, size_t len) {
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1000 && u < 4) {
        v /= 1000;
        u++;
    }
    snprintf(out, len, u ? "%.2f %s" : "%.0f %s", v, unit[u]);
}

/* Draws the bar (terminal) or a line per 10% (otherwise): done of total, rate, time left. */
static void dl_draw(struct dl *d, bool final) {
    FILE *f = d->o->progress;
    const uint64_t done = d->have + d->got;
    const double now = clock_now_s(), dt = now - d->t0;
    const int pct = d->size ? (int)(done * 100 / d->size) : 100;
    if (!f || (!final && d->o->tty && now - d->drawn_s < DL_REDRAW_S) ||
        (!d->o->tty && pct / 10 <= d->tenth && (!final || pct == 100)))
        return; /* plain lines: one per 10% step, the 100% one once */
    d->drawn_s = now;
    d->tenth = pct / 10;
    char a[32], b[32], r[32], left[32] = "";
    const double rate = dt > 0 ? (double)d->got / dt : 0;
    fmt_bytes(done, a, sizeof(a));
    fmt_bytes(d->size, b, sizeof(b));
    fmt_bytes((uint64_t)rate, r, sizeof(r));
    if (rate > 0 && done < d->size) {
        uint64_t s = (uint64_t)((double)(d->size - done) / rate);
        snprintf(left, sizeof(left), ", %" PRIu64 ":%02" PRIu64 " left", s / 60, s % 60);
    }
    if (d->o->tty) {
        char bar[DL_BAR_WIDTH + 1];
        int fill = pct * DL_BAR_WIDTH / 100;
        for (int i = 0; i < DL_BAR_WIDTH; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[DL_BAR_WIDTH] = '\0';
        fprintf(f, "\r\033[K%s [%s] %3d%% %s / %s, %s/s%s", d->o->label, bar, pct, a, b, r, left);
        if (final)
            fputc('\n', f);
    } else {
        fprintf(f, "%s: %d%% (%s of %s, %s/s%s)\n", d->o->label, pct, a, b, r, left);
    }
    fflush(f);
}

static int dl_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct dl *d = ctx;
    if (d->o->cancel && *d->o->cancel)
        return 1; /* aborts: CURLE_ABORTED_BY_CALLBACK */
    dl_draw(d, false);
    return 0;
}

/* ---- the transfer ---------------------------------------------------------------------------- */

/* Appends a 200/206 body to the part; any other status's body (an error page) is dropped. */
static size_t dl_write(char *p, size_t sz, size_t n, void *ctx) {
    struct dl *d = ctx;
    long status = 0;
    curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206)
        return n;
    if (status == 200 && d->have > 0 && d->got == 0) { /* the range was ignored: start over */
        if (ftruncate(d->fd, 0) < 0) {
            d->write_errno = errno;
            return 0;
        }
        d->have = 0;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = write(d->fd, p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            d->write_errno = w < 0 ? errno : EIO;
            d->got += off;
            return 0; /* stops the transfer: CURLE_WRITE_ERROR */
        }
        off += (size_t)w;
    }
    (void)sz; /* always 1 */
    d->got += n;
    return n;
}

/* The message for a failed write: disk full says how much more the file needs. */
static int dl_write_failed(const struct dl *d, const char *part, char *err, size_t err_len) {
    if (d->write_errno != ENOSPC && d->write_errno != EDQUOT) {
        err_set(err, err_len, "cannot write \"%s\": %s", part, strerror(d->write_errno));
        return -d->write_errno;
    }
    struct statvfs vfs;
    const uint64_t need = d->size - (d->have + d->got);
    uint64_t avail = statvfs(part, &vfs) == 0 ? (uint64_t)vfs.f_bavail * vfs.f_frsize : 0;
    char a[32], b[32];
    fmt_bytes(need, a, sizeof(a));
    fmt_bytes(avail, b, sizeof(b));
    err_set(err, err_len, "disk full writing \"%s\": %" PRIu64 " bytes (%s) more are needed, %s "
            "free; the partial file is kept: free some space and pull again to resume",
            part, need, a, b);
    return -ENOSPC;
}

/* Sets up h for url from byte d->have on. Returns the header list to free, or NULL. */
static struct curl_slist *dl_setup(struct dl *d, const char *url, char *range, size_t range_len,
                                   char *auth, size_t auth_len) {
    struct curl_slist *hdr = NULL;
    curl_easy_setopt(d->h, CURLOPT_URL, url);
    curl_easy_setopt(d->h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(d->h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(d->h, CURLOPT_USERAGENT, "sniper");
    curl_easy_setopt(d->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(d->h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(d->h, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled transfer ends after 60 s */
    curl_easy_setopt(d->h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(d->h, CURLOPT_WRITEFUNCTION, dl_write);
    curl_easy_setopt(d->h, CURLOPT_WRITEDATA, d);
    curl_easy_setopt(d->h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(d->h, CURLOPT_XFERINFOFUNCTION, dl_progress);
    curl_easy_setopt(d->h, CURLOPT_XFERINFODATA, d);
    if (d->have > 0) {
        snprintf(range, range_len, "%" PRIu64 "-", d->have);
        curl_easy_setopt(d->h, CURLOPT_RANGE, range);
    }
    if (d->o->token && d->o->token[0]) {
        snprintf(auth, auth_len, "Authorization: Bearer %s", d->o->token);
        hdr = curl_slist_append(hdr, auth);
        curl_easy_setopt(d->h, CURLOPT_HTTPHEADER, hdr);
    }
    return hdr;
}

/* Maps a finished transfer to download_resume's result. */
static int dl_result(struct dl *d, CURLcode c, const char *url, const char *part, long status,
                     char *err, size_t err_len) {
    if (d->write_errno)
        return dl_write_failed(d, part, err, err_len);
    if (c == CURLE_ABORTED_BY_CALLBACK) {
        err_set(err, err_len, "download of \"%s\" cancelled; pull again to resume", d->o->label);
        return -ECANCELED;
    }
    if (c == CURLE_COULDNT_RESOLVE_HOST || c == CURLE_COULDNT_CONNECT ||
        c == CURLE_COULDNT_RESOLVE_PROXY || (c == CURLE_OPERATION_TIMEDOUT && status == 0)) {
        err_set(err, err_len, "cannot reach \"%s\": %s", url, curl_easy_strerror(c));
        return -EHOSTUNREACH;
    }
    if (c != CURLE_OK) {
        err_set(err, err_len, "download of \"%s\" stopped at %" PRIu64 " of %" PRIu64 " bytes "
                "(%s); pull again to resume", d->o->label, d->have + d->got, d->size,
                curl_easy_strerror(c));
        return -EIO;
    }
    if (status != 200 && status != 206) {
        err_set(err, err_len, "%s", "");
        return -EPROTO;
    }
    if (d->have + d->got != d->size) {
        err_set(err, err_len, "\"%s\" came with %" PRIu64 " bytes, the hub lists %" PRIu64,
                d->o->label, d->have + d->got, d->size);
        return -EIO;
    }
    return 0;
}

int download_resume(const struct download_opts *o, const char *url, const char *part,
                    uint64_t size, long *status, char *err, size_t err_len) {
    struct dl d = {.o = o, .size = size, .fd = -1, .tenth = -1};
    struct stat st;
    char range[48], auth[600];
    int rc = 0;
    *status = 0;
    d.fd = open(part, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (d.fd < 0 || fstat(d.fd, &st) < 0) {
        rc = -errno;
        err_set(err, err_len, "cannot open \"%s\": %s", part, strerror(errno));
        goto out;
    }
    d.have = (uint64_t)st.st_size;
    if (d.have > size && ftruncate(d.fd, 0) == 0) /* not this file's part: start over */
        d.have = 0;
    if (d.have == size)
        goto out; /* complete already (a pull stopped before its check) */
    d.h = curl_easy_init();
    if (!d.h) {
        rc = -ENOMEM;
        err_set(err, err_len, "out of memory");
        goto out;
    }
    struct curl_slist *hdr = dl_setup(&d, url, range, sizeof(range), auth, sizeof(auth));
    d.t0 = clock_now_s();
    CURLcode c = curl_easy_perform(d.h);
    curl_easy_getinfo(d.h, CURLINFO_RESPONSE_CODE, status);
    if (c == CURLE_OK && (*status == 200 || *status == 206))
        dl_draw(&d, true);
    else if (o->progress && o->tty && d.got > 0)
        fputc('\n', o->progress); /* leave the bar where it stopped */
    rc = dl_result(&d, c, url, part, *status, err, err_len);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(d.h);
    if (rc == 0 && fsync(d.fd) < 0) {
        rc = -errno;
        err_set(err, err_len, "cannot write \"%s\": %s", part, strerror(errno));
    }
out:
    if (d.fd >= 0)
        close(d.fd);
    return rc;
}

int download_sha256_file(const char *path, char hex[65]) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char *buf = malloc(DL_SHA_CHUNK), md[EVP_MAX_MD_SIZE];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n_md = 0;
    int rc = fd < 0 ? -errno : !buf || !ctx ? -ENOMEM : 0;
    if (rc == 0 && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        rc = -EIO;
    while (rc == 0) {
        ssize_t r = read(fd, buf, DL_SHA_CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -errno;
        else if (r == 0)
            break;
        else if (EVP_DigestUpdate(ctx, buf, (size_t)r) != 1)
            rc = -EIO;
    }
    if (rc == 0 && EVP_DigestFinal_ex(ctx, md, &n_md) != 1)
        rc = -EIO;
    for (unsigned i = 0; rc == 0 && i < n_md && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    EVP_MD_CTX_free(ctx);
    free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}
