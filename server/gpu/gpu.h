/* gpu.h - the GPU device the engine's Vulkan backend runs on: choosing and opening a device,
 * buffers in its memory, and recording compute kernels into one command buffer that is submitted
 * once (a step, or a layer), never once per kernel.
 *
 *     int i = gpu_choose("auto", err, sizeof(err));     // -1: none fits, run on the CPU
 *     struct gpu *g = gpu_open(i, 0, err, sizeof(err));
 *     struct gpu_buf *w = gpu_buf_new(g, bytes, err, sizeof(err));
 *     gpu_buf_write(g, w, 0, host, bytes);
 *     int k = gpu_kernel(g, "matvec_q8_0");
 *     gpu_begin(g);
 *     gpu_dispatch(g, k, &push, sizeof(push), n_groups, 1, 1);   // push holds gpu_buf_addr()s
 *     gpu_barrier(g);
 *     ...
 *     gpu_submit(g);                                              // 0, or the device's error
 *
 * Kernels are GLSL compute shaders (server/gpu/shaders/NAME.comp) compiled by glslc at build time
 * and embedded as SPIR-V; every pipeline is made at gpu_open. They reach their buffers by device
 * address (Vulkan 1.2's bufferDeviceAddress) passed in push constants of at most
 * GPU_PUSH_MAX bytes: no descriptor sets, and no limit on a buffer's bound range.
 *
 * A build without the Vulkan headers or glslc has this API too: gpu_choose finds no device and
 * gpu_open says why (gpu_none.c). */
#ifndef SNIPER_GPU_H
#define SNIPER_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPU_PUSH_MAX 128 /* bytes of push constants every Vulkan device takes */

enum gpu_type { GPU_TYPE_OTHER, GPU_TYPE_INTEGRATED, GPU_TYPE_DISCRETE, GPU_TYPE_VIRTUAL,
                GPU_TYPE_CPU };

struct gpu_info {
    int index;               /* in the loader's enumeration */
    char name[256];          /* "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char driver[256];        /* driver name and info */
    enum gpu_type type;
    uint32_t api_version;    /* VK_MAKE_API_VERSION */
    uint64_t device_bytes;   /* the largest device-local heap */
    uint64_t host_bytes;     /* the largest host-visible heap that is not device-local */
    bool unified;            /* device-local memory the host can map (an APU, lavapipe) */
    bool usable;             /* has every feature the backend needs (why_not says what is missing) */
    char why_not[160];
    bool int_dot;            /* VK_KHR_shader_integer_dot_product (enabled: the *_dot kernels) */
    bool coopmat;            /* VK_KHR_cooperative_matrix */
    bool fma_fused;          /* its fma() rounds once (gpu_open's probe; else emulated) */
    bool denorm_preserve;    /* it promises to keep float subnormals (shaderDenormPreserveFloat32):
                              * where not, a product whose block scales are subnormal may give 0 */
    uint32_t subgroup_size;
    uint32_t max_groups[3];  /* workgroups one dispatch may have, per dimension */
};

struct gpu;
struct gpu_buf;

/* The devices the loader sees, into out[0 .. max). Returns how many there are (0: none), or a
 * negative error (no loader, no Vulkan 1.2 instance) with a message. */
int gpu_list(struct gpu_info *out, int max, char *err, size_t err_len);

/* The device spec picks: "auto" (or NULL, "") the first usable discrete GPU, else integrated,
 * else virtual; a CPU-type device (lavapipe) only when named by number. "none": no device.
 * "N": device N, which must be usable. Returns the index, -1 for none (err says why when a device
 * was looked for and none fits), or -EINVAL for a bad or unusable spec, with a message. */
int gpu_choose(const char *spec, char *err, size_t err_len);

/* Opens device index with every kernel's pipeline made; budget_bytes (0: the device-local heap's
 * size) bounds what gpu_buf_new allocates. SNIPER_GPU_NO_MAP=1 in the environment makes it copy
 * through the staging buffer even where device memory could be mapped (the tests' way to run the
 * discrete cards' path on lavapipe). Returns the device (gpu_close frees it) or NULL with a
 * message. */
struct gpu *gpu_open(int index, uint64_t budget_bytes, char *err, size_t err_len);

/* Frees every pipeline and the device. Buffers must be freed first.
 * Accepts NULL. */
void gpu_close(struct gpu *g);

const struct gpu_info *gpu_get_info(const struct gpu *g);

/* Bytes of buffers allocated now, and the budget they live under. */
uint64_t gpu_used_bytes(const struct gpu *g);
uint64_t gpu_budget_bytes(const struct gpu *g);

/* One line per device heap and the budget ("gpu: heap 0: 79.6 GiB device-local ..."), for
 * start-up logs: writes at most n bytes into buf, returns buf. */
const char *gpu_describe(const struct gpu *g, char *buf, size_t n);

/* A buffer of bytes (> 0) in device memory, zeroed. Returns it (gpu_buf_free frees it) or NULL
 * with a message: past the budget (-ENOSPC's case: both sizes named) or refused by the device. */
struct gpu_buf *gpu_buf_new(struct gpu *g, size_t bytes, char *err, size_t err_len);
void gpu_buf_free(struct gpu *g, struct gpu_buf *b); /* accepts NULL */

/* A buffer of bytes (> 0) in host memory that kernels reach by device address too (over the bus
 * on a discrete card: for a few KB a step, such as a router's logits), zeroed and mapped
 * (gpu_buf_host); not counted in the budget. Returns it or NULL with a message. */
struct gpu_buf *gpu_buf_new_host(struct gpu *g, size_t bytes, char *err, size_t err_len);

/* The host's view of b: a host buffer's, or a device buffer's on unified memory; else NULL.
 * What kernels wrote is there once the submit that wrote it returned. */
void *gpu_buf_host(const struct gpu_buf *b);

/* b's device address (what kernels take in their push constants) and size. */
uint64_t gpu_buf_addr(const struct gpu_buf *b);
size_t gpu_buf_bytes(const struct gpu_buf *b);

/* Copies n bytes from host memory into b at off, or from b at off into host memory, and waits.
 * Not while recording. Returns 0, -EINVAL (out of range, or recording), or -EIO (the device
 * failed; gpu_error says how). */
int gpu_buf_write(struct gpu *g, struct gpu_buf *b, size_t off, const void *src, size_t n);
int gpu_buf_read(struct gpu *g, const struct gpu_buf *b, size_t off, void *dst, size_t n);

/* The kernel built from shaders/NAME.comp: its id, or -1 when there is none or g could not make
 * it (a NAME_dot kernel on a device without the integer dot product). */
int gpu_kernel(const struct gpu *g, const char *name);

/* Starts recording. Returns 0 or -EINVAL when already recording, -EIO when the device failed. */
int gpu_begin(struct gpu *g);

/* Records kernel k over groups (nx, ny, nz) with push constants push[0 .. push_bytes). Errors
 * (a bad kernel, push too large, too many groups, not recording) are kept and returned by
 * gpu_submit. */
void gpu_dispatch(struct gpu *g, int k, const void *push, size_t push_bytes, uint32_t nx,
                  uint32_t ny, uint32_t nz);

/* Orders what was recorded before before what follows (every shader write made visible). Returns
 * whether it recorded one: nothing recorded since the last barrier needs none. */
bool gpu_barrier(struct gpu *g);

/* The dispatches and the barriers recorded since g was opened (what a step costs in launches and
 * waits: the profile's counts). */
void gpu_counts(const struct gpu *g, uint64_t *dispatches, uint64_t *barriers);

/* Records dst[dst_off ..] = src[src_off ..] for n bytes. */
void gpu_copy(struct gpu *g, struct gpu_buf *dst, size_t dst_off, const struct gpu_buf *src,
              size_t src_off, size_t n);

/* Records b[0 .. bytes) = 0 (a sequence's recurrent state starting over). */
void gpu_zero(struct gpu *g, struct gpu_buf *b);

/* Submits what was recorded so far without waiting and goes on recording in another command
 * buffer (GPU_RING of them), ordered after it: the device starts on a long step's first layers
 * while the host records the rest. Returns as gpu_submit (on an error nothing is recording, and
 * what was sent before has finished). */
#define GPU_RING 4
int gpu_flush(struct gpu *g);

/* Ends recording, submits, waits (for what gpu_flush sent, too). Returns 0, the first recording error (-EINVAL), or -EIO when
 * the device failed (VK_ERROR_DEVICE_LOST: the device is unusable from then on; every later call
 * returns -EIO). gpu_error says what happened. */
int gpu_submit(struct gpu *g);

/* Timestamps (profiling): gpu_stamp records one where the work recorded before it has finished,
 * and returns its index in this recording (-1: the device counts no time, or GPU_STAMPS are
 * taken); after gpu_submit, gpu_stamps_read puts the submit's stamps (at most max) in ns, as
 * nanoseconds after the first, and returns how many, or -EINVAL / -EIO. */
#define GPU_STAMPS 4096
int gpu_stamp(struct gpu *g);
int gpu_stamps_read(struct gpu *g, double *ns, int max);

/* The last failure's message ("" when none). */
const char *gpu_error(const struct gpu *g);

#endif
