/* gpu_none.c - gpu.h in a build without the Vulkan backend (no libvulkan-dev headers or no glslc
 * when it was built): no device is ever found, and opening one says why. */
#include "gpu.h"

#include <errno.h>
#include <string.h>

#include "err.h"

#define GPU_NONE_WHY "this sniperd was built without the Vulkan backend (libvulkan-dev and glslc " \
                     "were missing at build time)"

int gpu_list(struct gpu_info *out, int max, char *err, size_t err_len) {
    (void)out;
    (void)max;
    err_set(err, err_len, GPU_NONE_WHY);
    return -ENOSYS;
}

int gpu_choose(const char *spec, char *err, size_t err_len) {
    if (!spec || !*spec || strcmp(spec, "auto") == 0 || strcmp(spec, "none") == 0) {
        err_set(err, err_len, GPU_NONE_WHY);
        return -1;
    }
    err_set(err, err_len, "--gpu %s: " GPU_NONE_WHY, spec);
    return -EINVAL;
}

struct gpu *gpu_open(int index, uint64_t budget_bytes, char *err, size_t err_len) {
    (void)index;
    (void)budget_bytes;
    err_set(err, err_len, GPU_NONE_WHY);
    return NULL;
}

void gpu_close(struct gpu *g) {
    (void)g;
}

/* No struct gpu exists in this build (gpu_open never returns one): the rest is unreachable. */
const struct gpu_info *gpu_get_info(const struct gpu *g) {
    (void)g;
    return NULL;
}
uint64_t gpu_used_bytes(const struct gpu *g) {
    (void)g;
    return 0;
}
uint64_t gpu_budget_bytes(const struct gpu *g) {
    (void)g;
    return 0;
}
const char *gpu_describe(const struct gpu *g, char *buf, size_t n) {
    (void)g;
    if (n)
        buf[0] = '\0';
    return buf;
}
struct gpu_buf *gpu_buf_new(struct gpu *g, size_t bytes, char *err, size_t err_len) {
    (void)g;
    (void)bytes;
    err_set(err, err_len, GPU_NONE_WHY);
    return NULL;
}
struct gpu_buf *gpu_buf_new_host(struct gpu *g, size_t bytes, char *err, size_t err_len) {
    return gpu_buf_new(g, bytes, err, err_len);
}
void *gpu_buf_host(const struct gpu_buf *b) {
    (void)b;
    return NULL;
}
void gpu_buf_free(struct gpu *g, struct gpu_buf *b) {
    (void)g;
    (void)b;
}
uint64_t gpu_buf_addr(const struct gpu_buf *b) {
    (void)b;
    return 0;
}
size_t gpu_buf_bytes(const struct gpu_buf *b) {
    (void)b;
    return 0;
}
int gpu_buf_write(struct gpu *g, struct gpu_buf *b, size_t off, const void *src, size_t n) {
    (void)g, (void)b, (void)off, (void)src, (void)n;
    return -ENOSYS;
}
int gpu_buf_read(struct gpu *g, const struct gpu_buf *b, size_t off, void *dst, size_t n) {
    (void)g, (void)b, (void)off, (void)dst, (void)n;
    return -ENOSYS;
}
int gpu_kernel(const struct gpu *g, const char *name) {
    (void)g, (void)name;
    return -1;
}
int gpu_begin(struct gpu *g) {
    (void)g;
    return -ENOSYS;
}
void gpu_dispatch(struct gpu *g, int k, const void *push, size_t push_bytes, uint32_t nx,
                  uint32_t ny, uint32_t nz) {
    (void)g, (void)k, (void)push, (void)push_bytes, (void)nx, (void)ny, (void)nz;
}
bool gpu_barrier(struct gpu *g) {
    (void)g;
    return false;
}
void gpu_counts(const struct gpu *g, uint64_t *dispatches, uint64_t *barriers) {
    (void)g;
    *dispatches = *barriers = 0;
}
void gpu_copy(struct gpu *g, struct gpu_buf *dst, size_t dst_off, const struct gpu_buf *src,
              size_t src_off, size_t n) {
    (void)g, (void)dst, (void)dst_off, (void)src, (void)src_off, (void)n;
}
void gpu_zero(struct gpu *g, struct gpu_buf *b) {
    (void)g, (void)b;
}
int gpu_submit(struct gpu *g) {
    (void)g;
    return -ENOSYS;
}
int gpu_flush(struct gpu *g) {
    (void)g;
    return -ENOSYS;
}
const char *gpu_error(const struct gpu *g) {
    (void)g;
    return GPU_NONE_WHY;
}
int gpu_stamp(struct gpu *g) {
    (void)g;
    return -1;
}
int gpu_stamps_read(struct gpu *g, double *ns, int max) {
    (void)g;
    (void)ns;
    (void)max;
    return -EINVAL;
}
