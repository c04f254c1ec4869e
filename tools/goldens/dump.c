/* tools/goldens/dump.c - llama.cpp's outputs for one model and one prompt, in the golden format of
 * tests/golden/README.md. Built by tools/goldens/make.sh against a llama.cpp checkout outside this
 * repository (its public C API, llama.h); never part of `make` or `make test`.
 *
 *   dump MODEL.gguf PROMPT.txt OUT_PREFIX
 *   dump --first MODEL.gguf PROMPT.txt GOLDEN_PREFIX
 *
 * Writes OUT_PREFIX.json and OUT_PREFIX.logits.i16. What it runs: the model on the CPU without
 * weight repacking (use_extra_bufts off), a context of 1024 with F32 K and V caches, flash
 * attention off, 2 threads; the prompt tokenized without BOS with special tokens parsed; the
 * tokens fed one at a time (the decode path), each position's logits kept; then 32 greedy steps
 * (argmax, with the top-1 minus top-2 margin and the piece); then, in a fresh context, the prompt
 * as one batch, and how far its logits land from the decode path's (over all positions and at the
 * first); and the first token decoded by the model loaded with weight repacking on, against the
 * decode path's first row.
 * With --first it writes nothing: it decodes the prompt's first token as above and prints how far
 * that row lands from GOLDEN_PREFIX.logits.i16's exact first row (max |difference|, %.9g): run
 * against another build of ggml-cpu (make.sh: AVX2 only, no SIMD, arm64 under qemu-user), it
 * measures llama.cpp's spread between its own builds.
 * Logits file: the first position's n_vocab logits as little-endian f32 (exact: the first-position
 * check needs them so), then for each position a little-endian f32 scale s then n_vocab
 * little-endian int16 q; logit = q * s, with s = max|logit| / 32767 (0 for an all-zero row). */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

enum { N_CTX = 1024, N_GREEDY = 32 };

/* Threads of a context: 2, and 1 for --first, which also runs an arm64 build under qemu-user,
 * where ggml's spinning workers stall (one row's arithmetic does not depend on the count). */
static int n_threads = 2;

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static char *read_text(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) {
        buf[len] = 0;
        *n = (size_t)len;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static struct llama_context *new_context(struct llama_model *model) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_CTX;
    cp.n_ubatch = N_CTX;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    return llama_init_from_model(model, cp);
}

/* Index of the largest of x[0..n) (the first on ties) and the gap to the second largest. */
static int32_t top2(const float *x, int32_t n, float *margin) {
    int32_t best = 0;
    float second = -INFINITY;
    for (int32_t j = 1; j < n; j++) {
        if (x[j] > x[best]) {
            second = x[best];
            best = j;
        } else if (x[j] > second) {
            second = x[j];
        }
    }
    *margin = x[best] - second;
    return best;
}

/* Appends one row of logits in the i16 format to f. Returns 0 or -1. */
static int write_row(FILE *f, const float *x, int32_t n, int16_t *q) {
    float amax = 0;
    for (int32_t j = 0; j < n; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    float s = amax / 32767.0f;
    for (int32_t j = 0; j < n; j++)
        q[j] = s > 0 ? (int16_t)lrintf(x[j] / s) : 0;
    return fwrite(&s, sizeof(s), 1, f) == 1 && fwrite(q, sizeof(*q), (size_t)n, f) == (size_t)n
               ? 0 : -1;
}

/* max_j |a[j] - b[j]| over n values. */
static double max_diff(const float *a, const float *b, int32_t n) {
    double d = 0;
    for (int32_t j = 0; j < n; j++)
        d = fmax(d, fabs((double)a[j] - (double)b[j]));
    return d;
}

/* The batched prefill of toks in a fresh context: max |batched - decode| over all logits and the
 * positions whose max exceeds 1e-3, into out. */
static int batched_vs_decode(struct llama_model *model, const llama_token *toks, int32_t n,
                             const float *decode, int32_t V, json_t *out) {
    struct llama_context *ctx = new_context(model);
    struct llama_batch b = llama_batch_init(n, 0, 1);
    if (!ctx)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    double worst = 0;
    int over = 0;
    double first = 0;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        double d = max_diff(llama_get_logits_ith(ctx, i), decode + (size_t)i * V, V);
        first = i == 0 ? d : first;
        worst = fmax(worst, d);
        over += d > 1e-3;
    }
    json_object_set_new(out, "max_abs_diff", json_real(worst));
    json_object_set_new(out, "positions_over_1e-3", json_integer(over));
    json_object_set_new(out, "first_position", json_real(first));
    llama_batch_free(b);
    llama_free(ctx);
    return rc == 0 ? 0 : -1;
}

/* llama.cpp's spread at the first position (no history to amplify a difference): the decode
 * path's row 0 against the same model loaded with weight repacking on (extra buffer types),
 * decoding the first token alone, into *d. Returns 0 or -1. */
static int first_position_repack(const char *model_path, llama_token tok, const float *row0,
                                 int32_t V, double *d) {
    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = true;
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    struct llama_context *ctx = model ? new_context(model) : NULL;
    int rc = ctx ? llama_decode(ctx, llama_batch_get_one(&tok, 1)) : -1;
    if (rc == 0)
        *d = max_diff(llama_get_logits_ith(ctx, -1), row0, V);
    llama_free(ctx);
    llama_model_free(model);
    return rc == 0 ? 0 : -1;
}

/* The --first mode (see the top): prints the first row's distance to the golden's. Returns 0 or
 * 1 (an unreadable file or a failed decode). */
static int first_vs_golden(const char *model_path, const char *prompt_path, const char *golden) {
    size_t text_len = 0;
    char *text = read_text(prompt_path, &text_len);
    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;
    mp.n_gpu_layers = 0;
    struct llama_model *model = text ? llama_model_load_from_file(model_path, mp) : NULL;
    struct llama_context *ctx = model ? new_context(model) : NULL;
    char path[4096];
    snprintf(path, sizeof(path), "%s.logits.i16", golden);
    FILE *f = fopen(path, "rb");
    const int32_t V = model ? llama_vocab_n_tokens(llama_model_get_vocab(model)) : 0;
    float *gold = V > 0 ? malloc(sizeof(float) * (size_t)V) : NULL;
    llama_token *toks = malloc(sizeof(llama_token) * N_CTX);
    int rc = ctx && f && gold && toks && fread(gold, sizeof(float), (size_t)V, f) == (size_t)V &&
             llama_tokenize(llama_model_get_vocab(model), text, (int32_t)text_len, toks, N_CTX,
                            false, true) > 0 &&
             llama_decode(ctx, llama_batch_get_one(toks, 1)) == 0 ? 0 : 1;
    if (rc == 0)
        printf("%.9g\n", max_diff(llama_get_logits_ith(ctx, -1), gold, V));
    else
        fprintf(stderr, "dump: --first %s %s %s failed\n", model_path, prompt_path, golden);
    if (f)
        fclose(f);
    free(toks);
    free(gold);
    free(text);
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--first") == 0) {
        n_threads = 1;
        llama_log_set(quiet_log, NULL);
        llama_backend_init();
        return first_vs_golden(argv[2], argv[3], argv[4]);
    }
    if (argc != 4) {
        fprintf(stderr, "usage: dump MODEL.gguf PROMPT.txt OUT_PREFIX\n"
                        "       dump --first MODEL.gguf PROMPT.txt GOLDEN_PREFIX\n");
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    size_t text_len = 0;
    char *text = read_text(argv[2], &text_len);
    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;
    mp.n_gpu_layers = 0;
    struct llama_model *model = text ? llama_model_load_from_file(argv[1], mp) : NULL;
    struct llama_context *ctx = model ? new_context(model) : NULL;
    if (!ctx) {
        fprintf(stderr, "dump: cannot read %s or load %s\n", argv[2], argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int32_t V = llama_vocab_n_tokens(vocab);
    llama_token *toks = malloc(sizeof(llama_token) * N_CTX);
    int32_t n = llama_tokenize(vocab, text, (int32_t)text_len, toks, N_CTX, false, true);
    if (n <= 0 || n + N_GREEDY > N_CTX) {
        fprintf(stderr, "dump: %s: %d tokens\n", argv[2], n);
        return 1;
    }
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)n);
    int16_t *q = malloc(sizeof(int16_t) * (size_t)V);
    char path[4096];
    snprintf(path, sizeof(path), "%s.logits.i16", argv[3]);
    FILE *lf = fopen(path, "wb");
    double max_abs = 0;
    int rc = lf ? 0 : -1;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        rc = llama_decode(ctx, llama_batch_get_one(&toks[i], 1));
        const float *row = rc == 0 ? llama_get_logits_ith(ctx, -1) : NULL;
        if (!row)
            break;
        memcpy(logits + (size_t)i * V, row, sizeof(float) * (size_t)V);
        if (i == 0 && fwrite(row, sizeof(float), (size_t)V, lf) != (size_t)V)
            break;
        for (int32_t j = 0; j < V; j++)
            max_abs = fmax(max_abs, fabs(row[j]));
        rc = write_row(lf, row, V, q);
    }
    if (!lf || fclose(lf) != 0 || rc != 0) {
        fprintf(stderr, "dump: decoding %s failed\n", argv[2]);
        return 1;
    }

    json_t *root = json_object(), *jt = json_array(), *gt = json_array(), *gm = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(jt, json_integer(toks[i]));
    const float *last = logits + (size_t)(n - 1) * V;
    char hex[8 * 1024] = "";
    size_t hex_len = 0;
    for (int s = 0; s < N_GREEDY && rc == 0; s++) {
        float margin;
        llama_token t = top2(last, V, &margin);
        json_array_append_new(gt, json_integer(t));
        json_array_append_new(gm, json_real(margin));
        char piece[256];
        int32_t np = llama_token_to_piece(vocab, t, piece, sizeof(piece), 0, true);
        for (int32_t k = 0; k < np && hex_len + 3 < sizeof(hex); k++)
            hex_len += (size_t)snprintf(hex + hex_len, 3, "%02x", (unsigned char)piece[k]);
        rc = llama_decode(ctx, llama_batch_get_one(&t, 1));
        last = llama_get_logits_ith(ctx, -1);
    }
    const char *slash = strrchr(argv[3], '/');
    snprintf(path, sizeof(path), "%s.logits.i16", slash ? slash + 1 : argv[3]);
    json_object_set_new(root, "prompt", json_stringn(text, text_len));
    json_object_set_new(root, "add_special", json_false());
    json_object_set_new(root, "parse_special", json_true());
    json_object_set_new(root, "tokens", jt);
    json_object_set_new(root, "n_vocab", json_integer(V));
    json_object_set_new(root, "logits_file", json_string(path));
    json_object_set_new(root, "logits_format", json_string("i16-rowscale-f32first"));
    json_object_set_new(root, "logits_shape", json_pack("[i, i]", n, V));
    json_object_set_new(root, "greedy_tokens", gt);
    json_object_set_new(root, "greedy_top2_margin", gm);
    json_object_set_new(root, "greedy_text_hex", json_string(hex));
    json_object_set_new(root, "max_abs_logit", json_real(max_abs));
    json_t *bvd = json_object();
    if (rc == 0)
        rc = batched_vs_decode(model, toks, n, logits, V, bvd);
    json_object_set_new(root, "llamacpp_batched_prefill_vs_decode", bvd);
    double repack = 0;
    if (rc == 0)
        rc = first_position_repack(argv[1], toks[0], logits, V, &repack);
    json_object_set_new(root, "llamacpp_first_position_repack_vs_decode", json_real(repack));
    snprintf(path, sizeof(path), "%s.json", argv[3]);
    if (rc != 0 || json_dump_file(root, path, JSON_REAL_PRECISION(7)) != 0) {
        fprintf(stderr, "dump: writing %s failed\n", path);
        return 1;
    }
    json_decref(root);
    free(logits);
    free(q);
    free(toks);
    free(text);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
