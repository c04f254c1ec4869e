/* server.h - the HTTP plumbing (libmicrohttpd, a thread per connection): requests with their whole
 * body handed to one handler, replies as a whole body or as a stream another thread writes into.
 * The routes and the API live in api.c; this file knows nothing of them.
 *
 *     struct http_server *s = http_server_start(&cfg, handler, ctx, err, sizeof(err));
 *     ... handler(ctx, &request, &response) runs on the connection's thread; it may block ...
 *     http_server_stop(s); */
#ifndef SNIPER_HTTP_SERVER_H
#define SNIPER_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

struct http_server_config {
    const char *host;      /* address to bind, e.g. "127.0.0.1", "0.0.0.0", "::1" */
    int port;              /* 0: any free port (see http_server_port) */
    size_t max_body;       /* larger request bodies get 413 before they are read */
    int max_connections;
};

struct http_request {
    const char *method;
    const char *path;         /* without the query string */
    const char *body;         /* NUL-terminated, body_len bytes */
    size_t body_len;
    const char *authorization;/* the Authorization header, or NULL */
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

/* Starts serving. Returns NULL with a message in err (bad address, port in use ...). */
struct http_server *http_server_start(const struct http_server_config *cfg, http_handler fn,
                                      void *ctx, char *err, size_t err_len);
void http_server_stop(struct http_server *s);
int http_server_port(const struct http_server *s);

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
