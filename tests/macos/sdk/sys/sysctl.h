/* sys/sysctl.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_SYS_SYSCTL_H
#define SDK_SYS_SYSCTL_H
#include <stddef.h>
int sysctlbyname(const char *name, void *old, size_t *oldlen, void *new_value, size_t newlen);
#endif
