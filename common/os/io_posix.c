/* io_posix.c - the read path of `make PORTABLE=1` and systems other than Linux and macOS (os.h):
 * plain preads, the page cache kept out of the way with posix_fadvise where the OS honours it. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int os_io_open_uncached(const char *path, bool *aligned) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *aligned = false;
    if (fd < 0)
        return -errno;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_NOREUSE); /* advice: a read-once stream */
    return fd;
}

int os_io_drop_cache(int fd) {
    return -posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}
