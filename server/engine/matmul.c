/* matmul.c - row-chunked, multi-job matrix products over the thread pool. Tasks are (job, chunk of
 * rows); inside a task the chunk's rows stay hot in cache while every token of the batch passes,
 * four tokens at a time through vec_dot4 (which unpacks each weight row once for the four). One
 * or two tokens (decode) go through vec_dot_rows4 instead, four rows at a time against one token,
 * which shares the activation loads. Where the kernels have vec_dot_2xn (arm64's i8mm: SMMLA's
 * 2x2 tiles), groups of two or four tokens take the rows two at a time through it instead. Every
 * output is bit-identical to a lone vec_dot, so grouping never changes a token's result. */
#include "matmul.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

#define MATMUL_BATCH_ROWS 16          /* rows per task when four or more tokens pass */
#define MATMUL_STREAM_BYTES (1u << 20) /* at most this many weight bytes per decode task */

int matmul_init(struct matmul *mm, struct threadpool *tp, int max_jobs) {
    memset(mm, 0, sizeof(*mm));
    mm->tp = tp;
    mm->max_jobs = max_jobs;
    mm->jobs = calloc((size_t)max_jobs, sizeof(*mm->jobs));
    mm->task_end = calloc((size_t)max_jobs, sizeof(*mm->task_end));
    mm->chunk_rows = calloc((size_t)max_jobs, sizeof(*mm->chunk_rows));
    if (!mm->jobs || !mm->task_end || !mm->chunk_rows) {
        matmul_release(mm);
        return -ENOMEM;
    }
    return 0;
}

void matmul_release(struct matmul *mm) {
    free(mm->jobs);
    free(mm->task_end);
    free(mm->chunk_rows);
    mm->jobs = NULL;
    mm->task_end = NULL;
    mm->chunk_rows = NULL;
}

int matmul_add(struct matmul *mm, const struct matmul_job *job) {
    if (mm->n_jobs >= mm->max_jobs || fault_hit(FAULT_QUEUE))
        return -ENOSPC;
    if (job->n_rows <= 0 || job->n_tok <= 0)
        return 0;
    mm->jobs[mm->n_jobs++] = *job;
    return 0;
}

static const uint8_t *matmul_act_row(const struct matmul_job *job, int32_t t) {
    return job->act + (size_t)(job->act_idx ? job->act_idx[t] : t) * job->act_stride;
}

static float *matmul_out_row(const struct matmul_job *job, int32_t t) {
    return job->out + (size_t)(job->out_idx ? job->out_idx[t] : t) * job->out_stride;
}

/* Rows [r0, r1) for the n_act tokens of a (n_act 2 or 4) through vec_dot_2xn, two rows at a time;
 * an odd last row through vec_dot4 (n_act 4) or vec_dot2. out[j] is token j's output row; only
 * the first n results of each row are kept. */
static void matmul_rows_2xn(const struct matmul_job *job, int64_t r0, int64_t r1,
                            const void *const *a, float *const *out, int n_act, int n) {
    const size_t rb = job->row_bytes;
    const uint8_t *w = job->w + (size_t)r0 * rb;
    int64_t r = r0;
    float s[8];
    for (; r + 2 <= r1; r += 2, w += 2 * rb) {
        job->k->vec_dot_2xn(job->n_in, s, w, rb, a, n_act);
        for (int j = 0; j < n; j++) {
            out[j][r] = s[j];
            out[j][r + 1] = s[n_act + j];
        }
    }
    if (r < r1) {
        if (n_act == 4)
            job->k->vec_dot4(job->n_in, s, w, a);
        else
            job->k->vec_dot2(job->n_in, s, w, a);
        for (int j = 0; j < n; j++)
            out[j][r] = s[j];
    }
}

/* Rows [r0, r1) for tokens [t0, t0 + n) with n in 1..4 through vec_dot4 (or vec_dot_2xn). Fewer
 * than four tokens repeat the last one (its extra result is dropped): for two or three tokens one
 * four-column pass costs less than reading the rows two or three times, and each column is bitwise
 * vec_dot's either way. */
static void matmul_rows4(const struct matmul_job *job, int64_t r0, int64_t r1, int32_t t0, int n) {
    const void *a[4];
    float *out[4];
    for (int j = 0; j < 4; j++) {
        int32_t t = t0 + (j < n ? j : n - 1);
        a[j] = matmul_act_row(job, t);
        out[j] = matmul_out_row(job, t);
    }
    if (job->k->vec_dot_2xn) {
        matmul_rows_2xn(job, r0, r1, a, out, 4, n);
        return;
    }
    const uint8_t *w = job->w + (size_t)r0 * job->row_bytes;
    for (int64_t r = r0; r < r1; r++, w += job->row_bytes) {
        float s[4];
        job->k->vec_dot4(job->n_in, s, w, a);
        for (int j = 0; j < n; j++)
            out[j][r] = s[j];
    }
}

/* Rows [r0, r1) for tokens t0 and t0 + 1 through vec_dot2: each weight byte read once for both
 * (two sequences decoding in one step), at half vec_dot4's integer work. */
static void matmul_rows2(const struct matmul_job *job, int64_t r0, int64_t r1, int32_t t0) {
    const void *a[2] = {matmul_act_row(job, t0), matmul_act_row(job, t0 + 1)};
    float *out[2] = {matmul_out_row(job, t0), matmul_out_row(job, t0 + 1)};
    if (job->k->vec_dot_2xn) {
        matmul_rows_2xn(job, r0, r1, a, out, 2, 2);
        return;
    }
    const uint8_t *w = job->w + (size_t)r0 * job->row_bytes;
    for (int64_t r = r0; r < r1; r++, w += job->row_bytes) {
        float s[2];
        job->k->vec_dot2(job->n_in, s, w, a);
        out[0][r] = s[0];
        out[1][r] = s[1];
    }
}

/* Rows [r0, r1) for token t: four at a time through vec_dot_rows4, the rest through vec_dot. */
static void matmul_rows1(const struct matmul_job *job, int64_t r0, int64_t r1, int32_t t) {
    const uint8_t *a = matmul_act_row(job, t);
    float *out = matmul_out_row(job, t);
    const size_t rb = job->row_bytes;
    const uint8_t *w = job->w + (size_t)r0 * rb;
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4, w += 4 * rb)
        job->k->vec_dot_rows4(job->n_in, &out[r], w, rb, a);
    for (; r < r1; r++, w += rb)
        job->k->vec_dot(job->n_in, &out[r], w, a);
}

static void matmul_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    struct matmul *mm = ctx;
    int j = 0;
    while (task >= mm->task_end[j]) /* few jobs: a linear scan beats a search */
        j++;
    const struct matmul_job *job = &mm->jobs[j];
    int64_t chunk = task - (j ? mm->task_end[j - 1] : 0);
    int64_t r0 = chunk * mm->chunk_rows[j];
    int64_t r1 = r0 + mm->chunk_rows[j] < job->n_rows ? r0 + mm->chunk_rows[j] : job->n_rows;
    assert(job->k->vec_dot4 != NULL && job->k->vec_dot_rows4 != NULL);
    int32_t t = 0;
    for (; t + 4 <= job->n_tok; t += 4)
        matmul_rows4(job, r0, r1, t, 4);
    int rest = job->n_tok - t;
    if (rest == 2 && job->k->vec_dot2)
        matmul_rows2(job, r0, r1, t);
    else if (rest >= 2) /* one pass of vec_dot4 reads the rows once: cheaper than two or three */
        matmul_rows4(job, r0, r1, t, rest);
    else if (rest == 1)
        matmul_rows1(job, r0, r1, t);
}

/* Rows per task of a job. With more than four tokens the rows are read once per group of four:
 * 16-row chunks keep them in L1 while the groups pass. With one to four (decode, one token per
 * sequence of the step) every weight byte is read once: long contiguous chunks, up to a thread's
 * share and MATMUL_STREAM_BYTES, keep each thread's reads one stream for the prefetchers; 16-row
 * chunks dealt out alternately cost a fifth of decode speed (docs/benchmarks.md). */
static int64_t matmul_chunk_rows(const struct matmul_job *job, int n_threads) {
    if (job->n_tok > 4)
        return MATMUL_BATCH_ROWS;
    int64_t share = (job->n_rows + n_threads - 1) / n_threads;
    int64_t cap = (int64_t)(MATMUL_STREAM_BYTES / (job->row_bytes ? job->row_bytes : 1));
    int64_t rows = share < cap ? share : cap;
    rows = (rows + 3) & ~(int64_t)3; /* whole groups for vec_dot_rows4 */
    return rows > MATMUL_BATCH_ROWS ? rows : MATMUL_BATCH_ROWS;
}

void matmul_run(struct matmul *mm) {
    int64_t total = 0;
    const int n_threads = threadpool_n_threads(mm->tp);
    for (int j = 0; j < mm->n_jobs; j++) {
        mm->chunk_rows[j] = matmul_chunk_rows(&mm->jobs[j], n_threads);
        total += (mm->jobs[j].n_rows + mm->chunk_rows[j] - 1) / mm->chunk_rows[j];
        mm->task_end[j] = total;
    }
    threadpool_run(mm->tp, total, matmul_task, mm);
    mm->n_jobs = 0;
}

void matmul_discard(struct matmul *mm) {
    mm->n_jobs = 0;
}

int matmul_quantize(enum qtype wtype, const float *x, size_t x_stride, int32_t n_tok, int64_t n,
                    uint8_t *dst, size_t *act_stride) {
    const struct quant_kernels *k = quant_kernels(wtype);
    if (!k || fault_hit(FAULT_QUANTIZE))
        return -ENOTSUP;
    size_t stride = quant_act_row_stride(wtype, n);
    for (int32_t t = 0; t < n_tok; t++)
        k->from_float(x + (size_t)t * x_stride, dst + (size_t)t * stride, n);
    *act_stride = stride;
    return 0;
}
