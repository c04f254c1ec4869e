/* sys/types.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_SYS_TYPES_H
#define SDK_SYS_TYPES_H
#include <stddef.h>
typedef long long off_t;
typedef long ssize_t;
#endif
