/* bench_disk.c - the device's direct-read bandwidth for one file, as the Expert Sniper reads it.
 *
 *     build/bench-disk FILE [--block 2592K] [--depth N]... [--secs S]
 *
 * For each queue depth (default 1, 8 and 32) N threads, each with its own 4 KiB-aligned buffer,
 * pread random 4 KiB-aligned blocks of the file with O_DIRECT for S seconds (default 2), then the
 * same depth is kept in flight through io_uring (server/experts/expert_io, sniperd's own read
 * path), and one line per depth and way is printed on stdout:
 *     disk: depth=8 block=2654208 MBps=1480.3 reads=1178 secs=2.09 lat_ms=13.5 mode=direct
 *     disk: depth=8 block=2654208 MBps=1602.0 reads=1254 secs=2.08 mode=io_uring
 * then `disk: best_MBps=X` (MB = 10^6 bytes, as sniperd's read_MBps). The default block, 2592 KiB,
 * is one Qwen3-30B-A3B Q4_K expert's gate + up + down. When the file system refuses O_DIRECT the
 * reads fall back to buffered ones (mode=buffered, with a warning); the file's pages are dropped
 * with posix_fadvise(DONTNEED) before each depth, so the figures still mostly come from the device.
 * Exit status: 0, or 1 with a message on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "expert_io.h"
#include "os.h"
#include "units.h"

#define DISK_ALIGN 4096u /* direct I/O alignment of offsets, lengths and buffers */
#define MAX_DEPTHS 16
#define MAX_THREADS 256

struct disk_opts {
    const char *path;
    uint64_t block_bytes;    /* bytes per read, a multiple of DISK_ALIGN */
    int depths[MAX_DEPTHS];  /* threads (reads in flight) per measurement */
    int n_depths;
    double secs;             /* seconds per depth */
};

/* Shared by the threads of one depth. */
struct disk_run {
    int fd;
    uint64_t block_bytes;
    uint64_t n_offs;         /* aligned offsets a block can start at: [0, n_offs) * DISK_ALIGN */
    atomic_bool stop;
    atomic_int err;          /* first errno seen, 0 when none */
};

struct disk_worker {
    struct disk_run *run;
    uint64_t seed;
    uint64_t n_reads;
    double read_s;           /* seconds spent inside pread */
    pthread_t tid;
};

static uint64_t xorshift64(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void disk_run_fail(struct disk_run *r, int e) {
    int expected = 0;
    atomic_compare_exchange_strong(&r->err, &expected, e);
}

/* Reads whole blocks at random aligned offsets until the run stops or a read fails. */
static void *disk_worker_main(void *arg) {
    struct disk_worker *w = arg;
    struct disk_run *r = w->run;
    void *buf = NULL;
    int rc = posix_memalign(&buf, DISK_ALIGN, r->block_bytes);
    if (rc != 0) {
        disk_run_fail(r, rc);
        return NULL;
    }
    while (!atomic_load(&r->stop) && atomic_load(&r->err) == 0) {
        uint64_t off = (xorshift64(&w->seed) % r->n_offs) * DISK_ALIGN;
        double t = clock_now_s();
        ssize_t got = pread(r->fd, buf, r->block_bytes, (off_t)off);
        w->read_s += clock_now_s() - t;
        if (got != (ssize_t)r->block_bytes) {
            disk_run_fail(r, got < 0 ? errno : EIO); /* short read: the file shrank */
            break;
        }
        w->n_reads++;
    }
    free(buf);
    return NULL;
}

static void sleep_s(double secs) {
    struct timespec t = {.tv_sec = (time_t)secs,
                         .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* Measures one depth and prints its line. Returns MB/s (>= 0), or a negative errno. Thread start-up
 * (tens of microseconds each) is inside the timed span: negligible against seconds of reads. */
static double disk_measure(int fd, uint64_t file_bytes, const struct disk_opts *o, int depth,
                           bool direct) {
    struct disk_run r = {.fd = fd, .block_bytes = o->block_bytes,
                         .n_offs = (file_bytes - o->block_bytes) / DISK_ALIGN + 1};
    atomic_init(&r.stop, false);
    atomic_init(&r.err, 0);
    struct disk_worker *w = calloc((size_t)depth, sizeof(*w));
    if (!w)
        return -ENOMEM;
    if (!direct)
        (void)os_io_drop_cache(fd); /* macOS cannot: its F_NOCACHE descriptor reads past the cache */
    double t0 = clock_now_s();
    int n_started = 0;
    for (; n_started < depth; n_started++) {
        w[n_started].run = &r;
        w[n_started].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(n_started + 1) ^ (uint64_t)depth;
        if (pthread_create(&w[n_started].tid, NULL, disk_worker_main, &w[n_started]) != 0) {
            disk_run_fail(&r, EAGAIN);
            break;
        }
    }
    if (n_started == depth)
        sleep_s(o->secs);
    atomic_store(&r.stop, true);
    for (int i = 0; i < n_started; i++)
        pthread_join(w[i].tid, NULL);
    double secs = clock_now_s() - t0, read_s = 0, mbps;
    uint64_t n_reads = 0;
    for (int i = 0; i < n_started; i++) {
        n_reads += w[i].n_reads;
        read_s += w[i].read_s;
    }
    int e = atomic_load(&r.err);
    if (e) {
        fprintf(stderr, "%s: depth %d on \"%s\" failed: %s\n", __func__, depth, o->path,
                strerror(e));
        mbps = -e;
    } else {
        mbps = (double)n_reads * (double)o->block_bytes / secs / 1e6;
        printf("disk: depth=%d block=%llu MBps=%.1f reads=%llu secs=%.2f lat_ms=%.1f mode=%s\n",
               depth, (unsigned long long)o->block_bytes, mbps, (unsigned long long)n_reads, secs,
               n_reads ? 1e3 * read_s / (double)n_reads : 0.0, direct ? "direct" : "buffered");
        fflush(stdout);
    }
    free(w);
    return mbps;
}

/* One depth through expert_io's io_uring: depth reads of random blocks kept in flight for o->secs.
 * Returns MB/s, or a negative errno (0 when io_uring is not available: nothing to measure). */
static double disk_measure_uring(uint64_t file_bytes, const struct disk_opts *o, int depth) {
    char err[256];
    struct expert_io *io =
        expert_io_new(&o->path, 1, EXPERT_IO_URING, depth, depth, NULL, err, sizeof(err));
    if (!io) {
        fprintf(stderr, "bench-disk: %s\n", err);
        return -EIO;
    }
    double mbps = 0;
    uint8_t *buf = NULL;
    if (strcmp(expert_io_backend(io), "io_uring") != 0) {
        expert_io_free(io); /* the kernel refused io_uring: threads were measured above */
        return 0;
    }
    if (posix_memalign((void **)&buf, DISK_ALIGN, (size_t)depth * o->block_bytes) != 0) {
        expert_io_free(io);
        return -ENOMEM;
    }
    const uint64_t n_offs = (file_bytes - o->block_bytes) / DISK_ALIGN + 1;
    uint64_t seed = 0x2545F4914F6CDD1DULL ^ (uint64_t)depth, n_reads = 0, tag;
    int rc = 0, got;
    double t0 = clock_now_s(), secs = 0;
    for (int i = 0; i < depth && rc == 0; i++)
        rc = expert_io_submit(io, (uint64_t)i, buf + (size_t)i * o->block_bytes, 0,
                              xorshift64(&seed) % n_offs * DISK_ALIGN, o->block_bytes,
                              o->block_bytes, true);
    while (rc == 0 && expert_io_reap(io, true, &tag, &got) == 1) {
        if (got < 0) {
            rc = got;
            break;
        }
        n_reads++;
        secs = clock_now_s() - t0;
        if (secs < o->secs)
            rc = expert_io_submit(io, tag, buf + tag * o->block_bytes, 0,
                                  xorshift64(&seed) % n_offs * DISK_ALIGN, o->block_bytes,
                                  o->block_bytes, true);
    }
    expert_io_free(io); /* waits for what is still in flight */
    free(buf);
    if (rc < 0) {
        fprintf(stderr, "bench-disk: io_uring depth %d on \"%s\" failed: %s\n", depth, o->path,
                strerror(-rc));
        return rc;
    }
    mbps = secs > 0 ? (double)n_reads * (double)o->block_bytes / secs / 1e6 : 0;
    printf("disk: depth=%d block=%llu MBps=%.1f reads=%llu secs=%.2f mode=io_uring\n", depth,
           (unsigned long long)o->block_bytes, mbps, (unsigned long long)n_reads, secs);
    fflush(stdout);
    return mbps;
}

/* Opens path for direct reads, probing one aligned read; when the file system refuses O_DIRECT
 * (EINVAL) it opens it buffered and clears *direct. Returns the fd, or -1 with a message. */
static int disk_open(const char *path, bool *direct) {
    bool aligned = false;
    int fd = os_io_open_uncached(path, &aligned);
    if (fd >= 0 && !aligned) { /* no O_DIRECT on this OS: os.h's bypass, or the cache dropped */
        *direct = false;
        return fd;
    }
    if (fd < 0)
        errno = -fd;
    if (fd >= 0) {
        void *probe = NULL;
        if (posix_memalign(&probe, DISK_ALIGN, DISK_ALIGN) != 0) {
            fprintf(stderr, "%s: out of memory\n", __func__);
            close(fd);
            return -1;
        }
        ssize_t got = pread(fd, probe, DISK_ALIGN, 0);
        int e = errno;
        free(probe);
        if (got >= 0 || e != EINVAL) {
            *direct = true;
            return fd;
        }
        close(fd);
        errno = EINVAL;
    }
    if (errno != EINVAL) {
        fprintf(stderr, "%s: cannot open \"%s\": %s\n", __func__, path, strerror(errno));
        return -1;
    }
    fprintf(stderr, "%s: warning: the file system refuses O_DIRECT for \"%s\": buffered reads, "
            "the file's cached pages dropped before each depth\n", __func__, path);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fprintf(stderr, "%s: cannot open \"%s\": %s\n", __func__, path, strerror(errno));
    *direct = false;
    return fd;
}

/* ------------------------------------------------------------------------------------------------
 * Command line */

static void usage(FILE *f) {
    fprintf(f, "usage: bench-disk FILE [--block SIZE] [--depth N]... [--secs S]\n"
               "  random O_DIRECT preads of SIZE bytes (default 2592K; K/M/G suffixes, rounded up\n"
               "  to 4 KiB) from N threads (default depths 1 8 32), S seconds per depth (default 2)\n");
}

static int parse_args(int argc, char **argv, struct disk_opts *o) {
    *o = (struct disk_opts){.block_bytes = 2592u << 10, .secs = 2.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--block") && v) {
            if (units_parse_bytes(v, &o->block_bytes) < 0) {
                fprintf(stderr, "bench-disk: --block wants a size such as 2592K or 2M, got \"%s\"\n",
                        v);
                return -EINVAL;
            }
            i++;
        } else if (!strcmp(a, "--depth") && v) {
            long d = strtol(v, &end, 10);
            if (*end || end == v || d < 1 || d > MAX_THREADS || o->n_depths == MAX_DEPTHS) {
                fprintf(stderr, "bench-disk: --depth wants an integer in [1, %d] (at most %d "
                        "times), got \"%s\"\n", MAX_THREADS, MAX_DEPTHS, v);
                return -EINVAL;
            }
            o->depths[o->n_depths++] = (int)d;
            i++;
        } else if (!strcmp(a, "--secs") && v) {
            o->secs = strtod(v, &end);
            if (*end || end == v || !(o->secs > 0 && o->secs <= 600)) {
                fprintf(stderr, "bench-disk: --secs wants seconds in (0, 600], got \"%s\"\n", v);
                return -EINVAL;
            }
            i++;
        } else if (a[0] != '-' && !o->path) {
            o->path = a;
        } else {
            fprintf(stderr, "bench-disk: unknown option or missing value: \"%s\"\n", a);
            return -EINVAL;
        }
    }
    if (!o->path) {
        usage(stderr);
        return -EINVAL;
    }
    if (o->n_depths == 0) {
        static const int defaults[] = {1, 8, 32};
        o->n_depths = 3;
        memcpy(o->depths, defaults, sizeof(defaults));
    }
    o->block_bytes = (o->block_bytes + DISK_ALIGN - 1) / DISK_ALIGN * DISK_ALIGN;
    return 0;
}

int main(int argc, char **argv) {
    struct disk_opts o;
    if (parse_args(argc, argv, &o) < 0)
        return 1;
    bool direct = false;
    int fd = disk_open(o.path, &direct);
    if (fd < 0)
        return 1;
    int rc = 1;
    off_t end = lseek(fd, 0, SEEK_END); /* the size of a regular file and of a block device */
    if (end < 0) {
        fprintf(stderr, "bench-disk: cannot size \"%s\": %s\n", o.path, strerror(errno));
        goto out;
    }
    if ((uint64_t)end < o.block_bytes) {
        fprintf(stderr, "bench-disk: \"%s\" holds %lld bytes, less than one block of %llu "
                "(pass a smaller --block)\n", o.path, (long long)end,
                (unsigned long long)o.block_bytes);
        goto out;
    }
    double best = 0;
    for (int i = 0; i < o.n_depths; i++) {
        double mbps = disk_measure(fd, (uint64_t)end, &o, o.depths[i], direct);
        if (mbps < 0)
            goto out;
        if (mbps > best)
            best = mbps;
        if (direct && (mbps = disk_measure_uring((uint64_t)end, &o, o.depths[i])) < 0)
            goto out;
        if (mbps > best)
            best = mbps;
    }
    printf("disk: best_MBps=%.1f\n", best);
    rc = 0;
out:
    close(fd);
    return rc;
}
