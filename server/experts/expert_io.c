/* expert_io.c - reads in flight through io_uring or a pread thread pool.
 * Invariants: a request is in exactly one of: the free list, the backlog (submitted, not yet given
 * to the kernel or a worker), in flight, the done queue (finished, not reaped); `outstanding`
 * counts all but the free ones; only the submitting thread touches the free list and the ring. */
#include "clock.h"
#include "expert_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "fault.h"
#include "os.h"
#include "spin.h"

/* Seconds a waiting reap polls for a completion before it sleeps, while nothing else wants its CPU
 * (spin.h: otherwise it sleeps at once; its slow yields go to the monitor given at creation, the
 * engine's pool's, so that the pool's waits and the reads' see one machine). A read takes up to
 * tens of ms; in a VM a vCPU that slept in the wait resumes slowly and computes slower for a while
 * (measured: the next layer's experts 3.7x slower after a 13 ms sleep; docs/benchmarks.md), and a
 * polling one also sees its completion sooner. */
#define EXPERT_IO_POLL_S 0.1

struct io_req {
    uint64_t tag;
    uint8_t *dst;
    int file;      /* index into expert_io.fds */
    uint64_t off, len, need;
    uint64_t done; /* bytes arrived so far */
    int rc;
    int32_t next_free;
};

/* A fixed-capacity FIFO of request indices. */
struct io_fifo {
    int32_t *ids;
    int cap, head, n;
};

struct expert_io {
    enum expert_io_kind kind;
    int n_files;
    int *fds;     /* [n_files] */
    bool *direct; /* [n_files] opened past the page cache (os_io_open_uncached) */
    int depth;
    struct io_req *reqs; /* [max_queued] */
    int max_queued;
    int32_t free_head;
    int outstanding;
    double busy_since, busy_s;
    struct io_fifo backlog; /* submitted, not yet started: urgent reads */
    struct io_fifo later;   /* submitted, not yet started: reads that wait for urgent ones */
    struct io_fifo done;    /* finished, not yet reaped (threads; injected faults) */
    atomic_int n_done;      /* done.n as workers last left it, for polling without the lock */
    struct contention *contention; /* the waits' monitor: borrowed, or &own */
    struct contention own;         /* the monitor of an expert_io given none */

    struct os_ring *ring; /* os.h's read queue: io_uring on Linux */
    int in_ring;
    int unsubmitted; /* reads queued since the last os_ring_submit */

    /* threads: workers take from backlog, put on done; mu guards both and stop */
    pthread_t *threads;
    int n_threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    bool stop;
};

static int fifo_init(struct io_fifo *f, int cap) {
    f->ids = malloc(sizeof(*f->ids) * (size_t)cap);
    f->cap = cap;
    f->head = f->n = 0;
    return f->ids ? 0 : -ENOMEM;
}

static void fifo_push(struct io_fifo *f, int32_t id) {
    f->ids[(f->head + f->n++) % f->cap] = id;
}

static int32_t fifo_pop(struct io_fifo *f) {
    int32_t id = f->ids[f->head];
    f->head = (f->head + 1) % f->cap;
    f->n--;
    return id;
}

/* Accounts bytes that arrived for r; returns true when r is finished (r->rc set). A direct read
 * that ends off a block boundary, or any zero-byte read, has hit the end of the file. */
static bool req_advance(struct io_req *r, long got, bool direct) {
    if (got < 0) {
        r->rc = (int)got;
        return true;
    }
    r->done += (uint64_t)got;
    if (r->done >= r->len || got == 0 || (direct && r->done % EXPERT_IO_ALIGN != 0)) {
        r->rc = r->done >= r->need ? 0 : -EIO; /* short: the file shrank */
        return true;
    }
    return false;
}

/* ---- threads --------------------------------------------------------------------------------- */

static void *io_worker(void *arg) {
    struct expert_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stop && io->backlog.n + io->later.n == 0)
            pthread_cond_wait(&io->work_cv, &io->mu);
        if (io->stop)
            break;
        int32_t id = fifo_pop(io->backlog.n > 0 ? &io->backlog : &io->later);
        pthread_mutex_unlock(&io->mu);
        struct io_req *r = &io->reqs[id];
        for (;;) {
            ssize_t got = pread(io->fds[r->file], r->dst + r->done, r->len - r->done,
                                (off_t)(r->off + r->done));
            if (got < 0 && errno == EINTR)
                continue;
            if (req_advance(r, got < 0 ? -errno : got, io->direct[r->file]))
                break;
        }
        pthread_mutex_lock(&io->mu);
        fifo_push(&io->done, id);
        atomic_store_explicit(&io->n_done, io->done.n, memory_order_release);
        pthread_cond_signal(&io->done_cv);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

static int threads_start(struct expert_io *io) {
    io->threads = calloc((size_t)io->depth, sizeof(*io->threads));
    if (!io->threads)
        return -ENOMEM;
    for (int i = 0; i < io->depth; i++) {
        if (pthread_create(&io->threads[i], NULL, io_worker, io) != 0)
            return -EAGAIN;
        io->n_threads++;
    }
    return 0;
}

/* ---- io_uring -------------------------------------------------------------------------------- */

/* Gives request id to the ring (the caller checked in_ring < depth). */
static void ring_queue(struct expert_io *io, int32_t id) {
    struct io_req *r = &io->reqs[id];
    os_ring_queue_read(io->ring, io->fds[r->file], r->dst + r->done, (unsigned)(r->len - r->done),
                       r->off + r->done, (uint64_t)id); /* cannot fail: in_ring < depth */
    io->in_ring++;
    io->unsubmitted++;
}

/* Moves backlog into the ring while it has room, urgent reads first, and tells the kernel. */
static void ring_fill(struct expert_io *io) {
    while (io->backlog.n > 0 && io->in_ring < io->depth)
        ring_queue(io, fifo_pop(&io->backlog));
    while (io->later.n > 0 && io->in_ring < io->depth)
        ring_queue(io, fifo_pop(&io->later));
    if (io->unsubmitted > 0) {
        int rc = os_ring_submit(io->ring);
        if (rc >= 0)
            io->unsubmitted = 0;
    }
}

/* Takes one completion from the ring (waiting for one when wait: polling up to EXPERT_IO_POLL_S,
 * then sleeping); returns the finished request or -1 (nothing finished yet, or a read went back to the
 * ring for its rest). */
static int32_t ring_take(struct expert_io *io, bool wait) {
    uint64_t user = 0;
    int res = 0;
    int rc = os_ring_take(io->ring, false, &user, &res);
    if (wait && rc != 1) {
        struct spin sp = spin_start(io->contention, EXPERT_IO_POLL_S);
        while (rc != 1 && spin_more(&sp))
            rc = os_ring_take(io->ring, false, &user, &res);
        if (rc != 1)
            rc = os_ring_take(io->ring, true, &user, &res);
    }
    if (rc != 1)
        return -1;
    int32_t id = (int32_t)user;
    io->in_ring--;
    struct io_req *r = &io->reqs[id];
    if (res == -EINTR || res == -EAGAIN || !req_advance(r, res, io->direct[r->file])) {
        ring_queue(io, id); /* the rest of a partial read, or a retry */
        ring_fill(io);
        return -1;
    }
    ring_fill(io);
    return id;
}

/* ---- interface ------------------------------------------------------------------------------- */

/* Opens each of paths[0..n) read-only, past the page cache where the OS and filesystem allow it
 * (os_io_open_uncached: O_DIRECT on Linux, F_NOCACHE on macOS). Returns 0 or
 * -errno with a message naming the file. */
static int io_open_files(struct expert_io *io, const char *const *paths, int n, char *err,
                         size_t err_len) {
    io->fds = malloc(sizeof(*io->fds) * (size_t)n);
    io->direct = calloc((size_t)n, sizeof(*io->direct));
    if (!io->fds || !io->direct) {
        err_set(err, err_len, "expert_io: out of memory");
        return -ENOMEM;
    }
    for (; io->n_files < n; io->n_files++) {
        const int i = io->n_files;
        io->fds[i] = os_io_open_uncached(paths[i], &io->direct[i]);
        if (io->fds[i] < 0)
            io->fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (io->fds[i] < 0) {
            int rc = -errno;
            err_set(err, err_len, "expert_io: cannot open \"%s\": %s", paths[i], strerror(errno));
            return rc;
        }
    }
    return 0;
}

struct expert_io *expert_io_new(const char *const *paths, int n_files, enum expert_io_kind kind,
                                int depth, int max_queued, struct contention *contention,
                                char *err, size_t err_len) {
    struct expert_io *io = calloc(1, sizeof(*io));
    if (!io) {
        err_set(err, err_len, "expert_io: out of memory");
        return NULL;
    }
    io->depth = depth > 0 ? depth : 1;
    io->max_queued = max_queued > io->depth ? max_queued : io->depth;
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->work_cv, NULL);
    pthread_cond_init(&io->done_cv, NULL);
    contention_init(&io->own);
    io->contention = contention ? contention : &io->own;
    if (n_files < 1) {
        err_set(err, err_len, "expert_io: no file to read");
        goto fail;
    }
    if (io_open_files(io, paths, n_files, err, err_len) < 0)
        goto fail;
    io->reqs = calloc((size_t)io->max_queued, sizeof(*io->reqs));
    if (!io->reqs || fifo_init(&io->backlog, io->max_queued) < 0 ||
        fifo_init(&io->later, io->max_queued) < 0 ||
        fifo_init(&io->done, io->max_queued) < 0) {
        err_set(err, err_len, "expert_io: out of memory");
        goto fail;
    }
    for (int i = 0; i < io->max_queued; i++)
        io->reqs[i].next_free = i + 1 < io->max_queued ? i + 1 : -1;
    io->kind = kind;
    if (kind == EXPERT_IO_URING) {
        io->ring = os_ring_new((unsigned)io->depth);
        if (!io->ring)
            io->kind = EXPERT_IO_THREADS; /* no io_uring: another OS, or forbidden here */
    }
    if (io->kind == EXPERT_IO_THREADS && threads_start(io) < 0) {
        err_set(err, err_len, "expert_io: cannot start %d reader threads", io->depth);
        goto fail;
    }
    return io;
fail:
    expert_io_free(io);
    return NULL;
}

void expert_io_free(struct expert_io *io) {
    if (!io)
        return;
    uint64_t tag;
    int rc;
    io->contention = &io->own; /* the one borrowed may be gone: its engine is freed first */
    while (io->outstanding > 0 && expert_io_reap(io, true, &tag, &rc) == 1)
        ;
    pthread_mutex_lock(&io->mu);
    io->stop = true;
    pthread_cond_broadcast(&io->work_cv);
    pthread_mutex_unlock(&io->mu);
    for (int i = 0; i < io->n_threads; i++)
        pthread_join(io->threads[i], NULL);
    os_ring_free(io->ring);
    for (int i = 0; i < io->n_files; i++)
        close(io->fds[i]);
    free(io->fds);
    free(io->direct);
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->work_cv);
    pthread_cond_destroy(&io->done_cv);
    contention_release(&io->own);
    free(io->threads);
    free(io->reqs);
    free(io->backlog.ids);
    free(io->later.ids);
    free(io->done.ids);
    free(io);
}

const char *expert_io_backend(const struct expert_io *io) {
    return io->kind == EXPERT_IO_URING ? "io_uring" : "threads";
}

int expert_io_outstanding(const struct expert_io *io) {
    return io->outstanding;
}

double expert_io_busy_s(const struct expert_io *io) {
    return io->busy_s + (io->outstanding > 0 ? clock_now_s() - io->busy_since : 0.0);
}

int expert_io_submit(struct expert_io *io, uint64_t tag, void *dst, int file, uint64_t off,
                     uint64_t len, uint64_t need, bool urgent) {
    if (file < 0 || file >= io->n_files)
        return -EINVAL;
    if (io->free_head < 0)
        return -EAGAIN;
    int32_t id = io->free_head;
    struct io_req *r = &io->reqs[id];
    io->free_head = r->next_free;
    *r = (struct io_req){.tag = tag, .dst = dst, .file = file, .off = off, .len = len,
                         .need = need};
    if (io->outstanding++ == 0)
        io->busy_since = clock_now_s();
    bool fail = fault_hit(FAULT_READ);
    if (fail)
        r->rc = -EIO;
    if (io->kind == EXPERT_IO_URING) {
        if (fail) {
            fifo_push(&io->done, id);
        } else {
            fifo_push(urgent ? &io->backlog : &io->later, id);
            ring_fill(io);
        }
        return 0;
    }
    pthread_mutex_lock(&io->mu);
    fifo_push(fail ? &io->done : urgent ? &io->backlog : &io->later, id);
    atomic_store_explicit(&io->n_done, io->done.n, memory_order_release);
    pthread_cond_signal(fail ? &io->done_cv : &io->work_cv);
    pthread_mutex_unlock(&io->mu);
    return 0;
}

int expert_io_reap(struct expert_io *io, bool wait, uint64_t *tag, int *rc) {
    int32_t id = -1;
    if (io->outstanding == 0)
        return 0;
    if (io->kind == EXPERT_IO_URING) {
        if (io->unsubmitted > 0)
            ring_fill(io); /* an earlier os_ring_submit failed: try again before waiting */
        if (io->done.n > 0)
            id = fifo_pop(&io->done);
        while (id < 0) {
            id = ring_take(io, wait && io->in_ring > 0);
            if (id < 0 && (!wait || io->in_ring == 0))
                break;
        }
    } else {
        if (wait) {
            struct spin sp = spin_start(io->contention, EXPERT_IO_POLL_S);
            while (atomic_load_explicit(&io->n_done, memory_order_acquire) == 0 && spin_more(&sp))
                ;
        }
        pthread_mutex_lock(&io->mu);
        while (wait && io->done.n == 0)
            pthread_cond_wait(&io->done_cv, &io->mu);
        if (io->done.n > 0)
            id = fifo_pop(&io->done);
        atomic_store_explicit(&io->n_done, io->done.n, memory_order_relaxed);
        pthread_mutex_unlock(&io->mu);
    }
    if (id < 0)
        return 0;
    struct io_req *r = &io->reqs[id];
    *tag = r->tag;
    *rc = r->rc;
    r->next_free = io->free_head;
    io->free_head = id;
    if (--io->outstanding == 0)
        io->busy_s += clock_now_s() - io->busy_since;
    return 1;
}
