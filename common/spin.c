/* spin.c - the clock and the yield behind spin_more. Any thread may spin; polls are lock-free,
 * and a slow yield is told to the wait's contention monitor (contention.h), which keeps the
 * state every wait given the same monitor sees. */
#include "spin.h"

#include <sched.h>

#include "clock.h"

struct spin spin_start(struct contention *cm, double seconds) {
    double now = clock_now_s();
    bool contended = contention_at(cm, now);
    if (contended && seconds > SPIN_BRIEF_S)
        seconds = SPIN_BRIEF_S;
    return (struct spin){now + seconds, 0, !contended, cm};
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
    contention_add_lost(s->cm, after, after - now);
    return false;
}

bool spin_gave_way(const struct spin *s) {
    return s->probe && clock_now_s() < s->until;
}
