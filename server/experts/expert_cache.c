/* expert_cache.c - slots of (layer, expert) experts read from the model file with direct I/O.
 * Invariants: where[key] is the slot holding key or -1, and slot_key[s] the key slot s holds or -1,
 * always in agreement; a slot is published only after all three of its reads succeeded; the slots
 * of the current fetch are pinned (pin == epoch) and never chosen as victims by it. */
#include "expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "fault.h"
#include "threadpool.h"

#define EC_ALIGN 4096u             /* direct I/O alignment of offsets, lengths and buffers */
#define EC_MAX_FETCH 1024          /* experts one fetch may ask for */

/* One slice to read: matrix m (0 gate, 1 up, 2 down) of the expert landing in slot. */
struct ec_read {
    int32_t slot;
    int32_t mat;
    uint64_t off;       /* file offset of the slice */
    uint64_t bytes;     /* slice bytes */
    size_t region;      /* offset of its region inside the slot */
    int rc;
};

struct expert_cache {
    const struct model *m;
    int fd, dio_fd;
    int32_t n_layer, n_expert, n_slots;
    size_t slot_bytes;
    uint8_t *mem;         /* [n_slots][slot_bytes] */
    size_t mem_bytes;
    int32_t *where;       /* [n_layer * n_expert] slot or -1 */
    int32_t *slot_key;    /* [n_slots] key or -1 */
    uint64_t *slot_used;  /* [n_slots] tick of last use (LRU) */
    uint64_t *slot_pin;   /* [n_slots] epoch of the fetch that pinned it */
    const uint8_t **slot_mat; /* [n_slots][3] where each matrix starts inside the slot */
    uint64_t tick, epoch;
    struct ec_read *reads; /* [3 * EC_MAX_FETCH] */
    int32_t n_reads;
    struct threadpool *io;
    struct expert_cache_stats stats;
};

static size_t align_up(size_t x, size_t a) {
    return (x + a - 1) & ~(a - 1);
}

static const struct weight *ec_weight(const struct model *m, int il, int mat) {
    const struct model_layer *l = &m->layers[il];
    return mat == 0 ? &l->ffn_gate_exps : mat == 1 ? &l->ffn_up_exps : &l->ffn_down_exps;
}

/* A region holds a slice read as an aligned superset: up to EC_ALIGN - 1 bytes before it and the
 * tail rounded up. */
static size_t ec_region_bytes(size_t mat_bytes) {
    return align_up(mat_bytes + EC_ALIGN, EC_ALIGN);
}

size_t expert_cache_slot_bytes(const struct model *m) {
    size_t best = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        size_t b = 0;
        for (int k = 0; k < 3; k++)
            b += ec_region_bytes(ec_weight(m, il, k)->mat_bytes);
        best = b > best ? b : best;
    }
    return best;
}

struct expert_cache *expert_cache_new(const struct model *m, size_t cache_bytes, int n_io_threads,
                                      char *err, size_t err_len) {
    if (m->hp.n_expert <= 0) {
        err_set(err, err_len, "expert_cache: model \"%s\" has no routed experts", m->name);
        return NULL;
    }
    size_t slot = expert_cache_slot_bytes(m);
    size_t n_slots = cache_bytes / slot;
    if (n_slots < (size_t)m->hp.n_expert) {
        err_set(err, err_len,
                "expert_cache: %zu MiB hold %zu experts, fewer than one layer's %d: the cache needs "
                "at least %zu MiB",
                cache_bytes >> 20, n_slots, m->hp.n_expert,
                ((size_t)m->hp.n_expert * slot + (1u << 20) - 1) >> 20);
        return NULL;
    }
    if (n_slots > (size_t)m->hp.n_layer * (size_t)m->hp.n_expert)
        n_slots = (size_t)m->hp.n_layer * (size_t)m->hp.n_expert;
    struct expert_cache *c = calloc(1, sizeof(*c));
    if (!c)
        goto oom;
    c->m = m;
    c->fd = m->gguf->fd;
    c->dio_fd = open(m->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    c->n_layer = m->hp.n_layer;
    c->n_expert = m->hp.n_expert;
    c->n_slots = (int32_t)n_slots;
    c->slot_bytes = slot;
    c->mem_bytes = n_slots * slot;
    c->mem = fault_hit(FAULT_ALLOC) ? MAP_FAILED
                                    : mmap(NULL, c->mem_bytes, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (c->mem == MAP_FAILED) {
        c->mem = NULL;
        goto oom;
    }
    madvise(c->mem, c->mem_bytes, MADV_HUGEPAGE);
    size_t n_keys = (size_t)c->n_layer * (size_t)c->n_expert;
    c->where = malloc(n_keys * sizeof(*c->where));
    c->slot_key = malloc(n_slots * sizeof(*c->slot_key));
    c->slot_used = calloc(n_slots, sizeof(*c->slot_used));
    c->slot_pin = calloc(n_slots, sizeof(*c->slot_pin));
    c->slot_mat = calloc(n_slots * 3, sizeof(*c->slot_mat));
    c->reads = calloc(3 * EC_MAX_FETCH, sizeof(*c->reads));
    c->io = threadpool_new(n_io_threads > 0 ? n_io_threads : 8);
    if (!c->where || !c->slot_key || !c->slot_used || !c->slot_pin || !c->slot_mat || !c->reads ||
        !c->io)
        goto oom;
    threadpool_set_spin(c->io, 0);
    for (size_t i = 0; i < n_keys; i++)
        c->where[i] = -1;
    for (size_t s = 0; s < n_slots; s++)
        c->slot_key[s] = -1;
    c->epoch = 1;
    c->stats.n_slots = c->n_slots;
    c->stats.slot_bytes = slot;
    return c;
oom:
    err_set(err, err_len, "expert_cache: out of memory for %zu slots of %zu bytes", n_slots, slot);
    expert_cache_free(c);
    return NULL;
}

void expert_cache_free(struct expert_cache *c) {
    if (!c)
        return;
    threadpool_free(c->io);
    if (c->mem)
        munmap(c->mem, c->mem_bytes);
    if (c->dio_fd >= 0)
        close(c->dio_fd);
    free(c->where);
    free(c->slot_key);
    free(c->slot_used);
    free(c->slot_pin);
    free(c->slot_mat);
    free(c->reads);
    free(c);
}

/* Reads [off, off + n) of the file into dst exactly (buffered), retrying short reads. */
static int ec_pread_all(int fd, uint8_t *dst, uint64_t off, uint64_t n) {
    while (n > 0) {
        ssize_t got = pread(fd, dst, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0)
            return -EIO; /* the file ended early: it shrank since it was opened */
        dst += got;
        off += (uint64_t)got;
        n -= (uint64_t)got;
    }
    return 0;
}

/* One slice: a direct read of its aligned superset into the slot's region (the slice then starts
 * off % EC_ALIGN bytes in), or a buffered read when direct I/O is refused. */
static void ec_read_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    struct expert_cache *c = ctx;
    struct ec_read *r = &c->reads[task];
    uint8_t *region = c->mem + (size_t)r->slot * c->slot_bytes + r->region;
    uint64_t start = r->off & ~(uint64_t)(EC_ALIGN - 1);
    uint64_t end = align_up(r->off + r->bytes, EC_ALIGN);
    if (fault_hit(FAULT_READ)) {
        r->rc = -EIO;
        return;
    }
    r->rc = -EINVAL;
    if (c->dio_fd >= 0) {
        uint64_t done = 0;
        r->rc = 0;
        while (start + done < end) {
            ssize_t got = pread(c->dio_fd, region + done, end - start - done, (off_t)(start + done));
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0 || (got % EC_ALIGN) != 0) {
                done += got > 0 ? (uint64_t)got : 0;
                r->rc = got < 0 ? -errno : 0;
                break;
            }
            done += (uint64_t)got;
        }
        if (r->rc == 0 && start + done < r->off + r->bytes)
            r->rc = -EIO; /* short: the file shrank */
    }
    if (r->rc == -EINVAL) /* no direct I/O here: read exactly the slice */
        r->rc = ec_pread_all(c->fd, region + (r->off - start), r->off, r->bytes);
}

/* The least recently used slot not pinned by the current fetch. */
static int32_t ec_victim(const struct expert_cache *c) {
    int32_t best = -1;
    for (int32_t s = 0; s < c->n_slots; s++) {
        if (c->slot_pin[s] == c->epoch)
            continue;
        if (c->slot_key[s] < 0)
            return s;
        if (best < 0 || c->slot_used[s] < c->slot_used[best])
            best = s;
    }
    return best;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Claims a victim slot (unpublished until its reads succeed) and queues the three reads of expert
 * e of layer il into it. Returns the slot or -1 when every slot is pinned. */
static int32_t ec_queue_miss(struct expert_cache *c, int il, int32_t e) {
    int32_t s = ec_victim(c);
    if (s < 0)
        return -1;
    if (c->slot_key[s] >= 0)
        c->where[c->slot_key[s]] = -1;
    c->slot_key[s] = -1;
    c->slot_pin[s] = c->epoch;
    size_t region = 0;
    for (int k = 0; k < 3; k++) {
        const struct weight *w = ec_weight(c->m, il, k);
        uint64_t off = w->tensor->data_off + (uint64_t)e * w->mat_bytes;
        c->reads[c->n_reads++] = (struct ec_read){s, k, off, w->mat_bytes, region, 0};
        c->slot_mat[(size_t)s * 3 + k] =
            c->mem + (size_t)s * c->slot_bytes + region + (off & (EC_ALIGN - 1));
        region += ec_region_bytes(w->mat_bytes);
    }
    return s;
}

int expert_cache_fetch(struct expert_cache *c, int il, const int32_t *ids, int n,
                       const uint8_t *mats[][3]) {
    if (il < 0 || il >= c->n_layer || n < 0 || n > EC_MAX_FETCH || n > c->n_slots)
        return -EINVAL;
    c->epoch++;
    c->n_reads = 0;
    int32_t slots[EC_MAX_FETCH];
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->n_expert)
            return -EINVAL;
        int32_t key = il * c->n_expert + ids[i];
        int32_t s = c->where[key];
        if (s >= 0 || s <= -2) { /* cached, or already queued by this fetch */
            s = s >= 0 ? s : -2 - s;
            c->stats.hits++;
        } else {
            s = ec_queue_miss(c, il, ids[i]);
            if (s < 0)
                return -ENOSPC;
            c->where[key] = -2 - s; /* pending: published after the reads */
            c->stats.misses++;
        }
        c->slot_pin[s] = c->epoch;
        c->slot_used[s] = ++c->tick;
        slots[i] = s;
    }
    int rc = 0;
    if (c->n_reads > 0) {
        double t0 = now_s();
        threadpool_run(c->io, c->n_reads, ec_read_task, c);
        c->stats.read_s += now_s() - t0;
        for (int32_t r = 0; r < c->n_reads; r++) {
            const struct ec_read *rd = &c->reads[r];
            if (rd->rc < 0 && rc == 0)
                rc = rd->rc;
            c->stats.bytes_read += align_up(rd->off + rd->bytes, EC_ALIGN) -
                                   (rd->off & ~(uint64_t)(EC_ALIGN - 1));
        }
    }
    for (int i = 0; i < n; i++) { /* publish the new slots, or forget them on failure */
        int32_t key = il * c->n_expert + ids[i];
        if (c->where[key] <= -2) {
            int32_t s = -2 - c->where[key];
            c->where[key] = rc == 0 ? s : -1;
            c->slot_key[s] = rc == 0 ? key : -1;
        }
        for (int k = 0; k < 3; k++)
            mats[i][k] = c->slot_mat[(size_t)slots[i] * 3 + k];
    }
    return rc;
}

void expert_cache_get_stats(const struct expert_cache *c, struct expert_cache_stats *out) {
    *out = c->stats;
}
