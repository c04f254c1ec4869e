/* threadpool.c - parallel-for over persistent workers. A run is described in runs[gen & 1] and
 * published by storing its generation in `work`, whose low half is the next task to hand out;
 * anyone takes a task with a compare-and-swap that also checks the generation, so a worker that
 * comes late to a run can never take a task of the next one, and the description it reads stays
 * its run's until the run after next (two slots). A run ends when `n_done` reaches its task
 * count: the caller never waits for a worker that took no task (under contention it may not even
 * have been scheduled yet). A worker that finds itself on the CPU the caller published the run
 * from takes no task: it could only run there by taking the CPU from the caller (on a busy
 * machine the scheduler puts a woken worker next to its waker: 88% of their tasks, measured).
 * Waiters, workers between runs and the caller for the last tasks, poll (spin.h: only while
 * nobody else wants the CPU) and then sleep on a condition variable; the other side signals only
 * when someone sleeps, so a run costs no system call while all poll. Their slow yields go to the
 * pool's contention monitor, set up before the first worker starts and released after the last
 * one is joined. */
#include "threadpool.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "os.h"
#include "spin.h"

/* Seconds a waiter polls before it sleeps when nothing else wants the CPU. Longer than any wait
 * between two runs of a token (an expert read under a small budget takes up to tens of ms): in a
 * VM a vCPU that slept resumes slowly (measured: expert compute 3.7x slower right after a 13 ms
 * sleep; docs/benchmarks.md). */
#define THREADPOOL_SPIN_S 0.1

#define WORK_GEN(w) ((uint32_t)((w) >> 32))
#define WORK_TASK(w) ((uint32_t)(w))

struct threadpool {
    int n_threads;
    pthread_t *threads; /* [n_threads - 1] workers */
    pthread_mutex_t lock;
    pthread_cond_t wake;             /* a new run, or stop (workers sleep on it) */
    pthread_cond_t done;             /* the run's last task is done (the caller sleeps on it) */
    atomic_uint_fast64_t work;       /* generation << 32 | next task to hand out */
    atomic_int_fast64_t n_done;      /* tasks of the current run finished */
    atomic_int n_sleeping;           /* workers asleep on wake */
    atomic_bool caller_sleeping;     /* the caller is asleep on done */
    atomic_bool stop;
    struct threadpool_task_run {
        _Atomic int64_t n_tasks;     /* < 2^32 */
        atomic_int caller_cpu;       /* the CPU the caller published the run from */
        _Atomic threadpool_fn fn;
        void *_Atomic ctx;
    } runs[2];                       /* [gen & 1]: the current run's, and the last one's */
    /* told by every wait of the pool, asked by every wait and run, written only on a slow yield:
     * a cache line of its own, apart from the fields every run writes (as the process-wide state
     * it replaced was) */
    _Alignas(64) struct contention contention;
};

struct worker_arg {
    struct threadpool *tp;
    int thread;
};

/* Takes and runs the tasks of run `gen` until none is left (or a newer run replaced it). A
 * successful exchange on (gen, t) proves that gen is still the current run (t was not taken, so
 * the run has not ended), hence that runs[gen & 1] still describes it. */
static void threadpool_work(struct threadpool *tp, uint32_t gen, int thread) {
    struct threadpool_task_run *run = &tp->runs[gen & 1];
    uint64_t w = atomic_load_explicit(&tp->work, memory_order_acquire);
    while (WORK_GEN(w) == gen) {
        const int64_t n_tasks = atomic_load_explicit(&run->n_tasks, memory_order_relaxed);
        if (WORK_TASK(w) >= n_tasks)
            break;
        /* a worker the scheduler put on the caller's CPU could only run by taking it from the
         * caller: it leaves the tasks to the caller */
        if (thread != 0) {
            int cpu = os_cpu_current();
            if (cpu >= 0 && cpu == atomic_load_explicit(&run->caller_cpu, memory_order_relaxed))
                break;
        }
        if (!atomic_compare_exchange_weak_explicit(&tp->work, &w, w + 1, memory_order_acquire,
                                                   memory_order_acquire))
            continue;
        threadpool_fn fn = atomic_load_explicit(&run->fn, memory_order_relaxed);
        fn(atomic_load_explicit(&run->ctx, memory_order_relaxed), (int64_t)WORK_TASK(w), thread);
        /* seq_cst against the caller going to sleep */
        if (atomic_fetch_add(&tp->n_done, 1) + 1 == n_tasks && atomic_load(&tp->caller_sleeping)) {
            pthread_mutex_lock(&tp->lock);
            pthread_cond_signal(&tp->done);
            pthread_mutex_unlock(&tp->lock);
        }
        w = atomic_load_explicit(&tp->work, memory_order_acquire);
    }
}

/* Waits for a generation other than seen (or stop); returns false on stop. */
static bool threadpool_wait_run(struct threadpool *tp, uint32_t seen) {
    struct spin sp = spin_start(&tp->contention, THREADPOOL_SPIN_S);
    do {
        if (WORK_GEN(atomic_load_explicit(&tp->work, memory_order_acquire)) != seen)
            return true;
        if (atomic_load_explicit(&tp->stop, memory_order_relaxed))
            return false;
    } while (spin_more(&sp));
    pthread_mutex_lock(&tp->lock);
    atomic_fetch_add(&tp->n_sleeping, 1); /* seq_cst against the caller's store of work */
    while (WORK_GEN(atomic_load(&tp->work)) == seen && !atomic_load(&tp->stop))
        pthread_cond_wait(&tp->wake, &tp->lock);
    atomic_fetch_sub(&tp->n_sleeping, 1);
    pthread_mutex_unlock(&tp->lock);
    return !atomic_load(&tp->stop);
}

static void *threadpool_main(void *p) {
    struct worker_arg *arg = p;
    struct threadpool *tp = arg->tp;
    int thread = arg->thread;
    free(arg);
    uint32_t seen = 0;
    while (threadpool_wait_run(tp, seen)) {
        seen = WORK_GEN(atomic_load_explicit(&tp->work, memory_order_acquire));
        threadpool_work(tp, seen, thread);
    }
    return NULL;
}

struct threadpool *threadpool_new(int n_threads) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    struct threadpool *tp = aligned_alloc(_Alignof(struct threadpool), sizeof(*tp));
    if (!tp)
        return NULL;
    memset(tp, 0, sizeof(*tp));
    tp->n_threads = n_threads;
    pthread_mutex_init(&tp->lock, NULL);
    pthread_cond_init(&tp->wake, NULL);
    pthread_cond_init(&tp->done, NULL);
    contention_init(&tp->contention);
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
    contention_release(&tp->contention);
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
    contention_release(&tp->contention);
    pthread_cond_destroy(&tp->done);
    pthread_cond_destroy(&tp->wake);
    pthread_mutex_destroy(&tp->lock);
    free(tp->threads);
    free(tp);
}

int threadpool_n_threads(const struct threadpool *tp) {
    return tp->n_threads;
}

struct contention *threadpool_contention(struct threadpool *tp) {
    return &tp->contention;
}

/* The caller's wait for the run's last tasks (taken by workers that are still at them). */
static void threadpool_wait_done(struct threadpool *tp, int64_t n_tasks) {
    struct spin sp = spin_start(&tp->contention, THREADPOOL_SPIN_S);
    do {
        if (atomic_load_explicit(&tp->n_done, memory_order_acquire) == n_tasks)
            return;
    } while (spin_more(&sp));
    pthread_mutex_lock(&tp->lock);
    atomic_store(&tp->caller_sleeping, true); /* seq_cst against the last worker's n_done */
    while (atomic_load(&tp->n_done) != n_tasks)
        pthread_cond_wait(&tp->done, &tp->lock);
    atomic_store(&tp->caller_sleeping, false);
    pthread_mutex_unlock(&tp->lock);
}

void threadpool_run(struct threadpool *tp, int64_t n_tasks, threadpool_fn fn, void *ctx) {
    if (n_tasks <= 0)
        return;
    /* while the machine is contended (contention.h) the run is the caller's alone: a worker
     * sharing a busy CPU runs at half speed and every run waits for its share, while the caller
     * alone can move to a free CPU (docs/benchmarks.md, "Sharing the machine") */
    if (tp->n_threads == 1 || n_tasks == 1 || contention_now(&tp->contention)) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    assert(n_tasks < ((int64_t)1 << 32));
    uint32_t gen = WORK_GEN(atomic_load_explicit(&tp->work, memory_order_relaxed)) + 1;
    struct threadpool_task_run *run = &tp->runs[gen & 1];
    atomic_store_explicit(&run->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&run->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&run->n_tasks, n_tasks, memory_order_relaxed);
    atomic_store_explicit(&run->caller_cpu, os_cpu_current(), memory_order_relaxed);
    atomic_store_explicit(&tp->n_done, 0, memory_order_relaxed);
    atomic_store(&tp->work, (uint64_t)gen << 32); /* seq_cst against a worker going to sleep */
    if (atomic_load(&tp->n_sleeping) > 0) {
        pthread_mutex_lock(&tp->lock);
        pthread_cond_broadcast(&tp->wake);
        pthread_mutex_unlock(&tp->lock);
    }
    threadpool_work(tp, gen, 0);
    threadpool_wait_done(tp, n_tasks);
}
