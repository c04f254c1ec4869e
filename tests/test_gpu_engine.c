/* test_gpu_engine.c - the engine on the GPU (backend_vulkan.c) against the engine on the CPU, on
 * whatever Vulkan device the machine has (lavapipe in CI): the same prompt's logits, row for row,
 * compared with memcmp (the accumulation contract promises the same bits), greedy decode, two
 * sequences in one step, a context's rows exported and imported, Qwen3.5 (DeltaNet and gated
 * attention: its checkpoints and recurrent state too), gpt-oss (window rings that wrap, sinks,
 * biases, MXFP4 experts; rollbacks through checkpoints), Gemma 4 (per-layer head shapes, shared
 * KV, GeGLU, experts beside the dense FFN, per-layer embeddings), the experts on three levels
 * (none, some or all of a layer's experts in VRAM, the rest on the CPU from RAM or through a cache
 * that misses on every token: the same bits), what the backend refuses, a budget too small for
 * what must be in VRAM, and a device lost in the middle of a request (the engine goes on on the
 * CPU). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_vulkan_experts.h"
#include "engine.h"
#include "expert_cache.h"
#include "fault.h"
#include "gpu.h"
#include "harness.h"
#include "model.h"
#include "op_trace.h"

/* A device of any type (lavapipe counts here), opened, or NULL after a skip. */
static struct gpu *open_any(void) {
    struct gpu_info in[16];
    char err[256] = "";
    int n = gpu_list(in, 16, err, sizeof(err));
    for (int i = 0; i < n && i < 16; i++)
        if (in[i].usable) {
            struct gpu *g = gpu_open(i, 0, err, sizeof(err));
            CHECK_MSG(g != NULL, "gpu_open(%d): %s", i, err);
            return g;
        }
    test_skip("no usable Vulkan device (%s): the engine on the GPU is NOT checked",
              n < 0 ? err : "none has the features the backend needs");
    return NULL;
}

/* open_any's device with its memory taken as a discrete card's (SNIPER_GPU_NO_MAP: copies through
 * a staging buffer, the expert cache's slots in the host's memory): the three levels' exchange
 * even on lavapipe, where the experts would otherwise be read in place. */
static struct gpu *open_staged(void) {
    setenv("SNIPER_GPU_NO_MAP", "1", 1);
    struct gpu *g = open_any();
    unsetenv("SNIPER_GPU_NO_MAP");
    return g;
}

static struct model *make_load(const char *name, const char *args) {
    char path[1024], err[256];
    if (test_make_model(path, sizeof(path), name, args) < 0)
        return NULL;
    struct model *m = model_load(path, err, sizeof(err));
    CHECK_MSG(m != NULL, "model_load(%s): %s", path, err);
    return m;
}

/* An engine with a checkpoint every `every` tokens (recurrent models). */
static struct engine *new_engine_every(struct model *m, enum qtype kv, int32_t n_seq,
                                       int32_t n_batch, int32_t every) {
    struct engine_params ep = engine_params_default();
    ep.checkpoint_every = every;
    ep.kv_type = kv;
    ep.n_ctx = 128;
    ep.n_batch = n_batch;
    ep.n_seq = n_seq;
    ep.n_threads = 2;
    char err[256];
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    CHECK_MSG(e != NULL, "engine_new: %s", err);
    return e;
}

static struct engine *new_engine(struct model *m, enum qtype kv, int32_t n_seq, int32_t n_batch) {
    return new_engine_every(m, kv, n_seq, n_batch, engine_params_default().checkpoint_every);
}

/* What most cases start from: the device, a model made and loaded, and two engines of it with
 * the same parameters, c on the CPU and e on the GPU (ckpt_every 0: the default checkpoints). */
struct pair {
    struct gpu *g;
    struct model *m;
    struct engine *c, *e;
};

/* Fills p; false (after a skip or a recorded failure) when a part is missing. pair_free frees
 * what there is either way. */
static bool pair_open(struct pair *p, const char *name, const char *args, int32_t n_seq,
                      int32_t n_batch, int32_t ckpt_every) {
    char err[256] = "";
    *p = (struct pair){.g = open_any()};
    p->m = p->g ? make_load(name, args) : NULL;
    const int32_t every = ckpt_every ? ckpt_every : engine_params_default().checkpoint_every;
    p->c = p->m ? new_engine_every(p->m, QTYPE_F16, n_seq, n_batch, every) : NULL;
    p->e = p->m ? new_engine_every(p->m, QTYPE_F16, n_seq, n_batch, every) : NULL;
    if (!p->c || !p->e)
        return false;
    const int rc = engine_use_gpu(p->e, p->g, err, sizeof(err));
    CHECK_MSG(rc == 0, "engine_use_gpu: %s", err);
    return rc == 0;
}

static void pair_free(struct pair *p) {
    engine_free(p->c);
    engine_free(p->e);
    model_free(p->m);
    gpu_close(p->g);
}

/* The prompt: n ids spread over the vocabulary. */
static void prompt(int32_t *ids, int32_t n, int32_t n_vocab, int32_t salt) {
    for (int32_t i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919 + salt * 104729 + 13) % n_vocab);
}

/* Counts the rows of a and b that differ in any bit (n rows of V). */
static int32_t rows_differ(const float *a, const float *b, int32_t n, int32_t V) {
    int32_t bad = 0;
    for (int32_t r = 0; r < n; r++)
        bad += memcmp(a + (size_t)r * V, b + (size_t)r * V, (size_t)V * sizeof(float)) != 0;
    return bad;
}

/* What a route observer saw: a hash of every (layer, union of experts) it was told, in order. */
struct route_log {
    uint64_t hash;
    int64_t calls;
};

static void route_logged(void *ctx, int il, const int32_t *ids, int32_t n) {
    struct route_log *r = ctx;
    uint64_t h = r->hash ^ (uint64_t)(il * 1000003 + n);
    for (int32_t i = 0; i < n; i++)
        h = (h ^ (uint64_t)ids[i]) * 0x100000001b3ull;
    r->hash = h * 0x100000001b3ull;
    r->calls++;
}

/* Runs the same prompt (all rows) and greedy decode on e's CPU twin c and on e, compares the
 * logits and what the route observers were told. */
static void same_as_cpu(struct model *m, struct gpu *g, enum qtype kv, int32_t n_batch,
                        const char *what) {
    const int32_t V = m->hp.n_vocab, N = 37, STEPS = 6;
    struct engine *c = new_engine(m, kv, 1, n_batch), *e = new_engine(m, kv, 1, n_batch);
    float *lc = calloc((size_t)N * V, sizeof(float)), *le = calloc((size_t)N * V, sizeof(float));
    int32_t ids[37];
    prompt(ids, N, V, 1);
    char err[256] = "";
    if (!c || !e || !lc || !le)
        goto out;
    int rc = engine_use_gpu(e, g, err, sizeof(err));
    CHECK_MSG(rc == 0, "%s: engine_use_gpu: %s", what, err);
    if (rc < 0)
        goto out;
    CHECK(engine_on_gpu(e) && !engine_on_gpu(c));
    struct route_log rc_log = {.hash = 14695981039346656037ull},
                     re_log = {.hash = 14695981039346656037ull};
    engine_set_route_observer(c, route_logged, &rc_log);
    engine_set_route_observer(e, route_logged, &re_log);
    CHECK_EQ_INT(engine_eval(c, 0, ids, N, lc, true), 0);
    CHECK_EQ_INT(engine_eval(e, 0, ids, N, le, true), 0);
    int32_t bad = rows_differ(lc, le, N, V);
    CHECK_MSG(bad == 0, "%s: %d of %d prompt rows differ from the CPU's", what, bad, N);
    for (int32_t s = 0; s < STEPS && bad == 0; s++) {
        int32_t best = 0;
        const float *row = lc + (size_t)(s == 0 ? N - 1 : 0) * V;
        for (int32_t i = 1; i < V; i++)
            best = row[i] > row[best] ? i : best;
        CHECK_EQ_INT(engine_eval(c, 0, &best, 1, lc, false), 0);
        CHECK_EQ_INT(engine_eval(e, 0, &best, 1, le, false), 0);
        CHECK_MSG(rows_differ(lc, le, 1, V) == 0, "%s: decode step %d differs", what, s);
    }
    CHECK_MSG(rc_log.calls == re_log.calls && rc_log.hash == re_log.hash,
              "%s: the route observer was told %lld unions on the CPU, %lld on the GPU%s", what,
              (long long)rc_log.calls, (long long)re_log.calls,
              rc_log.calls == re_log.calls ? ", not the same experts" : "");
    CHECK_MSG(m->hp.n_expert == 0 || rc_log.calls > 0, "%s: no unions told", what);
out:
    free(lc);
    free(le);
    engine_free(c);
    engine_free(e);
}

static void test_qwen3moe(void) {
    struct gpu *g = open_any();
    struct model *m = g ? make_load("moe.gguf", "--preset tiny") : NULL;
    if (m) {
        same_as_cpu(m, g, QTYPE_F16, 16, "qwen3moe f32 weights, f16 KV, batch 16");
        same_as_cpu(m, g, QTYPE_F32, 512, "qwen3moe f32 weights, f32 KV, batch 512");
    }
    model_free(m);
    gpu_close(g);
}

static void test_quantized(void) {
    struct gpu *g = open_any();
    static const char *const types[][2] = {
        {"q4_k_m", "--arch qwen3moe"}, {"q8_0", "--arch llama"}, {"iq4_xs", "--arch qwen3"},
        {"q4_0", "--arch qwen3moe"},
    };
    for (size_t i = 0; g && i < sizeof(types) / sizeof(types[0]); i++) {
        char args[256], what[128];
        snprintf(args, sizeof(args), "--preset tiny %s --types %s --n-ff 256",
                 types[i][1], types[i][0]);
        struct model *m = make_load("quant.gguf", args);
        snprintf(what, sizeof(what), "%s %s", types[i][1] + 7, types[i][0]);
        /* batches of 32 take the tiled products (q4_k_m's K-quants) and the experts grouped
         * (gpu_ops.c's threshold is 16 tokens), batches of 8 the per-token drivers */
        if (m)
            same_as_cpu(m, g, i % 2 ? QTYPE_Q8_0 : QTYPE_F16, i < 2 ? 32 : 8, what);
        model_free(m);
    }
    gpu_close(g);
}

/* Two sequences of na and nb tokens fed in one call (steps of n_batch carry both) give each the
 * logits it gets alone on the CPU. */
static void two_sequences(const char *file, const char *args, int32_t n_batch, int32_t na,
                          int32_t nb) {
    struct pair p;
    if (!pair_open(&p, file, args, 2, n_batch, 0))
        goto out;
    struct engine *c = p.c, *e = p.e;
    const int32_t V = p.m->hp.n_vocab, n = na + nb;
    int32_t *a = calloc((size_t)n, sizeof(*a)), *b = a ? a + na : NULL;
    float *lc = calloc((size_t)n * V, sizeof(float)), *le = calloc((size_t)n * V, sizeof(float));
    if (!a || !lc || !le)
        goto done;
    prompt(a, na, V, 2);
    prompt(b, nb, V, 3);
    struct engine_part pe[2] = {{.seq = 0, .tokens = a, .n = na, .logits = le, .all_logits = true},
                                {.seq = 1, .tokens = b, .n = nb, .logits = le + (size_t)na * V,
                                 .all_logits = true}};
    CHECK_EQ_INT(engine_eval(c, 0, a, na, lc, true), 0); /* alone, on the CPU */
    CHECK_EQ_INT(engine_eval(c, 1, b, nb, lc + (size_t)na * V, true), 0);
    CHECK_EQ_INT(engine_eval_batch(e, pe, 2), 0);        /* together, on the GPU */
    const int32_t bad = rows_differ(lc, le, n, V);
    CHECK_MSG(bad == 0, "%s: %d of %d rows of two sequences in a step differ from alone", args,
              bad, n);
done:
    free(a);
    free(lc);
    free(le);
out:
    pair_free(&p);
}

static void test_two_sequences(void) {
    two_sequences("moe2.gguf", "--preset tiny", 64, 11, 5);
}

/* A sequence's rows exported from the GPU after n tokens are the CPU's bytes (a window layer's:
 * the window before n, read around its ring), and imported into a CPU engine (and back into the
 * GPU) continue as the original would. */
static void context_rows(const char *file, const char *args, int32_t n_batch, int32_t n) {
    struct pair p;
    if (!pair_open(&p, file, args, 1, n_batch, 0))
        goto out;
    struct engine *c = p.c, *e = p.e;
    const int32_t V = p.m->hp.n_vocab;
    const struct engine_kv_shape sh = engine_kv_shape(e);
    const size_t bytes = (size_t)n * sh.row_bytes, all = bytes * (size_t)sh.n_layer;
    int32_t *ids = calloc((size_t)n, sizeof(*ids)), next = 5;
    float *l0 = calloc((size_t)V, 4), *l1 = calloc((size_t)V, 4), *l2 = calloc((size_t)V, 4);
    uint8_t *k = calloc(all, 1), *v = calloc(all, 1), *kc = calloc(all, 1), *vc = calloc(all, 1);
    if (!ids || !l0 || !l1 || !l2 || !k || !v || !kc || !vc)
        goto done;
    prompt(ids, n, V, 4);
    CHECK_EQ_INT(engine_eval(e, 0, ids, n, l0, false), 0);
    CHECK_EQ_INT(engine_eval(c, 0, ids, n, l1, false), 0);
    for (int32_t il = 0; il < sh.n_layer; il++) {
        CHECK_EQ_INT(engine_kv_export(e, 0, il, n, k + il * bytes, v + il * bytes), 0);
        CHECK_EQ_INT(engine_kv_export(c, 0, il, n, kc + il * bytes, vc + il * bytes), 0);
    }
    CHECK_MSG(memcmp(k, kc, all) == 0 && memcmp(v, vc, all) == 0,
              "%s: the GPU's exported rows are not the CPU's", args);
    CHECK_EQ_INT(engine_eval(e, 0, &next, 1, l0, false), 0); /* the GPU goes on by itself */
    struct engine *to[2] = {c, e};
    float *got[2] = {l1, l2};
    for (int i = 0; i < 2; i++) { /* the CPU, then the GPU, from the GPU's exported rows */
        engine_truncate(to[i], 0, 0);
        for (int32_t il = 0; il < sh.n_layer; il++)
            CHECK_EQ_INT(engine_kv_import(to[i], 0, il, sh.type, sh.kv_dim, n, k + il * bytes,
                                          v + il * bytes), 0);
        CHECK_EQ_INT(engine_kv_commit(to[i], 0, n), 0);
        CHECK_EQ_INT(engine_eval(to[i], 0, &next, 1, got[i], false), 0);
    }
    CHECK_MSG(memcmp(l0, l1, (size_t)V * 4) == 0, "%s: the CPU does not go on from the GPU's rows",
              args);
    CHECK_MSG(memcmp(l0, l2, (size_t)V * 4) == 0, "%s: the GPU does not go on from its own rows",
              args);
done:
    free(ids);
    free(l0);
    free(l1);
    free(l2);
    free(k);
    free(v);
    free(kc);
    free(vc);
out:
    pair_free(&p);
}

static void test_context_rows(void) {
    context_rows("dense.gguf", "--preset tiny-dense", 32, 20);
}

/* ---- Qwen3.5: Gated DeltaNet and gated attention -------------------------------------------- */

/* Prompt rows and greedy decode equal the CPU's: batches that cut the prompt into many steps (the
 * conv and SSM states carried from one to the next), and one that takes it whole. */
static void test_qwen35(void) {
    struct gpu *g = open_any();
    struct model *m = g ? make_load("q35moe.gguf", "--preset tiny-qwen35moe") : NULL;
    if (m) {
        same_as_cpu(m, g, QTYPE_F16, 16, "qwen35moe f32 weights, f16 KV, batch 16");
        same_as_cpu(m, g, QTYPE_Q8_0, 5, "qwen35moe f32 weights, q8_0 KV, batch 5");
    }
    model_free(m);
    m = g ? make_load("q35.gguf", "--preset tiny-qwen35") : NULL;
    if (m)
        same_as_cpu(m, g, QTYPE_F32, 64, "qwen35 f32 weights, f32 KV, batch 64");
    model_free(m);
    m = g ? make_load("q35q.gguf", "--preset tiny-qwen35moe --types q4_k_m --n-ff 256") : NULL;
    if (m)
        same_as_cpu(m, g, QTYPE_F16, 8, "qwen35moe q4_k_m, f16 KV, batch 8");
    model_free(m);
    gpu_close(g);
}

/* A prompt that leaves the sequence's tokens after a checkpoint: the GPU goes back to the same
 * checkpoint as the CPU (its state copied back from the device's slot) and goes on with the CPU's
 * bits; cut back before the first checkpoint, both start over from a zero state. */
static void test_qwen35_checkpoints(void) {
    struct pair p;
    if (!pair_open(&p, "q35ck.gguf", "--preset tiny-qwen35moe", 1, 8, 8))
        goto out;
    struct model *m = p.m;
    struct engine *c = p.c, *e = p.e;
    const int32_t V = m->hp.n_vocab, N = 30;
    int32_t ids[30], alt[30];
    prompt(ids, N, V, 6);
    prompt(alt, N, V, 7);
    float *lc = calloc((size_t)N * V, 4), *le = calloc((size_t)N * V, 4);
    CHECK_EQ_INT(engine_eval(c, 0, ids, N, lc, false), 0); /* checkpoints at 8, 16, 24 */
    CHECK_EQ_INT(engine_eval(e, 0, ids, N, le, false), 0);
    CHECK_MSG(rows_differ(lc, le, 1, V) == 0, "the prompt's last row differs");
    const int32_t kc = engine_truncate(c, 0, 20), ke = engine_truncate(e, 0, 20);
    CHECK_EQ_INT(kc, 16);
    CHECK_EQ_INT(ke, kc);
    CHECK_EQ_INT(engine_eval(c, 0, alt + kc, N - kc, lc, true), 0);
    CHECK_EQ_INT(engine_eval(e, 0, alt + ke, N - ke, le, true), 0);
    CHECK_MSG(rows_differ(lc, le, N - kc, V) == 0, "after the checkpoint at %d: rows differ", kc);
    CHECK_EQ_INT(engine_truncate(c, 0, 5), 0);
    CHECK_EQ_INT(engine_truncate(e, 0, 5), 0);
    CHECK_EQ_INT(engine_eval(c, 0, alt, 12, lc, true), 0);
    CHECK_EQ_INT(engine_eval(e, 0, alt, 12, le, true), 0);
    CHECK_MSG(rows_differ(lc, le, 12, V) == 0, "after starting over: rows differ");
    free(lc);
    free(le);
out:
    pair_free(&p);
}

/* A sequence's KV rows and recurrent state exported from the GPU continue, imported into the CPU
 * and back into the GPU, exactly as the GPU's own sequence continued. */
static void test_qwen35_state(void) {
    struct pair p;
    if (!pair_open(&p, "q35st.gguf", "--preset tiny-qwen35moe", 1, 16, 0))
        goto out;
    struct model *m = p.m;
    struct engine *c = p.c, *e = p.e;
    const int32_t V = m->hp.n_vocab, N = 20;
    int32_t ids[20], next = 7;
    prompt(ids, N, V, 8);
    float *l0 = calloc((size_t)V, 4), *l1 = calloc((size_t)V, 4), *l2 = calloc((size_t)V, 4);
    CHECK_EQ_INT(engine_eval(e, 0, ids, N, l0, false), 0);
    const struct engine_kv_shape sh = engine_kv_shape(e);
    const size_t bytes = (size_t)N * sh.row_bytes, sb = engine_state_size(e);
    uint8_t *k = malloc(bytes * (size_t)sh.n_layer), *v = malloc(bytes * (size_t)sh.n_layer);
    uint8_t *st = malloc(sb);
    CHECK(sb > 0);
    for (int32_t il = 0; il < sh.n_layer; il++)
        CHECK_EQ_INT(engine_kv_export(e, 0, il, N, k + il * bytes, v + il * bytes), 0);
    CHECK_EQ_INT(engine_state_export(e, 0, st, sb), 0);
    CHECK_EQ_INT(engine_eval(e, 0, &next, 1, l0, false), 0); /* the GPU goes on by itself */
    struct engine *to[2] = {c, e};
    float *got[2] = {l1, l2};
    for (int i = 0; i < 2; i++) { /* the CPU, then the GPU, from the exported rows and state */
        engine_truncate(to[i], 0, 0);
        for (int32_t il = 0; il < sh.n_layer; il++)
            CHECK_EQ_INT(engine_kv_import(to[i], 0, il, sh.type, sh.kv_dim, N, k + il * bytes,
                                          v + il * bytes), 0);
        CHECK_EQ_INT(engine_state_import(to[i], 0, st, sb), 0);
        CHECK_EQ_INT(engine_kv_commit(to[i], 0, N), 0);
        CHECK_EQ_INT(engine_eval(to[i], 0, &next, 1, got[i], false), 0);
    }
    CHECK_MSG(memcmp(l0, l1, (size_t)V * 4) == 0, "the CPU does not go on from the GPU's state");
    CHECK_MSG(memcmp(l0, l2, (size_t)V * 4) == 0, "the GPU does not go on from its own state");
    free(k);
    free(v);
    free(st);
    free(l0);
    free(l1);
    free(l2);
out:
    pair_free(&p);
}

/* ---- gpt-oss: window rings, sinks, biases, the clamped SwiGLU, MXFP4 experts --------------- */

/* tiny-gpt-oss's window is 16 (its even layers): a ring of 15 + n_batch rows. Prompt rows and
 * greedy decode equal the CPU's: the 37-token prompt crosses the window and, in steps of 16 or 8,
 * wraps the ring, which decode wraps again; a batch of 64 takes the prompt whole. */
static void test_gptoss(void) {
    struct gpu *g = open_any();
    struct model *m = g ? make_load("oss.gguf", "--preset tiny-gpt-oss") : NULL;
    if (m) {
        same_as_cpu(m, g, QTYPE_F16, 16, "gpt-oss f32 weights, f16 KV, batch 16");
        same_as_cpu(m, g, QTYPE_F32, 64, "gpt-oss f32 weights, f32 KV, batch 64");
    }
    model_free(m);
    /* llama-quantize's MXFP4_MOE mix: MXFP4 experts, Q8_0 for the rest */
    m = g ? make_load("ossq.gguf", "--preset tiny-gpt-oss --types mxfp4_moe") : NULL;
    if (m) {
        same_as_cpu(m, g, QTYPE_Q8_0, 8, "gpt-oss mxfp4_moe, q8_0 KV, batch 8");
        same_as_cpu(m, g, QTYPE_F16, 5, "gpt-oss mxfp4_moe, f16 KV, batch 5");
    }
    model_free(m);
    gpu_close(g);
}

/* Two sequences past the window in the same steps (batch 8: both rings wrap). */
static void test_gptoss_two_sequences(void) {
    two_sequences("oss2.gguf", "--preset tiny-gpt-oss", 8, 30, 21);
}

/* Exported after 30 tokens with a batch of 8, a window layer's last 15 positions (15 .. 29) lie
 * around the end of its ring of 23 rows. */
static void test_gptoss_context_rows(void) {
    context_rows("oss3.gguf", "--preset tiny-gpt-oss", 8, 30);
}

/* A model with a window of 16 (checkpoints every 8): cut back in place while the rings hold the
 * window (to 38 of 40), and through a checkpoint once they do not (to 20 of 40: the ring rows of
 * the checkpoint at 16 copied back from the device's slot): the GPU ends where the CPU does and
 * goes on with its bits. */
static void window_checkpoints(const char *file, const char *args) {
    struct pair p;
    if (!pair_open(&p, file, args, 1, 8, 8))
        goto out;
    struct engine *c = p.c, *e = p.e;
    const int32_t V = p.m->hp.n_vocab, N = 40;
    int32_t ids[40], alt[40];
    prompt(ids, N, V, 6);
    prompt(alt, N, V, 7);
    float *lc = calloc((size_t)N * V, 4), *le = calloc((size_t)N * V, 4);
    if (!lc || !le)
        goto done;
    static const int32_t cut[][2] = {{38, 38}, {20, 16}}; /* asked, kept */
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(engine_eval(c, 0, ids, N, lc, false), 0);
        CHECK_EQ_INT(engine_eval(e, 0, ids, N, le, false), 0);
        CHECK_MSG(rows_differ(lc, le, 1, V) == 0, "the prompt's last row differs");
        const int32_t kc = engine_truncate(c, 0, cut[i][0]), ke = engine_truncate(e, 0, cut[i][0]);
        CHECK_EQ_INT(kc, cut[i][1]);
        CHECK_EQ_INT(ke, kc);
        CHECK_EQ_INT(engine_eval(c, 0, alt + kc, N - kc, lc, true), 0);
        CHECK_EQ_INT(engine_eval(e, 0, alt + ke, N - ke, le, true), 0);
        CHECK_MSG(rows_differ(lc, le, N - kc, V) == 0, "%s: cut back to %d (kept %d): rows differ",
                  args, cut[i][0], kc);
        engine_truncate(c, 0, 0);
        engine_truncate(e, 0, 0);
    }
done:
    free(lc);
    free(le);
out:
    pair_free(&p);
}

static void test_gptoss_checkpoints(void) {
    window_checkpoints("oss4.gguf", "--preset tiny-gpt-oss");
}

/* ---- Gemma 4: per-layer head shapes, shared KV, GeGLU, experts beside the dense FFN, per-layer
 * embeddings ---------------------------------------------------------------------------------- */

/* The gemma4-26b-a4b preset's layer kinds (5 window layers, then a global one with 2 KV heads
 * of 512 and no attn_v) in small widths. */
#define G4_26B_SMALL                                                                            \
    "--preset gemma4-26b-a4b --n-layer 6 --n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 64 "  \
    "--n-ff 128 --n-expert 8 --n-expert-used 2 --n-ff-exp 64 --n-vocab 1024 --ctx 512 "         \
    "--types q4_k_m"

/* tiny-gemma4 (the 26B-A4B's family: routed experts with fused gate_up beside every dense FFN),
 * the 26B-A4B's own head shapes (its global layers' rows narrower than the window layers'), and
 * tiny-gemma4-ple (E2B / E4B's: per-layer embeddings, the shared-KV layers' FFN twice as wide),
 * in llama.cpp's Q4_K_M mix and F32: prompt rows and greedy decode equal the CPU's. The tiny
 * presets' window is 16: the 37-token prompt crosses it, decode goes on past it; batches of 32
 * take the tiled products and the grouped experts, batches of 8 the per-token ones (the experts'
 * in test_gemma4_two_sequences). */
static void test_gemma4(void) {
    struct gpu *g = open_any();
    static const struct {
        const char *file, *args, *what;
        enum qtype kv;
        int32_t n_batch;
    } cases[] = {
        {"g4q.gguf", "--preset tiny-gemma4 --types q4_k_m", "gemma4 q4_k_m, f16 KV, batch 32",
         QTYPE_F16, 32},
        {"g426.gguf", G4_26B_SMALL, "gemma4-26b-a4b's heads (global: 2 KV heads of 512 without "
         "attn_v; window: 2 of 64, narrower than the rows), q4_k_m, q8_0 KV, batch 16",
         QTYPE_Q8_0, 16},
        {"g4p.gguf", "--preset tiny-gemma4-ple", "gemma4-ple f32 weights, f16 KV, batch 16",
         QTYPE_F16, 16},
        {"g4pq.gguf", "--preset tiny-gemma4-ple --types q4_k_m",
         "gemma4-ple q4_k_m, q8_0 KV, batch 8", QTYPE_Q8_0, 8},
    };
    for (size_t i = 0; g && i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct model *m = make_load(cases[i].file, cases[i].args);
        if (m)
            same_as_cpu(m, g, cases[i].kv, cases[i].n_batch, cases[i].what);
        model_free(m);
    }
    gpu_close(g);
}

/* Two sequences past the window in the same steps (batch 8: both rings wrap). */
static void test_gemma4_two_sequences(void) {
    two_sequences("g4two.gguf", "--preset tiny-gemma4 --types q4_k_m", 8, 30, 21);
}

/* A context's rows after 30 tokens (the window layers' around their rings, the shared-KV layers
 * owning none) move between the GPU and the CPU. */
static void test_gemma4_context_rows(void) {
    context_rows("g4ctx.gguf", "--preset tiny-gemma4", 8, 30);
}

static void test_gemma4_checkpoints(void) {
    window_checkpoints("g4ck.gguf", "--preset tiny-gemma4-ple --types q4_k_m");
}

/* Whether recording t holds op of layer il. */
static bool trace_has(const struct op_trace *t, int il, const char *op) {
    for (size_t i = 0; i < t->n_ev; i++)
        if (t->ev[i].il == il && strcmp(t->ev[i].op, op) == 0)
            return true;
    return false;
}

/* op_trace_compare's answers on recordings made by hand: equal ones; a one-bit difference in the
 * second op (its row, index and both bits); a missing op (the recording ends first). */
static void trace_compare_golden(void) {
    const float rows[2][3] = {{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}};
    float other[2][3];
    memcpy(other, rows, sizeof(rows));
    memcpy(&other[1][2], &(uint32_t){0x40c00001u}, 4); /* 6.0f plus one ulp */
    struct op_trace *a = op_trace_new(), *b = op_trace_new(), *c = op_trace_new();
    struct op_trace_diff d;
    if (!a || !b || !c)
        goto out;
    op_trace_record(a, -1, "embd", rows[0], 2, 3, 3);
    op_trace_record(a, 0, "q_norm", rows[0], 2, 2, 3);
    op_trace_record(b, -1, "embd", rows[0], 2, 3, 3);
    op_trace_record(c, -1, "embd", rows[0], 2, 3, 3);
    op_trace_record(c, 0, "q_norm", rows[0], 2, 2, 3); /* rows of 2 of 3: the third never read */
    CHECK_EQ_INT(op_trace_compare(a, c, &d), 0);
    CHECK(!d.found && d.n_same == 2);
    op_trace_record(b, 0, "q_norm", other[0], 2, 3, 3);
    CHECK_EQ_INT(op_trace_compare(a, b, &d), 1); /* the shapes differ: 2 x 2 and 2 x 3 */
    CHECK(d.found && d.shape && d.n_same == 1);
    op_trace_record(a, 1, "attn", rows[0], 2, 3, 3);
    op_trace_record(c, 1, "attn", other[0], 2, 3, 3);
    CHECK_EQ_INT(op_trace_compare(a, c, &d), 1);
    CHECK(d.found && !d.shape && d.n_same == 2 && d.n_differ == 1 && d.n_shown == 1);
    CHECK(d.shown[0].row == 1 && d.shown[0].col == 2 && d.shown[0].a == 0x40c00000u &&
          d.shown[0].b == 0x40c00001u);
    CHECK_NEAR(d.max_abs, 4.76837158203125e-7, 0.0);
    CHECK_EQ_INT(op_trace_compare(c, b, &d), 1);
    op_trace_free(b);
    b = op_trace_new();
    if (b)
        op_trace_record(b, -1, "embd", rows[0], 2, 3, 3);
    CHECK_EQ_INT(b ? op_trace_compare(a, b, &d) : 1, 1); /* b ends after its first op */
    CHECK(d.found && d.shape && d.n_same == 1);
out:
    op_trace_free(a);
    op_trace_free(b);
    op_trace_free(c);
}

/* A trace point a recording must hold: its layer and name. */
struct trace_point {
    int il;
    const char *op;
};

/* The per-op trace of a step of 16 prompt ids (bench-gpumodel --trace's comparison) on the CPU and
 * on the GPU: the same ops in the same order, each leaving the CPU's bits; the ops named in
 * must[] are among them (layer, name). */
static void trace_same(const char *file, const char *args, const struct trace_point *must,
                       size_t n_must) {
    struct pair p = {0};
    const int32_t N = 16;
    struct op_trace *tc = op_trace_new(), *tg = op_trace_new();
    float *lc = NULL, *lg = NULL;
    int32_t ids[16];
    if (!tc || !tg || !pair_open(&p, file, args, 1, N, 0))
        goto out;
    const int32_t V = p.m->hp.n_vocab;
    lc = calloc((size_t)N * V, sizeof(float));
    lg = calloc((size_t)N * V, sizeof(float));
    if (!lc || !lg)
        goto out;
    prompt(ids, N, V, 3);
    engine_set_trace(p.c, op_trace_record, tc);
    engine_set_trace(p.e, op_trace_record, tg);
    CHECK_EQ_INT(engine_eval(p.c, 0, ids, N, lc, true), 0);
    CHECK_EQ_INT(engine_eval(p.e, 0, ids, N, lg, true), 0);
    struct op_trace_diff d;
    const int rc = op_trace_compare(tc, tg, &d);
    if (rc != 0)
        op_trace_report(&d, tc, tg, stderr);
    CHECK_MSG(rc == 0, "%s: the GPU's ops are not the CPU's (the trace above)", args);
    CHECK_MSG(rows_differ(lc, lg, N, V) == 0, "%s: the logits differ", args);
    for (size_t i = 0; i < n_must; i++)
        CHECK_MSG(trace_has(tc, must[i].il, must[i].op) && trace_has(tg, must[i].il, must[i].op),
                  "%s: no trace point \"%s\" in layer %d", args, must[i].op, must[i].il);
out:
    free(lc);
    free(lg);
    op_trace_free(tc);
    op_trace_free(tg);
    pair_free(&p);
}

/* The per-op trace on tiny-gemma4 F32 (window and global layers, shared KV, dense FFNs with
 * routed experts beside them, fused gate_up) and tiny-gemma4-ple F32 (per-layer embeddings):
 * "no op differs" on this device, and the comparison itself on recordings made by hand. */
static void test_gemma4_trace(void) {
    static const struct trace_point moe[] = {
        {-1, "embd"}, {0, "q_norm"}, {0, "v_norm"}, {0, "attn_out"}, {0, "router_in"},
        {0, "moe_weights"}, {0, "moe_out"}, {0, "post_norm_2"}, {0, "x_ffn"}, {3, "q_rope"},
        {-1, "logits"}, {-1, "softcap"},
    }, ple[] = {
        {-1, "ple_inputs"}, {0, "ple_act"}, {0, "ple_post_norm"}, {0, "out_scale"},
    };
    trace_compare_golden();
    trace_same("g4tr.gguf", "--preset tiny-gemma4", moe, sizeof(moe) / sizeof(moe[0]));
    trace_same("g4trp.gguf", "--preset tiny-gemma4-ple", ple, sizeof(ple) / sizeof(ple[0]));
}

/* ---- experts on three levels: VRAM slots, the CPU from RAM, the CPU through the SSD --------- */

enum { TIER_A = 21, TIER_B = 13, TIER_STEPS = 4 };

/* How a placement runs: slots is engine_params.gpu_expert_slots (on the CPU: unused); with a
 * cache of the fewest slots (the model opened with its experts on disk) every token misses. */
struct tier_run {
    struct gpu *g;        /* NULL: the CPU */
    int32_t slots;
    bool disk, prefetch;
    int32_t transit;      /* engine_params.gpu_transit, less one: 0 never, 1 auto, 2 always */
};

/* Two sequences' prompts (every row) in steps of 16 that carry both, then TIER_STEPS decode
 * steps of both in one batch, into out ((TIER_A + TIER_B + 2 TIER_STEPS) rows); *ge gets where
 * the experts were. Returns 0 or the first error (a failed CHECK is recorded). */
static int tier_eval(const char *path, const struct tier_run *r, float *out,
                     struct engine_gpu_experts *ge) {
    char err[256] = "";
    struct model *m = model_open(path, r->disk, err, sizeof(err));
    CHECK_MSG(m != NULL, "model_open(%s): %s", path, err);
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 16;
    ep.n_seq = 2;
    ep.n_threads = 2;
    ep.prefetch = r->prefetch ? ENGINE_PREFETCH_ALWAYS : ENGINE_PREFETCH_OFF;
    ep.gpu_expert_slots = r->slots;
    ep.gpu_transit = r->transit - 1;
    struct engine *e = m ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    struct expert_cache *c = NULL;
    int rc = -EINVAL;
    if (!e)
        goto out;
    if (r->disk) {
        const size_t slot = expert_cache_slot_bytes(m);
        c = expert_cache_new(m, slot * (size_t)expert_cache_min_slots(m), NULL, err, sizeof(err));
        CHECK_MSG(c != NULL, "expert_cache_new: %s", err);
        if (!c)
            goto out;
        engine_set_experts(e, c);
    }
    if (r->g && (rc = engine_use_gpu(e, r->g, err, sizeof(err))) < 0) {
        CHECK_MSG(false, "engine_use_gpu: %s", err);
        goto out;
    }
    const int32_t V = m->hp.n_vocab;
    int32_t a[TIER_A], b[TIER_B];
    prompt(a, TIER_A, V, 11);
    prompt(b, TIER_B, V, 12);
    struct engine_part pp[2] = {
        {.seq = 0, .tokens = a, .n = TIER_A, .logits = out, .all_logits = true},
        {.seq = 1, .tokens = b, .n = TIER_B, .logits = out + (size_t)TIER_A * V,
         .all_logits = true}};
    rc = engine_eval_batch(e, pp, 2);
    for (int32_t s = 0; rc == 0 && s < TIER_STEPS; s++) {
        int32_t next[2] = {(s * 31 + 7) % V, (s * 17 + 3) % V};
        float *row = out + (size_t)(TIER_A + TIER_B + 2 * s) * V;
        struct engine_part dp[2] = {{.seq = 0, .tokens = &next[0], .n = 1, .logits = row},
                                    {.seq = 1, .tokens = &next[1], .n = 1, .logits = row + V}};
        rc = engine_eval_batch(e, dp, 2);
    }
    engine_gpu_experts(e, ge);
out:
    engine_free(e);
    expert_cache_free(c);
    model_free(m);
    return rc;
}

/* A model's logits on the GPU equal the CPU's (all in RAM) bit for bit whatever the placement:
 * no routed expert in VRAM, some, all; the model in RAM or its experts through a cache that
 * misses on every token (on a card taken as discrete: the exchange), with the lookahead on and
 * off: the first n_runs of those placements (2: some in RAM and all through the cache, the runs
 * whose pairs on the GPU reach the tiled products; make test's time is kept for the placements
 * that differ); then the cache's slots read in place by the GPU on unified memory (lavapipe). */
static void tier_invariant(const char *file, const char *args, size_t n_runs) {
    struct gpu *g = open_any(), *gs = g ? open_staged() : NULL;
    char path[1024];
    if (!g || !gs || test_make_model(path, sizeof(path), file, args) < 0) {
        gpu_close(g);
        gpu_close(gs);
        return;
    }
    char err[256] = "";
    struct model *hm = model_open(path, false, err, sizeof(err));
    CHECK_MSG(hm != NULL, "model_open(%s): %s", path, err);
    const int32_t V = hm ? hm->hp.n_vocab : 0, NE = hm ? hm->hp.n_expert : 0;
    int32_t n_moe = 0;
    for (int32_t il = 0; hm && il < hm->hp.n_layer; il++)
        n_moe += hm->layers[il].ffn == MODEL_FFN_MOE;
    /* every (token, expert) pair of the run: its rows, k experts each, in every MoE layer */
    const uint64_t all_pairs = (uint64_t)(TIER_A + TIER_B + 2 * TIER_STEPS) *
                               (uint64_t)(hm ? hm->hp.n_expert_used : 0) * (uint64_t)n_moe;
    model_free(hm);
    const size_t rows = TIER_A + TIER_B + 2 * TIER_STEPS;
    float *want = calloc(rows * (size_t)V, 4), *got = calloc(rows * (size_t)V, 4);
    struct engine_gpu_experts ge;
    const struct tier_run cpu = {.g = NULL};
    if (!want || !got || NE < 4 || tier_eval(path, &cpu, want, &ge) < 0) {
        CHECK_MSG(false, "%s: the CPU's run", args);
        goto out;
    }
    /* then the transit: a batch's missed experts uploaded for its step, every one with two
     * pairs or more (2), or where the measured speeds say so (1) */
    const struct tier_run runs[] = {
        {g, 3, false, false, 0},  {gs, NE, true, false, 0}, {g, -1, false, false, 0},
        {gs, -1, true, true, 0},  {gs, -1, true, false, 0}, {gs, 3, true, true, 0},
    };
    const struct tier_run transits[] = {{g, 3, false, false, 2}, {gs, -1, true, false, 2},
                                        {g, 2, false, false, 1}};
    const size_t n_all = sizeof(runs) / sizeof(runs[0]), n_first = n_runs < n_all ? n_runs : n_all;
    const size_t n_transits = sizeof(transits) / sizeof(transits[0]);
    for (size_t i = 0; i <= n_first + n_transits; i++) {
        /* the last: the cache's slots read in place (the slots asked for mean nothing there) */
        const struct tier_run in_place = {g, 3, true, false, 0};
        const struct tier_run *r = i < n_first ? &runs[i]
                                   : i < n_first + n_transits ? &transits[i - n_first] : &in_place;
        memset(got, 0, rows * (size_t)V * 4);
        CHECK_EQ_INT(tier_eval(path, r, got, &ge), 0);
        const int32_t bad = rows_differ(want, got, (int32_t)rows, V);
        CHECK_MSG(bad == 0, "%s: %d slots, experts %s%s, prefetch %s: %d of %zu rows differ "
                  "from the CPU's", args, r->slots, r->disk ? "on disk" : "in RAM",
                  r == &in_place ? " read in place" : "", r->prefetch ? "on" : "off", bad, rows);
        if (r == &in_place) {
            const bool unified = gpu_get_info(g)->unified;
            CHECK_MSG(ge.in_place == unified && ge.exchange == !unified && ge.cached &&
                          (!unified || (ge.pairs_cpu == 0 && ge.pairs_gpu == all_pairs)),
                      "%s: in place %d (unified memory %d), exchange %d: %llu pairs on the GPU "
                      "of %llu, %llu on the CPU", args, ge.in_place, unified, ge.exchange,
                      (unsigned long long)ge.pairs_gpu, (unsigned long long)all_pairs,
                      (unsigned long long)ge.pairs_cpu);
            continue;
        }
        const int32_t slots = r->slots == 0 ? NE : r->slots < 0 ? 0 : r->slots;
        CHECK_EQ_INT(ge.n_slots, slots);
        CHECK(ge.exchange == (r->disk || slots < NE));
        if (r->transit == 1) /* the speeds decide: only the bits are checked */
            continue;
        const bool uploads = r->transit == 2;
        CHECK_MSG(!ge.exchange || ((ge.pairs_gpu > 0) == (slots > 0 || uploads) &&
                                   (ge.pairs_cpu > 0) == (slots < NE)),
                  "%s: %d slots: %llu pairs on the GPU, %llu on the CPU", args, slots,
                  (unsigned long long)ge.pairs_gpu, (unsigned long long)ge.pairs_cpu);
        /* the transit uploads where it is asked to (biased experts with their bias rows) */
        CHECK_MSG((ge.transit_pairs > 0) == uploads &&
                      ge.transit_pairs <= ge.pairs_gpu && ge.transit_experts <= ge.transit_pairs,
                  "%s: %d slots, transit %d: %llu experts, %llu pairs uploaded", args, slots,
                  r->transit - 1, (unsigned long long)ge.transit_experts,
                  (unsigned long long)ge.transit_pairs);
    }
out:
    free(want);
    free(got);
    gpu_close(g);
    gpu_close(gs);
}

static void test_tier_qwen3moe(void) {
    tier_invariant("tier.gguf", "--preset tiny", 6);
    /* K-quant experts: steps of 16 tokens take the tiled products over the slots' pairs */
    tier_invariant("tierq.gguf", "--preset tiny --types q4_k_m --n-ff 256", 2);
}

static void test_tier_qwen35moe(void) {
    tier_invariant("tier35.gguf", "--preset tiny-qwen35moe", 4); /* shared experts, DeltaNet */
}

static void test_tier_gptoss(void) {
    tier_invariant("tieross.gguf", "--preset tiny-gpt-oss --types mxfp4_moe", 2); /* biases */
}

/* What the static placement would have hit: a layer's distinct experts below n_slots (the route
 * observer's unions). */
struct static_hits {
    int32_t n_slots;
    uint64_t hits, lookups;
};

static void count_static(void *ctx, int il, const int32_t *ids, int32_t n) {
    struct static_hits *h = ctx;
    (void)il;
    for (int32_t i = 0; i < n; i++)
        h->hits += ids[i] < h->n_slots;
    h->lookups += (uint64_t)n;
}

/* vk_transit_pays_fn for test_tier_transit: yes for the first *ctx experts; each call's
 * arguments are kept. */
struct transit_calls {
    int32_t allow, n;
    int32_t chosen[8], pairs[8], left[8];
};

static bool transit_allow(const void *ctx, int32_t n_chosen, int32_t pairs, int32_t cpu_left) {
    struct transit_calls *c = (struct transit_calls *)ctx;
    if (c->n < 8) {
        c->chosen[c->n] = n_chosen;
        c->pairs[c->n] = pairs;
        c->left[c->n] = cpu_left;
        c->n++;
    }
    return n_chosen < c->allow;
}

/* A step's transit takes the CPU's experts with the most pairs first (ties: the lower id), two
 * pairs or more, while the cost says so and the slots last; their pairs leave the CPU's in pair
 * order with their transit slot, activation row and output row. No device: the choice alone. */
static void test_tier_transit(void) {
    /* 6 tokens, k 2; slots 0 and 1 hold experts 0 and 1: expert 0's pair is the GPU's */
    const int32_t ids[12] = {0, 2, 2, 3, 2, 4, 3, 5, 5, 6, 7, 2};
    const struct {
        int32_t allow, min_pairs, max_experts, n_x, x[3];
    } cases[] = {
        {2, 2, 8, 2, {2, 3}},    /* 2 has four pairs, then 3 and 5 two each: the lower id */
        {99, 2, 8, 3, {2, 3, 5}}, /* 4, 6 and 7 have one pair */
        {99, 2, 1, 1, {2}},       /* one slot */
        {0, 2, 8, 0, {0}},        /* it never pays */
        {99, 1, 8, 6, {2, 3, 5}},   /* then 4, 6 and 7 */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct vk_tier *t = vk_tier_new(1, 8, 2, NULL, 2);
        CHECK(t != NULL);
        if (!t)
            return;
        int32_t split[3 * 12], cpu_sel[12], gpu[3 * 12], chosen[8], n_x = -1;
        CHECK_EQ_INT(vk_tier_split(t, 0, ids, 12, split, 12, cpu_sel), 1);
        const uint64_t cpu0 = t->pairs_cpu;
        struct transit_calls calls = {.allow = cases[c].allow};
        const int32_t n = vk_tier_transit(t, cpu_sel, 12, cases[c].min_pairs,
                                          cases[c].max_experts, transit_allow, &calls, chosen,
                                          &n_x, gpu, 12);
        CHECK_EQ_INT(n_x, cases[c].n_x);
        int32_t moved = 0;
        for (int32_t j = 0; j < n_x && j < 3; j++)
            CHECK_EQ_INT(chosen[j], cases[c].x[j]);
        /* the pairs: every pair of a chosen expert, in pair order, with its slot and rows */
        for (int32_t p = 0, i = 0; p < 12; p++) {
            int32_t slot = -1;
            for (int32_t j = 0; j < n_x; j++)
                if (chosen[j] == ids[p])
                    slot = j;
            if (slot < 0) {
                CHECK_EQ_INT(cpu_sel[p], ids[p] == 0 ? -1 : ids[p]);
                continue;
            }
            CHECK_EQ_INT(cpu_sel[p], -1);
            CHECK_EQ_INT(gpu[i], slot);
            CHECK_EQ_INT(gpu[12 + i], p / 2);
            CHECK_EQ_INT(gpu[24 + i], p);
            i++;
            moved++;
        }
        CHECK_EQ_INT(n, moved);
        CHECK(t->pairs_cpu == cpu0 - (uint64_t)moved && t->transit_pairs == (uint64_t)moved &&
              t->transit_experts == (uint64_t)n_x);
        /* the cost was asked with the CPU's pairs before each move: 11, then 11 - 4, ... */
        if (cases[c].allow == 2 && calls.n >= 3)
            CHECK(calls.pairs[0] == 4 && calls.left[0] == 11 && calls.pairs[1] == 2 &&
                  calls.left[1] == 7 && calls.chosen[2] == 2);
        vk_tier_free(t);
    }
}

/* The VRAM slots learn: decoding the same token over and over routes to the same few experts of a
 * layer, which the slots take in (promotions) and then hit far more often than the first experts
 * that fit would have been hit; every step's logits stay the CPU's. */
static void test_tier_learns(void) {
    struct gpu *g = open_any();
    struct model *m = g ? make_load("tierl.gguf", "--preset tiny") : NULL;
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 8;
    ep.n_threads = 2;
    ep.gpu_expert_slots = 4;
    char err[256] = "";
    struct engine *c = m ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    struct engine *e = m ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    const int32_t V = m ? m->hp.n_vocab : 0;
    float *lc = calloc((size_t)V + 1, 4), *le = calloc((size_t)V + 1, 4);
    struct static_hits sh = {.n_slots = 4};
    if (!c || !e || !lc || !le || engine_use_gpu(e, g, err, sizeof(err)) < 0) {
        CHECK_MSG(!m, "setting up: %s", err);
        goto out;
    }
    engine_set_route_observer(e, count_static, &sh);
    int32_t ids[8], tok = 5;
    prompt(ids, 8, V, 10);
    CHECK_EQ_INT(engine_eval(c, 0, ids, 8, lc, false), 0);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 8, le, false), 0);
    int32_t bad = rows_differ(lc, le, 1, V);
    for (int s = 0; s < 24; s++) {
        CHECK_EQ_INT(engine_eval(c, 0, &tok, 1, lc, false), 0);
        CHECK_EQ_INT(engine_eval(e, 0, &tok, 1, le, false), 0);
        bad += rows_differ(lc, le, 1, V);
    }
    CHECK_MSG(bad == 0, "%d of 25 steps' logits differ from the CPU's", bad);
    struct engine_gpu_experts x;
    engine_gpu_experts(e, &x);
    CHECK_MSG(x.promotions > 0 && x.hits + x.misses == sh.lookups && x.hits > 2 * sh.hits,
              "%llu promotions; %llu hits of %llu lookups where the first 4 experts would have "
              "had %llu", (unsigned long long)x.promotions, (unsigned long long)x.hits,
              (unsigned long long)sh.lookups, (unsigned long long)sh.hits);
out:
    free(lc);
    free(le);
    engine_free(c);
    engine_free(e);
    model_free(m);
    gpu_close(g);
}

/* A read of an expert that fails on the CPU's side of the exchange (staged: a card taken as
 * discrete), or before the GPU computes it in the cache's slot (unified memory), fails that
 * request (-EIO) and nothing else: the engine stays on the GPU, the sequence ends where it was,
 * and goes on with the CPU's bits. */
static void tier_read_fault(bool staged) {
    struct gpu *g = staged ? open_staged() : open_any();
    char path[1024], err[256] = "";
    if (!g || test_make_model(path, sizeof(path), "tierf.gguf", "--preset tiny") < 0) {
        gpu_close(g);
        return;
    }
    struct model *hm = model_load(path, err, sizeof(err));
    struct model *dm = model_open(path, true, err, sizeof(err));
    struct engine *c = hm ? new_engine(hm, QTYPE_F16, 1, 8) : NULL;
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 8;
    ep.n_threads = 2;
    ep.gpu_expert_slots = -1; /* every routed expert on the CPU */
    struct engine *e = dm ? engine_new(dm, &ep, err, sizeof(err)) : NULL;
    struct expert_cache *cache =
        dm ? expert_cache_new(dm, expert_cache_slot_bytes(dm) *
                                      (size_t)expert_cache_min_slots(dm), NULL, err, sizeof(err))
           : NULL;
    const int32_t V = hm ? hm->hp.n_vocab : 0;
    float *lc = calloc((size_t)V + 1, 4), *le = calloc((size_t)V + 1, 4);
    if (!c || !e || !cache || !lc || !le) {
        CHECK_MSG(false, "setting up: %s", err);
        goto out;
    }
    engine_set_experts(e, cache);
    CHECK_EQ_INT(engine_use_gpu(e, g, err, sizeof(err)), 0);
    int32_t ids[9], next[2] = {5, 77};
    prompt(ids, 9, V, 9);
    CHECK_EQ_INT(engine_eval(c, 0, ids, 9, lc, false), 0);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 9, le, false), 0);
    fault_arm(FAULT_READ, 2); /* after the token's embedding row: a missed expert of layer 0 */
    CHECK_EQ_INT(engine_eval(e, 0, &next[0], 1, le, false), -EIO);
    fault_arm(FAULT_READ, 0);
    CHECK_MSG(engine_on_gpu(e), "a failed expert read dropped the GPU");
    CHECK_EQ_INT(engine_n_past(e, 0), 9);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(engine_eval(c, 0, &next[i], 1, lc, false), 0);
        CHECK_EQ_INT(engine_eval(e, 0, &next[i], 1, le, false), 0);
        CHECK_MSG(memcmp(lc, le, (size_t)V * 4) == 0, "after the failed read, step %d differs", i);
    }
out:
    free(lc);
    free(le);
    engine_free(c);
    engine_free(e);
    expert_cache_free(cache);
    model_free(hm);
    model_free(dm);
    gpu_close(g);
}

static void test_tier_read_fault(void) {
    tier_read_fault(true);
    tier_read_fault(false);
}

/* A budget too small for even what must be in VRAM: the engine stays on the CPU, says why, and
 * leaves nothing behind on the device. */
static void test_tier_budget_too_small(void) {
    struct gpu *g0 = open_any();
    const int idx = g0 ? gpu_get_info(g0)->index : -1;
    gpu_close(g0);
    char err[256] = "";
    struct gpu *g = idx >= 0 ? gpu_open(idx, 1u << 20, err, sizeof(err)) : NULL;
    CHECK_MSG(idx < 0 || g != NULL, "gpu_open: %s", err);
    struct model *m = g ? make_load("tiny1m.gguf", "--preset tiny") : NULL;
    struct engine *e = m ? new_engine(m, QTYPE_F16, 1, 8) : NULL;
    if (e) {
        CHECK_EQ_INT(engine_use_gpu(e, g, err, sizeof(err)), -ENOMEM);
        CHECK_MSG(strstr(err, "budget") != NULL, "%s", err);
        CHECK(!engine_on_gpu(e));
        CHECK_EQ_INT(gpu_used_bytes(g), 0);
    }
    engine_free(e);
    model_free(m);
    gpu_close(g);
}

/* What the backend does not take yet stays on the CPU, and says why: experts on disk without a
 * cache, and gemma4's fused experts on three levels. */
static void test_refused(void) {
    struct gpu *g = open_any();
    char path[1024], err[256] = "";
    struct model *m = NULL;
    if (g && test_make_model(path, sizeof(path), "refused.gguf", "--preset tiny") == 0) {
        m = model_open(path, true, err, sizeof(err));
        CHECK_MSG(m != NULL, "model_open: %s", err);
    }
    struct engine *e = m ? new_engine(m, QTYPE_F16, 1, 8) : NULL;
    if (e) {
        CHECK_EQ_INT(engine_use_gpu(e, g, err, sizeof(err)), -ENOTSUP);
        CHECK_MSG(strstr(err, "disk") != NULL, "%s", err);
        CHECK(!engine_on_gpu(e));
        CHECK_EQ_INT(gpu_used_bytes(g), 0); /* nothing left behind */
    }
    engine_free(e);
    model_free(m);
    /* gemma4's experts (a fused gate_up) asked onto three levels: one VRAM slot a layer */
    m = g ? make_load("refused4.gguf", "--preset tiny-gemma4") : NULL;
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 8;
    ep.n_threads = 2;
    ep.gpu_expert_slots = 1;
    e = m ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    CHECK_MSG(!m || e, "engine_new: %s", err);
    if (e) {
        CHECK_EQ_INT(engine_use_gpu(e, g, err, sizeof(err)), -ENOTSUP);
        CHECK_MSG(strstr(err, "fused gate_up") != NULL, "%s", err);
        CHECK(!engine_on_gpu(e));
        CHECK_EQ_INT(gpu_used_bytes(g), 0);
    }
    engine_free(e);
    model_free(m);
    gpu_close(g);
}

/* A device lost mid-request fails that request (-EIO); the engine drops the GPU, its sequences
 * start over, and the next request runs on the CPU with the CPU's logits. */
static void test_device_lost(void) {
    struct pair p;
    if (!pair_open(&p, "lost.gguf", "--preset tiny", 1, 8, 0))
        goto out;
    struct model *m = p.m;
    struct engine *c = p.c, *e = p.e;
    const int32_t V = m->hp.n_vocab;
    int32_t ids[9];
    prompt(ids, 9, V, 5);
    float *lc = calloc((size_t)V, 4), *le = calloc((size_t)V, 4);
    fault_arm(FAULT_GPU_LOST, 1);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 9, le, false), -EIO);
    fault_arm(FAULT_GPU_LOST, 0);
    CHECK(!engine_on_gpu(e));
    CHECK_EQ_INT(engine_n_past(e, 0), 0);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 9, le, false), 0);
    CHECK_EQ_INT(engine_eval(c, 0, ids, 9, lc, false), 0);
    CHECK(memcmp(lc, le, (size_t)V * 4) == 0);
    free(lc);
    free(le);
out:
    pair_free(&p);
}

static const struct test_case cases[] = {
    {"qwen3moe", test_qwen3moe},
    {"quantized", test_quantized},
    {"two_sequences", test_two_sequences},
    {"context_rows", test_context_rows},
    {"qwen35", test_qwen35},
    {"qwen35_checkpoints", test_qwen35_checkpoints},
    {"qwen35_state", test_qwen35_state},
    {"gptoss", test_gptoss},
    {"gptoss_two_sequences", test_gptoss_two_sequences},
    {"gptoss_context_rows", test_gptoss_context_rows},
    {"gptoss_checkpoints", test_gptoss_checkpoints},
    {"gemma4", test_gemma4},
    {"gemma4_two_sequences", test_gemma4_two_sequences},
    {"gemma4_context_rows", test_gemma4_context_rows},
    {"gemma4_checkpoints", test_gemma4_checkpoints},
    {"gemma4_trace", test_gemma4_trace},
    {"tier_qwen3moe", test_tier_qwen3moe},
    {"tier_qwen35moe", test_tier_qwen35moe},
    {"tier_gptoss", test_tier_gptoss},
    {"tier_learns", test_tier_learns},
    {"tier_transit", test_tier_transit},
    {"tier_read_fault", test_tier_read_fault},
    {"tier_budget_too_small", test_tier_budget_too_small},
    {"refused", test_refused},
    {"device_lost", test_device_lost},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
