/* gguf.h - read-only reader for GGUF v3 model files (v2 accepted too: same layout).
 *
 *     char err[256];
 *     struct gguf *g = gguf_open("model.gguf", err, sizeof(err));
 *     if (!g) { fprintf(stderr, "%s\n", err); return -1; }
 *     uint32_t n_layer;
 *     if (gguf_get_u32(g, "qwen3moe.block_count", &n_layer) < 0) ...
 *     const struct gguf_tensor *t = gguf_find_tensor(g, "output.weight");
 *     gguf_read_tensor(g, t, buf);   // buf holds t->n_bytes
 *     gguf_free(g);
 *
 * Every count, length, offset and size in the file is checked with overflow-safe arithmetic against
 * the file size before use; a malformed file gets an error message naming the key or tensor at fault
 * and NULL, never a crash. The file stays open (read-only) for tensor reads until gguf_free().
 *
 * A split model (llama.cpp's gguf-split: NAME-00001-of-00003.gguf ...) opens from any of its files
 * as one struct gguf: the first shard's metadata, every shard's tensors, each tensor addressed by
 * (shard, offset in that shard's file). The shards' split.no / split.count / split.tensors.count
 * are checked; a missing or mismatched shard is named in the error. */
#ifndef SNIPER_GGUF_H
#define SNIPER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qtype.h"

enum gguf_vtype {
    GGUF_VTYPE_UINT8 = 0,
    GGUF_VTYPE_INT8 = 1,
    GGUF_VTYPE_UINT16 = 2,
    GGUF_VTYPE_INT16 = 3,
    GGUF_VTYPE_UINT32 = 4,
    GGUF_VTYPE_INT32 = 5,
    GGUF_VTYPE_FLOAT32 = 6,
    GGUF_VTYPE_BOOL = 7,
    GGUF_VTYPE_STRING = 8,
    GGUF_VTYPE_ARRAY = 9,
    GGUF_VTYPE_UINT64 = 10,
    GGUF_VTYPE_INT64 = 11,
    GGUF_VTYPE_FLOAT64 = 12,
    GGUF_VTYPE_COUNT = 13,
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* A length-counted string; data is NUL-terminated too (owned by the struct gguf). */
struct gguf_str {
    uint64_t len;
    const char *data;
};

/* One metadata key/value pair. Scalars are in the union; arrays in arr. */
struct gguf_kv {
    const char *key;          /* NUL-terminated, owned by struct gguf */
    enum gguf_vtype type;     /* value type; GGUF_VTYPE_ARRAY for arrays */
    enum gguf_vtype arr_type; /* element type when type == GGUF_VTYPE_ARRAY */
    uint64_t n;               /* number of elements of an array; 1 for a scalar */
    union {
        uint64_t u64; /* any unsigned integer type, and bool (0/1) */
        int64_t i64;  /* any signed integer type */
        double f64;   /* FLOAT32 / FLOAT64 */
        struct gguf_str str;
    } v;
    /* Arrays: numeric elements packed as in the file (little-endian, arr_type's size each);
     * string elements as struct gguf_str[n]. Nested arrays are rejected. */
    const void *arr;
};

/* One tensor of the tensor table. */
struct gguf_tensor {
    const char *name;           /* NUL-terminated, owned by struct gguf */
    uint32_t n_dims;            /* 1..GGUF_MAX_DIMS */
    uint64_t ne[GGUF_MAX_DIMS]; /* elements per dimension, ne[0] = row length; unused dims are 1 */
    enum qtype type;
    uint64_t n_elems;           /* product of ne */
    uint64_t row_bytes;         /* bytes of one row of ne[0] elements */
    uint32_t shard;             /* the file holding it: index into gguf.shards */
    uint64_t data_off;          /* absolute offset of the first byte in its shard's file */
    uint64_t n_bytes;           /* bytes of the whole tensor */
};

/* One file of the model: the only one, or a shard of a split model. */
struct gguf_shard {
    const char *path;     /* as opened, NUL-terminated, owned by struct gguf */
    int fd;               /* read-only descriptor, open until gguf_free() */
    uint64_t file_bytes;  /* size of the file at open time */
};

struct gguf {
    uint32_t n_shards;          /* 1, or the split.count of a split model */
    struct gguf_shard *shards;  /* [n_shards] in split.no order; shards[0] holds the metadata */
    uint64_t file_bytes;  /* size of all shards together at open time */
    uint32_t version;
    uint64_t alignment;   /* general.alignment or 32 */
    uint64_t data_off;    /* absolute offset of the first shard's tensor data section */
    uint64_t n_kv;
    struct gguf_kv *kv;   /* [n_kv] in file order */
    uint64_t n_tensors;
    struct gguf_tensor *tensors; /* [n_tensors] in file order */
};

/* Opens and parses path, and with it every shard when path is one of a split model. Returns a new
 * struct gguf (free with gguf_free) or NULL with a message in err (always NUL-terminated when
 * err_len > 0). A vocab-only file (no tensors) is valid. */
struct gguf *gguf_open(const char *path, char *err, size_t err_len);

/* Closes the files and frees everything, including all strings handed out. Accepts NULL. */
void gguf_free(struct gguf *g);

/* The pair with this key, or NULL. Borrowed from g. */
const struct gguf_kv *gguf_find_kv(const struct gguf *g, const char *key);

/* Typed getters. Return 0, -ENOENT when the key is missing, -EINVAL when its type does not fit
 * (integers of any width convert when the value is in range; floats from FLOAT32 or FLOAT64). */
int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out);
int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out);
int gguf_get_i32(const struct gguf *g, const char *key, int32_t *out);
int gguf_get_f32(const struct gguf *g, const char *key, float *out);
int gguf_get_bool(const struct gguf *g, const char *key, bool *out);

/* The string value of key, or NULL when missing or not a string. Borrowed from g. */
const char *gguf_get_str(const struct gguf *g, const char *key);

/* The array with this key and element type, or NULL (missing, not an array, other element type).
 * On success *n is its length. Borrowed from g: numeric arrays as packed values, string arrays as
 * const struct gguf_str *. */
const void *gguf_get_arr(const struct gguf *g, const char *key, enum gguf_vtype elem_type,
                         uint64_t *n);

/* The tensor with this name, or NULL. Borrowed from g. */
const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name);

/* Reads n_bytes of tensor t starting at byte rel_off of its data into dst (pread on its shard;
 * retries short reads). Returns 0, -EINVAL when the range lies outside the tensor, -EIO (or -errno) when the file
 * cannot deliver it (for example it shrank). */
int gguf_read_tensor_range(const struct gguf *g, const struct gguf_tensor *t, uint64_t rel_off,
                           void *dst, uint64_t n_bytes);

/* Reads the whole of t into dst, which holds t->n_bytes. Same returns as gguf_read_tensor_range. */
int gguf_read_tensor(const struct gguf *g, const struct gguf_tensor *t, void *dst);

/* For a split model's file name "DIR/NAME-00002-of-00003.gguf": true, with *no = 1 (0-based) and
 * *count = 3, and *prefix_len the length of "DIR/NAME". False for any other name. */
bool gguf_split_name_parse(const char *path, size_t *prefix_len, uint32_t *no, uint32_t *count);

#endif
