/* test_expert_io.c - expert_io's borrowed contention monitor: expert_io_free, which waits for the
 * reads still in flight, no longer asks it (the daemon frees the engine, and with it its pool's
 * monitor, before the expert cache); and the reads of several files (a split model's shards) each
 * from its own file. The reads' bytes and order are otherwise test_experts' (through the cache). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contention.h"
#include "expert_io.h"
#include "harness.h"

#define N_READS 8

/* Byte i of the test file salted with salt. */
static unsigned char block_byte(size_t i, unsigned salt) {
    return (unsigned char)(i * 7 + i / EXPERT_IO_ALIGN + salt);
}

/* A file of n_blocks aligned blocks (bytes block_byte(i, salt)) named name under the test's
 * temporary directory; path gets its path. Returns 0 or -1 (a failure recorded). */
static int block_file_named(char *path, size_t path_len, const char *name, unsigned salt,
                            int n_blocks) {
    size_t n = (size_t)n_blocks * EXPERT_IO_ALIGN;
    unsigned char *p = malloc(n);
    if (!p) {
        CHECK_MSG(false, "out of memory for %zu bytes", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = block_byte(i, salt);
    snprintf(path, path_len, "%s/%s", test_tmpdir(), name);
    int rc = test_write_file(path, p, n);
    free(p);
    CHECK_MSG(rc == 0, "cannot write \"%s\"", path);
    return rc;
}

static int block_file(char *path, size_t path_len, int n_blocks) {
    return block_file_named(path, path_len, "blocks", 0, n_blocks);
}

/* Reads still unreaped when the monitor's owner is gone (an engine freed before its cache):
 * expert_io_free waits for them without asking the freed monitor. The pread threads' reap starts
 * its poll (spin_start, which reads the monitor) on every wait, so a drain that still asked the
 * borrowed monitor is a use after free that ASan reports here (make check); io_uring's reap polls
 * only while no completion is ready. */
static void free_after_monitor(enum expert_io_kind kind) {
    char path[512], err[256];
    struct contention *cm = NULL;
    unsigned char *buf = NULL;
    if (block_file(path, sizeof(path), N_READS) < 0)
        return;
    cm = malloc(sizeof(*cm));
    buf = aligned_alloc(EXPERT_IO_ALIGN, (size_t)N_READS * EXPERT_IO_ALIGN);
    CHECK(cm && buf);
    if (!cm || !buf)
        goto out;
    contention_init(cm);
    const char *paths[] = {path};
    struct expert_io *io = expert_io_new(paths, 1, kind, 2, N_READS, cm, err, sizeof(err));
    CHECK_MSG(io != NULL, "%s", err);
    int submitted = 0;
    for (int i = 0; io && i < N_READS; i++)
        submitted += expert_io_submit(io, (uint64_t)i, buf + (size_t)i * EXPERT_IO_ALIGN, 0,
                                      (uint64_t)i * EXPERT_IO_ALIGN, EXPERT_IO_ALIGN,
                                      EXPERT_IO_ALIGN, false) == 0;
    if (io) {
        CHECK_EQ_INT(submitted, N_READS);
        CHECK_EQ_INT(expert_io_outstanding(io), N_READS);
    }
    contention_release(cm);
    free(cm);
    cm = NULL;
    expert_io_free(io); /* waits for the N_READS reads, the monitor gone */
out:
    free(cm);
    free(buf);
}

static void test_free_after_monitor_threads(void) {
    free_after_monitor(EXPERT_IO_THREADS);
}

static void test_free_after_monitor_uring(void) {
    free_after_monitor(EXPERT_IO_URING);
}

/* Reads alternating between two files (a split model's shards) each bring their own file's bytes,
 * and a file index not opened is refused. */
static void shards(enum expert_io_kind kind) {
    char a[512], b[512], err[256];
    unsigned char *buf = aligned_alloc(EXPERT_IO_ALIGN, (size_t)N_READS * EXPERT_IO_ALIGN);
    CHECK(buf != NULL);
    if (!buf || block_file_named(a, sizeof(a), "shard-a", 0, N_READS) < 0 ||
        block_file_named(b, sizeof(b), "shard-b", 101, N_READS) < 0) {
        free(buf);
        return;
    }
    const char *paths[] = {a, b};
    struct expert_io *io = expert_io_new(paths, 2, kind, 2, N_READS, NULL, err, sizeof(err));
    CHECK_MSG(io != NULL, "%s", err);
    for (int i = 0; io && i < N_READS; i++)
        CHECK_EQ_INT(expert_io_submit(io, (uint64_t)i, buf + (size_t)i * EXPERT_IO_ALIGN, i % 2,
                                      (uint64_t)i * EXPERT_IO_ALIGN, EXPERT_IO_ALIGN,
                                      EXPERT_IO_ALIGN, true), 0);
    uint64_t tag;
    int rc, n = 0;
    while (io && expert_io_reap(io, true, &tag, &rc) == 1) {
        CHECK_EQ_INT(rc, 0);
        const unsigned char *got = buf + tag * EXPERT_IO_ALIGN;
        const unsigned salt = tag % 2 ? 101 : 0;
        size_t bad = 0;
        for (size_t j = 0; j < EXPERT_IO_ALIGN; j++)
            bad += got[j] != block_byte(tag * EXPERT_IO_ALIGN + j, salt);
        CHECK_MSG(bad == 0, "read %d: %zu bytes not from file %d", (int)tag, bad, (int)(tag % 2));
        n++;
    }
    CHECK_EQ_INT(n, io ? N_READS : 0);
    if (io)
        CHECK_EQ_INT(expert_io_submit(io, 0, buf, 2, 0, EXPERT_IO_ALIGN, EXPERT_IO_ALIGN, true),
                     -EINVAL);
    expert_io_free(io);
    free(buf);
}

static void test_shards_threads(void) {
    shards(EXPERT_IO_THREADS);
}

static void test_shards_uring(void) {
    shards(EXPERT_IO_URING);
}

static const struct test_case cases[] = {
    {"shards_threads", test_shards_threads},
    {"shards_uring", test_shards_uring},
    {"free_after_monitor_threads", test_free_after_monitor_threads},
    {"free_after_monitor_uring", test_free_after_monitor_uring},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
