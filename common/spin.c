/* spin.c - the clock and the yield behind spin_more, and the process-wide "contended" state: the
 * time until which every wait polls only briefly. Lock-free; any thread may spin. */
#include "spin.h"

#include <sched.h>
#include <stdatomic.h>

#include "clock.h"

/* clock_now_s() until which the machine counts as contended (0: not lately). */
static _Atomic double contended_until;

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
    atomic_store_explicit(&contended_until, after + SPIN_CONTENDED_S, memory_order_relaxed);
    return false;
}

bool spin_contended(void) {
    return clock_now_s() < atomic_load_explicit(&contended_until, memory_order_relaxed);
}

bool spin_gave_way(const struct spin *s) {
    return s->probe && clock_now_s() < s->until;
}
