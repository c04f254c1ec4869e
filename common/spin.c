/* spin.c - the clock and the yield behind spin_more, and the process-wide "contended" state: the
 * time until which every wait polls only briefly. Any thread may spin; polls are lock-free, a slow
 * yield takes a mutex to account for the time it lost. */
#include "spin.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "clock.h"

/* clock_now_s() until which the machine counts as contended (0: not lately). */
static _Atomic double contended_until;

/* The leaky bucket of time lost in slow yields: it fills by each slow yield's length and drains at
 * SPIN_LOST_SHARE seconds per second. */
static pthread_mutex_t lost_lock = PTHREAD_MUTEX_INITIALIZER;
static double lost_s, lost_at;

/* Accounts a slow yield that gave `lost` seconds away, ending at `now`; true when the bucket
 * overflowed: the machine is contended. */
static bool spin_account_lost(double now, double lost) {
    pthread_mutex_lock(&lost_lock);
    double drained = lost_s - (now - lost_at) * SPIN_LOST_SHARE;
    lost_s = (drained > 0 ? drained : 0) + lost;
    lost_at = now;
    bool over = lost_s > SPIN_LOST_BURST_S;
    pthread_mutex_unlock(&lost_lock);
    return over;
}

struct spin spin_start(double seconds) {
    double now = clock_now_s();
    bool contended = now < atomic_load_explicit(&contended_until, memory_order_relaxed);
    if (contended && seconds > SPIN_BRIEF_S)
        seconds = SPIN_BRIEF_S;
    return (struct spin){now + seconds, 0, !contended};
}

bool spin_check(struct spin *s) {
    double now = clock_now_s();
    if (now >= s->until)
        return false;
    if (!s->probe)
        return true;
    sched_yield(); /* returns at once unless another thread or process was waiting for this CPU */
    double after = clock_now_s();
    if (after - now <= SPIN_SLOW_YIELD_S)
        return true;
    if (spin_account_lost(after, after - now))
        atomic_store_explicit(&contended_until, after + SPIN_CONTENDED_S, memory_order_relaxed);
    return false;
}

bool spin_contended(void) {
    double until = atomic_load_explicit(&contended_until, memory_order_relaxed);
    return until > 0 && clock_now_s() < until; /* no clock read on a machine never contended */
}

bool spin_gave_way(const struct spin *s) {
    return s->probe && clock_now_s() < s->until;
}
