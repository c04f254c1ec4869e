/* test_engine.c - engine properties on models made by sniper-mkmodel (so the project stands on its
 * own): batched prefill equals token-by-token decode bit for bit; f16 KV stays close to f32 KV;
 * the upcycling identity (a qwen3moe whose experts all copy a dense qwen3's FFN gives the dense
 * model's logits whatever the router picks); llama runs; context overflow and bad ids are refused;
 * truncating the cache and re-feeding reproduces the logits; sequences run side by side in one
 * engine give each one's logits alone, bit for bit; gpt-oss's sliding-window rings wrap without
 * changing a bit, roll back through checkpoints, and keep the KV bytes bounded by the window; a
 * product that cannot run (the fault injector's full job queue, a quantization without a path)
 * fails its step with that error and leaves the sequence where it was, whichever product it is. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "fault.h"
#include "harness.h"
#include "model.h"
#include "rng.h"

/* Makes a model with sniper-mkmodel; returns its path (static buffer) or NULL. */
static const char *make_model(const char *name, const char *args) {
    static char path[1024];
    return test_make_model(path, sizeof(path), name, args) == 0 ? path : NULL;
}

static struct model *load(const char *path) {
    char err[256];
    struct model *m = path ? model_load(path, err, sizeof(err)) : NULL;
    CHECK_MSG(m != NULL, "model_load(%s): %s", path ? path : "(null)", path ? err : "");
    return m;
}

static struct engine *engine_for(struct model *m, enum qtype kv, int32_t n_batch) {
    struct engine_params ep = engine_params_default();
    ep.kv_type = kv;
    ep.n_ctx = 256;
    ep.n_batch = n_batch;
    ep.n_threads = 2;
    char err[256];
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    CHECK_MSG(e != NULL, "engine_new: %s", err);
    return e;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        if (!(x <= d))
            d = x;
    }
    return d;
}

/* Logits of every prompt position with a given batch size. */
static float *run_all(struct model *m, enum qtype kv, int32_t n_batch, const int32_t *ids, int n) {
    struct engine *e = engine_for(m, kv, n_batch);
    float *out = malloc(sizeof(float) * (size_t)m->hp.n_vocab * (size_t)n);
    if (e && out)
        CHECK_EQ_INT(engine_eval(e, 0, ids, n, out, true), 0);
    engine_free(e);
    return out;
}

/* Batched prefill equals token-by-token decode bit for bit; then f16 KV against f32 KV: at least
 * share of the positions within bar (share 0: not compared). */
static void check_invariance(const char *name, const char *args, double bar, double share) {
    struct model *m = load(make_model(name, args));
    if (!m)
        return;
    enum { N = 40 };
    int32_t ids[N];
    rng_lcg_ids(ids, N, m->hp.n_vocab, 7);
    float *one = run_all(m, QTYPE_F32, 1, ids, N);
    float *many = run_all(m, QTYPE_F32, 16, ids, N);
    size_t n = (size_t)N * (size_t)m->hp.n_vocab;
    CHECK_MSG(one && many && memcmp(one, many, n * sizeof(float)) == 0,
              "%s: batched prefill differs from decode by %g", name,
              one && many ? max_abs_diff(one, many, n) : -1.0);
    float *f16 = share > 0 ? run_all(m, QTYPE_F16, 16, ids, N) : NULL;
    const size_t V = (size_t)m->hp.n_vocab;
    int close = 0;
    double worst = 0;
    for (int i = 0; f16 && one && i < N; i++) {
        double d = max_abs_diff(one + i * V, f16 + i * V, V);
        close += d <= bar;
        if (getenv("VERBOSE")) fprintf(stderr, "  pos %d: %.3g\n", i, d);
        worst = d > worst || d != d ? d : worst;
    }
    CHECK_MSG(!f16 || close >= N * share, "%s: f16 KV: only %d/%d positions within %g of f32 KV "
              "(worst %g)", name, close, N, bar, worst);
    bool finite = true;
    for (size_t i = 0; one && i < n; i++)
        finite &= isfinite(one[i]);
    CHECK_MSG(finite, "%s: non-finite logits", name);
    free(one);
    free(many);
    free(f16);
    model_free(m);
}

/* f16 KV against f32 KV: tight on f32 weights; on quantized weights one rounding flip in an
 * activation quantizer moves later logits by 0.01-0.1, so the fixtures' statistical bar. */
static void check_batch_invariance(const char *name, const char *args) {
    if (strstr(args, "f32"))
        check_invariance(name, args, 0.02, 1.0);
    else
        check_invariance(name, args, 0.25, 0.95);
}

static void test_batch_invariance_moe_q8_0(void) {
    check_batch_invariance("moe-q8_0.gguf", "--preset tiny --types q8_0 --seed 11");
}

static void test_batch_invariance_moe_q4_k_m(void) {
    check_batch_invariance("moe-q4km.gguf", "--preset tiny --types q4_k_m --seed 12");
}

static void test_batch_invariance_dense_f32(void) {
    check_batch_invariance("dense-f32.gguf", "--preset tiny-dense --types f32 --seed 13");
}

static void test_batch_invariance_qwen35moe(void) {
    check_batch_invariance("35moe-q4km.gguf", "--preset tiny-qwen35moe --types q4_k_m --seed 15");
}
static void test_batch_invariance_qwen35_f32(void) {
    check_batch_invariance("35-f32.gguf", "--preset tiny-qwen35 --types f32 --seed 16");
}

static int patched_copy(const char *path, const char *out, const void *from, const void *to,
                        size_t n);

/* An engine with a checkpoint every 8 positions, 3 kept, n_batch tokens a step. */
static struct engine *engine_ckpt(struct model *m, int32_t n_batch) {
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = n_batch;
    ep.n_threads = 2;
    ep.checkpoint_every = 8;
    ep.n_checkpoints = 3;
    char err[256];
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    CHECK_MSG(e != NULL, "%s", err);
    return e;
}

/* 40 tokens through a window of 16: the rings (16 - 1 + n_batch rows) wrap both ways. gpt-oss's
 * tiny model is chaotic (random routers with biases, experts driven into the SwiGLU's clamps):
 * f16 KV lands about 2e-3 from f32 KV at every position, until an expert choice flips (here at
 * position 39, by 3.2); with Q8_0 activations the flips start at position 0 (0.1 - 0.9), so only
 * the f32 model compares the two caches. */
static void test_batch_invariance_gptoss_f32(void) {
    check_invariance("oss-f32.gguf", "--preset tiny-gpt-oss --types f32 --seed 17", 0.01, 0.95);
}

static void test_batch_invariance_gptoss_q8_0(void) {
    check_invariance("oss-q8_0.gguf", "--preset tiny-gpt-oss --types q8_0 --seed 18", 0, 0);
}

/* A window ring rolls back in place while it still holds the window before the new end, and to a
 * checkpoint (which keeps each ring's last rows) once it has moved on; what follows is
 * bit-identical to the first run. */
static void test_gptoss_rollback(void) {
    struct model *m = load(make_model("oss-q8_0.gguf",
                                      "--preset tiny-gpt-oss --types q8_0 --seed 18"));
    if (!m)
        return;
    struct engine *e = engine_ckpt(m, 4); /* rings of 16 - 1 + 4 = 19 rows */
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[40];
    rng_lcg_ids(ids, 40, m->hp.n_vocab, 5);
    float *want = malloc(V * 40 * sizeof(float)), *got = malloc(V * 40 * sizeof(float));
    if (!e || !want || !got)
        goto out;
    CHECK(engine_has_checkpoints(e) && !engine_is_recurrent(e));
    CHECK_EQ_INT(engine_eval(e, 0, ids, 40, want, true), 0);
    /* the rings hold 21..39; checkpoints at 8 .. 40, three kept: 16, 32, 40 */
    CHECK_EQ_INT(engine_reusable(e, 0, 38), 38); /* needs 23..37: held */
    CHECK_EQ_INT(engine_reusable(e, 0, 35), 32); /* needs 20..34: 20 is gone */
    CHECK_EQ_INT(engine_reusable(e, 0, 31), 16);
    CHECK_EQ_INT(engine_truncate(e, 0, 38), 38);
    CHECK_EQ_INT(engine_eval(e, 0, ids + 38, 2, got, true), 0);
    CHECK(memcmp(want + 38 * V, got, 2 * V * sizeof(float)) == 0);
    CHECK_EQ_INT(engine_truncate(e, 0, 35), 32);
    CHECK_EQ_INT(engine_eval(e, 0, ids + 32, 8, got, true), 0);
    CHECK(memcmp(want + 32 * V, got, 8 * V * sizeof(float)) == 0);
    CHECK_EQ_INT(engine_truncate(e, 0, 20), 16);
    CHECK_EQ_INT(engine_eval(e, 0, ids + 16, 24, got, true), 0);
    CHECK(memcmp(want + 16 * V, got, 24 * V * sizeof(float)) == 0);
    CHECK_EQ_INT(engine_truncate(e, 0, 7), 0); /* before every checkpoint: from scratch */
    CHECK_EQ_INT(engine_eval(e, 0, ids, 40, got, true), 0);
    CHECK(memcmp(want, got, 40 * V * sizeof(float)) == 0);
out:
    free(want);
    free(got);
    engine_free(e);
    model_free(m);
}

/* The window layers' KV is a ring of window - 1 + n_batch rows whatever the context: the bytes
 * grow with n_ctx only by the full layers' rows. */
static void test_gptoss_kv_bounded(void) {
    struct model *m = load(make_model("oss-f32.gguf",
                                      "--preset tiny-gpt-oss --types f32 --seed 17"));
    if (!m)
        return;
    struct engine_params ep = engine_params_default();
    ep.kv_type = QTYPE_F16;
    ep.n_batch = 8;
    ep.n_threads = 2;
    size_t bytes[3] = {0};
    const int32_t ctx[3] = {256, 512, 4096};
    for (int i = 0; i < 3; i++) {
        ep.n_ctx = ctx[i];
        char err[256];
        struct engine *e = engine_new(m, &ep, err, sizeof(err));
        CHECK_MSG(e != NULL, "%s", err);
        if (!e)
            continue;
        bytes[i] = engine_kv_bytes(e);
        struct engine_kv_shape s = engine_kv_shape(e);
        CHECK_EQ_INT(s.n_layer, 4);
        CHECK_EQ_INT(s.n_swa_layer, 2);
        CHECK_EQ_INT(s.n_swa, 16);
        const size_t row = s.row_bytes; /* 2 KV heads of 64 in f16: 256 bytes */
        CHECK(row == 256);
        /* 2 full layers of n_ctx rows + 2 rings of 16 - 1 + 8 rows, K and V, each layer's from
         * a page boundary */
        const size_t page = (size_t)sysconf(_SC_PAGESIZE), ring = (23 * row + page - 1) / page * page;
        CHECK(bytes[i] == 2 * (2 * row * (size_t)ctx[i] + 2 * ring));
        CHECK_EQ_INT(engine_kv_first(e, 0, 100), 85); /* layer 0 keeps its last 15 */
        CHECK_EQ_INT(engine_kv_first(e, 1, 100), 0);
        engine_free(e);
    }
    fprintf(stderr, "  gpt-oss kv bytes: %zu (ctx 256), %zu (512), %zu (4096)\n", bytes[0],
            bytes[1], bytes[2]);
    /* a context shorter than the window: the rings are the whole context, same logits */
    enum { N = 8 };
    int32_t ids[N];
    rng_lcg_ids(ids, N, m->hp.n_vocab, 3);
    float *want = run_all(m, QTYPE_F32, 4, ids, N);
    float *got = malloc(sizeof(float) * (size_t)m->hp.n_vocab * N);
    ep.kv_type = QTYPE_F32;
    ep.n_ctx = N;
    ep.n_batch = 4;
    char err[256];
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    CHECK_MSG(e != NULL, "context %d: %s", N, err);
    if (e && want && got) {
        CHECK_EQ_INT(engine_eval(e, 0, ids, N, got, true), 0);
        CHECK(memcmp(want, got, sizeof(float) * (size_t)m->hp.n_vocab * N) == 0);
    }
    engine_free(e);
    free(want);
    free(got);
    model_free(m);
}

/* A gpt-oss file that lacks a tensor its layers need is refused with the tensor's name. */
static void test_gptoss_malformed(void) {
    const char *path = make_model("oss-f32.gguf", "--preset tiny-gpt-oss --types f32 --seed 17");
    if (!path)
        return;
    char bad[1200], err[256];
    snprintf(bad, sizeof(bad), "%s.bad", path);
    CHECK_EQ_INT(patched_copy(path, bad, "blk.1.attn_sinks", "blk.1.attn_sinkz", 16), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "blk.1.attn_sinks.weight") != NULL, "%s", err);
    CHECK_EQ_INT(patched_copy(path, bad, "blk.2.ffn_down_exps.bias", "blk.2.ffn_down_exps.bixs",
                              24), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "blk.2.ffn_down_exps.bias") != NULL, "%s", err);
    unlink(bad);
}

/* tiny-gemma4: 6 layers alternating window (heads of 64, 2 KV heads) and global (128, 1), the last
 * two reading the KV of layers 2 and 3. Only the 4 layers with KV of their own have rows (2 of
 * them window rings), each row as wide as the widest layer's; the windows roll back as gpt-oss's
 * do, bit-identically; a prompt in batches of 1 and 5 gives the same bits. */
static void test_gemma4_kv(void) {
    struct model *m = load(make_model("g4-q8_0.gguf",
                                      "--preset tiny-gemma4 --types q8_0 --seed 19"));
    if (!m)
        return;
    struct engine *e = engine_ckpt(m, 4);
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[40];
    rng_lcg_ids(ids, 40, m->hp.n_vocab, 7);
    float *want = malloc(V * 40 * sizeof(float)), *got = malloc(V * 40 * sizeof(float));
    if (!e || !want || !got)
        goto out;
    struct engine_kv_shape sh = engine_kv_shape(e);
    CHECK_EQ_INT(sh.n_layer, 4);
    CHECK_EQ_INT(sh.n_swa_layer, 2);
    CHECK_EQ_INT(sh.n_swa, 16);
    CHECK_EQ_INT(sh.kv_dim, 128);
    CHECK(m->layers[4].kv_src == 2 && m->layers[5].kv_src == 3 && m->layers[3].kv_src == -1);
    CHECK(m->layers[4].head_dim == 64 && m->layers[5].head_dim == 128);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 40, want, true), 0);
    CHECK_EQ_INT(engine_truncate(e, 0, 35), 32); /* the rings have moved on: checkpoint 32 */
    CHECK_EQ_INT(engine_eval(e, 0, ids + 32, 8, got, true), 0);
    CHECK(memcmp(want + 32 * V, got, 8 * V * sizeof(float)) == 0);
    engine_free(e);
    e = engine_ckpt(m, 1);
    CHECK_EQ_INT(e ? engine_eval(e, 0, ids, 40, got, true) : -1, 0);
    CHECK(memcmp(want, got, 40 * V * sizeof(float)) == 0);
out:
    free(want);
    free(got);
    engine_free(e);
    model_free(m);
}

/* A gemma4 file missing a tensor is refused naming it; one that does not say its last layers share
 * KV lacks their K and V, and is refused naming the first missing. */
static void test_gemma4_malformed(void) {
    const char *path = make_model("g4-q8_0.gguf", "--preset tiny-gemma4 --types q8_0 --seed 19");
    if (!path)
        return;
    char bad[1200], err[256];
    snprintf(bad, sizeof(bad), "%s.bad", path);
    CHECK_EQ_INT(patched_copy(path, bad, "blk.3.post_ffw_norm_2", "blk.3.post_ffw_norm_x", 21), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "blk.3.post_ffw_norm_2.weight") != NULL, "%s", err);
    CHECK_EQ_INT(patched_copy(path, bad, "attention.shared_kv_layers",
                              "attention.shared_kv_layerz", 26), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "blk.4.attn_k.weight") != NULL, "%s", err);
    unlink(bad);
}

/* A gemma4 file with per-layer embeddings missing one of their tensors is refused naming it; one
 * that has the table but not the key giving its width is refused naming both (read without it,
 * the layers would silently skip their per-layer inputs). */
static void test_gemma4_ple_malformed(void) {
    const char *path = make_model("g4ple.gguf", "--preset tiny-gemma4-ple --types q8_0 --seed 19");
    if (!path)
        return;
    char bad[1200], err[256];
    snprintf(bad, sizeof(bad), "%s.bad", path);
    struct model *m = model_load(path, err, sizeof(err));
    CHECK_MSG(m && m->hp.n_embd_per_layer == 128 && m->layers[5].ple_out.data, "%s", err);
    model_free(m);
    CHECK_EQ_INT(patched_copy(path, bad, "per_layer_proj_norm", "per_layer_proj_norx", 19), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "per_layer_proj_norm.weight") != NULL, "%s", err);
    CHECK_EQ_INT(patched_copy(path, bad, "blk.2.inp_gate", "blk.2.inp_gatx", 14), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "blk.2.inp_gate.weight") != NULL, "%s", err);
    CHECK_EQ_INT(patched_copy(path, bad, "embedding_length_per_layer_input",
                              "embedding_length_per_layer_inpux", 32), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "per_layer_token_embd") && strstr(err, "embedding_length_per_layer_input"),
              "%s", err);
    unlink(bad);
}

/* A recurrent state rolls back only to checkpoints: every checkpoint_every positions and where
 * engine_checkpoint is called; what follows a rollback is bit-identical to the first run; with
 * more checkpoints than slots the newest stays and the gaps stay even. */
static void test_checkpoints(void) {
    struct model *m = load(make_model("ckpt.gguf", "--preset tiny-qwen35moe --types q8_0 --seed 6"));
    if (!m)
        return;
    struct engine *e = engine_ckpt(m, 512);
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[64];
    rng_lcg_ids(ids, 64, m->hp.n_vocab, 3);
    float *want = malloc(V * 40 * sizeof(float)), *got = malloc(V * 40 * sizeof(float));
    if (!e || !want || !got)
        goto out;
    CHECK(engine_is_recurrent(e) && engine_rec_bytes(e) > engine_state_size(e));
    CHECK_EQ_INT(engine_eval(e, 0, ids, 20, want, true), 0);
    CHECK_EQ_INT(engine_reusable(e, 0, 12), 8);
    CHECK_EQ_INT(engine_reusable(e, 0, 7), 0);
    CHECK_EQ_INT(engine_reusable(e, 0, 25), 20);
    CHECK_EQ_INT(engine_truncate(e, 0, 12), 8);
    CHECK_EQ_INT(engine_n_past(e, 0), 8);
    CHECK_EQ_INT(engine_eval(e, 0, ids + 8, 12, got, true), 0);
    CHECK(memcmp(want + 8 * V, got, 12 * V * sizeof(float)) == 0);
    CHECK_EQ_INT(engine_truncate(e, 0, 19), 16); /* the 16 one came back with the refeed */
    engine_eval(e, 0, ids + 16, 3, NULL, false);
    engine_checkpoint(e, 0); /* at 19: an explicit one */
    CHECK_EQ_INT(engine_eval(e, 0, ids + 19, 21, NULL, false), 0); /* to 40: 24, 32, 40 */
    /* three slots, spread: at 24, 16 (gap 8..19) went; at 32, 19 (8..24); at 40, 8 (0..24 ties
     * with 24's 8..32, the older goes) */
    CHECK_EQ_INT(engine_reusable(e, 0, 39), 32);
    CHECK_EQ_INT(engine_reusable(e, 0, 31), 24);
    CHECK_EQ_INT(engine_reusable(e, 0, 23), 0);
    CHECK_EQ_INT(engine_truncate(e, 0, 5), 0); /* before every checkpoint: from scratch */
    CHECK_EQ_INT(engine_eval(e, 0, ids, 20, got, true), 0);
    CHECK(memcmp(want, got, 20 * V * sizeof(float)) == 0);
out:
    free(want);
    free(got);
    engine_free(e);
    model_free(m);
}

/* Copies the file at path with the first occurrence of from (bytes) replaced by to (same length)
 * to out; returns 0, or -1 when from is not there. */
static int patched_copy(const char *path, const char *out, const void *from, const void *to,
                        size_t n) {
    size_t len = 0;
    uint8_t *b = test_read_file(path, &len);
    int rc = -1;
    for (size_t i = 0; b && i + n <= len; i++)
        if (memcmp(b + i, from, n) == 0) {
            memcpy(b + i, to, n);
            rc = test_write_file(out, b, len);
            break;
        }
    free(b);
    return rc;
}

/* A hybrid file that disagrees with itself is refused with the name of what is wrong: a missing
 * DeltaNet tensor, DeltaNet sizes that do not add up. */
static void test_qwen35_malformed(void) {
    const char *path = make_model("bad35.gguf", "--preset tiny-qwen35moe --types q8_0 --seed 8");
    if (!path)
        return;
    char bad[1200], err[256];
    snprintf(bad, sizeof(bad), "%s.bad", path);
    CHECK_EQ_INT(patched_copy(path, bad, "blk.1.ssm_a", "blk.1.ssm_q", 11), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "\"blk.1.ssm_a\" is missing") != NULL, "%s", err);
    /* ssm.inner_size (u32 256 after its key and type) made 255 */
    const char key[] = "qwen35moe.ssm.inner_size";
    uint8_t from[sizeof(key) - 1 + 8], to[sizeof(from)];
    memcpy(from, key, sizeof(key) - 1);
    const uint8_t tail[8] = {4, 0, 0, 0, 0, 1, 0, 0}; /* type u32, value 256 */
    memcpy(from + sizeof(key) - 1, tail, 8);
    memcpy(to, from, sizeof(from));
    to[sizeof(key) - 1 + 4] = 255;
    to[sizeof(key) - 1 + 5] = 0;
    CHECK_EQ_INT(patched_copy(path, bad, from, to, sizeof(from)), 0);
    CHECK(model_load(bad, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "inconsistent DeltaNet sizes") != NULL, "%s", err);
    unlink(bad);
}

/* Multi-token-prediction blocks after the trunk (block_count counts them, nextn_predict_layers
 * names them) are not part of the model: the same trunk with one gives the same logits. */
static void test_qwen35_nextn_ignored(void) {
    static char a_path[1024], b_path[1024];
    if (test_make_model(a_path, sizeof(a_path), "trunk.gguf",
                        "--preset tiny-qwen35moe --types q8_0 --seed 12") < 0 ||
        test_make_model(b_path, sizeof(b_path), "mtp.gguf",
                        "--preset tiny-qwen35moe --types q8_0 --seed 12 --nextn 1") < 0)
        return;
    struct model *a = load(a_path), *b = load(b_path);
    if (a && b) {
        CHECK_EQ_INT(b->hp.n_layer, a->hp.n_layer);
        enum { N = 12 };
        int32_t ids[N];
        rng_lcg_ids(ids, N, a->hp.n_vocab, 4);
        float *la = run_all(a, QTYPE_F32, 4, ids, N), *lb = run_all(b, QTYPE_F32, 4, ids, N);
        CHECK(la && lb && memcmp(la, lb, sizeof(float) * (size_t)N * (size_t)a->hp.n_vocab) == 0);
        free(la);
        free(lb);
    }
    model_free(a);
    model_free(b);
}

static void test_llama_runs(void) {
    check_batch_invariance("llama-q8_0.gguf", "--preset tiny-dense --arch llama --types q8_0 --seed 14");
}

/* The upcycling identity: same attention, every expert a copy of the dense FFN, renormalised
 * top-k weights summing to 1 -> the same function as the dense model. */
static void test_upcycling_identity(void) {
    const char *shape = "--types f32 --seed 21 --n-ff 256 --n-ff-exp 256";
    char args[512];
    snprintf(args, sizeof(args), "--preset tiny-dense %s", shape);
    struct model *dense = load(make_model("up-dense.gguf", args));
    snprintf(args, sizeof(args), "--preset tiny --upcycle %s", shape);
    struct model *moe = load(make_model("up-moe.gguf", args));
    if (!dense || !moe)
        goto out;
    CHECK_EQ_INT(dense->hp.n_vocab, moe->hp.n_vocab);
    CHECK(moe->hp.n_expert > 1 && dense->hp.n_expert == 0);
    enum { N = 24 };
    int32_t ids[N];
    rng_lcg_ids(ids, N, dense->hp.n_vocab, 3);
    float *a = run_all(dense, QTYPE_F32, 8, ids, N);
    float *b = run_all(moe, QTYPE_F32, 8, ids, N);
    double d = a && b ? max_abs_diff(a, b, (size_t)N * (size_t)dense->hp.n_vocab) : 1e9;
    fprintf(stderr, "  upcycling identity: max |dense - moe| = %.3g\n", d);
    CHECK_MSG(d <= 1e-4, "upcycled moe differs from dense by %g", d);
    free(a);
    free(b);
out:
    model_free(dense);
    model_free(moe);
}

/* Errors leave the cache as it was; truncation then re-feeding reproduces the logits. */
static void test_limits_and_truncate(void) {
    struct model *m = load(make_model("lim.gguf", "--preset tiny --types q8_0 --seed 5"));
    if (!m)
        return;
    struct engine *e = engine_for(m, QTYPE_F16, 8);
    if (!e) {
        model_free(m);
        return;
    }
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[300];
    rng_lcg_ids(ids, 300, m->hp.n_vocab, 9);
    float *l1 = malloc(V * sizeof(float)), *l2 = malloc(V * sizeof(float));
    CHECK_EQ_INT(engine_eval(e, 0, ids, 257, NULL, false), -ENOSPC);
    CHECK_EQ_INT(engine_n_past(e, 0), 0);
    int32_t bad = m->hp.n_vocab;
    CHECK_EQ_INT(engine_eval(e, 0, &bad, 1, l1, false), -EINVAL);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 20, l1, false), 0);
    CHECK_EQ_INT(engine_n_past(e, 0), 20);
    engine_truncate(e, 0, 12);
    CHECK_EQ_INT(engine_n_past(e, 0), 12);
    CHECK_EQ_INT(engine_eval(e, 0, ids + 12, 8, l2, false), 0);
    CHECK(memcmp(l1, l2, V * sizeof(float)) == 0);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 236, NULL, false), 0);
    CHECK_EQ_INT(engine_n_ctx(e), 256);
    CHECK_EQ_INT(engine_eval(e, 0, ids, 1, l1, false), -ENOSPC);
    free(l1);
    free(l2);
    engine_free(e);
    model_free(m);
}

/* The KV types by name (engine_kv_type_named): exactly those ENGINE_KV_TYPE_NAMES lists, each to
 * the type qtype_name calls so; every other type's name, a name in another case, and nothing name
 * none. */
static void test_kv_type_names(void) {
    const char *list = ENGINE_KV_TYPE_NAMES;
    int listed = 0;
    for (int t = 0; t < QTYPE_COUNT; t++) {
        if (!qtype_is_known((uint32_t)t))
            continue;
        const char *name = qtype_name((enum qtype)t);
        const size_t n = strlen(name);
        bool in_list = false;
        for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
            in_list |= (p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0');
        listed += in_list;
        CHECK_MSG(engine_kv_type_named(name) == (in_list ? (enum qtype)t : QTYPE_COUNT),
                  "\"%s\": %d, listed %d", name, (int)engine_kv_type_named(name), in_list);
    }
    CHECK_EQ_INT(listed, 4);
    CHECK_EQ_INT(engine_kv_type_named("F16"), QTYPE_COUNT);
    CHECK_EQ_INT(engine_kv_type_named(""), QTYPE_COUNT);
    CHECK_EQ_INT(engine_kv_type_named("q8_0 "), QTYPE_COUNT);
}

/* Quantized KV caches (q8_0, q4_0): close to the f32 cache (cosine of every position's logits,
 * same argmax most of the time), still batch-invariant, and smaller. */
static void test_quantized_kv(void) {
    struct model *m = load(make_model("kvq.gguf", "--preset tiny --types q8_0 --seed 21"));
    if (!m)
        return;
    enum { N = 48 };
    int32_t ids[N];
    rng_lcg_ids(ids, N, m->hp.n_vocab, 99);
    const size_t V = (size_t)m->hp.n_vocab;
    float *ref = run_all(m, QTYPE_F32, 512, ids, N);
    /* f16 for scale: this random model is chaotic (f16 vs f32: 0.991), q8_0 0.994, q4_0 0.981 */
    const enum qtype types[3] = {QTYPE_F16, QTYPE_Q8_0, QTYPE_Q4_0};
    const double min_cos[3] = {0.98, 0.98, 0.95};
    for (int k = 0; k < 3; k++) {
        float *got = run_all(m, types[k], 512, ids, N);
        float *one = run_all(m, types[k], 7, ids, N);
        double worst = 1.0;
        int same = 0;
        for (int t = 0; ref && got && t < N; t++) {
            const float *a = ref + (size_t)t * V, *b = got + (size_t)t * V;
            double ab = 0, aa = 0, bb = 0;
            size_t ia = 0, ib = 0;
            for (size_t i = 0; i < V; i++) {
                ab += (double)a[i] * b[i];
                aa += (double)a[i] * a[i];
                bb += (double)b[i] * b[i];
                ia = a[i] > a[ia] ? i : ia;
                ib = b[i] > b[ib] ? i : ib;
            }
            double cos = ab / sqrt(aa * bb);
            worst = cos < worst ? cos : worst;
            same += ia == ib;
        }
        fprintf(stderr, "  kv %s: worst cosine %.5f, same argmax %d of %d\n", qtype_name(types[k]),
                worst, same, N);
        CHECK_MSG(worst >= min_cos[k], "kv %s: cosine %.5f", qtype_name(types[k]), worst);
        CHECK(same >= N * 3 / 4);
        CHECK(got && one && memcmp(got, one, sizeof(float) * V * N) == 0); /* batch-invariant */
        free(got);
        free(one);
    }
    struct engine *e16 = engine_for(m, QTYPE_F16, 64), *e8 = engine_for(m, QTYPE_Q8_0, 64);
    CHECK(e16 && e8 && engine_kv_bytes(e8) < engine_kv_bytes(e16) * 6 / 10);
    engine_free(e16);
    engine_free(e8);
    free(ref);
    model_free(m);
}

/* ---- several sequences in one engine ---------------------------------------------------------- */

enum { MS_SEQ = 3, MS_DEC = 6, MS_MAX_LEN = 40 };

/* An engine with n_seq sequences, small batches and (for recurrent models) a checkpoint every 5
 * positions, so steps split parts and cut segments at checkpoints. */
static struct engine *engine_multi(struct model *m, int32_t n_seq, int32_t n_batch) {
    struct engine_params ep = engine_params_default();
    ep.kv_type = QTYPE_F32;
    ep.n_ctx = 128;
    ep.n_batch = n_batch;
    ep.n_threads = 2;
    ep.n_seq = n_seq;
    ep.checkpoint_every = 5;
    char err[256];
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    CHECK_MSG(e != NULL, "engine_new: %s", err);
    return e;
}

/* Sequences of different prompt lengths run side by side: two prompts in one call, then the third
 * prompt beside the first two's decode tokens, then decode steps of all three. Every logits row is
 * bit-identical to the same sequence run alone in its own engine. */
static void check_multi_seq_len(const char *name, const char *args, const int32_t len[MS_SEQ]) {
    struct model *m = load(make_model(name, args));
    if (!m)
        return;
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[MS_SEQ][MS_MAX_LEN + MS_DEC];
    float *want[MS_SEQ], *got[MS_SEQ];
    for (int s = 0; s < MS_SEQ; s++) {
        rng_lcg_ids(ids[s], len[s] + MS_DEC, m->hp.n_vocab, 40 + (uint32_t)s);
        want[s] = malloc(V * (size_t)(len[s] + MS_DEC) * sizeof(float));
        got[s] = calloc(V * (size_t)(len[s] + MS_DEC), sizeof(float));
        struct engine *alone = engine_multi(m, 1, 16);
        if (alone)
            CHECK_EQ_INT(engine_eval(alone, 0, ids[s], len[s] + MS_DEC, want[s], true), 0);
        engine_free(alone);
    }
    struct engine *e = engine_multi(m, MS_SEQ, 8);
    if (!e)
        goto out;
    struct engine_part parts[MS_SEQ] = {
        {.seq = 2, .tokens = ids[0], .n = len[0], .logits = got[0], .all_logits = true},
        {.seq = 0, .tokens = ids[1], .n = len[1], .logits = got[1], .all_logits = true}};
    const int32_t slot_of[MS_SEQ] = {2, 0, 1}; /* sequence s runs in engine sequence slot_of[s] */
    CHECK_EQ_INT(engine_eval_batch(e, parts, 2), 0);
    for (int s = 0; s < 2; s++) /* the first decode token of 0 and 1 beside prompt 2 */
        parts[s] = (struct engine_part){.seq = slot_of[s], .tokens = &ids[s][len[s]], .n = 1,
                                        .logits = got[s] + (size_t)len[s] * V};
    parts[2] = (struct engine_part){.seq = 1, .tokens = ids[2], .n = len[2], .logits = got[2],
                                    .all_logits = true};
    CHECK_EQ_INT(engine_eval_batch(e, parts, 3), 0);
    for (int d = 0; d < MS_DEC; d++) {
        int n = 0;
        for (int s = 0; s < MS_SEQ; s++) {
            int32_t pos = len[s] + d + (s < 2);
            if (pos < len[s] + MS_DEC)
                parts[n++] = (struct engine_part){.seq = slot_of[s], .tokens = &ids[s][pos],
                                                  .n = 1, .logits = got[s] + (size_t)pos * V};
        }
        CHECK_EQ_INT(engine_eval_batch(e, parts, n), 0);
    }
    for (int s = 0; s < MS_SEQ; s++) {
        CHECK_EQ_INT(engine_n_past(e, slot_of[s]), len[s] + MS_DEC);
        size_t bytes = V * (size_t)(len[s] + MS_DEC) * sizeof(float);
        CHECK_MSG(memcmp(want[s], got[s], bytes) == 0, "%s: sequence %d beside others differs "
                  "from it alone by %g", name, s, max_abs_diff(want[s], got[s], bytes / 4));
    }
    engine_free(e);
out:
    for (int s = 0; s < MS_SEQ; s++) {
        free(want[s]);
        free(got[s]);
    }
    model_free(m);
}

static void check_multi_seq(const char *name, const char *args) {
    const int32_t len[MS_SEQ] = {11, 4, 17};
    check_multi_seq_len(name, args, len);
}

static void test_multi_seq_moe(void) {
    check_multi_seq("moe-q4km.gguf", "--preset tiny --types q4_k_m --seed 12");
}

static void test_multi_seq_dense(void) {
    check_multi_seq("dense-f32.gguf", "--preset tiny-dense --types f32 --seed 13");
}

static void test_multi_seq_qwen35moe(void) {
    check_multi_seq("35moe-q4km.gguf", "--preset tiny-qwen35moe --types q4_k_m --seed 15");
}

static void test_multi_seq_qwen35(void) {
    check_multi_seq("35-f32.gguf", "--preset tiny-qwen35 --types f32 --seed 16");
}

/* Prompts longer than gpt-oss's window of 16 and than its rings (16 - 1 + 8 rows): each
 * sequence's rings wrap while the others' tokens share its steps. */
static void test_multi_seq_gptoss(void) {
    const int32_t len[MS_SEQ] = {29, 4, 37};
    check_multi_seq_len("oss-q8_0.gguf", "--preset tiny-gpt-oss --types q8_0 --seed 18", len);
}

/* gemma4's soft-capped logits: a step's several requests (some of several rows) have their
 * capping's chunks numbered across them, and each is capped once, as alone. */
static void test_multi_seq_gemma4(void) {
    check_multi_seq("g4-q8_0.gguf", "--preset tiny-gemma4 --types q8_0 --seed 19");
}

/* Bad parts are refused before anything is fed; a part that would overflow its sequence's context
 * leaves every sequence as it was; truncation, checkpoints and n_past are per sequence. */
static void test_multi_seq_limits(void) {
    struct model *m = load(make_model("35moe-q4km.gguf",
                                      "--preset tiny-qwen35moe --types q4_k_m --seed 15"));
    struct engine *e = m ? engine_multi(m, 2, 8) : NULL;
    if (!e)
        goto out;
    int32_t ids[130];
    rng_lcg_ids(ids, 130, m->hp.n_vocab, 9);
    struct engine_part two[2] = {{.seq = 0, .tokens = ids, .n = 3},
                                 {.seq = 0, .tokens = ids, .n = 3}};
    CHECK_EQ_INT(engine_eval_batch(e, two, 2), -EINVAL); /* sequence twice */
    two[1].seq = 2;
    CHECK_EQ_INT(engine_eval_batch(e, two, 2), -EINVAL); /* out of range */
    two[1] = (struct engine_part){.seq = 1, .tokens = ids, .n = 129};
    CHECK_EQ_INT(engine_eval_batch(e, two, 2), -ENOSPC); /* 129 > n_ctx 128 */
    CHECK_EQ_INT(engine_n_past(e, 0), 0);
    CHECK_EQ_INT(engine_n_past(e, 1), 0);
    two[1].n = 12;
    CHECK_EQ_INT(engine_eval_batch(e, two, 2), 0);
    CHECK_EQ_INT(engine_n_past(e, 0), 3);
    CHECK_EQ_INT(engine_n_past(e, 1), 12);
    /* checkpoints every 5 positions, per sequence: 1 resumes at 10, 0 has none but 0 */
    CHECK_EQ_INT(engine_reusable(e, 1, 11), 10);
    CHECK_EQ_INT(engine_reusable(e, 0, 2), 0);
    CHECK_EQ_INT(engine_truncate(e, 1, 11), 10);
    CHECK_EQ_INT(engine_n_past(e, 0), 3);
    CHECK_EQ_INT(engine_n_seq(e), 2);
    engine_free(e);
out:
    model_free(m);
}

/* ---- a product that cannot run fails its step -------------------------------------------------- */

enum { PF_PROMPT = 6, PF_MAX_NTH = 400 };

struct pf_site {
    enum fault_site site;
    const char *name;
    int rc; /* what the eval must return */
};

/* Fails the nth product (queued or quantized) of one eval from now, for nth = 1, 2, ... until the
 * eval has fewer: each failed eval returns the site's error and leaves the sequence at n_past
 * (a recurrent one at its checkpoint there); the eval that no fault reaches gives want's rows bit
 * for bit. A skipped product would leave stale rows in the logits and return 0. Returns the
 * number of products the eval has (0 when a check failed). */
static int check_fault_every(struct engine *e, const struct pf_site *f, const char *name,
                             const char *what, const int32_t *ids, int32_t n, float *got,
                             const float *want, size_t n_floats) {
    const int32_t past = engine_n_past(e, 0);
    for (int nth = 1; nth <= PF_MAX_NTH; nth++) {
        fault_arm(f->site, nth);
        int rc = engine_eval(e, 0, ids, n, got, n > 1);
        fault_arm(f->site, 0);
        if (rc == 0 && nth == 1) { /* the fault never fired? then it was skipped silently */
            CHECK_MSG(memcmp(got, want, n_floats * sizeof(float)) == 0, "%s: the first product "
                      "of a %s step failed (%s) and the eval returned 0 with logits off by %g",
                      name, what, f->name, max_abs_diff(got, want, n_floats));
            return 0;
        }
        if (rc == 0) { /* nth - 1 products: this eval ran whole */
            CHECK_MSG(memcmp(got, want, n_floats * sizeof(float)) == 0, "%s: a %s step after "
                      "%d failed ones differs by %g", name, what, nth - 1,
                      max_abs_diff(got, want, n_floats));
            return nth - 1;
        }
        CHECK_MSG(rc == f->rc, "%s: product %d of a %s step failed (%s): eval returned %d, not "
                  "%d", name, nth, what, f->name, rc, f->rc);
        CHECK_MSG(engine_n_past(e, 0) == past, "%s: a failed %s step moved n_past %d -> %d",
                  name, what, past, engine_n_past(e, 0));
        if (rc != f->rc || engine_n_past(e, 0) != past)
            return 0;
    }
    CHECK_MSG(false, "%s: a %s step has more than %d products", name, what, PF_MAX_NTH);
    return 0;
}

/* Every product of a prompt step, then of a decode step, fails in turn: through the job queue
 * (matmul_add's -ENOSPC, a full queue) and through the activations' quantization (matmul_quantize's
 * -ENOTSUP, a type without a path). The engine must return the error, never logits with a product
 * missing, and stay usable. */
static void check_product_faults(const char *name, const char *args) {
    static const struct pf_site sites[] = {{FAULT_QUEUE, "FAULT_QUEUE", -ENOSPC},
                                           {FAULT_QUANTIZE, "FAULT_QUANTIZE", -ENOTSUP}};
    struct model *m = load(make_model(name, args));
    if (!m)
        return;
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[PF_PROMPT + 1];
    rng_lcg_ids(ids, PF_PROMPT + 1, m->hp.n_vocab, 23);
    float *want = calloc(V * (PF_PROMPT + 1), sizeof(float));
    float *got = calloc(V * (PF_PROMPT + 1), sizeof(float));
    struct engine *ref = engine_for(m, QTYPE_F32, 16);
    if (!want || !got || !ref)
        goto out;
    CHECK_EQ_INT(engine_eval(ref, 0, ids, PF_PROMPT, want, true), 0);
    CHECK_EQ_INT(engine_eval(ref, 0, ids + PF_PROMPT, 1, want + PF_PROMPT * V, false), 0);
    for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
        struct engine *e = engine_for(m, QTYPE_F32, 16);
        if (!e)
            break;
        int n_prompt = check_fault_every(e, &sites[i], name, "prompt", ids, PF_PROMPT, got, want,
                                         PF_PROMPT * V);
        engine_checkpoint(e, 0); /* a failed decode step of a recurrent model returns here */
        int n_decode = n_prompt ? check_fault_every(e, &sites[i], name, "decode", ids + PF_PROMPT,
                                                    1, got + PF_PROMPT * V, want + PF_PROMPT * V,
                                                    V) : 0;
        CHECK_MSG(n_prompt == 0 || n_decode > 4 * m->hp.n_layer, "%s: %s: only %d products in a "
                  "decode step of %d layers", name, sites[i].name, n_decode, m->hp.n_layer);
        engine_free(e);
    }
out:
    engine_free(ref);
    free(want);
    free(got);
    model_free(m);
}

static void test_product_faults_moe(void) {
    check_product_faults("moe-q8_0.gguf", "--preset tiny --types q8_0 --seed 11");
}

static void test_product_faults_dense(void) {
    check_product_faults("dense-f32.gguf", "--preset tiny-dense --types f32 --seed 13");
}

static void test_product_faults_qwen35moe(void) {
    check_product_faults("35moe-q4km.gguf", "--preset tiny-qwen35moe --types q4_k_m --seed 15");
}

static void test_product_faults_gptoss(void) {
    check_product_faults("oss-q8_0.gguf", "--preset tiny-gpt-oss --types q8_0 --seed 18");
}

static const struct test_case cases[] = {
    {"quantized_kv", test_quantized_kv},
    {"batch_invariance_moe_q8_0", test_batch_invariance_moe_q8_0},
    {"batch_invariance_moe_q4_k_m", test_batch_invariance_moe_q4_k_m},
    {"batch_invariance_dense_f32", test_batch_invariance_dense_f32},
    {"llama_runs", test_llama_runs},
    {"batch_invariance_qwen35moe", test_batch_invariance_qwen35moe},
    {"batch_invariance_qwen35_f32", test_batch_invariance_qwen35_f32},
    {"checkpoints", test_checkpoints},
    {"qwen35_malformed", test_qwen35_malformed},
    {"qwen35_nextn_ignored", test_qwen35_nextn_ignored},
    {"upcycling_identity", test_upcycling_identity},
    {"limits_and_truncate", test_limits_and_truncate},
    {"kv_type_names", test_kv_type_names},
    {"multi_seq_moe", test_multi_seq_moe},
    {"multi_seq_dense", test_multi_seq_dense},
    {"multi_seq_qwen35moe", test_multi_seq_qwen35moe},
    {"multi_seq_qwen35", test_multi_seq_qwen35},
    {"multi_seq_limits", test_multi_seq_limits},
    {"batch_invariance_gptoss_f32", test_batch_invariance_gptoss_f32},
    {"batch_invariance_gptoss_q8_0", test_batch_invariance_gptoss_q8_0},
    {"gptoss_rollback", test_gptoss_rollback},
    {"gemma4_kv", test_gemma4_kv},
    {"gemma4_malformed", test_gemma4_malformed},
    {"gemma4_ple_malformed", test_gemma4_ple_malformed},
    {"gptoss_kv_bounded", test_gptoss_kv_bounded},
    {"gptoss_malformed", test_gptoss_malformed},
    {"multi_seq_gptoss", test_multi_seq_gptoss},
    {"multi_seq_gemma4", test_multi_seq_gemma4},
    {"product_faults_moe", test_product_faults_moe},
    {"product_faults_dense", test_product_faults_dense},
    {"product_faults_qwen35moe", test_product_faults_qwen35moe},
    {"product_faults_gptoss", test_product_faults_gptoss},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
