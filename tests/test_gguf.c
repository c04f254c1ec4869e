/* test_gguf.c - tests of the GGUF reader: facts of the shared fixtures (golden values read with an
 * independent Python parser), small files built byte by byte with each malformation the reader must
 * reject (and the message naming it), truncation at every byte, a bounded seeded fuzz loop, and
 * reads of a file that shrank after open. */
#include "gguf.h"
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * Byte builder: a growable little-endian byte string for hand-made GGUFs. */

struct bb {
    unsigned char *d;
    size_t n, cap; /* bytes used, bytes allocated */
};

static void bb_bytes(struct bb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *d = realloc(b->d, cap);
        if (!d)
            abort(); /* test helper: out of memory is not under test here */
        b->d = d;
        b->cap = cap;
    }
    memcpy(b->d + b->n, src, n);
    b->n += n;
}

static void bb_u8(struct bb *b, uint8_t v) { bb_bytes(b, &v, 1); }
static void bb_u32(struct bb *b, uint32_t v) { bb_bytes(b, &v, 4); }
static void bb_u64(struct bb *b, uint64_t v) { bb_bytes(b, &v, 8); }
static void bb_f32(struct bb *b, float v) { bb_bytes(b, &v, 4); }

static void bb_str(struct bb *b, const char *s) {
    bb_u64(b, strlen(s));
    bb_bytes(b, s, strlen(s));
}

static void bb_zeros(struct bb *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        bb_u8(b, 0);
}

static void bb_pad(struct bb *b, size_t align) {
    while (b->n % align)
        bb_u8(b, 0);
}

static void bb_free(struct bb *b) {
    free(b->d);
    memset(b, 0, sizeof(*b));
}

static void hdr(struct bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, version);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}

static void kv_u32(struct bb *b, const char *key, uint32_t v) {
    bb_str(b, key);
    bb_u32(b, GGUF_VTYPE_UINT32);
    bb_u32(b, v);
}

static void kv_str(struct bb *b, const char *key, const char *v) {
    bb_str(b, key);
    bb_u32(b, GGUF_VTYPE_STRING);
    bb_str(b, v);
}

/* A tensor info with up to 4 dims (the rest of dims[] ignored). */
static void tinfo(struct bb *b, const char *name, uint32_t n_dims, const uint64_t *dims,
                  uint32_t type, uint64_t off) {
    bb_str(b, name);
    bb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        bb_u64(b, dims[i]);
    bb_u32(b, type);
    bb_u64(b, off);
}

/* Writes bytes to a file in the test tmpdir; returns its path (static, overwritten each call). */
static const char *write_tmp(const char *name, const void *d, size_t n) {
    static char path[4200];
    snprintf(path, sizeof(path), "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n)) {
        test_fail(__FILE__, __LINE__, "cannot write %s", path);
    }
    if (f)
        fclose(f);
    return path;
}

/* ---------------------------------------------------------------------------------------------
 * The small valid file: 7 kv (including alignment 32), two tensors filling the data to EOF.
 *   a.weight f32 {4, 2} at 0 (32 bytes), b.weight q8_0 {32, 2} at 32 (68 bytes). */

#define SMALL_N_KV 7
#define SMALL_A_BYTES 32
#define SMALL_B_BYTES 68

static void small_kvs(struct bb *b) {
    kv_str(b, "general.architecture", "tiny");
    kv_u32(b, "general.alignment", 32);
    bb_str(b, "t.u8"); bb_u32(b, GGUF_VTYPE_UINT8); bb_u8(b, 200);
    bb_str(b, "t.i64"); bb_u32(b, GGUF_VTYPE_INT64); bb_u64(b, (uint64_t)-5);
    bb_str(b, "t.f64"); bb_u32(b, GGUF_VTYPE_FLOAT64);
    double d = 0.25;
    bb_bytes(b, &d, 8);
    bb_str(b, "t.tokens"); bb_u32(b, GGUF_VTYPE_ARRAY); bb_u32(b, GGUF_VTYPE_STRING); bb_u64(b, 3);
    bb_str(b, "a"); bb_str(b, ""); bb_str(b, "ccc");
    bb_str(b, "t.scores"); bb_u32(b, GGUF_VTYPE_ARRAY); bb_u32(b, GGUF_VTYPE_FLOAT32);
    bb_u64(b, 2); bb_f32(b, 1.5f); bb_f32(b, -2.0f);
}

static void build_small(struct bb *b) {
    static const uint64_t da[] = {4, 2}, db[] = {32, 2};
    hdr(b, 3, 2, SMALL_N_KV);
    small_kvs(b);
    tinfo(b, "a.weight", 2, da, QTYPE_F32, 0);
    tinfo(b, "b.weight", 2, db, QTYPE_Q8_0, SMALL_A_BYTES);
    bb_pad(b, 32);
    for (int i = 0; i < 8; i++)
        bb_f32(b, (float)i + 0.5f);
    for (int i = 0; i < SMALL_B_BYTES; i++)
        bb_u8(b, (uint8_t)i);
}

/* Asserts that opening bytes b fails with an error containing each non-NULL substring. */
static void expect_reject_at(int line, const struct bb *b, const char *s1, const char *s2) {
    char err[512];
    const char *path = write_tmp("bad.gguf", b->d, b->n);
    struct gguf *g = gguf_open(path, err, sizeof(err));
    if (g) {
        test_fail(__FILE__, line, "opened a bad file (expected \"%s\")", s1);
        gguf_free(g);
        return;
    }
    if (getenv("GGUF_TEST_VERBOSE")) /* to review the messages by eye */
        fprintf(stderr, "  %s\n", err);
    if ((s1 && !strstr(err, s1)) || (s2 && !strstr(err, s2)))
        test_fail(__FILE__, line, "error \"%s\" lacks \"%s\"/\"%s\"", err, s1, s2 ? s2 : "");
}
#define EXPECT_REJECT(b, s1, s2) expect_reject_at(__LINE__, (b), (s1), (s2))

/* ---------------------------------------------------------------------------------------------
 * Invariants every successfully opened file must keep (used by the fuzz loop too). */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Checks tensors lie inside the file, aligned, without overlap; touches every string. */
static void check_invariants(const struct gguf *g) {
    uint64_t *ends = calloc(g->n_tensors ? g->n_tensors * 2 : 1, sizeof(*ends));
    CHECK(ends != NULL);
    for (uint64_t i = 0; ends && i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        CHECK(t->n_bytes > 0 && t->data_off >= g->data_off);
        CHECK(t->data_off + t->n_bytes <= g->file_bytes && t->data_off + t->n_bytes > t->data_off);
        CHECK((t->data_off - g->data_off) % g->alignment == 0);
        CHECK(gguf_find_tensor(g, t->name) == t);
        ends[2 * i] = t->data_off;
        ends[2 * i + 1] = t->data_off + t->n_bytes;
    }
    if (ends && g->n_tensors) { /* sorting (start, end) pairs keeps pairs intact when disjoint */
        qsort(ends, g->n_tensors, 2 * sizeof(*ends), cmp_u64);
        for (uint64_t i = 1; i < g->n_tensors; i++)
            CHECK(ends[2 * i - 1] <= ends[2 * i]);
    }
    free(ends);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct gguf_kv *kv = &g->kv[i];
        CHECK(strlen(kv->key) > 0 && gguf_find_kv(g, kv->key) == kv);
        if (kv->type == GGUF_VTYPE_ARRAY && kv->arr_type == GGUF_VTYPE_STRING) {
            const struct gguf_str *s = kv->arr;
            for (uint64_t j = 0; j < kv->n; j++)
                CHECK(s[j].data[s[j].len] == '\0');
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Small valid files. */

static void test_small_valid(void) {
    struct bb b = {0};
    char err[512];
    build_small(&b);
    struct gguf *g = gguf_open(write_tmp("small.gguf", b.d, b.n), err, sizeof(err));
    CHECK_MSG(g != NULL, "open: %s", err);
    if (!g)
        goto out;
    CHECK_EQ_INT(g->version, 3);
    CHECK_EQ_INT(g->n_kv, SMALL_N_KV);
    CHECK_EQ_INT(g->n_tensors, 2);
    CHECK_EQ_INT(g->alignment, 32);
    CHECK_EQ_INT(g->data_off % 32, 0);
    CHECK_EQ_INT(g->file_bytes, b.n);
    CHECK_STR(gguf_get_str(g, "general.architecture"), "tiny");
    const struct gguf_tensor *a = gguf_find_tensor(g, "a.weight");
    const struct gguf_tensor *q = gguf_find_tensor(g, "b.weight");
    CHECK(a && q && !gguf_find_tensor(g, "c.weight") && !gguf_find_tensor(g, "a.weigh"));
    if (a && q) {
        CHECK_EQ_INT(a->n_dims, 2);
        CHECK(a->ne[0] == 4 && a->ne[1] == 2 && a->ne[2] == 1 && a->ne[3] == 1);
        CHECK_EQ_INT(a->n_elems, 8);
        CHECK_EQ_INT(a->row_bytes, 16);
        CHECK_EQ_INT(a->n_bytes, SMALL_A_BYTES);
        CHECK_EQ_INT(a->data_off, g->data_off);
        CHECK_EQ_INT(q->type, QTYPE_Q8_0);
        CHECK_EQ_INT(q->row_bytes, 34);
        CHECK_EQ_INT(q->n_bytes, SMALL_B_BYTES);
        CHECK_EQ_INT(q->data_off, g->data_off + SMALL_A_BYTES);
        float f[8];
        CHECK_EQ_INT(gguf_read_tensor(g, a, f), 0);
        CHECK_NEAR(f[0], 0.5, 0);
        CHECK_NEAR(f[7], 7.5, 0);
        unsigned char r[3];
        CHECK_EQ_INT(gguf_read_tensor_range(g, q, 65, r, 3), 0);
        CHECK(r[0] == 65 && r[1] == 66 && r[2] == 67);
        CHECK_EQ_INT(gguf_read_tensor_range(g, q, 66, r, 3), -EINVAL);
        CHECK_EQ_INT(gguf_read_tensor_range(g, q, UINT64_MAX, r, 2), -EINVAL);
        CHECK_EQ_INT(gguf_read_tensor_range(g, q, 68, r, 0), 0);
    }
    check_invariants(g);
    gguf_free(g);
out:
    bb_free(&b);
}

static void test_getters(void) {
    struct bb b = {0};
    char err[512];
    build_small(&b);
    struct gguf *g = gguf_open(write_tmp("small.gguf", b.d, b.n), err, sizeof(err));
    CHECK_MSG(g != NULL, "open: %s", err);
    if (!g)
        goto out;
    uint32_t u32 = 0;
    uint64_t u64 = 0, n = 0;
    int32_t i32 = 0;
    float f = 0;
    bool bo;
    CHECK_EQ_INT(gguf_get_u32(g, "t.u8", &u32), 0);
    CHECK_EQ_INT(u32, 200);
    CHECK_EQ_INT(gguf_get_i32(g, "t.u8", &i32), 0);
    CHECK_EQ_INT(i32, 200);
    CHECK_EQ_INT(gguf_get_i32(g, "t.i64", &i32), 0);
    CHECK_EQ_INT(i32, -5);
    CHECK_EQ_INT(gguf_get_u64(g, "t.i64", &u64), -EINVAL);
    CHECK_EQ_INT(gguf_get_u32(g, "t.missing", &u32), -ENOENT);
    CHECK_EQ_INT(gguf_get_u32(g, "general.architecture", &u32), -EINVAL);
    CHECK_EQ_INT(gguf_get_f32(g, "t.f64", &f), 0);
    CHECK_NEAR(f, 0.25, 0);
    CHECK_EQ_INT(gguf_get_f32(g, "t.u8", &f), -EINVAL);
    CHECK_EQ_INT(gguf_get_bool(g, "t.u8", &bo), -EINVAL);
    CHECK(gguf_get_str(g, "t.u8") == NULL && gguf_get_str(g, "nope") == NULL);
    const struct gguf_str *tok = gguf_get_arr(g, "t.tokens", GGUF_VTYPE_STRING, &n);
    CHECK(tok != NULL);
    if (tok) {
        CHECK_EQ_INT(n, 3);
        CHECK_STR(tok[0].data, "a");
        CHECK_EQ_INT(tok[1].len, 0);
        CHECK_STR(tok[2].data, "ccc");
    }
    CHECK(gguf_get_arr(g, "t.tokens", GGUF_VTYPE_INT32, &n) == NULL);
    const float *sc = gguf_get_arr(g, "t.scores", GGUF_VTYPE_FLOAT32, &n);
    CHECK(sc && n == 2 && sc[0] == 1.5f && sc[1] == -2.0f);
    CHECK(gguf_find_kv(g, NULL) == NULL && gguf_find_tensor(g, NULL) == NULL);
    gguf_free(g);
out:
    bb_free(&b);
}

/* Scalars of every type, an empty array, a bool array, v2, alignment 64, and a vocab-only file. */
static void test_value_types(void) {
    struct bb b = {0};
    char err[512];
    hdr(&b, 2, 0, 8);
    bb_str(&b, "i8"); bb_u32(&b, GGUF_VTYPE_INT8); bb_u8(&b, 0x80);
    bb_str(&b, "u16"); bb_u32(&b, GGUF_VTYPE_UINT16); bb_u8(&b, 0xff); bb_u8(&b, 0xff);
    bb_str(&b, "i16"); bb_u32(&b, GGUF_VTYPE_INT16); bb_u8(&b, 0xfe); bb_u8(&b, 0xff);
    bb_str(&b, "i32"); bb_u32(&b, GGUF_VTYPE_INT32); bb_u32(&b, 0x80000000u);
    bb_str(&b, "u64"); bb_u32(&b, GGUF_VTYPE_UINT64); bb_u64(&b, 1ull << 40);
    bb_str(&b, "b"); bb_u32(&b, GGUF_VTYPE_BOOL); bb_u8(&b, 1);
    bb_str(&b, "empty"); bb_u32(&b, GGUF_VTYPE_ARRAY); bb_u32(&b, GGUF_VTYPE_INT32); bb_u64(&b, 0);
    bb_str(&b, "bools"); bb_u32(&b, GGUF_VTYPE_ARRAY); bb_u32(&b, GGUF_VTYPE_BOOL); bb_u64(&b, 2);
    bb_u8(&b, 0); bb_u8(&b, 1);
    struct gguf *g = gguf_open(write_tmp("types.gguf", b.d, b.n), err, sizeof(err));
    CHECK_MSG(g != NULL, "open: %s", err);
    if (g) {
        int32_t i32;
        uint32_t u32;
        uint64_t u64, n = 99;
        bool bo = false;
        CHECK(gguf_get_i32(g, "i8", &i32) == 0 && i32 == -128);
        CHECK(gguf_get_u32(g, "u16", &u32) == 0 && u32 == 65535);
        CHECK(gguf_get_i32(g, "i16", &i32) == 0 && i32 == -2);
        CHECK(gguf_get_i32(g, "i32", &i32) == 0 && i32 == INT32_MIN);
        CHECK_EQ_INT(gguf_get_u32(g, "u64", &u32), -EINVAL);
        CHECK(gguf_get_u64(g, "u64", &u64) == 0 && u64 == 1ull << 40);
        CHECK(gguf_get_bool(g, "b", &bo) == 0 && bo);
        CHECK(gguf_get_arr(g, "empty", GGUF_VTYPE_INT32, &n) != NULL && n == 0);
        const uint8_t *ba = gguf_get_arr(g, "bools", GGUF_VTYPE_BOOL, &n);
        CHECK(ba && n == 2 && ba[0] == 0 && ba[1] == 1);
        CHECK_EQ_INT(g->version, 2);
        CHECK_EQ_INT(g->n_tensors, 0);
        gguf_free(g);
    }
    bb_free(&b);
}

static void test_alignment_64(void) {
    static const uint64_t d[] = {16};
    struct bb b = {0};
    char err[512];
    hdr(&b, 3, 2, 1);
    kv_u32(&b, "general.alignment", 64);
    tinfo(&b, "x", 1, d, QTYPE_F32, 0);
    tinfo(&b, "y", 1, d, QTYPE_F32, 64);
    bb_pad(&b, 64);
    bb_zeros(&b, 128);
    struct gguf *g = gguf_open(write_tmp("a64.gguf", b.d, b.n), err, sizeof(err));
    CHECK_MSG(g != NULL, "open: %s", err);
    if (g) {
        CHECK_EQ_INT(g->alignment, 64);
        CHECK_EQ_INT(g->data_off % 64, 0);
        CHECK_EQ_INT(gguf_find_tensor(g, "y")->data_off, g->data_off + 64);
        gguf_free(g);
    }
    bb_free(&b);
}

/* ---------------------------------------------------------------------------------------------
 * Malformations: each rejected with a message naming it. */

static void test_reject_header(void) {
    struct bb b = {0};
    char err[64];
    CHECK(gguf_open("/nonexistent/x.gguf", err, sizeof(err)) == NULL && strstr(err, "cannot"));
    CHECK(gguf_open(test_tmpdir(), err, sizeof(err)) == NULL);
    CHECK(gguf_open(NULL, NULL, 0) == NULL);
    EXPECT_REJECT(&b, "truncated", "magic");
    bb_bytes(&b, "GGUG", 4); bb_u32(&b, 3); bb_u64(&b, 0); bb_u64(&b, 0);
    EXPECT_REJECT(&b, "bad magic", NULL);
    bb_free(&b);
    hdr(&b, 1, 0, 0);
    EXPECT_REJECT(&b, "unsupported version 1", NULL);
    bb_free(&b);
    hdr(&b, 4, 0, 0);
    EXPECT_REJECT(&b, "unsupported version 4", NULL);
    bb_free(&b);
    hdr(&b, 0x03000000, 0, 0);
    EXPECT_REJECT(&b, "big-endian", NULL);
    bb_free(&b);
    hdr(&b, 3, 0, 1ull << 40);
    EXPECT_REJECT(&b, "absurd counts", NULL);
    bb_free(&b);
    hdr(&b, 3, UINT64_MAX, 0);
    EXPECT_REJECT(&b, "absurd counts", NULL);
    bb_free(&b);
    hdr(&b, 3, 0, 2); /* counts that fit the minimum but run out of bytes */
    kv_u32(&b, "k", 1);
    bb_zeros(&b, 14);
    EXPECT_REJECT(&b, "empty key", "kv #1");
    bb_free(&b);
}

static void test_reject_kv(void) {
    struct bb b = {0};
    hdr(&b, 3, 0, 1); bb_u64(&b, 1ull << 40); bb_zeros(&b, 16);
    EXPECT_REJECT(&b, "key length 1099511627776 past end of file", "kv #0");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "my.key"); bb_u32(&b, 13); bb_zeros(&b, 8);
    EXPECT_REJECT(&b, "invalid value type 13", "key \"my.key\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "my.str"); bb_u32(&b, GGUF_VTYPE_STRING); bb_u64(&b, 100);
    bb_zeros(&b, 10);
    EXPECT_REJECT(&b, "string value length 100 past end", "key \"my.str\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "nest"); bb_u32(&b, GGUF_VTYPE_ARRAY);
    bb_u32(&b, GGUF_VTYPE_ARRAY); bb_u64(&b, 1); bb_u32(&b, GGUF_VTYPE_UINT8); bb_u64(&b, 0);
    EXPECT_REJECT(&b, "nested array", "key \"nest\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "arr"); bb_u32(&b, GGUF_VTYPE_ARRAY); bb_u32(&b, 77);
    bb_u64(&b, 1); bb_zeros(&b, 8);
    EXPECT_REJECT(&b, "invalid array element type 77", "key \"arr\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "arr"); bb_u32(&b, GGUF_VTYPE_ARRAY);
    bb_u32(&b, GGUF_VTYPE_UINT64); bb_u64(&b, 1ull << 61); bb_zeros(&b, 8);
    EXPECT_REJECT(&b, "array of 2305843009213693952 elements past end", "key \"arr\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "toks"); bb_u32(&b, GGUF_VTYPE_ARRAY);
    bb_u32(&b, GGUF_VTYPE_STRING); bb_u64(&b, 3); bb_str(&b, "x"); bb_u64(&b, 5000);
    bb_zeros(&b, 16);
    EXPECT_REJECT(&b, "array string length 5000 past end", "key \"toks\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "toks"); bb_u32(&b, GGUF_VTYPE_ARRAY);
    bb_u32(&b, GGUF_VTYPE_STRING); bb_u64(&b, UINT64_MAX / 2); bb_zeros(&b, 16);
    EXPECT_REJECT(&b, "strings past end of file", "key \"toks\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_str(&b, "flag"); bb_u32(&b, GGUF_VTYPE_BOOL); bb_u8(&b, 2);
    EXPECT_REJECT(&b, "invalid bool value 2", "key \"flag\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1); bb_u64(&b, 3); bb_bytes(&b, "a\0b", 3); bb_u32(&b, 0); bb_u8(&b, 0);
    EXPECT_REJECT(&b, "contains a NUL byte", NULL);
    bb_free(&b);
    hdr(&b, 3, 0, 3); kv_u32(&b, "dup.key", 1); kv_u32(&b, "other", 2); kv_u32(&b, "dup.key", 3);
    EXPECT_REJECT(&b, "duplicate key", "key \"dup.key\"");
    bb_free(&b);
}

static void test_reject_alignment(void) {
    static const uint32_t bad[] = {0, 48, 3, 0x80000001u};
    struct bb b = {0};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hdr(&b, 3, 0, 1);
        kv_u32(&b, "general.alignment", bad[i]);
        EXPECT_REJECT(&b, "not a power of two", "key \"general.alignment\"");
        bb_free(&b);
    }
    hdr(&b, 3, 0, 1);
    bb_str(&b, "general.alignment"); bb_u32(&b, GGUF_VTYPE_UINT64); bb_u64(&b, 32);
    EXPECT_REJECT(&b, "expected uint32", "key \"general.alignment\"");
    bb_free(&b);
    hdr(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "32");
    EXPECT_REJECT(&b, "expected uint32", "general.alignment");
    bb_free(&b);
}

/* A file with one kv and the given tensor infos, padded, with data_bytes of data. */
static void one_tensor_file(struct bb *b, uint32_t n_dims, const uint64_t *dims, uint32_t type,
                            uint64_t off, size_t data_bytes) {
    hdr(b, 3, 1, 1);
    kv_str(b, "general.architecture", "t");
    tinfo(b, "blk.0.w", n_dims, dims, type, off);
    bb_pad(b, 32);
    bb_zeros(b, data_bytes);
}

static void test_reject_tensor_shape(void) {
    struct bb b = {0};
    const uint64_t d4[] = {4, 1, 1, 1, 1};
    one_tensor_file(&b, 0, d4, QTYPE_F32, 0, 64);
    EXPECT_REJECT(&b, "n_dims 0 not in 1..4", "tensor \"blk.0.w\"");
    bb_free(&b);
    one_tensor_file(&b, 5, d4, QTYPE_F32, 0, 64);
    EXPECT_REJECT(&b, "n_dims 5", "tensor \"blk.0.w\"");
    bb_free(&b);
    const uint64_t dz[] = {4, 0};
    one_tensor_file(&b, 2, dz, QTYPE_F32, 0, 64);
    EXPECT_REJECT(&b, "dimension 1 is 0", "tensor \"blk.0.w\"");
    bb_free(&b);
    const uint64_t dhuge[] = {1ull << 63};
    one_tensor_file(&b, 1, dhuge, QTYPE_F32, 0, 64);
    EXPECT_REJECT(&b, "dimension 0 is 9223372036854775808", "blk.0.w");
    bb_free(&b);
    const uint64_t dover[] = {1ull << 32, 1ull << 32};
    one_tensor_file(&b, 2, dover, QTYPE_F32, 0, 64);
    EXPECT_REJECT(&b, "element count overflows", "tensor \"blk.0.w\"");
    bb_free(&b);
    const uint64_t dbig[] = {1ull << 31, 1ull << 30};
    one_tensor_file(&b, 2, dbig, QTYPE_F32, 0, 64);
    EXPECT_REJECT(&b, "larger than the file", "tensor \"blk.0.w\"");
    bb_free(&b);
    one_tensor_file(&b, 1, d4, 4, 0, 64); /* ggml's removed Q4_2 */
    EXPECT_REJECT(&b, "unknown tensor type 4", "tensor \"blk.0.w\"");
    bb_free(&b);
    one_tensor_file(&b, 1, d4, 1000, 0, 64);
    EXPECT_REJECT(&b, "unknown tensor type 1000", "tensor \"blk.0.w\"");
    bb_free(&b);
    const uint64_t d16[] = {16, 2};
    one_tensor_file(&b, 2, d16, QTYPE_Q8_0, 0, 128);
    EXPECT_REJECT(&b, "ne[0] 16 is not a multiple of the q8_0 block size 32", "blk.0.w");
    bb_free(&b);
    const uint64_t d128[] = {128};
    one_tensor_file(&b, 1, d128, QTYPE_Q4_K, 0, 512);
    EXPECT_REJECT(&b, "not a multiple of the q4_K block size 256", "blk.0.w");
    bb_free(&b);
}

static void test_reject_tensor_layout(void) {
    struct bb b = {0};
    const uint64_t d4[] = {4};
    one_tensor_file(&b, 1, d4, QTYPE_F32, 16, 64);
    EXPECT_REJECT(&b, "offset 16 not aligned to 32", "tensor \"blk.0.w\"");
    bb_free(&b);
    one_tensor_file(&b, 1, d4, QTYPE_F32, 0, 15);
    EXPECT_REJECT(&b, "past end of file", "tensor \"blk.0.w\"");
    bb_free(&b);
    one_tensor_file(&b, 1, d4, QTYPE_F32, UINT64_MAX - 31, 64);
    EXPECT_REJECT(&b, "past end of file", "tensor \"blk.0.w\"");
    bb_free(&b);
    hdr(&b, 3, 2, 0);
    tinfo(&b, "same", 1, d4, QTYPE_F32, 0);
    tinfo(&b, "same", 1, d4, QTYPE_F32, 32);
    bb_pad(&b, 32); bb_zeros(&b, 64);
    EXPECT_REJECT(&b, "duplicate tensor name", "tensor \"same\"");
    bb_free(&b);
    const uint64_t d16[] = {16};
    hdr(&b, 3, 3, 0);
    tinfo(&b, "t0", 1, d4, QTYPE_F32, 64);
    tinfo(&b, "t1", 1, d16, QTYPE_F32, 0); /* 64 bytes: ends exactly where t0 starts: fine */
    tinfo(&b, "t2", 1, d16, QTYPE_F32, 32); /* overlaps t1 */
    bb_pad(&b, 32); bb_zeros(&b, 96);
    EXPECT_REJECT(&b, "overlaps tensor \"t1\"", "tensor \"t2\"");
    bb_free(&b);
    hdr(&b, 3, 1, 0); /* an empty tensor name */
    tinfo(&b, "", 1, d4, QTYPE_F32, 0);
    bb_pad(&b, 32); bb_zeros(&b, 32);
    EXPECT_REJECT(&b, "empty tensor name", "tensor info #0");
    bb_free(&b);
}

/* Every proper prefix of the small file is rejected; the whole file opens. */
static void test_truncation(void) {
    struct bb b = {0};
    char err[512];
    build_small(&b);
    for (size_t n = 0; n < b.n; n++) {
        struct gguf *g = gguf_open(write_tmp("trunc.gguf", b.d, n), err, sizeof(err));
        CHECK_MSG(g == NULL, "prefix of %zu bytes opened", n);
        CHECK_MSG(strncmp(err, "gguf_open: ", 11) == 0, "message \"%s\"", err);
        gguf_free(g);
    }
    struct gguf *g = gguf_open(write_tmp("trunc.gguf", b.d, b.n), err, sizeof(err));
    CHECK_MSG(g != NULL, "open: %s", err);
    gguf_free(g);
    bb_free(&b);
}

/* A file that shrinks after open: reads past the new end give an error, not garbage. */
static void test_shrunk_after_open(void) {
    struct bb b = {0};
    char err[512];
    build_small(&b);
    const char *path = write_tmp("shrink.gguf", b.d, b.n);
    struct gguf *g = gguf_open(path, err, sizeof(err));
    CHECK_MSG(g != NULL, "open: %s", err);
    if (g) {
        const struct gguf_tensor *q = gguf_find_tensor(g, "b.weight");
        unsigned char buf[SMALL_B_BYTES];
        CHECK_EQ_INT(truncate(path, (off_t)(q->data_off + 10)), 0);
        CHECK_EQ_INT(gguf_read_tensor(g, q, buf), -EIO);
        CHECK_EQ_INT(gguf_read_tensor_range(g, q, 0, buf, 10), 0);
        CHECK_EQ_INT(gguf_read_tensor_range(g, q, 5, buf, 6), -EIO);
        gguf_free(g);
    }
    bb_free(&b);
}

/* ---------------------------------------------------------------------------------------------
 * Fuzzing: seeded and bounded, so runs are reproducible and fast. */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Iterations of a fuzz loop: n, or n * $GGUF_FUZZ_SCALE for longer runs by hand; a run by hand
 * may also pick its seed with $GGUF_FUZZ_SEED. */
static int fuzz_iters(int n) {
    const char *scale = getenv("GGUF_FUZZ_SCALE"), *seed = getenv("GGUF_FUZZ_SEED");
    if (seed && strtoull(seed, NULL, 0))
        rng_state = strtoull(seed, NULL, 0);
    return scale && atoi(scale) > 0 ? n * atoi(scale) : n;
}

static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Overwrites one to four places of d[0..span) with random or boundary values. */
static void mutate(unsigned char *d, size_t span) {
    static const uint64_t special[] = {0, 1, 0xff, 0x7fffffffffffffffull, 0xffffffffffffffffull,
                                       0x80000000ull, 32, 13, 9, 4, 1ull << 40};
    int n = 1 + (int)(rng() % 4);
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)(rng() % span);
        if (rng() % 2) {
            d[at] = (unsigned char)rng();
        } else {
            uint64_t v = special[rng() % (sizeof(special) / sizeof(special[0]))];
            size_t w = rng() % 2 ? 8 : 4;
            memcpy(d + at, &v, at + w <= span ? w : span - at);
        }
    }
}

/* Opens path; on success checks invariants and reads every tensor of at most max_read bytes. */
static int fuzz_open(const char *path, uint64_t max_read) {
    char err[512];
    struct gguf *g = gguf_open(path, err, sizeof(err));
    if (!g) {
        CHECK_MSG(strncmp(err, "gguf_open: ", 11) == 0, "message \"%s\"", err);
        return 0;
    }
    check_invariants(g);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        void *buf = t->n_bytes <= max_read ? malloc(t->n_bytes) : NULL;
        if (buf)
            CHECK_EQ_INT(gguf_read_tensor(g, t, buf), 0);
        free(buf);
    }
    gguf_free(g);
    return 1;
}

static void test_fuzz_small(void) {
    struct bb b = {0};
    build_small(&b);
    unsigned char *m = malloc(b.n + 64);
    int opened = 0, iters = fuzz_iters(4000);
    for (int iter = 0; iter < iters && m; iter++) {
        memcpy(m, b.d, b.n);
        memset(m + b.n, 0, 64);
        size_t n = b.n;
        mutate(m, b.n);
        if (rng() % 4 == 0)
            n = (size_t)(rng() % (b.n + 64));
        opened += fuzz_open(write_tmp("fuzz.gguf", m, n), 1 << 20);
    }
    fprintf(stderr, "fuzz_small: %d of %d mutants opened\n", opened, iters);
    free(m);
    bb_free(&b);
}

/* Copies src into the tmpdir as name; returns the copy's path in out. */
static int copy_file(const char *src, const char *name, char *out, size_t out_len) {
    size_t n;
    void *d = test_read_file(src, &n);
    if (!d)
        return -1;
    snprintf(out, out_len, "%s", write_tmp(name, d, n));
    free(d);
    return 0;
}

static void test_fuzz_fixture_header(void) {
    const char *dir = test_fixtures_dir();
    char src[4200], path[4200], err[512];
    if (!dir) {
        test_skip("fixtures absent: ../shared/fixtures (set SNIPER_FIXTURES)");
        return;
    }
    snprintf(src, sizeof(src), "%s/models/tiny-qwen3moe-q4_k_m.gguf", dir);
    struct gguf *g = gguf_open(src, err, sizeof(err));
    if (!g || copy_file(src, "fuzzfix.gguf", path, sizeof(path)) < 0) {
        test_fail(__FILE__, __LINE__, "cannot open or copy %s: %s", src, err);
        gguf_free(g);
        return;
    }
    size_t span = (size_t)g->data_off;
    gguf_free(g);
    unsigned char *orig = malloc(span), *m = malloc(span);
    int fd = open(path, O_RDWR);
    CHECK(orig && m && fd >= 0 && pread(fd, orig, span, 0) == (ssize_t)span);
    int opened = 0, iters = fuzz_iters(1500);
    for (int iter = 0; iter < iters && orig && m && fd >= 0; iter++) {
        memcpy(m, orig, span);
        size_t lo = rng() % 3 == 0 ? 0 : (size_t)(rng() % span); /* hit the tensor infos often */
        mutate(m + lo, span - lo);
        CHECK(pwrite(fd, m, span, 0) == (ssize_t)span);
        opened += fuzz_open(path, 4096);
    }
    fprintf(stderr, "fuzz_fixture_header: %d of %d mutants opened\n", opened, iters);
    if (fd >= 0)
        close(fd);
    unlink(path); /* 6 MB: the tmpdir is kept, its big files need not be */
    free(orig);
    free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Shared fixtures. */

static struct gguf *open_fixture(const char *rel) {
    const char *dir = test_fixtures_dir();
    char path[4200], err[512];
    if (!dir) {
        test_skip("fixtures absent: ../shared/fixtures (set SNIPER_FIXTURES)");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    struct gguf *g = gguf_open(path, err, sizeof(err));
    CHECK_MSG(g != NULL, "open %s: %s", rel, err);
    return g;
}

/* Opens every .gguf under models/ and tokenizer/; each must open and keep the invariants. */
static void test_fixtures_all_open(void) {
    static const char *subdirs[] = {"models", "tokenizer"};
    const char *dir = test_fixtures_dir();
    int n_opened = 0;
    if (!dir) {
        test_skip("fixtures absent: ../shared/fixtures (set SNIPER_FIXTURES)");
        return;
    }
    for (size_t s = 0; s < 2; s++) {
        char sub[4200];
        snprintf(sub, sizeof(sub), "%s/%s", dir, subdirs[s]);
        DIR *d = opendir(sub);
        CHECK_MSG(d != NULL, "cannot list %s", sub);
        for (struct dirent *e; d && (e = readdir(d));) {
            size_t len = strlen(e->d_name);
            if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0)
                continue;
            char rel[600];
            snprintf(rel, sizeof(rel), "%s/%.500s", subdirs[s], e->d_name);
            struct gguf *g = open_fixture(rel);
            if (g) {
                check_invariants(g);
                uint64_t n = 0;
                CHECK_MSG(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VTYPE_STRING, &n) && n,
                          "%s: no tokens", rel);
                n_opened++;
            }
            gguf_free(g);
        }
        if (d)
            closedir(d);
    }
    CHECK_MSG(n_opened >= 9, "only %d fixtures opened", n_opened);
}

static void test_fixture_f32(void) {
    struct gguf *g = open_fixture("models/tiny-qwen3moe-f32.gguf");
    if (!g)
        return;
    uint32_t v = 0;
    float f = 0;
    uint64_t n = 0;
    bool bo = true;
    CHECK_STR(gguf_get_str(g, "general.architecture"), "qwen3moe");
    CHECK(gguf_get_u32(g, "qwen3moe.block_count", &v) == 0 && v == 4);
    CHECK(gguf_get_u32(g, "qwen3moe.embedding_length", &v) == 0 && v == 256);
    CHECK(gguf_get_u32(g, "qwen3moe.expert_count", &v) == 0 && v == 16);
    CHECK(gguf_get_u32(g, "qwen3moe.expert_used_count", &v) == 0 && v == 4);
    CHECK(gguf_get_f32(g, "qwen3moe.rope.freq_base", &f) == 0 && f == 1e6f);
    CHECK(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &bo) == 0 && !bo);
    CHECK_STR(gguf_get_str(g, "tokenizer.ggml.pre"), "qwen2");
    const struct gguf_str *tok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VTYPE_STRING, &n);
    CHECK(tok && n == 2282);
    if (tok && n == 2282) {
        CHECK_STR(tok[0].data, "!");
        CHECK_STR(tok[2257].data, "<|im_start|>");
    }
    CHECK(gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_VTYPE_STRING, &n) && n == 2000);
    CHECK_EQ_INT(g->n_tensors, 51);
    CHECK_EQ_INT(g->data_off, 74112);
    const struct gguf_tensor *t = gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->n_dims, 3);
        CHECK(t->ne[0] == 256 && t->ne[1] == 128 && t->ne[2] == 16 && t->ne[3] == 1);
        CHECK_EQ_INT(t->type, QTYPE_F32);
        CHECK_EQ_INT(t->data_off, 74112 + 3666432);
        float x[2]; /* golden values from an independent Python reader */
        CHECK_EQ_INT(gguf_read_tensor_range(g, t, 4 * 4, x, sizeof(x)), 0);
        CHECK_NEAR(x[0], 0.0457928366959095, 1e-9);
        CHECK_NEAR(x[1], -0.14639654755592346, 1e-9);
    }
    t = gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->n_bytes == 256ull * 2282 * 4);
    float *w = t ? malloc(t->n_bytes) : NULL;
    if (w) {
        CHECK_EQ_INT(gguf_read_tensor(g, t, w), 0);
        CHECK_NEAR(w[0], -0.03861165791749954, 1e-9);
        CHECK_NEAR(w[1], 0.05451783537864685, 1e-9);
        CHECK_NEAR(w[7], 0.006411802023649216, 1e-9);
        bool finite = true;
        for (uint64_t i = 0; i < t->n_elems; i++)
            finite = finite && isfinite(w[i]);
        CHECK(finite);
    }
    free(w);
    gguf_free(g);
}

static void test_fixture_q4_k_m(void) {
    struct gguf *g = open_fixture("models/tiny-qwen3moe-q4_k_m.gguf");
    if (!g)
        return;
    bool seen[QTYPE_COUNT] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++)
        seen[g->tensors[i].type] = true;
    CHECK(seen[QTYPE_Q4_K] && seen[QTYPE_Q6_K] && seen[QTYPE_Q5_0] && seen[QTYPE_Q8_0]);
    CHECK(seen[QTYPE_F32]);
    const struct gguf_tensor *t = gguf_find_tensor(g, "output.weight");
    CHECK(t && t->type == QTYPE_Q6_K && t->row_bytes == 210 && t->n_bytes == 210ull * 2282);
    t = gguf_find_tensor(g, "blk.0.ffn_down_exps.weight");
    CHECK(t && t->type == QTYPE_Q5_0 && t->ne[0] == 128);
    gguf_free(g);
}

static void test_fixture_vocab_only(void) {
    struct gguf *g = open_fixture("tokenizer/ggml-vocab-qwen3.gguf");
    if (!g)
        return;
    uint64_t n = 0;
    CHECK_EQ_INT(g->n_tensors, 0);
    const struct gguf_str *tok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VTYPE_STRING, &n);
    CHECK(tok && n == 151936);
    CHECK(gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_VTYPE_STRING, &n) && n == 151387);
    CHECK_STR(gguf_get_str(g, "tokenizer.ggml.pre"), "qwen2");
    gguf_free(g);
}

/* ---------------------------------------------------------------------------------------------
 * Split models (gguf-split's layout): shard k of n has split.no = k, split.count = n (u16) and
 * split.tensors.count (i32); the first alone carries the model's metadata. Each shard here holds
 * one f32 tensor "tK.weight" {4} with values 10 k + i. */

static void kv_u16(struct bb *b, const char *key, uint16_t v) {
    bb_str(b, key);
    bb_u32(b, GGUF_VTYPE_UINT16);
    bb_bytes(b, &v, 2);
}

static void kv_i32(struct bb *b, const char *key, int32_t v) {
    bb_str(b, key);
    bb_u32(b, GGUF_VTYPE_INT32);
    bb_bytes(b, &v, 4);
}

/* Writes shard k claiming split.no no, split.count count and n_total tensors, holding the tensor
 * named name, under file name file. */
static void split_shard_as(const char *file, uint32_t k, uint32_t no, uint32_t count,
                           int32_t n_total, const char *name) {
    static const uint64_t d[] = {4};
    struct bb b = {0};
    hdr(&b, 3, 1, k == 0 ? 4 : 3);
    if (k == 0)
        kv_str(&b, "general.architecture", "tiny");
    kv_u16(&b, "split.no", (uint16_t)no);
    kv_u16(&b, "split.count", (uint16_t)count);
    kv_i32(&b, "split.tensors.count", n_total);
    tinfo(&b, name, 1, d, QTYPE_F32, 0);
    bb_pad(&b, 32);
    for (int i = 0; i < 4; i++)
        bb_f32(&b, (float)(10 * k + (uint32_t)i));
    write_tmp(file, b.d, b.n);
    bb_free(&b);
}

static void split_shard(uint32_t k) {
    char file[64], name[32];
    snprintf(file, sizeof(file), "s-%05u-of-00003.gguf", k + 1);
    snprintf(name, sizeof(name), "t%u.weight", k);
    split_shard_as(file, k, k, 3, 3, name);
}

static void write_split(void) {
    for (uint32_t k = 0; k < 3; k++)
        split_shard(k);
}

static void test_split_name(void) {
    size_t n;
    uint32_t no, count;
    CHECK(gguf_split_name_parse("dir/m-00002-of-00003.gguf", &n, &no, &count));
    CHECK(n == 5 && no == 1 && count == 3);
    CHECK(!gguf_split_name_parse("m-00000-of-00003.gguf", &n, &no, &count));
    CHECK(!gguf_split_name_parse("m-00004-of-00003.gguf", &n, &no, &count));
    CHECK(!gguf_split_name_parse("m-0000a-of-00003.gguf", &n, &no, &count));
    CHECK(!gguf_split_name_parse("m-00001-of-00003.ggml", &n, &no, &count));
    CHECK(!gguf_split_name_parse("-00001-of-00003.gguf", &n, &no, &count));
    CHECK(!gguf_split_name_parse("model.gguf", &n, &no, &count));
}

/* Opened from any of its files: three shards, each tensor read from its own. */
static void test_split_valid(void) {
    char err[512];
    write_split();
    for (uint32_t from = 0; from < 3; from++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/s-%05u-of-00003.gguf", test_tmpdir(), from + 1);
        struct gguf *g = gguf_open(path, err, sizeof(err));
        CHECK_MSG(g != NULL, "open shard %u: %s", from + 1, err);
        if (!g)
            continue;
        CHECK_EQ_INT(g->n_shards, 3);
        CHECK_EQ_INT(g->n_tensors, 3);
        CHECK_STR(gguf_get_str(g, "general.architecture"), "tiny");
        uint64_t sum = 0;
        for (uint32_t k = 0; k < 3; k++) {
            char name[32];
            snprintf(name, sizeof(name), "t%u.weight", k);
            const struct gguf_tensor *t = gguf_find_tensor(g, name);
            sum += g->shards[k].file_bytes;
            CHECK_MSG(t && t->shard == k, "tensor %s not in shard %u", name, k);
            CHECK(strstr(g->shards[k].path, k == 0 ? "-00001-" : k == 1 ? "-00002-" : "-00003-"));
            float f[4] = {0};
            CHECK_EQ_INT(t ? gguf_read_tensor(g, t, f) : -1, 0);
            CHECK_NEAR(f[3], 10.0 * k + 3, 0);
        }
        CHECK_EQ_INT(g->file_bytes, sum);
        gguf_free(g);
    }
}

/* Opens the first shard and expects a failure whose message holds s1 and s2. */
static void expect_split_reject_at(int line, const char *s1, const char *s2) {
    char err[512], path[4200];
    snprintf(path, sizeof(path), "%s/s-00001-of-00003.gguf", test_tmpdir());
    struct gguf *g = gguf_open(path, err, sizeof(err));
    if (g) {
        test_fail(__FILE__, line, "opened a bad split model (expected \"%s\")", s1);
        gguf_free(g);
        return;
    }
    if (getenv("GGUF_TEST_VERBOSE"))
        fprintf(stderr, "  %s\n", err);
    if ((s1 && !strstr(err, s1)) || (s2 && !strstr(err, s2)))
        test_fail(__FILE__, line, "error \"%s\" lacks \"%s\"/\"%s\"", err, s1, s2 ? s2 : "");
}

static void test_split_reject(void) {
    char path[4200];
    write_split();
    snprintf(path, sizeof(path), "%s/s-00003-of-00003.gguf", test_tmpdir());
    CHECK_EQ_INT(unlink(path), 0);
    expect_split_reject_at(__LINE__, "shard 3 of 3", "s-00003-of-00003.gguf");
    split_shard(2);
    split_shard_as("s-00002-of-00003.gguf", 1, 0, 3, 3, "t1.weight"); /* another shard's number */
    expect_split_reject_at(__LINE__, "\"", "does not belong");
    split_shard_as("s-00002-of-00003.gguf", 1, 1, 4, 3, "t1.weight"); /* another model's count */
    expect_split_reject_at(__LINE__, "s-00002-of-00003.gguf", "does not belong");
    split_shard_as("s-00002-of-00003.gguf", 1, 1, 3, 4, "t1.weight"); /* tensors claimed */
    expect_split_reject_at(__LINE__, "s-00002-of-00003.gguf", "does not belong");
    split_shard_as("s-00002-of-00003.gguf", 1, 1, 3, 3, "t2.weight"); /* a name twice */
    expect_split_reject_at(__LINE__, "duplicate tensor name", "t2.weight");
    write_split();
    for (uint32_t k = 0; k < 3; k++) { /* every shard agrees on 4 tensors, 3 exist */
        char file[64], name[32];
        snprintf(file, sizeof(file), "s-%05u-of-00003.gguf", k + 1);
        snprintf(name, sizeof(name), "t%u.weight", k);
        split_shard_as(file, k, k, 3, 4, name);
    }
    expect_split_reject_at(__LINE__, "has 3 tensors", "split.tensors.count says 4");
    split_shard_as("renamed.gguf", 0, 0, 3, 3, "t0.weight"); /* a shard under another name */
    char err[512];
    snprintf(path, sizeof(path), "%s/renamed.gguf", test_tmpdir());
    struct gguf *g = gguf_open(path, err, sizeof(err));
    CHECK_MSG(!g && strstr(err, "does not end in -00001-of-00003.gguf"), "%s", err);
    gguf_free(g);
}

static const struct test_case cases[] = {
    {"split_name", test_split_name},
    {"split_valid", test_split_valid},
    {"split_reject", test_split_reject},
    {"small_valid", test_small_valid},
    {"getters", test_getters},
    {"value_types", test_value_types},
    {"alignment_64", test_alignment_64},
    {"reject_header", test_reject_header},
    {"reject_kv", test_reject_kv},
    {"reject_alignment", test_reject_alignment},
    {"reject_tensor_shape", test_reject_tensor_shape},
    {"reject_tensor_layout", test_reject_tensor_layout},
    {"truncation", test_truncation},
    {"shrunk_after_open", test_shrunk_after_open},
    {"fuzz_small", test_fuzz_small},
    {"fuzz_fixture_header", test_fuzz_fixture_header},
    {"fixtures_all_open", test_fixtures_all_open},
    {"fixture_f32", test_fixture_f32},
    {"fixture_q4_k_m", test_fixture_q4_k_m},
    {"fixture_vocab_only", test_fixture_vocab_only},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
