/* io_darwin.c - the read path on macOS (os.h): F_NOCACHE instead of O_DIRECT (no alignment rule).
 * macOS has no call that drops one file's cached pages. No F_RDADVISE: every read here is a
 * random expert or a piece the image's reader threads already ask for in parallel, and read-ahead
 * would fill the cache F_NOCACHE keeps out of the way. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int os_io_open_uncached(const char *path, bool *aligned) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *aligned = false;
    if (fd < 0)
        return -errno;
    (void)fcntl(fd, F_NOCACHE, 1); /* a hint: reads still succeed where it is refused */
    return fd;
}

int os_io_drop_cache(int fd) {
    (void)fd;
    return -ENOTSUP;
}
