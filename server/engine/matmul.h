/* matmul.h - products of quantized weight matrices with a batch of activation rows, split into row
 * chunks across the thread pool. Several independent products (q, k and v; the gate and up matrices
 * of every routed expert) go out in one dispatch, so the token loop pays one wake-up per step.
 *
 * Activations are quantized by the caller (matmul_quantize) into the weight type's vec_dot_type;
 * each output element is one vec_dot of a weight row and an activation row, so a token's result does
 * not depend on which other tokens share the batch: batched prefill equals token-by-token decode. */
#ifndef SNIPER_MATMUL_H
#define SNIPER_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "threadpool.h"

/* out[out_row(t)][r] = dot(w row r, act row act_row(t)) for r < n_rows, t < n_tok, where
 * act_row(t) = act_idx ? act_idx[t] : t, out_row(t) = out_idx ? out_idx[t] : t. */
struct matmul_job {
    const struct quant_kernels *k; /* kernels of the weight type */
    const uint8_t *w;              /* first row */
    size_t row_bytes;
    int64_t n_in;                  /* elements per row */
    int64_t n_rows;
    const uint8_t *act;            /* quantized activation rows, act_stride bytes apart */
    size_t act_stride;
    const int32_t *act_idx;        /* optional gather: [n_tok] rows of act */
    float *out;                    /* output rows, out_stride floats apart */
    size_t out_stride;
    const int32_t *out_idx;        /* optional scatter: [n_tok] rows of out */
    int32_t n_tok;
};

/* A reusable dispatcher for up to max_jobs jobs per run. */
struct matmul {
    struct threadpool *tp;   /* borrowed */
    int max_jobs;
    int n_jobs;
    struct matmul_job *jobs; /* [max_jobs] */
    int64_t *task_end;       /* [max_jobs]: cumulative task counts */
    int64_t *chunk_rows;     /* [max_jobs]: rows per task of each job (see matmul_chunk_rows) */
};

/* Returns 0 or -ENOMEM. */
int matmul_init(struct matmul *mm, struct threadpool *tp, int max_jobs);
void matmul_release(struct matmul *mm);

/* Queues a job (copied). Returns 0, or -ENOSPC when max_jobs are already queued. */
int matmul_add(struct matmul *mm, const struct matmul_job *job);

/* Runs every queued job to completion and empties the queue. */
void matmul_run(struct matmul *mm);

/* Empties the queue without running it (a step that failed half way through queueing). */
void matmul_discard(struct matmul *mm);

/* Quantizes n_tok rows of n floats (x, x_stride floats apart) for weights of type wtype into dst
 * (rows *act_stride bytes apart, which it sets). Returns 0 or -ENOTSUP for a type without kernels. */
int matmul_quantize(enum qtype wtype, const float *x, size_t x_stride, int32_t n_tok, int64_t n,
                    uint8_t *dst, size_t *act_stride);

#endif
