/* matmul.c - row-chunked, multi-job matrix products over the thread pool. Tasks are (job, chunk of
 * rows); inside a task the chunk's rows stay hot in cache while every token of the batch passes. */
#include "matmul.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MATMUL_ROWS_PER_TASK 16

int matmul_init(struct matmul *mm, struct threadpool *tp, int max_jobs) {
    memset(mm, 0, sizeof(*mm));
    mm->tp = tp;
    mm->max_jobs = max_jobs;
    mm->jobs = calloc((size_t)max_jobs, sizeof(*mm->jobs));
    mm->task_end = calloc((size_t)max_jobs, sizeof(*mm->task_end));
    mm->rows_per_task = MATMUL_ROWS_PER_TASK;
    if (!mm->jobs || !mm->task_end) {
        matmul_release(mm);
        return -ENOMEM;
    }
    return 0;
}

void matmul_release(struct matmul *mm) {
    free(mm->jobs);
    free(mm->task_end);
    mm->jobs = NULL;
    mm->task_end = NULL;
}

int matmul_add(struct matmul *mm, const struct matmul_job *job) {
    if (mm->n_jobs >= mm->max_jobs)
        return -ENOSPC;
    if (job->n_rows <= 0 || job->n_tok <= 0)
        return 0;
    mm->jobs[mm->n_jobs++] = *job;
    return 0;
}

static void matmul_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    struct matmul *mm = ctx;
    int j = 0;
    while (task >= mm->task_end[j]) /* few jobs: a linear scan beats a search */
        j++;
    const struct matmul_job *job = &mm->jobs[j];
    int64_t chunk = task - (j ? mm->task_end[j - 1] : 0);
    int64_t r0 = chunk * mm->rows_per_task;
    int64_t r1 = r0 + mm->rows_per_task < job->n_rows ? r0 + mm->rows_per_task : job->n_rows;
    quant_vec_dot_fn dot = job->k->vec_dot;
    for (int32_t t = 0; t < job->n_tok; t++) {
        const uint8_t *a = job->act + (size_t)(job->act_idx ? job->act_idx[t] : t) * job->act_stride;
        float *out = job->out + (size_t)(job->out_idx ? job->out_idx[t] : t) * job->out_stride;
        const uint8_t *w = job->w + (size_t)r0 * job->row_bytes;
        for (int64_t r = r0; r < r1; r++, w += job->row_bytes)
            dot(job->n_in, &out[r], w, a);
    }
}

void matmul_run(struct matmul *mm) {
    int64_t total = 0;
    for (int j = 0; j < mm->n_jobs; j++) {
        total += (mm->jobs[j].n_rows + mm->rows_per_task - 1) / mm->rows_per_task;
        mm->task_end[j] = total;
    }
    threadpool_run(mm->tp, total, matmul_task, mm);
    mm->n_jobs = 0;
}

int matmul_quantize(enum qtype wtype, const float *x, size_t x_stride, int32_t n_tok, int64_t n,
                    uint8_t *dst, size_t *act_stride) {
    const struct quant_kernels *k = quant_kernels(wtype);
    if (!k)
        return -ENOTSUP;
    size_t row = quant_act_row_bytes(wtype, n);
    size_t stride = (row + 63) & ~(size_t)63;
    for (int32_t t = 0; t < n_tok; t++)
        k->from_float(x + (size_t)t * x_stride, dst + (size_t)t * stride, n);
    *act_stride = stride;
    return 0;
}
