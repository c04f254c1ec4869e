/* fault.c - per-site countdowns for the fault injector (fault.h). A countdown of 0 is disarmed. */
#include "fault.h"

#include <stdatomic.h>

static atomic_long fault_countdown[FAULT_COUNT];

void fault_arm(enum fault_site site, long n) {
    atomic_store(&fault_countdown[site], n > 0 ? n : 0);
}

bool fault_hit(enum fault_site site) {
    if (atomic_load_explicit(&fault_countdown[site], memory_order_relaxed) == 0)
        return false;
    return atomic_fetch_sub(&fault_countdown[site], 1) == 1;
}
