/* gpu_ops.h - the engine's operations as GPU kernels, recorded into the device's command buffer
 * (gpu.h): activation quantization and quantized matrix products, each bit-identical to the CPU
 * kernels of common/quant.h under their accumulation contract (tests/test_gpu.c compares them
 * with memcmp). Tensors are named by device address (gpu_buf_addr + an offset).
 *
 *     struct gpu_ops o;
 *     gpu_ops_init(&o, g, err, sizeof(err));
 *     gpu_begin(g);
 *     gpu_op_quantize(&o, w_type, x, n_embd, act, &act_stride, n_embd, n_tok);
 *     gpu_barrier(g);
 *     gpu_op_matmul(&o, w_type, w, row_bytes, n_in, n_rows, act, act_stride, out, n_rows, n_tok);
 *     gpu_submit(g);
 *     gpu_ops_release(&o); */
#ifndef SNIPER_GPU_OPS_H
#define SNIPER_GPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "qtype.h"

struct gpu_ops {
    struct gpu *g; /* borrowed */
    int matmul[QTYPE_COUNT];   /* kernel of a weight type's product, or -1 */
    int quantize[QTYPE_COUNT]; /* kernel making a weight type's activation rows, or -1 */
    struct gpu_buf *tables;    /* the grid i-quants' codebooks (owned), NULL before init */
    uint64_t table_addr[QTYPE_COUNT]; /* a type's codebook in tables, 0 for types without one */
};

/* Finds the kernels of every weight type g's build has and uploads the grid i-quants' codebooks
 * (common/quant_iq.h's tables, about 50 KiB of device memory, counted in g's budget). Returns 0
 * (gpu_ops_release releases what it holds), -ENOENT when the build has no kernels at all, -ENOMEM
 * when the codebooks find no room, or gpu_buf_write's error; a message says which. On error
 * nothing is held. */
int gpu_ops_init(struct gpu_ops *o, struct gpu *g, char *err, size_t err_len);

/* Frees what gpu_ops_init holds; call it before gpu_close. Accepts an o that init failed on. */
void gpu_ops_release(struct gpu_ops *o);

/* True when weights of type t can be multiplied on the GPU. */
bool gpu_ops_has_type(const struct gpu_ops *o, enum qtype t);

/* Records dst rows = t's activation format of n_rows rows of n floats (x: x_stride floats apart),
 * as matmul_quantize does on the CPU; *act_stride gets the bytes between dst rows. Returns 0 or
 * -ENOTSUP for a type without kernels. */
int gpu_op_quantize(struct gpu_ops *o, enum qtype t, uint64_t x, size_t x_stride, uint64_t dst,
                    size_t *act_stride, int64_t n, int32_t n_rows);

/* Records out[t][r] = dot(weight row r, activation row t) for r < n_rows, t < n_tok: weights of
 * type t at w (rows row_bytes apart, n_in elements each), activation rows act_stride bytes apart,
 * output rows out_stride floats apart. Returns 0 or -ENOTSUP. */
int gpu_op_matmul(struct gpu_ops *o, enum qtype t, uint64_t w, size_t row_bytes, int64_t n_in,
                  int64_t n_rows, uint64_t act, size_t act_stride, uint64_t out, size_t out_stride,
                  int32_t n_tok);

#endif
