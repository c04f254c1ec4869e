/* unistd.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_UNISTD_H
#define SDK_UNISTD_H
#include <sys/types.h>
#define _SC_PAGESIZE 29
long sysconf(int name);
int close(int fd);
ssize_t pread(int fd, void *buf, size_t n, off_t off);
#endif
