/* sys/mman.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_SYS_MMAN_H
#define SDK_SYS_MMAN_H
#include <sys/types.h>
#define PROT_READ 0x01
#define PROT_WRITE 0x02
#define MAP_PRIVATE 0x0002
#define MAP_FIXED 0x0010
#define MAP_ANON 0x1000
#define MAP_ANONYMOUS MAP_ANON
#define MAP_FAILED ((void *)-1)
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
#endif
