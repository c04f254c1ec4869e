/* ctxfile.c - writes and reads context files (ctxfile.h; the layout is in docs/formats.md).
 * Invariants: the header is written last (its checksum covers the KV checksum, so every byte of the
 * file is covered); a file is only ever visible under its final name complete and fsync'ed; on
 * reading, no size from the file is used before it was checked against the file's size, and the
 * engine's n_past is set only after the KV checksum matched. */
#include "ctxfile.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "err.h"
#include "fault.h"
#include "hash64.h"
#include "quant.h"

#define CTXFILE_IO_CHUNK (1u << 20)
#define CTXFILE_HEAD_HASH_OFF 120
#define CTXFILE_COMP_NONE 0
#define CTXFILE_COMP_ZSTD 1
#define CTXFILE_MAX_LAYERS 4096
#define CTXFILE_MAX_KV_DIM (1 << 20)

/* ---- names and options ----------------------------------------------------------------------- */

bool ctx_name_valid(const char *name) {
    size_t n = 0;
    if (!name || name[0] == '.' || name[0] == '\0')
        return false;
    for (; name[n]; n++) {
        char c = name[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok || n >= 64)
            return false;
    }
    return true;
}

struct ctxfile_opts ctxfile_opts_default(void) {
    return (struct ctxfile_opts){.store = CTXFILE_STORE_EXACT, .zstd = false, .zstd_level = 0};
}

static const char *const store_names[] = {"exact", "f16", "q8_0", "q4_0"};

int ctxfile_store_parse(const char *s, enum ctxfile_store *out) {
    for (int i = 0; s && i < 4; i++)
        if (strcmp(s, store_names[i]) == 0) {
            *out = (enum ctxfile_store)i;
            return 0;
        }
    return -EINVAL;
}

const char *ctxfile_store_name(enum ctxfile_store s) {
    return (unsigned)s < 4 ? store_names[s] : "?";
}

/* The rows' type in the file for an engine whose cache is kv_type. */
static enum qtype store_qtype(enum ctxfile_store s, enum qtype kv_type) {
    switch (s) {
    case CTXFILE_STORE_F16: return QTYPE_F16;
    case CTXFILE_STORE_Q8_0: return QTYPE_Q8_0;
    case CTXFILE_STORE_Q4_0: return QTYPE_Q4_0;
    default: return kv_type;
    }
}

static bool store_type_ok(uint32_t t) {
    return t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_Q8_0 || t == QTYPE_Q4_0;
}

/* ---- the model fingerprint ------------------------------------------------------------------- */

static void hash_u64(struct hash64 *h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    hash64_update(h, b, 8);
}

static void hash_str(struct hash64 *h, const char *s, uint64_t n) {
    hash_u64(h, n);
    hash64_update(h, s, n);
}

static uint64_t vtype_bytes(enum gguf_vtype t) {
    static const uint8_t sz[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < GGUF_VTYPE_COUNT ? sz[t] : 0;
}

static void hash_kv(struct hash64 *h, const struct gguf_kv *kv) {
    hash_str(h, kv->key, strlen(kv->key));
    hash_u64(h, kv->type);
    if (kv->type == GGUF_VTYPE_STRING) {
        hash_str(h, kv->v.str.data, kv->v.str.len);
    } else if (kv->type == GGUF_VTYPE_ARRAY) {
        hash_u64(h, kv->arr_type);
        hash_u64(h, kv->n);
        if (kv->arr_type == GGUF_VTYPE_STRING) {
            const struct gguf_str *s = kv->arr;
            for (uint64_t i = 0; i < kv->n; i++)
                hash_str(h, s[i].data, s[i].len);
        } else {
            hash64_update(h, kv->arr, kv->n * vtype_bytes(kv->arr_type));
        }
    } else {
        hash_u64(h, kv->v.u64); /* the union's 8 bytes: the value as read, whatever its type */
    }
}

uint64_t ctxfile_fingerprint(const struct gguf *g) {
    struct hash64 h;
    hash64_init(&h, 0);
    hash_u64(&h, g->version);
    hash_u64(&h, g->alignment);
    hash_u64(&h, g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++)
        hash_kv(&h, &g->kv[i]);
    hash_u64(&h, g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        hash_str(&h, t->name, strlen(t->name));
        hash_u64(&h, t->type);
        hash_u64(&h, t->n_dims);
        for (int d = 0; d < GGUF_MAX_DIMS; d++)
            hash_u64(&h, t->ne[d]);
        if (g->n_shards > 1) /* (shard, offset) of a split model; one file's hash as it was */
            hash_u64(&h, t->shard);
        hash_u64(&h, t->data_off);
    }
    return hash64_digest(&h);
}

/* ---- the header ------------------------------------------------------------------------------ */

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void header_encode(uint8_t *b, const struct ctxfile_info *in, uint64_t kv_hash) {
    memset(b, 0, CTXFILE_HEADER_BYTES);
    memcpy(b, CTXFILE_MAGIC, 8);
    put32(b + 8, CTXFILE_VERSION);
    put32(b + 12, CTXFILE_HEADER_BYTES);
    put64(b + 16, in->fingerprint);
    put32(b + 24, in->kv_type);
    put32(b + 28, in->store_type);
    put32(b + 32, in->zstd ? CTXFILE_COMP_ZSTD : CTXFILE_COMP_NONE);
    put32(b + 36, (uint32_t)in->n_layer);
    put32(b + 40, (uint32_t)in->kv_dim);
    put32(b + 44, (uint32_t)in->n_tokens);
    put64(b + 48, in->created);
    put64(b + 56, in->meta_bytes);
    put64(b + 64, in->kv_bytes);
    put64(b + 72, in->kv_stored_bytes);
    put64(b + 80, kv_hash);
    put64(b + 88, in->state_bytes);
    put32(b + 96, (uint32_t)in->n_swa_layer);
    put32(b + 100, (uint32_t)in->n_swa);
}

/* The header checksum: header bytes [0, 120), then the token ids as stored, then the metadata. */
static uint64_t head_hash(const uint8_t *b, const uint8_t *tok, size_t tok_bytes, const char *meta,
                          size_t meta_bytes) {
    struct hash64 h;
    hash64_init(&h, 0);
    hash64_update(&h, b, CTXFILE_HEAD_HASH_OFF);
    hash64_update(&h, tok, tok_bytes);
    hash64_update(&h, meta, meta_bytes);
    return hash64_digest(&h);
}

/* Rows a window layer stores for n tokens: the last n_swa - 1 (what the next token sees). */
static int32_t swa_rows(int32_t n_swa, int32_t n_tokens) {
    return n_tokens < n_swa - 1 ? n_tokens : n_swa - 1;
}

/* Bytes of the KV section's rows for this shape (n_swa_layer of the n_layer layers storing
 * swa_rows), UINT64_MAX on overflow. */
static uint64_t kv_section_bytes(int32_t n_layer, int32_t n_swa_layer, int32_t n_swa,
                                 int32_t n_tokens, uint64_t row_bytes) {
    uint64_t r, w;
    if (n_swa_layer > n_layer || (n_swa_layer > 0 && n_swa < 1) ||
        __builtin_mul_overflow((uint64_t)(n_layer - n_swa_layer), (uint64_t)n_tokens, &r) ||
        __builtin_mul_overflow((uint64_t)n_swa_layer,
                               (uint64_t)(n_swa_layer ? swa_rows(n_swa, n_tokens) : 0), &w) ||
        __builtin_add_overflow(r, w, &r) || __builtin_mul_overflow(r, 2u * row_bytes, &r))
        return UINT64_MAX;
    return r;
}

/* ---- writing --------------------------------------------------------------------------------- */

/* A buffered writer that hashes the KV section as it goes and optionally compresses it. */
struct cw {
    int fd;
    uint8_t *buf;        /* [CTXFILE_IO_CHUNK] */
    size_t n_buf;
    uint8_t *zout;       /* [CTXFILE_IO_CHUNK] zstd output */
    ZSTD_CCtx *zc;       /* NULL: KV stored as is */
    struct hash64 kv_hash;
    uint64_t kv_stored;  /* bytes of the KV section written */
};

static int write_all(int fd, const void *p, size_t n, off_t off) {
    const uint8_t *b = p;
    while (n > 0) {
        if (fault_hit(FAULT_WRITE))
            return -ENOSPC;
        ssize_t w = off >= 0 ? pwrite(fd, b, n, off) : write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        b += w;
        n -= (size_t)w;
        if (off >= 0)
            off += w;
    }
    return 0;
}

static int cw_flush(struct cw *w) {
    int rc = write_all(w->fd, w->buf, w->n_buf, -1);
    w->n_buf = 0;
    return rc;
}

/* Appends n bytes to the file (through the buffer). */
static int cw_put(struct cw *w, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0) {
        size_t take = CTXFILE_IO_CHUNK - w->n_buf < n ? CTXFILE_IO_CHUNK - w->n_buf : n;
        memcpy(w->buf + w->n_buf, b, take);
        w->n_buf += take;
        b += take;
        n -= take;
        if (w->n_buf == CTXFILE_IO_CHUNK) {
            int rc = cw_flush(w);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int cw_put_stored(struct cw *w, const void *p, size_t n) {
    hash64_update(&w->kv_hash, p, n);
    w->kv_stored += n;
    return cw_put(w, p, n);
}

/* Appends n bytes of the KV section (compressed when asked); end closes the zstd frame. */
static int cw_put_kv(struct cw *w, const void *p, size_t n, bool end, char *err, size_t err_len) {
    if (!w->zc)
        return cw_put_stored(w, p, n);
    ZSTD_inBuffer in = {p, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {w->zout, CTXFILE_IO_CHUNK, 0};
        size_t left = ZSTD_compressStream2(w->zc, &out, &in, end ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(left)) {
            err_set(err, err_len, "ctxfile_save: zstd: %s", ZSTD_getErrorName(left));
            return -EIO;
        }
        int rc = cw_put_stored(w, w->zout, out.pos);
        if (rc < 0)
            return rc;
        if (end ? left == 0 : in.pos == in.size)
            return 0;
    }
}

/* Converts n rows of kv_dim elements from type src_t to dst_t (f32 row scratch: kv_dim floats). */
static int rows_convert(enum qtype src_t, const uint8_t *src, size_t src_row, enum qtype dst_t,
                        uint8_t *dst, size_t dst_row, int32_t n, int32_t kv_dim, float *scratch) {
    for (int32_t r = 0; r < n; r++) {
        if (quant_dequantize_row(src_t, src + (size_t)r * src_row, scratch, kv_dim) < 0)
            return -EINVAL;
        if (dst_t == QTYPE_F16)
            quant_f16_from_f32(scratch, dst + (size_t)r * dst_row, kv_dim); /* as the engine does */
        else if (quant_quantize_row(dst_t, scratch, dst + (size_t)r * dst_row, kv_dim) < 0)
            return -EINVAL;
    }
    return 0;
}

/* Writes one layer's K then V rows (for n tokens: all, or a window layer's last), converted to
 * the stored type. */
static int save_layer(struct cw *w, const struct engine *e, int32_t seq, int32_t il, int32_t n_tok,
                      enum qtype st, size_t st_row, uint8_t *k, uint8_t *v, uint8_t *conv,
                      float *scratch, bool last, char *err, size_t err_len) {
    struct engine_kv_shape s = engine_kv_shape(e);
    const int32_t n = n_tok - engine_kv_first(e, il, n_tok);
    int rc = engine_kv_export(e, seq, il, n_tok, k, v);
    for (int kv = 0; kv < 2 && rc == 0; kv++) {
        const uint8_t *rows = kv ? v : k;
        if (st != s.type) {
            rc = rows_convert(s.type, rows, s.row_bytes, st, conv, st_row, n, s.kv_dim, scratch);
            rows = conv;
        }
        if (rc == 0)
            rc = cw_put_kv(w, rows, (size_t)n * st_row, last && kv == 1, err, err_len);
    }
    return rc;
}

/* Writes the recurrent state (f32, exact) at the end of the KV stream. */
static int save_state(struct cw *w, const struct engine *e, int32_t seq, uint64_t bytes,
                      char *err, size_t err_len) {
    void *state = malloc((size_t)bytes);
    int rc = state ? engine_state_export(e, seq, state, (size_t)bytes) : -ENOMEM;
    if (rc == 0)
        rc = cw_put_kv(w, state, (size_t)bytes, true, err, err_len);
    free(state);
    return rc;
}

static int fsync_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= sizeof(dir))
        return -ENAMETOOLONG;
    if (slash && n == 0)
        n = 1; /* "/name": the root */
    memcpy(dir, slash ? path : ".", slash ? n : 1);
    dir[slash ? n : 1] = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* "<dir>/.<base>.tmp-<pid>-<seq>": hidden, so never a valid context name, and unique per save. */
static int temp_path(char *out, size_t len, const char *path) {
    static atomic_uint seq;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    int r = snprintf(out, len, "%.*s.%s.tmp-%ld-%u", dir_len, path, base, (long)getpid(),
                     atomic_fetch_add(&seq, 1));
    return r < 0 || (size_t)r >= len ? -ENAMETOOLONG : 0;
}

static int save_check(const struct model *m, const struct engine *e, int32_t seq,
                      const int32_t *tokens, int32_t n, const struct ctxfile_opts *o,
                      struct ctxfile_info *in, size_t *st_row, char *err, size_t err_len) {
    struct engine_kv_shape s = engine_kv_shape(e);
    const int32_t n_past = engine_n_past(e, seq);
    /* a recurrent state exists only for n_past: it cannot be cut back to a shorter n */
    if (seq < 0 || seq >= engine_n_seq(e) || n < 0 || n > n_past || (n > 0 && !tokens) ||
        (unsigned)o->store > 3 || o->zstd_level < 0 || o->zstd_level > 19 ||
        (engine_is_recurrent(e) && n != n_past) || engine_reusable(e, seq, n) != n) {
        err_set(err, err_len, "ctxfile_save: bad arguments (sequence %d, n %d of %d cached "
                "tokens, store %d)", seq, n, n_past, (int)o->store);
        return -EINVAL;
    }
    in->store_type = store_qtype(o->store, s.type);
    uint64_t row = 0;
    if (qtype_row_bytes(in->store_type, (uint64_t)s.kv_dim, &row) < 0) {
        err_set(err, err_len, "ctxfile_save: kv_dim %d does not fit %s blocks", s.kv_dim,
                qtype_name(in->store_type));
        return -EINVAL;
    }
    *st_row = row;
    in->version = CTXFILE_VERSION;
    in->fingerprint = ctxfile_fingerprint(m->gguf);
    in->kv_type = s.type;
    in->zstd = o->zstd;
    in->n_layer = s.n_layer;
    in->kv_dim = s.kv_dim;
    in->n_tokens = n;
    in->n_swa_layer = s.n_swa_layer;
    in->n_swa = s.n_swa;
    in->created = (uint64_t)time(NULL);
    in->kv_bytes = kv_section_bytes(s.n_layer, s.n_swa_layer, s.n_swa, n, row);
    in->state_bytes = engine_state_size(e);
    return 0;
}

/* Writes the body (tokens, metadata, KV) after the header's place, then the header. */
static int save_body(struct cw *w, const struct engine *e, int32_t seq, const int32_t *tokens,
                     const char *meta, struct ctxfile_info *in, size_t st_row, char *err,
                     size_t err_len) {
    struct engine_kv_shape s = engine_kv_shape(e);
    int32_t n = in->n_tokens;
    size_t tok_bytes = (size_t)n * 4;
    uint8_t *tok = malloc(tok_bytes ? tok_bytes : 1);
    uint8_t *k = malloc((size_t)n * s.row_bytes + 1), *v = malloc((size_t)n * s.row_bytes + 1);
    uint8_t *conv = malloc((size_t)n * st_row + 1);
    float *scratch = calloc((size_t)s.kv_dim, sizeof(*scratch));
    int rc = -ENOMEM;
    if (!tok || !k || !v || !conv || !scratch)
        goto out;
    for (int32_t i = 0; i < n; i++)
        put32(tok + 4 * (size_t)i, (uint32_t)tokens[i]);
    rc = lseek(w->fd, CTXFILE_HEADER_BYTES, SEEK_SET) < 0 ? -errno : 0;
    if (rc == 0)
        rc = cw_put(w, tok, tok_bytes);
    if (rc == 0)
        rc = cw_put(w, meta, in->meta_bytes);
    const bool with_state = in->state_bytes > 0;
    for (int32_t il = 0; il < s.n_layer && rc == 0; il++)
        rc = save_layer(w, e, seq, il, n, in->store_type, st_row, k, v, conv, scratch,
                        il == s.n_layer - 1 && !with_state, err, err_len);
    if (rc == 0 && with_state)
        rc = save_state(w, e, seq, in->state_bytes, err, err_len);
    if (rc == 0 && s.n_layer == 0 && !with_state && w->zc)
        rc = cw_put_kv(w, NULL, 0, true, err, err_len);
    if (rc == 0)
        rc = cw_flush(w);
    if (rc == 0) {
        uint8_t hdr[CTXFILE_HEADER_BYTES];
        in->kv_stored_bytes = w->kv_stored;
        header_encode(hdr, in, hash64_digest(&w->kv_hash));
        put64(hdr + CTXFILE_HEAD_HASH_OFF, head_hash(hdr, tok, tok_bytes, meta, in->meta_bytes));
        rc = write_all(w->fd, hdr, sizeof(hdr), 0);
        in->file_bytes = CTXFILE_HEADER_BYTES + tok_bytes + in->meta_bytes + w->kv_stored;
    }
out:
    free(tok);
    free(k);
    free(v);
    free(conv);
    free(scratch);
    return rc;
}

static const char *save_errname(int rc) {
    return rc == -ENOSPC ? "no space left on device" : strerror(-rc);
}

int ctxfile_save(const char *path, const struct model *m, const struct engine *e, int32_t seq,
                 const int32_t *tokens, int32_t n, const char *metadata_json,
                 const struct ctxfile_opts *o, struct ctxfile_info *info, char *err,
                 size_t err_len) {
    struct ctxfile_opts def = ctxfile_opts_default();
    struct ctxfile_info in = {0};
    struct cw w = {.fd = -1};
    char tmp[4096];
    size_t st_row = 0;
    const char *meta = metadata_json ? metadata_json : "";
    bool renamed = false;
    err_set(err, err_len, "ctxfile_save: failed");
    in.meta_bytes = strlen(meta);
    int rc = save_check(m, e, seq, tokens, n, o ? o : &def, &in, &st_row, err, err_len);
    if (rc == 0 && in.meta_bytes > CTXFILE_MAX_META_BYTES) {
        err_set(err, err_len, "ctxfile_save: metadata of %" PRIu64 " bytes (limit %u)",
                in.meta_bytes, CTXFILE_MAX_META_BYTES);
        rc = -EINVAL;
    }
    if (rc < 0)
        return rc;
    if ((rc = temp_path(tmp, sizeof(tmp), path)) < 0) {
        err_set(err, err_len, "ctxfile_save: path too long \"%s\"", path);
        return rc;
    }
    hash64_init(&w.kv_hash, 0);
    w.buf = malloc(CTXFILE_IO_CHUNK);
    w.zout = malloc(CTXFILE_IO_CHUNK);
    if (o && o->zstd) {
        w.zc = ZSTD_createCCtx();
        if (w.zc)
            ZSTD_CCtx_setParameter(w.zc, ZSTD_c_compressionLevel,
                                   o->zstd_level ? o->zstd_level : ZSTD_CLEVEL_DEFAULT);
    }
    if (!w.buf || !w.zout || (o && o->zstd && !w.zc)) {
        err_set(err, err_len, "ctxfile_save: out of memory");
        rc = -ENOMEM;
        goto free_bufs;
    }
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w.fd < 0) {
        rc = -errno;
        err_set(err, err_len, "ctxfile_save: cannot create \"%s\": %s", tmp, strerror(-rc));
        goto free_bufs;
    }
    rc = save_body(&w, e, seq, tokens, meta, &in, st_row, err, err_len);
    if (rc == 0 && fsync(w.fd) < 0)
        rc = -errno;
    if (close(w.fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    renamed = rc == 0;
    if (rc == 0)
        rc = fsync_dir(path);
    if (rc < 0) {
        if (rc != -EIO || strcmp(err, "ctxfile_save: failed") == 0)
            err_set(err, err_len, "ctxfile_save: writing \"%s\": %s", path, save_errname(rc));
        unlink(renamed ? path : tmp);
    } else {
        err_set(err, err_len, "%s", "");
        if (info)
            *info = in;
    }
free_bufs:
    ZSTD_freeCCtx(w.zc);
    free(w.buf);
    free(w.zout);
    return rc;
}

/* ---- reading --------------------------------------------------------------------------------- */

/* Checks the header's fields against each other and the file size. Returns 0 or an error. */
static int header_decode(const uint8_t *b, uint64_t file_bytes, struct ctxfile_info *in,
                         const char *path, char *err, size_t err_len) {
    if (memcmp(b, CTXFILE_MAGIC, 8) != 0) {
        err_set(err, err_len, "ctxfile: \"%s\" is not a context file (bad magic)", path);
        return CTXFILE_ECORRUPT;
    }
    in->version = get32(b + 8);
    if (in->version < 1 || in->version > CTXFILE_VERSION) {
        err_set(err, err_len, "ctxfile: \"%s\" has format version %u, this build reads 1 to %u",
                path, in->version, CTXFILE_VERSION);
        return CTXFILE_EVERSION;
    }
    uint32_t comp = get32(b + 32), n_layer = get32(b + 36), kv_dim = get32(b + 40);
    uint32_t n_tok = get32(b + 44), kv_type = get32(b + 24), st = get32(b + 28);
    in->fingerprint = get64(b + 16);
    in->kv_type = (enum qtype)kv_type;
    in->store_type = (enum qtype)st;
    in->zstd = comp == CTXFILE_COMP_ZSTD;
    in->n_layer = (int32_t)n_layer;
    in->kv_dim = (int32_t)kv_dim;
    in->n_tokens = (int32_t)n_tok;
    in->created = get64(b + 48);
    in->meta_bytes = get64(b + 56);
    in->kv_bytes = get64(b + 64);
    in->kv_stored_bytes = get64(b + 72);
    in->file_bytes = file_bytes;
    in->state_bytes = get64(b + 88); /* version 1: reserved, zero */
    in->n_swa_layer = (int32_t)get32(b + 96); /* versions 1, 2: reserved, zero */
    in->n_swa = (int32_t)get32(b + 100);
    bool zero = get32(b + 96) <= CTXFILE_MAX_LAYERS && get32(b + 100) <= (1u << 30) &&
                (in->version > 2 || (in->n_swa_layer == 0 && in->n_swa == 0)) &&
                (in->n_swa_layer > 0) == (in->n_swa > 0);
    for (int i = 104; i < CTXFILE_HEAD_HASH_OFF; i++)
        zero = zero && b[i] == 0;
    uint64_t row = 0, total = 0, raw = 0;
    bool ok = zero && get32(b + 12) == CTXFILE_HEADER_BYTES && comp <= CTXFILE_COMP_ZSTD &&
              store_type_ok(kv_type) && store_type_ok(st) &&
              n_layer >= 1 && n_layer <= CTXFILE_MAX_LAYERS && kv_dim >= 1 &&
              kv_dim <= CTXFILE_MAX_KV_DIM && n_tok <= INT32_MAX &&
              in->meta_bytes <= CTXFILE_MAX_META_BYTES &&
              qtype_row_bytes((enum qtype)st, kv_dim, &row) == 0 &&
              in->kv_bytes == kv_section_bytes((int32_t)n_layer, in->n_swa_layer, in->n_swa,
                                               (int32_t)n_tok, row) &&
              in->state_bytes <= CTXFILE_MAX_STATE_BYTES && in->state_bytes % 4 == 0 &&
              (in->version > 1 || in->state_bytes == 0) &&
              !__builtin_add_overflow(in->kv_bytes, in->state_bytes, &raw) &&
              (in->zstd || in->kv_stored_bytes == raw);
    if (!ok) {
        err_set(err, err_len, "ctxfile: \"%s\" is corrupted (inconsistent header)", path);
        return CTXFILE_ECORRUPT;
    }
    ok = !__builtin_add_overflow((uint64_t)CTXFILE_HEADER_BYTES + 4ull * n_tok, in->meta_bytes,
                                 &total) &&
         !__builtin_add_overflow(total, in->kv_stored_bytes, &total) && total == file_bytes;
    if (!ok) {
        err_set(err, err_len, "ctxfile: \"%s\" is truncated or corrupted (%" PRIu64
                " bytes, the header describes %" PRIu64 ")", path, file_bytes, total);
        return CTXFILE_ECORRUPT;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n, uint64_t off) {
    uint8_t *b = p;
    while (n > 0) {
        ssize_t r = pread(fd, b, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : CTXFILE_ECORRUPT; /* the file shrank under us */
        b += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* The open file, its header, token ids (raw) and metadata; what info and load share. */
struct ctxfile_head {
    int fd;
    struct ctxfile_info in;
    uint8_t hdr[CTXFILE_HEADER_BYTES];
    uint8_t *tok;  /* [n_tokens * 4] little-endian */
    char *meta;    /* [meta_bytes + 1] */
};

static void head_release(struct ctxfile_head *h) {
    if (h->fd >= 0)
        close(h->fd);
    free(h->tok);
    free(h->meta);
}

static int head_read(struct ctxfile_head *h, const char *path, char *err, size_t err_len) {
    struct stat st;
    memset(h, 0, sizeof(*h));
    h->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (h->fd < 0 || fstat(h->fd, &st) < 0) {
        int rc = -errno;
        err_set(err, err_len, "ctxfile: cannot open \"%s\": %s", path, strerror(-rc));
        return rc;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < CTXFILE_HEADER_BYTES) {
        err_set(err, err_len, "ctxfile: \"%s\" is not a context file (%lld bytes)", path,
                (long long)st.st_size);
        return CTXFILE_ECORRUPT;
    }
    int rc = read_all(h->fd, h->hdr, CTXFILE_HEADER_BYTES, 0);
    if (rc == 0)
        rc = header_decode(h->hdr, (uint64_t)st.st_size, &h->in, path, err, err_len);
    if (rc < 0)
        return rc;
    size_t tok_bytes = (size_t)h->in.n_tokens * 4;
    h->tok = malloc(tok_bytes + 1);
    h->meta = malloc(h->in.meta_bytes + 1);
    if (!h->tok || !h->meta) {
        err_set(err, err_len, "ctxfile: out of memory reading \"%s\"", path);
        return -ENOMEM;
    }
    rc = read_all(h->fd, h->tok, tok_bytes, CTXFILE_HEADER_BYTES);
    if (rc == 0)
        rc = read_all(h->fd, h->meta, h->in.meta_bytes, CTXFILE_HEADER_BYTES + tok_bytes);
    if (rc < 0) {
        err_set(err, err_len, "ctxfile: reading \"%s\": %s", path, strerror(-rc));
        return rc;
    }
    h->meta[h->in.meta_bytes] = '\0';
    if (head_hash(h->hdr, h->tok, tok_bytes, h->meta, h->in.meta_bytes) !=
            get64(h->hdr + CTXFILE_HEAD_HASH_OFF) ||
        strlen(h->meta) != h->in.meta_bytes) {
        err_set(err, err_len, "ctxfile: \"%s\" is corrupted (header checksum mismatch)", path);
        return CTXFILE_ECORRUPT;
    }
    return 0;
}

int ctxfile_info(const char *path, struct ctxfile_info *info, char **metadata_json, char *err,
                 size_t err_len) {
    struct ctxfile_head h;
    int rc = head_read(&h, path, err, err_len);
    if (rc == 0) {
        *info = h.in;
        if (metadata_json) {
            *metadata_json = h.meta;
            h.meta = NULL;
        }
    }
    head_release(&h);
    return rc;
}

int ctxfile_verify(const char *path, struct ctxfile_info *info, char *err, size_t err_len) {
    struct ctxfile_head h;
    int rc = head_read(&h, path, err, err_len);
    uint8_t *buf = rc == 0 ? malloc(CTXFILE_IO_CHUNK) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    struct hash64 hash;
    hash64_init(&hash, 0);
    uint64_t off = CTXFILE_HEADER_BYTES + 4ull * (uint64_t)h.in.n_tokens + h.in.meta_bytes;
    for (uint64_t left = rc == 0 ? h.in.kv_stored_bytes : 0; left > 0 && rc == 0;) {
        size_t take = left < CTXFILE_IO_CHUNK ? (size_t)left : CTXFILE_IO_CHUNK;
        rc = read_all(h.fd, buf, take, off);
        hash64_update(&hash, buf, take);
        off += take;
        left -= take;
    }
    if (rc == 0 && hash64_digest(&hash) != get64(h.hdr + 80)) {
        err_set(err, err_len, "ctxfile: \"%s\" is corrupted (KV checksum mismatch)", path);
        rc = CTXFILE_ECORRUPT;
    } else if (rc < 0 && !err[0]) {
        err_set(err, err_len, "ctxfile: reading \"%s\": %s", path, strerror(-rc));
    }
    if (rc == 0 && info)
        *info = h.in;
    free(buf);
    head_release(&h);
    return rc;
}

/* The KV section as a stream of raw (uncompressed) bytes, hashed as stored. */
struct cr {
    int fd;
    uint64_t off, left;   /* next file offset of the KV section, stored bytes not yet read */
    ZSTD_DCtx *zd;        /* NULL: stored as is */
    uint8_t *zin;         /* [CTXFILE_IO_CHUNK] compressed input */
    ZSTD_inBuffer in;
    size_t z_last;        /* the last ZSTD_decompressStream result: 0 at a frame's end */
    struct hash64 hash;
};

/* Reads n stored bytes at the stream's position into p. */
static int cr_read_stored(struct cr *r, void *p, size_t n) {
    if (n > r->left)
        return CTXFILE_ECORRUPT;
    int rc = read_all(r->fd, p, n, r->off);
    if (rc == 0) {
        hash64_update(&r->hash, p, n);
        r->off += n;
        r->left -= n;
    }
    return rc;
}

/* Fills p with the next n raw KV bytes. */
static int cr_get(struct cr *r, void *p, size_t n) {
    if (!r->zd)
        return cr_read_stored(r, p, n);
    ZSTD_outBuffer out = {p, n, 0};
    while (out.pos < out.size) {
        if (r->in.pos == r->in.size) {
            size_t take = r->left < CTXFILE_IO_CHUNK ? (size_t)r->left : CTXFILE_IO_CHUNK;
            if (take == 0)
                return CTXFILE_ECORRUPT;
            int rc = cr_read_stored(r, r->zin, take);
            if (rc < 0)
                return rc;
            r->in = (ZSTD_inBuffer){r->zin, take, 0};
        }
        r->z_last = ZSTD_decompressStream(r->zd, &out, &r->in);
        if (ZSTD_isError(r->z_last))
            return CTXFILE_ECORRUPT;
        if (r->z_last == 0 && out.pos < out.size)
            return CTXFILE_ECORRUPT; /* the frame ended early */
    }
    return 0;
}

/* True when the stream ended exactly: every stored byte consumed and the zstd frame closed. */
static bool cr_done(struct cr *r) {
    if (!r->zd)
        return r->left == 0;
    if (r->z_last != 0) { /* the frame's epilogue (checksum, last block header) may remain */
        uint8_t b;
        ZSTD_outBuffer out = {&b, 1, 0};
        while (r->z_last != 0) {
            if (r->in.pos == r->in.size) {
                size_t take = r->left < CTXFILE_IO_CHUNK ? (size_t)r->left : CTXFILE_IO_CHUNK;
                if (take == 0 || cr_read_stored(r, r->zin, take) < 0)
                    return false;
                r->in = (ZSTD_inBuffer){r->zin, take, 0};
            }
            r->z_last = ZSTD_decompressStream(r->zd, &out, &r->in);
            if (ZSTD_isError(r->z_last) || out.pos > 0)
                return false;
        }
    }
    return r->left == 0 && r->in.pos == r->in.size;
}

/* Reads every layer into e (converting rows to its type). */
static int load_kv(struct cr *r, struct engine *e, int32_t seq, const struct ctxfile_info *in) {
    struct engine_kv_shape s = engine_kv_shape(e);
    uint64_t st_row = 0;
    qtype_row_bytes(in->store_type, (uint64_t)in->kv_dim, &st_row);
    const size_t n_max = (size_t)in->n_tokens;
    uint8_t *raw = malloc(n_max * st_row + 1), *k = malloc(n_max * s.row_bytes + 1);
    uint8_t *v = malloc(n_max * s.row_bytes + 1);
    float *scratch = calloc((size_t)s.kv_dim, sizeof(*scratch));
    int rc = raw && k && v && scratch ? 0 : -ENOMEM;
    for (int32_t il = 0; il < s.n_layer && rc == 0; il++) {
        const size_t n = (size_t)(in->n_tokens - engine_kv_first(e, il, in->n_tokens));
        for (int kv = 0; kv < 2 && rc == 0; kv++) {
            uint8_t *dst = kv ? v : k;
            if (in->store_type == s.type) {
                rc = cr_get(r, dst, n * st_row);
            } else {
                rc = cr_get(r, raw, n * st_row);
                if (rc == 0)
                    rc = rows_convert(in->store_type, raw, st_row, s.type, dst, s.row_bytes,
                                      (int32_t)n, s.kv_dim, scratch);
            }
        }
        if (rc == 0)
            rc = engine_kv_import(e, seq, il, s.type, s.kv_dim, in->n_tokens, k, v);
    }
    free(raw);
    free(k);
    free(v);
    free(scratch);
    return rc;
}

/* Reads the recurrent state that follows the KV rows into e. */
static int load_state(struct cr *r, struct engine *e, int32_t seq, uint64_t bytes) {
    void *state = malloc((size_t)bytes);
    int rc = state ? cr_get(r, state, (size_t)bytes) : -ENOMEM;
    if (rc == 0)
        rc = engine_state_import(e, seq, state, (size_t)bytes);
    free(state);
    return rc;
}

/* The checks between a verified header and an engine: model, shape, token ids. */
static int load_check(const struct ctxfile_head *h, const struct model *m, struct engine *e,
                      const char *path, char *err, size_t err_len) {
    uint64_t fp = ctxfile_fingerprint(m->gguf);
    struct engine_kv_shape s = engine_kv_shape(e);
    if (h->in.fingerprint != fp) {
        err_set(err, err_len, "ctxfile: \"%s\" was made with another model: its fingerprint is "
                "%016" PRIx64 ", the loaded model's is %016" PRIx64, path, h->in.fingerprint, fp);
        return CTXFILE_EMODEL;
    }
    if (h->in.n_layer != s.n_layer || h->in.kv_dim != s.kv_dim ||
        h->in.n_swa_layer != s.n_swa_layer || h->in.n_swa != s.n_swa) {
        err_set(err, err_len, "ctxfile: \"%s\" has %d layers of kv_dim %d (%d with a window of "
                "%d), the engine %d of %d (%d of %d)", path, h->in.n_layer, h->in.kv_dim,
                h->in.n_swa_layer, h->in.n_swa, s.n_layer, s.kv_dim, s.n_swa_layer, s.n_swa);
        return CTXFILE_ECORRUPT;
    }
    if (h->in.state_bytes != engine_state_size(e)) {
        err_set(err, err_len, "ctxfile: \"%s\" holds %" PRIu64 " bytes of recurrent state, the "
                "engine %zu", path, h->in.state_bytes, engine_state_size(e));
        return CTXFILE_ECORRUPT;
    }
    if (h->in.n_tokens > s.n_ctx) {
        err_set(err, err_len, "ctxfile: \"%s\" holds %d tokens, more than the context size %d",
                path, h->in.n_tokens, s.n_ctx);
        return CTXFILE_ESHAPE;
    }
    for (int32_t i = 0; i < h->in.n_tokens; i++) {
        uint32_t id = get32(h->tok + 4 * (size_t)i);
        if (id >= (uint32_t)m->hp.n_vocab) {
            err_set(err, err_len, "ctxfile: \"%s\" is corrupted (token %d: id %u out of range)",
                    path, i, id);
            return CTXFILE_ECORRUPT;
        }
    }
    return 0;
}

int ctxfile_load(const char *path, const struct model *m, struct engine *e, int32_t seq,
                 int32_t **tokens, int32_t *n, char **metadata_json, struct ctxfile_info *info,
                 char *err, size_t err_len) {
    struct ctxfile_head h;
    struct cr r = {.fd = -1};
    int32_t *ids = NULL;
    int rc = head_read(&h, path, err, err_len);
    if (rc == 0 && info)
        *info = h.in;
    if (rc == 0 && (seq < 0 || seq >= engine_n_seq(e))) {
        err_set(err, err_len, "ctxfile_load: sequence %d out of range", seq);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = load_check(&h, m, e, path, err, err_len);
    if (rc < 0)
        goto out;
    ids = malloc((size_t)h.in.n_tokens * sizeof(*ids) + 1);
    r.fd = h.fd;
    r.off = CTXFILE_HEADER_BYTES + 4ull * (uint64_t)h.in.n_tokens + h.in.meta_bytes;
    r.left = h.in.kv_stored_bytes;
    hash64_init(&r.hash, 0);
    if (h.in.zstd) {
        r.zd = ZSTD_createDCtx();
        r.zin = malloc(CTXFILE_IO_CHUNK);
    }
    if (!ids || (h.in.zstd && (!r.zd || !r.zin))) {
        err_set(err, err_len, "ctxfile_load: out of memory");
        rc = -ENOMEM;
        goto out;
    }
    engine_truncate(e, seq, 0);
    rc = load_kv(&r, e, seq, &h.in);
    if (rc == 0 && h.in.state_bytes > 0)
        rc = load_state(&r, e, seq, h.in.state_bytes);
    if (rc == 0 && (!cr_done(&r) || hash64_digest(&r.hash) != get64(h.hdr + 80)))
        rc = CTXFILE_ECORRUPT;
    if (rc < 0) {
        engine_truncate(e, seq, 0);
        if (rc == CTXFILE_ECORRUPT)
            err_set(err, err_len, "ctxfile: \"%s\" is corrupted (KV data %s)", path,
                    h.in.zstd ? "does not decompress or checksum mismatch" : "checksum mismatch");
        else
            err_set(err, err_len, "ctxfile: reading \"%s\": %s", path, strerror(-rc));
        goto out;
    }
    engine_kv_commit(e, seq, h.in.n_tokens);
    for (int32_t i = 0; i < h.in.n_tokens; i++)
        ids[i] = (int32_t)get32(h.tok + 4 * (size_t)i);
    *tokens = ids;
    *n = h.in.n_tokens;
    *metadata_json = h.meta;
    h.meta = NULL;
    ids = NULL;
out:
    free(ids);
    ZSTD_freeDCtx(r.zd);
    free(r.zin);
    head_release(&h);
    return rc;
}
