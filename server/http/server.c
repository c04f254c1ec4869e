/* server.c - libmicrohttpd with a thread per connection (a slow client costs a parked thread and no
 * CPU; docs/api.md has the measurements against an epoll thread pool).
 * Invariants: a connection's body buffer never grows past max_body (beyond it the request is
 * answered 413 and the rest of the body is discarded); a request must arrive whole within
 * read_timeout_s of its connection (or of the previous reply on a kept-alive one), else the
 * sweeper shuts the socket; a socket is shut only while its connection is registered, and
 * libmicrohttpd closes it only after unregistering it, so a reused descriptor is never touched;
 * an http_stream is freed when both its writer and its reply have let go; the gone callback runs
 * at most once. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "clock.h"
#include "err.h"

/* A connection the sweeper watches while its request is being read. */
struct conn_watch {
    int fd;
    double deadline;   /* clock_now_s() by which the request must be in */
    bool reading;      /* between the connection's start (or its last reply) and a whole request */
    struct conn_watch *prev, *next;
};

struct http_server {
    struct MHD_Daemon *d;
    struct http_server_config cfg;
    http_handler fn;
    void *ctx;
    int port;
    atomic_int active;        /* requests from their handler's call to their reply's end */
    /* the read deadline */
    pthread_mutex_t mu;       /* guards the list, every watch's fields and stop */
    pthread_cond_t cv;        /* a connection started reading, or stop */
    struct conn_watch *conns; /* registered connections */
    bool stop;
    bool sweeping;            /* the sweeper thread was started */
    pthread_t sweeper;
};

/* ---- streams --------------------------------------------------------------------------------- */

struct http_stream {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf;
    size_t len, cap, off; /* unread bytes are buf[off..len) */
    bool closed;          /* the writer is done */
    bool gone;            /* the reply was destroyed (client gone, or the end was sent) */
    int refs;
    void (*gone_fn)(void *ctx);
    void *gone_ctx;
};

struct http_stream *http_stream_new(void) {
    struct http_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->refs = 2; /* the writer's and the reply's */
    return st;
}

static void stream_unref(struct http_stream *st) {
    pthread_mutex_lock(&st->mu);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (!last)
        return;
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st->buf);
    free(st);
}

void http_stream_on_gone(struct http_stream *st, void (*fn)(void *ctx), void *ctx) {
    st->gone_fn = fn;
    st->gone_ctx = ctx;
}

int http_stream_write(struct http_stream *st, const char *data, size_t len) {
    pthread_mutex_lock(&st->mu);
    int rc = 0;
    if (st->gone) {
        rc = -EPIPE;
    } else {
        if (st->off > 0 && st->off == st->len)
            st->off = st->len = 0;
        if (st->len + len > st->cap) {
            size_t cap = st->cap ? st->cap : 4096;
            while (cap < st->len + len)
                cap *= 2;
            char *nb = realloc(st->buf, cap);
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            st->buf = nb;
            st->cap = cap;
        }
        memcpy(st->buf + st->len, data, len);
        st->len += len;
        pthread_cond_signal(&st->cv);
    }
out:
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void http_stream_close(struct http_stream *st) {
    pthread_mutex_lock(&st->mu);
    st->closed = true;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    stream_unref(st);
}

void http_stream_discard(struct http_stream *st) {
    stream_unref(st);
    stream_unref(st);
}

/* MHD pulls the reply: blocks (this connection's own thread) until bytes or the end arrive. */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    struct http_stream *st = cls;
    pthread_mutex_lock(&st->mu);
    while (st->off == st->len && !st->closed)
        pthread_cond_wait(&st->cv, &st->mu);
    ssize_t n = MHD_CONTENT_READER_END_OF_STREAM;
    if (st->off < st->len) {
        size_t take = st->len - st->off < max ? st->len - st->off : max;
        memcpy(out, st->buf + st->off, take);
        st->off += take;
        n = (ssize_t)take;
    }
    pthread_mutex_unlock(&st->mu);
    return n;
}

/* The reply is destroyed: sent to the end, or the client went away. */
static void stream_reply_free(void *cls) {
    struct http_stream *st = cls;
    pthread_mutex_lock(&st->mu);
    st->gone = true;
    void (*fn)(void *) = st->gone_fn;
    void *ctx = st->gone_ctx;
    st->gone_fn = NULL;
    pthread_mutex_unlock(&st->mu);
    if (fn)
        fn(ctx);
    stream_unref(st);
}

/* ---- the read deadline ------------------------------------------------------------------------
 * libmicrohttpd's own timeout counts inactivity, so a client sending a byte every few seconds
 * would keep a connection forever; the sweeper instead shuts a connection whose request is not
 * in by its deadline. It runs only while some connection is reading. */

static void *sweeper_main(void *arg) {
    struct http_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        double now = clock_now_s(), next = 0.0;
        for (struct conn_watch *w = s->conns; w; w = w->next) {
            if (!w->reading)
                continue;
            if (w->deadline <= now) {
                shutdown(w->fd, SHUT_RDWR); /* its thread sees the end and closes it */
                w->reading = false;
            } else if (next == 0.0 || w->deadline < next) {
                next = w->deadline;
            }
        }
        if (next == 0.0) {
            pthread_cond_wait(&s->cv, &s->mu);
        } else {
            struct timespec until = clock_deadline_ms((long)((next - now) * 1e3) + 1);
            pthread_cond_timedwait(&s->cv, &s->mu, &until);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Starts (reading) or ends (the request is in) a connection's read deadline. */
static void watch_set_reading(struct http_server *s, struct MHD_Connection *c, bool reading) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn_watch *w = ci ? ci->socket_context : NULL;
    if (!w)
        return;
    pthread_mutex_lock(&s->mu);
    w->reading = reading;
    w->deadline = clock_now_s() + s->cfg.read_timeout_s;
    if (reading)
        pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* A connection starts (registered, reading) or closes (unregistered, before its socket is). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    struct http_server *s = cls;
    struct conn_watch *w = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(w = calloc(1, sizeof(*w))))
            return; /* unwatched: libmicrohttpd's inactivity timeout still applies */
        w->fd = ci->connect_fd;
        w->reading = true;
        w->deadline = clock_now_s() + s->cfg.read_timeout_s;
        pthread_mutex_lock(&s->mu);
        w->next = s->conns;
        if (s->conns)
            s->conns->prev = w;
        s->conns = w;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        *socket_context = w;
    } else if (w) {
        pthread_mutex_lock(&s->mu);
        if (w->prev)
            w->prev->next = w->next;
        else
            s->conns = w->next;
        if (w->next)
            w->next->prev = w->prev;
        pthread_mutex_unlock(&s->mu);
        free(w);
        *socket_context = NULL;
    }
}

/* ---- requests -------------------------------------------------------------------------------- */

struct conn_state {
    char *body;
    size_t len, cap;
    bool too_big;
    bool handled;   /* the handler ran: counted in active until the reply ends */
};

/* The headers every response of this server carries (cfg.headers). */
static void add_server_headers(const struct http_server *s, struct MHD_Response *r) {
    for (size_t i = 0; s->cfg.headers && s->cfg.headers[i] && s->cfg.headers[i + 1]; i += 2)
        MHD_add_response_header(r, s->cfg.headers[i], s->cfg.headers[i + 1]);
}

static enum MHD_Result queue_body(const struct http_server *s, struct MHD_Connection *c,
                                  int status, const char *type, char *body, size_t len,
                                  const char *const *headers) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, body ? MHD_RESPMEM_MUST_FREE
                                                        : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    add_server_headers(s, r);
    for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2)
        MHD_add_response_header(r, headers[i], headers[i + 1]);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result queue_too_big(const struct http_server *s, struct MHD_Connection *c,
                                     size_t max) {
    char *body = NULL;
    int n = asprintf(&body, "{\"error\":{\"message\":\"request body larger than %zu bytes\","
                            "\"type\":\"invalid_request_error\",\"param\":null,"
                            "\"code\":\"request_too_large\"}}", max);
    return queue_body(s, c, 413, "application/json", n < 0 ? NULL : body, n < 0 ? 0 : (size_t)n,
                      NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_len, void **con_cls) {
    (void)version;
    struct http_server *s = cls;
    struct conn_state *cs = *con_cls;
    if (!cs) { /* headers are in: refuse a declared oversized body before reading it */
        cs = calloc(1, sizeof(*cs));
        if (!cs)
            return MHD_NO;
        *con_cls = cs;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body)
            cs->too_big = true;
        return MHD_YES;
    }
    if (*data_len > 0) {
        if (!cs->too_big && cs->len + *data_len > s->cfg.max_body)
            cs->too_big = true;
        if (!cs->too_big) {
            if (cs->len + *data_len + 1 > cs->cap) {
                size_t cap = cs->cap ? cs->cap : 4096;
                while (cap < cs->len + *data_len + 1)
                    cap *= 2;
                char *nb = realloc(cs->body, cap);
                if (!nb)
                    return MHD_NO;
                cs->body = nb;
                cs->cap = cap;
            }
            memcpy(cs->body + cs->len, data, *data_len);
            cs->len += *data_len;
        }
        *data_len = 0;
        return MHD_YES;
    }
    watch_set_reading(s, c, false); /* the request is in: no deadline while it is answered */
    if (cs->too_big)
        return queue_too_big(s, c, s->cfg.max_body);
    char *q = strchr(url, '?');
    char path[1024];
    snprintf(path, sizeof(path), "%.*s", q ? (int)(q - url) : (int)strlen(url), url);
    struct http_request rq = {
        .method = method,
        .path = path,
        .body = cs->body ? cs->body : "",
        .body_len = cs->len,
        .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
        .api_key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"),
        .fd = -1,
    };
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        rq.fd = ci->connect_fd;
    if (cs->body)
        cs->body[cs->len] = '\0';
    struct http_response out = {.status = 500, .content_type = "application/json"};
    cs->handled = true;
    atomic_fetch_add(&s->active, 1);
    s->fn(s->ctx, &rq, &out);
    if (!out.stream)
        return queue_body(s, c, out.status, out.content_type, out.body,
                          out.body ? (out.body_len ? out.body_len : strlen(out.body)) : 0,
                          out.headers);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read,
                                                               out.stream, stream_reply_free);
    if (!r) {
        stream_reply_free(out.stream);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, out.content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    add_server_headers(s, r);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)out.status, r);
    MHD_destroy_response(r);
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)toe;
    struct http_server *s = cls;
    watch_set_reading(s, c, true); /* a kept-alive connection: the next request's deadline */
    struct conn_state *cs = *con_cls;
    if (cs) {
        if (cs->handled)
            atomic_fetch_sub(&s->active, 1);
        free(cs->body);
        free(cs);
        *con_cls = NULL;
    }
}

bool http_peer_gone(const struct http_request *rq) {
    if (rq->fd < 0)
        return false;
    struct pollfd p = {.fd = rq->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
        return true;
    char c;
    /* readable: more bytes (a pipelined request: still there) or the end of the stream (gone) */
    return (p.revents & POLLIN) && recv(rq->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- libmicrohttpd's messages ---------------------------------------------------------------- */

/* What a message is: a client that went away or sent a bad request is not the daemon's error. */
static const char *mhd_log_level(const char *fmt) {
    static const char *const client[] = {"closed by remote", "disconnected", "Failed to send",
                                         "closed when reading", "without `Host'",
                                         "Error processing request", "Content-Length",
                                         "incomplete upload", "Not enough memory in pool"};
    for (size_t i = 0; i < sizeof(client) / sizeof(client[0]); i++)
        if (strstr(fmt, client[i]))
            return "info";
    return strstr(fmt, "limit") ? "warning" : "error";
}

/* libmicrohttpd's logger: one line with the daemon's prefix and a level, at most one line per
 * message kind every 10 s (a flood of refused connections must not flood the log). */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct { const char *fmt; double last; unsigned n_quiet; } seen[16];
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '.' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    if (msg[0] >= 'A' && msg[0] <= 'Z' && !(msg[1] >= 'A' && msg[1] <= 'Z'))
        msg[0] = (char)(msg[0] - 'A' + 'a');
    double now = clock_now_s();
    unsigned quiet = 0;
    pthread_mutex_lock(&mu);
    size_t k = 0;
    while (k < 16 && seen[k].fmt && seen[k].fmt != fmt)
        k++;
    if (k == 16)
        k = (size_t)((uintptr_t)fmt / 8 % 16); /* table full: share a slot */
    bool print = seen[k].fmt != fmt || now - seen[k].last >= 10.0;
    if (print) {
        quiet = seen[k].fmt == fmt ? seen[k].n_quiet : 0;
        seen[k].fmt = fmt;
        seen[k].last = now;
        seen[k].n_quiet = 0;
    } else {
        seen[k].n_quiet++;
    }
    pthread_mutex_unlock(&mu);
    if (!print)
        return;
    if (quiet)
        fprintf(stderr, "sniperd: http: %s: %s (%u more since the last such line)\n",
                mhd_log_level(fmt), msg, quiet);
    else
        fprintf(stderr, "sniperd: http: %s: %s\n", mhd_log_level(fmt), msg);
}

/* ---- the daemon ------------------------------------------------------------------------------ */

/* Raises the soft limit on open files to what max_connections needs, as far as the hard one allows
 * (a thread per connection and its socket; the model, the expert reads and the web of libraries
 * take a few dozen more). */
static void raise_fd_limit(unsigned max_connections) {
    struct rlimit rl;
    rlim_t want = (rlim_t)max_connections + 128;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

struct http_server *http_server_start(const struct http_server_config *cfg, http_handler fn,
                                      void *ctx, char *err, size_t err_len) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    /* poll, not select: descriptors past FD_SETSIZE work */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, cfg->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)cfg->port);
    } else if (inet_pton(AF_INET6, cfg->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)cfg->port);
        flags |= MHD_USE_IPv6;
    } else {
        err_set(err, err_len, "http: \"%s\" is not an IPv4 or IPv6 address", cfg->host);
        return NULL;
    }
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s) {
        err_set(err, err_len, "http: out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    if (s->cfg.max_connections <= 0)
        s->cfg.max_connections = HTTP_MAX_CONNECTIONS;
    if (s->cfg.max_per_ip < 0)
        s->cfg.max_per_ip = HTTP_MAX_PER_IP;
    if (s->cfg.read_timeout_s <= 0)
        s->cfg.read_timeout_s = HTTP_READ_TIMEOUT_S;
    s->fn = fn;
    s->ctx = ctx;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->sweeper, NULL, sweeper_main, s) != 0) {
        err_set(err, err_len, "http: cannot start a thread");
        goto err_free;
    }
    s->sweeping = true;
    raise_fd_limit((unsigned)s->cfg.max_connections);
    s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_per_ip,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_WRITE_TIMEOUT_S,
                            MHD_OPTION_END);
    if (!s->d) {
        err_set(err, err_len, "http: cannot listen on %s port %d (in use, or not an address of "
                "this machine)", cfg->host, cfg->port);
        goto err_free;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : cfg->port;
    return s;
err_free:
    http_server_stop(s);
    return NULL;
}

void http_server_stop(struct http_server *s) {
    if (!s)
        return;
    if (s->sweeping) { /* first: past this, nothing but libmicrohttpd touches a socket */
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->sweeper, NULL);
    }
    if (s->d)
        MHD_stop_daemon(s->d);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int http_server_port(const struct http_server *s) {
    return s->port;
}

int http_server_active(struct http_server *s) {
    return atomic_load(&s->active);
}
