/* model.c - reads a GGUF's hyperparameters and weights through the architecture table (arch.h):
 * the common keys and the weight image here, each architecture's keys and layer tensors in its
 * arch_<name>.c. Every tensor's type and shape is checked against the hyperparameters before its
 * bytes are read, so a file that disagrees with itself is refused with the tensor's name instead
 * of being computed on. */
#include "model.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "err.h"
#include "fault.h"
#include "arch.h"
#include "os.h"
#include "quant.h"

/* The architectures this build runs, by general.architecture. */
static const struct model_arch_ops *const model_archs[] = {
    &arch_qwen3moe, &arch_qwen3, &arch_llama, &arch_qwen35moe, &arch_qwen35, &arch_gptoss,
    &arch_gemma4,
};

static const struct model_arch_ops *arch_by_id(enum model_arch a) {
    for (size_t i = 0; i < sizeof(model_archs) / sizeof(model_archs[0]); i++)
        if (model_archs[i]->arch == a)
            return model_archs[i];
    return NULL;
}

const char *model_arch_name(enum model_arch a) {
    const struct model_arch_ops *ops = arch_by_id(a);
    return ops ? ops->name : "unknown";
}

bool model_is_recurrent(const struct model *m) {
    for (int il = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].mixer == MODEL_MIXER_DELTANET)
            return true;
    return false;
}

/* ---- hyperparameters ------------------------------------------------------------------------- */

int model_key_i32(const struct gguf *g, const char *suffix, int32_t def, int32_t *out, char *err,
                  size_t err_len) {
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", gguf_get_str(g, "general.architecture"), suffix);
    uint32_t v;
    int rc = gguf_get_u32(g, key, &v);
    if (rc == -ENOENT && def >= 0) {
        *out = def;
        return 0;
    }
    if (rc < 0 || v == 0 || v > (1u << 30)) {
        err_set(err, err_len, "model: key \"%s\" %s", key,
                rc == -ENOENT ? "is missing" : "is not a sane positive integer");
        return -EINVAL;
    }
    *out = (int32_t)v;
    return 0;
}

int model_key_i32_at(const struct gguf *g, const char *suffix, int32_t il, int32_t def,
                     int32_t *out, char *err, size_t err_len) {
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", gguf_get_str(g, "general.architecture"), suffix);
    const struct gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || kv->type != GGUF_VTYPE_ARRAY)
        return model_key_i32(g, suffix, def, out, err, err_len);
    uint64_t n = 0;
    const void *a = gguf_get_arr(g, key, kv->arr_type, &n);
    int64_t v = -1;
    if (a && il >= 0 && (uint64_t)il < n && kv->arr_type == GGUF_VTYPE_INT32)
        v = ((const int32_t *)a)[il];
    else if (a && il >= 0 && (uint64_t)il < n && kv->arr_type == GGUF_VTYPE_UINT32)
        v = ((const uint32_t *)a)[il];
    if (v <= 0 || v > (1 << 30)) {
        err_set(err, err_len, "model: key \"%s\" has no sane positive integer for layer %d", key,
                il);
        return -EINVAL;
    }
    *out = (int32_t)v;
    return 0;
}

static int hp_get_f32(const struct gguf *g, const char *arch, const char *suffix, float def,
                      float *out, char *err, size_t err_len) {
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    int rc = gguf_get_f32(g, key, out);
    if (rc == -ENOENT) {
        *out = def;
        return 0;
    }
    if (rc < 0 || !(*out > 0.0f)) {
        err_set(err, err_len, "model: key \"%s\" is not a positive number", key);
        return -EINVAL;
    }
    return 0;
}

/* RoPE scaling as llama.cpp reads it for every architecture (llama_model_base::load_hparams, the
 * llama_context constructor): rope.scaling.type none, linear (the default) or yarn; factor f
 * gives freq_scale 1/f; yarn mixes extrapolated and interpolated frequencies (ext_factor 1) and
 * hands ggml an attention factor of mscale(f) / (1 + 0.1 ln f), which ggml's rope multiplies by
 * 1 + 0.1 ln f again; rope.scaling.attn_factor multiplies it. */
static int hp_read_rope_scaling(const struct gguf *g, const char *arch, struct model_hparams *hp,
                                char *err, size_t err_len) {
    char key[128];
    snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
    const char *type = gguf_get_str(g, key);
    const bool yarn = type && strcmp(type, "yarn") == 0;
    if (type && !yarn && strcmp(type, "linear") != 0 && strcmp(type, "none") != 0) {
        err_set(err, err_len, "model: key \"%s\" is \"%s\" (none, linear or yarn)", key, type);
        return -EINVAL;
    }
    float factor = 0.0f, attn = 1.0f;
    int rc = 0;
    rc |= hp_get_f32(g, arch, "rope.scaling.factor", 1.0f, &factor, err, err_len);
    rc |= hp_get_f32(g, arch, "rope.scaling.attn_factor", 1.0f, &attn, err, err_len);
    rc |= model_key_i32(g, "rope.scaling.original_context_length", hp->n_ctx_train,
                        &hp->rope_n_ctx_orig, err, err_len);
    if (rc)
        return -EINVAL;
    const bool none = type && strcmp(type, "none") == 0;
    hp->rope_freq_scale = none ? 1.0f : 1.0f / factor;
    hp->rope_ext_factor = yarn ? 1.0f : 0.0f;
    hp->rope_attn_factor = 1.0f;
    if (yarn) {
        const float f = 1.0f / hp->rope_freq_scale;
        const float mscale = f <= 1.0f ? 1.0f : 0.1f * logf(f) + 1.0f;
        hp->rope_attn_factor = mscale * (1.0f / (1.0f + 0.1f * logf(f)));
    }
    hp->rope_attn_factor *= attn;
    return 0;
}

/* The keys every architecture has: sizes, heads, rope, context, eps. */
static int hp_read_common(const struct gguf *g, const char *arch, struct model_hparams *hp,
                          char *err, size_t err_len) {
    int rc = 0;
    rc |= model_key_i32(g, "embedding_length", -1, &hp->n_embd, err, err_len);
    rc |= model_key_i32(g, "block_count", -1, &hp->n_layer, err, err_len);
    rc |= model_key_i32(g, "attention.head_count", -1, &hp->n_head, err, err_len);
    if (rc)
        return -EINVAL;
    rc |= model_key_i32_at(g, "attention.head_count_kv", 0, hp->n_head, &hp->n_head_kv, err,
                           err_len);
    rc |= model_key_i32(g, "attention.key_length", hp->n_embd / hp->n_head, &hp->head_dim, err,
                        err_len);
    rc |= model_key_i32(g, "rope.dimension_count", hp->head_dim, &hp->n_rot, err, err_len);
    rc |= model_key_i32(g, "context_length", 4096, &hp->n_ctx_train, err, err_len);
    rc |= hp_get_f32(g, arch, "rope.freq_base", 10000.0f, &hp->rope_freq_base, err, err_len);
    rc |= hp_get_f32(g, arch, "attention.layer_norm_rms_epsilon", 1e-6f, &hp->rms_eps, err,
                     err_len);
    int32_t v_len = 0;
    rc |= model_key_i32(g, "attention.value_length", hp->head_dim, &v_len, err, err_len);
    if (rc || hp_read_rope_scaling(g, arch, hp, err, err_len) < 0)
        return -EINVAL;
    if (v_len != hp->head_dim || hp->n_head % hp->n_head_kv != 0 || hp->n_rot > hp->head_dim ||
        hp->n_rot % 2 != 0) {
        err_set(err, err_len,
                "model: inconsistent hyperparameters (heads %d/%d, head_dim %d, value_length %d, "
                "rope dims %d)", hp->n_head, hp->n_head_kv, hp->head_dim, v_len, hp->n_rot);
        return -EINVAL;
    }
    return 0;
}

int model_read_hparams(const struct gguf *g, struct model_hparams *hp, char *err, size_t err_len) {
    memset(hp, 0, sizeof(*hp));
    const char *arch = gguf_get_str(g, "general.architecture");
    if (!arch) {
        err_set(err, err_len, "model: key \"general.architecture\" is missing");
        return -EINVAL;
    }
    const struct model_arch_ops *ops = NULL;
    for (size_t i = 0; i < sizeof(model_archs) / sizeof(model_archs[0]); i++)
        if (strcmp(arch, model_archs[i]->name) == 0)
            ops = model_archs[i];
    if (!ops) {
        err_set(err, err_len, "model: architecture \"%s\" is not supported (qwen3moe, qwen3, "
                "llama, qwen35moe, qwen35, gpt-oss, gemma4)", arch);
        return -ENOTSUP;
    }
    hp->arch = ops->arch;
    hp->rope = ops->rope;
    if (hp_read_common(g, arch, hp, err, err_len) < 0 || ops->read_hparams(g, hp, err, err_len) < 0)
        return -EINVAL;
    if (hp->n_expert_used > hp->n_expert) {
        err_set(err, err_len, "model: %d experts used of %d", hp->n_expert_used, hp->n_expert);
        return -EINVAL;
    }
    const struct gguf_tensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->ne[0] != (uint64_t)hp->n_embd || emb->ne[1] > INT32_MAX) {
        err_set(err, err_len, "model: tensor \"token_embd.weight\" is missing or not [%d, n_vocab]",
                hp->n_embd);
        return -EINVAL;
    }
    hp->n_vocab = (int32_t)emb->ne[1];
    return 0;
}

/* ---- weights ----------------------------------------------------------------------------------- */

const char *model_blk_name(char *buf, size_t n, int il, const char *suffix) {
    snprintf(buf, n, "blk.%d.%s", il, suffix);
    return buf;
}

int model_weight_load(struct model *m, struct weight *w, const char *name, int64_t n_in,
                      int64_t n_out, int64_t n_mat, char *err, size_t err_len) {
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) {
        err_set(err, err_len, "model: tensor \"%s\" is missing", name);
        return -EINVAL;
    }
    uint32_t want_dims = n_mat > 1 ? 3 : 2;
    if ((t->n_dims != want_dims && !(want_dims == 2 && t->n_dims == 1 && n_out == 1)) ||
        t->ne[0] != (uint64_t)n_in || t->ne[1] != (uint64_t)n_out || t->ne[2] != (uint64_t)n_mat) {
        err_set(err, err_len,
                "model: tensor \"%s\" has shape [%llu, %llu, %llu], expected [%lld, %lld, %lld]",
                name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                (unsigned long long)t->ne[2], (long long)n_in, (long long)n_out, (long long)n_mat);
        return -EINVAL;
    }
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->n_mat = n_mat;
    w->row_bytes = t->row_bytes;
    w->mat_bytes = (size_t)t->row_bytes * (size_t)n_out;
    w->mat_stride = w->mat_bytes;
    w->tensor = t;
    w->data = (const uint8_t *)m->image + m->shard_image_off[t->shard] + t->data_off;
    return 0;
}

int model_floats_load(struct model *m, float **out, const char *name, int64_t ne0, int64_t ne1,
                      char *err, size_t err_len) {
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    const int64_t n = ne0 * ne1;
    if (!t || t->n_elems != (uint64_t)n || t->ne[0] != (uint64_t)ne0) {
        err_set(err, err_len, "model: tensor \"%s\" is %s [%lld, %lld]", name,
                t ? "not of shape" : "missing, expected", (long long)ne0, (long long)ne1);
        return -EINVAL;
    }
    if (!quant_can_dequantize(t->type)) {
        err_set(err, err_len, "model: tensor \"%s\" has type %s, which cannot be read", name,
                qtype_name(t->type));
        return -ENOTSUP;
    }
    void *raw = malloc(t->n_bytes);
    *out = calloc((size_t)n, sizeof(float));
    int rc = -ENOMEM;
    if (!raw || !*out)
        goto out;
    rc = gguf_read_tensor(m->gguf, t, raw);
    for (int64_t r = 0; rc == 0 && r < ne1; r++)
        rc = quant_dequantize_row(t->type, (const uint8_t *)raw + (size_t)r * t->row_bytes,
                                  *out + r * ne0, ne0);
    if (rc < 0)
        err_set(err, err_len, "model: reading tensor \"%s\" failed: %s", name, strerror(-rc));
out:
    if (rc == -ENOMEM)
        err_set(err, err_len, "model: out of memory reading \"%s\"", name);
    free(raw);
    return rc;
}

/* ---- the weight image ------------------------------------------------------------------------ */

#define MODEL_HUGE_PAGE (2u << 20)
#define MODEL_READ_CHUNK (64u << 20)
#define MODEL_DIO_ALIGN 4096u
#define MODEL_READ_THREADS 4

/* Reads [off, off + n) of the file into dst: direct I/O when dio_fd >= 0 (dst, off and n aligned;
 * the file's end may cut the last read short), else buffered. Returns 0 or a negative errno. */
static int image_read(int fd, int dio_fd, uint8_t *dst, uint64_t off, uint64_t n,
                      uint64_t file_bytes) {
    while (n > 0) {
        if (fault_hit(FAULT_READ))
            return -EIO;
        ssize_t got = pread(dio_fd >= 0 ? dio_fd : fd, dst, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0)
            return off >= file_bytes ? 0 : -EIO; /* past the end: done; before it: the file shrank */
        dst += got;
        off += (uint64_t)got;
        n -= (uint64_t)got;
        if (dio_fd >= 0 && ((uint64_t)got % MODEL_DIO_ALIGN) != 0)
            return off >= file_bytes ? 0 : -EIO;
    }
    return 0;
}

/* A byte range of one shard's file that must be in the image, aligned for direct I/O. */
struct image_range {
    uint32_t shard;
    uint64_t off, end;
};

/* The shared state of the threads that read the image: pieces of at most MODEL_READ_CHUNK bytes
 * of the ranges are handed out in file order. */
struct image_job {
    struct model *m;
    uint8_t *base;
    int *dio_fds;               /* [n_shards] os_io_open_uncached's descriptors (O_DIRECT on
                                 * Linux), or -1 */
    const struct image_range *ranges;
    size_t n_ranges;
    pthread_mutex_t lock;       /* guards the cursor, rc and err */
    size_t cur_range;           /* cursor: range and offset of the next piece */
    uint64_t cur_off;
    int rc;                     /* first failure */
    char *err;
    size_t err_len;
    struct model_progress *progress; /* or NULL */
};

/* Takes the next piece [*off, *off + *n) of shard *shard under the lock; false when none is left
 * or one failed. */
static bool image_next_piece(struct image_job *job, uint32_t *shard, uint64_t *off, uint64_t *n) {
    bool ok = false;
    pthread_mutex_lock(&job->lock);
    while (job->rc == 0 && job->cur_range < job->n_ranges) {
        const struct image_range *r = &job->ranges[job->cur_range];
        if (job->cur_off < r->off)
            job->cur_off = r->off;
        if (job->cur_off >= r->end || job->cur_off >= job->m->gguf->shards[r->shard].file_bytes) {
            job->cur_range++;
            job->cur_off = 0;
            continue;
        }
        *shard = r->shard;
        *off = job->cur_off;
        *n = r->end - *off < MODEL_READ_CHUNK ? r->end - *off : MODEL_READ_CHUNK;
        job->cur_off += *n;
        ok = true;
        break;
    }
    pthread_mutex_unlock(&job->lock);
    return ok;
}

/* Reads pieces until none is left or one fails; the first failure is reported in job->err. Page
 * faults on fresh huge pages (zeroing) and the reads themselves proceed in parallel. */
static void *image_reader(void *arg) {
    struct image_job *job = arg;
    uint64_t off, n;
    uint32_t shard;
    while (image_next_piece(job, &shard, &off, &n)) {
        const struct gguf_shard *sh = &job->m->gguf->shards[shard];
        const int dio_fd = job->dio_fds[shard];
        uint8_t *dst = job->base + job->m->shard_image_off[shard] + off;
        uint64_t n_file = sh->file_bytes - off < n ? sh->file_bytes - off : n;
        int rc = image_read(sh->fd, dio_fd, dst, off, dio_fd >= 0 ? n : n_file, sh->file_bytes);
        if (rc == -EINVAL && dio_fd >= 0) /* this filesystem refuses direct I/O */
            rc = image_read(sh->fd, -1, dst, off, n_file, sh->file_bytes);
        if (rc == 0 && job->progress)
            atomic_fetch_add(&job->progress->done, n);
        if (rc < 0) {
            pthread_mutex_lock(&job->lock);
            if (job->rc == 0) {
                job->rc = rc;
                err_set(job->err, job->err_len, "model: reading \"%s\" failed at byte %llu: %s",
                        sh->path, (unsigned long long)off, strerror(-rc));
            }
            pthread_mutex_unlock(&job->lock);
        }
    }
    return NULL;
}

static int range_cmp(const void *a, const void *b) {
    const struct image_range *x = a, *y = b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* True for the tensors that may stay on disk: the routed experts (blk.N.ffn_{gate,up,down}_exps)
 * of a moe model, the FFN matrices (blk.N.ffn_{gate,up,down}) of a dense one. */
bool model_tensor_streamed(const struct model_hparams *hp, const char *name) {
    static const char *const moe[] = {"ffn_gate_exps.weight", "ffn_up_exps.weight",
                                      "ffn_down_exps.weight", "ffn_gate_up_exps.weight"};
    static const char *const dense[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
                                        "ffn_down.weight"};
    const char *const *suffixes = hp->n_expert > 0 ? moe : dense;
    if (strncmp(name, "blk.", 4) != 0)
        return false;
    const char *dot = strchr(name + 4, '.'); /* after the layer number */
    if (!dot)
        return false;
    for (int i = 0; i < 4; i++)
        if (strcmp(dot + 1, suffixes[i]) == 0)
            return true;
    return false;
}

/* The ranges to read: the whole of every shard, or with experts on disk every other tensor's bytes
 * (aligned outwards to MODEL_DIO_ALIGN, sorted by shard and offset, merged). Returns a malloc'd
 * array or NULL. */
static struct image_range *image_ranges(const struct model *m, size_t *n_out) {
    const struct gguf *g = m->gguf;
    struct image_range *r = calloc(g->n_tensors + g->n_shards, sizeof(*r));
    if (!r)
        return NULL;
    size_t n = 0;
    if (!m->experts_on_disk) {
        for (uint32_t s = 0; s < g->n_shards; s++)
            r[n++] = (struct image_range){s, 0, (g->shards[s].file_bytes + MODEL_DIO_ALIGN - 1) &
                                                    ~(uint64_t)(MODEL_DIO_ALIGN - 1)};
    } else {
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const struct gguf_tensor *t = &g->tensors[i];
            if (model_tensor_streamed(&m->hp, t->name) || t->n_bytes == 0 ||
                (m->embd_on_disk && strcmp(t->name, "token_embd.weight") == 0) ||
                (m->ple_on_disk && strcmp(t->name, "per_layer_token_embd.weight") == 0))
                continue;
            r[n].shard = t->shard;
            r[n].off = t->data_off & ~(uint64_t)(MODEL_DIO_ALIGN - 1);
            r[n].end = (t->data_off + t->n_bytes + MODEL_DIO_ALIGN - 1) &
                       ~(uint64_t)(MODEL_DIO_ALIGN - 1);
            n++;
        }
        qsort(r, n, sizeof(*r), range_cmp);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (k && r[i].shard == r[k - 1].shard && r[i].off <= r[k - 1].end) {
                if (r[i].end > r[k - 1].end)
                    r[k - 1].end = r[i].end;
            } else {
                r[k++] = r[i];
            }
        }
        n = k;
    }
    *n_out = n;
    return r;
}

/* Reads the file into anonymous memory backed by transparent huge pages, with direct I/O so the
 * page cache does not hold a second copy; with experts on disk only the other tensors are read
 * (the experts' part of the image stays unbacked address space, costing no RAM). Huge pages matter: under virtualisation a TLB miss on
 * a 4 KiB page costs a two-level page walk, and streaming weights through 4 KiB pages measured
 * 5.4 GB/s against 9.5 GB/s on huge pages for the same q4_K kernel (docs/benchmarks.md). The image
 * is then made read-only. */
static int model_read_image(struct model *m, struct model_progress *progress, char *err,
                            size_t err_len) {
    const struct gguf *g = m->gguf;
    m->shard_image_off = calloc(g->n_shards, sizeof(*m->shard_image_off));
    int *dio_fds = calloc(g->n_shards, sizeof(*dio_fds));
    if (!m->shard_image_off || !dio_fds) {
        free(dio_fds);
        err_set(err, err_len, "model: out of memory");
        return -ENOMEM;
    }
    uint64_t file_bytes = 0; /* the shards end to end, each from a MODEL_DIO_ALIGN boundary */
    for (uint32_t s = 0; s < g->n_shards; s++) {
        m->shard_image_off[s] = file_bytes;
        file_bytes += (g->shards[s].file_bytes + MODEL_DIO_ALIGN - 1) &
                      ~(uint64_t)(MODEL_DIO_ALIGN - 1);
    }
    m->image_bytes = ((size_t)file_bytes + MODEL_HUGE_PAGE - 1) & ~(size_t)(MODEL_HUGE_PAGE - 1);
    if (m->image_bytes == 0)
        m->image_bytes = MODEL_HUGE_PAGE;
    /* over-allocate one huge page to align the start, then trim */
    size_t span = m->image_bytes + MODEL_HUGE_PAGE;
    uint8_t *p = MAP_FAILED;
    if (!fault_hit(FAULT_ALLOC))
        p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    if (p == MAP_FAILED) {
        err_set(err, err_len, "model: out of memory for the weights of \"%s\" (%zu bytes)", m->path,
                m->image_bytes);
        free(dio_fds);
        return -ENOMEM;
    }
    uintptr_t huge_mask = MODEL_HUGE_PAGE - 1;
    uint8_t *base = (uint8_t *)(((uintptr_t)p + huge_mask) & ~huge_mask);
    if (base > p)
        munmap(p, (size_t)(base - p));
    munmap(base + m->image_bytes, (size_t)(p + span - (base + m->image_bytes)));
    m->image = base;
    size_t n_ranges = 0;
    struct image_range *ranges = image_ranges(m, &n_ranges);
    if (!ranges) {
        err_set(err, err_len, "model: out of memory");
        free(dio_fds);
        return -ENOMEM;
    }
    /* with experts on disk, huge pages only inside what is read: one straddling the edge of a
     * streamed tensor would back up to 2 MiB of the experts' address space (about 100 MiB on the
     * 30B preset) */
    if (!m->experts_on_disk)
        os_pages_huge(base, m->image_bytes, true);
    for (size_t i = 0; i < n_ranges; i++) {
        const uint64_t at = m->shard_image_off[ranges[i].shard];
        const uint64_t lo = (at + ranges[i].off + huge_mask) & ~(uint64_t)huge_mask;
        const uint64_t hi = (at + ranges[i].end) & ~(uint64_t)huge_mask;
        if (m->experts_on_disk && hi > lo)
            os_pages_huge(base + lo, hi - lo, true);
        m->resident_bytes += ranges[i].end - ranges[i].off;
    }
    if (progress)
        atomic_store(&progress->total, m->resident_bytes);
    struct image_job job = {.m = m, .base = base, .dio_fds = dio_fds, .ranges = ranges,
                            .n_ranges = n_ranges, .err = err, .err_len = err_len,
                            .progress = progress};
    for (uint32_t s = 0; s < g->n_shards; s++) {
        bool aligned; /* its reads are aligned either way: only the file's end cuts one short */
        dio_fds[s] = os_io_open_uncached(g->shards[s].path, &aligned);
        if (dio_fds[s] < 0)
            dio_fds[s] = -1;
    }
    pthread_mutex_init(&job.lock, NULL);
    pthread_t threads[MODEL_READ_THREADS];
    int n_started = 0;
    for (; n_started < MODEL_READ_THREADS; n_started++)
        if (pthread_create(&threads[n_started], NULL, image_reader, &job) != 0)
            break;
    if (n_started == 0)
        image_reader(&job);
    for (int i = 0; i < n_started; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_destroy(&job.lock);
    free(ranges);
    for (uint32_t s = 0; s < g->n_shards; s++)
        if (dio_fds[s] >= 0)
            close(dio_fds[s]);
    free(dio_fds);
    int rc = job.rc;
    if (rc == 0)
        mprotect(base, m->image_bytes, PROT_READ);
    return rc;
}

/* The base name of path without its extension, malloc'd. */
static char *model_default_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *name = strdup(base);
    char *dot = name ? strrchr(name, '.') : NULL;
    if (dot && dot != name)
        *dot = '\0';
    return name;
}

struct model *model_load(const char *path, char *err, size_t err_len) {
    return model_open(path, false, err, err_len);
}

struct model *model_open(const char *path, bool experts_on_disk, char *err, size_t err_len) {
    return model_open_progress(path, experts_on_disk, NULL, err, err_len);
}

struct model *model_open_progress(const char *path, bool experts_on_disk,
                                  struct model_progress *progress, char *err, size_t err_len) {
    struct model *m = calloc(1, sizeof(*m));
    if (!m) {
        err_set(err, err_len, "model: out of memory");
        return NULL;
    }
    m->experts_on_disk = experts_on_disk;
    m->gguf = gguf_open(path, err, err_len);
    if (!m->gguf)
        goto err;
    if (model_read_hparams(m->gguf, &m->hp, err, err_len) < 0)
        goto err;
    m->embd_on_disk = experts_on_disk && gguf_find_tensor(m->gguf, "output.weight") != NULL;
    m->ple_on_disk = experts_on_disk && m->hp.n_embd_per_layer > 0;
    const char *gname = gguf_get_str(m->gguf, "general.name");
    m->path = strdup(path);
    m->name = gname && *gname ? strdup(gname) : model_default_name(path);
    m->layers = calloc((size_t)m->hp.n_layer, sizeof(*m->layers));
    if (!m->path || !m->name || !m->layers) {
        err_set(err, err_len, "model: out of memory");
        goto err;
    }
    if (model_read_image(m, progress, err, err_len) < 0)
        goto err;
    if (model_weight_load(m, &m->tok_embd, "token_embd.weight", m->hp.n_embd, m->hp.n_vocab, 1,
                          err, err_len) < 0 ||
        model_floats_load(m, &m->output_norm, "output_norm.weight", m->hp.n_embd, 1, err,
                          err_len) < 0)
        goto err;
    if (gguf_find_tensor(m->gguf, "output.weight")) {
        if (model_weight_load(m, &m->output, "output.weight", m->hp.n_embd, m->hp.n_vocab, 1, err,
                              err_len) < 0)
            goto err;
    } else {
        m->output = m->tok_embd; /* tied: shares tok_embd's bytes */
    }
    const struct model_arch_ops *ops = arch_by_id(m->hp.arch);
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct model_layer *l = &m->layers[il];
        l->head_dim = m->hp.head_dim; /* the arch may set its own per layer */
        l->n_head_kv = m->hp.n_head_kv;
        l->n_rot = m->hp.n_rot;
        l->kv_src = -1;
        l->out_scale = 1.0f;
        if (ops->load_layer(m, il, err, err_len) < 0)
            goto err;
    }
    return m;
err:
    model_free(m);
    return NULL;
}

void model_free(struct model *m) {
    if (!m)
        return;
    if (m->layers) {
        for (int il = 0; il < m->hp.n_layer; il++) {
            struct model_layer *l = &m->layers[il];
            free(l->attn_norm);
            free(l->attn_q_norm);
            free(l->attn_k_norm);
            free(l->ffn_norm);
            free(l->ssm_conv1d);
            free(l->ssm_dt_bias);
            free(l->ssm_a);
            free(l->ssm_norm);
            float *biases[] = {l->bq, l->bk, l->bv, l->bo, l->attn_sinks, l->ffn_gate_inp_b,
                               l->ffn_gate_exps_b, l->ffn_up_exps_b, l->ffn_down_exps_b,
                               l->attn_post_norm, l->ffn_post_norm, l->ffn_post_norm_1,
                               l->ffn_pre_norm_2, l->ffn_post_norm_2, l->ffn_gate_inp_s,
                               l->ffn_down_exps_s, l->ple_post_norm};
            for (size_t i = 0; i < sizeof(biases) / sizeof(biases[0]); i++)
                free(biases[i]);
        }
        free(m->layers);
    }
    if (m->image)
        munmap(m->image, m->image_bytes);
    free(m->shard_image_off);
    free(m->output_norm);
    free(m->rope_freqs);
    free(m->ple_proj_norm);
    free(m->path);
    free(m->name);
    gguf_free(m->gguf);
    free(m);
}
