/* spin.h - busy-waiting with a time limit, for waits short enough that sleeping costs more than it
 * saves (in a VM a vCPU that slept resumes slowly: docs/benchmarks.md, "Waiting for reads").
 *
 *     struct spin s = spin_start(0.1);
 *     while (!ready() && spin_more(&s))
 *         ;
 *     if (!ready()) sleep_until_ready();  */
#ifndef SNIPER_SPIN_H
#define SNIPER_SPIN_H

#include <stdbool.h>

#include "clock.h"

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

struct spin {
    double until; /* clock_now_s() deadline */
    unsigned n;   /* polls so far */
};

static inline struct spin spin_start(double seconds) {
    return (struct spin){clock_now_s() + seconds, 0};
}

/* Pauses once; false once the time is up (the clock is read every 256 polls). */
static inline bool spin_more(struct spin *s) {
    cpu_relax();
    return ++s->n % 256 != 0 || clock_now_s() < s->until;
}

#endif
