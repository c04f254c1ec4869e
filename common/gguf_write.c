/* gguf_write.c - streaming GGUF v3 writer (see gguf_write.h).
 * Metadata is serialized as it is added; the tensor table is kept as structs so that offsets can be
 * laid out as tensors are declared. Output goes through one buffer to a temp file that is renamed
 * onto the final name only after fsync; any failure unlinks the temp file. */
#include "gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_write.c writes the host's byte order: little-endian hosts only"
#endif

#define GW_MAGIC "GGUF"
#define GW_VERSION 3u
#define GW_MAX_DIMS 4u
#define GW_MAX_NAME 64u                  /* ggml's GGML_MAX_NAME, NUL included */
#define GW_OUT_BYTES ((size_t)4 << 20)   /* output buffer */

enum gw_vtype { /* GGUF value types used here (numbered as in the file) */
    GW_VT_UINT16 = 2, GW_VT_UINT32 = 4, GW_VT_INT32 = 5, GW_VT_FLOAT32 = 6, GW_VT_BOOL = 7,
    GW_VT_STRING = 8, GW_VT_ARRAY = 9, GW_VT_UINT64 = 10,
};

struct gw_buf { /* growable byte buffer */
    uint8_t *p;
    size_t len, cap;
};

struct gw_tensor {
    char *name;
    enum qtype type;
    uint32_t n_dims;
    uint64_t ne[GW_MAX_DIMS];
    uint64_t off;       /* relative to the data section, a multiple of the alignment */
    uint64_t n_bytes;
    const void *data;   /* borrowed whole data (add_tensor_data), or NULL */
};

struct gguf_writer {
    struct gw_buf kv;           /* serialized key/value pairs, in order */
    char **keys;                /* [n_kv] copies, for the duplicate check */
    uint64_t n_kv, keys_cap;
    struct gw_tensor *tensors;  /* [n_tensors] in declaration (= file) order */
    uint64_t n_tensors, tensors_cap;
    uint64_t info_bytes;        /* serialized size of the tensor table */
    uint64_t data_end;          /* end of the last tensor's data, relative to the data section */
    uint32_t alignment;
    /* output state */
    int fd;                     /* -1 when not open */
    char *path, *tmp_path;
    struct gw_buf out;          /* pending bytes not yet written */
    uint64_t cur;               /* index of the tensor being filled */
    uint64_t cur_done;          /* bytes of it written so far */
    int err;                    /* first I/O error, sticky */
    bool opened, finished;
};

/* ---- helpers --------------------------------------------------------------------------------- */

static uint64_t align_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

static int buf_put(struct gw_buf *b, const void *p, size_t n) {
    if (n > SIZE_MAX - b->len)
        return -EOVERFLOW;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q)
            return -ENOMEM;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int buf_u32(struct gw_buf *b, uint32_t v) {
    return buf_put(b, &v, sizeof(v));
}

static int buf_u64(struct gw_buf *b, uint64_t v) {
    return buf_put(b, &v, sizeof(v));
}

static int buf_str(struct gw_buf *b, const char *s) {
    uint64_t n = strlen(s);
    int rc = buf_u64(b, n);
    return rc ? rc : buf_put(b, s, n);
}

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* write(2) until all of p is out; 0 or -errno (-EIO for a write that makes no progress). */
static int write_all(int fd, const void *p, size_t n) {
    const uint8_t *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -EIO;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ---- metadata -------------------------------------------------------------------------------- */

static int kv_check_key(const struct gguf_writer *w, const char *key) {
    if (!w || !key || !key[0] || w->opened)
        return -EINVAL;
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return -EINVAL;
    return 0;
}

/* Records key as added (after its value was serialized at kv_start), or rolls the buffer back. */
static int kv_commit(struct gguf_writer *w, const char *key, size_t kv_start, int rc) {
    if (rc == 0 && w->n_kv == w->keys_cap) {
        uint64_t cap = w->keys_cap ? w->keys_cap * 2 : 32;
        char **k = realloc(w->keys, cap * sizeof(*k));
        if (!k)
            rc = -ENOMEM;
        else {
            w->keys = k;
            w->keys_cap = cap;
        }
    }
    char *copy = rc == 0 ? str_dup(key) : NULL;
    if (rc == 0 && !copy)
        rc = -ENOMEM;
    if (rc) {
        w->kv.len = kv_start;
        return rc;
    }
    w->keys[w->n_kv++] = copy;
    return 0;
}

/* Serializes key and a scalar of type t (size bytes at v). */
static int kv_add_scalar(struct gguf_writer *w, const char *key, enum gw_vtype t, const void *v,
                         size_t size) {
    int rc = kv_check_key(w, key);
    if (rc)
        return rc;
    size_t start = w->kv.len;
    rc = buf_str(&w->kv, key);
    if (!rc)
        rc = buf_u32(&w->kv, t);
    if (!rc)
        rc = buf_put(&w->kv, v, size);
    return kv_commit(w, key, start, rc);
}

int gguf_writer_add_u16(struct gguf_writer *w, const char *key, uint16_t v) {
    return kv_add_scalar(w, key, GW_VT_UINT16, &v, sizeof(v));
}

int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v) {
    return kv_add_scalar(w, key, GW_VT_UINT32, &v, sizeof(v));
}

int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v) {
    return kv_add_scalar(w, key, GW_VT_INT32, &v, sizeof(v));
}

int gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v) {
    return kv_add_scalar(w, key, GW_VT_UINT64, &v, sizeof(v));
}

int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v) {
    return kv_add_scalar(w, key, GW_VT_FLOAT32, &v, sizeof(v));
}

int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return kv_add_scalar(w, key, GW_VT_BOOL, &b, sizeof(b));
}

int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v) {
    int rc = v ? kv_check_key(w, key) : -EINVAL;
    if (rc)
        return rc;
    size_t start = w->kv.len;
    rc = buf_str(&w->kv, key);
    if (!rc)
        rc = buf_u32(&w->kv, GW_VT_STRING);
    if (!rc)
        rc = buf_str(&w->kv, v);
    return kv_commit(w, key, start, rc);
}

/* Serializes key, ARRAY, element type and n; the caller appends the elements. */
static int kv_arr_head(struct gguf_writer *w, const char *key, enum gw_vtype et, uint64_t n) {
    int rc = buf_str(&w->kv, key);
    if (!rc)
        rc = buf_u32(&w->kv, GW_VT_ARRAY);
    if (!rc)
        rc = buf_u32(&w->kv, et);
    return rc ? rc : buf_u64(&w->kv, n);
}

int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
                            uint64_t n) {
    int rc = (v || n == 0) ? kv_check_key(w, key) : -EINVAL;
    if (rc)
        return rc;
    size_t start = w->kv.len;
    rc = kv_arr_head(w, key, GW_VT_STRING, n);
    for (uint64_t i = 0; rc == 0 && i < n; i++)
        rc = v[i] ? buf_str(&w->kv, v[i]) : -EINVAL;
    return kv_commit(w, key, start, rc);
}

static int kv_add_arr_num(struct gguf_writer *w, const char *key, enum gw_vtype et, const void *v,
                          uint64_t n, size_t elem_bytes) {
    int rc = (v || n == 0) ? kv_check_key(w, key) : -EINVAL;
    if (rc)
        return rc;
    if (n > SIZE_MAX / elem_bytes)
        return -EOVERFLOW;
    size_t start = w->kv.len;
    rc = kv_arr_head(w, key, et, n);
    if (!rc)
        rc = buf_put(&w->kv, v, (size_t)n * elem_bytes);
    return kv_commit(w, key, start, rc);
}

int gguf_writer_add_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    return kv_add_arr_num(w, key, GW_VT_INT32, v, n, sizeof(*v));
}

int gguf_writer_add_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n) {
    return kv_add_arr_num(w, key, GW_VT_FLOAT32, v, n, sizeof(*v));
}

int gguf_writer_add_arr_bool(struct gguf_writer *w, const char *key, const uint8_t *v, uint64_t n) {
    for (uint64_t i = 0; v && i < n; i++)
        if (v[i] > 1)
            return -EINVAL;
    return kv_add_arr_num(w, key, GW_VT_BOOL, v, n, sizeof(*v));
}

/* ---- tensors --------------------------------------------------------------------------------- */

struct gguf_writer *gguf_writer_new(void) {
    struct gguf_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->alignment = 32;
    w->fd = -1;
    return w;
}

int gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment) {
    if (!w || w->n_tensors || alignment == 0 || alignment > 65536 ||
        (alignment & (alignment - 1)))
        return -EINVAL;
    int rc = gguf_writer_add_u32(w, "general.alignment", alignment);
    if (rc == 0)
        w->alignment = alignment;
    return rc;
}

/* Validates a declaration and computes its byte size into *n_bytes. */
static int tensor_check(const struct gguf_writer *w, const char *name, enum qtype type,
                        uint32_t n_dims, const uint64_t *ne, uint64_t *n_bytes) {
    if (!w || w->opened || !name || !name[0] || strlen(name) >= GW_MAX_NAME || !ne ||
        n_dims == 0 || n_dims > GW_MAX_DIMS || !qtype_is_known(type))
        return -EINVAL;
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return -EINVAL;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] == 0 || ne[d] > (uint64_t)INT64_MAX)
            return -EINVAL;
    int rc = qtype_row_bytes(type, ne[0], n_bytes);
    for (uint32_t d = 1; rc == 0 && d < n_dims; d++)
        if (__builtin_mul_overflow(*n_bytes, ne[d], n_bytes))
            rc = -EOVERFLOW;
    return rc;
}

static int tensor_grow(struct gguf_writer *w) {
    if (w->n_tensors < w->tensors_cap)
        return 0;
    uint64_t cap = w->tensors_cap ? w->tensors_cap * 2 : 64;
    struct gw_tensor *t = realloc(w->tensors, cap * sizeof(*t));
    if (!t)
        return -ENOMEM;
    w->tensors = t;
    w->tensors_cap = cap;
    return 0;
}

int gguf_writer_add_tensor_data(struct gguf_writer *w, const char *name, enum qtype type,
                                uint32_t n_dims, const uint64_t *ne, const void *data) {
    uint64_t n_bytes = 0, off = 0, end = 0;
    int rc = tensor_check(w, name, type, n_dims, ne, &n_bytes);
    if (!rc)
        off = align_up(w->data_end, w->alignment);
    if (!rc && (off < w->data_end || __builtin_add_overflow(off, n_bytes, &end) ||
                end > UINT64_MAX - w->alignment))
        rc = -EOVERFLOW;
    if (!rc)
        rc = tensor_grow(w);
    if (rc)
        return rc;
    struct gw_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof(*t));
    t->name = str_dup(name);
    if (!t->name)
        return -ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GW_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->off = off;
    t->n_bytes = n_bytes;
    t->data = data;
    w->n_tensors++;
    w->data_end = end;
    w->info_bytes += 8 + strlen(name) + 4 + 8ull * n_dims + 4 + 8;
    return 0;
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum qtype type,
                           uint32_t n_dims, const uint64_t *ne) {
    return gguf_writer_add_tensor_data(w, name, type, n_dims, ne, NULL);
}

uint64_t gguf_writer_tensor_bytes(const struct gguf_writer *w, uint64_t i) {
    return w && i < w->n_tensors ? w->tensors[i].n_bytes : 0;
}

static uint64_t header_bytes(const struct gguf_writer *w) {
    return 4 + 4 + 8 + 8 + (uint64_t)w->kv.len + w->info_bytes;
}

uint64_t gguf_writer_file_bytes(const struct gguf_writer *w) {
    if (!w || (w->n_kv == 0 && w->n_tensors == 0))
        return 0;
    return align_up(header_bytes(w), w->alignment) + align_up(w->data_end, w->alignment);
}

const char *gguf_writer_current(const struct gguf_writer *w) {
    return w && w->opened && w->cur < w->n_tensors ? w->tensors[w->cur].name : NULL;
}

/* ---- output ---------------------------------------------------------------------------------- */

/* Records the first error, closes and removes the temp file. Returns err. */
static int out_fail(struct gguf_writer *w, int err) {
    if (!w->err)
        w->err = err;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->tmp_path)
        unlink(w->tmp_path);
    free(w->tmp_path);
    w->tmp_path = NULL;
    return w->err;
}

static int out_flush(struct gguf_writer *w) {
    int rc = write_all(w->fd, w->out.p, w->out.len);
    w->out.len = 0;
    return rc ? out_fail(w, rc) : 0;
}

/* Appends n bytes to the file through the buffer (large chunks go straight out). */
static int out_put(struct gguf_writer *w, const void *p, size_t n) {
    if (w->out.len + n > GW_OUT_BYTES) {
        int rc = out_flush(w);
        if (rc)
            return rc;
    }
    if (n >= GW_OUT_BYTES) {
        int rc = write_all(w->fd, p, n);
        return rc ? out_fail(w, rc) : 0;
    }
    int rc = buf_put(&w->out, p, n);
    return rc ? out_fail(w, rc) : 0;
}

static int out_zeros(struct gguf_writer *w, uint64_t n) {
    static const uint8_t zeros[256];
    int rc = 0;
    while (rc == 0 && n > 0) {
        size_t k = n > sizeof(zeros) ? sizeof(zeros) : (size_t)n;
        rc = out_put(w, zeros, k);
        n -= k;
    }
    return rc;
}

/* Serializes magic, counts, metadata and the tensor table, padded to the alignment. */
static int out_header(struct gguf_writer *w) {
    struct gw_buf h = {0};
    int rc = buf_put(&h, GW_MAGIC, 4);
    if (!rc)
        rc = buf_u32(&h, GW_VERSION);
    if (!rc)
        rc = buf_u64(&h, w->n_tensors);
    if (!rc)
        rc = buf_u64(&h, w->n_kv);
    if (!rc)
        rc = buf_put(&h, w->kv.p, w->kv.len);
    for (uint64_t i = 0; rc == 0 && i < w->n_tensors; i++) {
        const struct gw_tensor *t = &w->tensors[i];
        rc = buf_str(&h, t->name);
        if (!rc)
            rc = buf_u32(&h, t->n_dims);
        for (uint32_t d = 0; rc == 0 && d < t->n_dims; d++)
            rc = buf_u64(&h, t->ne[d]);
        if (!rc)
            rc = buf_u32(&h, (uint32_t)t->type);
        if (!rc)
            rc = buf_u64(&h, t->off);
    }
    if (!rc)
        rc = out_put(w, h.p, h.len);
    if (!rc)
        rc = out_zeros(w, align_up(h.len, w->alignment) - h.len);
    free(h.p);
    return rc ? out_fail(w, rc) : 0;
}

int gguf_writer_open(struct gguf_writer *w, const char *path) {
    if (!w || !path || !path[0] || w->opened)
        return -EINVAL;
    size_t n = strlen(path);
    w->path = str_dup(path);
    w->tmp_path = malloc(n + sizeof(".tmp.XXXXXX"));
    if (!w->path || !w->tmp_path)
        return out_fail(w, -ENOMEM);
    memcpy(w->tmp_path, path, n);
    memcpy(w->tmp_path + n, ".tmp.XXXXXX", sizeof(".tmp.XXXXXX"));
    w->opened = true;
    struct stat st; /* the rename at the end would replace a device or FIFO (/dev/null) */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        free(w->tmp_path); /* nothing was created: nothing to unlink */
        w->tmp_path = NULL;
        return out_fail(w, -EINVAL);
    }
    w->fd = mkstemp(w->tmp_path);
    if (w->fd < 0) {
        int err = -errno;
        free(w->tmp_path); /* nothing was created: nothing to unlink */
        w->tmp_path = NULL;
        return out_fail(w, err);
    }
    if (fchmod(w->fd, 0644) != 0)
        return out_fail(w, -errno);
    return out_header(w);
}

/* Pads after every complete tensor and moves cur to the first incomplete one. */
static int out_advance(struct gguf_writer *w) {
    int rc = 0;
    while (rc == 0 && w->cur < w->n_tensors && w->cur_done == w->tensors[w->cur].n_bytes) {
        const struct gw_tensor *t = &w->tensors[w->cur];
        uint64_t end = t->off + t->n_bytes;
        rc = out_zeros(w, align_up(end, w->alignment) - end);
        w->cur++;
        w->cur_done = 0;
    }
    return rc;
}

int gguf_writer_write(struct gguf_writer *w, const void *data, size_t n) {
    if (!w || !w->opened || w->finished)
        return -EINVAL;
    if (w->err)
        return w->err;
    if (w->cur >= w->n_tensors || (n && !data) || n > w->tensors[w->cur].n_bytes - w->cur_done)
        return -EINVAL;
    int rc = out_put(w, data, n);
    if (rc)
        return rc;
    w->cur_done += n;
    return out_advance(w);
}

int gguf_writer_finish(struct gguf_writer *w) {
    if (!w || !w->opened || w->finished)
        return -EINVAL;
    if (w->err)
        return w->err;
    if (w->cur < w->n_tensors)
        return out_fail(w, -EINVAL);
    int rc = out_flush(w);
    if (rc)
        return rc;
    if (fsync(w->fd) != 0)
        return out_fail(w, -errno);
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0)
        return out_fail(w, -errno);
    if (rename(w->tmp_path, w->path) != 0)
        return out_fail(w, -errno);
    free(w->tmp_path);
    w->tmp_path = NULL;
    w->finished = true;
    return 0;
}

int gguf_writer_save(struct gguf_writer *w, const char *path) {
    if (!w)
        return -EINVAL;
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (!w->tensors[i].data)
            return -EINVAL;
    int rc = gguf_writer_open(w, path);
    for (uint64_t i = 0; rc == 0 && i < w->n_tensors; i++)
        rc = gguf_writer_write(w, w->tensors[i].data, (size_t)w->tensors[i].n_bytes);
    if (rc == 0)
        rc = gguf_writer_finish(w);
    return rc;
}

void gguf_writer_free(struct gguf_writer *w) {
    if (!w)
        return;
    if (w->opened && !w->finished)
        out_fail(w, -ECANCELED);
    for (uint64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv.p);
    free(w->out.p);
    free(w->path);
    free(w->tmp_path);
    free(w);
}
