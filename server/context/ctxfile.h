/* ctxfile.h - context files: a processed prompt (its token ids and the KV cache the engine built
 * for them) with JSON metadata, in one versioned, checksummed binary file (docs/formats.md).
 *
 *     struct ctxfile_opts o = ctxfile_opts_default();        // KV as the engine holds it, no zstd
 *     ctxfile_save("/ctx/review", m, e, 0, ids, n, "{\"prompt\":\"...\"}", &o, NULL, err, len);
 *     ...
 *     int32_t *ids; int32_t n; char *meta;
 *     int rc = ctxfile_load("/ctx/review", m, e, 0, &ids, &n, &meta, NULL, err, len);
 *     if (rc == CTXFILE_EMODEL) ... 409: err names both fingerprints
 *
 * Save and load read and write the engine's cache: call them where nothing else runs the engine
 * (the scheduler's thread). Writing is atomic (a temp file in the same directory, fsync, rename,
 * fsync of the directory): on any error no file is left. Reading trusts nothing: sizes are checked against the file size,
 * both checksums are verified, and the engine's cache is only declared valid at the end. */
#ifndef SNIPER_CTXFILE_H
#define SNIPER_CTXFILE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "gguf.h"
#include "model.h"

#define CTXFILE_MAGIC "SNIPCTX\0" /* 8 bytes */
#define CTXFILE_VERSION 3 /* 2: + the recurrent state; 3: + sliding-window layers, which store
                           * only their last window - 1 positions; versions 1 and 2 still load */
#define CTXFILE_HEADER_BYTES 128
#define CTXFILE_MAX_META_BYTES (16u << 20)
#define CTXFILE_MAX_STATE_BYTES (1ull << 34)

/* Errors besides -errno of the system calls (-ENOENT, -ENOSPC, -EIO ...) and -ENOMEM: */
#define CTXFILE_ECORRUPT (-EBADMSG)        /* not a context file, truncated or checksum mismatch */
#define CTXFILE_EVERSION (-EPROTONOSUPPORT) /* a format version this build does not read */
#define CTXFILE_EMODEL (-ESTALE)           /* made for another model (fingerprints differ): 409 */
#define CTXFILE_ESHAPE (-ERANGE)           /* does not fit the engine (more tokens than n_ctx) */

/* How the KV is stored. EXACT keeps the engine's type (f32, f16, q8_0 or q4_0): loading into an
 * engine of that type gives back the same bits. F16, Q8_0 and Q4_0 re-quantize each row (lossy
 * unless it is the engine's type); kv_dim must be a multiple of 32 for Q8_0 / Q4_0. Loading
 * converts rows to the loading engine's type, rounding as the engine does. */
enum ctxfile_store {
    CTXFILE_STORE_EXACT,
    CTXFILE_STORE_F16,
    CTXFILE_STORE_Q8_0,
    CTXFILE_STORE_Q4_0,
};

struct ctxfile_opts {
    enum ctxfile_store store;
    bool zstd;       /* compress the KV section with zstd */
    int zstd_level;  /* 1 .. 19; 0: zstd's default (3) */
};

/* What the header says (filled by ctxfile_info, and by save and load when asked). */
struct ctxfile_info {
    uint32_t version;
    uint64_t fingerprint;    /* of the model the context was made with */
    enum qtype kv_type;      /* the engine's KV type when saved: F32, F16, Q8_0 or Q4_0 */
    enum qtype store_type;   /* the rows' type in the file: F32, F16, Q8_0 or Q4_0 */
    bool zstd;
    int32_t n_layer;
    int32_t kv_dim;
    int32_t n_tokens;
    int32_t n_swa_layer;     /* of n_layer, the sliding-window ones (0 before version 3) */
    int32_t n_swa;           /* their window: each stores its last min(n_tokens, n_swa - 1)
                              * positions (0: none) */
    uint64_t created;        /* unix seconds */
    uint64_t meta_bytes;
    uint64_t kv_bytes;       /* the KV rows uncompressed: 2 * row bytes * (the full layers'
                              * n_tokens rows + the window layers' rows) */
    uint64_t state_bytes;    /* recurrent state after the rows (f32, exact), part of the KV section
                              * (0: a model without one, and every version 1 file) */
    uint64_t kv_stored_bytes;/* the KV section in the file: rows then state, maybe compressed */
    uint64_t file_bytes;
};

struct ctxfile_opts ctxfile_opts_default(void);

/* "exact", "f16", "q8_0", "q4_0" -> *out. Returns 0 or -EINVAL. */
int ctxfile_store_parse(const char *s, enum ctxfile_store *out);
const char *ctxfile_store_name(enum ctxfile_store s);

/* True when name can be a context's file name: [A-Za-z0-9._-]{1,64}, not starting with '.'. */
bool ctx_name_valid(const char *name);

/* The model fingerprint: a hash of the GGUF's header (version, alignment), every metadata key,
 * type and value, and the tensor table (names, types, shapes, offsets), not the tensor data. */
uint64_t ctxfile_fingerprint(const struct gguf *g);

/* Writes positions 0 .. n-1 of sequence seq's KV cache in e (n <= engine_n_past(e, seq)) with
 * their token ids tokens[n] and metadata_json (any NUL-terminated string; may be NULL for none)
 * to path, atomically. m is the engine's model (for the fingerprint); o may be NULL for the
 * defaults; info, when not NULL, receives the header written. Returns 0, or a negative error with a message in err: -EINVAL (bad
 * arguments or options), -ENOSPC / -EIO / -errno (writing; no file is left), -ENOMEM. */
int ctxfile_save(const char *path, const struct model *m, const struct engine *e, int32_t seq,
                 const int32_t *tokens, int32_t n, const char *metadata_json,
                 const struct ctxfile_opts *o, struct ctxfile_info *info, char *err,
                 size_t err_len);

/* Reads path into sequence seq's KV cache in e (converted to the engine's KV type) and sets its
 * n_past to the file's token count. On success *tokens (malloc'd [*n]) and *metadata_json (malloc'd, NUL-terminated; "" when
 * none) belong to the caller; info, when not NULL, receives the header. Returns 0, or a negative
 * error with a message in err: CTXFILE_ECORRUPT, CTXFILE_EVERSION, CTXFILE_EMODEL (the message gives
 * both fingerprints; info->fingerprint is the file's), CTXFILE_ESHAPE, -ENOENT / -EIO / -errno,
 * -ENOMEM. On failure the engine's cache is empty (n_past 0) when the KV was reached, untouched
 * before that. */
int ctxfile_load(const char *path, const struct model *m, struct engine *e, int32_t seq,
                 int32_t **tokens, int32_t *n, char **metadata_json, struct ctxfile_info *info,
                 char *err, size_t err_len);

/* Reads and checks path's header, token ids and metadata (not the KV: quick, for listings). The
 * header checksum is verified; the KV's is not. metadata_json, when not NULL, receives the metadata
 * (malloc'd, the caller frees). Returns 0 or an error as ctxfile_load. */
int ctxfile_info(const char *path, struct ctxfile_info *info, char **metadata_json, char *err,
                 size_t err_len);

/* Reads all of path and checks every checksum (the KV section's as stored) without an engine:
 * for a download, before it takes its name. Returns 0 or an error as ctxfile_info. */
int ctxfile_verify(const char *path, struct ctxfile_info *info, char *err, size_t err_len);

#endif
