/* harness.h - the unit-test harness: a table of named cases per test binary.
 *
 *     static void test_parse(void) { CHECK(parse("1") == 1); CHECK_NEAR(x, 1.0, 1e-6); }
 *     static const struct test_case cases[] = { {"parse", test_parse}, {0} };
 *     int main(int argc, char **argv) { return test_run(argc, argv, cases); }
 *
 * A case fails when any CHECK in it fails (it keeps running to report all). test_skip() marks the
 * current case skipped with a loud message (for fixtures that are absent). Each binary ends with
 * the line "N passed, N failed, N skipped" and exits non-zero when something failed. An argument
 * runs only the cases whose names contain it. */
#ifndef SNIPER_TEST_HARNESS_H
#define SNIPER_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct test_case {
    const char *name;
    void (*fn)(void);
};

int test_run(int argc, char **argv, const struct test_case *cases);

/* Records a failure of the current case with file, line and message. */
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Marks the current case skipped, printing "SKIP: why" loudly. */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Number of failures recorded so far in the current case. */
int test_failures(void);

/* True when this CPU runs the kernels of isa ("avx2": AVX2+FMA+F16C; "avx512": that plus AVX-512
 * F/BW/VL/DQ/VNNI; "neon": any arm64 CPU; "neondot": one with FEAT_DotProd; "i8mm": one with
 * FEAT_DotProd and FEAT_I8MM), the sets quant.c's dispatch asks for. */
bool test_cpu_has(const char *isa);

/* The shared fixtures folder ($SNIPER_FIXTURES, else ../shared/fixtures), or NULL when absent. */
const char *test_fixtures_dir(void);

/* A fresh temporary directory for this test binary (under $TMPDIR), removed at the end of
 * test_run when every case passed, kept (and named) after a failure. Static. */
const char *test_tmpdir(void);

/* Runs $BUILD/sniper-mkmodel --quiet -o <tmpdir>/name ARGS and puts the path in path. Returns 0, or
 * -1 after recording a failure of the current case. */
int test_make_model(char *path, size_t path_len, const char *name, const char *args);

/* Reads a whole file into a malloc'd buffer (NUL-terminated; size in *n). NULL on error. */
void *test_read_file(const char *path, size_t *n);

/* Writes n bytes to path (created or truncated). Returns 0 or -1. */
int test_write_file(const char *path, const void *p, size_t n);

#define CHECK(cond) \
    do { if (!(cond)) test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)
#define CHECK_MSG(cond, ...) \
    do { if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define CHECK_EQ_INT(a, b) \
    do { long long a_ = (long long)(a), b_ = (long long)(b); \
         if (a_ != b_) test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
    } while (0)
#define CHECK_NEAR(a, b, tol) \
    do { double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol); \
         if (!(a_ - b_ <= t_ && b_ - a_ <= t_)) \
             test_fail(__FILE__, __LINE__, "|%s - %s| <= %g: %.9g vs %.9g", #a, #b, t_, a_, b_); \
    } while (0)
#define CHECK_STR(a, b) \
    do { const char *a_ = (a), *b_ = (b); \
         if (!a_ || !b_ || strcmp(a_, b_) != 0) \
             test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, \
                       a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
    } while (0)

#endif
