/* io_darwin.c - the read path on macOS (os.h): F_NOCACHE instead of O_DIRECT (no alignment rule),
 * F_RDADVISE for read-ahead. macOS has no call that drops one file's cached pages. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

int os_io_open_uncached(const char *path, bool *aligned) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *aligned = false;
    if (fd < 0)
        return -errno;
    (void)fcntl(fd, F_NOCACHE, 1); /* a hint: reads still succeed where it is refused */
    return fd;
}

void os_io_readahead(int fd, uint64_t off, uint64_t len) {
    struct radvisory ra = {.ra_offset = (off_t)off, .ra_count = len > INT_MAX ? INT_MAX : (int)len};
    (void)fcntl(fd, F_RDADVISE, &ra);
}

int os_io_drop_cache(int fd) {
    (void)fd;
    return -ENOTSUP;
}
