/* test_gpu_engine.c - the engine on the GPU (backend_vulkan.c) against the engine on the CPU, on
 * whatever Vulkan device the machine has (lavapipe in CI): the same prompt's logits, row for row,
 * compared with memcmp (the accumulation contract promises the same bits), greedy decode, two
 * sequences in one step, a context's rows exported and imported, Qwen3.5 (DeltaNet and gated
 * attention: its checkpoints and recurrent state too), what the backend refuses, and
 * a device lost in the middle of a request (the engine goes on on the CPU). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fault.h"
#include "gpu.h"
#include "harness.h"
#include "model.h"

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

/* Runs the same prompt (all rows) and greedy decode on e's CPU twin c and on e, compares. */
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

/* Two sequences fed in one call (one step carries both) give each the logits it gets alone. */
static void test_two_sequences(void) {
    struct gpu *g = open_any();
    struct model *m = g ? make_load("moe2.gguf", "--preset tiny") : NULL;
    struct engine *c = m ? new_engine(m, QTYPE_F16, 2, 64) : NULL;
    struct engine *e = m ? new_engine(m, QTYPE_F16, 2, 64) : NULL;
    char err[256] = "";
    if (c && e && engine_use_gpu(e, g, err, sizeof(err)) == 0) {
        const int32_t V = m->hp.n_vocab;
        int32_t a[11], b[5];
        prompt(a, 11, V, 2);
        prompt(b, 5, V, 3);
        float *lc = calloc(16 * (size_t)V, sizeof(float)), *le = calloc(16 * (size_t)V, 4);
        struct engine_part pc[2] = {{.seq = 0, .tokens = a, .n = 11, .logits = lc,
                                     .all_logits = true},
                                    {.seq = 1, .tokens = b, .n = 5, .logits = lc + 11 * V,
                                     .all_logits = true}};
        struct engine_part pe[2] = {pc[0], pc[1]};
        pe[0].logits = le;
        pe[1].logits = le + 11 * V;
        CHECK_EQ_INT(engine_eval(c, 0, a, 11, lc, true), 0); /* alone, on the CPU */
        CHECK_EQ_INT(engine_eval(c, 1, b, 5, lc + 11 * V, true), 0);
        CHECK_EQ_INT(engine_eval_batch(e, pe, 2), 0);         /* together, on the GPU */
        CHECK_MSG(rows_differ(lc, le, 16, V) == 0, "two sequences in a step differ from alone");
        (void)pc;
        free(lc);
        free(le);
    } else if (e) {
        CHECK_MSG(0, "engine_use_gpu: %s", err);
    }
    engine_free(c);
    engine_free(e);
    model_free(m);
    gpu_close(g);
}

/* A sequence's rows exported from the GPU and imported into a CPU engine (and back) continue
 * as the original would. */
static void test_context_rows(void) {
    struct pair p;
    if (!pair_open(&p, "dense.gguf", "--preset tiny-dense", 1, 32, 0))
        goto out;
    struct model *m = p.m;
    struct engine *c = p.c, *e = p.e;
    const int32_t V = m->hp.n_vocab, N = 20;
    int32_t ids[20], next = 5;
    prompt(ids, N, V, 4);
    float *l1 = calloc((size_t)V, 4), *l2 = calloc((size_t)V, 4);
    CHECK_EQ_INT(engine_eval(e, 0, ids, N, l1, false), 0);
    const struct engine_kv_shape sh = engine_kv_shape(e);
    const size_t bytes = (size_t)N * sh.row_bytes;
    uint8_t *k = malloc(bytes * (size_t)sh.n_layer), *v = malloc(bytes * (size_t)sh.n_layer);
    for (int32_t il = 0; il < sh.n_layer; il++)
        CHECK_EQ_INT(engine_kv_export(e, 0, il, N, k + il * bytes, v + il * bytes), 0);
    engine_truncate(c, 0, 0);
    for (int32_t il = 0; il < sh.n_layer; il++)
        CHECK_EQ_INT(engine_kv_import(c, 0, il, sh.type, sh.kv_dim, N, k + il * bytes,
                                      v + il * bytes), 0);
    CHECK_EQ_INT(engine_kv_commit(c, 0, N), 0);
    CHECK_EQ_INT(engine_eval(c, 0, &next, 1, l1, false), 0); /* the CPU goes on from the rows */
    engine_truncate(e, 0, 0);
    for (int32_t il = 0; il < sh.n_layer; il++) /* and the GPU from its own rows, re-imported */
        CHECK_EQ_INT(engine_kv_import(e, 0, il, sh.type, sh.kv_dim, N, k + il * bytes,
                                      v + il * bytes), 0);
    CHECK_EQ_INT(engine_kv_commit(e, 0, N), 0);
    CHECK_EQ_INT(engine_eval(e, 0, &next, 1, l2, false), 0);
    CHECK_MSG(memcmp(l1, l2, (size_t)V * 4) == 0, "the GPU's rows do not continue as the CPU's");
    free(k);
    free(v);
    free(l1);
    free(l2);
out:
    pair_free(&p);
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

/* What the backend does not take yet stays on the CPU, and says why. */
static void test_refused(void) {
    struct gpu *g = open_any();
    struct model *m = g ? make_load("oss.gguf", "--preset tiny-gpt-oss") : NULL;
    struct engine *e = m ? new_engine(m, QTYPE_F16, 1, 8) : NULL;
    char err[256] = "";
    if (e) {
        CHECK_EQ_INT(engine_use_gpu(e, g, err, sizeof(err)), -ENOTSUP);
        CHECK_MSG(strstr(err, "sliding-window") != NULL, "%s", err);
        CHECK(!engine_on_gpu(e));
        CHECK_EQ_INT(gpu_used_bytes(g), 0); /* nothing left behind */
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
    {"refused", test_refused},
    {"device_lost", test_device_lost},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
