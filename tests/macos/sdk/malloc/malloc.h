/* malloc/malloc.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_MALLOC_MALLOC_H
#define SDK_MALLOC_MALLOC_H
#include <stddef.h>
typedef struct _malloc_zone_t malloc_zone_t;
size_t malloc_zone_pressure_relief(malloc_zone_t *zone, size_t goal);
#endif
