/* os.h - the operating-system layer: everything sniperd asks of the OS beyond POSIX, one concern
 * per file under common/os/, one file per OS (the Makefile picks them: linux, darwin for macOS,
 * posix for `make PORTABLE=1` and other systems). The engine includes this header, never
 * <liburing.h>, O_DIRECT, madvise's Linux advice or /proc. Concerns and their files:
 *     read path   os/io_{linux,darwin,posix}.c    uncached opens, cache drops
 *     read queue  os/ring_{uring,none}.c          a kernel queue of reads (io_uring), or none
 *     pages       os/pages_{linux,posix}.c        page size, huge-page advice, giving pages back
 *     memory      os/mem_{linux,darwin}.c         resident set (procstat.h), allocator trim
 *     CPU         os/cpu_{linux,darwin}.c         current CPU, Arm extensions */
#ifndef SNIPER_OS_H
#define SNIPER_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- read path ------------------------------------------------------------------------------ */

/* Opens path read-only (close-on-exec) for reads that bypass the page cache where the OS allows
 * it: O_DIRECT on Linux (*aligned = true: buffers, offsets and lengths must be multiples of 4096),
 * F_NOCACHE on macOS and posix_fadvise(NOREUSE) elsewhere (*aligned = false). Returns the
 * descriptor, or -errno (Linux: -EINVAL where the file system refuses direct I/O; the caller then
 * opens the file buffered). */
int os_io_open_uncached(const char *path, bool *aligned);

/* Drops fd's cached pages, so that the next reads come from the device. Returns 0 or -errno
 * (-ENOTSUP where the OS cannot). */
int os_io_drop_cache(int fd);

/* ---- read queue ------------------------------------------------------------------------------ */

/* A kernel queue of reads kept in flight without threads (io_uring); absent on other systems. */
struct os_ring;

/* A queue of depth entries, or NULL where there is none (another OS, a build without liburing,
 * a kernel that refuses io_uring): the caller reads with threads instead. Free with os_ring_free. */
struct os_ring *os_ring_new(unsigned depth);
void os_ring_free(struct os_ring *r);

/* Queues a read of len bytes at off of fd into dst, tagged with user; it reaches the kernel at the
 * next os_ring_submit. Returns 0, or -EBUSY when depth reads are already queued or in flight. */
int os_ring_queue_read(struct os_ring *r, int fd, void *dst, unsigned len, uint64_t off,
                       uint64_t user);

/* Gives the queued reads to the kernel. Returns how many, or -errno (they stay queued). */
int os_ring_submit(struct os_ring *r);

/* Takes one finished read: its tag in *user and its result in *res (bytes read, or -errno).
 * Returns 1, 0 when none has finished (never with wait), or -errno. With wait it blocks. */
int os_ring_take(struct os_ring *r, bool wait, uint64_t *user, int *res);

/* ---- pages ----------------------------------------------------------------------------------- */

/* The size of a page in bytes (4 KiB on Linux x86, 16 KiB on Apple Silicon). */
size_t os_page_bytes(void);

/* Asks for transparent huge pages over [p, p + n) (on) or against them (off). Advice only: a
 * no-op where the OS has none. */
void os_pages_huge(void *p, size_t n, bool on);

/* Gives the pages of [p, p + n) (page-aligned) back to the OS; they read as zeros when touched
 * again. Returns 0 or -errno. */
int os_pages_release(void *p, size_t n);

/* ---- memory ---------------------------------------------------------------------------------- */

/* Returns the memory the allocator kept of freed buffers to the OS where it can (malloc_trim). */
void os_mem_trim(void);

/* (this process's resident set: procstat_rss_bytes() in procstat.h, also implemented here) */

/* ---- CPU ------------------------------------------------------------------------------------- */

/* The CPU the calling thread runs on, or -1 where the OS does not say (macOS). */
int os_cpu_current(void);

/* Arm extensions of this CPU (0 on other CPUs). */
#define OS_CPU_ARM_DOTPROD 1u /* SDOT/UDOT (FEAT_DotProd) */
#define OS_CPU_ARM_I8MM 2u    /* SMMLA/UMMLA (FEAT_I8MM) */
unsigned os_cpu_arm_features(void);

/* Whether this x86 CPU converts halves (F16C; CPUID leaf 1, ECX bit 29), false on other CPUs.
 * clang's __builtin_cpu_supports does not know "f16c"; the other x86 extensions are asked of it. */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static inline bool os_cpu_x86_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#else
static inline bool os_cpu_x86_f16c(void) {
    return false;
}
#endif

#endif
