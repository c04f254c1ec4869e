/* test_experts.c - the Expert Sniper: with experts (or a dense model's FFN) on disk and caches so
 * small that every layer misses and evicts, with prefetch on and off, through io_uring and through
 * the pread threads, logits are bit-identical to the all-in-RAM run (prefill and decode); a read
 * fault or a file that shrank fails the step cleanly and the next run is exact again; a budget
 * below one token's experts of a layer is refused with the minimum; several sequences in one
 * step stream exactly too; gpt-oss's experts (Q8_0, and MXFP4 as the published files, with their
 * resident bias rows) likewise; the cache and the KV pages share one room, the cache shrinking as
 * the sequences grow and growing as they are cut back, exactly and with the resident set's peak
 * within the room; the bytes read are the experts' aligned reads, to the byte; a split model
 * (three shards, qwen3moe and gpt-oss) gives the single file's logits in RAM and streamed. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "expert_cache.h"
#include "fault.h"
#include "harness.h"
#include "model.h"
#include "ops.h"
#include "quant.h"

/* The generated model at path (made on first use, from sniper-mkmodel args), or NULL. */
static const char *model_once(char *path, size_t len, const char *name, const char *args) {
    if (!path[0] && test_make_model(path, len, name, args) < 0)
        path[0] = '\0';
    return path[0] ? path : NULL;
}

static const char *moe_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts.gguf", "--preset tiny --types q4_k_m --seed 17");
}

static const char *dense_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-dense.gguf",
                      "--preset tiny-dense --types q4_k_m --seed 5");
}

/* Qwen3.5's hybrid layers: Gated DeltaNet and gated attention, routed experts and a resident shared
 * expert; and its dense twin. */
static const char *qwen35moe_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-35moe.gguf",
                      "--preset tiny-qwen35moe --types q4_k_m --seed 19");
}

static const char *qwen35_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-35.gguf",
                      "--preset tiny-qwen35 --types q4_k_m --seed 29");
}

/* Twice the tiny preset's layers: one token's lookups (8 layers x 4) outnumber the smallest cache
 * (one layer's 16 experts), the case of a 2 GiB budget on the 30B model. */
static const char *deep_moe_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-deep.gguf",
                      "--preset tiny --n-layer 8 --types q4_k_m --seed 23");
}

/* The low-bit types' expert slices: Q3_K_M's Q3_K and Q4_K experts (110- and 144-byte blocks),
 * and MXFP4_MOE's 17-byte MXFP4 blocks, whose slices start at no particular alignment. */
static const char *q3_k_m_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-q3km.gguf",
                      "--preset tiny --n-ff-exp 256 --types q3_k_m --seed 31");
}

static const char *mxfp4_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-mxfp4.gguf",
                      "--preset tiny --types mxfp4_moe --seed 37");
}

/* Grid i-quant experts (expert FFN 256 wide, so no row falls back to another type): IQ2_S under
 * the IQ2_M mix, IQ3_XXS under IQ3_XXS. */
static const char *iq2_m_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-iq2_m.gguf",
                      "--preset tiny --types iq2_m --n-ff-exp 256 --seed 31");
}

static const char *iq3_xxs_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-iq3_xxs.gguf",
                      "--preset tiny --types iq3_xxs --n-ff-exp 256 --seed 37");
}

/* gpt-oss: biased router and experts, the clamped SwiGLU, sliding-window layers. */
/* The tiny gemma4 (26B-A4B family): fused gate_up experts, read as one slice each. */
static const char *gemma4_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-gemma4.gguf",
                      "--preset tiny-gemma4 --types q4_k_m --seed 41");
}

/* The tiny gemma4 with per-layer embeddings (E2B / E4B family): dense, double-wide FFNs in its
 * shared-KV layers, the per-layer table on disk with the FFNs. */
static const char *gemma4_ple_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-gemma4-ple.gguf",
                      "--preset tiny-gemma4-ple --types q4_k_m --seed 43");
}

static const char *gptoss_model(void) {
    static char path[1024];
    return model_once(path, sizeof(path), "experts-oss.gguf",
                      "--preset tiny-gpt-oss --types q8_0 --seed 31");
}

/* The MXFP4 fixture (tests/fixtures/gpt-oss: llama-quantize's MXFP4_MOE of the tiny model), or
 * NULL with a loud skip when this build has no MXFP4 kernels. */
static const char *gptoss_mxfp4_model(void) {
    if (!quant_kernels(QTYPE_MXFP4)) {
        test_skip("this build has no MXFP4 kernels: MXFP4 experts NOT streamed");
        return NULL;
    }
    return "tests/fixtures/gpt-oss/models/tiny-gpt-oss-mxfp4_moe.gguf";
}

enum { N_PROMPT = 40, N_GEN = 8 };

/* Prompt logits (all rows) then N_GEN greedy decode steps' logits, into out. */
static int run_with(struct model *m, struct expert_cache *c, bool prefetch, float *out) {
    char err[256];
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 16;
    ep.n_threads = 2;
    ep.prefetch = prefetch ? ENGINE_PREFETCH_ALWAYS : ENGINE_PREFETCH_OFF;
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    if (!e)
        return -ENOMEM;
    engine_set_experts(e, c);
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        ids[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)m->hp.n_vocab);
    int rc = engine_eval(e, 0, ids, N_PROMPT, out, true);
    for (int s = 0; rc == 0 && s < N_GEN; s++) {
        const float *last = out + (size_t)(N_PROMPT - 1 + s) * V;
        int32_t best = ops_argmax(last, (int64_t)V);
        rc = engine_eval(e, 0, &best, 1, out + (size_t)(N_PROMPT + s) * V, false);
    }
    engine_free(e);
    return rc;
}

static int run(struct model *m, struct expert_cache *c, float *out) {
    return run_with(m, c, true, out);
}

/* The model opened twice, all in RAM and with experts on disk, and the all-in-RAM logits. */
struct pair {
    struct model *ram, *disk;
    float *want, *got; /* [N_PROMPT + N_GEN][n_vocab] */
    size_t bytes;      /* of want and of got */
};

static bool pair_open_path(struct pair *p, const char *path) {
    memset(p, 0, sizeof(*p));
    char err[256] = "";
    if (!path)
        return false;
    p->ram = model_load(path, err, sizeof(err));
    p->disk = model_open(path, true, err, sizeof(err));
    CHECK_MSG(p->ram && p->disk, "%s", err);
    if (!p->ram || !p->disk)
        return false;
    p->bytes = (size_t)(N_PROMPT + N_GEN) * (size_t)p->ram->hp.n_vocab * sizeof(float);
    p->want = malloc(p->bytes);
    p->got = malloc(p->bytes);
    CHECK(p->want && p->got);
    CHECK_EQ_INT(run(p->ram, NULL, p->want), 0);
    return p->want && p->got && test_failures() == 0;
}

static bool pair_open(struct pair *p) {
    return pair_open_path(p, moe_model());
}

static void pair_close(struct pair *p) {
    free(p->want);
    free(p->got);
    model_free(p->ram);
    model_free(p->disk);
}

/* The bytes a read of expert e of layer il takes from the file: its gate, up and down matrices
 * (gate and up as one slice where they are fused: gemma4), each as the superset of its slice
 * aligned to EXPERT_IO_ALIGN (direct I/O) at both ends. */
static uint64_t expert_read_bytes(const struct model *m, int il, int32_t e) {
    const struct model_layer *l = &m->layers[il];
    const struct weight *w[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
    if (l->ffn_gate_up_exps.tensor) {
        w[0] = &l->ffn_gate_up_exps;
        w[1] = NULL;
    }
    if (m->hp.n_expert == 0) {
        w[0] = &l->ffn_gate;
        w[1] = &l->ffn_up;
        w[2] = &l->ffn_down;
    }
    uint64_t b = 0;
    for (int k = 0; k < 3; k++) {
        if (!w[k])
            continue;
        const uint64_t off = w[k]->tensor->data_off + (uint64_t)e * w[k]->mat_bytes;
        const uint64_t first = off / EXPERT_IO_ALIGN * EXPERT_IO_ALIGN;
        const uint64_t last = (off + w[k]->mat_bytes + EXPERT_IO_ALIGN - 1) / EXPERT_IO_ALIGN *
                              EXPERT_IO_ALIGN;
        b += last - first;
    }
    return b;
}

/* The fewest and the most bytes a read of any one expert of m takes, into lo and hi. */
static void expert_read_range(const struct model *m, uint64_t *lo, uint64_t *hi) {
    *lo = UINT64_MAX;
    *hi = 0;
    for (int il = 0; il < m->hp.n_layer; il++)
        for (int32_t e = 0; e < expert_cache_experts_per_layer(m); e++) {
            const uint64_t b = expert_read_bytes(m, il, e);
            *lo = b < *lo ? b : *lo;
            *hi = b > *hi ? b : *hi;
        }
}

static struct expert_cache *cache_new(struct model *m, size_t bytes, enum expert_io_kind io) {
    char err[256] = "";
    struct expert_cache_options o = {.io = io, .io_depth = 4};
    struct expert_cache *c = expert_cache_new(m, bytes, &o, err, sizeof(err));
    CHECK_MSG(c != NULL, "%s", err);
    return c;
}

/* Runs the pair's disk model through a cache of the given bytes and compares every logit. */
static void check_exact(struct pair *p, size_t bytes, enum expert_io_kind io, bool prefetch,
                        struct expert_cache_stats *st) {
    struct expert_cache *c = cache_new(p->disk, bytes, io);
    memset(st, 0, sizeof(*st));
    if (!c)
        return;
    memset(p->got, 0, p->bytes);
    CHECK_EQ_INT(run_with(p->disk, c, prefetch, p->got), 0);
    expert_cache_get_stats(c, st);
    CHECK_MSG(memcmp(p->want, p->got, p->bytes) == 0,
              "%d slots, %s, prefetch %s: logits differ from the all-in-RAM run", st->n_slots,
              st->backend, prefetch ? "on" : "off");
    uint64_t hits = 0, misses = 0;
    for (int il = 0; il < p->disk->hp.n_layer; il++) {
        uint64_t h, m;
        expert_cache_layer_stats(c, il, &h, &m);
        hits += h;
        misses += m;
    }
    CHECK(hits == st->hits && misses == st->misses);
    /* every read is an expert's three aligned supersets (the exact sum: bytes_read_exact) */
    uint64_t lo, hi;
    const uint64_t loads = st->misses + st->prefetch_issued;
    expert_read_range(p->disk, &lo, &hi);
    CHECK_MSG(st->bytes_read % EXPERT_IO_ALIGN == 0 && st->bytes_read >= loads * lo &&
                  st->bytes_read <= loads * hi,
              "%llu bytes read for %llu experts of %llu to %llu bytes",
              (unsigned long long)st->bytes_read, (unsigned long long)loads,
              (unsigned long long)lo, (unsigned long long)hi);
    CHECK(st->prefetch_used <= st->prefetch_issued);
    if (!prefetch && p->disk->hp.n_expert > 0)
        CHECK(st->prefetch_issued == 0);
    fprintf(stderr, "  %3d slots %-8s prefetch %-3s: hits %4llu misses %4llu prefetch %llu/%llu\n",
            st->n_slots, st->backend, prefetch ? "on" : "off", (unsigned long long)st->hits,
            (unsigned long long)st->misses, (unsigned long long)st->prefetch_used,
            (unsigned long long)st->prefetch_issued);
    expert_cache_free(c);
}

/* The split twin (sniper-mkmodel --split-max-size split_size, three shards) of the model that
 * name_args makes: opened from its second shard, it must span three files with streamed tensors
 * in more than one of them, and give the single file's logits bit for bit, in RAM and streamed
 * through the smallest cache on both I/O backends. */
static void check_split_is_exact(const char *single, const char *name, const char *args,
                                 const char *split_size) {
    char split_args[512], path[1024], first[1024];
    struct pair p;
    struct model *ram = NULL, *disk = NULL;
    float *got = NULL;
    if (!pair_open_path(&p, single))
        goto out;
    snprintf(split_args, sizeof(split_args), "%s --split-max-size %s", args, split_size);
    if (test_make_model(path, sizeof(path), name, split_args) < 0)
        goto out;
    snprintf(first, sizeof(first), "%.*s-00002-of-00003.gguf", (int)(strlen(path) - 5), path);
    char err[256] = "";
    ram = model_load(first, err, sizeof(err));
    CHECK_MSG(ram != NULL, "%s", err);
    disk = model_open(first, true, err, sizeof(err));
    CHECK_MSG(disk != NULL, "%s", err);
    got = malloc(p.bytes);
    CHECK(got != NULL);
    if (!ram || !disk || !got)
        goto out;
    CHECK_EQ_INT(ram->gguf->n_shards, 3);
    bool streamed_in[3] = {false, false, false};
    for (uint64_t i = 0; i < ram->gguf->n_tensors; i++)
        if (model_tensor_streamed(&ram->hp, ram->gguf->tensors[i].name))
            streamed_in[ram->gguf->tensors[i].shard] = true;
    CHECK_MSG(streamed_in[1] && (streamed_in[0] || streamed_in[2]),
              "the streamed tensors lie in one shard: the split proves nothing");
    CHECK_EQ_INT(run(ram, NULL, got), 0);
    CHECK_MSG(memcmp(p.want, got, p.bytes) == 0, "split model in RAM: logits differ");
    const size_t smallest = expert_cache_slot_bytes(disk) * (size_t)disk->hp.n_expert_used;
    for (int io = 0; io < 2; io++) {
        struct expert_cache *c = cache_new(disk, smallest, io ? EXPERT_IO_THREADS : EXPERT_IO_URING);
        if (!c)
            continue;
        memset(got, 0, p.bytes);
        CHECK_EQ_INT(run(disk, c, got), 0);
        CHECK_MSG(memcmp(p.want, got, p.bytes) == 0, "split model streamed (%s): logits differ",
                  io ? "threads" : "io_uring");
        expert_cache_free(c);
    }
out:
    free(got);
    model_free(ram);
    model_free(disk);
    pair_close(&p);
}

static void test_split_streaming_is_exact(void) {
    check_split_is_exact(moe_model(), "experts-split.gguf",
                         "--preset tiny --types q4_k_m --seed 17", "2M");
}

static void test_gptoss_split_streaming_is_exact(void) {
    check_split_is_exact(gptoss_model(), "experts-oss-split.gguf",
                         "--preset tiny-gpt-oss --types q8_0 --seed 31", "1M");
}

/* all: every cache size, both I/O backends, prefetch off and on; else (another block format
 * through the same path) the smallest cache and half the experts, both backends, prefetch on. */
static void check_moe_streaming(const char *path, bool all) {
    struct pair p;
    if (!pair_open_path(&p, path))
        goto out;
    struct model *disk = p.disk;
    CHECK(disk->resident_bytes < p.ram->resident_bytes); /* MXFP4 experts are a small part */
    const size_t slot = expert_cache_slot_bytes(disk), ne = (size_t)disk->hp.n_expert;
    const size_t k = (size_t)disk->hp.n_expert_used;
    /* the minimum (one token's experts of a layer: a batch's experts come in groups, each group's
     * lookup evicting the last's), a few more slots than that, one layer's experts (every layer
     * evicts, nothing left for prefetch), a few slots more, and half the experts */
    const size_t sizes[5] = {slot * k, slot * (k + 3), slot * ne, slot * (ne + 3),
                             slot * ne * (size_t)disk->hp.n_layer / 2};
    for (int i = 0; i < 5; i++)
        for (int io = 0; io < 2; io++)
            for (int pf = all ? 0 : 1; pf < 2 && (all || i == 0 || i == 4); pf++) {
                struct expert_cache_stats st;
                check_exact(&p, sizes[i], io ? EXPERT_IO_THREADS : EXPERT_IO_URING, pf, &st);
                CHECK(st.misses > (uint64_t)st.n_slots); /* evictions happened */
                if (i == 4)
                    CHECK(st.hits > 0);
                if (i > 2 && pf)
                    CHECK(st.prefetch_issued > 0 && st.prefetch_used > 0);
            }
out:
    pair_close(&p);
}

static void test_streaming_is_exact(void) { check_moe_streaming(moe_model(), true); }
static void test_qwen35moe_streaming_is_exact(void) {
    check_moe_streaming(qwen35moe_model(), true);
}
static void test_q3_k_m_streaming_is_exact(void) { check_moe_streaming(q3_k_m_model(), false); }
static void test_mxfp4_streaming_is_exact(void) { check_moe_streaming(mxfp4_model(), false); }
static void test_iq2_m_streaming_is_exact(void) { check_moe_streaming(iq2_m_model(), false); }
static void test_iq3_xxs_streaming_is_exact(void) {
    check_moe_streaming(iq3_xxs_model(), false);
}
static void test_gptoss_streaming_is_exact(void) { check_moe_streaming(gptoss_model(), true); }
static void test_gemma4_streaming_is_exact(void) { check_moe_streaming(gemma4_model(), true); }
static void test_gptoss_mxfp4_streaming_is_exact(void) {
    const char *path = gptoss_mxfp4_model();
    if (path)
        check_moe_streaming(path, false);
}

/* A dense model's FFN streams as one expert per layer, exactly; the next layer's FFN (after the
 * last, the first's for the next step) is always the right guess. */
static void check_dense_streaming(const char *path) {
    struct pair p;
    if (!pair_open_path(&p, path))
        goto out;
    CHECK(p.disk->resident_bytes < p.ram->resident_bytes);
    const size_t slot = expert_cache_slot_bytes(p.disk);
    for (size_t n_slots = 1; n_slots <= 3; n_slots++) {
        struct expert_cache_stats st;
        check_exact(&p, slot * n_slots, EXPERT_IO_URING, true, &st);
        CHECK_EQ_INT(st.n_slots, (int64_t)n_slots);
        if (n_slots > 1) /* only the first layer of the first step misses */
            CHECK(st.misses == 1 && st.prefetch_used + 1 >= st.prefetch_issued);
    }
out:
    pair_close(&p);
}

static void test_dense_streaming_is_exact(void) { check_dense_streaming(dense_model()); }

/* Gemma 4 E2B / E4B: the per-layer table stays on disk with the FFNs (its rows read per token, as
 * token_embd's are), so the resident weights shrink by it too, and the streamed run is the
 * all-in-RAM one bit for bit. */
static void test_gemma4_ple_streaming_is_exact(void) {
    struct pair p;
    if (!pair_open_path(&p, gemma4_ple_model()))
        goto out;
    uint64_t ffn = 0;
    for (uint64_t i = 0; i < p.ram->gguf->n_tensors; i++)
        if (model_tensor_streamed(&p.ram->hp, p.ram->gguf->tensors[i].name))
            ffn += p.ram->gguf->tensors[i].n_bytes;
    const uint64_t table = p.ram->ple_embd.tensor->n_bytes;
    CHECK(p.disk->ple_on_disk && !p.ram->ple_on_disk);
    /* each range read is aligned outwards: up to 2 x 4 KiB more per gap left by a tensor */
    const uint64_t slack = p.ram->gguf->n_tensors * 8192;
    CHECK_MSG(p.disk->resident_bytes + ffn + table <= p.ram->resident_bytes + slack,
              "resident %llu of %llu: the per-layer table (%llu) and FFNs (%llu) were read",
              (unsigned long long)p.disk->resident_bytes,
              (unsigned long long)p.ram->resident_bytes, (unsigned long long)table,
              (unsigned long long)ffn);
    pair_close(&p);
    check_dense_streaming(gemma4_ple_model());
    return;
out:
    pair_close(&p);
}
static void test_qwen35_streaming_is_exact(void) { check_dense_streaming(qwen35_model()); }

/* A cache smaller than one token's lookups: LRU would evict each expert before its next use and
 * hit nothing (every key comes back only after all the other layers' lookups, more keys than the
 * cache holds); the cache's LIRS keeps the keys with short reuse distances, and stays exact. */
static void test_small_cache_hits(void) {
    struct pair p;
    if (!pair_open_path(&p, deep_moe_model()))
        goto out;
    const int32_t per_token = p.disk->hp.n_layer * p.disk->hp.n_expert_used;
    const size_t slot = expert_cache_slot_bytes(p.disk), ne = (size_t)p.disk->hp.n_expert;
    CHECK((int32_t)ne + 4 < per_token);
    for (int io = 0; io < 2; io++)
        for (int pf = 0; pf < 2; pf++) {
            struct expert_cache_stats st;
            check_exact(&p, slot * (ne + 4), io ? EXPERT_IO_THREADS : EXPERT_IO_URING, pf, &st);
            CHECK(st.n_slots < per_token);
            CHECK_MSG(st.hits > st.prefetch_used, "hits %llu, prefetched %llu",
                      (unsigned long long)st.hits, (unsigned long long)st.prefetch_used);
        }
out:
    pair_close(&p);
}

/* Frecency, by hand: 16 slots (one token's lookups of the tiny model), lookups of 4 experts in
 * cycles of layers 0 and 1. After cycle 2, layer 0's experts 0-3 were looked up 3 times (score
 * 2 x 3 + cycle 2 = 8) and layer 1's 0-3, 4-7, 8-11 once in cycles 0, 1, 2 (scores 2, 3, 4); cycle 3
 * evicts layer 1's 0-3 for layer 0's 4-7 (score 5), then layer 1's 4-7 for its 12-15 (5); in cycle 4
 * layer 0's 8-11 evict layer 1's 8-11 (4), where LRU would evict layer 0's 0-3, the least recent;
 * so cycle 5's lookup of layer 0's 0-3 hits. */
static void test_frecency_by_hand(void) {
    char err[256] = "";
    const char *path = moe_model();
    struct model *m = path ? model_open(path, true, err, sizeof(err)) : NULL;
    CHECK_MSG(m != NULL, "%s", err);
    if (!m)
        return;
    struct expert_cache *c = cache_new(m, expert_cache_slot_bytes(m) * 16, EXPERT_IO_URING);
    if (!c)
        goto out;
    struct expert_cache_stats st;
    expert_cache_get_stats(c, &st);
    CHECK_STR(st.eviction, "frecency");
    static const struct {
        int il, first; /* experts first .. first + 3 */
    } seq[] = {{0, 0}, {1, 0}, {0, 0}, {1, 4}, {0, 0}, {1, 8}, {0, 4}, {1, 12}, {0, 8}, {0, 0}};
    for (size_t k = 0; k < sizeof(seq) / sizeof(seq[0]); k++) {
        if (k == 9) { /* before cycle 5: what cycle 4 kept */
            for (int32_t e = 0; e < 16; e++) {
                bool want0 = e < 12, want1 = e >= 12;
                CHECK_MSG(expert_cache_resident(c, 0, e) == want0, "layer 0 expert %d", e);
                CHECK_MSG(expert_cache_resident(c, 1, e) == want1, "layer 1 expert %d", e);
            }
        }
        const int32_t ids[4] = {seq[k].first, seq[k].first + 1, seq[k].first + 2,
                                seq[k].first + 3};
        CHECK_EQ_INT(expert_cache_begin(c, seq[k].il, ids, 4), 0);
        for (int i = 0; i < 4; i++) {
            const uint8_t *mats[3];
            bool ready = false;
            CHECK_EQ_INT(expert_cache_get(c, i, mats, true, &ready), 0);
            CHECK(ready);
        }
    }
    expert_cache_get_stats(c, &st);
    CHECK_EQ_INT(st.hits, 12);
    CHECK_EQ_INT(st.misses, 28);
    expert_cache_free(c);
out:
    model_free(m);
}

/* bytes_read counts bytes, exactly: every expert of every layer looked up once in a cache that
 * holds them all (four of layer 1's read ahead first, on a guess), then again (all hits), gives
 * the sum of each expert's three aligned supersets and not a byte more. The Q3_K_M experts'
 * slices start at no particular alignment, so each expert's supersets differ. */
static void test_bytes_read_exact(void) {
    static const char *(*const models[])(void) = {moe_model, q3_k_m_model};
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        char err[256] = "";
        const char *path = models[mi]();
        struct model *m = path ? model_open(path, true, err, sizeof(err)) : NULL;
        CHECK_MSG(m != NULL, "%s", err);
        if (!m)
            continue;
        const int32_t E = m->hp.n_expert, L = m->hp.n_layer;
        struct expert_cache *c =
            cache_new(m, expert_cache_slot_bytes(m) * (size_t)E * (size_t)L, EXPERT_IO_URING);
        uint64_t want = 0, lo, hi;
        int32_t ids[256];
        CHECK(E <= 256);
        for (int32_t e = 0; e < E && e < 256; e++)
            ids[e] = e;
        expert_read_range(m, &lo, &hi);
        CHECK_MSG(lo != hi, "every expert reads %llu bytes: the sum would not tell them apart",
                  (unsigned long long)lo);
        for (int pass = 0; c && pass < 2; pass++)
            for (int il = 0; il < L; il++) {
                if (pass == 0 && il == 1) {
                    CHECK_EQ_INT(expert_cache_prefetch(c, 1, ids, 4), 4);
                    while (expert_cache_wait(c))
                        ;
                }
                CHECK_EQ_INT(expert_cache_begin(c, il, ids, E), 0);
                for (int32_t i = 0; i < E; i++) {
                    const uint8_t *mats[3];
                    bool ready = false;
                    CHECK_EQ_INT(expert_cache_get(c, i, mats, true, &ready), 0);
                    CHECK(ready);
                    want += pass == 0 ? expert_read_bytes(m, il, i) : 0;
                }
            }
        struct expert_cache_stats st;
        if (c) {
            expert_cache_get_stats(c, &st);
            CHECK_MSG(st.bytes_read == want, "%s: bytes_read %llu, the experts' supersets %llu",
                      path, (unsigned long long)st.bytes_read, (unsigned long long)want);
            CHECK_EQ_INT(st.misses, (int64_t)L * E - 4);
            CHECK_EQ_INT(st.hits, (int64_t)L * E + 4);
            CHECK(st.prefetch_issued == 4 && st.prefetch_used == 4);
        }
        expert_cache_free(c);
        model_free(m);
    }
}

/* A read that fails half way through a hybrid model's step leaves its recurrent state half
 * updated: the sequence goes back to its newest checkpoint, and what is fed again from there is
 * bit-identical to the all-in-RAM run. */
static void test_hybrid_fault_resumes(void) {
    struct pair p;
    if (!pair_open_path(&p, qwen35moe_model()))
        goto out;
    const size_t V = (size_t)p.disk->hp.n_vocab;
    struct expert_cache *c = cache_new(p.disk, expert_cache_slot_bytes(p.disk) *
                                                   (size_t)expert_cache_min_slots(p.disk),
                                       EXPERT_IO_URING);
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 16;
    ep.n_threads = 2;
    ep.checkpoint_every = 8;
    ep.prefetch = ENGINE_PREFETCH_OFF;
    char err[256];
    struct engine *e = c ? engine_new(p.disk, &ep, err, sizeof(err)) : NULL;
    if (!e)
        goto free_cache;
    engine_set_experts(e, c);
    int32_t seq[N_PROMPT + N_GEN]; /* the prompt of run_with, then the greedy tokens */
    for (int i = 0; i < N_PROMPT; i++)
        seq[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)p.disk->hp.n_vocab);
    for (int g = 0; g < N_GEN; g++)
        seq[N_PROMPT + g] = ops_argmax(p.want + (size_t)(N_PROMPT - 1 + g) * V, (int64_t)V);
    CHECK_EQ_INT(engine_eval(e, 0, seq, 36, NULL, false), 0); /* checkpoints at 8 .. 32 */
    fault_arm(FAULT_READ, 6); /* after the 4 embedding rows: an expert of an early layer */
    CHECK_EQ_INT(engine_eval(e, 0, seq + 36, 4, NULL, false), -EIO);
    fault_arm(FAULT_READ, 0);
    CHECK_EQ_INT(engine_n_past(e, 0), 32);
    CHECK_EQ_INT(engine_eval(e, 0, seq + 32, 12, p.got, true), 0);
    CHECK_MSG(memcmp(p.got, p.want + 32 * V, 12 * V * sizeof(float)) == 0,
              "resumed from a checkpoint, the logits differ from the all-in-RAM run");
    engine_free(e);
free_cache:
    expert_cache_free(c);
out:
    pair_close(&p);
}

/* A failed read fails the step with -EIO and leaves nothing cached that was not read. */
static void test_read_fault(void) {
    struct pair p;
    if (!pair_open(&p))
        goto out;
    const size_t bytes = expert_cache_slot_bytes(p.disk) * (size_t)p.disk->hp.n_expert * 2;
    for (int io = 0; io < 2; io++) {
        struct expert_cache *c = cache_new(p.disk, bytes, io ? EXPERT_IO_THREADS : EXPERT_IO_URING);
        if (!c)
            continue;
        fault_arm(FAULT_READ, 5); /* without prefetch every read is needed: the step fails */
        CHECK_EQ_INT(run_with(p.disk, c, false, p.got), -EIO);
        fault_arm(FAULT_READ, 0);
        CHECK_EQ_INT(run(p.disk, c, p.got), 0);
        CHECK(memcmp(p.want, p.got, p.bytes) == 0);
        /* with prefetch the failed read may be a guess nobody needs: then the run succeeds, and
         * either way nothing is computed on a slot that was not read */
        for (long nth = 1; nth < 40; nth += 7) {
            fault_arm(FAULT_READ, nth);
            memset(p.got, 0, p.bytes);
            int rc = run(p.disk, c, p.got);
            fault_arm(FAULT_READ, 0);
            CHECK_MSG(rc == -EIO || (rc == 0 && memcmp(p.want, p.got, p.bytes) == 0),
                      "fault at read %ld: rc %d", nth, rc);
        }
        CHECK_EQ_INT(run(p.disk, c, p.got), 0);
        CHECK(memcmp(p.want, p.got, p.bytes) == 0);
        expert_cache_free(c);
    }
out:
    pair_close(&p);
}

static int copy_file(const char *from, const char *to) {
    size_t n;
    void *bytes = test_read_file(from, &n);
    int rc = bytes ? test_write_file(to, bytes, n) : -1;
    free(bytes);
    return rc;
}

/* The model file shrinks under a running engine: the step that needs a vanished expert fails with
 * -EIO (never computes on what was not read), and once the file is whole again runs are exact. */
static void test_file_shrinks(void) {
    struct pair p;
    if (!pair_open(&p))
        goto out;
    char path[1024];
    snprintf(path, sizeof(path), "%s/shrinking.gguf", test_tmpdir());
    CHECK(copy_file(p.disk->path, path) == 0);
    char err[256] = "";
    struct model *m = model_open(path, true, err, sizeof(err));
    CHECK_MSG(m != NULL, "%s", err);
    if (!m)
        goto out;
    const struct weight *w = &m->layers[0].ffn_gate_exps; /* the first stacked experts */
    const size_t min = expert_cache_slot_bytes(m) * (size_t)m->hp.n_expert;
    for (int io = 0; io < 2; io++) {
        struct expert_cache *c = cache_new(m, min, io ? EXPERT_IO_THREADS : EXPERT_IO_URING);
        if (!c)
            continue;
        CHECK(truncate(path, (off_t)(w->tensor->data_off + w->mat_bytes / 2)) == 0);
        memset(p.got, 0, p.bytes);
        CHECK_EQ_INT(run(m, c, p.got), -EIO);
        CHECK(copy_file(p.disk->path, path) == 0); /* whole again (same bytes) */
        CHECK_EQ_INT(run(m, c, p.got), 0);
        CHECK(memcmp(p.want, p.got, p.bytes) == 0);
        expert_cache_free(c);
    }
    model_free(m);
    unlink(path);
out:
    pair_close(&p);
}

/* expert_cache_rehome: the slots moved into memory a caller lends (a GPU's, on unified memory)
 * keep their experts (the next run hits and gives the all-in-RAM bits), reads land there, and
 * they come back into the cache's own memory the same; memory too small or misaligned for direct
 * reads is refused. */
static void test_rehome(void) {
    struct pair p;
    if (!pair_open(&p))
        goto out;
    const size_t min = expert_cache_slot_bytes(p.disk) * (size_t)p.disk->hp.n_expert;
    struct expert_cache *c = cache_new(p.disk, min, EXPERT_IO_URING);
    const size_t bytes = c ? expert_cache_mem_bytes(c) : 0;
    uint8_t *lent = c ? aligned_alloc(EXPERT_IO_ALIGN, bytes + EXPERT_IO_ALIGN) : NULL;
    if (!c || !lent)
        goto done;
    CHECK_EQ_INT(run(p.disk, c, p.got), 0);
    CHECK_EQ_INT(expert_cache_rehome(c, lent, bytes - 1), -EINVAL);
    CHECK_EQ_INT(expert_cache_rehome(c, lent + 512, bytes), -EINVAL);
    struct expert_cache_stats before, after;
    expert_cache_get_stats(c, &before);
    CHECK_EQ_INT(expert_cache_rehome(c, lent, bytes), 0);
    memset(p.got, 0, p.bytes);
    CHECK_EQ_INT(run(p.disk, c, p.got), 0);
    CHECK(memcmp(p.want, p.got, p.bytes) == 0);
    expert_cache_get_stats(c, &after);
    CHECK_MSG(after.hits > before.hits, "no hit after the move: %llu hits before, %llu after",
              (unsigned long long)before.hits, (unsigned long long)after.hits);
    const int32_t ids[1] = {1};
    const uint8_t *mats[3] = {NULL, NULL, NULL};
    CHECK_EQ_INT(expert_cache_begin(c, 0, ids, 1), 0);
    CHECK_EQ_INT(expert_cache_get(c, 0, mats, true, NULL), 0);
    for (int k = 0; k < 3; k++)
        CHECK_MSG(mats[k] >= lent && mats[k] < lent + bytes, "matrix %d not in the lent memory",
                  k);
    CHECK_EQ_INT(expert_cache_rehome(c, NULL, 0), 0);
    memset(lent, 0xff, bytes); /* nothing of the cache may still be read from here */
    memset(p.got, 0, p.bytes);
    CHECK_EQ_INT(run(p.disk, c, p.got), 0);
    CHECK(memcmp(p.want, p.got, p.bytes) == 0);
done:
    expert_cache_free(c);
    free(lent);
out:
    pair_close(&p);
}

/* The lossy flags are off by default (the exact tests above run with the defaults); on, they run,
 * change the logits, and out-of-range values are refused. */
static void test_lossy_flags(void) {
    struct pair p;
    if (!pair_open(&p))
        goto out;
    char err[256] = "";
    struct engine_params ep = engine_params_default();
    CHECK(ep.moe_top_k == 0 && ep.cache_bias == 0.0f);
    ep.moe_top_k = p.disk->hp.n_expert_used + 1;
    struct engine *e = engine_new(p.disk, &ep, err, sizeof(err));
    CHECK(e == NULL && strstr(err, "experts per token") != NULL);
    engine_free(e);
    for (int which = 0; which < 2; which++) {
        ep = engine_params_default();
        ep.n_ctx = 128;
        ep.n_batch = 16;
        ep.n_threads = 2;
        if (which == 0)
            ep.moe_top_k = p.disk->hp.n_expert_used - 1;
        else
            ep.cache_bias = 0.3f;
        e = engine_new(p.disk, &ep, err, sizeof(err));
        CHECK_MSG(e != NULL, "%s", err);
        struct expert_cache *c = cache_new(p.disk, expert_cache_slot_bytes(p.disk) * 24,
                                           EXPERT_IO_URING);
        if (e && c) {
            engine_set_experts(e, c);
            int32_t ids[N_PROMPT];
            for (int i = 0; i < N_PROMPT; i++)
                ids[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)p.disk->hp.n_vocab);
            const size_t V = (size_t)p.disk->hp.n_vocab;
            bool differs = false;
            for (int i = 0; i < N_PROMPT; i++) { /* one at a time: the cache fills as it goes */
                CHECK_EQ_INT(engine_eval(e, 0, &ids[i], 1, p.got, false), 0);
                differs |= memcmp(p.got, p.want + (size_t)i * V, V * sizeof(float)) != 0;
            }
            CHECK_MSG(differs, "%s changed nothing", which ? "cache_bias" : "moe_top_k");
        }
        expert_cache_free(c);
        engine_free(e);
    }
out:
    pair_close(&p);
}

static void test_too_small(void) {
    const char *path = moe_model();
    if (!path)
        return;
    char err[256] = "";
    struct model *disk = model_open(path, true, err, sizeof(err));
    CHECK_MSG(disk != NULL, "%s", err);
    if (!disk)
        return;
    size_t slot = expert_cache_slot_bytes(disk);
    CHECK_EQ_INT(expert_cache_min_slots(disk), disk->hp.n_expert_used);
    struct expert_cache *c =
        expert_cache_new(disk, slot * (size_t)(disk->hp.n_expert_used - 1), NULL, err, sizeof(err));
    CHECK(c == NULL);
    CHECK_MSG(strstr(err, "at least") != NULL, "message: %s", err);
    expert_cache_free(c);
    c = expert_cache_new(disk, slot * (size_t)disk->hp.n_expert_used, NULL, err, sizeof(err));
    CHECK_MSG(c != NULL && expert_cache_n_slots(c) == disk->hp.n_expert_used, "%s", err);
    expert_cache_free(c);
    model_free(disk);
}

/* Three sequences of different prompt lengths side by side in one engine, their experts streamed
 * through the smallest cache and a larger one (each step looks up the union of its sequences'
 * experts): every logits row is bit-identical to each sequence run alone all in RAM. */
enum { MS_N = 3, MS_DEC = 5 };

/* Runs the MS_N sequences: prompts all in one call (steps of 16 tokens), then MS_DEC decode
 * steps of all of them; rows into out[s] ([len[s] + MS_DEC][n_vocab]). */
static int run_multi(struct model *m, struct expert_cache *c, int32_t ids[MS_N][N_PROMPT + MS_DEC],
                     const int32_t *len, float **out) {
    char err[256];
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 16;
    ep.n_threads = 2;
    ep.n_seq = MS_N;
    ep.prefetch = ENGINE_PREFETCH_ALWAYS;
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    if (!e)
        return -ENOMEM;
    engine_set_experts(e, c);
    const size_t V = (size_t)m->hp.n_vocab;
    struct engine_part parts[MS_N];
    for (int s = 0; s < MS_N; s++)
        parts[s] = (struct engine_part){.seq = s, .tokens = ids[s], .n = len[s], .logits = out[s],
                                        .all_logits = true};
    int rc = engine_eval_batch(e, parts, MS_N);
    for (int d = 0; rc == 0 && d < MS_DEC; d++) {
        for (int s = 0; s < MS_N; s++)
            parts[s] = (struct engine_part){.seq = s, .tokens = &ids[s][len[s] + d], .n = 1,
                                            .logits = out[s] + (size_t)(len[s] + d) * V};
        rc = engine_eval_batch(e, parts, MS_N);
    }
    engine_free(e);
    return rc;
}

static void check_multi_seq_streaming(const char *path) {
    struct pair p;
    if (!pair_open_path(&p, path))
        goto out;
    const size_t V = (size_t)p.ram->hp.n_vocab;
    const int32_t len[MS_N] = {N_PROMPT, 23, 9};
    int32_t ids[MS_N][N_PROMPT + MS_DEC];
    float *want[MS_N] = {0}, *got[MS_N] = {0};
    bool ok = true;
    for (int s = 0; s < MS_N; s++) {
        for (int i = 0; i < N_PROMPT + MS_DEC; i++)
            ids[s][i] = (int32_t)(((uint32_t)i * 7919u + 131u * (uint32_t)s + 13u) % (uint32_t)V);
        want[s] = malloc(V * (N_PROMPT + MS_DEC) * sizeof(float));
        got[s] = malloc(V * (N_PROMPT + MS_DEC) * sizeof(float));
        ok &= want[s] && got[s];
    }
    for (int s = 0; ok && s < MS_N; s++) { /* each alone, in RAM */
        char err[256];
        struct engine_params ep = engine_params_default();
        ep.n_ctx = 128;
        ep.n_threads = 2;
        struct engine *e = engine_new(p.ram, &ep, err, sizeof(err));
        ok &= e && engine_eval(e, 0, ids[s], len[s] + MS_DEC, want[s], true) == 0;
        engine_free(e);
    }
    CHECK(ok);
    const size_t slot = expert_cache_slot_bytes(p.disk);
    const size_t k = (size_t)p.disk->hp.n_expert_used, ne = (size_t)p.disk->hp.n_expert;
    const size_t sizes[2] = {slot * k, slot * (ne + 3)};
    for (int i = 0; ok && i < 2; i++)
        for (int io = 0; io < 2; io++) {
            struct expert_cache *c = cache_new(p.disk, sizes[i], io ? EXPERT_IO_THREADS
                                                                     : EXPERT_IO_URING);
            if (!c)
                continue;
            CHECK_EQ_INT(run_multi(p.disk, c, ids, len, got), 0);
            for (int s = 0; s < MS_N; s++)
                CHECK_MSG(memcmp(want[s], got[s], V * (size_t)(len[s] + MS_DEC) * 4) == 0,
                          "%zu-byte cache, io %d: sequence %d beside others differs from it "
                          "alone in RAM", sizes[i], io, s);
            expert_cache_free(c);
        }
    for (int s = 0; s < MS_N; s++) {
        free(want[s]);
        free(got[s]);
    }
out:
    pair_close(&p);
}

static void test_multi_seq_streaming(void) { check_multi_seq_streaming(moe_model()); }
static void test_multi_seq_streaming_gptoss(void) { check_multi_seq_streaming(gptoss_model()); }

/* A /proc/self/status figure ("VmHWM", "VmRSS") in bytes, 0 if unknown. */
static uint64_t status_bytes(const char *key) {
    char line[256];
    unsigned long long kib = 0;
    const size_t n = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%llu", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib << 10;
}

/* The kernel takes VmHWM from per-CPU resident-set counters that lag by up to their batches: a
 * peak read back may be off by this much either way (seen: -200 KiB). */
#define PEAK_SLACK ((int64_t)256 << 10)

/* The room the cache and the KV pages share, watched through the kernel's peak of the resident
 * set: start resets the peak (clear_refs 5) and notes what the room has spare now (room minus the
 * slots and the KV pages that may be resident); check asserts that the peak since did not grow
 * past that (a step that wrote its rows before the cache made room for them would), give or take
 * a run of positions reserved but not yet written (counted resident, not touched) and the
 * counters' lag. */
struct room_watch {
    bool on;       /* the kernel let the peak be reset */
    uint64_t base; /* resident set at the reset */
    int64_t spare; /* bytes the room had spare then */
    int64_t run;   /* bytes of one run of KV positions of a sequence (sequence.c's 64) */
    int64_t slack; /* what else the peak may grow by (PEAK_SLACK, or the case's own) */
};

static void room_watch_start(struct room_watch *w, const struct engine *e,
                             const struct expert_cache *c, size_t room) {
    struct expert_cache_stats st;
    expert_cache_get_stats(c, &st);
    w->spare = (int64_t)room - (int64_t)((size_t)st.n_slots * st.slot_bytes) -
               (int64_t)engine_kv_resident_bytes(e);
    const struct engine_kv_shape kv = engine_kv_shape(e);
    w->run = 2 * (int64_t)kv.n_layer * 64 * (int64_t)kv.row_bytes;
    FILE *f = fopen("/proc/self/clear_refs", "w");
    w->on = f && fputs("5", f) >= 0;
    if (f && fclose(f) != 0)
        w->on = false;
    w->base = w->on ? status_bytes("VmHWM") : 0;
    if (!w->on)
        test_skip("/proc/self/clear_refs refused: the peak resident set is NOT checked");
}

/* Returns the peak's growth over the base, and checks it (what: the step, for the message). */
static int64_t room_watch_check(const struct room_watch *w, const char *what) {
    if (!w->on)
        return 0;
    const int64_t grew = (int64_t)status_bytes("VmHWM") - (int64_t)w->base;
#if defined(__SANITIZE_ADDRESS__) /* AddressSanitizer's shadow and quarantine grow with the KV */
    const bool asan = true;
#else
    const bool asan = false;
#endif
    CHECK_MSG(asan || (w->spare >= 0 && grew <= w->spare + w->run + w->slack),
              "%s: the peak resident set grew by %.0f KiB, the room had %.0f KiB spare (and %.0f "
              "of a run reserved)", what, (double)grew / 1024.0, (double)w->spare / 1024.0,
              (double)w->run / 1024.0);
    return grew;
}

/* The room the cache and the KV pages share (engine_set_experts): a cache of `made` slots that
 * may grow by the KV cache's bytes, two sequences of 1,024 positions. The cache takes the pages
 * the empty sequences give back, shrinks by what a long prompt takes (before its rows are written:
 * the peak of the resident set, reset before each step, never passes the room), grows again when
 * the sequence is cut back, and every logits row is the all-in-RAM run's. Steps of 512 tokens
 * write 8 runs of KV pages at once, so that writing them before the cache made room would pass the
 * room by far more than the kernel's counters lag. */
static void check_kv_room(const char *path, size_t made, int64_t slack) {
    struct pair p;
    if (!pair_open_path(&p, path))
        goto out;
    enum { LONG = 900, CUT = 10, MORE = 20, OTHER = 100 };
    const size_t V = (size_t)p.ram->hp.n_vocab, slot = expert_cache_slot_bytes(p.disk);
    int32_t *ids = malloc((LONG + OTHER) * sizeof(int32_t));
    const size_t rows = LONG + MORE + OTHER;
    float *want = malloc(V * rows * sizeof(float)), *got = malloc(V * rows * sizeof(float));
    struct engine *e[2] = {0};
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 1024;
    ep.n_batch = 512;
    ep.n_threads = 2;
    ep.n_seq = 2;
    char err[256] = "";
    for (int i = 0; i < 2; i++)
        e[i] = engine_new(i ? p.disk : p.ram, &ep, err, sizeof(err));
    CHECK_MSG(ids && want && got && e[0] && e[1], "%s", err);
    if (!ids || !want || !got || !e[0] || !e[1])
        goto done;
    for (int i = 0; i < LONG + OTHER; i++)
        ids[i] = (int32_t)(((uint32_t)i * 7919u + 13u) % (uint32_t)V);
    memset(want, 0, V * rows * sizeof(float)); /* touched before the resident set is watched */
    memset(got, 0, V * rows * sizeof(float));
    const size_t kv = engine_kv_bytes(e[1]);
    struct expert_cache_options o = {.io = EXPERT_IO_URING, .io_depth = 4,
                                     .grow_bytes = made * slot + kv};
    struct expert_cache *c = expert_cache_new(p.disk, made * slot, &o, err, sizeof(err));
    CHECK_MSG(c != NULL, "%s", err);
    if (!c)
        goto done;
    const size_t room = made * slot + kv, all = (size_t)p.disk->hp.n_layer * (size_t)p.disk->hp.n_expert;
    engine_set_experts(e[1], c);
    const int empty = expert_cache_n_slots(c);
    CHECK_EQ_INT(engine_kv_resident_bytes(e[1]), 0);
    CHECK_EQ_INT(empty, (int)((room / slot) < all ? room / slot : all));
    /* the script, on both engines: a long prompt on sequence 0, sequence 0 cut back and fed
     * again, sequence 1's prompt; on the disk engine each call watched */
    int slots[3] = {0};
    int64_t grew[4] = {0}; /* the peak's growth in the long prompt, the cut, the more, the other */
    struct room_watch w = {.slack = slack};
    for (int i = 0; i < 2; i++) {
        float *out = i ? got : want;
        if (i)
            room_watch_start(&w, e[1], c, room);
        CHECK_EQ_INT(engine_eval(e[i], 0, ids, LONG, out, true), 0);
        if (i) {
            grew[0] = room_watch_check(&w, "the long prompt");
            slots[0] = expert_cache_n_slots(c);
            CHECK(engine_kv_resident_bytes(e[1]) >= 2 * (size_t)p.disk->hp.n_layer * LONG *
                                                       engine_kv_shape(e[1]).row_bytes);
            CHECK((size_t)slots[0] * slot + engine_kv_resident_bytes(e[1]) <= room);
            room_watch_start(&w, e[1], c, room);
        }
        CHECK_EQ_INT(engine_truncate(e[i], 0, CUT), CUT);
        if (i) {
            grew[1] = room_watch_check(&w, "the cut");
            slots[1] = expert_cache_n_slots(c);
            room_watch_start(&w, e[1], c, room);
        }
        CHECK_EQ_INT(engine_eval(e[i], 0, ids + LONG, MORE, out + (size_t)LONG * V, true), 0);
        if (i) {
            grew[2] = room_watch_check(&w, "the prompt after the cut");
            room_watch_start(&w, e[1], c, room);
        }
        CHECK_EQ_INT(engine_eval(e[i], 1, ids + CUT, OTHER, out + (size_t)(LONG + MORE) * V, true),
                     0);
        if (i) {
            grew[3] = room_watch_check(&w, "the other sequence's prompt");
            slots[2] = expert_cache_n_slots(c);
            CHECK((size_t)slots[2] * slot + engine_kv_resident_bytes(e[1]) <= room);
        }
    }
    struct expert_cache_stats st;
    expert_cache_get_stats(c, &st);
    fprintf(stderr, "  %s: slots %d (%zu made, KV empty), %d (%d positions), %d (cut to %d), %d; "
            "slot %zu bytes, KV %zu; peak RSS growth %+.0f / %+.0f / %+.0f / %+.0f KiB\n",
            st.eviction, empty, made, slots[0], LONG, slots[1], CUT, slots[2], slot, kv,
            (double)grew[0] / 1024.0, (double)grew[1] / 1024.0, (double)grew[2] / 1024.0,
            (double)grew[3] / 1024.0);
    CHECK(empty > (int)made && slots[0] < empty && slots[1] > slots[0]);
    CHECK_MSG(memcmp(want, got, V * rows * sizeof(float)) == 0,
              "logits differ from the all-in-RAM run");
    engine_free(e[1]);
    e[1] = NULL;
    expert_cache_free(c);
done:
    engine_free(e[0]);
    engine_free(e[1]);
    free(ids);
    free(want);
    free(got);
out:
    pair_close(&p);
}

static void test_kv_room(void) { check_kv_room(moe_model(), 20, PEAK_SLACK); }
/* a cache smaller than one token's lookups evicts by LIRS, its LIR set resized with the cache */
static void test_kv_room_lirs(void) { check_kv_room(deep_moe_model(), 4, PEAK_SLACK); }

static const struct test_case cases[] = {
    {"split_streaming_is_exact", test_split_streaming_is_exact},
    {"gptoss_split_streaming_is_exact", test_gptoss_split_streaming_is_exact},
    {"streaming_is_exact", test_streaming_is_exact},
    {"dense_streaming_is_exact", test_dense_streaming_is_exact},
    {"gemma4_ple_streaming_is_exact", test_gemma4_ple_streaming_is_exact},
    {"qwen35moe_streaming_is_exact", test_qwen35moe_streaming_is_exact},
    {"q3_k_m_streaming_is_exact", test_q3_k_m_streaming_is_exact},
    {"mxfp4_streaming_is_exact", test_mxfp4_streaming_is_exact},
    {"qwen35_streaming_is_exact", test_qwen35_streaming_is_exact},
    {"iq2_m_streaming_is_exact", test_iq2_m_streaming_is_exact},
    {"iq3_xxs_streaming_is_exact", test_iq3_xxs_streaming_is_exact},
    {"small_cache_hits", test_small_cache_hits},
    {"frecency_by_hand", test_frecency_by_hand},
    {"bytes_read_exact", test_bytes_read_exact},
    {"read_fault", test_read_fault},
    {"hybrid_fault_resumes", test_hybrid_fault_resumes},
    {"file_shrinks", test_file_shrinks},
    {"rehome", test_rehome},
    {"lossy_flags", test_lossy_flags},
    {"too_small", test_too_small},
    {"multi_seq_streaming", test_multi_seq_streaming},
    {"kv_room", test_kv_room},
    {"kv_room_lirs", test_kv_room_lirs},
    {"gptoss_streaming_is_exact", test_gptoss_streaming_is_exact},
    {"gemma4_streaming_is_exact", test_gemma4_streaming_is_exact},
    {"gptoss_mxfp4_streaming_is_exact", test_gptoss_mxfp4_streaming_is_exact},
    {"multi_seq_streaming_gptoss", test_multi_seq_streaming_gptoss},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
