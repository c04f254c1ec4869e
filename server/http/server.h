/* server.h - the HTTP plumbing (libmicrohttpd, a thread per connection): requests with their whole
 * body handed to one handler, replies as a whole body or as a stream another thread writes into;
 * limits on connections (in all and per client address) and a deadline for reading a request, so
 * that slow clients cannot starve the others. The routes and the API live in api.c; this file
 * knows nothing of them.
 *
 *     struct http_server *s = http_server_start(&cfg, handler, ctx, err, sizeof(err));
 *     ... handler(ctx, &request, &response) runs on the connection's thread; it may block ...
 *     http_server_stop(s); */
#ifndef SNIPER_HTTP_SERVER_H
#define SNIPER_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_CONNECTIONS 512 /* open connections in all (more are closed at once) */
#define HTTP_MAX_PER_IP 64        /* open connections from one client address */
#define HTTP_READ_TIMEOUT_S 10    /* seconds to send a whole request (headers and body) */
#define HTTP_WRITE_TIMEOUT_S 600  /* seconds a client may leave a reply unread */

struct http_server_config {
    const char *host;      /* address to bind, e.g. "127.0.0.1", "0.0.0.0", "::1" */
    int port;              /* 0: any free port (see http_server_port) */
    size_t max_body;       /* larger request bodies get 413 before they are read */
    int max_connections;   /* <= 0: HTTP_MAX_CONNECTIONS */
    int max_per_ip;        /* 0: no limit; < 0: HTTP_MAX_PER_IP */
    double read_timeout_s; /* <= 0: HTTP_READ_TIMEOUT_S; from the connection, or from the
                            * previous reply on a kept-alive one, to the request's last byte */
    const char *const *headers; /* NULL, or {name, value, ..., NULL} added to every response
                                 * (borrowed: it must outlive the server) */
};

struct http_request {
    const char *method;
    const char *path;         /* without the query string */
    const char *body;         /* NUL-terminated, body_len bytes */
    size_t body_len;
    const char *authorization;/* the Authorization header, or NULL */
    const char *api_key;      /* the x-api-key header (Anthropic's clients), or NULL */
    int fd;                   /* the connection's socket (for http_peer_gone), or -1 */
};

/* True when the client of a request that is still being answered has closed its connection
 * (a handler that waits long polls this, so a client that gives up frees what it asked for). */
bool http_peer_gone(const struct http_request *rq);

struct http_stream;

/* What the handler answers: a body (malloc'd, taken over) or a stream (taken over). */
struct http_response {
    int status;
    const char *content_type; /* static string */
    char *body;
    size_t body_len;          /* 0: strlen(body) */
    struct http_stream *stream;
    const char *const *headers; /* NULL, or static {name, value, name, value, ..., NULL} to add */
};

typedef void (*http_handler)(void *ctx, const struct http_request *rq, struct http_response *out);

struct http_server;

/* Starts serving (libmicrohttpd's own messages go to stderr as "sniperd: http: LEVEL: ..."; a
 * client that went away is "info"). Raises the soft limit on open files to fit max_connections.
 * Returns NULL with a message in err (bad address, port in use ...). */
struct http_server *http_server_start(const struct http_server_config *cfg, http_handler fn,
                                      void *ctx, char *err, size_t err_len);
/* Stops serving: closes every connection, waits for the handlers running. Accepts NULL. */
void http_server_stop(struct http_server *s);

/* The port listened on (the one picked when cfg.port was 0). */
int http_server_port(const struct http_server *s);

/* Requests being served: from the handler's call (the whole request read) to the reply's last
 * byte or the client's going. A draining daemon waits for 0 before it stops; a request still being
 * read is not counted (stopping drops it unanswered, so a balancer retries it elsewhere). */
int http_server_active(struct http_server *s);

/* A body written by one thread while the connection's thread sends it. Two references: the
 * writer's (http_stream_new's) and the reply's (taken when the handler returns it). */
struct http_stream *http_stream_new(void);

/* fn(ctx) is called once, on the connection's thread, when the reply is destroyed: after its end
 * was sent, or early because the client went away (then writes fail with -EPIPE). Set it before
 * the handler returns the stream. */
void http_stream_on_gone(struct http_stream *st, void (*fn)(void *ctx), void *ctx);

/* Appends bytes. Returns 0, or -EPIPE when the client has gone (the bytes are dropped). */
int http_stream_write(struct http_stream *st, const char *data, size_t len);

/* The writer is done: the reply ends after what was written. Drops the writer's reference. */
void http_stream_close(struct http_stream *st);

/* Frees a stream that was never handed to a reply (both references). */
void http_stream_discard(struct http_stream *st);

#endif
