/* harness.c - runs a test binary's cases and prints "N passed, N failed, N skipped". */
#include "harness.h"
#include "os.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

static int case_failures;
static bool case_skipped;
static const char *case_name;

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "FAIL %s: %s:%d: ", case_name ? case_name : "?", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    case_failures++;
}

void test_skip(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "SKIP %s: ", case_name ? case_name : "?");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    case_skipped = true;
}

int test_failures(void) {
    return case_failures;
}

bool test_cpu_has(const char *isa) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                os_cpu_x86_f16c();
    if (strcmp(isa, "avx2") == 0)
        return avx2;
    return strcmp(isa, "avx512") == 0 && avx2 && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
#elif defined(__aarch64__)
    if (strcmp(isa, "neon") == 0)
        return true; /* Advanced SIMD is part of every Armv8-A CPU */
    const unsigned f = os_cpu_arm_features();
    if (strcmp(isa, "i8mm") == 0) /* the i8mm kernels use SDOT as well */
        return (f & OS_CPU_ARM_DOTPROD) && (f & OS_CPU_ARM_I8MM);
    return strcmp(isa, "neondot") == 0 && (f & OS_CPU_ARM_DOTPROD) != 0;
#else
    (void)isa;
    return false;
#endif
}

const char *test_fixtures_dir(void) {
    static char path[4096];
    const char *env = getenv("SNIPER_FIXTURES");
    snprintf(path, sizeof(path), "%s", env && *env ? env : "../shared/fixtures");
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path : NULL;
}

static char tmp_path[4096]; /* test_tmpdir's, once made */

const char *test_tmpdir(void) {
    char *path = tmp_path;
    if (!path[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(path, sizeof(tmp_path), "%s/sniper-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(path)) {
            perror("test_tmpdir: mkdtemp");
            abort();
        }
    }
    return path;
}

int test_make_model(char *path, size_t path_len, const char *name, const char *args) {
    char cmd[4096];
    const char *build = getenv("BUILD");
    snprintf(path, path_len, "%s/%s", test_tmpdir(), name);
    snprintf(cmd, sizeof(cmd), "%s/sniper-mkmodel --quiet -o %s %s",
             build && *build ? build : "build", path, args);
    if (system(cmd) != 0) {
        test_fail(__FILE__, __LINE__, "sniper-mkmodel failed: %s", cmd);
        return -1;
    }
    return 0;
}

int test_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

void *test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) != 0)
        goto out;
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto out;
    buf = malloc((size_t)size + 1);
    if (!buf)
        goto out;
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
        goto out;
    }
    buf[size] = '\0';
    if (n)
        *n = (size_t)size;
out:
    fclose(f);
    return buf;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

/* The temporary directory goes when every case passed (each run made one of up to a few hundred
 * MB, and they filled the disk); after a failure it stays for inspection, named. */
static void tmpdir_finish(int failed) {
    if (!tmp_path[0])
        return;
    if (failed)
        fprintf(stderr, "test files kept in %s\n", tmp_path);
    else if (nftw(tmp_path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "test_tmpdir: cannot remove %s\n", tmp_path);
}

int test_run(int argc, char **argv, const struct test_case *cases) {
    int passed = 0, failed = 0, skipped = 0;
    const char *filter = argc > 1 ? argv[1] : NULL;
    for (const struct test_case *c = cases; c->name; c++) {
        if (filter && !strstr(c->name, filter))
            continue;
        case_name = c->name;
        case_failures = 0;
        case_skipped = false;
        c->fn();
        if (case_failures) {
            failed++;
            fprintf(stderr, "not ok %s\n", c->name);
        } else if (case_skipped) {
            skipped++;
            fprintf(stderr, "skip   %s\n", c->name);
        } else {
            passed++;
            fprintf(stderr, "ok     %s\n", c->name);
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    tmpdir_finish(failed);
    return failed ? 1 : 0;
}
