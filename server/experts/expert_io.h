/* expert_io.h - many positional reads of a model's files (one, or a split model's shards) in flight
 * at once: submit them, then reap their completions in any order. Two backends behind one
 * interface, measured against each other in docs/benchmarks.md: io_uring (os.h's read queue; one
 * ring, no threads) and a pool of threads calling pread.
 *
 *     struct expert_io *io = expert_io_new(&path, 1, EXPERT_IO_URING, 32, 64, NULL, err,
 *                                         sizeof(err));
 *     expert_io_submit(io, tag, buf, 0, off, len, need, true); // buf, off, len aligned for direct I/O
 *     uint64_t tag; int rc;
 *     while (expert_io_reap(io, true, &tag, &rc) == 1) ...  // rc: 0 or -errno for that read
 *     expert_io_free(io);                                  // waits for reads still in flight
 *
 * Each file is opened past the page cache where the OS allows it (os_io_open_uncached: O_DIRECT on
 * Linux when the filesystem allows it, F_NOCACHE on macOS; buffered otherwise). A read
 * succeeds when its first `need` bytes arrived (a read past the end of the file comes back short);
 * fewer is -EIO: the file shrank. Not thread-safe: one thread submits and reaps. */
#ifndef SNIPER_EXPERT_IO_H
#define SNIPER_EXPERT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXPERT_IO_ALIGN 4096u /* alignment of offsets, lengths and buffers for direct reads */

enum expert_io_kind {
    EXPERT_IO_URING,   /* io_uring; falls back to threads where the OS has none or refuses it */
    EXPERT_IO_THREADS, /* depth threads blocking in pread */
};

struct expert_io;
struct contention;

/* Opens paths[0..n_files) (n_files >= 1; borrowed for the call) for reads with up to depth (>= 1)
 * of them in flight and room for max_queued
 * submitted but not yet reaped. A reap's wait tells `contention` of slow yields and waits briefly
 * while it counts as contended (spin.h): the engine's pool's (threadpool_contention), borrowed
 * until expert_io_free, which no longer uses it (an engine may be freed before its cache); NULL
 * gives the reads a monitor of their own. Returns NULL with a message in err. */
struct expert_io *expert_io_new(const char *const *paths, int n_files, enum expert_io_kind kind,
                                int depth, int max_queued, struct contention *contention,
                                char *err, size_t err_len);

/* Waits for every read in flight, then closes. Accepts NULL. */
void expert_io_free(struct expert_io *io);

/* The backend in use: "io_uring" or "threads". */
const char *expert_io_backend(const struct expert_io *io);

/* Queues a read of [off, off + len) of paths[file] into dst; tag comes back from expert_io_reap.
 * Reads not yet started go urgent ones first (someone waits for them), the others (guesses) after.
 * Returns 0, -EINVAL for a file not opened, or -EAGAIN when max_queued reads are outstanding (reap
 * first). */
int expert_io_submit(struct expert_io *io, uint64_t tag, void *dst, int file, uint64_t off,
                     uint64_t len, uint64_t need, bool urgent);

/* Takes one finished read: returns 1 and sets *tag and *rc; 0 when none is finished (wait false)
 * or none is outstanding. With wait, blocks until one finishes. */
int expert_io_reap(struct expert_io *io, bool wait, uint64_t *tag, int *rc);

/* Reads submitted and not yet reaped. */
int expert_io_outstanding(const struct expert_io *io);

/* Seconds during which at least one read was outstanding (the device was busy for us). */
double expert_io_busy_s(const struct expert_io *io);

#endif
