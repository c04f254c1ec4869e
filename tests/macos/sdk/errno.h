/* errno.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_ERRNO_H
#define SDK_ERRNO_H
extern int *__error(void);
#define errno (*__error())
#define EBUSY 16
#define EINVAL 22
#define ENOTSUP 45
#define ENOSYS 78
#endif
