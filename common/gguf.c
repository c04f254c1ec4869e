/* gguf.c - GGUF v2/v3 reader: parses the header through a buffered pread window, never touching
 * tensor data at open. Invariants after a successful gguf_open: every string is NUL-terminated
 * and lives in one arena; every tensor lies inside the file, is aligned, and overlaps no other;
 * keys and tensor names are unique and indexed by hash. Tensor data is read later with pread. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian GGUF values in place: port it before using a big-endian host"
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_HEADER_BYTES 24            /* magic, version, n_tensors, n_kv */
#define GGUF_MIN_KV_BYTES 14            /* key length, 1-byte key, value type, 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 33        /* name length, 1-byte name, n_dims, 1 dim, type, offset */
#define RD_WINDOW_BYTES (1u << 20)      /* header read-ahead window */
#define ARENA_MIN_CHUNK_BYTES (16u << 10)
#define ARENA_MAX_CHUNK_BYTES (4u << 20)
#define NO_OFFSET UINT64_MAX           /* parser.at when a fault has no single place (duplicates) */
#define PREAD_MAX_BYTES (1u << 30)      /* one pread call at most: Linux caps near 2 GiB anyway */

/* ---------------------------------------------------------------------------------------------
 * Arena: every string and array of one file, freed at once. Chunks never move, so pointers
 * handed out stay valid until arena_release(). */

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap; /* bytes of data[] */
    uint64_t pad;     /* keeps data[] 16-byte aligned after malloc */
};

struct arena {
    struct arena_chunk *head;
    size_t next_cap; /* size of the next chunk to allocate, bytes */
};

/* n bytes, 8-byte aligned, or NULL when out of memory. Owned by the arena. */
static void *arena_alloc(struct arena *a, size_t n) {
    size_t need = (n + 7) & ~(size_t)7;
    if (need < n)
        return NULL;
    struct arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = a->next_cap ? a->next_cap : ARENA_MIN_CHUNK_BYTES;
        if (cap < need)
            cap = need;
        if (cap > SIZE_MAX - sizeof(*c))
            return NULL;
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
        if (a->next_cap < ARENA_MAX_CHUNK_BYTES)
            a->next_cap = a->next_cap ? a->next_cap * 2 : ARENA_MIN_CHUNK_BYTES * 2;
    }
    void *p = (unsigned char *)(c + 1) + c->used;
    c->used += need;
    return p;
}

static void arena_release(struct arena *a) {
    struct arena_chunk *c = a->head;
    while (c) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * String index: open addressing over names, for unique keys/tensor names and O(1) lookups. */

struct strmap_slot {
    const char *name; /* NULL: empty slot; borrowed from the arena */
    uint64_t idx;     /* index into kv[] or tensors[] */
};

struct strmap {
    struct strmap_slot *slots; /* [mask + 1] */
    uint64_t mask;
};

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Sizes m for n names (load <= 1/2). Returns 0 or -ENOMEM. */
static int strmap_init(struct strmap *m, uint64_t n) {
    uint64_t cap = 8;
    while (cap < n * 2)
        cap *= 2;
    m->slots = calloc(cap, sizeof(*m->slots));
    m->mask = cap - 1;
    return m->slots ? 0 : -ENOMEM;
}

/* Inserts name -> idx. Returns 0, or -EEXIST with *dup_idx set when the name is already there. */
static int strmap_put(struct strmap *m, const char *name, uint64_t idx, uint64_t *dup_idx) {
    uint64_t i = str_hash(name) & m->mask;
    for (; m->slots[i].name; i = (i + 1) & m->mask) {
        if (strcmp(m->slots[i].name, name) == 0) {
            *dup_idx = m->slots[i].idx;
            return -EEXIST;
        }
    }
    m->slots[i].name = name;
    m->slots[i].idx = idx;
    return 0;
}

/* The slot of name, or NULL. */
static const struct strmap_slot *strmap_get(const struct strmap *m, const char *name) {
    if (!m->slots || !name)
        return NULL;
    for (uint64_t i = str_hash(name) & m->mask; m->slots[i].name; i = (i + 1) & m->mask) {
        if (strcmp(m->slots[i].name, name) == 0)
            return &m->slots[i];
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * The private side of struct gguf: callers see only the public struct at its start. */

struct gguf_impl {
    struct gguf pub; /* must stay first: gguf_open hands out &impl->pub */
    struct arena arena;
    struct strmap kv_index;
    struct strmap tensor_index;
    uint64_t kv_cap, tensor_cap; /* allocated lengths of pub.kv and pub.tensors */
};

static const struct gguf_impl *impl_of(const struct gguf *g) {
    return (const struct gguf_impl *)g;
}

/* ---------------------------------------------------------------------------------------------
 * Parser state: a read window over the header plus the error context ("key \"x\""). */

struct parser {
    struct gguf_impl *gi;
    const char *path;
    int fd;
    uint64_t file_bytes;
    uint64_t off;          /* absolute offset of the next unread byte */
    uint64_t at;           /* start of the field at fault, for messages; NO_OFFSET: none */
    unsigned char *win;    /* [RD_WINDOW_BYTES] read-ahead of the file */
    uint64_t win_off;      /* file offset of win[0] */
    size_t win_len;        /* valid bytes in win */
    char ctx[160];         /* what is being parsed, for messages; "" when nothing in particular */
    char *err;
    size_t err_len;
    bool failed;           /* an error message is already in err */
};

/* Records the first failure as "gguf_open: <msg>[ at byte N][, <ctx>] in \"path\"" and returns rc;
 * N is the start of the field at fault. */
__attribute__((format(printf, 3, 4)))
static int p_fail(struct parser *p, int rc, const char *fmt, ...) {
    if (p->failed || !p->err || p->err_len == 0)
        return rc;
    p->failed = true;
    char msg[320], where[48] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (p->at != NO_OFFSET)
        snprintf(where, sizeof(where), " at byte %" PRIu64, p->at);
    snprintf(p->err, p->err_len, "gguf_open: %s%s%s%s in \"%s\"", msg, where,
             p->ctx[0] ? ", " : "", p->ctx, p->path);
    return rc;
}

/* Sets the message context to a quoted name (cut to 80 bytes to keep messages readable). */
static void p_set_ctx(struct parser *p, const char *kind, const char *name) {
    snprintf(p->ctx, sizeof(p->ctx), "%s \"%.80s%s\"", kind, name, strlen(name) > 80 ? "..." : "");
}

static uint64_t p_left(const struct parser *p) {
    return p->off <= p->file_bytes ? p->file_bytes - p->off : 0;
}

/* pread of exactly n bytes at off, retrying EINTR and short reads. Returns 0, -EIO at end of file,
 * or -errno. */
static int pread_full(int fd, void *dst, uint64_t n, uint64_t off) {
    unsigned char *d = dst;
    while (n > 0) {
        size_t chunk = n < PREAD_MAX_BYTES ? (size_t)n : PREAD_MAX_BYTES;
        if (off > (uint64_t)INT64_MAX)
            return -EINVAL;
        ssize_t r = pread(fd, d, chunk, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -EIO;
        d += r;
        n -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Refills the window at p->off. Returns 0 or a negative error (with a message). */
static int p_refill(struct parser *p) {
    uint64_t n = p_left(p) < RD_WINDOW_BYTES ? p_left(p) : RD_WINDOW_BYTES;
    int rc = pread_full(p->fd, p->win, n, p->off);
    if (rc < 0)
        return p_fail(p, rc, "read failed (%s; did the file shrink?)", strerror(-rc));
    p->win_off = p->off;
    p->win_len = (size_t)n;
    return 0;
}

/* Copies the next n bytes of the header into dst (what names them for a truncation message).
 * Returns 0 or a negative error. */
static int p_read(struct parser *p, void *dst, uint64_t n, const char *what) {
    p->at = p->off;
    if (n > p_left(p))
        return p_fail(p, -EINVAL, "file truncated: %s needs %" PRIu64 " bytes, %" PRIu64 " left",
                      what, n, p_left(p));
    unsigned char *d = dst;
    while (n > 0) {
        if (p->off < p->win_off || p->off >= p->win_off + p->win_len) {
            int rc = p_refill(p);
            if (rc < 0)
                return rc;
        }
        size_t at = (size_t)(p->off - p->win_off);
        size_t take = p->win_len - at < n ? p->win_len - at : (size_t)n;
        memcpy(d, p->win + at, take);
        d += take;
        n -= take;
        p->off += take;
    }
    return 0;
}

static int p_u32(struct parser *p, uint32_t *out, const char *what) {
    return p_read(p, out, sizeof(*out), what);
}

static int p_u64(struct parser *p, uint64_t *out, const char *what) {
    return p_read(p, out, sizeof(*out), what);
}

/* Reads a GGUF string (u64 length + bytes) into the arena, NUL-terminated. Returns 0 or < 0. */
static int p_str(struct parser *p, struct gguf_str *out, const char *what) {
    uint64_t len, start = p->off;
    int rc = p_u64(p, &len, what);
    if (rc < 0)
        return rc;
    if (len > p_left(p))
        return p_fail(p, -EINVAL, "%s length %" PRIu64 " past end of file (%" PRIu64 " bytes left)",
                      what, len, p_left(p));
    char *s = arena_alloc(&p->gi->arena, (size_t)len + 1);
    if (!s)
        return p_fail(p, -ENOMEM, "out of memory for %s of %" PRIu64 " bytes", what, len);
    rc = p_read(p, s, len, what);
    if (rc < 0)
        return rc;
    p->at = start; /* checks of the string's content point at its length field */
    s[len] = '\0';
    out->len = len;
    out->data = s;
    return 0;
}

/* Reads a name (key or tensor name): a string that is non-empty and has no NUL inside. */
static int p_name(struct parser *p, const char **out, const char *what) {
    struct gguf_str s;
    int rc = p_str(p, &s, what);
    if (rc < 0)
        return rc;
    if (s.len == 0)
        return p_fail(p, -EINVAL, "empty %s", what);
    if (memchr(s.data, '\0', s.len))
        return p_fail(p, -EINVAL, "%s \"%s\" contains a NUL byte", what, s.data);
    *out = s.data;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Metadata values. */

/* Bytes of one value of a fixed-size type; 0 for STRING, ARRAY and invalid types. */
static uint32_t vtype_bytes(uint32_t t) {
    static const uint8_t bytes[GGUF_VTYPE_COUNT] = {
        [GGUF_VTYPE_UINT8] = 1,  [GGUF_VTYPE_INT8] = 1,   [GGUF_VTYPE_UINT16] = 2,
        [GGUF_VTYPE_INT16] = 2,  [GGUF_VTYPE_UINT32] = 4, [GGUF_VTYPE_INT32] = 4,
        [GGUF_VTYPE_FLOAT32] = 4, [GGUF_VTYPE_BOOL] = 1,  [GGUF_VTYPE_UINT64] = 8,
        [GGUF_VTYPE_INT64] = 8,  [GGUF_VTYPE_FLOAT64] = 8,
    };
    return t < GGUF_VTYPE_COUNT ? bytes[t] : 0;
}

/* Decodes one fixed-size little-endian value of type t from raw into kv's union. */
static void scalar_decode(struct gguf_kv *kv, uint32_t t, const unsigned char *raw) {
    uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
    int8_t i8; int16_t i16; int32_t i32; float f32;
    switch (t) {
    case GGUF_VTYPE_UINT8: case GGUF_VTYPE_BOOL: memcpy(&u8, raw, 1); kv->v.u64 = u8; break;
    case GGUF_VTYPE_UINT16: memcpy(&u16, raw, 2); kv->v.u64 = u16; break;
    case GGUF_VTYPE_UINT32: memcpy(&u32, raw, 4); kv->v.u64 = u32; break;
    case GGUF_VTYPE_UINT64: memcpy(&u64, raw, 8); kv->v.u64 = u64; break;
    case GGUF_VTYPE_INT8: memcpy(&i8, raw, 1); kv->v.i64 = i8; break;
    case GGUF_VTYPE_INT16: memcpy(&i16, raw, 2); kv->v.i64 = i16; break;
    case GGUF_VTYPE_INT32: memcpy(&i32, raw, 4); kv->v.i64 = i32; break;
    case GGUF_VTYPE_INT64: memcpy(&kv->v.i64, raw, 8); break;
    case GGUF_VTYPE_FLOAT32: memcpy(&f32, raw, 4); kv->v.f64 = f32; break;
    case GGUF_VTYPE_FLOAT64: memcpy(&kv->v.f64, raw, 8); break;
    default: break;
    }
}

/* Checks that n bool bytes are each 0 or 1. */
static int check_bools(struct parser *p, const unsigned char *b, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        if (b[i] > 1)
            return p_fail(p, -EINVAL, "invalid bool value %u (element %" PRIu64 ")", b[i], i);
    }
    return 0;
}

/* Reads an array of fixed-size elements (count already read) into the arena. */
static int parse_num_array(struct parser *p, struct gguf_kv *kv) {
    uint64_t bytes;
    if (__builtin_mul_overflow(kv->n, (uint64_t)vtype_bytes(kv->arr_type), &bytes) ||
        bytes > p_left(p))
        return p_fail(p, -EINVAL, "array of %" PRIu64 " elements past end of file", kv->n);
    void *a = arena_alloc(&p->gi->arena, bytes ? (size_t)bytes : 1);
    if (!a)
        return p_fail(p, -ENOMEM, "out of memory for array of %" PRIu64 " bytes", bytes);
    int rc = p_read(p, a, bytes, "array");
    if (rc == 0 && kv->arr_type == GGUF_VTYPE_BOOL)
        rc = check_bools(p, a, kv->n);
    kv->arr = a;
    return rc;
}

/* Reads an array of strings (count already read): one gguf_str per element, all in the arena. */
static int parse_str_array(struct parser *p, struct gguf_kv *kv) {
    uint64_t min_bytes, bytes;
    if (__builtin_mul_overflow(kv->n, (uint64_t)sizeof(uint64_t), &min_bytes) ||
        min_bytes > p_left(p))
        return p_fail(p, -EINVAL, "array of %" PRIu64 " strings past end of file", kv->n);
    if (__builtin_mul_overflow(kv->n, (uint64_t)sizeof(struct gguf_str), &bytes) ||
        bytes > SIZE_MAX)
        return p_fail(p, -ENOMEM, "array of %" PRIu64 " strings too large", kv->n);
    struct gguf_str *a = arena_alloc(&p->gi->arena, bytes ? (size_t)bytes : 1);
    if (!a)
        return p_fail(p, -ENOMEM, "out of memory for array of %" PRIu64 " strings", kv->n);
    kv->arr = a;
    for (uint64_t i = 0; i < kv->n; i++) {
        int rc = p_str(p, &a[i], "array string");
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Reads an array value: element type, count, elements. Nested arrays are rejected. */
static int parse_array(struct parser *p, struct gguf_kv *kv) {
    uint32_t et;
    int rc = p_u32(p, &et, "array element type");
    if (rc == 0)
        rc = p_u64(p, &kv->n, "array length");
    if (rc < 0)
        return rc;
    if (et == GGUF_VTYPE_ARRAY)
        return p_fail(p, -EINVAL, "nested array (array of arrays) not supported");
    if (et >= GGUF_VTYPE_COUNT)
        return p_fail(p, -EINVAL, "invalid array element type %" PRIu32, et);
    kv->arr_type = (enum gguf_vtype)et;
    return et == GGUF_VTYPE_STRING ? parse_str_array(p, kv) : parse_num_array(p, kv);
}

/* Reads the value of kv, whose type field has just been read as t. */
static int parse_value(struct parser *p, struct gguf_kv *kv, uint32_t t) {
    if (t >= GGUF_VTYPE_COUNT)
        return p_fail(p, -EINVAL, "invalid value type %" PRIu32, t);
    kv->type = (enum gguf_vtype)t;
    kv->n = 1;
    if (t == GGUF_VTYPE_ARRAY)
        return parse_array(p, kv);
    if (t == GGUF_VTYPE_STRING)
        return p_str(p, &kv->v.str, "string value");
    unsigned char raw[8];
    int rc = p_read(p, raw, vtype_bytes(t), "value");
    if (rc < 0)
        return rc;
    if (t == GGUF_VTYPE_BOOL && raw[0] > 1)
        return p_fail(p, -EINVAL, "invalid bool value %u", raw[0]);
    scalar_decode(kv, t, raw);
    return 0;
}

/* Grows a file-order array to hold one more element. Returns 0 or -ENOMEM. */
static int grow(void **arr, uint64_t *cap, uint64_t n, size_t elem_bytes) {
    if (n < *cap)
        return 0;
    uint64_t new_cap = *cap ? *cap * 2 : 64;
    if (new_cap > SIZE_MAX / elem_bytes)
        return -ENOMEM;
    void *a = realloc(*arr, (size_t)new_cap * elem_bytes);
    if (!a)
        return -ENOMEM;
    *arr = a;
    *cap = new_cap;
    return 0;
}

/* Reads all key/value pairs; duplicates are found later by index_kvs(). */
static int parse_kvs(struct parser *p, uint64_t n_kv) {
    struct gguf *g = &p->gi->pub;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (grow((void **)&g->kv, &p->gi->kv_cap, i, sizeof(*g->kv)) < 0)
            return p_fail(p, -ENOMEM, "out of memory for %" PRIu64 " keys", i + 1);
        struct gguf_kv *kv = &g->kv[i];
        memset(kv, 0, sizeof(*kv));
        g->n_kv = i + 1; /* counted before parsing so gguf_free sees it */
        snprintf(p->ctx, sizeof(p->ctx), "kv #%" PRIu64, i);
        uint32_t t;
        int rc = p_name(p, &kv->key, "key");
        if (rc < 0)
            return rc;
        p_set_ctx(p, "key", kv->key);
        rc = p_u32(p, &t, "value type");
        if (rc == 0)
            rc = parse_value(p, kv, t);
        if (rc < 0)
            return rc;
    }
    p->ctx[0] = '\0';
    return 0;
}

/* Indexes keys by name; rejects duplicates. */
static int index_kvs(struct parser *p) {
    struct gguf *g = &p->gi->pub;
    if (strmap_init(&p->gi->kv_index, g->n_kv) < 0)
        return p_fail(p, -ENOMEM, "out of memory for the key index");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        uint64_t dup;
        if (strmap_put(&p->gi->kv_index, g->kv[i].key, i, &dup) < 0) {
            p->at = NO_OFFSET;
            p_set_ctx(p, "key", g->kv[i].key);
            return p_fail(p, -EINVAL, "duplicate key (kv #%" PRIu64 " and #%" PRIu64 ")", dup, i);
        }
    }
    return 0;
}

/* Applies general.alignment: must be a UINT32 power of two when present. */
static int apply_alignment(struct parser *p) {
    struct gguf *g = &p->gi->pub;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *kv = gguf_find_kv(g, "general.alignment");
    if (!kv)
        return 0;
    p_set_ctx(p, "key", "general.alignment");
    p->at = NO_OFFSET;
    if (kv->type != GGUF_VTYPE_UINT32)
        return p_fail(p, -EINVAL, "alignment has type %d, expected uint32 (%d)", (int)kv->type,
                      (int)GGUF_VTYPE_UINT32);
    if (kv->v.u64 == 0 || (kv->v.u64 & (kv->v.u64 - 1)) != 0)
        return p_fail(p, -EINVAL, "alignment %" PRIu64 " is not a power of two", kv->v.u64);
    g->alignment = kv->v.u64;
    p->ctx[0] = '\0';
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Tensor infos. */

/* Reads n_dims and the dims of t; checks each dim and the element count. */
static int parse_dims(struct parser *p, struct gguf_tensor *t) {
    int rc = p_u32(p, &t->n_dims, "n_dims");
    if (rc < 0)
        return rc;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return p_fail(p, -EINVAL, "n_dims %" PRIu32 " not in 1..%d", t->n_dims, GGUF_MAX_DIMS);
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && (rc = p_u64(p, &t->ne[d], "dims")) < 0)
            return rc;
        if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
            return p_fail(p, -EINVAL, "dimension %" PRIu32 " is %" PRIu64, d, t->ne[d]);
        if (__builtin_mul_overflow(n_elems, t->ne[d], &n_elems) || n_elems > (uint64_t)INT64_MAX)
            return p_fail(p, -EINVAL, "element count overflows (dimension %" PRIu32 ")", d);
    }
    t->n_elems = n_elems;
    return 0;
}

/* Reads the type of t and sizes it: row and tensor bytes. */
static int parse_type(struct parser *p, struct gguf_tensor *t) {
    uint32_t type;
    int rc = p_u32(p, &type, "tensor type");
    if (rc < 0)
        return rc;
    if (!qtype_is_known(type))
        return p_fail(p, -EINVAL, "unknown tensor type %" PRIu32, type);
    t->type = (enum qtype)type;
    rc = qtype_row_bytes(t->type, t->ne[0], &t->row_bytes);
    if (rc == -EINVAL)
        return p_fail(p, rc, "ne[0] %" PRIu64 " is not a multiple of the %s block size %" PRIu32,
                      t->ne[0], qtype_name(t->type), qtype_block_elems(t->type));
    if (rc < 0 || __builtin_mul_overflow(t->row_bytes, t->n_elems / t->ne[0], &t->n_bytes))
        return p_fail(p, -EINVAL, "tensor size overflows");
    return 0;
}

/* Reads one tensor info; its data_off is relative to the data section until place_tensors(). */
static int parse_tensor(struct parser *p, struct gguf_tensor *t) {
    int rc = p_name(p, &t->name, "tensor name");
    if (rc < 0)
        return rc;
    p_set_ctx(p, "tensor", t->name);
    if ((rc = parse_dims(p, t)) < 0 || (rc = parse_type(p, t)) < 0)
        return rc;
    if ((rc = p_u64(p, &t->data_off, "tensor offset")) < 0)
        return rc;
    if (t->data_off % p->gi->pub.alignment != 0)
        return p_fail(p, -EINVAL, "offset %" PRIu64 " not aligned to %" PRIu64, t->data_off,
                      p->gi->pub.alignment);
    if (t->n_bytes > p->file_bytes)
        return p_fail(p, -EINVAL, "tensor of %" PRIu64 " bytes larger than the file", t->n_bytes);
    return 0;
}

/* Reads all tensor infos in file order; duplicates are found later by index_tensors(). */
static int parse_tensors(struct parser *p, uint64_t n_tensors) {
    struct gguf *g = &p->gi->pub;
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (grow((void **)&g->tensors, &p->gi->tensor_cap, i, sizeof(*g->tensors)) < 0)
            return p_fail(p, -ENOMEM, "out of memory for %" PRIu64 " tensors", i + 1);
        struct gguf_tensor *t = &g->tensors[i];
        memset(t, 0, sizeof(*t));
        g->n_tensors = i + 1;
        snprintf(p->ctx, sizeof(p->ctx), "tensor info #%" PRIu64, i);
        int rc = parse_tensor(p, t);
        if (rc < 0)
            return rc;
    }
    p->ctx[0] = '\0';
    return 0;
}

/* Indexes tensors by name (sized by the tensors actually read, not the claimed count); rejects
 * duplicates. */
static int index_tensors(struct parser *p) {
    struct gguf *g = &p->gi->pub;
    if (strmap_init(&p->gi->tensor_index, g->n_tensors) < 0)
        return p_fail(p, -ENOMEM, "out of memory for the tensor index");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        uint64_t dup;
        if (strmap_put(&p->gi->tensor_index, g->tensors[i].name, i, &dup) < 0) {
            p->at = NO_OFFSET;
            p_set_ctx(p, "tensor", g->tensors[i].name);
            return p_fail(p, -EINVAL, "duplicate tensor name (tensors #%" PRIu64 " and #%" PRIu64
                          ")", dup, i);
        }
    }
    return 0;
}

static int cmp_tensor_off(const void *a, const void *b) {
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->data_off < y->data_off ? -1 : x->data_off > y->data_off;
}

/* Rejects tensors whose byte ranges overlap (they are sorted by offset first). */
static int check_overlaps(struct parser *p) {
    struct gguf *g = &p->gi->pub;
    if (g->n_tensors < 2)
        return 0;
    const struct gguf_tensor **by_off = calloc(g->n_tensors, sizeof(*by_off));
    if (!by_off)
        return p_fail(p, -ENOMEM, "out of memory for the tensor layout check");
    for (uint64_t i = 0; i < g->n_tensors; i++)
        by_off[i] = &g->tensors[i];
    qsort(by_off, g->n_tensors, sizeof(*by_off), cmp_tensor_off);
    int rc = 0;
    for (uint64_t i = 1; i < g->n_tensors && rc == 0; i++) {
        const struct gguf_tensor *a = by_off[i - 1], *b = by_off[i];
        if (a->data_off + a->n_bytes > b->data_off) { /* no overflow: both end inside the file */
            p_set_ctx(p, "tensor", b->name);
            rc = p_fail(p, -EINVAL, "data overlaps tensor \"%.80s\" (file bytes %" PRIu64
                        "..%" PRIu64 ")", a->name, a->data_off, a->data_off + a->n_bytes);
        }
    }
    free(by_off);
    return rc;
}

/* Finds the data section (header end padded to alignment) and makes tensor offsets absolute,
 * checking that each tensor ends inside the file. */
static int place_tensors(struct parser *p) {
    struct gguf *g = &p->gi->pub;
    uint64_t pad = (g->alignment - p->off % g->alignment) % g->alignment;
    p->at = NO_OFFSET; /* the messages below give the offsets at fault */
    if (__builtin_add_overflow(p->off, pad, &g->data_off))
        return p_fail(p, -EINVAL, "data section offset overflows");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (__builtin_add_overflow(g->data_off, t->data_off, &start) ||
            __builtin_add_overflow(start, t->n_bytes, &end) || end > p->file_bytes) {
            p_set_ctx(p, "tensor", t->name);
            return p_fail(p, -EINVAL, "data (offset %" PRIu64 " + %" PRIu64 " bytes from %"
                          PRIu64 ") past end of file (%" PRIu64 " bytes)", t->data_off,
                          t->n_bytes, g->data_off, p->file_bytes);
        }
        t->data_off = start;
    }
    return check_overlaps(p);
}

/* ---------------------------------------------------------------------------------------------
 * Header and open. */

/* Reads magic, version and the two counts; rejects counts the file could not hold. */
static int parse_header(struct parser *p, uint64_t *n_tensors, uint64_t *n_kv) {
    char magic[4];
    uint32_t version;
    int rc = p_read(p, magic, 4, "magic");
    if (rc < 0)
        return rc;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0)
        return p_fail(p, -EINVAL, "bad magic (not a GGUF file)");
    if ((rc = p_u32(p, &version, "version")) < 0)
        return rc;
    if (version == 0x03000000 || version == 0x02000000)
        return p_fail(p, -EINVAL, "unsupported version: big-endian GGUF");
    if (version != 2 && version != 3)
        return p_fail(p, -EINVAL, "unsupported version %" PRIu32 " (expected 2 or 3)", version);
    p->gi->pub.version = version;
    if ((rc = p_u64(p, n_tensors, "tensor count")) < 0 || (rc = p_u64(p, n_kv, "kv count")) < 0)
        return rc;
    uint64_t kv_min, t_min, min;
    if (__builtin_mul_overflow(*n_kv, (uint64_t)GGUF_MIN_KV_BYTES, &kv_min) ||
        __builtin_mul_overflow(*n_tensors, (uint64_t)GGUF_MIN_TENSOR_BYTES, &t_min) ||
        __builtin_add_overflow(kv_min, t_min, &min) || min > p_left(p))
        return p_fail(p, -EINVAL, "absurd counts: %" PRIu64 " kv and %" PRIu64
                      " tensors cannot fit in %" PRIu64 " bytes", *n_kv, *n_tensors, p_left(p));
    return 0;
}

/* Opens path read-only and records it as the file's only shard (split models merge theirs later).
 * Returns 0 or a negative error (with a message). */
static int open_file(struct parser *p) {
    struct gguf *g = &p->gi->pub;
    struct stat st;
    size_t path_len = strlen(p->path);
    g->shards = calloc(1, sizeof(*g->shards));
    char *path = arena_alloc(&p->gi->arena, path_len + 1);
    if (!g->shards || !path)
        return p_fail(p, -ENOMEM, "out of memory");
    memcpy(path, p->path, path_len + 1);
    g->n_shards = 1;
    g->shards[0] = (struct gguf_shard){.path = path, .fd = -1};
    p->fd = open(p->path, O_RDONLY | O_CLOEXEC);
    if (p->fd < 0)
        return p_fail(p, -errno, "cannot open (%s)", strerror(errno));
    g->shards[0].fd = p->fd;
    if (fstat(p->fd, &st) < 0)
        return p_fail(p, -errno, "cannot stat (%s)", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return p_fail(p, -EINVAL, "not a regular file");
    p->file_bytes = (uint64_t)st.st_size;
    g->shards[0].file_bytes = p->file_bytes;
    g->file_bytes = p->file_bytes;
    return 0;
}

static int parse_file(struct parser *p) {
    uint64_t n_tensors, n_kv;
    int rc = open_file(p);
    if (rc == 0)
        rc = parse_header(p, &n_tensors, &n_kv);
    if (rc == 0)
        rc = parse_kvs(p, n_kv);
    if (rc == 0)
        rc = index_kvs(p);
    if (rc == 0)
        rc = apply_alignment(p);
    if (rc == 0)
        rc = parse_tensors(p, n_tensors);
    if (rc == 0)
        rc = index_tensors(p);
    if (rc == 0)
        rc = place_tensors(p);
    return rc;
}

/* Parses the one file at path (a whole model or one shard). Returns it or NULL with a message. */
static struct gguf_impl *open_one(const char *path, char *err, size_t err_len) {
    struct gguf_impl *gi = calloc(1, sizeof(*gi));
    struct parser p = {.gi = gi, .path = path ? path : "(null)", .fd = -1, .at = NO_OFFSET,
                       .err = err, .err_len = err_len};
    int rc = -ENOMEM;
    if (err && err_len)
        err[0] = '\0';
    if (!gi) {
        p_fail(&p, rc, "out of memory");
        goto out;
    }
    if (!path) {
        rc = p_fail(&p, -EINVAL, "no path given");
        goto out;
    }
    p.win = malloc(RD_WINDOW_BYTES);
    if (!p.win) {
        p_fail(&p, rc, "out of memory for the read window");
        goto out;
    }
    rc = parse_file(&p);
out:
    free(p.win);
    if (rc < 0 && gi) {
        gguf_free(&gi->pub);
        gi = NULL;
    }
    return gi;
}

/* ---------------------------------------------------------------------------------------------
 * Split models (llama.cpp's gguf-split): shard k of n is "PREFIX-%05d-of-%05d.gguf" with k + 1
 * and n; every shard carries split.no (k), split.count (n) and split.tensors.count (the tensors
 * of all shards); the first shard alone carries the model's metadata. */

#define SPLIT_SUFFIX_BYTES 20 /* "-00001-of-00003.gguf" */

bool gguf_split_name_parse(const char *path, size_t *prefix_len, uint32_t *no, uint32_t *count) {
    size_t n = path ? strlen(path) : 0;
    if (n <= SPLIT_SUFFIX_BYTES)
        return false;
    const char *s = path + n - SPLIT_SUFFIX_BYTES;
    uint32_t a = 0, b = 0;
    for (int i = 0; i < 5; i++) {
        if (s[1 + i] < '0' || s[1 + i] > '9' || s[10 + i] < '0' || s[10 + i] > '9')
            return false;
        a = a * 10 + (uint32_t)(s[1 + i] - '0');
        b = b * 10 + (uint32_t)(s[10 + i] - '0');
    }
    if (s[0] != '-' || memcmp(s + 6, "-of-", 4) != 0 || strcmp(s + 15, ".gguf") != 0 || a == 0 ||
        a > b)
        return false;
    *prefix_len = n - SPLIT_SUFFIX_BYTES;
    *no = a - 1;
    *count = b;
    return true;
}

/* The split keys of one shard: 0 with *count = 1 for a whole model; -EINVAL (with a message) when
 * they are present but malformed. */
static int split_keys(const struct gguf *g, uint32_t *no, uint32_t *count, uint64_t *n_tensors,
                      char *err, size_t err_len) {
    *no = 0;
    *count = 1;
    *n_tensors = g->n_tensors;
    int rc = gguf_get_u32(g, "split.count", count);
    if (rc == -ENOENT || (rc == 0 && *count == 1))
        return 0;
    if (rc < 0 || *count == 0 || *count > 99999 || gguf_get_u32(g, "split.no", no) < 0 ||
        *no >= *count || gguf_get_u64(g, "split.tensors.count", n_tensors) < 0) {
        snprintf(err, err_len, "gguf_open: malformed split keys (split.no, split.count, "
                 "split.tensors.count) in \"%s\"", g->shards[0].path);
        return -EINVAL;
    }
    return 0;
}

/* Opens shard no of count whose name starts with prefix[0..prefix_len) and checks its split keys
 * against the first file's. Returns it or NULL with a message naming the shard. */
static struct gguf_impl *open_shard(const char *prefix, size_t prefix_len, uint32_t no,
                                    uint32_t count, uint64_t n_tensors, char *err,
                                    size_t err_len) {
    char path[4096], sub[512] = "";
    if (prefix_len + SPLIT_SUFFIX_BYTES >= sizeof(path)) {
        snprintf(err, err_len, "gguf_open: split model path too long");
        return NULL;
    }
    snprintf(path, sizeof(path), "%.*s-%05" PRIu32 "-of-%05" PRIu32 ".gguf", (int)prefix_len,
             prefix, no + 1, count);
    struct gguf_impl *gi = open_one(path, sub, sizeof(sub));
    uint32_t k_no, k_count;
    uint64_t k_tensors;
    if (!gi) {
        const char *why = strncmp(sub, "gguf_open: ", 11) == 0 ? sub + 11 : sub;
        snprintf(err, err_len, "gguf_open: shard %" PRIu32 " of %" PRIu32 " of a split model: %s",
                 no + 1, count, why);
    } else if (split_keys(&gi->pub, &k_no, &k_count, &k_tensors, sub, sizeof(sub)) < 0 ||
               k_no != no || k_count != count || k_tensors != n_tensors) {
        snprintf(err, err_len, "gguf_open: shard \"%s\" does not belong to this split model "
                 "(its split.no %" PRIu32 ", split.count %" PRIu32 ", split.tensors.count %" PRIu64
                 "; expected %" PRIu32 ", %" PRIu32 ", %" PRIu64 ")", path, k_no, k_count,
                 k_tensors, no, count, n_tensors);
        gguf_free(&gi->pub);
        gi = NULL;
    }
    return gi;
}

/* Moves shard part's file and tensors into into (the first shard) as shard number no; part keeps
 * nothing it still needs. Returns 0 or -ENOMEM. */
static int merge_shard(struct gguf_impl *into, struct gguf_impl *part, uint32_t no) {
    struct gguf *g = &into->pub, *q = &part->pub;
    size_t path_len = strlen(q->shards[0].path);
    char *path = arena_alloc(&into->arena, path_len + 1);
    if (!path)
        return -ENOMEM;
    memcpy(path, q->shards[0].path, path_len + 1);
    for (uint64_t i = 0; i < q->n_tensors; i++) {
        struct gguf_tensor t = q->tensors[i];
        size_t name_len = strlen(t.name);
        char *name = arena_alloc(&into->arena, name_len + 1);
        if (!name || grow((void **)&g->tensors, &into->tensor_cap, g->n_tensors,
                          sizeof(*g->tensors)) < 0)
            return -ENOMEM;
        t.name = memcpy(name, q->tensors[i].name, name_len + 1);
        t.shard = no;
        g->tensors[g->n_tensors++] = t;
    }
    g->shards[no] = (struct gguf_shard){.path = path, .fd = q->shards[0].fd,
                                        .file_bytes = q->shards[0].file_bytes};
    q->shards[0].fd = -1;
    g->file_bytes += q->shards[0].file_bytes;
    return 0;
}

/* Rebuilds the tensor index over every shard's tensors; a name in two shards is an error. */
static int reindex_tensors(struct gguf_impl *gi, char *err, size_t err_len) {
    struct parser p = {.gi = gi, .path = gi->pub.shards[0].path, .fd = -1, .at = NO_OFFSET,
                       .err = err, .err_len = err_len};
    free(gi->tensor_index.slots);
    gi->tensor_index.slots = NULL;
    return index_tensors(&p);
}

/* Opens the other shards of the split model whose shard `no` of `count` is first (already open as
 * path) and merges all into shard 0. Returns the merged model (first is consumed either way) or
 * NULL with a message. */
static struct gguf_impl *open_split(struct gguf_impl *first, const char *path, uint32_t no,
                                    uint32_t count, uint64_t n_tensors, char *err,
                                    size_t err_len) {
    size_t prefix_len;
    uint32_t name_no, name_count;
    struct gguf_impl *gi = NULL, *part = NULL;
    if (!gguf_split_name_parse(path, &prefix_len, &name_no, &name_count) || name_no != no ||
        name_count != count) {
        snprintf(err, err_len, "gguf_open: \"%s\" is shard %" PRIu32 " of %" PRIu32 " of a split "
                 "model, but its name does not end in -%05" PRIu32 "-of-%05" PRIu32 ".gguf", path,
                 no + 1, count, no + 1, count);
        goto fail;
    }
    gi = no == 0 ? first : open_shard(path, prefix_len, 0, count, n_tensors, err, err_len);
    if (!gi)
        goto fail;
    struct gguf_shard *shards = calloc(count, sizeof(*shards));
    if (!shards)
        goto oom;
    shards[0] = gi->pub.shards[0];
    for (uint32_t i = 1; i < count; i++)
        shards[i].fd = -1;
    free(gi->pub.shards);
    gi->pub.shards = shards;
    gi->pub.n_shards = count;
    for (uint32_t i = 1; i < count; i++) {
        part = i == no ? first : open_shard(path, prefix_len, i, count, n_tensors, err, err_len);
        if (!part)
            goto fail;
        if (merge_shard(gi, part, i) < 0)
            goto oom;
        if (part == first)
            first = NULL;
        gguf_free(&part->pub);
        part = NULL;
    }
    if (gi->pub.n_tensors != n_tensors) {
        snprintf(err, err_len, "gguf_open: split model \"%s\" has %" PRIu64 " tensors in its %"
                 PRIu32 " shards, split.tensors.count says %" PRIu64, gi->pub.shards[0].path,
                 gi->pub.n_tensors, count, n_tensors);
        goto fail;
    }
    if (reindex_tensors(gi, err, err_len) < 0)
        goto fail;
    if (gi == first)
        first = NULL;
    return gi;
oom:
    snprintf(err, err_len, "gguf_open: out of memory for split model \"%s\"", path);
fail:
    if (part && part != first)
        gguf_free(&part->pub);
    if (gi && gi != first)
        gguf_free(&gi->pub);
    gguf_free(first ? &first->pub : NULL);
    return NULL;
}

struct gguf *gguf_open(const char *path, char *err, size_t err_len) {
    struct gguf_impl *gi = open_one(path, err, err_len);
    uint32_t no, count;
    uint64_t n_tensors;
    if (!gi)
        return NULL;
    if (split_keys(&gi->pub, &no, &count, &n_tensors, err, err_len) < 0) {
        gguf_free(&gi->pub);
        return NULL;
    }
    if (count > 1)
        gi = open_split(gi, path, no, count, n_tensors, err, err_len);
    return gi ? &gi->pub : NULL;
}

void gguf_free(struct gguf *g) {
    if (!g)
        return;
    struct gguf_impl *gi = (struct gguf_impl *)g;
    for (uint32_t i = 0; g->shards && i < g->n_shards; i++)
        if (g->shards[i].fd >= 0)
            close(g->shards[i].fd);
    free(g->shards);
    free(g->kv);
    free(g->tensors);
    free(gi->kv_index.slots);
    free(gi->tensor_index.slots);
    arena_release(&gi->arena);
    free(gi);
}

/* ---------------------------------------------------------------------------------------------
 * Lookups and typed getters. */

const struct gguf_kv *gguf_find_kv(const struct gguf *g, const char *key) {
    if (!g)
        return NULL;
    const struct strmap_slot *s = strmap_get(&impl_of(g)->kv_index, key);
    return s ? &g->kv[s->idx] : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name) {
    if (!g)
        return NULL;
    const struct strmap_slot *s = strmap_get(&impl_of(g)->tensor_index, name);
    return s ? &g->tensors[s->idx] : NULL;
}

static bool vtype_is_unsigned(enum gguf_vtype t) {
    return t == GGUF_VTYPE_UINT8 || t == GGUF_VTYPE_UINT16 || t == GGUF_VTYPE_UINT32 ||
           t == GGUF_VTYPE_UINT64;
}

static bool vtype_is_signed(enum gguf_vtype t) {
    return t == GGUF_VTYPE_INT8 || t == GGUF_VTYPE_INT16 || t == GGUF_VTYPE_INT32 ||
           t == GGUF_VTYPE_INT64;
}

/* The integer value of key as a 64-bit magnitude plus sign. Returns 0, -ENOENT or -EINVAL. */
static int get_int(const struct gguf *g, const char *key, uint64_t *mag, bool *neg) {
    const struct gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv)
        return -ENOENT;
    if (vtype_is_unsigned(kv->type)) {
        *mag = kv->v.u64;
        *neg = false;
        return 0;
    }
    if (!vtype_is_signed(kv->type))
        return -EINVAL;
    *neg = kv->v.i64 < 0;
    *mag = *neg ? (uint64_t)0 - (uint64_t)kv->v.i64 : (uint64_t)kv->v.i64;
    return 0;
}

int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out) {
    uint64_t mag;
    bool neg;
    int rc = get_int(g, key, &mag, &neg);
    if (rc == 0 && neg)
        rc = -EINVAL;
    if (rc == 0)
        *out = mag;
    return rc;
}

int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out) {
    uint64_t v;
    int rc = gguf_get_u64(g, key, &v);
    if (rc == 0 && v > UINT32_MAX)
        rc = -EINVAL;
    if (rc == 0)
        *out = (uint32_t)v;
    return rc;
}

int gguf_get_i32(const struct gguf *g, const char *key, int32_t *out) {
    uint64_t mag;
    bool neg;
    int rc = get_int(g, key, &mag, &neg);
    if (rc == 0 && mag > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX))
        rc = -EINVAL;
    if (rc == 0)
        *out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
    return rc;
}

int gguf_get_f32(const struct gguf *g, const char *key, float *out) {
    const struct gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv)
        return -ENOENT;
    if (kv->type != GGUF_VTYPE_FLOAT32 && kv->type != GGUF_VTYPE_FLOAT64)
        return -EINVAL;
    *out = (float)kv->v.f64;
    return 0;
}

int gguf_get_bool(const struct gguf *g, const char *key, bool *out) {
    const struct gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv)
        return -ENOENT;
    if (kv->type != GGUF_VTYPE_BOOL)
        return -EINVAL;
    *out = kv->v.u64 != 0;
    return 0;
}

const char *gguf_get_str(const struct gguf *g, const char *key) {
    const struct gguf_kv *kv = gguf_find_kv(g, key);
    return kv && kv->type == GGUF_VTYPE_STRING ? kv->v.str.data : NULL;
}

const void *gguf_get_arr(const struct gguf *g, const char *key, enum gguf_vtype elem_type,
                         uint64_t *n) {
    const struct gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || kv->type != GGUF_VTYPE_ARRAY || kv->arr_type != elem_type)
        return NULL;
    if (n)
        *n = kv->n;
    return kv->arr;
}

/* ---------------------------------------------------------------------------------------------
 * Tensor data. */

int gguf_read_tensor_range(const struct gguf *g, const struct gguf_tensor *t, uint64_t rel_off,
                           void *dst, uint64_t n_bytes) {
    uint64_t end;
    if (!g || !t || (!dst && n_bytes))
        return -EINVAL;
    if (__builtin_add_overflow(rel_off, n_bytes, &end) || end > t->n_bytes)
        return -EINVAL;
    if (fault_hit(FAULT_READ))
        return -EIO;
    if (t->shard >= g->n_shards)
        return -EINVAL;
    return pread_full(g->shards[t->shard].fd, dst, n_bytes, t->data_off + rel_off);
}

int gguf_read_tensor(const struct gguf *g, const struct gguf_tensor *t, void *dst) {
    return t ? gguf_read_tensor_range(g, t, 0, dst, t->n_bytes) : -EINVAL;
}
