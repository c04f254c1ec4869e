/* test_threadpool.c - the thread pool, spin.h and contention.h: every task of every run exactly
 * once with its own function and context, also when the pool's threads share one CPU (workers
 * late to a run); and how they wait: a waiter yields to a process that wants its CPU and then
 * sleeps, a caller waiting for a long task sleeps after its poll, an idle pool beside a busy
 * process costs it almost no CPU. These measure CPU time, never speed. Each case asks a fresh
 * contention monitor (its own, or its pool's): none waits for an earlier case's to forget. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "contention.h"
#include "harness.h"
#include "spin.h"
#include "threadpool.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double process_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Pins the calling thread (and the threads it starts later) to the CPU it is on; *old keeps the
 * affinity to put back. Returns the CPU, or -1 when it cannot (the case is then skipped, saying
 * that `what` was not checked). */
static int pin_here(cpu_set_t *old, const char *what) {
    int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    if (cpu >= 0 && sched_getaffinity(0, sizeof(*old), old) == 0) {
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof(one), &one) == 0)
            return cpu;
    }
    test_skip("cannot pin threads to one CPU: %s NOT checked", what);
    return -1;
}

/* A child process on `cpu` until contender_stop, busy for busy_s of every period_s (period_s 0:
 * busy all the time, another program on a shared machine; else a client that wakes for each
 * streamed token). */
static pid_t waker_start(int cpu, double busy_s, double period_s) {
    pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof(one), &one);
        for (;;) {
            double until = clock_now_s() + busy_s;
            while (period_s <= 0 || clock_now_s() < until)
                ;
            sleep_s(period_s - busy_s);
        }
    }
    if (pid > 0)
        sleep_s(0.05); /* let it start */
    return pid;
}

static pid_t contender_start(int cpu) {
    return waker_start(cpu, 0, 0);
}

static void contender_stop(pid_t pid) {
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* ---- every task once ------------------------------------------------------------------------ */

struct tally {
    int id;                 /* which run this context belongs to */
    atomic_int hits[16];
    atomic_int wrong;       /* tasks run with another run's function */
    atomic_int by_workers;  /* tasks run by a thread other than the caller */
};

/* Counts the task; `parity` is which of the two functions ran it (even runs use tally_a). */
static void tally(struct tally *t, int64_t task, int parity) {
    atomic_fetch_add(&t->hits[task], 1);
    if (t->id % 2 != parity)
        atomic_fetch_add(&t->wrong, 1);
}

static void tally_a(void *ctx, int64_t task, int thread) {
    tally(ctx, task, 0);
    if (thread != 0)
        atomic_fetch_add(&((struct tally *)ctx)->by_workers, 1);
}

static void tally_b(void *ctx, int64_t task, int thread) {
    tally(ctx, task, 1);
    if (thread != 0)
        atomic_fetch_add(&((struct tally *)ctx)->by_workers, 1);
}

/* Many small runs, alternating two functions and contexts: each task of each run exactly once.
 * Returns how many tasks threads other than the caller ran. */
static int many_runs(struct threadpool *tp, int n_runs) {
    static struct tally t[2];
    int bad = 0, by_workers = 0;
    for (int r = 0; r < n_runs && bad < 5; r++) {
        struct tally *c = &t[r % 2];
        memset(c, 0, sizeof(*c));
        c->id = r;
        int n = 1 + (r * 7) % 16;
        threadpool_run(tp, n, r % 2 ? tally_b : tally_a, c);
        for (int i = 0; i < 16; i++)
            if (atomic_load(&c->hits[i]) != (i < n)) {
                CHECK_MSG(false, "run %d: task %d of %d ran %d times", r, i, n,
                          atomic_load(&c->hits[i]));
                bad++;
            }
        CHECK_MSG(atomic_load(&c->wrong) == 0, "run %d: a task ran another run's function", r);
        by_workers += atomic_load(&c->by_workers);
    }
    return by_workers;
}

static void test_every_task_once(void) {
    struct threadpool *tp = threadpool_new(4);
    CHECK(tp != NULL);
    if (tp)
        many_runs(tp, 20000);
    threadpool_free(tp);
}

/* Four threads on one CPU: workers are preempted mid-run and come late to the next ones; and a
 * worker on the caller's CPU could only take it from the caller, so it leaves every task to it. */
static void test_every_task_once_on_one_cpu(void) {
    cpu_set_t old;
    if (pin_here(&old, "late workers") < 0)
        return;
    struct threadpool *tp = threadpool_new(4);
    CHECK(tp != NULL);
    if (tp) {
        int by_workers = many_runs(tp, 5000);
        CHECK_MSG(by_workers == 0, "workers on the caller's CPU ran %d tasks", by_workers);
    }
    threadpool_free(tp);
    sched_setaffinity(0, sizeof(old), &old);
}

/* ---- the contention monitor ----------------------------------------------------------------- */

/* The monitor's rule on losses told at given times, no clock or CPU involved: fresh, it has seen
 * nothing; a client that takes the CPU for half a millisecond every 20 ms (a streamed token read
 * and parsed) never makes it contended, not in 200 s; a program that takes 2 ms of every 5 does
 * within 50 ms, and then it stays contended CONTENTION_HOLD_S and no longer. */
static void test_contention_rule(void) {
    struct contention cm;
    contention_init(&cm);
    const double t0 = 1000.0;
    CHECK(!contention_now(&cm) && !contention_at(&cm, t0));
    int contended = 0;
    for (int i = 1; i <= 10000; i++) {
        contention_add_lost(&cm, t0 + i * 0.02, 0.0005);
        contended += contention_at(&cm, t0 + i * 0.02);
    }
    CHECK_MSG(contended == 0, "%d of 10000 brief wakes 20 ms apart made the monitor contended",
              contended);
    double t = t0 + 300, first = 0;
    for (int i = 0; i < 20 && first == 0; i++) {
        t += 0.005;
        contention_add_lost(&cm, t, 0.002);
        if (contention_at(&cm, t))
            first = t;
    }
    CHECK_MSG(first > 0 && first - (t0 + 300) <= 0.05,
              "2 ms lost of every 5: contended after %.3f s", first > 0 ? first - t0 - 300 : -1.0);
    if (first > 0) {
        CHECK_MSG(contention_at(&cm, first + CONTENTION_HOLD_S - 0.001),
                  "no longer contended %.3f s after the overflow", CONTENTION_HOLD_S - 0.001);
        CHECK_MSG(!contention_at(&cm, first + CONTENTION_HOLD_S + 0.001),
                  "still contended %.3f s after the overflow", CONTENTION_HOLD_S + 0.001);
    }
    contention_release(&cm);
}

/* ---- how they wait -------------------------------------------------------------------------- */

/* A spin beside a process that wants the same CPU stops at its first yield rather than polling for
 * its time limit; a few such spins make the machine contended, and the spins after that are
 * brief. */
static void test_spin_yields(void) {
    cpu_set_t old;
    int cpu = pin_here(&old, "contention");
    if (cpu < 0)
        return;
    struct contention cm;
    contention_init(&cm);
    pid_t pid = contender_start(cpu);
    CHECK(pid > 0);
    double t0 = clock_now_s(), c0 = thread_cpu_s();
    struct spin sp = spin_start(&cm, 0.5);
    while (spin_more(&sp))
        ;
    double wall = clock_now_s() - t0, cpu_s = thread_cpu_s() - c0;
    CHECK_MSG(wall < 0.1 && cpu_s < 0.02, "a 0.5 s spin beside a busy process: %.3f s, %.3f s CPU",
              wall, cpu_s);
    int spins = 1;
    for (; !contention_now(&cm) && clock_now_s() < t0 + 2.0; spins++) {
        sp = spin_start(&cm, 0.5);
        while (spin_more(&sp))
            ;
    }
    CHECK_MSG(contention_now(&cm), "%d spins in %.2f s beside a busy process: not contended",
              spins, clock_now_s() - t0);
    c0 = thread_cpu_s();
    sp = spin_start(&cm, 0.5);
    while (spin_more(&sp))
        ;
    cpu_s = thread_cpu_s() - c0;
    CHECK_MSG(cpu_s < 0.005, "the next spin polled %.4f s of CPU", cpu_s);
    contender_stop(pid);
    sched_setaffinity(0, sizeof(old), &old);
    contention_release(&cm);
}

/* The time a spinner really lost, judged by contention.h's rule with half its burst (a share of
 * 10% drained, 5 ms beyond it, held 0.3 s), fed with each spin's wall time beyond its CPU time:
 * more than its slow yields can have lost. A monitor contended while this never overflowed lately
 * saw contention that was not there; while it did, another program really held the CPU. */
struct lost_time {
    double lost_s, at; /* the bucket, as of clock_now_s() `at` */
    double over_at;    /* when it last overflowed (0: never) */
};

static void lost_time_add(struct lost_time *l, double now, double lost_s) {
    double drained = l->lost_s - (now - l->at) * 0.1;
    l->lost_s = (drained > 0 ? drained : 0) + lost_s;
    l->at = now;
    if (l->lost_s > 0.005)
        l->over_at = now;
}

static bool lost_time_explains(const struct lost_time *l, double now) {
    return l->over_at > 0 && now - l->over_at <= 0.3;
}

/* A client on the same CPU that wakes for half a millisecond every 20 ms (a streamed token read
 * and parsed) makes spins give way, but the monitor never counts as contended: it would have made
 * every wait block and every run the caller's alone, a third of decode speed lost to a client
 * reading the stream. Contention that the time the spinner really lost explains (another program
 * on a shared machine: the other tests) is not held against it; up to three tries of a second,
 * each with a fresh monitor, and a skip when the machine left too few spins to judge. */
static void test_spin_brief_waker(void) {
    cpu_set_t old;
    int cpu = pin_here(&old, "a brief waker");
    if (cpu < 0)
        return;
    pid_t pid = waker_start(cpu, 0.0005, 0.02);
    CHECK(pid > 0);
    int gave_way = 0, contended = 0, unexplained = 0, quiet = 0, spins = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        struct contention cm;
        contention_init(&cm);
        struct lost_time lt = {0};
        gave_way = contended = unexplained = quiet = spins = 0;
        for (double until = clock_now_s() + 1.0; clock_now_s() < until; spins++) {
            double c0 = thread_cpu_s(), t0 = clock_now_s();
            struct spin sp = spin_start(&cm, 0.01);
            while (spin_more(&sp))
                ;
            gave_way += spin_gave_way(&sp);
            double now = clock_now_s();
            lost_time_add(&lt, now, (now - t0) - (thread_cpu_s() - c0));
            bool explained = lost_time_explains(&lt, now);
            quiet += !explained;
            if (contention_now(&cm)) {
                contended++;
                unexplained += !explained;
            }
        }
        contention_release(&cm);
        if (unexplained == 0 && 2 * quiet >= spins)
            break;
    }
    contender_stop(pid);
    sched_setaffinity(0, sizeof(old), &old);
    CHECK_MSG(unexplained == 0, "%d of %d spins beside a brief waker saw the monitor contended with "
              "no time lost to explain it (%d contended, %d gave way)", unexplained, spins,
              contended, gave_way);
    if (unexplained == 0 && 2 * quiet < spins) {
        test_skip("another program held the CPU through %d of %d spins: a brief waker NOT checked",
                  spins - quiet, spins);
        return;
    }
    CHECK_MSG(gave_way > 0, "%d spins beside a waker: none gave way", spins);
}

/* Alone on its CPU, a spin polls to its time limit (an idle machine keeps its speed): a spin that
 * ends early must have given way, and lost at least half a slow yield's time off its CPU (wall
 * time beyond its CPU time) to the thread the kernel ran there. Ten spins, each with a fresh
 * monitor, since on a shared machine others may want the CPU now and then; at most two may give
 * way with no such loss (a host that takes the vCPU away shows none here: no steal time), where a
 * spin that gives way at a yield that came straight back, or ran another thread only briefly,
 * does in all ten. */
static void test_spin_alone(void) {
    int full = 0, lost = 0, unseen = 0, early = 0;
    double unseen_wall = 0;
    for (int attempt = 0; attempt < 10; attempt++) {
        struct contention cm;
        contention_init(&cm);
        double t0 = clock_now_s(), c0 = thread_cpu_s();
        struct spin sp = spin_start(&cm, 0.02);
        while (spin_more(&sp))
            ;
        bool gave_way = spin_gave_way(&sp);
        double wall = clock_now_s() - t0, off_cpu = wall - (thread_cpu_s() - c0);
        contention_release(&cm);
        if (wall >= 0.02)
            full++;
        else if (!gave_way)
            early++;
        else if (off_cpu >= SPIN_SLOW_YIELD_S / 2)
            lost++;
        else {
            unseen++;
            unseen_wall = wall;
        }
    }
    CHECK_MSG(early == 0, "%d of 10 0.02 s spins alone ended early without giving way", early);
    CHECK_MSG(unseen <= 2, "%d of 10 0.02 s spins gave way losing no time to another thread (the "
              "last after %.6f s; %d ran their time, %d lost it)", unseen, unseen_wall, full, lost);
}

/* A pool of 2 whose worker stays on one CPU (it inherits the affinity it is created with) while
 * the caller is pinned to another: a worker on the caller's CPU would leave every task to it.
 * *worker_cpu is the worker's CPU; *old keeps the affinity to put back. Returns NULL, saying that
 * `what` was not checked, with fewer than 2 CPUs. */
static struct threadpool *pool_beside_caller(cpu_set_t *old, int *worker_cpu, const char *what) {
    cpu_set_t one;
    int n_cpu = 0, cpus[2];
    if (sched_getaffinity(0, sizeof(*old), old) == 0)
        for (int c = 0; c < CPU_SETSIZE && n_cpu < 2; c++)
            if (CPU_ISSET(c, old))
                cpus[n_cpu++] = c;
    if (n_cpu < 2) {
        test_skip("fewer than 2 CPUs: %s NOT checked", what);
        return NULL;
    }
    CPU_ZERO(&one);
    CPU_SET(cpus[1], &one);
    sched_setaffinity(0, sizeof(one), &one);
    struct threadpool *tp = threadpool_new(2);
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    sched_setaffinity(0, sizeof(one), &one);
    CHECK(tp != NULL);
    if (!tp)
        sched_setaffinity(0, sizeof(*old), old);
    *worker_cpu = cpus[1];
    return tp;
}

/* A worker whose CPU another program wants gives it way (its wait between runs sees a slow yield),
 * and from then on a run is the caller's alone for a while: no worker, which would run at half
 * speed and hold every run back, takes a task. The worker shares its CPU with a busy process; the
 * caller has another. */
static void test_contended_runs_on_caller(void) {
    cpu_set_t old;
    int worker_cpu;
    struct threadpool *tp = pool_beside_caller(&old, &worker_cpu, "runs under contention");
    if (!tp)
        return;
    pid_t pid = contender_start(worker_cpu);
    CHECK(pid > 0);
    static struct tally t;
    struct contention *cm = threadpool_contention(tp); /* fresh: the pool is new */
    double until = clock_now_s() + 5.0;
    while (!contention_now(cm) && clock_now_s() < until) {
        memset(&t, 0, sizeof(t));
        threadpool_run(tp, 16, tally_a, &t); /* wakes the worker, whose wait then gives way */
        sleep_s(0.001);
    }
    CHECK_MSG(contention_now(cm), "the pool never saw its worker's CPU wanted");
    int runs = 0, by_workers = 0;
    for (; runs < 1000 && contention_now(cm); runs++) {
        memset(&t, 0, sizeof(t));
        threadpool_run(tp, 16, tally_a, &t);
        by_workers += atomic_load(&t.by_workers);
    }
    CHECK_MSG(runs > 0 && by_workers == 0, "workers ran %d tasks of %d contended runs", by_workers,
              runs);
    contender_stop(pid);
    threadpool_free(tp);
    sched_setaffinity(0, sizeof(old), &old);
}

struct slow_ctx {
    atomic_int worker_slept;
};

static void slow_on_worker(void *ctx, int64_t task, int thread) {
    struct slow_ctx *c = ctx;
    (void)task;
    if (thread != 0) {
        sleep_s(1.0);
        atomic_store(&c->worker_slept, 1);
    } else { /* a few ms of work, so that the worker takes the other task */
        double until = clock_now_s() + 0.005;
        while (clock_now_s() < until)
            ;
    }
}

static void nothing(void *ctx, int64_t task, int thread) {
    (void)ctx;
    (void)task;
    (void)thread;
}

/* The caller, waiting for a worker's task that takes a second, sleeps after its poll (at most
 * THREADPOOL_SPIN_S, 0.1 s) instead of polling for the whole second. */
static void test_caller_sleeps(void) {
    cpu_set_t old;
    int worker_cpu;
    struct threadpool *tp = pool_beside_caller(&old, &worker_cpu, "the caller's wait");
    if (!tp)
        return;
    bool measured = false;
    for (int attempt = 0; attempt < 5 && !measured; attempt++) {
        struct slow_ctx c = {0};
        threadpool_run(tp, 8, nothing, &c); /* the worker is awake and polling */
        double c0 = thread_cpu_s();
        threadpool_run(tp, 2, slow_on_worker, &c);
        double cpu_s = thread_cpu_s() - c0;
        if (!atomic_load(&c.worker_slept))
            continue; /* the caller took both tasks: the worker was late */
        measured = true;
        CHECK_MSG(cpu_s < 0.2, "the caller used %.3f s of CPU waiting 1 s for a worker", cpu_s);
    }
    if (!measured)
        test_skip("the worker never took a task in 5 runs: the caller's wait NOT checked");
    threadpool_free(tp);
    sched_setaffinity(0, sizeof(old), &old);
}

/* An idle pool beside a process busy on the same CPU: the workers stop polling at once and
 * sleep, leaving the CPU to it. */
static void test_idle_pool_yields(void) {
    cpu_set_t old;
    int cpu = pin_here(&old, "contention");
    if (cpu < 0)
        return;
    struct threadpool *tp = threadpool_new(4);
    CHECK(tp != NULL);
    pid_t pid = contender_start(cpu);
    CHECK(pid > 0);
    if (tp) {
        threadpool_run(tp, 16, nothing, NULL);
        double c0 = process_cpu_s(), m0 = thread_cpu_s();
        sleep_s(0.5);
        double workers = (process_cpu_s() - c0) - (thread_cpu_s() - m0);
        CHECK_MSG(workers < 0.005,
                  "three idle workers took %.4f s of CPU from a busy process in 0.5 s", workers);
    }
    contender_stop(pid);
    threadpool_free(tp);
    sched_setaffinity(0, sizeof(old), &old);
}

static const struct test_case cases[] = {
    {"every_task_once", test_every_task_once},
    {"every_task_once_on_one_cpu", test_every_task_once_on_one_cpu},
    {"contention_rule", test_contention_rule},
    {"spin_yields", test_spin_yields},
    {"spin_brief_waker", test_spin_brief_waker},
    {"contended_runs_on_caller", test_contended_runs_on_caller},
    {"spin_alone", test_spin_alone},
    {"caller_sleeps", test_caller_sleeps},
    {"idle_pool_yields", test_idle_pool_yields},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
