/* test_fidelity.c - our engine against llama.cpp's goldens: the in-repo corpus tests/golden (every
 * architecture x every type mix, on models sniper-mkmodel regenerates, checked byte for byte first:
 * tests/golden/README.md), tests/fixtures/gpt-oss/golden, and ../shared/fixtures/golden where
 * present (the metric of fixtures/README.md): prompt tokens identical; f32
 * models within 1e-3 at every position; quantized models >= 95% of positions within the bar and
 * >= 95% with the same argmax over all prompts, and >= 85% in each prompt; llama.cpp's greedy
 * tokens fed back, our argmax equal to each at every step that is not a near-tie; every prompt fed
 * 512 (gpt-oss: 5), 7 and 1 tokens a step, with bit-identical logits. Runs with an f32 KV cache,
 * as the goldens were made. Skips loudly, naming what is not checked, when the shared fixtures are
 * absent and for a model with a type this build has no kernels for. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf.h"
#include "harness.h"
#include "hash64.h"
#include "model.h"
#include "ops.h"
#include "quant.h"
#include "tokenizer.h"

/* Positions scored against a golden: all of one prompt, or pooled over a model's prompts. */
struct score {
    int n_pos;
    int n_close;  /* d_i <= the model's bar (0.25; 0.5 for the recurrent hybrids) */
    int n_argmax; /* same argmax */
    int n_judged; /* greedy steps judged (golden margin at least the tie) */
};

/* The quantized bars. Pooled over a model's prompts: fixtures/README.md's metric (95% within the
 * bar, 95% same argmax). Per prompt: a floor, so that one prompt broken entirely cannot hide
 * among the others' positions (p1-hello is 6 of 583). The engine's worst prompt has 92.0% of its
 * positions with the same argmax (x256-q3_k_m p4-unicode, 4 of 50 missed; dense-q5_1 and
 * dense-iq1_s p3-chatml 92.3%), at batch 512, 7 and 1 alike; 85% leaves that room and still fails
 * a prompt of 6 positions with one row wrong. */
#define POOLED_FLOOR 0.95
#define PROMPT_FLOOR 0.85

/* The in-repo corpus (tests/golden/README.md). */
#define CORPUS_DIR "tests/golden"
#define CORPUS_ROOT "tests" /* check_model_at reads ROOT/golden */

/* Batch sizes each golden is run at: the model's own (512, or gpt-oss's 5), 7 and 1 (tokens per
 * step in prefill). architecture.md promises bit-identical logits whichever it is. */
enum { N_BATCHES = 3 };

/* Reads a json int array into a malloc'd int32 array. */
static int32_t *json_ids(json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    int32_t *ids = calloc(*n + 1, sizeof(int32_t));
    for (size_t i = 0; ids && i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return ids;
}

/* The golden logits of path, [n][V] floats (malloc'd), or NULL when the file is not that size.
 * format: NULL or "f32" (raw little-endian float32 rows, the shared fixtures'), or
 * "i16-rowscale-f32first" (tests/golden's: position 0's V f32, then per row an f32 scale s and V
 * int16 q, logit = q * s; position 0 is taken from the exact f32 row). */
static float *read_golden_logits(const char *path, const char *format, size_t n, int32_t V) {
    size_t bytes;
    uint8_t *raw = test_read_file(path, &bytes);
    bool i16 = format && strcmp(format, "i16-rowscale-f32first") == 0;
    size_t row = i16 ? sizeof(float) + sizeof(int16_t) * (size_t)V : sizeof(float) * (size_t)V;
    size_t head = i16 ? sizeof(float) * (size_t)V : 0;
    if (!raw || bytes != head + n * row || (format && !i16 && strcmp(format, "f32") != 0)) {
        free(raw);
        return NULL;
    }
    if (!i16)
        return (float *)raw;
    float *out = malloc(sizeof(float) * n * (size_t)V);
    for (size_t i = 0; out && i < n; i++) {
        const uint8_t *r = raw + head + i * row;
        float sc;
        memcpy(&sc, r, sizeof(sc));
        for (int32_t j = 0; j < V; j++) {
            int16_t q;
            memcpy(&q, r + sizeof(float) + sizeof(int16_t) * (size_t)j, sizeof(q));
            out[i * (size_t)V + (size_t)j] = (float)q * sc;
        }
    }
    if (out && n)
        memcpy(out, raw, head); /* position 0 exact */
    free(raw);
    return out;
}

/* The in-repo corpus's models are small, with logits about 4 times smaller than the shared
 * fixtures' (|logit| <= 3-5) and so thinner top-2 margins: there a position whose golden top-1 /
 * top-2 margin is below CORPUS_ARGMAX_TIE counts as agreeing on the argmax whichever token wins
 * (every miss seen was at a margin of 0.0025-0.013, with d_i 0.02-0.05). The shared fixtures keep
 * their metric unchanged (tie 0). */
#define CORPUS_ARGMAX_TIE 0.02

/* Top-1 minus top-2 of x[0..V). */
static double top2_margin(const float *x, int32_t V) {
    float a = -INFINITY, b = -INFINITY;
    for (int32_t j = 0; j < V; j++) {
        if (x[j] > a) {
            b = a;
            a = x[j];
        } else if (x[j] > b) {
            b = x[j];
        }
    }
    return (double)a - (double)b;
}

/* Scores n rows of logits against the golden rows gl into sc (and returns the largest d_i); with
 * is_f32 every d_i must be within 1e-3. */
static double score_rows(const char *json_name, const float *logits, const float *gl, size_t n,
                         int32_t V, bool is_f32, double bar, double argmax_tie, int32_t n_batch,
                         struct score *sc) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const float *a = logits + i * (size_t)V, *b = gl + i * (size_t)V;
        double d = 0;
        for (int32_t j = 0; j < V; j++) {
            double dj = fabs((double)a[j] - (double)b[j]);
            if (!(dj <= d))
                d = dj; /* NaN propagates as a failure */
        }
        if (d > worst || d != d)
            worst = d;
        sc->n_pos++;
        sc->n_close += d <= bar;
        sc->n_argmax += ops_argmax(a, V) == ops_argmax(b, V) || top2_margin(b, V) < argmax_tie;
        if (is_f32)
            CHECK_MSG(d <= 1e-3, "%s, batch %d: position %zu: max |dlogit| %.3g > 1e-3",
                      json_name, n_batch, i, d);
    }
    return worst;
}

/* llama.cpp's own spread at the first position of one golden: how far its batched prefill and
 * its repacked weights land from its decode path there; -1 when root does not record it (the
 * shared fixtures' goldens). */
static double golden_first_spread(json_t *root) {
    json_t *rep = json_object_get(root, "llamacpp_first_position_repack_vs_decode");
    json_t *bat = json_object_get(json_object_get(root, "llamacpp_batched_prefill_vs_decode"),
                                  "first_position");
    return rep && bat ? fmax(json_number_value(rep), json_number_value(bat)) : -1;
}

/* The largest first-position spread of llama.cpp over the corpus goldens of the type mix that
 * json_name's model is (the part of its name after the architecture: "-q5_k_m__" for
 * "qwen35moe-q5_k_m__c1-chatml.json"), over every architecture; -1 when none records one. */
static double mix_first_spread(const char *json_name) {
    const char *sep = strstr(json_name, "__"), *dash = sep;
    while (dash && dash > json_name && *dash != '-')
        dash--;
    if (!sep || !dash || *dash != '-')
        return -1;
    char mix[64];
    snprintf(mix, sizeof(mix), "%.*s", (int)(sep + 2 - dash), dash);
    double worst = -1;
    DIR *d = opendir(CORPUS_DIR);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (!strstr(de->d_name, mix) || len < 5 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", CORPUS_DIR, de->d_name);
        json_t *root = json_load_file(path, 0, NULL);
        worst = fmax(worst, golden_first_spread(root));
        json_decref(root);
    }
    if (d)
        closedir(d);
    return worst;
}

/* The first-position check (tests/golden/README.md): at a prompt's first position there is no
 * history to amplify a rounding difference, so our logits there must be as close to the golden
 * as llama.cpp's own variants are to each other: its batched prefill and its repacked weights
 * against its decode path, the largest over every golden of the same type mix (a variant that
 * happens to agree exactly on one file does not make the bar 0), and at least FIRST_POS_FLOOR
 * (the F32 files' reordering noise: llama.cpp's variants 2.2e-6, ours up to 2.4e-6 from its decode
 * path). Its other builds of the same commit are variants too, measured per golden
 * (first_builds.txt): x86 with AVX2 only (its SIMD exp and 8-wide f32 dot where the goldens'
 * AVX-512 build goes 16 wide), x86 without SIMD (the scalar kernels: other summation orders) and
 * arm64 (NEON's orders); where the farthest of them lands farther, our row may land as far plus
 * the floor (a code flipped in the same place, reached by another rounding path).
 * The corpus stores that row in exact f32 for this. Goldens without the spread fields (the
 * shared fixtures) are not checked. */
#define FIRST_POS_FLOOR 5e-6

/* How far llama.cpp's farthest other build lands from the golden json_name at its first position
 * (CORPUS_DIR/first_builds.txt: "NAME__PROMPT D1 D2 ..." lines, a distance or '-' for a build not
 * measured, written by tools/goldens/make.sh); -1 when the file has no such line. */
static double build_first_spread(const char *json_name) {
    FILE *f = fopen(CORPUS_DIR "/first_builds.txt", "r");
    char line[512], name[200];
    double found = -1;
    int at = 0;
    while (f && found < 0 && fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || sscanf(line, "%199s%n", name, &at) != 1 ||
            strncmp(json_name, name, strlen(name)) != 0 ||
            strcmp(json_name + strlen(name), ".json") != 0)
            continue;
        found = 0;
        for (char *tok = strtok(line + at, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
            if (strcmp(tok, "-") != 0)
                found = fmax(found, strtod(tok, NULL));
    }
    if (f)
        fclose(f);
    return found;
}

/* Goldens whose first position misses llama.cpp's spread (tests/golden/README.md, "Known
 * gaps": an F16 row past the F16 variants' spread): each is a named skip, and a failure once it
 * meets the spread, so that the list only shrinks. */
static const char *const first_position_gaps[] = {
    "gemma4-f16__c2-mixed.json", NULL,
};

static bool is_first_position_gap(const char *json_name) {
    for (int i = 0; first_position_gaps[i]; i++)
        if (strcmp(first_position_gaps[i], json_name) == 0)
            return true;
    return false;
}

static void check_first_position(const char *json_name, json_t *root, const float *ours,
                                 const float *gl, int32_t V) {
    if (golden_first_spread(root) < 0)
        return;
    double spread = fmax(FIRST_POS_FLOOR, mix_first_spread(json_name));
    const double build = build_first_spread(json_name);
    if (build > spread)
        spread = build + FIRST_POS_FLOOR;
    double amax = 0, d = 0;
    for (int32_t j = 0; j < V; j++) {
        amax = fmax(amax, fabs(gl[j]));
        d = fmax(d, fabs((double)ours[j] - (double)gl[j]));
    }
    if (is_first_position_gap(json_name)) {
        CHECK_MSG(d > spread, "%s: first position now within llama.cpp's spread (%.3g <= %.3g): "
                  "remove it from first_position_gaps", json_name, d, spread);
        test_skip("%s: first position %.3g from llama.cpp, whose own variants differ by %.3g: a "
                  "known gap, NOT checked", json_name, d, spread);
    } else {
        CHECK_MSG(d <= spread, "%s: first position: max |dlogit| %.3g > llama.cpp's own spread "
                  "%.3g", json_name, d, spread);
    }
    if (getenv("SNIPER_FIDELITY_VERBOSE"))
        fprintf(stderr, "  %-40s first position: d %.2e (spread %.2e, |logit| <= %.2f)\n",
                json_name, d, spread, amax);
}

/* Checks that sc's two shares reach min_share (what: the prompt or model, for the message);
 * returns the smaller share. */
static double check_floor(const char *what, int32_t n_batch, const struct score *sc, double bar,
                          double min_share) {
    double close = (double)sc->n_close / sc->n_pos, same = (double)sc->n_argmax / sc->n_pos;
    CHECK_MSG(close >= min_share, "%s, batch %d: only %.1f%% of %d positions within %.2f "
              "(floor %.0f%%)", what, n_batch, 100 * close, sc->n_pos, bar, 100 * min_share);
    CHECK_MSG(same >= min_share, "%s, batch %d: only %.1f%% of %d positions with the same argmax "
              "(floor %.0f%%)", what, n_batch, 100 * same, sc->n_pos, 100 * min_share);
    return close < same ? close : same;
}

/* The greedy continuation, teacher-forced: from the prompt's last logits (last, overwritten), each
 * of llama.cpp's greedy tokens is fed in turn, so the context stays llama.cpp's, and our argmax
 * must be its token at every step whose golden top-2 margin is at least tie (a near-tie may go
 * either way). Returns the steps judged. */
static int check_greedy(const char *json_name, struct engine *e, float *last, int32_t V,
                        const int32_t *greedy, json_t *margins, size_t n_greedy, double tie,
                        int32_t n_batch) {
    int judged = 0;
    CHECK_MSG(json_array_size(margins) == n_greedy, "%s: %zu margins for %zu greedy tokens",
              json_name, json_array_size(margins), n_greedy);
    for (size_t s = 0; s < n_greedy && s < json_array_size(margins); s++) {
        if (json_number_value(json_array_get(margins, s)) >= tie) {
            int32_t tok = ops_argmax(last, V);
            CHECK_MSG(tok == greedy[s], "%s, batch %d: greedy step %zu: %d != %d", json_name,
                      n_batch, s, tok, greedy[s]);
            judged++;
        }
        if (engine_eval(e, 0, &greedy[s], 1, last, false) != 0) {
            CHECK_MSG(false, "%s: greedy step %zu: engine_eval failed", json_name, s);
            break;
        }
    }
    return judged;
}

/* Checks one golden json against the loaded model, fed batches[b] tokens a step for each b:
 * scores into sc[b], the prompt's floor, the greedy continuation, and the same bits at every
 * batch size. */
static void check_golden(const char *dir, const char *json_name, struct model *m,
                         struct tokenizer *tk, bool is_f32, double bar, const int32_t *batches,
                         struct score *sc) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/golden/%s", dir, json_name);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    CHECK_MSG(root != NULL, "%s: %s", path, jerr.text);
    if (!root)
        return;
    const char *prompt = json_string_value(json_object_get(root, "prompt"));
    size_t n_gold, n_greedy, n_ours;
    int32_t *gold = json_ids(json_object_get(root, "tokens"), &n_gold);
    int32_t *greedy = json_ids(json_object_get(root, "greedy_tokens"), &n_greedy);
    json_t *margins = json_object_get(root, "greedy_top2_margin");
    int32_t *ours = tokenizer_encode(tk, prompt, strlen(prompt), true, &n_ours);
    CHECK_MSG(n_ours == n_gold && memcmp(ours, gold, n_gold * sizeof(int32_t)) == 0,
              "%s: prompt tokens differ (%zu vs %zu)", json_name, n_ours, n_gold);
    CHECK_MSG(n_greedy >= 16, "%s: %zu greedy tokens", json_name, n_greedy);

    const int32_t V = m->hp.n_vocab;
    const size_t row_bytes = sizeof(float) * (size_t)V;
    snprintf(path, sizeof(path), "%s/golden/%s", dir,
             json_string_value(json_object_get(root, "logits_file")));
    float *gl = read_golden_logits(path,
                                   json_string_value(json_object_get(root, "logits_format")),
                                   n_gold, V);
    CHECK_MSG(gl != NULL, "%s: unreadable, or not %zu rows of %d logits", path, n_gold, V);
    float *logits[N_BATCHES] = {0}, *last = malloc(row_bytes);
    for (int b = 0; b < N_BATCHES; b++)
        logits[b] = malloc(row_bytes * n_gold);
    const double tie = is_f32 ? 5e-3 : 0.5;
    for (int b = 0; b < N_BATCHES && gl && last && logits[b]; b++) {
        struct engine_params ep = engine_params_default();
        ep.kv_type = QTYPE_F32;
        ep.n_ctx = 1024;
        ep.n_batch = batches[b];
        char err[256];
        struct engine *e = engine_new(m, &ep, err, sizeof(err));
        CHECK_MSG(e != NULL, "engine_new: %s", err);
        if (!e)
            break;
        CHECK_EQ_INT(engine_eval(e, 0, gold, (int32_t)n_gold, logits[b], true), 0);
        struct score one = {0};
        double tie_argmax = json_object_get(root, "logits_format") ? CORPUS_ARGMAX_TIE : 0;
        double worst = score_rows(json_name, logits[b], gl, n_gold, V, is_f32, bar, tie_argmax,
                                  batches[b], &one);
        double low = check_floor(json_name, batches[b], &one, bar, PROMPT_FLOOR);
        if (b == 0)
            check_first_position(json_name, root, logits[b], gl, V);
        sc[b].n_pos += one.n_pos;
        sc[b].n_close += one.n_close;
        sc[b].n_argmax += one.n_argmax;
        memcpy(last, logits[b] + (n_gold - 1) * (size_t)V, row_bytes);
        int judged = check_greedy(json_name, e, last, V, greedy, margins, n_greedy, tie,
                                  batches[b]);
        sc[b].n_judged += judged;
        bool same = b == 0 || memcmp(logits[b], logits[0], row_bytes * n_gold) == 0;
        CHECK_MSG(same, "%s: logits at batch %d differ from batch %d's", json_name, batches[b],
                  batches[0]);
        if (b == 0 || !same)
            fprintf(stderr, "  %-40s batch %3d: %3zu tokens, max |d| %.2e, worst share %5.1f%%, "
                            "greedy %2d/%zu steps judged\n", json_name, batches[b], n_gold,
                    worst, 100 * low, judged, n_greedy);
        engine_free(e);
    }
    free(last);
    for (int b = 0; b < N_BATCHES; b++)
        free(logits[b]);
    free(gl);
    free(ours);
    free(gold);
    free(greedy);
    json_decref(root);
}

/* Runs every golden of model `name` (n_golden prompts, in dir/golden) on the model at path, fed
 * n_batch tokens a step and then 7 and 1, and applies the per-model bar: positions within `bar`
 * (0.25; 0.5 for the hybrid recurrent models, per fixtures/README.md). */
static void check_model_at(const char *dir, const char *path, const char *name, int n_golden,
                           double bar, int32_t n_batch) {
    char gdir[1024], err[256];
    struct model *m = model_load(path, err, sizeof(err));
    CHECK_MSG(m != NULL, "model_load: %s", err);
    struct tokenizer *tk = m ? tokenizer_new(m->gguf, err, sizeof(err)) : NULL;
    CHECK_MSG(!m || tk != NULL, "tokenizer_new: %s", err);
    bool is_f32 = strstr(name, "f32") != NULL;
    const int32_t batches[N_BATCHES] = {n_batch, 7, 1};
    struct score sc[N_BATCHES] = {{0}};
    snprintf(gdir, sizeof(gdir), "%s/golden", dir);
    DIR *d = opendir(gdir);
    CHECK_MSG(d != NULL, "%s: no goldens", gdir);
    struct dirent *de;
    size_t prefix = strlen(name);
    int n_prompts = 0;
    while (m && tk && d && (de = readdir(d))) {
        const char *f = de->d_name;
        size_t len = strlen(f);
        if (strncmp(f, name, prefix) != 0 || strncmp(f + prefix, "__", 2) != 0 || len < 5 ||
            strcmp(f + len - 5, ".json") != 0)
            continue;
        check_golden(dir, f, m, tk, is_f32, bar, batches, sc);
        n_prompts++;
    }
    if (d)
        closedir(d);
    CHECK_MSG(n_prompts == n_golden, "%s: %d golden prompts found, expected %d", name, n_prompts,
              n_golden);
    for (int b = 0; b < N_BATCHES; b++) {
        if (!sc[b].n_pos)
            continue;
        fprintf(stderr, "  %s, batch %d: %d positions, %.1f%% within %.2f, %.1f%% same argmax\n",
                name, batches[b], sc[b].n_pos, 100.0 * sc[b].n_close / sc[b].n_pos, bar,
                100.0 * sc[b].n_argmax / sc[b].n_pos);
        check_floor(name, batches[b], &sc[b], bar, POOLED_FLOOR);
        /* every model has at least 4 greedy steps with a margin >= the tie over its prompts
         * (the in-repo corpus's small models have small logits: 2 of 32 in one prompt): fewer
         * means the margins went unread and nothing was judged */
        CHECK_MSG(sc[b].n_judged >= 4, "%s, batch %d: only %d greedy steps judged", name,
                  batches[b], sc[b].n_judged);
    }
    tokenizer_free(tk);
    model_free(m);
}

/* A model of ../shared/fixtures (skipped loudly when absent). */
static void check_model(const char *name, int n_golden, double bar) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("../shared/fixtures is absent: fidelity against llama.cpp NOT checked");
        return;
    }
    char path[1024];
    snprintf(path, sizeof(path), "%s/models/%s.gguf", dir, name);
    check_model_at(dir, path, name, n_golden, bar, 512);
}

/* gpt-oss's goldens live in the repository (tests/fixtures/gpt-oss). The prompts are fed 5 (then
 * 7 and 1) tokens a step, so the window layers' rings (window 16 - 1 + 5 = 20 rows) wrap many
 * times. */
#define GPTOSS_DIR "tests/fixtures/gpt-oss"

static void test_gptoss_f32(void) {
    char path[1024];
    if (test_make_model(path, sizeof(path), "tiny-gpt-oss-f32.gguf", "--preset tiny-gpt-oss") < 0)
        return;
    check_model_at(GPTOSS_DIR, path, "tiny-gpt-oss-f32", 5, 0.25, 5);
}

static void test_gptoss_mxfp4(void) {
    if (!quant_kernels(QTYPE_MXFP4)) {
        test_skip("this build has no MXFP4 kernels: tiny-gpt-oss-mxfp4_moe NOT checked");
        return;
    }
    check_model_at(GPTOSS_DIR, GPTOSS_DIR "/models/tiny-gpt-oss-mxfp4_moe.gguf",
                   "tiny-gpt-oss-mxfp4_moe", 5, 0.25, 5);
}

static void test_moe_f32(void) { check_model("tiny-qwen3moe-f32", 5, 0.25); }
static void test_moe_q8_0(void) { check_model("tiny-qwen3moe-q8_0", 5, 0.25); }
static void test_moe_q4_k_m(void) { check_model("tiny-qwen3moe-q4_k_m", 5, 0.25); }
static void test_dense_f32(void) { check_model("dense-qwen3-f32", 5, 0.25); }
static void test_dense_q8_0(void) { check_model("dense-qwen3-q8_0", 5, 0.25); }
static void test_dense_q4_k_m(void) { check_model("dense-qwen3-q4_k_m", 5, 0.25); }
static void test_qwen35moe_f32(void) { check_model("tiny-qwen35moe-f32", 5, 0.5); }
static void test_qwen35moe_q4_k_m(void) { check_model("tiny-qwen35moe-q4_k_m", 5, 0.5); }
static void test_qwen35_f32(void) { check_model("tiny-qwen35-f32", 4, 0.5); }
static void test_qwen35_q4_k_m(void) { check_model("tiny-qwen35-q4_k_m", 4, 0.5); }

/* The low-bit files (fixtures README "Low-bit fixtures"): goldens on p2, p3 and p4 only. */
static void test_x256_q2_k(void) { check_model("tiny-qwen3moe-x256-q2_k", 3, 0.25); }
static void test_x256_q3_k_m(void) { check_model("tiny-qwen3moe-x256-q3_k_m", 3, 0.25); }
static void test_x256_iq4_xs(void) { check_model("tiny-qwen3moe-x256-iq4_xs", 3, 0.25); }
static void test_x256_mxfp4_moe(void) { check_model("tiny-qwen3moe-x256-mxfp4_moe", 3, 0.25); }
static void test_dense_iq4_nl(void) { check_model("dense-qwen3-iq4_nl", 3, 0.25); }
static void test_dense_q4_1(void) { check_model("dense-qwen3-q4_1", 3, 0.25); }
static void test_dense_q5_1(void) { check_model("dense-qwen3-q5_1", 3, 0.25); }
/* The name of the first tensor type of the GGUF at path that this build has no kernels for, or
 * NULL (also for a file that does not open: model_load reports that). */
static const char *unsupported_type(const char *path) {
    char err[256];
    struct gguf *g = gguf_open(path, err, sizeof(err));
    const char *missing = NULL;
    for (uint64_t i = 0; g && !missing && i < g->n_tensors; i++)
        if (!quant_can_dequantize(g->tensors[i].type) || !quant_kernels(g->tensors[i].type))
            missing = qtype_name(g->tensors[i].type);
    gguf_free(g);
    return missing;
}

/* check_model for a file of which every tensor type has kernels in this build; otherwise a loud
 * skip naming the type (the iq1/iq2_xxs/iq2_xs files keep token_embd in Q2_K, which comes with the
 * other low-bit types). */
static void check_model_if_supported(const char *name) {
    const char *dir = test_fixtures_dir();
    char path[1024];
    snprintf(path, sizeof(path), "%s/models/%s.gguf", dir ? dir : ".", name);
    const char *missing = dir ? unsupported_type(path) : NULL;
    if (missing)
        test_skip("%s: no kernels for %s in this build: NOT checked", name, missing);
    else
        check_model(name, 3, 0.25);
}

/* The grid i-quant files (fixtures README "Low-bit fixtures"): goldens on p2, p3 and p4 only. */
static void test_x256_iq1_m(void) { check_model_if_supported("tiny-qwen3moe-x256-iq1_m"); }
static void test_x256_iq2_m(void) { check_model_if_supported("tiny-qwen3moe-x256-iq2_m"); }
static void test_x256_iq3_xxs(void) { check_model_if_supported("tiny-qwen3moe-x256-iq3_xxs"); }
static void test_dense_iq1_s(void) { check_model_if_supported("dense-qwen3-iq1_s"); }
static void test_dense_iq2_xxs(void) { check_model_if_supported("dense-qwen3-iq2_xxs"); }
static void test_dense_iq2_xs(void) { check_model_if_supported("dense-qwen3-iq2_xs"); }
static void test_dense_iq3_m(void) { check_model_if_supported("dense-qwen3-iq3_m"); }

/* ==== the in-repo corpus (tests/golden/README.md) ========================================== */


/* How many prompts the corpus has (tests/golden/prompts/\*.txt): every model has a golden each. */
static int corpus_prompts(void) {
    DIR *d = opendir(CORPUS_DIR "/prompts");
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        n += len > 4 && strcmp(de->d_name + len - 4, ".txt") == 0;
    }
    if (d)
        closedir(d);
    return n;
}

/* XXH64 (seed 0) of the file at path; 0 when it cannot be read. */
static uint64_t file_xxh64(const char *path) {
    size_t n = 0;
    char *bytes = test_read_file(path, &n);
    uint64_t h = bytes ? hash64(bytes, n, 0) : 0;
    free(bytes);
    return h;
}

/* One corpus.txt line, "ARCH NAME XXH64 MKMODEL-ARGS...", for architecture arch: regenerates the
 * model, checks that sniper-mkmodel wrote the very bytes the goldens were made from, and runs its
 * goldens (bar 0.5 for the recurrent hybrids, 0.25 otherwise; 1e-3 for F32). Returns 1 when the
 * line is arch's, 0 when another's, -1 when malformed. */
static int check_corpus_line(const char *arch, char *line, int n_prompts) {
    char a[32], name[128];
    unsigned long long want;
    int args = 0;
    line[strcspn(line, "\n")] = 0;
    if (sscanf(line, "%31s %127s %llx %n", a, name, &want, &args) != 3 || !args)
        return -1;
    if (strcmp(a, arch) != 0)
        return 0;
    char path[1024], file[160];
    snprintf(file, sizeof(file), "%s.gguf", name);
    if (test_make_model(path, sizeof(path), file, line + args) < 0)
        return 1;
    uint64_t h = file_xxh64(path);
    CHECK_MSG(h == want, "%s: sniper-mkmodel wrote XXH64 %016llx, corpus.txt has %016llx: the "
              "generator changed, so the goldens no longer describe this model (rerun "
              "tools/goldens/make.sh)", name, (unsigned long long)h, want);
    const char *missing = h == want ? unsupported_type(path) : NULL;
    if (missing)
        test_skip("%s: no kernels for %s in this build: NOT checked", name, missing);
    else if (h == want)
        check_model_at(CORPUS_ROOT, path, name, n_prompts,
                       strncmp(arch, "qwen35", 6) == 0 ? 0.5 : 0.25, 512);
    remove(path);
    return 1;
}

/* Every corpus model of architecture arch. */
static void check_corpus(const char *arch) {
    FILE *f = fopen(CORPUS_DIR "/corpus.txt", "r");
    CHECK_MSG(f != NULL, "%s/corpus.txt is missing", CORPUS_DIR);
    CHECK_MSG(build_first_spread("qwen3-f32__c1-chatml.json") >= 0, "%s/first_builds.txt is "
              "missing or has no line for qwen3-f32__c1-chatml", CORPUS_DIR);
    int n_prompts = corpus_prompts(), n_models = 0, lineno = 0;
    CHECK_MSG(n_prompts >= 2, "%s/prompts: %d prompts", CORPUS_DIR, n_prompts);
    char line[1024];
    while (f && fgets(line, sizeof(line), f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        int rc = check_corpus_line(arch, line, n_prompts);
        CHECK_MSG(rc >= 0, "corpus.txt:%d: not \"ARCH NAME XXH64 ARGS\"", lineno);
        n_models += rc > 0;
    }
    if (f)
        fclose(f);
    CHECK_MSG(n_models >= 20, "corpus.txt: only %d %s models", n_models, arch);
}

static void test_corpus_qwen3moe(void) { check_corpus("qwen3moe"); }
static void test_corpus_qwen3(void) { check_corpus("qwen3"); }
static void test_corpus_llama(void) { check_corpus("llama"); }
static void test_corpus_qwen35moe(void) { check_corpus("qwen35moe"); }
static void test_corpus_qwen35(void) { check_corpus("qwen35"); }
static void test_corpus_gptoss(void) { check_corpus("gpt-oss"); }
static void test_corpus_gemma4(void) { check_corpus("gemma4"); }

static const struct test_case cases[] = {
    {"corpus_qwen3moe", test_corpus_qwen3moe},
    {"corpus_qwen3", test_corpus_qwen3},
    {"corpus_llama", test_corpus_llama},
    {"corpus_qwen35moe", test_corpus_qwen35moe},
    {"corpus_qwen35", test_corpus_qwen35},
    {"corpus_gptoss", test_corpus_gptoss},
    {"corpus_gemma4", test_corpus_gemma4},
    {"dense_f32", test_dense_f32},
    {"dense_q8_0", test_dense_q8_0},
    {"dense_q4_k_m", test_dense_q4_k_m},
    {"moe_f32", test_moe_f32},
    {"moe_q8_0", test_moe_q8_0},
    {"moe_q4_k_m", test_moe_q4_k_m},
    {"qwen35moe_f32", test_qwen35moe_f32},
    {"qwen35moe_q4_k_m", test_qwen35moe_q4_k_m},
    {"qwen35_f32", test_qwen35_f32},
    {"qwen35_q4_k_m", test_qwen35_q4_k_m},
    {"x256_q2_k", test_x256_q2_k},
    {"x256_q3_k_m", test_x256_q3_k_m},
    {"x256_iq4_xs", test_x256_iq4_xs},
    {"x256_mxfp4_moe", test_x256_mxfp4_moe},
    {"dense_iq4_nl", test_dense_iq4_nl},
    {"dense_q4_1", test_dense_q4_1},
    {"dense_q5_1", test_dense_q5_1},
    {"x256_iq1_m", test_x256_iq1_m},
    {"x256_iq2_m", test_x256_iq2_m},
    {"x256_iq3_xxs", test_x256_iq3_xxs},
    {"dense_iq1_s", test_dense_iq1_s},
    {"dense_iq2_xxs", test_dense_iq2_xxs},
    {"dense_iq2_xs", test_dense_iq2_xs},
    {"dense_iq3_m", test_dense_iq3_m},
    {"gptoss_f32", test_gptoss_f32},
    {"gptoss_mxfp4", test_gptoss_mxfp4},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
