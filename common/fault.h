/* fault.h - a fault injector for tests, after SQLite's: arm a site and its Nth call from then on
 * fails once, so every error path of I/O and allocation can run in a test.
 *
 *     fault_arm(FAULT_READ, 3);          // the third tensor read from now returns -EIO
 *     m = model_load(path, err, n);      // -> NULL, err names the tensor
 *     fault_arm(FAULT_READ, 0);          // disarm
 *
 * Disarmed (the default), fault_hit() is one relaxed atomic load. */
#ifndef SNIPER_FAULT_H
#define SNIPER_FAULT_H

#include <stdbool.h>

enum fault_site {
    FAULT_READ,  /* a read of tensor data from a model file */
    FAULT_ALLOC, /* a large allocation of weights or engine buffers */
    FAULT_WRITE, /* a write of a file the daemon creates (context files): fails as -ENOSPC */
    FAULT_QUEUE, /* a product queued for the thread pool (matmul_add): fails as -ENOSPC, a full
                  * job queue */
    FAULT_QUANTIZE, /* a batch of activation rows quantized (matmul_quantize): fails as
                     * -ENOTSUP, a weight type with no quantize path */
    FAULT_GPU_LOST, /* a submit of recorded GPU work (gpu_submit): fails as the driver's
                     * VK_ERROR_DEVICE_LOST, the device unusable from then on */
    FAULT_COUNT,
};

/* Arms site so that its nth call from now (n >= 1) fails, once; n <= 0 disarms it. */
void fault_arm(enum fault_site site, long n);

/* Counts a call at site; true when this call must fail. Thread-safe. */
bool fault_hit(enum fault_site site);

#endif
