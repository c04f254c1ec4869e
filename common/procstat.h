/* procstat.h - this process's own figures (implemented per OS: common/os/mem_*.c). */
#ifndef SNIPER_PROCSTAT_H
#define SNIPER_PROCSTAT_H

#include <stdint.h>

/* Resident set size now, in bytes (0 if unknown). */
uint64_t procstat_rss_bytes(void);

#endif
