/* spin.h - waiting without taking a CPU someone else wants. A waiter polls while its CPU has
 * nothing else to run (in a VM a vCPU that slept resumes slowly: docs/benchmarks.md, "Waiting for
 * reads"), and yields the CPU every few microseconds to find out: a yield that comes back late
 * means another thread or process was waiting for it. Then the waiter stops and should block, and
 * tells the contention monitor it was given (contention.h) the time it lost; while that monitor
 * counts as contended, every wait given it polls only SPIN_BRIEF_S before it blocks.
 *
 *     struct spin s = spin_start(threadpool_contention(tp), 0.1);
 *     while (!ready() && spin_more(&s))
 *         ;
 *     if (!ready()) block_until_ready();  */
#ifndef SNIPER_SPIN_H
#define SNIPER_SPIN_H

#include <stdbool.h>

#include "contention.h"

#define SPIN_BRIEF_S 50e-6      /* the poll left while the monitor counts as contended */
#define SPIN_SLOW_YIELD_S 200e-6 /* a yield longer than this: someone else ran on our CPU (a
                                 * CPU-bound program gets a slice of 0.7 ms or more; a kernel
                                 * thread passing by, tens of microseconds) */
#define SPIN_POLLS 64           /* polls between two looks at the clock (about 3 us) */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

struct spin {
    double until;          /* clock_now_s() deadline */
    unsigned n;            /* polls so far */
    bool probe;            /* yield every SPIN_POLLS polls (false while contended) */
    struct contention *cm; /* borrowed: told of a slow yield */
};

/* A wait of at most `seconds` (SPIN_BRIEF_S while cm counts as contended). cm is borrowed for the
 * wait's life and must not be NULL. */
struct spin spin_start(struct contention *cm, double seconds);

/* The slow path of spin_more: the clock and the yield. */
bool spin_check(struct spin *s);

/* Pauses once; false once the time is up or another thread or process wants this CPU (then the
 * caller should block). */
static inline bool spin_more(struct spin *s) {
    cpu_relax();
    return ++s->n % SPIN_POLLS != 0 || spin_check(s);
}

/* After a wait that spin_more ended: true when it ended because another thread or process wanted
 * the CPU (a slow yield), not because its time was up. */
bool spin_gave_way(const struct spin *s);

#endif
