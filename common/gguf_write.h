/* gguf_write.h - streaming writer of GGUF v3 files: metadata, a tensor table with aligned offsets,
 * then each tensor's data in declaration order, in chunks, so a 17 GB model never sits in RAM.
 *
 *     struct gguf_writer *w = gguf_writer_new();
 *     gguf_writer_add_str(w, "general.architecture", "qwen3");
 *     gguf_writer_add_tensor(w, "output_norm.weight", QTYPE_F32, 1, (uint64_t[]){256});
 *     int rc = gguf_writer_open(w, "model.gguf");         // header goes to a temp file
 *     while (rc == 0 && more) rc = gguf_writer_write(w, chunk, chunk_bytes);
 *     if (rc == 0) rc = gguf_writer_finish(w);             // fsync + rename onto model.gguf
 *     gguf_writer_free(w);                                 // removes the temp file unless finished
 *
 * Small files in a few lines: declare tensors with gguf_writer_add_tensor_data() and call
 * gguf_writer_save(w, path). Invariants: data offsets are multiples of the alignment (32 unless
 * set), padding is zeros, the file appears under its name only once complete; the first error
 * sticks and every later call returns it. Little-endian hosts only (as GGUF itself). */
#ifndef SNIPER_GGUF_WRITE_H
#define SNIPER_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qtype.h"

struct gguf_writer;

/* A new, empty writer (alignment 32), or NULL when out of memory. Free with gguf_writer_free. */
struct gguf_writer *gguf_writer_new(void);

/* Removes the temp file when the writer was opened but not finished, closes it, frees all.
 * Accepts NULL. */
void gguf_writer_free(struct gguf_writer *w);

/* Sets the data alignment (a power of two, 1..65536) and records it as general.alignment (u32).
 * Only before the first tensor is declared. Returns 0 or -EINVAL. */
int gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment);

/* Metadata, in the order added. key and values are copied. Each returns 0, -EINVAL (empty or
 * duplicate key, called after gguf_writer_open, a NULL string) or -ENOMEM. */
int gguf_writer_add_u16(struct gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v);
int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
                            uint64_t n);
int gguf_writer_add_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
int gguf_writer_add_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n);
/* A bool array: one byte per element, each 0 or 1 (else -EINVAL). */
int gguf_writer_add_arr_bool(struct gguf_writer *w, const char *key, const uint8_t *v, uint64_t n);

/* Declares the next tensor: name (< 64 bytes, unique), type, 1..4 dims, ne[0] the row length (a
 * multiple of the type's block size). Its offset is the previous one's end rounded up to the
 * alignment. Returns 0, -EINVAL (bad name/type/shape, after open), -EOVERFLOW or -ENOMEM. */
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum qtype type,
                           uint32_t n_dims, const uint64_t *ne);

/* Same, with the tensor's whole data (gguf_writer_tensor_bytes of it) borrowed until
 * gguf_writer_save returns. */
int gguf_writer_add_tensor_data(struct gguf_writer *w, const char *name, enum qtype type,
                                uint32_t n_dims, const uint64_t *ne, const void *data);

/* Bytes of the data of the tensor declared i-th (0-based), 0 when there is no such tensor. */
uint64_t gguf_writer_tensor_bytes(const struct gguf_writer *w, uint64_t i);

/* Total bytes the finished file will have (header, padding and data), 0 before any tensor and
 * metadata exist. Valid once everything is declared. */
uint64_t gguf_writer_file_bytes(const struct gguf_writer *w);

/* Creates a temp file next to path (path.tmp.XXXXXX) and writes the header, metadata and tensor
 * table. Returns 0 or a negative errno (-EACCES, -ENOENT, -ENOSPC, -EIO, ...; -EINVAL when path
 * exists and is not a regular file: finishing renames the temp file over it, which would replace
 * a device such as /dev/null); on failure nothing is left on disk. path is copied. */
int gguf_writer_open(struct gguf_writer *w, const char *path);

/* Appends n bytes of data to the current tensor (the first one not yet complete); the chunk must
 * not run past that tensor's end. Padding follows automatically once a tensor is complete. Returns
 * 0, -EINVAL (not open, too much data) or the write error (-ENOSPC, -EIO, -EFBIG, ...). */
int gguf_writer_write(struct gguf_writer *w, const void *data, size_t n);

/* Name of the tensor gguf_writer_write is filling now, NULL when all are complete. Borrowed. */
const char *gguf_writer_current(const struct gguf_writer *w);

/* Checks every tensor is complete, flushes, fsyncs and renames the temp file onto the path given
 * to gguf_writer_open. Returns 0, -EINVAL (data missing, not open) or a negative errno (also an
 * earlier open/write error, which sticks); on failure the temp file is removed. */
int gguf_writer_finish(struct gguf_writer *w);

/* open + the borrowed data of every tensor (all declared with gguf_writer_add_tensor_data) +
 * finish. Returns 0 or a negative errno; on failure nothing is left at path. */
int gguf_writer_save(struct gguf_writer *w, const char *path);

#endif
