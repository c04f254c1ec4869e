/* pages_posix.c - pages on macOS, `make PORTABLE=1` and other systems (os.h): no huge-page
 * advice; pages given back by mapping fresh anonymous memory over them (MADV_DONTNEED does not
 * zero on macOS, and posix_madvise's is a no-op in glibc), which frees them at once. */
#include "os.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

size_t os_page_bytes(void) {
    return (size_t)sysconf(_SC_PAGESIZE);
}

void os_pages_huge(void *p, size_t n, bool on) {
    (void)p, (void)n, (void)on;
}

int os_pages_release(void *p, size_t n) {
    void *q = mmap(p, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    return q == MAP_FAILED ? -errno : 0;
}
