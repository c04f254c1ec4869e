/* op_trace.h - a recording of an engine's per-op trace (engine_set_trace) and the comparison of
 * two recordings, op by op, bit for bit: where the GPU's step first leaves the CPU's numbers
 * (bench-gpumodel --trace, test_gpu_engine's gemma4_trace).
 *
 *     struct op_trace *c = op_trace_new(), *g = op_trace_new();
 *     engine_set_trace(cpu, op_trace_record, c);  engine_eval(cpu, ...);
 *     engine_set_trace(gpu, op_trace_record, g);  engine_eval(gpu, ...);
 *     struct op_trace_diff d;
 *     op_trace_compare(c, g, &d);
 *     op_trace_report(&d, c, g, stdout);   // "no op differs" or the first op that does
 *
 * Each event keeps its layer, its op's name and a copy of its rows (n_rows x n floats, packed). */
#ifndef SNIPER_OP_TRACE_H
#define SNIPER_OP_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct op_trace_event {
    int il;              /* the layer, -1 before the layers */
    const char *op;      /* a static name from the engine ("q_norm", "moe_out", ...) */
    int32_t n_rows;
    int64_t n;           /* floats a row */
    float *rows;         /* [n_rows][n], owned */
};

struct op_trace {
    struct op_trace_event *ev;
    size_t n_ev, cap_ev;
    bool failed;         /* an event could not be kept (out of memory): the recording is short */
};

#define OP_TRACE_SHOWN 8 /* differing elements a report lists */

/* One element whose bits differ: its row, its index in the row, a's and b's bits. */
struct op_trace_elem {
    int32_t row;
    int64_t col;
    uint32_t a, b;
};

/* The first difference between two recordings. */
struct op_trace_diff {
    size_t n_same;       /* events equal (name, layer, shape, bits) before the first that is not */
    bool found;          /* an event differs (or one recording ends first): at index n_same */
    bool shape;          /* it differs in name, layer or shape (or a recording ended): no bits */
    int64_t n_differ;    /* elements whose bits differ */
    double max_abs;      /* the largest |cpu - gpu| among them (inf or nan where one is) */
    int n_shown;
    struct op_trace_elem shown[OP_TRACE_SHOWN]; /* the first ones */
};

/* A new empty recording (op_trace_free frees it), or NULL when out of memory. */
struct op_trace *op_trace_new(void);
void op_trace_free(struct op_trace *t); /* accepts NULL */

/* engine_trace_fn: keeps a copy of the rows in the recording ctx (struct op_trace). On a failed
 * allocation it sets ctx->failed and drops the event. */
void op_trace_record(void *ctx, int il, const char *op, const float *rows, int32_t n_rows,
                     int64_t n, size_t stride);

/* Compares a (the CPU's) and b (the GPU's) event by event into *d. Returns 0 when every event of
 * both is equal, 1 when they differ (d says where), -EINVAL when a recording failed. */
int op_trace_compare(const struct op_trace *a, const struct op_trace *b, struct op_trace_diff *d);

/* Writes d as lines "trace: ..." to out: the number of ops, then "no op differs" or the first op
 * that does ("L3 moe_out"), its differing elements' count and largest difference, and the first
 * few as (row, index, a's bits, b's bits). */
void op_trace_report(const struct op_trace_diff *d, const struct op_trace *a,
                     const struct op_trace *b, FILE *out);

#endif
