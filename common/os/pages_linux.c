/* pages_linux.c - pages on Linux (os.h): transparent huge pages by madvise, pages given back with
 * MADV_DONTNEED (private anonymous memory reads as zeros afterwards). */
#include "os.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

size_t os_page_bytes(void) {
    return (size_t)sysconf(_SC_PAGESIZE);
}

void os_pages_huge(void *p, size_t n, bool on) {
    (void)madvise(p, n, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}

int os_pages_release(void *p, size_t n) {
    return madvise(p, n, MADV_DONTNEED) == 0 ? 0 : -errno;
}
