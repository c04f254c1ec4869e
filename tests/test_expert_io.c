/* test_expert_io.c - expert_io's borrowed contention monitor: expert_io_free, which waits for the
 * reads still in flight, no longer asks it (the daemon frees the engine, and with it its pool's
 * monitor, before the expert cache). The reads' bytes and order are test_experts' (through the
 * cache). */
#include <stdio.h>
#include <stdlib.h>

#include "contention.h"
#include "expert_io.h"
#include "harness.h"

#define N_READS 8

/* A file of n_blocks aligned blocks under the test's temporary directory; path gets its name.
 * Returns 0 or -1 (a failure recorded). */
static int block_file(char *path, size_t path_len, int n_blocks) {
    size_t n = (size_t)n_blocks * EXPERT_IO_ALIGN;
    unsigned char *p = malloc(n);
    if (!p) {
        CHECK_MSG(false, "out of memory for %zu bytes", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + i / EXPERT_IO_ALIGN);
    snprintf(path, path_len, "%s/blocks", test_tmpdir());
    int rc = test_write_file(path, p, n);
    free(p);
    CHECK_MSG(rc == 0, "cannot write \"%s\"", path);
    return rc;
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
    struct expert_io *io = expert_io_new(path, kind, 2, N_READS, cm, err, sizeof(err));
    CHECK_MSG(io != NULL, "%s", err);
    int submitted = 0;
    for (int i = 0; io && i < N_READS; i++)
        submitted += expert_io_submit(io, (uint64_t)i, buf + (size_t)i * EXPERT_IO_ALIGN,
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

static const struct test_case cases[] = {
    {"free_after_monitor_threads", test_free_after_monitor_threads},
    {"free_after_monitor_uring", test_free_after_monitor_uring},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
