/* clock.h - seconds on the monotonic clock, for timing (never for dates). */
#ifndef SNIPER_CLOCK_H
#define SNIPER_CLOCK_H

#include <time.h>

static inline double clock_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
