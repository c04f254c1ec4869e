/* test_fault.c - the error paths of loading: every tensor read and every large allocation of
 * model_load / engine_new is made to fail in turn; each failure must come back as NULL with a
 * message naming what failed, and nothing may leak (LeakSanitizer checks under `make check`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fault.h"
#include "harness.h"
#include "model.h"

static const char *fault_model(void) {
    static char path[1024];
    if (!path[0] && test_make_model(path, sizeof(path), "fault.gguf", "--preset tiny --types q8_0 --n-layer 2 --seed 3") < 0)
        path[0] = '\0';
    return path[0] ? path : NULL;
}

/* A hybrid model: DeltaNet tensors, the shared expert, the sequence's state and checkpoints. */
static const char *fault_model_hybrid(void) {
    static char path[1024];
    if (!path[0] && test_make_model(path, sizeof(path), "fault35.gguf",
                                    "--preset tiny-qwen35moe --types q8_0 --seed 3") < 0)
        path[0] = '\0';
    return path[0] ? path : NULL;
}

/* Fails the nth call at site for n = 1, 2, ... until a load of path goes through untouched. */
static void check_site_path(const char *path, enum fault_site site, const char *want) {
    if (!path)
        return;
    int n_failed = 0;
    for (long n = 1; n < 1000; n++) {
        char err[256] = "";
        fault_arm(site, n);
        struct model *m = model_load(path, err, sizeof(err));
        struct engine *e = NULL;
        if (m) {
            struct engine_params ep = engine_params_default();
            ep.n_ctx = 64;
            e = engine_new(m, &ep, err, sizeof(err));
        }
        fault_arm(site, 0);
        if (m && e) {
            engine_free(e);
            model_free(m);
            break;
        }
        n_failed++;
        CHECK_MSG(strstr(err, want) != NULL, "fault %ld: message \"%s\" lacks \"%s\"", n, err,
                  want);
        model_free(m);
    }
    fprintf(stderr, "  %d injected failures, each reported\n", n_failed);
    CHECK(n_failed >= 5);
}

static void test_read_faults(void) {
    check_site_path(fault_model(), FAULT_READ, "failed");
    check_site_path(fault_model_hybrid(), FAULT_READ, "failed");
}

static void test_alloc_faults(void) {
    check_site_path(fault_model(), FAULT_ALLOC, "out of memory");
    check_site_path(fault_model_hybrid(), FAULT_ALLOC, "out of memory");
}

static void test_fault_countdown(void) {
    fault_arm(FAULT_READ, 3);
    CHECK(!fault_hit(FAULT_READ));
    CHECK(!fault_hit(FAULT_READ));
    CHECK(fault_hit(FAULT_READ));
    CHECK(!fault_hit(FAULT_READ));
    fault_arm(FAULT_READ, 0);
    CHECK(!fault_hit(FAULT_READ));
}

static const struct test_case cases[] = {
    {"fault_countdown", test_fault_countdown},
    {"read_faults", test_read_faults},
    {"alloc_faults", test_alloc_faults},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
