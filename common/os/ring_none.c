/* ring_none.c - the read queue where there is none (os.h): macOS, `make PORTABLE=1`. os_ring_new
 * says so, and the callers read with threads; the other functions are never reached. */
#include "os.h"

#include <errno.h>

struct os_ring *os_ring_new(unsigned depth) {
    (void)depth;
    return NULL;
}

void os_ring_free(struct os_ring *r) {
    (void)r;
}

int os_ring_queue_read(struct os_ring *r, int fd, void *dst, unsigned len, uint64_t off,
                       uint64_t user) {
    (void)r, (void)fd, (void)dst, (void)len, (void)off, (void)user;
    return -ENOSYS;
}

int os_ring_submit(struct os_ring *r) {
    (void)r;
    return -ENOSYS;
}

int os_ring_take(struct os_ring *r, bool wait, uint64_t *user, int *res) {
    (void)r, (void)wait, (void)user, (void)res;
    return -ENOSYS;
}
