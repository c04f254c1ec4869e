/* io_linux.c - the read path on Linux (os.h): O_DIRECT opens, posix_fadvise for the rest. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int os_io_open_uncached(const char *path, bool *aligned) {
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    *aligned = fd >= 0;
    return fd >= 0 ? fd : -errno;
}

int os_io_drop_cache(int fd) {
    return -posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}
