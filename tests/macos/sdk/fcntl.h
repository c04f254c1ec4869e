/* fcntl.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_FCNTL_H
#define SDK_FCNTL_H
#include <sys/types.h>
#define O_RDONLY 0x0000
#define O_CLOEXEC 0x01000000
#define F_NOCACHE 48
int open(const char *path, int flags, ...);
int fcntl(int fd, int cmd, ...);
#endif
