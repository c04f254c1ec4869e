/* test_ctxfile.c - context files (server/context/ctxfile) on models made by sniper-mkmodel: the
 * hash's golden values; a saved and reloaded KV continues decoding with logits bit-identical to the
 * engine that prefilled everything (f32 and f16 KV, raw and zstd; 479 tokens with f16); quantized
 * storage's size ratio, cosine and next-token agreement (printed); gpt-oss's window layers saved as
 * their last rows after their rings wrapped, and the loaded context continuing bit-identically;
 * versions 1 and 2 still read; truncated, corrupted, wrong-version and wrong-model files refused
 * with distinct errors; a fuzz loop over mutated files; a full disk leaves no file. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ctxfile.h"
#include "engine.h"
#include "fault.h"
#include "harness.h"
#include "hash64.h"
#include "model.h"
#include "ops.h"
#include "quant.h"
#include "rng.h"

enum { N_PROMPT = 24, N_GEN = 12, N_CTX = 128 };

static struct model *g_model;

static struct model *model_a(void) {
    struct model *m = g_model;
    static char path[1024];
    char err[256];
    if (!m && test_make_model(path, sizeof(path), "ctx_a.gguf", "--preset tiny --seed 3") == 0) {
        m = g_model = model_load(path, err, sizeof(err));
        CHECK_MSG(m != NULL, "model_load: %s", err);
    }
    return m;
}

static struct model *g_hybrid;

/* A qwen35moe model: its contexts carry the Gated DeltaNet state after the KV rows. */
static struct model *model_hybrid(void) {
    static char path[1024];
    char err[256];
    if (!g_hybrid &&
        test_make_model(path, sizeof(path), "ctx_h.gguf", "--preset tiny-qwen35moe --seed 3") == 0) {
        g_hybrid = model_load(path, err, sizeof(err));
        CHECK_MSG(g_hybrid != NULL, "model_load: %s", err);
    }
    return g_hybrid;
}

static struct model *g_gptoss;

/* A gpt-oss model: half its layers keep a sliding window (16) in a ring. */
static struct model *model_gptoss(void) {
    static char path[1024];
    char err[256];
    if (!g_gptoss && test_make_model(path, sizeof(path), "ctx_g.gguf",
                                     "--preset tiny-gpt-oss --types q8_0 --seed 3") == 0) {
        g_gptoss = model_load(path, err, sizeof(err));
        CHECK_MSG(g_gptoss != NULL, "model_load: %s", err);
    }
    return g_gptoss;
}

static struct engine *engine_batch(struct model *m, enum qtype kv, int32_t n_ctx,
                                   int32_t n_batch) {
    struct engine_params ep = engine_params_default();
    ep.kv_type = kv;
    ep.n_ctx = n_ctx;
    ep.n_batch = n_batch;
    ep.n_threads = 2;
    char err[256];
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    CHECK_MSG(e != NULL, "engine_new: %s", err);
    return e;
}

static struct engine *engine_for(struct model *m, enum qtype kv, int32_t n_ctx) {
    return engine_batch(m, kv, n_ctx, 512);
}

static const char *tmp_path(const char *name) {
    static char p[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s/%s", test_tmpdir(), name);
    return p[k];
}

/* An engine with the fixed prompt prefilled; last row's logits into logits when not NULL. */
static struct engine *prefilled(struct model *m, enum qtype kv, int32_t *ids, float *logits) {
    struct engine *e = engine_for(m, kv, N_CTX);
    rng_lcg_ids(ids, N_PROMPT, m->hp.n_vocab, 11);
    if (e)
        CHECK_EQ_INT(engine_eval(e, 0, ids, N_PROMPT, logits, false), 0);
    return e;
}

/* Greedy decoding from the logits of the last token: n_gen steps, all logits in out[n_gen][vocab]
 * and the tokens chosen in toks (fed in order). With force, the tokens in toks are fed instead of
 * the argmax (teacher forcing) and agree counts argmax == toks[i]. */
static int greedy(struct engine *e, const float *first, int32_t n_vocab, float *out, int32_t *toks,
                  bool force) {
    int agree = 0;
    const float *prev = first;
    for (int i = 0; i < N_GEN; i++) {
        int32_t t = ops_argmax(prev, n_vocab);
        agree += force && t == toks[i];
        if (!force)
            toks[i] = t;
        CHECK_EQ_INT(engine_eval(e, 0, &toks[i], 1, out + (size_t)i * n_vocab, false), 0);
        prev = out + (size_t)i * n_vocab;
    }
    return agree;
}

/* ---- hash ------------------------------------------------------------------------------------ */

static void test_hash64_golden(void) {
    uint8_t b[100];
    for (int i = 0; i < 100; i++)
        b[i] = (uint8_t)i;
    CHECK(hash64("", 0, 0) == 0xef46db3751d8e999ull);
    CHECK(hash64("abc", 3, 0) == 0x44bc2cf5ad770999ull);
    CHECK(hash64(b, 100, 0) == 0x6ac1e58032166597ull);
    CHECK(hash64(b, 100, 7) == 0x80653e7e9b887cddull);
    uint8_t c[37];
    for (int i = 0; i < 37; i++)
        c[i] = (uint8_t)(i * 7);
    CHECK(hash64(c, 37, 0) == 0x0f67f332bdd5b35bull);
    struct hash64 h; /* streamed in odd pieces == one shot */
    hash64_init(&h, 7);
    for (size_t off = 0, step = 1; off < 100; off += step, step = step * 2 + 1)
        hash64_update(&h, b + off, off + step > 100 ? 100 - off : step);
    CHECK(hash64_digest(&h) == 0x80653e7e9b887cddull);
}

static void test_names(void) {
    const char *good[] = {"a", "review-1", "A.b_c-9", "x.", "0123456789012345678901234567890123456789"
                          "012345678901234567890123"};
    const char *bad[] = {"", ".hidden", "..", "a/b", "a b", "é", "a\\b", "x%", NULL,
                         "01234567890123456789012345678901234567890123456789012345678901234"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK_MSG(ctx_name_valid(good[i]), "\"%s\" should be valid", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_MSG(!ctx_name_valid(bad[i]), "\"%s\" should be refused", bad[i] ? bad[i] : "NULL");
    enum ctxfile_store s;
    CHECK(ctxfile_store_parse("q8_0", &s) == 0 && s == CTXFILE_STORE_Q8_0);
    CHECK(ctxfile_store_parse("q5_0", &s) == -EINVAL);
}

/* ---- round trips ----------------------------------------------------------------------------- */

/* n tokens prefilled in steps of batch_a, saved, loaded into an engine with steps of batch_b (for
 * gpt-oss: other ring lengths), then N_GEN greedy tokens: the logits are bit-identical to the
 * engine that prefilled. The header written goes to wi. */
static void check_exact_n(struct model *m, enum qtype kv, bool zstd, int32_t n_prompt,
                          int32_t batch_a, int32_t batch_b, struct ctxfile_info *wi) {
    if (!m)
        return;
    int32_t V = m->hp.n_vocab, toks[N_GEN], *got = NULL, n = 0;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_prompt);
    float *first = malloc(sizeof(float) * (size_t)V);
    float *ref = malloc(sizeof(float) * (size_t)V * N_GEN);
    float *out = malloc(sizeof(float) * (size_t)V * N_GEN);
    struct engine *a = engine_batch(m, kv, N_CTX, batch_a), *b = engine_batch(m, kv, N_CTX, batch_b);
    struct ctxfile_opts o = ctxfile_opts_default();
    o.zstd = zstd;
    char err[512], *meta = NULL;
    const char *path = tmp_path(zstd ? "exact_z" : "exact");
    struct ctxfile_info ri;
    if (!a || !b || !ids)
        goto out;
    rng_lcg_ids(ids, n_prompt, V, 11);
    CHECK_EQ_INT(engine_eval(a, 0, ids, n_prompt, first, false), 0);
    CHECK_MSG(ctxfile_save(path, m, a, 0, ids, n_prompt, "{\"prompt\":\"hi\"}", &o, wi, err,
                           sizeof(err)) == 0, "save: %s", err);
    greedy(a, first, V, ref, toks, false);
    int rc = ctxfile_load(path, m, b, 0, &got, &n, &meta, &ri, err, sizeof(err));
    CHECK_MSG(rc == 0, "load: %s", err);
    if (rc == 0) {
        CHECK_EQ_INT(n, n_prompt);
        CHECK(memcmp(got, ids, sizeof(int32_t) * (size_t)n_prompt) == 0);
        CHECK_STR(meta, "{\"prompt\":\"hi\"}");
        CHECK_EQ_INT(engine_n_past(b, 0), n_prompt);
        CHECK_EQ_INT(ri.version, CTXFILE_VERSION);
        CHECK_EQ_INT(ri.store_type, kv);
        CHECK(ri.fingerprint == ctxfile_fingerprint(m->gguf));
        CHECK(ri.state_bytes == engine_state_size(b));
        CHECK(model_is_recurrent(m) == (ri.state_bytes > 0));
        /* the last prompt token's logits are not in the file: take a's */
        greedy(b, first, V, out, toks, true);
        CHECK_MSG(memcmp(out, ref, sizeof(float) * (size_t)V * N_GEN) == 0,
                  "%s %s%s: logits after load differ from the engine that prefilled",
                  model_arch_name(m->hp.arch), qtype_name(kv), zstd ? "+zstd" : "");
        printf("exact %s %s%s: %d tokens, %" PRIu64 " bytes (KV %" PRIu64 " stored of %" PRIu64
               ")\n", model_arch_name(m->hp.arch), qtype_name(kv), zstd ? "+zstd" : "", n_prompt,
               wi->file_bytes, wi->kv_stored_bytes, wi->kv_bytes);
    }
out:
    free(ids);
    free(got);
    free(meta);
    engine_free(a);
    engine_free(b);
    free(first);
    free(ref);
    free(out);
}

static void check_exact(struct model *m, enum qtype kv, bool zstd) {
    struct ctxfile_info wi;
    check_exact_n(m, kv, zstd, N_PROMPT, 512, 512, &wi);
}

static void test_exact_f32(void) { check_exact(model_a(), QTYPE_F32, false); }
static void test_exact_f16(void) { check_exact(model_a(), QTYPE_F16, false); }
static void test_exact_f32_zstd(void) { check_exact(model_a(), QTYPE_F32, true); }
static void test_exact_f16_zstd(void) { check_exact(model_a(), QTYPE_F16, true); }
static void test_exact_q8_0(void) { check_exact(model_a(), QTYPE_Q8_0, false); }
static void test_exact_q4_0_zstd(void) { check_exact(model_a(), QTYPE_Q4_0, true); }
static void test_hybrid_f16(void) { check_exact(model_hybrid(), QTYPE_F16, false); }
static void test_hybrid_f32_zstd(void) { check_exact(model_hybrid(), QTYPE_F32, true); }

/* A recurrent state exists only at n_past: saving fewer tokens is refused, not saved wrong. */
static void test_hybrid_refuses_prefix(void) {
    struct model *m = model_hybrid();
    int32_t ids[N_PROMPT];
    char err[512];
    struct engine *a = m ? prefilled(m, QTYPE_F16, ids, NULL) : NULL;
    if (a)
        CHECK_EQ_INT(ctxfile_save(tmp_path("h_prefix"), m, a, 0, ids, N_PROMPT - 1, NULL, NULL,
                                  NULL, err, sizeof(err)), -EINVAL);
    engine_free(a);
}

/* gpt-oss: 60 tokens through rings of 16 - 1 + 8 rows, saved (the window layers as their last 15
 * rows), loaded into an engine with rings of 16 - 1 + 5 rows, continued bit-identically; a
 * prefix the rings no longer hold is refused. */
static void check_window(enum qtype kv, bool zstd) {
    struct model *m = model_gptoss();
    enum { N = 60 };
    struct ctxfile_info wi = {0};
    check_exact_n(m, kv, zstd, N, 8, 5, &wi);
    struct engine *a = m ? engine_batch(m, kv, N_CTX, 8) : NULL;
    if (!a)
        return;
    struct engine_kv_shape s = engine_kv_shape(a);
    CHECK(wi.kv_bytes == 2 * (uint64_t)s.row_bytes * (2 * N + 2 * 15));
    CHECK_EQ_INT(wi.n_swa_layer, 2);
    CHECK_EQ_INT(wi.n_swa, 16);
    int32_t ids[N];
    char err[512];
    rng_lcg_ids(ids, N, m->hp.n_vocab, 11);
    CHECK_EQ_INT(engine_eval(a, 0, ids, N, NULL, false), 0);
    CHECK_EQ_INT(engine_reusable(a, 0, 40), 0); /* the rings have moved on: no way back to 40 */
    CHECK_EQ_INT(ctxfile_save(tmp_path("window40"), m, a, 0, ids, 40, "{}", NULL, NULL, err,
                              sizeof(err)), -EINVAL); /* nor a context of its first 40 */
    engine_free(a);
}

static void test_window_f16(void) { check_window(QTYPE_F16, false); }
static void test_window_f32_zstd(void) { check_window(QTYPE_F32, true); }

/* Every layer's K and V of positions 0 .. n-1 as floats: [n_layer][2][n][kv_dim]. */
static float *kv_floats(struct engine *e, int32_t n) {
    struct engine_kv_shape s = engine_kv_shape(e);
    size_t per = (size_t)n * (size_t)s.kv_dim;
    float *out = malloc(sizeof(float) * per * 2 * (size_t)s.n_layer);
    uint8_t *k = malloc((size_t)n * s.row_bytes), *v = malloc((size_t)n * s.row_bytes);
    for (int32_t il = 0; il < s.n_layer; il++) {
        CHECK_EQ_INT(engine_kv_export(e, 0, il, n, k, v), 0);
        quant_dequantize_row(s.type, k, out + per * (size_t)(2 * il), (int64_t)per);
        quant_dequantize_row(s.type, v, out + per * (size_t)(2 * il + 1), (int64_t)per);
    }
    free(k);
    free(v);
    return out;
}

static double cosine(const float *a, const float *b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

static void check_quantized(enum qtype kv, enum ctxfile_store store, bool zstd, double min_cos,
                            double min_agree) {
    struct model *m = model_a();
    if (!m)
        return;
    int32_t V = m->hp.n_vocab, ids[N_PROMPT], toks[N_GEN], *got = NULL, n = 0;
    float *first = malloc(sizeof(float) * (size_t)V);
    float *ref = malloc(sizeof(float) * (size_t)V * N_GEN);
    float *out = malloc(sizeof(float) * (size_t)V * N_GEN);
    struct engine *a = prefilled(m, kv, ids, first);
    struct ctxfile_opts o = {.store = store, .zstd = zstd};
    char err[512], *meta = NULL;
    struct ctxfile_info qi, xi;
    CHECK_MSG(ctxfile_save(tmp_path("q"), m, a, 0, ids, N_PROMPT, NULL, &o, &qi, err,
                           sizeof(err)) == 0, "save: %s", err);
    CHECK(ctxfile_save(tmp_path("x"), m, a, 0, ids, N_PROMPT, NULL, NULL, &xi, err,
                       sizeof(err)) == 0);
    float *orig = kv_floats(a, N_PROMPT);
    greedy(a, first, V, ref, toks, false);
    struct engine *b = engine_for(m, kv, N_CTX);
    int rc = ctxfile_load(tmp_path("q"), m, b, 0, &got, &n, &meta, NULL, err, sizeof(err));
    CHECK_MSG(rc == 0, "load: %s", err);
    if (rc == 0 && orig) {
        struct engine_kv_shape s = engine_kv_shape(b);
        float *rest = kv_floats(b, N_PROMPT);
        double cos = cosine(orig, rest, (size_t)s.n_layer * 2 * N_PROMPT * (size_t)s.kv_dim);
        int agree = greedy(b, first, V, out, toks, true);
        double ratio = (double)xi.file_bytes / (double)qi.file_bytes;
        printf("store %s%s from %s KV: %" PRIu64 " bytes vs %" PRIu64 " (ratio %.2fx), cosine "
               "%.6f, next-token agreement %d/%d\n", ctxfile_store_name(store),
               zstd ? "+zstd" : "", qtype_name(kv), qi.file_bytes, xi.file_bytes, ratio, cos,
               agree, N_GEN);
        CHECK_MSG(cos > min_cos, "cosine %.6f <= %.4f", cos, min_cos);
        CHECK_MSG(agree >= min_agree * N_GEN, "agreement %d/%d", agree, N_GEN);
        CHECK(ratio > 1.0);
        free(rest);
    }
    free(orig);
    free(got);
    free(meta);
    engine_free(a);
    engine_free(b);
    free(first);
    free(ref);
    free(out);
}

static void test_q8_0(void) { check_quantized(QTYPE_F16, CTXFILE_STORE_Q8_0, false, 0.999, 0.75); }
static void test_q4_0(void) { check_quantized(QTYPE_F16, CTXFILE_STORE_Q4_0, false, 0.98, 0.5); }
static void test_q8_0_f32(void) { check_quantized(QTYPE_F32, CTXFILE_STORE_Q8_0, false, 0.999, 0.75); }
static void test_q8_0_zstd(void) { check_quantized(QTYPE_F16, CTXFILE_STORE_Q8_0, true, 0.999, 0.75); }
static void test_q4_0_zstd(void) { check_quantized(QTYPE_F16, CTXFILE_STORE_Q4_0, true, 0.98, 0.5); }
static void test_f16_from_f32(void) { check_quantized(QTYPE_F32, CTXFILE_STORE_F16, true, 0.99999, 0.9); }
static void test_q4_0_from_q8_0(void) { check_quantized(QTYPE_Q8_0, CTXFILE_STORE_Q4_0, false, 0.98, 0.5); }

/* A kv saved from an f16 engine loads into an f32 engine (converted) and the reverse. */
static void test_cross_type(void) {
    struct model *m = model_a();
    if (!m)
        return;
    int32_t ids[N_PROMPT], *got = NULL, n = 0;
    char err[512], *meta = NULL;
    struct engine *a = prefilled(m, QTYPE_F16, ids, NULL);
    CHECK(ctxfile_save(tmp_path("cross"), m, a, 0, ids, N_PROMPT, NULL, NULL, NULL, err,
                       sizeof(err)) == 0);
    struct engine *b = engine_for(m, QTYPE_F32, N_CTX);
    CHECK_MSG(ctxfile_load(tmp_path("cross"), m, b, 0, &got, &n, &meta, NULL, err, sizeof(err)) == 0,
              "load: %s", err);
    float *x = kv_floats(a, N_PROMPT), *y = kv_floats(b, N_PROMPT);
    struct engine_kv_shape s = engine_kv_shape(a);
    CHECK(memcmp(x, y, sizeof(float) * (size_t)s.n_layer * 2 * N_PROMPT * (size_t)s.kv_dim) == 0);
    free(x);
    free(y);
    free(got);
    free(meta);
    engine_free(a);
    engine_free(b);
}

static void test_info(void) {
    struct model *m = model_a();
    if (!m)
        return;
    int32_t ids[N_PROMPT];
    char err[512], *meta = NULL;
    struct engine *a = prefilled(m, QTYPE_F16, ids, NULL);
    struct ctxfile_opts o = {.store = CTXFILE_STORE_Q4_0, .zstd = true};
    CHECK(ctxfile_save(tmp_path("info"), m, a, 0, ids, 10, "{\"a\":1}", &o, NULL, err,
                       sizeof(err)) == 0);
    struct ctxfile_info in;
    struct stat st;
    CHECK_MSG(ctxfile_info(tmp_path("info"), &in, &meta, err, sizeof(err)) == 0, "%s", err);
    CHECK(stat(tmp_path("info"), &st) == 0 && (uint64_t)st.st_size == in.file_bytes);
    CHECK_EQ_INT(in.n_tokens, 10);
    CHECK_EQ_INT(in.store_type, QTYPE_Q4_0);
    CHECK_EQ_INT(in.kv_type, QTYPE_F16);
    CHECK(in.zstd);
    CHECK(in.fingerprint == ctxfile_fingerprint(m->gguf));
    CHECK((int64_t)time(NULL) - (int64_t)in.created < 60);
    CHECK_STR(meta, "{\"a\":1}");
    free(meta);
    /* n beyond what the engine holds, and an empty context */
    CHECK(ctxfile_save(tmp_path("info2"), m, a, 0, ids, N_PROMPT + 1, NULL, NULL, NULL, err,
                       sizeof(err)) == -EINVAL);
    CHECK(ctxfile_save(tmp_path("empty"), m, a, 0, ids, 0, NULL, NULL, NULL, err, sizeof(err)) == 0);
    CHECK(ctxfile_info(tmp_path("empty"), &in, NULL, err, sizeof(err)) == 0 && in.n_tokens == 0);
    engine_free(a);
}


static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The byte layout of docs/formats.md, pinned. */
static void test_header_layout(void) {
    struct model *m = model_a();
    int32_t ids[N_PROMPT];
    char err[512];
    struct engine *a = m ? prefilled(m, QTYPE_F16, ids, NULL) : NULL;
    struct ctxfile_opts o = {.store = CTXFILE_STORE_Q8_0, .zstd = true};
    size_t n = 0;
    uint8_t *f = NULL;
    if (a && ctxfile_save(tmp_path("layout"), m, a, 0, ids, 5, "{}", &o, NULL, err, sizeof(err)) == 0)
        f = test_read_file(tmp_path("layout"), &n);
    CHECK(f != NULL);
    if (f) {
        struct engine_kv_shape s = engine_kv_shape(a);
        uint64_t kv_bytes = (uint64_t)s.n_layer * 2 * 5 * (uint64_t)(s.kv_dim / 32 * 34);
        CHECK(memcmp(f, "SNIPCTX\0", 8) == 0);
        CHECK_EQ_INT(le(f + 8, 4), 3);
        CHECK_EQ_INT(le(f + 12, 4), 128);
        CHECK(le(f + 16, 8) == ctxfile_fingerprint(m->gguf));
        CHECK_EQ_INT(le(f + 24, 4), 1); /* f16 */
        CHECK_EQ_INT(le(f + 28, 4), 8); /* q8_0 */
        CHECK_EQ_INT(le(f + 32, 4), 1); /* zstd */
        CHECK_EQ_INT(le(f + 36, 4), s.n_layer);
        CHECK_EQ_INT(le(f + 40, 4), s.kv_dim);
        CHECK_EQ_INT(le(f + 44, 4), 5);
        CHECK((int64_t)time(NULL) - (int64_t)le(f + 48, 8) < 60);
        CHECK_EQ_INT(le(f + 56, 8), 2);
        CHECK(le(f + 64, 8) == kv_bytes);
        uint64_t stored = le(f + 72, 8);
        CHECK(n == 128 + 5 * 4 + 2 + stored);
        CHECK(le(f + 80, 8) == hash64(f + 128 + 20 + 2, stored, 0));
        CHECK_EQ_INT(le(f + 88, 8), 0); /* no recurrent state */
        CHECK_EQ_INT(le(f + 96, 4), 0);  /* no window layers */
        CHECK_EQ_INT(le(f + 100, 4), 0); /* so no window */
        for (int i = 104; i < 120; i++)
            CHECK_EQ_INT(f[i], 0);
        for (int i = 0; i < 5; i++)
            CHECK_EQ_INT(le(f + 128 + 4 * i, 4), ids[i]);
        CHECK(memcmp(f + 148, "{}", 2) == 0);
        struct hash64 h;
        hash64_init(&h, 0);
        hash64_update(&h, f, 120);
        hash64_update(&h, f + 128, 22);
        CHECK(le(f + 120, 8) == hash64_digest(&h));
    }
    free(f);
    engine_free(a);
}


/* A context of 480 tokens (past the 24 of the other cases: rows at every page and chunk boundary
 * the KV passes) loaded into a fresh engine continues exactly as the engine that prefilled it:
 * the same tokens, the same n_past, and bit-identical logits over N_GEN greedy steps. The load and
 * prefill times are printed, not asserted (the real measure is on the 30B preset,
 * docs/benchmarks.md). */
static void test_load_vs_prefill(void) {
    struct model *m = model_a();
    enum { N = 480 };
    const int32_t V = m ? m->hp.n_vocab : 0;
    int32_t *ids = malloc(sizeof(int32_t) * N), *got = NULL, n = 0;
    int32_t toks_a[N_GEN], toks_b[N_GEN];
    char err[512], *meta = NULL;
    struct engine *a = m ? engine_for(m, QTYPE_F16, 512) : NULL;
    struct engine *b = m ? engine_for(m, QTYPE_F16, 512) : NULL;
    const size_t row = sizeof(float) * (size_t)V;
    float *first_a = malloc(row), *first_b = malloc(row);
    float *out_a = malloc(row * N_GEN), *out_b = malloc(row * N_GEN);
    if (!a || !b || !ids || !first_a || !first_b || !out_a || !out_b)
        goto out;
    rng_lcg_ids(ids, N, V, 5);
    double t0 = (1e3 * clock_now_s());
    CHECK_EQ_INT(engine_eval(a, 0, ids, N - 1, NULL, false), 0);
    double t1 = (1e3 * clock_now_s());
    CHECK(ctxfile_save(tmp_path("timed"), m, a, 0, ids, N - 1, NULL, NULL, NULL, err,
                       sizeof(err)) == 0);
    double t2 = (1e3 * clock_now_s());
    CHECK_MSG(ctxfile_load(tmp_path("timed"), m, b, 0, &got, &n, &meta, NULL, err,
                           sizeof(err)) == 0, "%s", err);
    double t3 = (1e3 * clock_now_s());
    printf("%d tokens (tiny model, f16 KV): prefill %.1f ms, save %.1f ms, load %.1f ms "
           "(%.0fx faster than prefill)\n", N - 1, t1 - t0, t2 - t1, t3 - t2,
           (t1 - t0) / (t3 - t2));
    CHECK_EQ_INT(n, N - 1);
    CHECK(got && n == N - 1 && memcmp(got, ids, sizeof(int32_t) * (N - 1)) == 0);
    CHECK_EQ_INT(engine_n_past(b, 0), N - 1);
    /* the prompt's last token fed to both gives its logits; then greedy steps from them */
    CHECK_EQ_INT(engine_eval(a, 0, &ids[N - 1], 1, first_a, false), 0);
    CHECK_EQ_INT(engine_eval(b, 0, &ids[N - 1], 1, first_b, false), 0);
    CHECK_MSG(memcmp(first_a, first_b, row) == 0,
              "the last prompt token's logits differ after load");
    greedy(a, first_a, V, out_a, toks_a, false);
    greedy(b, first_b, V, out_b, toks_b, false);
    CHECK(memcmp(toks_a, toks_b, sizeof(toks_a)) == 0);
    CHECK_MSG(memcmp(out_a, out_b, row * N_GEN) == 0,
              "greedy logits after load differ from the prefilled engine's");
out:
    free(first_a);
    free(first_b);
    free(out_a);
    free(out_b);
    free(ids);
    free(got);
    free(meta);
    engine_free(a);
    engine_free(b);
}

/* ---- refusals -------------------------------------------------------------------------------- */

static void *file_of(const char *path, size_t *n) { return test_read_file(path, n); }

/* Loads path into e; returns the error (0: loaded) and checks a failure empties nothing wrongly. */
static int try_load(struct model *m, struct engine *e, const char *path, char *err, size_t len) {
    int32_t *got = NULL, n = 0;
    char *meta = NULL;
    int rc = ctxfile_load(path, m, e, 0, &got, &n, &meta, NULL, err, len);
    if (rc < 0)
        CHECK(engine_n_past(e, 0) == 0 || engine_n_past(e, 0) == N_PROMPT);
    free(got);
    free(meta);
    return rc;
}

/* A saved file (malloc'd bytes) for the refusal tests. */
static uint8_t *saved(struct model *m, const char *name, bool zstd, size_t *n) {
    int32_t ids[N_PROMPT];
    char err[512];
    struct engine *a = prefilled(m, QTYPE_F16, ids, NULL);
    struct ctxfile_opts o = {.store = zstd ? CTXFILE_STORE_Q8_0 : CTXFILE_STORE_EXACT, .zstd = zstd};
    int rc = a ? ctxfile_save(tmp_path(name), m, a, 0, ids, N_PROMPT, "{\"k\":\"v\"}", &o, NULL, err,
                              sizeof(err)) : -1;
    CHECK_MSG(rc == 0, "save: %s", err);
    engine_free(a);
    return rc == 0 ? file_of(tmp_path(name), n) : NULL;
}

static void check_truncated(bool zstd) {
    struct model *m = model_a();
    size_t n = 0;
    uint8_t *f = m ? saved(m, "trunc_src", zstd, &n) : NULL;
    struct engine *e = m ? engine_for(m, QTYPE_F16, N_CTX) : NULL;
    if (!f || !e)
        goto out;
    int tested = 0;
    for (size_t len = 0; len < n; len += len < 300 ? 1 : 97) {
        char err[512];
        CHECK(test_write_file(tmp_path("trunc"), f, len) == 0);
        int rc = try_load(m, e, tmp_path("trunc"), err, sizeof(err));
        CHECK_MSG(rc == CTXFILE_ECORRUPT, "truncated to %zu of %zu: rc %d (%s)", len, n, rc, err);
        tested++;
    }
    uint8_t *longer = malloc(n + 1); /* one byte too many is refused too */
    memcpy(longer, f, n);
    longer[n] = 0;
    char err[512];
    CHECK(test_write_file(tmp_path("trunc"), longer, n + 1) == 0);
    CHECK(try_load(m, e, tmp_path("trunc"), err, sizeof(err)) == CTXFILE_ECORRUPT);
    free(longer);
    printf("truncated%s: %d lengths refused\n", zstd ? " (zstd)" : "", tested);
out:
    engine_free(e);
    free(f);
}

static void test_truncated(void) { check_truncated(false); }
static void test_truncated_zstd(void) { check_truncated(true); }

static void check_flipped(bool zstd) {
    struct model *m = model_a();
    size_t n = 0;
    uint8_t *f = m ? saved(m, "flip_src", zstd, &n) : NULL;
    struct engine *e = m ? engine_for(m, QTYPE_F16, N_CTX) : NULL;
    if (!f || !e)
        goto out;
    int tested = 0;
    for (size_t off = 0; off < n; off += off < 400 ? 1 : 53) {
        char err[512];
        f[off] ^= (uint8_t)(1u << (off % 8));
        CHECK(test_write_file(tmp_path("flip"), f, n) == 0);
        f[off] ^= (uint8_t)(1u << (off % 8));
        int rc = try_load(m, e, tmp_path("flip"), err, sizeof(err));
        bool ok = rc == CTXFILE_ECORRUPT || (off >= 8 && off < 12 && rc == CTXFILE_EVERSION);
        CHECK_MSG(ok, "byte %zu flipped: rc %d (%s)", off, rc, err);
        /* the engine-free check (downloads) refuses every flipped byte too */
        int vrc = ctxfile_verify(tmp_path("flip"), NULL, err, sizeof(err));
        CHECK_MSG(vrc == CTXFILE_ECORRUPT || (off >= 8 && off < 12 && vrc == CTXFILE_EVERSION),
                  "verify, byte %zu flipped: rc %d (%s)", off, vrc, err);
        CHECK_MSG(rc != 0 || engine_n_past(e, 0) == N_PROMPT, "byte %zu", off);
        tested++;
    }
    printf("flipped%s: %d offsets refused\n", zstd ? " (zstd)" : "", tested);
    char verr[512];
    CHECK(test_write_file(tmp_path("flip"), f, n) == 0);
    CHECK_EQ_INT(ctxfile_verify(tmp_path("flip"), NULL, verr, sizeof(verr)), 0);
out:
    engine_free(e);
    free(f);
}

static void test_flipped(void) { check_flipped(false); }
static void test_flipped_zstd(void) { check_flipped(true); }

/* Rewrites f's version field and fixes the header checksum for it. */
static void set_version(uint8_t *f, uint8_t version) {
    f[8] = version;
    struct hash64 st;
    hash64_init(&st, 0);
    hash64_update(&st, f, 120);
    hash64_update(&st, f + 128, (size_t)N_PROMPT * 4 + 9);
    uint64_t h = hash64_digest(&st);
    for (int i = 0; i < 8; i++)
        f[120 + i] = (uint8_t)(h >> (8 * i));
}

static void test_wrong_version(void) {
    struct model *m = model_a();
    size_t n = 0;
    uint8_t *f = m ? saved(m, "ver_src", false, &n) : NULL;
    struct engine *e = m ? engine_for(m, QTYPE_F16, N_CTX) : NULL;
    if (f && e) {
        char err[512];
        set_version(f, 1); /* the first format: the same bytes without a state, still read */
        CHECK(test_write_file(tmp_path("ver"), f, n) == 0);
        CHECK_MSG(try_load(m, e, tmp_path("ver"), err, sizeof(err)) == 0, "version 1: %s", err);
        set_version(f, 2); /* the second: the same bytes without window layers, still read */
        CHECK(test_write_file(tmp_path("ver"), f, n) == 0);
        CHECK_MSG(try_load(m, e, tmp_path("ver"), err, sizeof(err)) == 0, "version 2: %s", err);
        f[96] = 1; /* a version 2 file claiming a window layer */
        f[100] = 16;
        set_version(f, 2);
        CHECK(test_write_file(tmp_path("ver"), f, n) == 0);
        CHECK_EQ_INT(try_load(m, e, tmp_path("ver"), err, sizeof(err)), CTXFILE_ECORRUPT);
        f[96] = f[100] = 0;
        set_version(f, 4); /* a later one */
        CHECK(test_write_file(tmp_path("ver"), f, n) == 0);
        CHECK_EQ_INT(try_load(m, e, tmp_path("ver"), err, sizeof(err)), CTXFILE_EVERSION);
        CHECK_MSG(strstr(err, "version 4") != NULL, "%s", err);
        printf("wrong version: %s\n", err);
        f[88] = 4; /* a version 1 file claiming a state */
        set_version(f, 1);
        CHECK(test_write_file(tmp_path("ver"), f, n) == 0);
        CHECK_EQ_INT(try_load(m, e, tmp_path("ver"), err, sizeof(err)), CTXFILE_ECORRUPT);
        memcpy(f, "GGUF", 4);
        CHECK(test_write_file(tmp_path("ver"), f, n) == 0);
        CHECK_EQ_INT(try_load(m, e, tmp_path("ver"), err, sizeof(err)), CTXFILE_ECORRUPT);
        CHECK(strstr(err, "not a context file") != NULL);
        CHECK_EQ_INT(try_load(m, e, tmp_path("absent"), err, sizeof(err)), -ENOENT);
    }
    engine_free(e);
    free(f);
}

static void test_wrong_model(void) {
    struct model *m = model_a();
    static char path[1024];
    char err[512];
    if (!m || test_make_model(path, sizeof(path), "ctx_b.gguf", "--preset tiny --seed 4") < 0)
        return;
    struct model *m2 = model_load(path, err, sizeof(err));
    size_t n = 0;
    uint8_t *f = saved(m, "model_src", false, &n);
    struct engine *e = m2 ? engine_for(m2, QTYPE_F16, N_CTX) : NULL;
    if (f && e) {
        uint64_t fa = ctxfile_fingerprint(m->gguf), fb = ctxfile_fingerprint(m2->gguf);
        CHECK(fa != fb);
        CHECK(fa == ctxfile_fingerprint(m->gguf));
        int32_t *got = NULL, k = 0;
        char *meta = NULL, want_a[32], want_b[32];
        struct ctxfile_info in;
        int rc = ctxfile_load(tmp_path("model_src"), m2, e, 0, &got, &k, &meta, &in, err, sizeof(err));
        CHECK_EQ_INT(rc, CTXFILE_EMODEL);
        CHECK(in.fingerprint == fa);
        snprintf(want_a, sizeof(want_a), "%016" PRIx64, fa);
        snprintf(want_b, sizeof(want_b), "%016" PRIx64, fb);
        CHECK_MSG(strstr(err, want_a) && strstr(err, want_b), "%s", err);
        printf("wrong model: %s\n", err);
        /* a context larger than the engine */
        struct engine *small = engine_for(m, QTYPE_F16, N_PROMPT - 1);
        CHECK_EQ_INT(try_load(m, small, tmp_path("model_src"), err, sizeof(err)), CTXFILE_ESHAPE);
        engine_free(small);
    }
    engine_free(e);
    model_free(m2);
    free(f);
}

/* Mutations of valid files (raw and zstd), some with the header checksum fixed up so that the
 * deeper checks run: no crash, no leak, and a load either succeeds or fails cleanly. */
static void test_fuzz(void) {
    struct model *m = model_a();
    size_t n[2] = {0, 0};
    uint8_t *src[2] = {NULL, NULL};
    if (m) {
        src[0] = saved(m, "fuzz_raw", false, &n[0]);
        src[1] = saved(m, "fuzz_z", true, &n[1]);
    }
    struct engine *e = m ? engine_for(m, QTYPE_F16, N_CTX) : NULL;
    if (!src[0] || !src[1] || !e)
        goto out;
    struct rng r;
    rng_seed(&r, 99);
    int iters = getenv("SNIPER_CHECK") ? 1500 : 3000, loaded = 0, refused = 0;
    uint8_t *buf = malloc(n[0] + n[1] + 64);
    for (int it = 0; it < iters; it++) {
        int w = it & 1;
        size_t len = n[w];
        memcpy(buf, src[w], len);
        int kind = (int)((uint32_t)rng_next(&r) % 4);
        int n_mut = 1 + (int)((uint32_t)rng_next(&r) % 4);
        for (int j = 0; j < n_mut; j++) {
            size_t off = (uint32_t)rng_next(&r) % 4 ? (uint32_t)rng_next(&r) % 160 : (uint32_t)rng_next(&r) % len;
            buf[off] = kind == 0 ? (uint8_t)(uint32_t)rng_next(&r) : buf[off] ^ (uint8_t)(1u << ((uint32_t)rng_next(&r) % 8));
        }
        if (kind == 1)
            len = (uint32_t)rng_next(&r) % (len + 32);
        if (kind >= 2 && len >= 128) { /* fix the header checksum up */
            uint64_t nt = (uint64_t)buf[44] | (uint64_t)buf[45] << 8, meta = buf[56];
            if (128 + nt * 4 + meta <= len) {
                struct hash64 st;
                hash64_init(&st, 0);
                hash64_update(&st, buf, 120);
                hash64_update(&st, buf + 128, nt * 4 + meta);
                uint64_t h = hash64_digest(&st);
                for (int i = 0; i < 8; i++)
                    buf[120 + i] = (uint8_t)(h >> (8 * i));
            }
        }
        char err[512];
        CHECK(test_write_file(tmp_path("fuzz"), buf, len) == 0);
        int rc = try_load(m, e, tmp_path("fuzz"), err, sizeof(err));
        struct ctxfile_info in;
        char *meta = NULL;
        if (ctxfile_info(tmp_path("fuzz"), &in, &meta, err, sizeof(err)) == 0)
            free(meta);
        rc == 0 ? loaded++ : refused++;
    }
    printf("fuzz: %d mutated files, %d loaded, %d refused\n", iters, loaded, refused);
    free(buf);
out:
    engine_free(e);
    free(src[0]);
    free(src[1]);
}

/* ---- writing failures ------------------------------------------------------------------------ */

static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

static void check_enospc(bool zstd) {
    struct model *m = model_a();
    int32_t ids[N_PROMPT];
    struct engine *a = m ? prefilled(m, QTYPE_F16, ids, NULL) : NULL;
    const char *dir = tmp_path(zstd ? "full_z" : "full");
    char path[1100];
    snprintf(path, sizeof(path), "%s/ctx", dir);
    if (!a || mkdir(dir, 0755) < 0) {
        CHECK(a != NULL);
        engine_free(a);
        return;
    }
    struct ctxfile_opts o = {.zstd = zstd};
    int n_failed = 0;
    for (long k = 1; k < 100; k++) {
        char err[512] = "";
        fault_arm(FAULT_WRITE, k);
        int rc = ctxfile_save(path, m, a, 0, ids, N_PROMPT, "{}", &o, NULL, err, sizeof(err));
        fault_arm(FAULT_WRITE, 0);
        if (rc == 0)
            break;
        n_failed++;
        CHECK_EQ_INT(rc, -ENOSPC);
        CHECK_MSG(strstr(err, "no space left") != NULL, "%s", err);
        CHECK_MSG(dir_entries(dir) == 0, "write %ld failed: %d files left", k, dir_entries(dir));
    }
    CHECK(n_failed >= 2);
    CHECK_EQ_INT(dir_entries(dir), 1);
    printf("full disk%s: %d write failures, each left no file\n", zstd ? " (zstd)" : "", n_failed);
    engine_free(a);
}

static void test_enospc(void) { check_enospc(false); }
static void test_enospc_zstd(void) { check_enospc(true); }

/* A real write error (the file size limit, EFBIG) leaves no file either. */
static void test_fsize_limit(void) {
    struct model *m = model_a();
    int32_t ids[N_PROMPT];
    struct engine *a = m ? prefilled(m, QTYPE_F16, ids, NULL) : NULL;
    const char *dir = tmp_path("fsize");
    char path[1100], err[512];
    snprintf(path, sizeof(path), "%s/ctx", dir);
    struct rlimit old;
    if (!a || mkdir(dir, 0755) < 0 || getrlimit(RLIMIT_FSIZE, &old) < 0) {
        engine_free(a);
        return;
    }
    struct rlimit lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    int rc = setrlimit(RLIMIT_FSIZE, &lim) == 0 ?
        ctxfile_save(path, m, a, 0, ids, N_PROMPT, "{}", NULL, NULL, err, sizeof(err)) : 1;
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK_EQ_INT(rc, -EFBIG);
    CHECK_EQ_INT(dir_entries(dir), 0);
    printf("file size limit: %s\n", err);
    snprintf(path, sizeof(path), "%s/no/such/dir/ctx", dir);
    CHECK_EQ_INT(ctxfile_save(path, m, a, 0, ids, N_PROMPT, "{}", NULL, NULL, err, sizeof(err)),
                 -ENOENT);
    engine_free(a);
}

/* The engine's KV access refuses what does not fit. */
static void test_engine_kv_api(void) {
    struct model *m = model_a();
    int32_t ids[N_PROMPT];
    struct engine *a = m ? prefilled(m, QTYPE_F16, ids, NULL) : NULL;
    if (!a)
        return;
    struct engine_kv_shape s = engine_kv_shape(a);
    CHECK_EQ_INT(s.type, QTYPE_F16);
    CHECK_EQ_INT(s.n_layer, m->hp.n_layer);
    CHECK_EQ_INT(s.kv_dim, m->hp.n_head_kv * m->hp.head_dim);
    CHECK_EQ_INT(s.row_bytes, (size_t)s.kv_dim * 2);
    uint8_t *k = calloc((size_t)N_CTX, s.row_bytes);
    CHECK_EQ_INT(engine_kv_export(a, 0, 0, N_PROMPT + 1, k, NULL), -EINVAL);
    CHECK_EQ_INT(engine_kv_export(a, 0, s.n_layer, 1, k, NULL), -EINVAL);
    CHECK_EQ_INT(engine_kv_export(a, 0, 0, N_PROMPT, k, NULL), 0);
    CHECK_EQ_INT(engine_kv_import(a, 0, 0, QTYPE_F32, s.kv_dim, 1, k, k), -EINVAL);
    CHECK_EQ_INT(engine_kv_import(a, 0, 0, QTYPE_F16, s.kv_dim + 1, 1, k, k), -EINVAL);
    CHECK_EQ_INT(engine_kv_import(a, 0, 0, QTYPE_F16, s.kv_dim, N_CTX + 1, k, k), -EINVAL);
    CHECK_EQ_INT(engine_n_past(a, 0), N_PROMPT);
    CHECK_EQ_INT(engine_kv_import(a, 0, 0, QTYPE_F16, s.kv_dim, N_PROMPT, k, NULL), 0);
    CHECK_EQ_INT(engine_n_past(a, 0), 0);
    CHECK_EQ_INT(engine_kv_commit(a, 0, N_CTX + 1), -EINVAL);
    CHECK_EQ_INT(engine_kv_commit(a, 0, N_PROMPT), 0);
    CHECK_EQ_INT(engine_n_past(a, 0), N_PROMPT);
    free(k);
    engine_free(a);
}

static const struct test_case cases[] = {
    {"hash64_golden", test_hash64_golden},
    {"names", test_names},
    {"engine_kv_api", test_engine_kv_api},
    {"exact_f32", test_exact_f32},
    {"exact_f16", test_exact_f16},
    {"exact_f32_zstd", test_exact_f32_zstd},
    {"exact_f16_zstd", test_exact_f16_zstd},
    {"exact_q8_0_kv", test_exact_q8_0},
    {"exact_q4_0_kv_zstd", test_exact_q4_0_zstd},
    {"hybrid_f16", test_hybrid_f16},
    {"hybrid_f32_zstd", test_hybrid_f32_zstd},
    {"hybrid_refuses_prefix", test_hybrid_refuses_prefix},
    {"window_f16", test_window_f16},
    {"window_f32_zstd", test_window_f32_zstd},
    {"q8_0", test_q8_0},
    {"q8_0_from_f32", test_q8_0_f32},
    {"q4_0", test_q4_0},
    {"q8_0_zstd", test_q8_0_zstd},
    {"q4_0_zstd", test_q4_0_zstd},
    {"f16_from_f32_zstd", test_f16_from_f32},
    {"q4_0_from_q8_0_kv", test_q4_0_from_q8_0},
    {"cross_type", test_cross_type},
    {"info", test_info},
    {"header_layout", test_header_layout},
    {"load_vs_prefill", test_load_vs_prefill},
    {"truncated", test_truncated},
    {"truncated_zstd", test_truncated_zstd},
    {"flipped", test_flipped},
    {"flipped_zstd", test_flipped_zstd},
    {"wrong_version", test_wrong_version},
    {"wrong_model", test_wrong_model},
    {"fuzz", test_fuzz},
    {"enospc", test_enospc},
    {"enospc_zstd", test_enospc_zstd},
    {"fsize_limit", test_fsize_limit},
    {0},
};

int main(int argc, char **argv) {
    int rc = test_run(argc, argv, cases);
    model_free(g_model);
    model_free(g_hybrid);
    model_free(g_gptoss);
    return rc;
}
