/* ring_uring.c - the read queue on Linux (os.h): one io_uring (liburing). in_use counts the reads
 * queued or in flight, so that a queue never asks liburing for more sqes than depth. */
#include "os.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>

struct os_ring {
    struct io_uring ring;
    unsigned depth, in_use;
};

struct os_ring *os_ring_new(unsigned depth) {
    struct os_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->depth = depth;
    if (io_uring_queue_init(depth, &r->ring, 0) != 0) {
        free(r); /* a kernel without io_uring, or one that forbids it here */
        return NULL;
    }
    return r;
}

void os_ring_free(struct os_ring *r) {
    if (!r)
        return;
    io_uring_queue_exit(&r->ring);
    free(r);
}

int os_ring_queue_read(struct os_ring *r, int fd, void *dst, unsigned len, uint64_t off,
                       uint64_t user) {
    struct io_uring_sqe *sqe = r->in_use < r->depth ? io_uring_get_sqe(&r->ring) : NULL;
    if (!sqe)
        return -EBUSY;
    io_uring_prep_read(sqe, fd, dst, len, off);
    io_uring_sqe_set_data64(sqe, user);
    r->in_use++;
    return 0;
}

int os_ring_submit(struct os_ring *r) {
    return io_uring_submit(&r->ring);
}

int os_ring_take(struct os_ring *r, bool wait, uint64_t *user, int *res) {
    struct io_uring_cqe *cqe = NULL;
    int rc = wait ? io_uring_wait_cqe(&r->ring, &cqe) : io_uring_peek_cqe(&r->ring, &cqe);
    if (rc == -EAGAIN && !wait)
        return 0;
    if (rc < 0)
        return rc;
    if (!cqe)
        return 0;
    *user = io_uring_cqe_get_data64(cqe);
    *res = cqe->res;
    io_uring_cqe_seen(&r->ring, cqe);
    r->in_use--;
    return 1;
}
