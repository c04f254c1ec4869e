/* mem_linux.c - memory facts on Linux (os.h, procstat.h): the resident set from /proc, glibc's
 * malloc_trim. */
#include "os.h"
#include "procstat.h"

#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

uint64_t procstat_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void os_mem_trim(void) {
    malloc_trim(0);
}
