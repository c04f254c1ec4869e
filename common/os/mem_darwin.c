/* mem_darwin.c - memory facts on macOS (os.h, procstat.h): the resident set from Mach's task
 * info, the default malloc zone's pressure relief as the trim. */
#include "os.h"
#include "procstat.h"

#include <mach/mach.h>
#include <malloc/malloc.h>

uint64_t procstat_rss_bytes(void) {
    mach_task_basic_info_data_t info;
    mach_msg_type_number_t n = MACH_TASK_BASIC_INFO_COUNT;
    if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, (task_info_t)&info, &n) != KERN_SUCCESS)
        return 0;
    return (uint64_t)info.resident_size;
}

void os_mem_trim(void) {
    (void)malloc_zone_pressure_relief(NULL, 0);
}
