/* contention.c - the contention monitor's leaky bucket and the time until which it counts as
 * contended. Asking is one relaxed load; telling (a slow yield, already a lost time slice) takes
 * the bucket's mutex. */
#include "contention.h"

#include "clock.h"

void contention_init(struct contention *c) {
    atomic_init(&c->until, 0.0);
    pthread_mutex_init(&c->lock, NULL);
    c->lost_s = c->lost_at = 0;
}

void contention_release(struct contention *c) {
    if (c)
        pthread_mutex_destroy(&c->lock);
}

void contention_add_lost(struct contention *c, double now, double lost_s) {
    pthread_mutex_lock(&c->lock);
    double drained = c->lost_s - (now - c->lost_at) * CONTENTION_LOST_SHARE;
    c->lost_s = (drained > 0 ? drained : 0) + lost_s;
    c->lost_at = now;
    bool over = c->lost_s > CONTENTION_LOST_BURST_S;
    pthread_mutex_unlock(&c->lock);
    if (over)
        atomic_store_explicit(&c->until, now + CONTENTION_HOLD_S, memory_order_relaxed);
}

bool contention_now(struct contention *c) {
    double until = atomic_load_explicit(&c->until, memory_order_relaxed);
    return until > 0 && clock_now_s() < until; /* no clock read on a monitor never contended */
}
