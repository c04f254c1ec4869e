/* op_trace.c - per-op trace recordings and their comparison (op_trace.h). Events are compared in
 * order: the two backends call the trace at the same named points, so the i-th event of one is
 * the i-th of the other; an event differing in name, layer or shape is reported as such, never
 * compared. Elements are compared as bits (the accumulation contract promises equal bits). */
#include "op_trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct op_trace *op_trace_new(void) {
    return calloc(1, sizeof(struct op_trace));
}

void op_trace_free(struct op_trace *t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->n_ev; i++)
        free(t->ev[i].rows);
    free(t->ev);
    free(t);
}

/* Room for one more event. */
static bool trace_grow(struct op_trace *t) {
    if (t->n_ev < t->cap_ev)
        return true;
    size_t cap = t->cap_ev ? 2 * t->cap_ev : 256;
    struct op_trace_event *ev = realloc(t->ev, cap * sizeof(*ev));
    if (!ev)
        return false;
    t->ev = ev;
    t->cap_ev = cap;
    return true;
}

void op_trace_record(void *ctx, int il, const char *op, const float *rows, int32_t n_rows,
                     int64_t n, size_t stride) {
    struct op_trace *t = ctx;
    if (n_rows < 0 || n < 0) {
        t->failed = true;
        return;
    }
    const size_t row = (size_t)n * sizeof(float);
    float *copy = malloc(row * (size_t)n_rows + 1);
    if (!copy || !trace_grow(t)) {
        free(copy);
        t->failed = true;
        return;
    }
    for (int32_t r = 0; r < n_rows; r++)
        memcpy((uint8_t *)copy + (size_t)r * row, rows + (size_t)r * stride, row);
    t->ev[t->n_ev++] = (struct op_trace_event){il, op, n_rows, n, copy};
}

/* Whether events x and y have the same layer, name and shape. */
static bool event_alike(const struct op_trace_event *x, const struct op_trace_event *y) {
    return x->il == y->il && strcmp(x->op, y->op) == 0 && x->n_rows == y->n_rows && x->n == y->n;
}

/* Counts the elements of x and y (alike) whose bits differ into d, with the largest difference
 * and the first few. */
static void event_diff(const struct op_trace_event *x, const struct op_trace_event *y,
                       struct op_trace_diff *d) {
    const int64_t n_all = (int64_t)x->n_rows * x->n;
    for (int64_t i = 0; i < n_all; i++) {
        uint32_t a, b;
        memcpy(&a, &x->rows[i], 4);
        memcpy(&b, &y->rows[i], 4);
        if (a == b)
            continue;
        const double diff = fabs((double)x->rows[i] - (double)y->rows[i]);
        if (d->n_differ == 0 || diff > d->max_abs || isnan(diff))
            d->max_abs = diff;
        if (d->n_shown < OP_TRACE_SHOWN)
            d->shown[d->n_shown++] = (struct op_trace_elem){(int32_t)(i / x->n), i % x->n, a, b};
        d->n_differ++;
    }
}

int op_trace_compare(const struct op_trace *a, const struct op_trace *b, struct op_trace_diff *d) {
    *d = (struct op_trace_diff){0};
    if (a->failed || b->failed)
        return -EINVAL;
    for (size_t i = 0; i < a->n_ev || i < b->n_ev; i++, d->n_same++) {
        d->found = true;
        if (i >= a->n_ev || i >= b->n_ev || !event_alike(&a->ev[i], &b->ev[i])) {
            d->shape = true;
            return 1;
        }
        event_diff(&a->ev[i], &b->ev[i], d);
        if (d->n_differ > 0)
            return 1;
        d->found = false;
    }
    return 0;
}

/* Writes event ev as "L3 moe_out" ("moe_out" before the layers), or "(none)". */
static void event_name(const struct op_trace *t, size_t i, FILE *out) {
    if (i >= t->n_ev)
        fprintf(out, "(none: the recording ended)");
    else if (t->ev[i].il < 0)
        fprintf(out, "%s", t->ev[i].op);
    else
        fprintf(out, "L%d %s", t->ev[i].il, t->ev[i].op);
}

void op_trace_report(const struct op_trace_diff *d, const struct op_trace *a,
                     const struct op_trace *b, FILE *out) {
    fprintf(out, "trace: %zu ops on the CPU, %zu on the GPU; ", a->n_ev, b->n_ev);
    if (!d->found) {
        fprintf(out, "no op differs\n");
        return;
    }
    const size_t i = d->n_same;
    if (d->shape) {
        fprintf(out, "op %zu is not the same op: CPU \"", i);
        event_name(a, i, out);
        fprintf(out, "\", GPU \"");
        event_name(b, i, out);
        if (i < a->n_ev && i < b->n_ev)
            fprintf(out, "\" (%d x %lld floats, %d x %lld)\n", a->ev[i].n_rows,
                    (long long)a->ev[i].n, b->ev[i].n_rows, (long long)b->ev[i].n);
        else
            fprintf(out, "\"\n");
        return;
    }
    const struct op_trace_event *ev = &a->ev[i];
    fprintf(out, "first op whose rows differ: \"");
    event_name(a, i, out);
    fprintf(out, "\" (op %zu, %d rows of %lld): %lld of %lld elements differ, max abs difference "
            "%.9g\n", i, ev->n_rows, (long long)ev->n, (long long)d->n_differ,
            (long long)ev->n_rows * ev->n, d->max_abs);
    for (int k = 0; k < d->n_shown; k++) {
        float x, y;
        memcpy(&x, &d->shown[k].a, 4);
        memcpy(&y, &d->shown[k].b, 4);
        fprintf(out, "trace:   row %d [%lld]: cpu 0x%08x (%.9g) gpu 0x%08x (%.9g)\n",
                d->shown[k].row, (long long)d->shown[k].col, d->shown[k].a, x, d->shown[k].b, y);
    }
}
