/* threadpool.c - parallel-for over persistent workers. A run is published by bumping `generation`;
 * workers spin on it for THREADPOOL_SPIN_S (cheap wake-up in the token loop, and across the waits
 * for expert reads between runs), then sleep on `wake`. The caller
 * works too and waits until `n_active` drops to zero, so a run never returns with a task pending. */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "spin.h"

/* Seconds a worker polls before it sleeps. Longer than any wait between two runs of a token (an
 * expert read under a small budget takes up to tens of ms): in a VM a vCPU that slept resumes slowly
 * (measured: expert compute 3.7x slower right after a 13 ms sleep; docs/benchmarks.md). */
#define THREADPOOL_SPIN_S 0.1

struct threadpool {
    int n_threads;
    pthread_t *threads; /* [n_threads - 1] workers */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint_fast64_t generation; /* bumped once per run */
    atomic_int n_active;             /* workers still inside the current run */
    atomic_int_fast64_t next_task;
    atomic_bool stop;
    int64_t n_tasks; /* of the current run */
    threadpool_fn fn;
    void *ctx;
};

struct worker_arg {
    struct threadpool *tp;
    int thread;
};

static void threadpool_work(struct threadpool *tp, int thread) {
    for (;;) {
        int64_t t = atomic_fetch_add_explicit(&tp->next_task, 1, memory_order_relaxed);
        if (t >= tp->n_tasks)
            break;
        tp->fn(tp->ctx, t, thread);
    }
}

/* Waits for a generation other than seen (or stop); returns false on stop. */
static bool threadpool_wait_run(struct threadpool *tp, uint64_t seen) {
    struct spin sp = spin_start(THREADPOOL_SPIN_S);
    do {
        if (atomic_load_explicit(&tp->generation, memory_order_acquire) != seen)
            return true;
        if (atomic_load_explicit(&tp->stop, memory_order_relaxed))
            return false;
    } while (spin_more(&sp));
    pthread_mutex_lock(&tp->lock);
    while (atomic_load(&tp->generation) == seen && !atomic_load(&tp->stop))
        pthread_cond_wait(&tp->wake, &tp->lock);
    pthread_mutex_unlock(&tp->lock);
    return !atomic_load(&tp->stop);
}

static void *threadpool_main(void *p) {
    struct worker_arg *arg = p;
    struct threadpool *tp = arg->tp;
    int thread = arg->thread;
    free(arg);
    uint64_t seen = 0;
    while (threadpool_wait_run(tp, seen)) {
        seen = atomic_load_explicit(&tp->generation, memory_order_acquire);
        threadpool_work(tp, thread);
        atomic_fetch_sub_explicit(&tp->n_active, 1, memory_order_release);
    }
    return NULL;
}

struct threadpool *threadpool_new(int n_threads) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    struct threadpool *tp = calloc(1, sizeof(*tp));
    if (!tp)
        return NULL;
    tp->n_threads = n_threads;
    pthread_mutex_init(&tp->lock, NULL);
    pthread_cond_init(&tp->wake, NULL);
    tp->threads = calloc((size_t)n_threads, sizeof(*tp->threads));
    if (!tp->threads)
        goto err_free;
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *arg = malloc(sizeof(*arg));
        if (!arg)
            goto err_stop;
        arg->tp = tp;
        arg->thread = i;
        if (pthread_create(&tp->threads[i - 1], NULL, threadpool_main, arg) != 0) {
            free(arg);
            goto err_stop;
        }
        tp->n_threads = i + 1; /* workers started so far, for cleanup */
    }
    tp->n_threads = n_threads;
    return tp;
err_stop:
    threadpool_free(tp);
    return NULL;
err_free:
    free(tp);
    return NULL;
}

void threadpool_free(struct threadpool *tp) {
    if (!tp)
        return;
    pthread_mutex_lock(&tp->lock);
    atomic_store(&tp->stop, true);
    pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->lock);
    for (int i = 1; i < tp->n_threads; i++)
        if (tp->threads[i - 1])
            pthread_join(tp->threads[i - 1], NULL);
    pthread_cond_destroy(&tp->wake);
    pthread_mutex_destroy(&tp->lock);
    free(tp->threads);
    free(tp);
}

int threadpool_n_threads(const struct threadpool *tp) {
    return tp->n_threads;
}

void threadpool_run(struct threadpool *tp, int64_t n_tasks, threadpool_fn fn, void *ctx) {
    if (n_tasks <= 0)
        return;
    if (tp->n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    tp->fn = fn;
    tp->ctx = ctx;
    tp->n_tasks = n_tasks;
    atomic_store_explicit(&tp->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&tp->n_active, tp->n_threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&tp->lock);
    atomic_fetch_add_explicit(&tp->generation, 1, memory_order_release);
    pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->lock);
    threadpool_work(tp, 0);
    while (atomic_load_explicit(&tp->n_active, memory_order_acquire) > 0)
        cpu_relax();
}
