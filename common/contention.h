/* contention.h - a contention monitor: whether another program lately wanted the CPUs a set of
 * waiters runs on. Waiters (spin.h) tell it each slow yield and the time it gave away; when that
 * time outgrows a burst plus a share of the time passed (a leaky bucket: another program holding
 * a CPU, not a client that wakes for each streamed token), the monitor counts as contended for
 * the next CONTENTION_HOLD_S (docs/benchmarks.md, "Sharing the machine"). One per thread pool
 * (threadpool_contention), shared by the expert reads of the engine it serves; any thread may ask
 * and tell. A fresh monitor has seen nothing: tests make one instead of waiting for one to forget.
 *
 *     struct contention cm;
 *     contention_init(&cm);
 *     struct spin s = spin_start(&cm, 0.1);   // spin.h tells cm of slow yields
 *     if (contention_now(&cm)) ...            // wait briefly, run alone
 *     contention_release(&cm);  */
#ifndef SNIPER_CONTENTION_H
#define SNIPER_CONTENTION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define CONTENTION_LOST_SHARE 0.1    /* contended: slow yields took more than this share of the
                                      * time ... */
#define CONTENTION_LOST_BURST_S 0.01 /* ... beyond a burst of this many seconds */
#define CONTENTION_HOLD_S 0.25       /* how long contention, once seen, lasts */

struct contention {
    _Atomic double until;  /* clock_now_s() until which it counts as contended (0: never yet) */
    pthread_mutex_t lock;  /* guards the bucket */
    double lost_s;         /* the bucket: seconds given away in slow yields, draining at
                            * CONTENTION_LOST_SHARE seconds per second since lost_at */
    double lost_at;        /* clock_now_s() of the last slow yield */
};

/* Makes c a monitor that has seen no contention (cannot fail: a default mutex, as everywhere). */
void contention_init(struct contention *c);

/* Releases what contention_init made; c may be NULL. No thread may use c any more. */
void contention_release(struct contention *c);

/* Tells c that a yield ending at `now` (clock_now_s()) gave `lost_s` seconds to another thread or
 * program; c becomes contended for CONTENTION_HOLD_S from now when its bucket overflows. */
void contention_add_lost(struct contention *c, double now, double lost_s);

/* True while c counts as contended at `now` (a clock reading the caller already has). */
static inline bool contention_at(struct contention *c, double now) {
    return now < atomic_load_explicit(&c->until, memory_order_relaxed);
}

/* True while c counts as contended: within the last CONTENTION_HOLD_S the time slow yields gave
 * away outgrew CONTENTION_LOST_BURST_S plus CONTENTION_LOST_SHARE of the time passed. A program
 * holding a CPU gets there in tens of milliseconds; a client that wakes for a millisecond per
 * token never does. Reads no clock on a monitor never contended. */
bool contention_now(struct contention *c);

#endif
