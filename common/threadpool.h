/* threadpool.h - a fixed set of worker threads that run one parallel-for at a time.
 *
 *     struct threadpool *tp = threadpool_new(4);        // the caller is thread 0, 3 workers
 *     threadpool_run(tp, n_tasks, my_task, &ctx);       // my_task(ctx, task, thread) for each task
 *     threadpool_free(tp);
 *
 * Tasks are handed out one at a time from an atomic counter, so uneven tasks balance themselves,
 * and a run ends when its tasks are done, whether or not every worker came. Workers poll for a
 * tenth of a second between runs (the token loop dispatches thousands of small runs a second,
 * between waits for expert reads) while nothing else wants their CPU, and otherwise sleep at once
 * (spin.h); the caller waits for the last tasks the same way. The pool owns the contention monitor
 * its waits tell of slow yields (contention.h), which other waits of the same token loop (the
 * expert reads) share. threadpool_run allocates nothing. */
#ifndef SNIPER_THREADPOOL_H
#define SNIPER_THREADPOOL_H

#include <stdbool.h>
#include <stdint.h>

struct threadpool;
struct contention;

/* fn(ctx, task, thread): task in [0, n_tasks), thread in [0, n_threads). */
typedef void (*threadpool_fn)(void *ctx, int64_t task, int thread);

/* Returns a pool of n_threads (including the calling thread; n_threads <= 0 means the number of
 * online CPUs), or NULL when a thread cannot be started. */
struct threadpool *threadpool_new(int n_threads);

/* Stops and joins the workers. Accepts NULL. */
void threadpool_free(struct threadpool *tp);

int threadpool_n_threads(const struct threadpool *tp);

/* The pool's contention monitor, fresh at threadpool_new; borrowed, it lives as long as the pool.
 * Waits that run between the pool's runs (the expert reads) are given it, so that what they see
 * of a busy machine also makes the runs the caller's. */
struct contention *threadpool_contention(struct threadpool *tp);

/* Runs fn for every task in [0, n_tasks) across the pool, the caller taking part, and returns when
 * all are done; while the pool's monitor counts as contended the caller runs them alone. Not
 * reentrant: one run at a time, from one thread. */
void threadpool_run(struct threadpool *tp, int64_t n_tasks, threadpool_fn fn, void *ctx);

#endif
