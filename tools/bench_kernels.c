/* bench_kernels.c - matrix x vector throughput of the vec_dot kernels, per ISA.
 *
 *     build/bench-kernels [type ...] [--rows N] [--cols N] [--big-mb N] [--secs S] [--threads T]
 *
 * For each weight type (default q4_K q6_K q8_0) and ISA (ref, then avx2/avx512 on x86 or
 * neon/neondot/i8mm on arm64, when the CPU has them) it times out[r] = vec_dot(row r, act) over a rows x cols matrix that fits in L2 (default
 * 768 x 2048) and over one of --big-mb MB (default 256, beyond the L2/LLC a core sees), and prints
 * ns per row and GB/s of weight bytes streamed (best of several passes). In cache it also times
 * vec_dot4 (one row against four activation rows) and prints its ns per row per column next to
 * vec_dot's ns per row, with the speed-up and a bitwise check of its columns against vec_dot, and
 * where the ISA has vec_dot_2xn (arm64's i8mm) the same four columns two rows at a time through
 * it, against vec_dot4. In
 * and out of cache it times vec_dot_rows4 (four rows against one activation row, the decode path)
 * and checks each of its outputs bitwise against vec_dot's. Every SIMD result is checked bitwise
 * against the scalar reference (the accumulation contract of quant.h). With --threads T the
 * vec_dot_rows4 and vec_dot4 passes split the rows into T contiguous shares, one per thread (as
 * the engine's decode tasks stream contiguous chunks). Matrices live on transparent huge pages
 * (2 MiB-aligned anonymous memory with MADV_HUGEPAGE), as the engine's weights do. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "clock.h"
#include "os.h"
#include "quant.h"
#include "quant_iq.h"
#include "threadpool.h"

struct bench_opts {
    int64_t rows;   /* rows of the in-cache matrix */
    int64_t cols;   /* elements per row */
    int64_t big_mb; /* MiB of weights in the out-of-cache matrix */
    double secs;    /* minimum seconds per measurement */
    int threads;    /* threads of the rows4 and vec_dot4 passes */
    struct threadpool *tp; /* threads > 1: the pool that runs them */
};

static uint64_t rng = 88172645463325252ULL;

static float rng_unit(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

#define HUGE_PAGE ((size_t)2 << 20)

static size_t huge_round(size_t bytes) {
    return (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

/* bytes of anonymous memory starting on a 2 MiB boundary and advised onto transparent huge pages
 * (as the engine loads weights), or NULL. Free with huge_free(p, bytes). */
static void *huge_alloc(size_t bytes) {
    const size_t len = huge_round(bytes), span = len + HUGE_PAGE;
    uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uint8_t *base = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (base > p)
        munmap(p, (size_t)(base - p));
    munmap(base + len, (size_t)(p + span - (base + len)));
    os_pages_huge(base, len, true);
    return base;
}

static void huge_free(void *p, size_t bytes) {
    if (p)
        munmap(p, huge_round(bytes));
}

/* A matrix of rows x cols in type t on huge pages (free with huge_free(m, rows * *row_bytes)),
 * made by quantizing 64 random rows and repeating them. NULL on failure. */
static uint8_t *matrix_new(enum qtype t, int64_t rows, int64_t cols, size_t *row_bytes) {
    uint64_t rb;
    if (qtype_row_bytes(t, (uint64_t)cols, &rb) < 0)
        return NULL;
    const int64_t n_seed = rows < 64 ? rows : 64;
    uint8_t *m = huge_alloc((size_t)rb * (size_t)rows);
    float *x = calloc((size_t)cols, sizeof(*x));
    if (!m || !x)
        goto err;
    for (int64_t r = 0; r < n_seed; r++) {
        for (int64_t i = 0; i < cols; i++)
            x[i] = rng_unit();
        if (quant_quantize_row(t, x, m + (size_t)r * rb, cols) < 0)
            goto err;
    }
    for (int64_t r = n_seed; r < rows; r++)
        memcpy(m + (size_t)r * rb, m + (size_t)(r % n_seed) * rb, (size_t)rb);
    free(x);
    *row_bytes = (size_t)rb;
    return m;
err:
    free(x);
    huge_free(m, (size_t)rb * (size_t)rows);
    return NULL;
}

static void matvec(const struct quant_kernels *k, const uint8_t *m, size_t row_bytes, int64_t rows,
                   int64_t cols, const void *act, float *out) {
    for (int64_t r = 0; r < rows; r++)
        k->vec_dot(cols, &out[r], m + (size_t)r * row_bytes, act);
}

/* One pass of a rows4 or vec_dot4 matrix product, split into n_parts contiguous shares. */
struct pass {
    const struct quant_kernels *k;
    const uint8_t *m;
    size_t row_bytes;
    int64_t rows, cols;
    const void *act;         /* rows4: the activation row */
    const void *const *act4; /* vec_dot4: four activation rows, else NULL */
    float *out;              /* [rows] (rows4) or [rows][4] (vec_dot4) */
    int n_parts;
    bool two_rows;           /* with act4: rows in pairs through vec_dot_2xn */
};

/* Rows [r0, r1): four at a time through vec_dot_rows4 and the rest through vec_dot (as matmul
 * does), or each through vec_dot4, or (two_rows) two at a time through vec_dot_2xn and an odd
 * last one through vec_dot4 (as matmul does where the kernels have it). */
static void pass_range(const struct pass *p, int64_t r0, int64_t r1) {
    int64_t r = r0;
    if (p->two_rows) {
        for (; r + 2 <= r1; r += 2) {
            float s[8];
            p->k->vec_dot_2xn(p->cols, s, p->m + (size_t)r * p->row_bytes, p->row_bytes, p->act4,
                              4);
            memcpy(&p->out[4 * r], s, sizeof(s)); /* row r's four, then row r + 1's */
        }
    }
    if (p->act4) {
        for (; r < r1; r++)
            p->k->vec_dot4(p->cols, &p->out[4 * r], p->m + (size_t)r * p->row_bytes, p->act4);
        return;
    }
    for (; r + 4 <= r1; r += 4)
        p->k->vec_dot_rows4(p->cols, &p->out[r], p->m + (size_t)r * p->row_bytes, p->row_bytes,
                            p->act);
    for (; r < r1; r++)
        p->k->vec_dot(p->cols, &p->out[r], p->m + (size_t)r * p->row_bytes, p->act);
}

/* Share `task` of the pass: a contiguous run of rows, a multiple of 4 long. */
static void pass_task(void *ctx, int64_t task, int thread) {
    const struct pass *p = ctx;
    (void)thread;
    const int64_t per = ((p->rows + 3) / 4 + p->n_parts - 1) / p->n_parts * 4;
    const int64_t r0 = task * per, r1 = r0 + per < p->rows ? r0 + per : p->rows;
    if (r0 < r1)
        pass_range(p, r0, r1);
}

/* Best seconds per pass over at least secs of passes (at least 3), on o->threads threads. */
static double time_pass(struct pass *p, const struct bench_opts *o, double secs) {
    double best = INFINITY, start = clock_now_s();
    p->n_parts = o->threads > 1 ? o->threads : 1;
    for (int n = 0; n < 3 || clock_now_s() - start < secs; n++) {
        double t0 = clock_now_s();
        if (p->n_parts > 1)
            threadpool_run(o->tp, p->n_parts, pass_task, p);
        else
            pass_range(p, 0, p->rows);
        double dt = clock_now_s() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

/* ", T threads" when the pass ran on more than one, else "". Static string. */
static const char *threads_note(const struct bench_opts *o) {
    static char buf[32];
    if (o->threads <= 1)
        return "";
    snprintf(buf, sizeof(buf), ", %d threads", o->threads);
    return buf;
}

/* Memory for activation rows aligned to 64, as the engine's buffers are (quant_act_row_stride). */
static void *act_alloc(size_t bytes) {
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

/* Times vec_dot4's pass p (four activation rows, outputs kept) again with the rows in pairs
 * through vec_dot_2xn, prints ns per row per column and the speed-up over four_ns (vec_dot4's),
 * and checks every output bitwise against the vec_dot4 pass's. Returns how many differ. */
static int64_t bench_2xn(struct pass *p, const struct bench_opts *o, double four_ns) {
    float *want = malloc((size_t)p->rows * 4 * sizeof(*want));
    if (!want)
        return 1;
    memcpy(want, p->out, (size_t)p->rows * 4 * sizeof(*want));
    p->two_rows = true;
    double ns = time_pass(p, o, o->secs) * 1e9 / (double)p->rows / 4.0;
    p->two_rows = false;
    int64_t n_diff = 0;
    for (int64_t i = 0; i < p->rows * 4; i++)
        n_diff += memcmp(&want[i], &p->out[i], sizeof(float)) != 0;
    printf("%-5s %-6s %-9s %6lldx%-5lld 2xn      %9.1f ns/row/col  vs vec_dot4 %6.1f: %.2fx  (%s)"
           "%s\n", qtype_name(p->k->type), p->k->isa, "in-cache", (long long)p->rows,
           (long long)p->cols, ns, four_ns, four_ns / ns,
           n_diff ? "NOT BITWISE" : "bitwise = vec_dot4", threads_note(o));
    fflush(stdout);
    free(want);
    return n_diff;
}

/* Times vec_dot4 of k over the matrix against four activation rows made from x (perturbed per
 * column), prints ns per row per column, the speed-up over dot_ns (vec_dot's ns per row) and
 * whether every column is bitwise vec_dot's. Returns 0 or -1. */
static int bench_four(const struct quant_kernels *k, const uint8_t *m, size_t row_bytes,
                      int64_t rows, int64_t cols, const float *x, double dot_ns,
                      const struct bench_opts *o) {
    size_t a_bytes = quant_act_row_stride(k->type, cols);
    uint8_t *acts = act_alloc(4 * a_bytes);
    float *xs = calloc((size_t)cols, sizeof(*xs)), *out4 = calloc((size_t)rows * 4, sizeof(*out4));
    int rc = -1;
    if (!acts || !xs || !out4)
        goto out;
    const void *act[4];
    for (int j = 0; j < 4; j++) {
        for (int64_t i = 0; i < cols; i++)
            xs[i] = x[i] * (float)(j + 1) + 0.25f * rng_unit();
        k->from_float(xs, acts + (size_t)j * a_bytes, cols);
        act[j] = acts + (size_t)j * a_bytes;
    }
    struct pass p = {k, m, row_bytes, rows, cols, NULL, act, out4, 1, false};
    double dt = time_pass(&p, o, o->secs);
    int64_t n_diff = 0;
    for (int64_t r = 0; r < rows && r < 64; r++) {
        for (int j = 0; j < 4; j++) {
            float one;
            k->vec_dot(cols, &one, m + (size_t)r * row_bytes, act[j]);
            n_diff += memcmp(&one, &out4[4 * r + j], sizeof(one)) != 0;
        }
    }
    double ns = dt * 1e9 / (double)rows / 4.0;
    printf("%-5s %-6s %-9s %6lldx%-5lld vec_dot4 %9.1f ns/row/col  vs vec_dot %7.1f: %.2fx  (%s)"
           "%s\n", qtype_name(k->type), k->isa, "in-cache", (long long)rows, (long long)cols, ns,
           dot_ns, dot_ns / ns, n_diff ? "NOT BITWISE" : "bitwise = vec_dot", threads_note(o));
    fflush(stdout);
    if (!n_diff && k->vec_dot_2xn)
        n_diff = bench_2xn(&p, o, ns);
    rc = n_diff ? -1 : 0;
out:
    free(out4);
    free(xs);
    free(acts);
    return rc;
}

/* Best seconds per pass over at least secs of passes (at least 3). */
static double time_matvec(const struct quant_kernels *k, const uint8_t *m, size_t row_bytes,
                          int64_t rows, int64_t cols, const void *act, float *out, double secs) {
    double best = INFINITY, start = clock_now_s();
    for (int pass = 0; pass < 3 || clock_now_s() - start < secs; pass++) {
        double t0 = clock_now_s();
        matvec(k, m, row_bytes, rows, cols, act, out);
        double dt = clock_now_s() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

/* Reads every 64-byte line of m once (summing the first byte of each) as the bandwidth ceiling. */
static volatile unsigned read_sink; /* keeps time_read's loads alive */

static double time_read(const uint8_t *m, size_t bytes, double secs) {
    double best = INFINITY, start = clock_now_s();
    for (int pass = 0; pass < 3 || clock_now_s() - start < secs; pass++) {
        double t0 = clock_now_s();
        unsigned acc = 0;
        for (size_t i = 0; i < bytes; i += 64)
            acc += *(const volatile uint8_t *)(m + i);
        read_sink += acc;
        double dt = clock_now_s() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

/* The N_SIMD SIMD ISAs of this CPU family, narrower first; cpu_has(name) says which run here and
 * simd_register(i, tab) puts ISA i's kernels over tab. */
#if defined(__x86_64__) || defined(__i386__)
#define N_SIMD 2
static const char *const simd_names[N_SIMD] = {"avx2", "avx512"};

static void simd_register(int i, struct quant_kernels *tab) {
    if (i == 0) {
        quant_register_avx2(tab, QTYPE_COUNT);
        quant_iq_register_avx2(tab, QTYPE_COUNT);
    } else {
        quant_register_avx512(tab, QTYPE_COUNT);
        quant_iq_register_avx512(tab, QTYPE_COUNT);
    }
}

static bool cpu_has(const char *isa) {
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                os_cpu_x86_f16c();
    if (strcmp(isa, "avx2") == 0)
        return avx2;
    return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}
#elif defined(__aarch64__)
#define N_SIMD 3
static const char *const simd_names[N_SIMD] = {"neon", "neondot", "i8mm"};

static void simd_register(int i, struct quant_kernels *tab) {
    if (i == 0) {
        quant_register_neon(tab, QTYPE_COUNT);
        quant_iq_register_neon(tab, QTYPE_COUNT);
    } else if (i == 1) {
        quant_register_neondot(tab, QTYPE_COUNT);
        quant_iq_register_neondot(tab, QTYPE_COUNT);
    } else {
        quant_register_i8mm(tab, QTYPE_COUNT);
        quant_iq_register_i8mm(tab, QTYPE_COUNT);
    }
}

static bool cpu_has(const char *isa) {
    const unsigned f = os_cpu_arm_features();
    if (strcmp(isa, "i8mm") == 0) /* the i8mm build uses SDOT as well */
        return (f & OS_CPU_ARM_DOTPROD) && (f & OS_CPU_ARM_I8MM);
    return strcmp(isa, "neon") == 0 || (f & OS_CPU_ARM_DOTPROD) != 0;
}
#else
#define N_SIMD 2
static const char *const simd_names[N_SIMD] = {"none", "none"};

static void simd_register(int i, struct quant_kernels *tab) {
    (void)i, (void)tab;
}

static bool cpu_has(const char *isa) {
    (void)isa;
    return false;
}
#endif

static struct quant_kernels tab_simd[N_SIMD][QTYPE_COUNT];

static void tables_init(void) {
    for (int t = 0; t < QTYPE_COUNT; t++) {
        const struct quant_kernels *ref = quant_kernels_ref((enum qtype)t);
        for (int i = 0; ref && i < N_SIMD; i++)
            tab_simd[i][t] = *ref;
    }
    for (int i = 0; i < N_SIMD; i++)
        if (cpu_has(simd_names[i]))
            simd_register(i, tab_simd[i]);
}

/* Benchmarks one type at one matrix size over every ISA; returns 0 or -1. */
static int bench_one(enum qtype t, int64_t rows, int64_t cols, const char *label,
                     const struct bench_opts *o) {
    const struct quant_kernels *ks[1 + N_SIMD] = {quant_kernels_ref(t)};
    bool have[1 + N_SIMD] = {true};
    for (int i = 0; i < N_SIMD; i++) {
        ks[1 + i] = &tab_simd[i][t];
        have[1 + i] = cpu_has(simd_names[i]);
    }
    size_t row_bytes = 0, a_bytes = quant_act_row_bytes(t, cols);
    uint8_t *m = matrix_new(t, rows, cols, &row_bytes);
    float *x = calloc((size_t)cols, sizeof(*x)), *out = calloc((size_t)rows, sizeof(*out));
    float *out_ref = calloc((size_t)rows, sizeof(*out_ref));
    void *act = a_bytes ? act_alloc(a_bytes) : NULL;
    int rc = -1;
    if (!ks[0] || !m || !x || !out || !out_ref || !act) {
        fprintf(stderr, "%s: cannot set up \"%s\" %lldx%lld\n", __func__, qtype_name(t),
                (long long)rows, (long long)cols);
        goto out;
    }
    for (int64_t i = 0; i < cols; i++)
        x[i] = rng_unit();
    ks[0]->from_float(x, act, cols);
    matvec(ks[0], m, row_bytes, rows < 64 ? rows : 64, cols, act, out_ref);
    double mb = (double)row_bytes * (double)rows / 1e6;
    double rd = time_read(m, row_bytes * (size_t)rows, o->secs);
    printf("%-5s %-6s %-9s %6lldx%-5lld %8.1f MB %9.1f ns/row %7.2f GB/s  (one load per line)\n",
           qtype_name(t), "read", label, (long long)rows, (long long)cols, mb,
           rd * 1e9 / (double)rows, mb / 1e3 / rd);
    for (int i = 0; i < 1 + N_SIMD; i++) {
        if (!have[i] || (i > 0 && strcmp(ks[i]->isa, "ref") == 0))
            continue;
        double secs = i == 0 && mb > 32 ? 0.0 : o->secs;
        double dt = time_matvec(ks[i], m, row_bytes, rows, cols, act, out, secs);
        int64_t n_off = 0;
        for (int64_t r = 0; r < rows && r < 64; r++)
            n_off += memcmp(&out[r], &out_ref[r], sizeof(float)) != 0;
        printf("%-5s %-6s %-9s %6lldx%-5lld %8.1f MB %9.1f ns/row %7.2f GB/s  (%s)\n",
               qtype_name(t), ks[i]->isa, label, (long long)rows, (long long)cols, mb,
               dt * 1e9 / (double)rows, mb / 1e3 / dt, n_off ? "NOT BITWISE = ref" : "bitwise = ref");
        fflush(stdout);
        if (n_off)
            goto out;
        if (i > 0) {
            float *out4 = calloc((size_t)rows, sizeof(*out4));
            if (!out4)
                goto out;
            struct pass p = {ks[i], m, row_bytes, rows, cols, act, NULL, out4, 1, false};
            double dt4 = time_pass(&p, o, secs);
            int64_t n_diff = 0;
            for (int64_t r = 0; r < rows; r++)
                n_diff += memcmp(&out4[r], &out[r], sizeof(float)) != 0;
            free(out4);
            printf("%-5s %-6s %-9s %6lldx%-5lld rows4    %9.1f ns/row %7.2f GB/s  %.2fx  (%s)%s\n",
                   qtype_name(t), ks[i]->isa, label, (long long)rows, (long long)cols,
                   dt4 * 1e9 / (double)rows, mb / 1e3 / dt4, dt / dt4,
                   n_diff ? "NOT BITWISE" : "bitwise = vec_dot", threads_note(o));
            fflush(stdout);
            if (n_diff)
                goto out;
        }
        if (strcmp(label, "in-cache") == 0 &&
            bench_four(ks[i], m, row_bytes, rows, cols, x, dt * 1e9 / (double)rows, o) < 0)
            goto out;
    }
    rc = 0;
out:
    free(act);
    free(out_ref);
    free(out);
    free(x);
    huge_free(m, row_bytes * (size_t)rows);
    return rc;
}

static int parse_type(const char *s, enum qtype *t) {
    for (int i = 0; i < QTYPE_COUNT; i++) {
        if (quant_kernels_ref((enum qtype)i) && strcmp(qtype_name((enum qtype)i), s) == 0) {
            *t = (enum qtype)i;
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv) {
    struct bench_opts o = {768, 2048, 256, 0.3, 1, NULL};
    enum qtype types[QTYPE_COUNT];
    int n_types = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
            o.rows = atoll(argv[++i]);
        else if (strcmp(argv[i], "--cols") == 0 && i + 1 < argc)
            o.cols = atoll(argv[++i]);
        else if (strcmp(argv[i], "--big-mb") == 0 && i + 1 < argc)
            o.big_mb = atoll(argv[++i]);
        else if (strcmp(argv[i], "--secs") == 0 && i + 1 < argc)
            o.secs = atof(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            o.threads = atoi(argv[++i]);
        else if (n_types < QTYPE_COUNT && parse_type(argv[i], &types[n_types]) == 0)
            n_types++;
        else {
            fprintf(stderr, "bench-kernels: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    if (n_types == 0) {
        types[n_types++] = QTYPE_Q4_K;
        types[n_types++] = QTYPE_Q6_K;
        types[n_types++] = QTYPE_Q8_0;
    }
    if (o.rows <= 0 || o.cols <= 0 || o.big_mb < 0 || o.secs < 0 || o.threads < 1 ||
        o.threads > 256) {
        fprintf(stderr, "bench-kernels: bad sizes\n");
        return 2;
    }
    if (o.threads > 1 && !(o.tp = threadpool_new(o.threads))) {
        fprintf(stderr, "bench-kernels: cannot start %d threads\n", o.threads);
        return 1;
    }
    tables_init();
    int rc = 0;
    for (int i = 0; i < n_types; i++) {
        uint64_t rb = 0;
        if (qtype_row_bytes(types[i], (uint64_t)o.cols, &rb) < 0 || rb == 0) {
            fprintf(stderr, "bench-kernels: %lld columns do not fit \"%s\" blocks\n",
                    (long long)o.cols, qtype_name(types[i]));
            rc = 1;
            continue;
        }
        if (bench_one(types[i], o.rows, o.cols, "in-cache", &o) < 0)
            rc = 1;
        int64_t big_rows = (int64_t)((uint64_t)o.big_mb * 1000000 / rb);
        if (big_rows > 0 && bench_one(types[i], big_rows, o.cols, "in-memory", &o) < 0)
            rc = 1;
    }
    threadpool_free(o.tp);
    return rc;
}
