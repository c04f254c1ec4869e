/* test_mkmodel.c - the GGUF writer (common/gguf_write.c) and sniper-mkmodel ($BUILD/sniper-mkmodel,
 * run as a child process): metadata, tensor names/shapes/types against llama.cpp's layout, complete
 * data, sane dequantized values, determinism, --upcycle copies, tokenizer import, and failures
 * (full disk via RLIMIT_FSIZE, missing directories) that must leave no file behind; a split model
 * laid out as llama.cpp's gguf-split writes it (--split-max-size). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "engine.h"
#include "harness.h"
#include "hash64.h"
#include "model.h"
#include "quant.h"

/* ==== helpers ================================================================================= */

static const char *tmp_path(const char *name) {
    static char bufs[8][4096];
    static int next;
    char *p = bufs[next++ % 8];
    snprintf(p, sizeof(bufs[0]), "%s/%s", test_tmpdir(), name);
    return p;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of entries of dir whose name starts with prefix (temp files included). */
static int count_prefixed(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* Runs sniper-mkmodel with args (NULL-terminated) plus --quiet; fsize_limit > 0 caps the file
 * size the child may write (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG). Returns the
 * exit status, or -1 when it could not run. */
static int mkmodel(long fsize_limit, const char *const *args) {
    char bin[4096];
    const char *build = getenv("BUILD");
    snprintf(bin, sizeof(bin), "%s/sniper-mkmodel", build && *build ? build : "build");
    if (access(bin, X_OK) != 0) {
        test_fail(__FILE__, __LINE__, "\"%s\" is missing: build it first", bin);
        return -1;
    }
    const char *argv[48] = {bin};
    int n = 1;
    for (; args[n - 1] && n < 46; n++)
        argv[n] = args[n - 1];
    argv[n++] = "--quiet";
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (fsize_limit > 0) {
            struct rlimit rl = {(rlim_t)fsize_limit, (rlim_t)fsize_limit};
            signal(SIGXFSZ, SIG_IGN);
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define MKMODEL(...) mkmodel(0, (const char *const[]){__VA_ARGS__, NULL})

static struct gguf *open_ok(const char *path) {
    char err[256] = "";
    struct gguf *g = gguf_open(path, err, sizeof(err));
    CHECK_MSG(g != NULL, "gguf_open(\"%s\"): %s", path, err);
    return g;
}

static uint32_t get_u32(const struct gguf *g, const char *key) {
    uint32_t v = 0;
    CHECK_MSG(gguf_get_u32(g, key, &v) == 0, "missing u32 \"%s\"", key);
    return v;
}

/* Whole tensor data (malloc'd) or NULL. */
static void *read_tensor(const struct gguf *g, const char *name) {
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    CHECK_MSG(t != NULL, "missing tensor \"%s\"", name);
    void *buf = t ? malloc(t->n_bytes) : NULL;
    if (buf && gguf_read_tensor(g, t, buf) != 0) {
        test_fail(__FILE__, __LINE__, "cannot read \"%s\"", name);
        free(buf);
        buf = NULL;
    }
    return buf;
}

/* ==== the writer ============================================================================== */

static void test_writer_roundtrip(void) {
    const char *path = tmp_path("w-roundtrip.gguf");
    static const char *const strs[] = {"a", "", "\xc4\xa0the"};
    static const int32_t ints[] = {1, -2, 3};
    static const float flts[] = {0.5f, -1.0f};
    float f32[3 * 5];
    uint8_t q8[2 * 34] = {0};
    for (int i = 0; i < 15; i++)
        f32[i] = (float)i - 7.0f;
    for (int i = 0; i < 68; i++)
        q8[i] = (uint8_t)(i * 7);
    struct gguf_writer *w = gguf_writer_new();
    CHECK(w != NULL);
    CHECK_EQ_INT(gguf_writer_add_u32(w, "k.u32", 7), 0);
    CHECK_EQ_INT(gguf_writer_add_i32(w, "k.i32", -9), 0);
    CHECK_EQ_INT(gguf_writer_add_u64(w, "k.u64", 1ull << 40), 0);
    CHECK_EQ_INT(gguf_writer_add_f32(w, "k.f32", 1e-6f), 0);
    CHECK_EQ_INT(gguf_writer_add_bool(w, "k.bool", true), 0);
    CHECK_EQ_INT(gguf_writer_add_str(w, "k.str", "qwen3moe"), 0);
    CHECK_EQ_INT(gguf_writer_add_arr_str(w, "k.astr", strs, 3), 0);
    CHECK_EQ_INT(gguf_writer_add_arr_i32(w, "k.ai32", ints, 3), 0);
    CHECK_EQ_INT(gguf_writer_add_arr_f32(w, "k.af32", flts, 2), 0);
    CHECK_EQ_INT(gguf_writer_add_u32(w, "k.u32", 8), -EINVAL); /* duplicate */
    CHECK_EQ_INT(gguf_writer_add_tensor_data(w, "a", QTYPE_F32, 2, (uint64_t[]){3, 5}, f32), 0);
    CHECK_EQ_INT(gguf_writer_add_tensor_data(w, "b", QTYPE_Q8_0, 1, (uint64_t[]){64}, q8), 0);
    CHECK_EQ_INT(gguf_writer_add_tensor_data(w, "c", QTYPE_F32, 1, (uint64_t[]){1}, f32), 0);
    uint64_t expect_bytes = gguf_writer_file_bytes(w);
    CHECK_EQ_INT(gguf_writer_save(w, path), 0);
    gguf_writer_free(w);

    size_t n = 0;
    uint8_t *raw = test_read_file(path, &n);
    CHECK(raw && n == expect_bytes && n % 32 == 0 && memcmp(raw, "GGUF\3\0\0\0", 8) == 0);
    free(raw);
    struct gguf *g = open_ok(path);
    if (!g)
        return;
    CHECK_EQ_INT(g->version, 3);
    CHECK_EQ_INT(g->n_kv, 9);
    CHECK_EQ_INT(g->n_tensors, 3);
    CHECK_EQ_INT(get_u32(g, "k.u32"), 7);
    int32_t i32 = 0;
    uint64_t u64 = 0, na = 0;
    float f = 0;
    bool b = false;
    CHECK(gguf_get_i32(g, "k.i32", &i32) == 0 && i32 == -9);
    CHECK(gguf_get_u64(g, "k.u64", &u64) == 0 && u64 == 1ull << 40);
    CHECK(gguf_get_f32(g, "k.f32", &f) == 0 && f == 1e-6f);
    CHECK(gguf_get_bool(g, "k.bool", &b) == 0 && b);
    CHECK_STR(gguf_get_str(g, "k.str"), "qwen3moe");
    const struct gguf_str *as = gguf_get_arr(g, "k.astr", GGUF_VTYPE_STRING, &na);
    CHECK(as && na == 3 && strcmp(as[2].data, strs[2]) == 0 && as[1].len == 0);
    const int32_t *ai = gguf_get_arr(g, "k.ai32", GGUF_VTYPE_INT32, &na);
    CHECK(ai && na == 3 && ai[1] == -2);
    const float *af = gguf_get_arr(g, "k.af32", GGUF_VTYPE_FLOAT32, &na);
    CHECK(af && na == 2 && af[1] == -1.0f);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        CHECK_EQ_INT(g->tensors[i].data_off % 32, 0);
    float *ra = read_tensor(g, "a");
    uint8_t *rb = read_tensor(g, "b");
    CHECK(ra && memcmp(ra, f32, sizeof(f32)) == 0);
    CHECK(rb && memcmp(rb, q8, sizeof(q8)) == 0);
    free(ra);
    free(rb);
    gguf_free(g);
}

static void test_writer_rejects(void) {
    struct gguf_writer *w = gguf_writer_new();
    char long_name[80];
    memset(long_name, 'x', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    CHECK_EQ_INT(gguf_writer_add_str(w, "", "x"), -EINVAL);
    CHECK_EQ_INT(gguf_writer_add_str(w, "k", NULL), -EINVAL);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", QTYPE_Q4_K, 1, (uint64_t[]){128}), -EINVAL);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "z", QTYPE_F32, 2, (uint64_t[]){4, 0}), -EINVAL);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "d", QTYPE_F32, 5, (uint64_t[]){1, 1, 1, 1, 1}),
                 -EINVAL);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, long_name, QTYPE_F32, 1, (uint64_t[]){4}), -EINVAL);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "t", QTYPE_F32, 1, (uint64_t[]){4}), 0);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "t", QTYPE_F32, 1, (uint64_t[]){4}), -EINVAL);
    CHECK_EQ_INT(gguf_writer_set_alignment(w, 64), -EINVAL); /* after a tensor */
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "h", QTYPE_F32, 2,
                                        (uint64_t[]){1ull << 62, 1ull << 62}), -EOVERFLOW);
    CHECK_EQ_INT(gguf_writer_save(w, tmp_path("w-rejects.gguf")), -EINVAL); /* no data */
    CHECK(!file_exists(tmp_path("w-rejects.gguf")));
    gguf_writer_free(w);
}

/* Streaming: chunks, too much data, missing data, and free before finish leave nothing. */
static void test_writer_stream_errors(void) {
    float x[100] = {0};
    const char *path = tmp_path("w-stream.gguf");
    struct gguf_writer *w = gguf_writer_new();
    CHECK_EQ_INT(gguf_writer_set_alignment(w, 64), 0);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "a", QTYPE_F32, 1, (uint64_t[]){10}), 0);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "b", QTYPE_F32, 1, (uint64_t[]){20}), 0);
    CHECK_EQ_INT(gguf_writer_write(w, x, 4), -EINVAL); /* not open */
    CHECK_EQ_INT(gguf_writer_open(w, path), 0);
    CHECK_EQ_INT(count_prefixed(test_tmpdir(), "w-stream.gguf.tmp."), 1);
    CHECK_STR(gguf_writer_current(w), "a");
    CHECK_EQ_INT(gguf_writer_write(w, x, 12), 0);
    CHECK_EQ_INT(gguf_writer_write(w, x, 40), -EINVAL); /* runs past "a" */
    CHECK_EQ_INT(gguf_writer_write(w, x, 28), 0);
    CHECK_STR(gguf_writer_current(w), "b");
    CHECK_EQ_INT(gguf_writer_write(w, x, 40), 0);
    CHECK(gguf_writer_finish(w) != 0); /* "b" incomplete */
    CHECK(!file_exists(path));
    CHECK_EQ_INT(count_prefixed(test_tmpdir(), "w-stream.gguf"), 0);
    gguf_writer_free(w);

    w = gguf_writer_new();
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "a", QTYPE_F32, 1, (uint64_t[]){10}), 0);
    CHECK_EQ_INT(gguf_writer_open(w, path), 0);
    gguf_writer_free(w); /* abandoned */
    CHECK_EQ_INT(count_prefixed(test_tmpdir(), "w-stream.gguf"), 0);
}

static void test_writer_unwritable(void) {
    struct gguf_writer *w = gguf_writer_new();
    CHECK_EQ_INT(gguf_writer_add_u32(w, "k", 1), 0);
    CHECK_EQ_INT(gguf_writer_open(w, tmp_path("no-such-dir/x.gguf")), -ENOENT);
    gguf_writer_free(w);
    const char *file = tmp_path("w-plain-file");
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    char under[4200];
    snprintf(under, sizeof(under), "%s/x.gguf", file);
    w = gguf_writer_new();
    CHECK_EQ_INT(gguf_writer_add_u32(w, "k", 1), 0);
    CHECK_EQ_INT(gguf_writer_open(w, under), -ENOTDIR);
    CHECK_EQ_INT(gguf_writer_finish(w), -ENOTDIR); /* the first error sticks */
    gguf_writer_free(w);
    CHECK(MKMODEL("-o", tmp_path("no-such-dir/m.gguf")) == 1);
    CHECK(!file_exists(tmp_path("no-such-dir")));
    /* a path that is not a regular file (a FIFO here, /dev/null in life: the final rename would
     * replace it) is refused before anything is written, and stays what it was */
    const char *fifo = tmp_path("w-fifo");
    CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
    w = gguf_writer_new();
    CHECK_EQ_INT(gguf_writer_add_u32(w, "k", 1), 0);
    CHECK_EQ_INT(gguf_writer_open(w, fifo), -EINVAL);
    CHECK_EQ_INT(gguf_writer_finish(w), -EINVAL);
    gguf_writer_free(w);
    CHECK(MKMODEL("-o", fifo) == 1);
    struct stat st;
    CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK_EQ_INT(count_prefixed(test_tmpdir(), "w-fifo.tmp"), 0);
    unlink(fifo);
}

/* A disk that fills up mid-file: RLIMIT_FSIZE makes write() fail with EFBIG. */
static void test_full_disk(void) {
    const char *path = tmp_path("full.gguf");
    int rc = mkmodel(1 << 20, (const char *const[]){"-o", path, "--types", "f32", NULL});
    CHECK_EQ_INT(rc, 1);
    CHECK(!file_exists(path));
    CHECK_EQ_INT(count_prefixed(test_tmpdir(), "full.gguf"), 0);
    rc = mkmodel(64 << 10, (const char *const[]){"-o", path, "--types", "q4_k_m", NULL});
    CHECK_EQ_INT(rc, 1);
    CHECK_EQ_INT(count_prefixed(test_tmpdir(), "full.gguf"), 0);
}

/* ==== sniper-mkmodel: layout ================================================================== */

enum { T_F32, T_Q8_0, T_Q4_K_M };

struct shape {
    const char *arch;
    int types;
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_expert, n_used, n_ff_exp, ctx;
    uint32_t n_vocab; /* 0: don't check */
};

static const struct shape tiny_moe = {"qwen3moe", T_F32, 4, 256, 8, 2, 64, 512, 16, 4, 128,
                                      4096, 0};

/* The type llama-quantize's recipe gives (independent restatement of the tool's rule). */
static enum qtype expect_type(int types, const char *suffix, uint32_t il, uint32_t n_layer,
                              uint64_t ne0) {
    bool norm = strstr(suffix, "norm") || strcmp(suffix, "ffn_gate_inp") == 0;
    if (types == T_F32 || norm)
        return QTYPE_F32;
    if (types == T_Q8_0)
        return QTYPE_Q8_0;
    bool more_bits = il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
    bool six = strcmp(suffix, "output") == 0 ||
               ((strcmp(suffix, "attn_v") == 0 || strncmp(suffix, "ffn_down", 8) == 0) &&
                more_bits);
    if (ne0 % 256)
        return six ? QTYPE_Q8_0 : QTYPE_Q5_0;
    return six ? QTYPE_Q6_K : QTYPE_Q4_K;
}

static void check_tensor(const struct gguf *g, const struct shape *s, const char *suffix, int il,
                         uint64_t ne0, uint64_t ne1, uint64_t ne2) {
    char name[96];
    if (il >= 0)
        snprintf(name, sizeof(name), "blk.%d.%s.weight", il, suffix);
    else
        snprintf(name, sizeof(name), "%s.weight", suffix);
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    CHECK_MSG(t != NULL, "missing tensor \"%s\"", name);
    if (!t)
        return;
    uint32_t n_dims = ne2 ? 3 : ne1 ? 2 : 1;
    enum qtype want = expect_type(s->types, suffix, il < 0 ? 0 : (uint32_t)il, s->n_layer, ne0);
    CHECK_MSG(t->n_dims == n_dims && t->ne[0] == ne0 && t->ne[1] == (ne1 ? ne1 : 1) &&
              t->ne[2] == (ne2 ? ne2 : 1), "\"%s\": wrong shape", name);
    CHECK_MSG(t->type == want, "\"%s\": type %s, expected %s", name, qtype_name(t->type),
              qtype_name(want));
}

static void check_layer(const struct gguf *g, const struct shape *s, int il) {
    uint64_t e = s->n_embd, q = (uint64_t)s->n_head * s->head_dim;
    uint64_t kv = (uint64_t)s->n_head_kv * s->head_dim;
    bool moe = strcmp(s->arch, "qwen3moe") == 0;
    check_tensor(g, s, "attn_norm", il, e, 0, 0);
    check_tensor(g, s, "attn_q", il, e, q, 0);
    check_tensor(g, s, "attn_k", il, e, kv, 0);
    check_tensor(g, s, "attn_v", il, e, kv, 0);
    check_tensor(g, s, "attn_output", il, q, e, 0);
    check_tensor(g, s, "ffn_norm", il, e, 0, 0);
    if (strcmp(s->arch, "llama") != 0) {
        check_tensor(g, s, "attn_q_norm", il, s->head_dim, 0, 0);
        check_tensor(g, s, "attn_k_norm", il, s->head_dim, 0, 0);
    }
    if (moe) {
        check_tensor(g, s, "ffn_gate_inp", il, e, s->n_expert, 0);
        check_tensor(g, s, "ffn_gate_exps", il, e, s->n_ff_exp, s->n_expert);
        check_tensor(g, s, "ffn_up_exps", il, e, s->n_ff_exp, s->n_expert);
        check_tensor(g, s, "ffn_down_exps", il, s->n_ff_exp, e, s->n_expert);
    } else {
        check_tensor(g, s, "ffn_gate", il, e, s->n_ff, 0);
        check_tensor(g, s, "ffn_up", il, e, s->n_ff, 0);
        check_tensor(g, s, "ffn_down", il, s->n_ff, e, 0);
    }
}

static void check_hparams(const struct gguf *g, const struct shape *s) {
    char key[128];
    float f = 0;
    bool moe = strcmp(s->arch, "qwen3moe") == 0;
    CHECK_STR(gguf_get_str(g, "general.architecture"), s->arch);
#define ARCH_U32(suffix, want) \
    do { snprintf(key, sizeof(key), "%s.%s", s->arch, suffix); \
         CHECK_EQ_INT(get_u32(g, key), want); } while (0)
    ARCH_U32("block_count", s->n_layer);
    ARCH_U32("context_length", s->ctx);
    ARCH_U32("embedding_length", s->n_embd);
    ARCH_U32("feed_forward_length", s->n_ff);
    ARCH_U32("attention.head_count", s->n_head);
    ARCH_U32("attention.head_count_kv", s->n_head_kv);
    ARCH_U32("attention.key_length", s->head_dim);
    ARCH_U32("attention.value_length", s->head_dim);
    if (moe) {
        ARCH_U32("expert_count", s->n_expert);
        ARCH_U32("expert_used_count", s->n_used);
        ARCH_U32("expert_feed_forward_length", s->n_ff_exp);
    }
#undef ARCH_U32
    snprintf(key, sizeof(key), "%s.expert_count", s->arch);
    CHECK(moe || gguf_find_kv(g, key) == NULL);
    snprintf(key, sizeof(key), "%s.rope.freq_base", s->arch);
    CHECK(gguf_get_f32(g, key, &f) == 0 && f == 1e6f);
    snprintf(key, sizeof(key), "%s.attention.layer_norm_rms_epsilon", s->arch);
    CHECK(gguf_get_f32(g, key, &f) == 0 && f == 1e-6f);
    static const uint32_t ftype[] = {0, 7, 15};
    CHECK_EQ_INT(get_u32(g, "general.file_type"), ftype[s->types]);
}

/* Vocabulary invariants: Qwen3 special tokens, types, merges made of tokens. */
static void check_tokenizer(const struct gguf *g, uint32_t n_vocab) {
    uint64_t n = 0, nt = 0, nm = 0;
    bool add_bos = true;
    const struct gguf_str *tok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VTYPE_STRING, &n);
    const int32_t *ty = gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_VTYPE_INT32, &nt);
    const struct gguf_str *mg = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_VTYPE_STRING, &nm);
    CHECK(tok && ty && mg && n == nt && nm >= 200);
    CHECK_STR(gguf_get_str(g, "tokenizer.ggml.model"), "gpt2");
    CHECK_STR(gguf_get_str(g, "tokenizer.ggml.pre"), "qwen2");
    CHECK(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) == 0 && !add_bos);
    const char *tmpl = gguf_get_str(g, "tokenizer.chat_template");
    CHECK(tmpl && strstr(tmpl, "<|im_start|>") && strstr(tmpl, "add_generation_prompt"));
    if (!tok || !ty || !mg || n != nt)
        return;
    if (n_vocab)
        CHECK_EQ_INT(n, n_vocab);
    CHECK_STR(tok[0].data, "!");              /* GPT-2 byte order */
    CHECK_STR(tok[188].data, "\xc4\x80");     /* byte 0x00 -> U+0100 */
    CHECK_STR(tok[187].data, "\xc3\xbf"); /* last printable: byte 0xFF */
    uint32_t eos = get_u32(g, "tokenizer.ggml.eos_token_id");
    uint32_t pad = get_u32(g, "tokenizer.ggml.padding_token_id");
    CHECK(eos < n && strcmp(tok[eos].data, "<|im_end|>") == 0 && ty[eos] == 3);
    CHECK(pad < n && strcmp(tok[pad].data, "<|endoftext|>") == 0 && ty[pad] == 3);
    CHECK(eos == pad + 2 && ty[pad + 1] == 3);   /* <|im_start|> */
    CHECK(pad + 25 < n && strcmp(tok[pad + 24].data, "<think>") == 0 && ty[pad + 24] == 4);
    for (uint64_t i = 0; i < 256; i++)
        CHECK_EQ_INT(ty[i], 1);
    for (uint64_t i = pad + 26; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "[PAD%llu]", (unsigned long long)i);
        CHECK_MSG(strcmp(tok[i].data, want) == 0 && ty[i] == 5, "token %llu",
                  (unsigned long long)i);
    }
}

/* Every merge "a b" names two tokens and their concatenation is a token (first 600 checked). */
static void check_merges(const struct gguf *g) {
    uint64_t n = 0, nm = 0;
    const struct gguf_str *tok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VTYPE_STRING, &n);
    const struct gguf_str *mg = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_VTYPE_STRING, &nm);
    uint64_t limit = n < 2000 ? n : 2000;
    for (uint64_t m = 0; tok && mg && m < nm && m < 600; m++) {
        char joined[256], left[256];
        const char *sp = strchr(mg[m].data + 1, ' ');
        CHECK_MSG(sp && mg[m].len < sizeof(joined), "merge %llu", (unsigned long long)m);
        if (!sp || mg[m].len >= sizeof(joined))
            return;
        snprintf(left, sizeof(left), "%.*s", (int)(sp - mg[m].data), mg[m].data);
        snprintf(joined, sizeof(joined), "%s%s", left, sp + 1);
        bool found_l = false, found_r = false, found_j = false;
        for (uint64_t i = 0; i < limit; i++) {
            found_l |= strcmp(tok[i].data, left) == 0;
            found_r |= strcmp(tok[i].data, sp + 1) == 0;
            found_j |= strcmp(tok[i].data, joined) == 0;
        }
        CHECK_MSG(found_l && found_r && found_j, "merge \"%s\" not made of tokens", mg[m].data);
    }
}

/* Generates path with the given extra args and checks layout, metadata and tokenizer. */
static struct gguf *make_and_check(const char *path, const struct shape *s,
                                   const char *const *extra) {
    static const char *const tnames[] = {"f32", "q8_0", "q4_k_m"};
    const char *args[40] = {"-o", path, "--arch", s->arch, "--types", tnames[s->types]};
    int n = 6;
    for (; extra && *extra && n < 38; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    CHECK_EQ_INT(mkmodel(0, args), 0);
    struct gguf *g = open_ok(path);
    if (!g)
        return NULL;
    uint64_t n_vocab = 0;
    const void *tok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VTYPE_STRING, &n_vocab);
    CHECK(tok != NULL);
    check_hparams(g, s);
    check_tokenizer(g, s->n_vocab);
    check_tensor(g, s, "token_embd", -1, s->n_embd, n_vocab, 0);
    check_tensor(g, s, "output_norm", -1, s->n_embd, 0, 0);
    check_tensor(g, s, "output", -1, s->n_embd, n_vocab, 0);
    for (int il = 0; il < (int)s->n_layer; il++)
        check_layer(g, s, il);
    bool moe = strcmp(s->arch, "qwen3moe") == 0, llama = strcmp(s->arch, "llama") == 0;
    CHECK_EQ_INT(g->n_tensors, 3 + s->n_layer * (moe ? 12 : 11) - (llama ? 2 * s->n_layer : 0));
    const struct gguf_tensor *last = &g->tensors[g->n_tensors - 1];
    CHECK_MSG(g->file_bytes >= last->data_off + last->n_bytes &&
              g->file_bytes - (last->data_off + last->n_bytes) < 32, "data section incomplete");
    return g;
}

/* ==== sniper-mkmodel: values ================================================================== */

struct stats {
    double sum, sumsq, max_abs;
    uint64_t n, n_bad;
};

static void stats_add(struct stats *st, const float *x, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            st->n_bad++;
            continue;
        }
        st->sum += x[i];
        st->sumsq += (double)x[i] * x[i];
        st->max_abs = fabs(x[i]) > st->max_abs ? fabs(x[i]) : st->max_abs;
        st->n++;
    }
}

/* Dequantizes all of t and gathers statistics. Returns 0 or -1. */
static int tensor_stats(const struct gguf *g, const struct gguf_tensor *t, struct stats *st) {
    uint8_t *raw = malloc(t->n_bytes);
    float *row = malloc(t->ne[0] * sizeof(float));
    int rc = raw && row && gguf_read_tensor(g, t, raw) == 0 ? 0 : -1;
    uint64_t n_rows = t->n_elems / t->ne[0];
    memset(st, 0, sizeof(*st));
    for (uint64_t r = 0; rc == 0 && r < n_rows; r++) {
        rc = quant_dequantize_row(t->type, raw + r * t->row_bytes, row, (int64_t)t->ne[0]);
        stats_add(st, row, t->ne[0]);
    }
    free(raw);
    free(row);
    return rc;
}

/* Every value finite; norms ~1, embeddings std ~1, matrices std ~1/sqrt(row length). */
static void check_values(const struct gguf *g) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        struct stats st;
        CHECK_MSG(tensor_stats(g, t, &st) == 0, "cannot dequantize \"%s\"", t->name);
        double mean = st.sum / (double)st.n;
        double std = sqrt(st.sumsq / (double)st.n - mean * mean);
        bool norm = t->n_dims == 1;
        double want = norm ? 0.05 : strcmp(t->name, "token_embd.weight") == 0
                                        ? 1.0 : 1.0 / sqrt((double)t->ne[0]);
        CHECK_MSG(st.n_bad == 0, "\"%s\": %llu non-finite values", t->name,
                  (unsigned long long)st.n_bad);
        CHECK_MSG(std > 0.75 * want && std < 1.25 * want, "\"%s\" (%s): std %g, want ~%g",
                  t->name, qtype_name(t->type), std, want);
        /* 0.08 std: tight enough to catch a mis-packed Q4_K min (an offset of 0.11 std) */
        double mean_tol = norm ? 0.03 : 0.08 * want;
        CHECK_MSG(fabs(mean - (norm ? 1.0 : 0.0)) < mean_tol, "\"%s\" (%s): mean %g", t->name,
                  qtype_name(t->type), mean);
        CHECK_MSG(st.max_abs < (norm ? 1.5 : 8.0 * want), "\"%s\": max |x| %g", t->name,
                  st.max_abs);
    }
}

static void test_tiny_moe_types(void) {
    static const char *const out[] = {"moe-f32.gguf", "moe-q8_0.gguf", "moe-q4_k_m.gguf"};
    for (int ty = T_F32; ty <= T_Q4_K_M; ty++) {
        struct shape s = tiny_moe;
        s.types = ty;
        struct gguf *g = make_and_check(tmp_path(out[ty]), &s, NULL);
        if (g) {
            check_merges(g);
            check_values(g);
        }
        gguf_free(g);
    }
}

static void test_tiny_dense_and_llama(void) {
    struct shape s = tiny_moe;
    s.arch = "qwen3";
    for (int ty = T_F32; ty <= T_Q4_K_M; ty++) {
        s.types = ty;
        struct gguf *g = make_and_check(tmp_path("dense.gguf"), &s,
                                        (const char *const[]){"--preset", "tiny-dense", NULL});
        if (g)
            check_values(g);
        gguf_free(g);
    }
    s.arch = "llama";
    for (int ty = T_F32; ty <= T_Q4_K_M; ty++) {
        s.types = ty;
        struct gguf *g = make_and_check(tmp_path("llama.gguf"), &s, NULL);
        uint32_t rot = 0;
        CHECK(g && gguf_get_u32(g, "llama.rope.dimension_count", &rot) == 0 && rot == 64);
        if (g)
            check_values(g);
        gguf_free(g);
    }
}

/* The fixture models (llama.cpp's own quantization) have exactly our names, shapes and types. */
static void test_matches_fixture_layout(void) {
    static const char *const fx[] = {"tiny-qwen3moe-q4_k_m.gguf", "dense-qwen3-q4_k_m.gguf",
                                     "tiny-qwen3moe-q8_0.gguf", "tiny-qwen35moe-q4_k_m.gguf",
                                     "tiny-qwen35-q4_k_m.gguf"};
    static const char *const ours[] = {"moe-q4_k_m.gguf", "dense-q4.gguf", "moe-q8_0.gguf",
                                       "35moe-q4.gguf", "35-q4.gguf"};
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent: cannot compare with llama.cpp's layout");
        return;
    }
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("dense-q4.gguf"), "--preset", "tiny-dense", "--types",
                         "q4_k_m"), 0);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("moe-q4_k_m.gguf"), "--types", "q4_k_m"), 0);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("moe-q8_0.gguf"), "--types", "q8_0"), 0);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("35moe-q4.gguf"), "--preset", "tiny-qwen35moe", "--types",
                         "q4_k_m"), 0);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("35-q4.gguf"), "--preset", "tiny-qwen35", "--types",
                         "q4_k_m"), 0);
    for (int i = 0; i < 5; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/models/%s", dir, fx[i]);
        struct gguf *ref = open_ok(path), *g = open_ok(tmp_path(ours[i]));
        CHECK(!ref || !g || ref->n_tensors == g->n_tensors);
        for (uint64_t k = 0; ref && g && k < ref->n_tensors; k++) {
            const struct gguf_tensor *a = &ref->tensors[k], *b = gguf_find_tensor(g, a->name);
            bool vocab_dim = strcmp(a->name, "output.weight") == 0 ||
                             strcmp(a->name, "token_embd.weight") == 0;
            CHECK_MSG(b && b->type == a->type && b->n_dims == a->n_dims && b->ne[0] == a->ne[0] &&
                      (vocab_dim || (b->ne[1] == a->ne[1] && b->ne[2] == a->ne[2])),
                      "%s: \"%s\" differs from llama.cpp's", fx[i], a->name);
        }
        for (uint64_t k = 0; ref && g && k < ref->n_kv; k++) {
            const char *key = ref->kv[k].key;
            const struct gguf_kv *ours_kv = gguf_find_kv(g, key);
            if (strncmp(key, "tokenizer.", 10) == 0 || strncmp(key, "general.", 8) == 0)
                continue;
            CHECK_MSG(ours_kv != NULL, "%s: key \"%s\" missing", fx[i], key);
            if (ours_kv && ref->kv[k].type != GGUF_VTYPE_ARRAY) /* the same value */
                CHECK_MSG(ours_kv->type == ref->kv[k].type &&
                          ours_kv->v.u64 == ref->kv[k].v.u64, "%s: key \"%s\" differs", fx[i], key);
        }
        for (uint64_t k = 0; ref && g && k < g->n_kv; k++) /* and no key llama.cpp's lacks */
            CHECK_MSG(gguf_find_kv(ref, g->kv[k].key) != NULL ||
                      strncmp(g->kv[k].key, "tokenizer.", 10) == 0 ||
                      strncmp(g->kv[k].key, "general.", 8) == 0,
                      "%s: our key \"%s\" is not in llama.cpp's file", fx[i], g->kv[k].key);
        gguf_free(ref);
        gguf_free(g);
    }
}

/* The DeltaNet parameters a recurrence needs to stay stable: -A < 0 (a decay exp(g) < 1) with A
 * in [0.01, 4], dt bias in [0.5, 1.5]; every other value as check_values wants. */
static void check_hybrid_values(const struct gguf *g) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        const char *dot = strchr(t->name + 4, '.');
        bool a = dot && strcmp(dot, ".ssm_a") == 0, dt = dot && strcmp(dot, ".ssm_dt.bias") == 0;
        if (!a && !dt)
            continue;
        float *v = read_tensor(g, t->name);
        for (uint64_t k = 0; v && k < t->n_elems; k++)
            CHECK_MSG(a ? v[k] < -0.0099f && v[k] > -4.001f : v[k] >= 0.5f && v[k] <= 1.5f,
                      "\"%s\"[%llu] = %g", t->name, (unsigned long long)k, (double)v[k]);
        free(v);
    }
}

/* The engine loads the model at path and runs four tokens to finite logits (label: for
 * messages). */
static void check_engine_runs(const char *path, const char *label) {
    char err[256];
    struct model *m = model_load(path, err, sizeof(err));
    CHECK_MSG(m != NULL, "%s: %s", label, err);
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 64;
    ep.n_threads = 2;
    struct engine *e = m ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    CHECK_MSG(!m || e != NULL, "%s: engine_new: %s", label, err);
    float *logits = m ? malloc(sizeof(float) * (size_t)m->hp.n_vocab) : NULL;
    const int32_t ids[4] = {1, 2, 3, 4};
    bool finite = e && logits && engine_eval(e, 0, ids, 4, logits, false) == 0;
    for (int32_t k = 0; finite && k < m->hp.n_vocab; k++)
        finite = isfinite(logits[k]);
    CHECK_MSG(finite, "%s: no finite logits", label);
    free(logits);
    engine_free(e);
    model_free(m);
}

/* The Qwen3.5 presets: the engine loads what they write and runs it to finite logits; the big
 * ones with their real DeltaNet, attention and expert shapes, fewer layers, narrower, 8 experts. */
static void test_qwen35_presets(void) {
    static const char *const args[][16] = {
        {"--preset", "tiny-qwen35moe", "--types", "q8_0", NULL},
        {"--preset", "tiny-qwen35", NULL},
        {"--preset", "qwen3.5-35b-a3b", "--n-layer", "4", "--n-embd", "256", "--n-expert", "8",
         "--n-vocab", "4096", NULL},
        {"--preset", "qwen3.5-9b", "--n-layer", "4", "--n-embd", "256", "--n-ff", "512",
         "--n-vocab", "4096", NULL},
    };
    static const char *const arch[] = {"qwen35moe", "qwen35", "qwen35moe", "qwen35"};
    for (int i = 0; i < 4; i++) {
        const char *path = tmp_path("q35.gguf");
        const char *argv[20] = {"-o", path};
        for (int k = 0; args[i][k]; k++)
            argv[2 + k] = args[i][k];
        CHECK_EQ_INT(mkmodel(0, argv), 0);
        struct gguf *g = open_ok(path);
        const char *got = g ? gguf_get_str(g, "general.architecture") : NULL;
        CHECK_MSG(got && strcmp(got, arch[i]) == 0, "%s: architecture %s", args[i][1],
                  got ? got : "?");
        if (g && i == 2) { /* Qwen3.5-35B-A3B's own sizes survive the narrowing */
            CHECK_EQ_INT(get_u32(g, "qwen35moe.ssm.time_step_rank"), 32);
            CHECK_EQ_INT(get_u32(g, "qwen35moe.ssm.group_count"), 16);
            CHECK_EQ_INT(get_u32(g, "qwen35moe.ssm.inner_size"), 4096);
            CHECK_EQ_INT(get_u32(g, "qwen35moe.attention.key_length"), 256);
            CHECK_EQ_INT(get_u32(g, "qwen35moe.expert_shared_feed_forward_length"), 512);
            const struct gguf_tensor *q = gguf_find_tensor(g, "blk.3.attn_q.weight");
            const struct gguf_tensor *qkv0 = gguf_find_tensor(g, "blk.0.attn_qkv.weight");
            const struct gguf_tensor *qkv2 = gguf_find_tensor(g, "blk.2.attn_qkv.weight");
            /* Q4_K_M: attn_qkv counts with attn_v, more bits on layers 2 and 3 of 4 */
            CHECK(q && q->type == QTYPE_Q4_K && q->ne[1] == 2 * 16 * 256);
            CHECK(qkv0 && qkv0->type == QTYPE_Q4_K && qkv2 && qkv2->type == QTYPE_Q6_K);
        }
        if (g)
            check_hybrid_values(g);
        gguf_free(g);
        check_engine_runs(path, args[i][1]);
    }
}

/* The dense Gemma 4 presets, narrowed (n_embd 256, FFN 512, a small vocabulary, fewer layers with
 * some of their own KV): their own head sizes, per-layer embeddings and FFN widths survive; llama-quantize
 * gives the tied per-layer table the output's type and keeps per_layer_model_proj in the
 * converter's BF16; attn_v's more bits follow the attn_v tensors' count (E2B cut to 10 layers has
 * 5, in layers 0-4: the 3rd and 5th get Q6_K), not the layers'; a 31B global layer has no attn_v;
 * the engine runs each. */
static void test_gemma4_presets(void) {
    static const char *const args[][16] = {
        {"--preset", "gemma4-e2b", "--n-layer", "10", "--n-kv-shared", "5", "--n-embd", "256",
         "--n-ff", "512", "--n-vocab", "4096", NULL},
        {"--preset", "gemma4-e4b", "--n-layer", "12", "--n-kv-shared", "6", "--n-embd", "256",
         "--n-ff", "512", "--n-vocab", "4096", NULL},
        {"--preset", "gemma4-31b", "--n-layer", "6", "--n-embd", "256", "--n-ff", "512",
         "--n-vocab", "4096", NULL},
    };
    static const uint32_t ple[] = {256, 256, 0}, kv_shared[] = {5, 6, 0};
    for (int i = 0; i < 3; i++) {
        const char *path = tmp_path("g4.gguf");
        const char *argv[20] = {"-o", path};
        for (int k = 0; args[i][k]; k++)
            argv[2 + k] = args[i][k];
        CHECK_EQ_INT(mkmodel(0, argv), 0);
        struct gguf *g = open_ok(path);
        if (!g)
            continue;
        CHECK_EQ_INT(get_u32(g, "gemma4.embedding_length_per_layer_input"), ple[i]);
        CHECK_EQ_INT(get_u32(g, "gemma4.attention.shared_kv_layers"), kv_shared[i]);
        CHECK_EQ_INT(get_u32(g, "gemma4.attention.key_length"), 512);
        CHECK_EQ_INT(get_u32(g, "gemma4.attention.key_length_swa"), 256);
        CHECK(gguf_find_kv(g, "gemma4.expert_count") == NULL);
        const struct gguf_tensor *tab = gguf_find_tensor(g, "per_layer_token_embd.weight");
        const struct gguf_tensor *proj = gguf_find_tensor(g, "per_layer_model_proj.weight");
        if (i < 2) {
            CHECK(tab && tab->type == QTYPE_Q6_K && tab->ne[0] == 256u * (i ? 12 : 10));
            CHECK(proj && proj->type == QTYPE_BF16 && proj->ne[1] == tab->ne[0]);
            CHECK(gguf_find_tensor(g, "blk.9.proj.weight") != NULL);
        } else {
            CHECK(tab == NULL && proj == NULL);
            CHECK(gguf_find_tensor(g, "blk.5.attn_v.weight") == NULL); /* global, k_eq_v */
            CHECK(gguf_find_tensor(g, "blk.5.attn_k.weight") != NULL);
        }
        if (i == 0) {
            uint64_t n = 0;
            const int32_t *ff = gguf_get_arr(g, "gemma4.feed_forward_length", GGUF_VTYPE_INT32, &n);
            CHECK(ff && n == 10 && ff[4] == 512 && ff[5] == 1024);
            static const char *const v[] = {"blk.0.attn_v.weight", "blk.2.attn_v.weight",
                                            "blk.3.attn_v.weight", "blk.4.attn_v.weight"};
            static const enum qtype want[] = {QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_Q4_K, QTYPE_Q6_K};
            for (int k = 0; k < 4; k++) {
                const struct gguf_tensor *t = gguf_find_tensor(g, v[k]);
                CHECK_MSG(t && t->type == want[k], "%s is %s, llama-quantize writes %s", v[k],
                          t ? qtype_name(t->type) : "missing", qtype_name(want[k]));
            }
            CHECK(gguf_find_tensor(g, "blk.5.attn_v.weight") == NULL); /* shared KV */
        }
        gguf_free(g);
        check_engine_runs(path, args[i][1]);
    }
}

/* The low-bit mixes: the types llama-quantize's recipe (with an importance matrix) gave the
 * fixtures' files, tensor for tensor, and general.file_type; values of the right scale from
 * every generator; and the real-shaped presets, narrowed, load and run in the engine. */
static void test_low_bit_mixes(void) {
    static const struct { const char *mix, *fixture; bool dense; } cases[] = {
        {"q2_k", "tiny-qwen3moe-x256-q2_k.gguf", false},
        {"q3_k_m", "tiny-qwen3moe-x256-q3_k_m.gguf", false},
        {"iq4_xs", "tiny-qwen3moe-x256-iq4_xs.gguf", false},
        {"mxfp4_moe", "tiny-qwen3moe-x256-mxfp4_moe.gguf", false},
        {"iq4_nl", "dense-qwen3-iq4_nl.gguf", true},
        {"q4_1", "dense-qwen3-q4_1.gguf", true},
        {"q5_1", "dense-qwen3-q5_1.gguf", true},
    };
    const char *dir = test_fixtures_dir();
    if (!dir)
        test_skip("fixtures absent: mixes NOT compared with llama-quantize's files");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *path = tmp_path("mix.gguf");
        int rc = cases[i].dense ? MKMODEL("-o", path, "--preset", "tiny-dense", "--types",
                                          cases[i].mix)
                                : MKMODEL("-o", path, "--n-layer", "2", "--n-ff-exp", "256",
                                          "--types", cases[i].mix);
        CHECK_EQ_INT(rc, 0);
        struct gguf *g = open_ok(path), *ref = NULL;
        if (g)
            check_values(g);
        char fx[4200];
        snprintf(fx, sizeof(fx), "%s/models/%s", dir ? dir : "", cases[i].fixture);
        ref = g && dir ? open_ok(fx) : NULL;
        CHECK(!ref || ref->n_tensors == g->n_tensors);
        for (uint64_t k = 0; ref && k < ref->n_tensors; k++) {
            const struct gguf_tensor *a = &ref->tensors[k], *b = gguf_find_tensor(g, a->name);
            CHECK_MSG(b && b->type == a->type && b->ne[0] == a->ne[0] && b->ne[2] == a->ne[2],
                      "%s: \"%s\" is %s, llama-quantize made %s", cases[i].mix, a->name,
                      b ? qtype_name(b->type) : "missing", qtype_name(a->type));
        }
        CHECK(!ref || get_u32(g, "general.file_type") == get_u32(ref, "general.file_type"));
        gguf_free(ref);
        gguf_free(g);
        if (i < 2 || cases[i].dense)
            check_engine_runs(path, cases[i].mix);
    }
    static const char *const presets[][18] = {
        {"--preset", "qwen3-30b-a3b", "--types", "q3_k_m", "--n-layer", "4", "--n-embd", "256",
         "--n-expert", "16", "--n-vocab", "4096", NULL},
        {"--preset", "qwen3-30b-a3b", "--types", "iq4_xs", "--n-layer", "4", "--n-embd", "256",
         "--n-expert", "16", "--n-vocab", "4096", NULL},
        {"--preset", "qwen3.5-35b-a3b", "--types", "q3_k_m", "--n-layer", "4", "--n-embd", "256",
         "--n-expert", "16", "--n-vocab", "4096", NULL},
        {"--preset", "qwen3.5-35b-a3b", "--types", "iq4_xs", "--n-layer", "4", "--n-embd", "256",
         "--n-expert", "16", "--n-vocab", "4096", NULL},
    };
    /* per preset: a tensor and its type under the mix (attn_v / attn_qkv of layers 0-1: Q5_K
     * under Q3_K_M; with 8 or 16 query heads per KV head, attn_v is Q5_K under IQ4_XS) */
    static const struct { const char *name; enum qtype type, bulk; } want[] = {
        {"blk.1.attn_v.weight", QTYPE_Q5_K, QTYPE_Q3_K},
        {"blk.3.attn_v.weight", QTYPE_Q5_K, QTYPE_IQ4_XS},
        {"blk.1.attn_qkv.weight", QTYPE_Q5_K, QTYPE_Q3_K},
        {"blk.2.attn_qkv.weight", QTYPE_Q5_K, QTYPE_IQ4_XS},
    };
    for (int i = 0; i < 4; i++) {
        const char *path = tmp_path("mix-preset.gguf");
        const char *argv[20] = {"-o", path};
        for (int k = 0; presets[i][k]; k++)
            argv[2 + k] = presets[i][k];
        CHECK_EQ_INT(mkmodel(0, argv), 0);
        struct gguf *g = open_ok(path);
        const struct gguf_tensor *t = g ? gguf_find_tensor(g, want[i].name) : NULL;
        const struct gguf_tensor *up = g ? gguf_find_tensor(g, "blk.2.ffn_up_exps.weight") : NULL;
        CHECK_MSG(t && t->type == want[i].type, "%s %s: \"%s\" is %s", presets[i][1],
                  presets[i][3], want[i].name, t ? qtype_name(t->type) : "missing");
        CHECK_MSG(up && up->type == want[i].bulk, "%s %s: experts are %s", presets[i][1],
                  presets[i][3], up ? qtype_name(up->type) : "missing");
        gguf_free(g);
        check_engine_runs(path, presets[i][1]);
    }
}

/* ==== sniper-mkmodel: determinism and --upcycle =============================================== */

static bool files_equal(const char *a, const char *b, bool *same_size) {
    size_t na = 0, nb = 0;
    char *x = test_read_file(a, &na), *y = test_read_file(b, &nb);
    bool eq = x && y && na == nb && memcmp(x, y, na) == 0;
    *same_size = x && y && na == nb;
    free(x);
    free(y);
    return eq;
}

static void test_seeds(void) {
    const char *a = tmp_path("seed-a.gguf"), *b = tmp_path("seed-b.gguf");
    const char *c = tmp_path("seed-c.gguf");
    bool same_size = false;
    CHECK_EQ_INT(MKMODEL("-o", a, "--types", "q4_k_m", "--seed", "7"), 0);
    CHECK_EQ_INT(MKMODEL("-o", b, "--types", "q4_k_m", "--seed", "7"), 0);
    CHECK_EQ_INT(MKMODEL("-o", c, "--types", "q4_k_m", "--seed", "8"), 0);
    CHECK(files_equal(a, b, &same_size));
    CHECK(!files_equal(a, c, &same_size) && same_size);
    /* same name, seed and shape in another architecture: same bytes; another name: different */
    CHECK_EQ_INT(MKMODEL("-o", b, "--arch", "llama", "--types", "q4_k_m", "--seed", "7"), 0);
    struct gguf *ga = open_ok(a), *gb = open_ok(b);
    const struct gguf_tensor *ta = ga ? gguf_find_tensor(ga, "blk.1.attn_q.weight") : NULL;
    void *x = ga ? read_tensor(ga, "blk.1.attn_q.weight") : NULL;
    void *y = gb ? read_tensor(gb, "blk.1.attn_q.weight") : NULL;
    void *z = ga ? read_tensor(ga, "blk.2.attn_q.weight") : NULL;
    CHECK(ta && x && y && z && memcmp(x, y, ta->n_bytes) == 0 && memcmp(x, z, ta->n_bytes) != 0);
    free(x);
    free(y);
    free(z);
    gguf_free(ga);
    gguf_free(gb);
}

/* Each expert slice of an upcycled MoE equals the dense model's FFN tensor; the rest is equal. */
static void check_upcycled(const struct gguf *moe, const struct gguf *dense) {
    static const char *const exps[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    static const char *const ffn[] = {"ffn_gate", "ffn_up", "ffn_down"};
    for (uint64_t i = 0; i < dense->n_tensors; i++) {
        const struct gguf_tensor *d = &dense->tensors[i];
        if (strstr(d->name, ".ffn_gate.") || strstr(d->name, ".ffn_up.") ||
            strstr(d->name, ".ffn_down."))
            continue;
        uint8_t *x = read_tensor(dense, d->name), *y = read_tensor(moe, d->name);
        CHECK_MSG(x && y && memcmp(x, y, d->n_bytes) == 0, "\"%s\" differs", d->name);
        free(x);
        free(y);
    }
    for (uint32_t il = 0; il < 4; il++) {
        for (int k = 0; k < 3; k++) {
            char en[64], dn[64];
            snprintf(en, sizeof(en), "blk.%u.%s.weight", il, exps[k]);
            snprintf(dn, sizeof(dn), "blk.%u.%s.weight", il, ffn[k]);
            const struct gguf_tensor *et = gguf_find_tensor(moe, en);
            const struct gguf_tensor *dt = gguf_find_tensor(dense, dn);
            uint8_t *e = read_tensor(moe, en), *d = read_tensor(dense, dn);
            CHECK(et && dt && et->type == dt->type && et->n_bytes == 16 * dt->n_bytes);
            for (int x = 0; e && d && et && dt && et->n_bytes == 16 * dt->n_bytes && x < 16; x++)
                CHECK_MSG(memcmp(e + x * dt->n_bytes, d, dt->n_bytes) == 0,
                          "expert %d of \"%s\" is not \"%s\"", x, en, dn);
            free(e);
            free(d);
        }
    }
}

static void test_upcycle(void) {
    static const char *const types[] = {"f32", "q4_k_m"};
    for (int i = 0; i < 2; i++) {
        const char *m = tmp_path("up-moe.gguf"), *d = tmp_path("up-dense.gguf");
        CHECK_EQ_INT(MKMODEL("-o", m, "--upcycle", "--types", types[i], "--seed", "5"), 0);
        CHECK_EQ_INT(MKMODEL("-o", d, "--arch", "qwen3", "--types", types[i], "--seed", "5"), 0);
        struct gguf *gm = open_ok(m), *gd = open_ok(d);
        if (gm && gd) {
            CHECK_EQ_INT(get_u32(gm, "qwen3moe.expert_feed_forward_length"), 512);
            check_upcycled(gm, gd);
        }
        gguf_free(gm);
        gguf_free(gd);
    }
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("bad.gguf"), "--upcycle", "--arch", "qwen3"), 2);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("bad.gguf"), "--upcycle", "--n-ff-exp", "128"), 2);
    CHECK(!file_exists(tmp_path("bad.gguf")));
}

/* ==== sniper-mkmodel: gpt-oss ================================================================ */

/* XXH64 (seed 0) of `sniper-mkmodel --preset tiny-gpt-oss` (seed 42): the file the goldens in
 * tests/fixtures/gpt-oss were made from (its README has the sha256 too). */
#define TINY_GPTOSS_XXH64 0xc82ce952a6b6fd94ull

/* The tensor called name with this type and shape (ne1/ne2 0: fewer dims), or NULL (failed). */
static const struct gguf_tensor *expect_tensor(const struct gguf *g, const char *name,
                                               enum qtype type, uint64_t ne0, uint64_t ne1,
                                               uint64_t ne2) {
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    uint32_t n_dims = ne2 ? 3 : ne1 ? 2 : 1;
    CHECK_MSG(t != NULL, "missing tensor \"%s\"", name);
    if (!t)
        return NULL;
    CHECK_MSG(t->n_dims == n_dims && t->ne[0] == ne0 && t->ne[1] == (ne1 ? ne1 : 1) &&
              t->ne[2] == (ne2 ? ne2 : 1), "\"%s\": wrong shape", name);
    CHECK_MSG(t->type == type, "\"%s\": type %s, expected %s", name, qtype_name(t->type),
              qtype_name(type));
    return t;
}

struct oss_shape {
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff_exp, n_expert;
    enum qtype matrix, experts; /* attention and output; ffn_*_exps */
};

/* A gpt-oss layer as llama.cpp's loader (llama_model_openai_moe) lists it: biases on q, k, v and
 * the output, sinks, post_attention_norm, the router and its bias, experts with bias rows. */
static void check_gptoss_layer(const struct gguf *g, const struct oss_shape *s, int il) {
    static const char *const exps[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    uint64_t e = s->n_embd, q = (uint64_t)s->n_head * s->head_dim;
    uint64_t kv = (uint64_t)s->n_head_kv * s->head_dim, ff = s->n_ff_exp, n = s->n_expert;
    char name[96];
#define T(suffix, type, a, b, c) \
    (snprintf(name, sizeof(name), "blk.%d.%s", il, suffix), expect_tensor(g, name, type, a, b, c))
    T("attn_norm.weight", QTYPE_F32, e, 0, 0);
    T("attn_q.weight", s->matrix, e, q, 0);
    T("attn_q.bias", QTYPE_F32, q, 0, 0);
    T("attn_k.weight", s->matrix, e, kv, 0);
    T("attn_k.bias", QTYPE_F32, kv, 0, 0);
    T("attn_v.weight", s->matrix, e, kv, 0);
    T("attn_v.bias", QTYPE_F32, kv, 0, 0);
    T("attn_output.weight", s->matrix, q, e, 0);
    T("attn_output.bias", QTYPE_F32, e, 0, 0);
    T("attn_sinks.weight", QTYPE_F32, s->n_head, 0, 0);
    T("post_attention_norm.weight", QTYPE_F32, e, 0, 0);
    T("ffn_gate_inp.weight", QTYPE_F32, e, n, 0);
    T("ffn_gate_inp.bias", QTYPE_F32, n, 0, 0);
    for (int k = 0; k < 3; k++) {
        char w[48], b[48];
        snprintf(w, sizeof(w), "%s.weight", exps[k]);
        snprintf(b, sizeof(b), "%s.bias", exps[k]);
        T(w, s->experts, k == 2 ? ff : e, k == 2 ? e : ff, n);
        T(b, QTYPE_F32, k == 2 ? e : ff, n, 0);
    }
#undef T
}

/* MXFP4, restated from ggml's block_mxfp4 to pin the layout the tool writes: byte 0 the E8M0
 * exponent, then value j in the low nibble of byte 1 + j and value j + 16 in the high one, codes
 * {0, 1, 2, 3, 4, 6, 8, 12} (bit 3 the sign) times 2^(e - 128). */
static void mxfp4_decode(const uint8_t *b, uint64_t n_blocks, float *out) {
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (uint64_t i = 0; i < n_blocks; i++, b += 17, out += 32) {
        float d = ldexpf(1.0f, (int)b[0] - 128);
        for (int j = 0; j < 16; j++) {
            out[j] = kv[b[1 + j] & 15] * d;
            out[j + 16] = kv[b[1 + j] >> 4] * d;
        }
    }
}

/* Statistics of any tensor of a gpt-oss file (F32, Q8_0 or MXFP4). Returns 0 or -1. */
static int gptoss_stats(const struct gguf *g, const struct gguf_tensor *t, struct stats *st) {
    if (t->type != QTYPE_MXFP4)
        return tensor_stats(g, t, st);
    uint8_t *raw = read_tensor(g, t->name);
    float *x = malloc(t->n_elems * sizeof(float));
    memset(st, 0, sizeof(*st));
    if (raw && x) {
        mxfp4_decode(raw, t->n_elems / 32, x);
        stats_add(st, x, t->n_elems);
    }
    free(raw);
    free(x);
    return raw && x ? 0 : -1;
}

/* The values of a gpt-oss file as the tool promises them: norms ~1, biases std 0.1 (the router's
 * 0.5), sinks std 1, the experts' gate and up 3.5 / sqrt(row), other matrices 1 / sqrt(row). */
static void check_gptoss_values(const struct gguf *g) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        const char *nm = t->name;
        struct stats st;
        CHECK_MSG(gptoss_stats(g, t, &st) == 0, "cannot decode \"%s\"", nm);
        bool norm = strstr(nm, "norm") != NULL, bias = strstr(nm, ".bias") != NULL;
        double want = norm ? 0.05 : strstr(nm, "ffn_gate_inp.bias") ? 0.5 : bias ? 0.1
                    : strstr(nm, "attn_sinks") ? 1.0 : strcmp(nm, "token_embd.weight") == 0 ? 1.0
                    : (strstr(nm, "ffn_gate_exps") || strstr(nm, "ffn_up_exps") ? 3.5 : 1.0) /
                          sqrt((double)t->ne[0]);
        double mean = st.sum / (double)st.n, std = sqrt(st.sumsq / (double)st.n - mean * mean);
        CHECK_MSG(st.n_bad == 0 && st.max_abs < (norm ? 1.5 : 8.0 * want), "\"%s\": max |x| %g",
                  nm, st.max_abs);
        if (st.n < 512) /* 8 sinks, 16 router biases: too few values for their std */
            continue;
        CHECK_MSG(std > 0.75 * want && std < 1.25 * want, "\"%s\" (%s): std %g, want ~%g", nm,
                  qtype_name(t->type), std, want);
        double tol = norm ? 0.03 : fmax(0.08, 4.0 / sqrt((double)st.n)) * want; /* 4 sigma */
        CHECK_MSG(fabs(mean - (norm ? 1.0 : 0.0)) < tol, "\"%s\": mean %g", nm, mean);
    }
}

/* The keys llama.cpp reads for gpt-oss, with a preset's values. */
static void check_gptoss_keys(const struct gguf *g, const struct oss_shape *s, uint32_t n_swa,
                              uint32_t file_type) {
    float f = 0;
    CHECK_STR(gguf_get_str(g, "general.architecture"), "gpt-oss");
    CHECK_EQ_INT(get_u32(g, "gpt-oss.block_count"), s->n_layer);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.context_length"), 131072);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.embedding_length"), s->n_embd);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.feed_forward_length"), s->n_ff_exp);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.expert_feed_forward_length"), s->n_ff_exp);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.attention.head_count"), s->n_head);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.attention.head_count_kv"), s->n_head_kv);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.attention.key_length"), s->head_dim);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.attention.value_length"), s->head_dim);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.expert_count"), s->n_expert);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.expert_used_count"), 4);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.attention.sliding_window"), n_swa);
    CHECK_STR(gguf_get_str(g, "gpt-oss.rope.scaling.type"), "yarn");
    CHECK(gguf_get_f32(g, "gpt-oss.rope.scaling.factor", &f) == 0 && f == 32.0f);
    CHECK_EQ_INT(get_u32(g, "gpt-oss.rope.scaling.original_context_length"), 4096);
    CHECK(gguf_get_f32(g, "gpt-oss.rope.freq_base", &f) == 0 && f == 150000.0f);
    CHECK(gguf_get_f32(g, "gpt-oss.attention.layer_norm_rms_epsilon", &f) == 0 && f == 1e-5f);
    CHECK_EQ_INT(get_u32(g, "general.file_type"), file_type);
    CHECK_STR(gguf_get_str(g, "tokenizer.ggml.pre"), "gpt-4o");
    const char *tmpl = gguf_get_str(g, "tokenizer.chat_template");
    CHECK(tmpl && strstr(tmpl, "<|channel|>") && strstr(tmpl, "<|start|>assistant"));
}

/* gpt-oss's 21 added tokens after the learned ones, all CONTROL; eos <|return|>, bos
 * <|startoftext|>, pad <|endoftext|>, as its GGUFs name them. */
static void check_gptoss_vocab(const struct gguf *g) {
    static const char *const added[] = {"<|startoftext|>", "<|endoftext|>", "<|reserved_200000|>",
        "<|reserved_200001|>", "<|return|>", "<|constrain|>", "<|reserved_200004|>",
        "<|channel|>", "<|start|>", "<|end|>", "<|message|>"};
    uint64_t n = 0, nt = 0;
    const struct gguf_str *tok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VTYPE_STRING, &n);
    const int32_t *ty = gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_VTYPE_INT32, &nt);
    uint32_t bos = get_u32(g, "tokenizer.ggml.bos_token_id");
    CHECK(tok && ty && n == nt && bos + 21 <= n);
    if (!tok || !ty || n != nt || bos + 21 > n)
        return;
    for (uint32_t i = 0; i < sizeof(added) / sizeof(added[0]); i++)
        CHECK_MSG(strcmp(tok[bos + i].data, added[i]) == 0 && ty[bos + i] == 3, "token %u", bos + i);
    CHECK_STR(tok[bos + 14].data, "<|call|>");
    CHECK_STR(tok[bos + 20].data, "<|endofprompt|>");
    CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.eos_token_id"), bos + 4);
    CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.padding_token_id"), bos + 1);
}

/* tiny-gpt-oss: every layer's tensors, its keys, vocabulary and values. */
static void test_gptoss_tiny(void) {
    const struct oss_shape s = {4, 128, 8, 2, 64, 64, 16, QTYPE_F32, QTYPE_F32};
    const char *path = tmp_path("tiny-gpt-oss.gguf");
    CHECK_EQ_INT(MKMODEL("-o", path, "--preset", "tiny-gpt-oss"), 0);
    struct gguf *g = open_ok(path);
    if (!g)
        return;
    check_gptoss_keys(g, &s, 16, 0);
    check_gptoss_vocab(g);
    check_merges(g);
    for (int il = 0; il < 4; il++)
        check_gptoss_layer(g, &s, il);
    expect_tensor(g, "token_embd.weight", QTYPE_F32, 128, g->tensors[0].ne[1], 0);
    expect_tensor(g, "output.weight", QTYPE_F32, 128, g->tensors[0].ne[1], 0);
    expect_tensor(g, "output_norm.weight", QTYPE_F32, 128, 0, 0);
    CHECK_EQ_INT(g->n_tensors, 3 + 4 * 19);
    check_gptoss_values(g);
    gguf_free(g);
}

/* The goldens of tests/fixtures/gpt-oss were made from this very tiny-gpt-oss file (so the F32
 * model is regenerated, not committed), and the fixture's MXFP4 file (llama-quantize's
 * MXFP4_MOE) has the same tensors, with MXFP4 experts, Q8_0 matrices and F32 for the rest. */
static void test_gptoss_fixture(void) {
    const char *path = tmp_path("tiny-gpt-oss.gguf");
    CHECK_EQ_INT(MKMODEL("-o", path, "--preset", "tiny-gpt-oss"), 0);
    struct gguf *g = open_ok(path);
    if (!g)
        return;
    size_t n = 0;
    char *bytes = test_read_file(path, &n);
    uint64_t h = bytes ? hash64(bytes, n, 0) : 0;
    CHECK_MSG(h == TINY_GPTOSS_XXH64, "tiny-gpt-oss is not the file tests/fixtures/gpt-oss's "
              "goldens were made from (XXH64 %016llx): regenerate them (its README)",
              (unsigned long long)h);
    free(bytes);
    struct gguf *q = open_ok("tests/fixtures/gpt-oss/models/tiny-gpt-oss-mxfp4_moe.gguf");
    for (uint64_t i = 0; q && i < g->n_tensors; i++) {
        const struct gguf_tensor *a = &g->tensors[i], *b = gguf_find_tensor(q, a->name);
        bool exps = strstr(a->name, "_exps.weight") != NULL, mat = a->n_dims >= 2 &&
                    !strstr(a->name, ".bias") && !strstr(a->name, "ffn_gate_inp");
        enum qtype want = exps ? QTYPE_MXFP4 : mat ? QTYPE_Q8_0 : QTYPE_F32;
        CHECK_MSG(b && b->type == want && b->n_elems == a->n_elems, "fixture \"%s\"", a->name);
    }
    CHECK(q && q->n_tensors == g->n_tensors);
    if (q)
        check_gptoss_values(q);
    gguf_free(q);
    gguf_free(g);
}

/* gpt-oss-20b / 120b narrowed (the real files are 13 and 64 GB): their own keys survive, the
 * experts are MXFP4 (file type MOSTLY_MXFP4_MOE), the rest Q8_0, biases and routers F32; 120b
 * keeps the real vocabulary size (padded). */
static void test_gptoss_presets(void) {
    const struct oss_shape s20 = {2, 256, 64, 8, 64, 256, 32, QTYPE_Q8_0, QTYPE_MXFP4};
    const struct oss_shape s120 = {1, 64, 64, 8, 64, 64, 128, QTYPE_Q8_0, QTYPE_MXFP4};
    const char *path = tmp_path("gpt-oss.gguf");
    CHECK_EQ_INT(MKMODEL("-o", path, "--preset", "gpt-oss-20b", "--n-layer", "2", "--n-embd",
                         "256", "--n-ff-exp", "256", "--n-vocab", "1024"), 0);
    struct gguf *g = open_ok(path);
    if (g) {
        check_gptoss_keys(g, &s20, 128, 38);
        for (int il = 0; il < 2; il++)
            check_gptoss_layer(g, &s20, il);
        expect_tensor(g, "output.weight", QTYPE_Q8_0, 256, 1024, 0);
        check_gptoss_values(g);
    }
    gguf_free(g);
    CHECK_EQ_INT(MKMODEL("-o", path, "--preset", "gpt-oss-120b", "--n-layer", "1", "--n-embd",
                         "64", "--n-ff-exp", "64"), 0);
    g = open_ok(path);
    if (g) {
        check_gptoss_keys(g, &s120, 128, 38);
        check_gptoss_layer(g, &s120, 0);
        expect_tensor(g, "token_embd.weight", QTYPE_Q8_0, 64, 201088, 0);
        check_gptoss_vocab(g);
    }
    gguf_free(g);
    /* F32 experts on request; its family only */
    CHECK_EQ_INT(MKMODEL("-o", path, "--preset", "gpt-oss-20b", "--n-layer", "1", "--n-embd", "64",
                         "--n-ff-exp", "64", "--n-vocab", "1024", "--types", "f32"), 0);
    g = open_ok(path);
    const struct gguf_tensor *t = g ? gguf_find_tensor(g, "blk.0.ffn_up_exps.weight") : NULL;
    CHECK(t && t->type == QTYPE_F32 && get_u32(g, "general.file_type") == 0);
    gguf_free(g);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("bad.gguf"), "--preset", "tiny-gpt-oss", "--arch", "qwen3"),
                 2);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("bad.gguf"), "--preset", "tiny-gpt-oss", "--upcycle"), 2);
    CHECK(!file_exists(tmp_path("bad.gguf")));
}

/* ==== sniper-mkmodel: presets, tokenizer import, bad options ================================= */

/* The 30B preset's metadata and vocabulary with small matrices (the full one is ~17 GiB). */
static void test_preset_30b_reduced(void) {
    struct shape s = {"qwen3moe", T_Q4_K_M, 2, 256, 32, 4, 128, 6144, 8, 8, 768, 40960, 151936};
    struct gguf *g = make_and_check(tmp_path("30b-small.gguf"), &s,
        (const char *const[]){"--preset", "qwen3-30b-a3b", "--n-layer", "2", "--n-embd", "256",
                              "--n-expert", "8", NULL});
    gguf_free(g);
}

/* The i-quant mixes: the names, shapes and types llama-quantize gave the fixtures' x256 files
 * (2 layers, expert FFN 256) and values of the intended spread; with 8 layers the IQ2_M recipe
 * gives layer 0's ffn_down IQ3_S. */
static void test_iq_mixes(void) {
    static const char *const mixes[] = {"iq2_m", "iq3_xxs"};
    const char *dir = test_fixtures_dir();
    for (int m = 0; m < 2; m++) {
        char name[64], path[4200];
        snprintf(name, sizeof(name), "x256-%s.gguf", mixes[m]);
        CHECK_EQ_INT(MKMODEL("-o", tmp_path(name), "--types", mixes[m], "--n-layer", "2",
                             "--n-ff-exp", "256"), 0);
        struct gguf *g = open_ok(tmp_path(name));
        if (g)
            check_values(g);
        if (!dir) {
            test_skip("fixtures absent: i-quant mixes NOT compared with llama.cpp's");
        } else if (g) {
            snprintf(path, sizeof(path), "%s/models/tiny-qwen3moe-x256-%s.gguf", dir, mixes[m]);
            struct gguf *ref = open_ok(path);
            CHECK(!ref || ref->n_tensors == g->n_tensors);
            for (uint64_t k = 0; ref && k < ref->n_tensors; k++) {
                const struct gguf_tensor *a = &ref->tensors[k], *b = gguf_find_tensor(g, a->name);
                CHECK_MSG(b && b->type == a->type && b->ne[0] == a->ne[0],
                          "%s: \"%s\" is %s here, %s in llama.cpp's", mixes[m], a->name,
                          b ? qtype_name(b->type) : "missing", qtype_name(a->type));
            }
            gguf_free(ref);
        }
        gguf_free(g);
    }
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("iq2_m-8.gguf"), "--types", "iq2_m", "--n-layer", "8",
                         "--n-ff-exp", "256", "--n-expert", "4", "--n-expert-used", "2"), 0);
    struct gguf *g = open_ok(tmp_path("iq2_m-8.gguf"));
    const struct gguf_tensor *d0 = g ? gguf_find_tensor(g, "blk.0.ffn_down_exps.weight") : NULL;
    const struct gguf_tensor *d1 = g ? gguf_find_tensor(g, "blk.1.ffn_down_exps.weight") : NULL;
    CHECK(d0 && d0->type == QTYPE_IQ3_S && d1 && d1->type == QTYPE_IQ2_S);
    gguf_free(g);
}

static const char tok_json[] =
    "{\"version\":\"1.0\",\"added_tokens\":["
    "{\"id\":8,\"content\":\"<|endoftext|>\",\"special\":true},"
    "{\"id\":9,\"content\":\"<|im_start|>\",\"special\":true},"
    "{\"id\":10,\"content\":\"<|im_end|>\",\"special\":true},"
    "{\"id\":12,\"content\":\"<think>\",\"special\":false}],"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"ab\":4,"
    "\"\\u0120a\":5,\"abc\":6,\"\\u0120ab\":7},"
    "\"merges\":[\"a b\",[\"\\u0120\",\"a\"],\"ab c\",[\"\\u0120a\",\"b\"]]}}";

static void test_tokenizer_json(void) {
    const char *jp = tmp_path("tokenizer.json"), *out = tmp_path("tok.gguf");
    FILE *f = fopen(jp, "w");
    CHECK(f && fputs(tok_json, f) >= 0);
    if (f)
        fclose(f);
    CHECK_EQ_INT(MKMODEL("-o", out, "--tokenizer-json", jp, "--n-vocab", "20", "--n-layer", "1"),
                 0);
    struct gguf *g = open_ok(out);
    uint64_t n = 0, nm = 0, nt = 0;
    const struct gguf_str *tok = g ? gguf_get_arr(g, "tokenizer.ggml.tokens",
                                                  GGUF_VTYPE_STRING, &n) : NULL;
    const int32_t *ty = g ? gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_VTYPE_INT32, &nt)
                          : NULL;
    const struct gguf_str *mg = g ? gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_VTYPE_STRING,
                                                 &nm) : NULL;
    CHECK(tok && ty && mg && n == 20 && nt == 20 && nm == 4);
    if (tok && ty && mg && n == 20 && nm == 4) {
        CHECK_STR(tok[5].data, "\xc4\xa0" "a");
        CHECK_STR(mg[1].data, "\xc4\xa0 a");
        CHECK_STR(mg[3].data, "\xc4\xa0" "a b");
        CHECK(strcmp(tok[10].data, "<|im_end|>") == 0 && ty[10] == 3 && ty[12] == 4);
        CHECK(strcmp(tok[11].data, "[PAD11]") == 0 && ty[11] == 5 && ty[0] == 1);
        CHECK_STR(tok[19].data, "[PAD19]");
        CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.eos_token_id"), 10);
        CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.padding_token_id"), 8);
        const struct gguf_tensor *t = gguf_find_tensor(g, "token_embd.weight");
        CHECK(t && t->ne[1] == 20);
    }
    gguf_free(g);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("tok-small.gguf"), "--tokenizer-json", jp,
                         "--n-vocab", "5"), 1);
    f = fopen(jp, "w");
    CHECK(f && fputs("{\"model\":{\"vocab\":[1,2]}}", f) >= 0);
    if (f)
        fclose(f);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("tok-bad.gguf"), "--tokenizer-json", jp), 1);
    CHECK(!file_exists(tmp_path("tok-bad.gguf")) && !file_exists(tmp_path("tok-small.gguf")));
}

/* A SentencePiece-style tokenizer.json (byte_fallback, Gemma's kind): its "<0xXX>" tokens become
 * type BYTE (a look-alike that is not one stays normal, and without byte_fallback they all do), and
 * bos/eos are the control <bos>/<eos>, not the plain words "<s>"/"</s>" that come first in the
 * candidates' order. */
static const char tok_json_spm[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<pad>\",\"special\":true},"
    "{\"id\":1,\"content\":\"<eos>\",\"special\":true},"
    "{\"id\":2,\"content\":\"<bos>\",\"special\":true},"
    "{\"id\":3,\"content\":\"<|channel>\",\"special\":false}],"
    "\"model\":{\"type\":\"BPE\",\"byte_fallback\":%s,\"vocab\":{\"<pad>\":0,\"<eos>\":1,"
    "\"<bos>\":2,\"<|channel>\":3,\"<s>\":4,\"</s>\":5,\"<0x41>\":6,\"<0xfF>\":7,"
    "\"<0xZZ>\":8,\"<0x411>\":9,\"a\":10,\"\u2581\":11,\"\u2581a\":12},"
    "\"merges\":[\"\u2581 a\"]}}";

static void test_tokenizer_json_spm(void) {
    for (int fallback = 1; fallback >= 0; fallback--) {
        const char *jp = tmp_path("tok-spm.json"), *out = tmp_path("tok-spm.gguf");
        FILE *f = fopen(jp, "w");
        CHECK(f && fprintf(f, tok_json_spm, fallback ? "true" : "false") > 0);
        if (f)
            fclose(f);
        CHECK_EQ_INT(MKMODEL("-o", out, "--preset", "tiny-gemma4", "--vocab", "gemma4",
                             "--tokenizer-json", jp, "--n-vocab", "16", "--n-embd", "32",
                             "--n-ff", "32", "--n-ff-exp", "32"), 0);
        struct gguf *g = open_ok(out);
        uint64_t nt = 0;
        const int32_t *ty = g ? gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_VTYPE_INT32,
                                             &nt) : NULL;
        CHECK(ty && nt == 16);
        if (ty && nt == 16) {
            CHECK_EQ_INT(ty[6], fallback ? 6 : 1);
            CHECK_EQ_INT(ty[7], fallback ? 6 : 1);
            CHECK(ty[8] == 1 && ty[9] == 1 && ty[10] == 1 && ty[3] == 4 && ty[2] == 3);
            CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.bos_token_id"), 2);
            CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.eos_token_id"), 1);
            CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.padding_token_id"), 0);
            CHECK_STR(gguf_get_str(g, "tokenizer.ggml.model"), "gemma4");
        }
        gguf_free(g);
    }
}

/* --vocab gemma4: tokenizer.ggml.model gemma4 with Gemma's specials at 0-3, the turn markers as
 * control tokens, 256 <0xXX> byte tokens, merges across U+2581, add_bos on, Gemma 4's turns in the
 * template; any other --vocab is refused. */
static void test_vocab_gemma4(void) {
    const char *out = tmp_path("g4vocab.gguf");
    CHECK_EQ_INT(MKMODEL("-o", out, "--vocab", "gemma4", "--n-layer", "1"), 0);
    struct gguf *g = open_ok(out);
    uint64_t n = 0, nt = 0, nm = 0;
    const struct gguf_str *tok = g ? gguf_get_arr(g, "tokenizer.ggml.tokens",
                                                  GGUF_VTYPE_STRING, &n) : NULL;
    const int32_t *ty = g ? gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_VTYPE_INT32, &nt)
                          : NULL;
    const struct gguf_str *mg = g ? gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_VTYPE_STRING,
                                                 &nm) : NULL;
    bool add_bos = false;
    CHECK(tok && ty && mg && n == nt && n > 400 && nm > 100);
    if (tok && ty && n > 400) {
        CHECK(strcmp(tok[0].data, "<pad>") == 0 && strcmp(tok[2].data, "<bos>") == 0 &&
              ty[2] == 3 && strcmp(tok[3].data, "<unk>") == 0 && ty[3] == 2);
        CHECK(strcmp(tok[4].data, "<|turn>") == 0 && ty[4] == 3);
        CHECK(strcmp(tok[19].data, "<0x00>") == 0 && ty[19] == 6 && ty[19 + 255] == 6 &&
              strcmp(tok[19 + 255].data, "<0xFF>") == 0);
        CHECK_STR(gguf_get_str(g, "tokenizer.ggml.model"), "gemma4");
        CHECK_STR(gguf_get_str(g, "tokenizer.ggml.pre"), "gemma4");
        CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.bos_token_id"), 2);
        CHECK_EQ_INT(get_u32(g, "tokenizer.ggml.eos_token_id"), 1);
        CHECK(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) == 0 && add_bos);
        CHECK(strstr(gguf_get_str(g, "tokenizer.chat_template"), "<|turn>") != NULL);
        bool across = false;
        for (uint64_t i = 0; mg && i < nm; i++)
            across |= strstr(mg[i].data, "\xe2\x96\x81") != NULL;
        CHECK_MSG(across, "no merge joins a U+2581");
    }
    gguf_free(g);
    CHECK_EQ_INT(MKMODEL("-o", tmp_path("g4bad.gguf"), "--vocab", "gemma3"), 2);
    CHECK(!file_exists(tmp_path("g4bad.gguf")));
}

static void test_bad_options(void) {
    const char *p = tmp_path("opt.gguf");
    CHECK_EQ_INT(MKMODEL("-o", p, "--preset", "huge"), 2);
    CHECK_EQ_INT(MKMODEL("-o", p, "--arch", "gpt2"), 2);
    CHECK_EQ_INT(MKMODEL("-o", p, "--types", "q3_k"), 2);
    CHECK_EQ_INT(MKMODEL("-o", p, "--n-head", "7"), 2);
    CHECK_EQ_INT(MKMODEL("-o", p, "--n-layer", "0"), 2);
    CHECK_EQ_INT(MKMODEL("-o", p, "--n-embd", "-5"), 2);
    CHECK_EQ_INT(MKMODEL("-o", p, "--n-expert-used", "17"), 2);
    CHECK_EQ_INT(MKMODEL("-o", p, "--types", "q8_0", "--n-embd", "100"), 2);
    CHECK_EQ_INT(MKMODEL("--types", "q8_0"), 2);
    CHECK(!file_exists(p));
    CHECK_EQ_INT(MKMODEL("--help"), 0);
}

/* --split-max-size: files OUT-0000K-of-0000N.gguf; the split keys typed as gguf-split writes them
 * (llama.cpp's loader checks the types: u16, u16, i32); the metadata in the first shard only (the
 * others hold the three keys); tensors in the single file's order, each shard's data within the
 * size unless one tensor alone exceeds it; every tensor's bytes the single file's. */
static void test_split_layout(void) {
    const char *one = tmp_path("one.gguf"), *out = tmp_path("cut.gguf");
    const char *a1[] = {"-o", one, "--preset", "tiny", "--types", "q8_0", NULL};
    const char *a2[] = {"-o", out, "--preset", "tiny", "--types", "q8_0", "--split-max-size", "3M",
                        NULL};
    char err[512], first[4200];
    struct gguf *g1 = NULL, *g2 = NULL;
    void *x = NULL, *y = NULL;
    CHECK_EQ_INT(mkmodel(0, a1), 0);
    CHECK_EQ_INT(mkmodel(0, a2), 0);
    CHECK(!file_exists(out));
    snprintf(first, sizeof(first), "%s/cut-00001-of-00003.gguf", test_tmpdir());
    g1 = gguf_open(one, err, sizeof(err));
    CHECK_MSG(g1 != NULL, "%s", err);
    g2 = gguf_open(first, err, sizeof(err));
    CHECK_MSG(g2 != NULL, "%s", err);
    if (!g1 || !g2)
        goto out;
    CHECK_EQ_INT(g2->n_shards, 3);
    const struct gguf_kv *no = gguf_find_kv(g2, "split.no"), *n = gguf_find_kv(g2, "split.count");
    const struct gguf_kv *nt = gguf_find_kv(g2, "split.tensors.count");
    CHECK(no && no->type == GGUF_VTYPE_UINT16 && no->v.u64 == 0);
    CHECK(n && n->type == GGUF_VTYPE_UINT16 && n->v.u64 == 3);
    CHECK(nt && nt->type == GGUF_VTYPE_INT32 && nt->v.i64 == (int64_t)g1->n_tensors);
    CHECK_EQ_INT(g2->n_kv, g1->n_kv + 3);
    for (uint32_t k = 1; k < 3; k++) { /* n_kv of the header: bytes 16..23 */
        uint64_t hdr[3] = {0};
        CHECK_EQ_INT(pread(g2->shards[k].fd, hdr, sizeof(hdr), 0), (long)sizeof(hdr));
        CHECK_EQ_INT(hdr[2], 3);
    }
    CHECK_EQ_INT(g2->n_tensors, g1->n_tensors);
    uint64_t shard_data[3] = {0}, shard_n[3] = {0};
    for (uint64_t i = 0; i < g1->n_tensors && i < g2->n_tensors; i++) {
        const struct gguf_tensor *t1 = &g1->tensors[i], *t2 = &g2->tensors[i];
        CHECK_STR(t2->name, t1->name);
        CHECK(t2->shard >= (i ? g2->tensors[i - 1].shard : 0u) && t2->shard < 3);
        shard_data[t2->shard] += (t2->n_bytes + 31) / 32 * 32;
        shard_n[t2->shard]++;
        x = realloc(x, t1->n_bytes);
        y = realloc(y, t1->n_bytes);
        if (!x || !y || t1->n_bytes != t2->n_bytes)
            break;
        CHECK(gguf_read_tensor(g1, t1, x) == 0 && gguf_read_tensor(g2, t2, y) == 0 &&
              memcmp(x, y, t1->n_bytes) == 0);
    }
    for (int k = 0; k < 3; k++)
        CHECK_MSG(shard_n[k] == 1 || shard_data[k] <= (3u << 20), "shard %d: %llu tensors, %llu bytes",
                  k, (unsigned long long)shard_n[k], (unsigned long long)shard_data[k]);
out:
    free(x);
    free(y);
    gguf_free(g1);
    gguf_free(g2);
}

/* The mixes added for the golden corpus (tests/golden): per mix, the types llama-quantize's
 * recipe gives a 2-layer qwen3moe (8 query heads per 2 KV heads, 4 experts of 256) for token_embd,
 * output, attn_v, attn_output and the experts, and general.file_type (llama_ftype). */
static void test_corpus_mixes(void) {
    static const struct {
        const char *mix;
        uint32_t ftype;
        enum qtype embd, output, attn_v, attn_o, gate_exps, down_exps;
    } want[] = {
        {"f16", 1, QTYPE_F16, QTYPE_F16, QTYPE_F16, QTYPE_F16, QTYPE_F16, QTYPE_F16},
        {"bf16", 32, QTYPE_BF16, QTYPE_BF16, QTYPE_BF16, QTYPE_BF16, QTYPE_BF16, QTYPE_BF16},
        {"q4_0", 2, QTYPE_Q4_0, QTYPE_Q6_K, QTYPE_Q4_0, QTYPE_Q4_0, QTYPE_Q4_0, QTYPE_Q4_0},
        {"q5_0", 8, QTYPE_Q5_0, QTYPE_Q6_K, QTYPE_Q5_0, QTYPE_Q5_0, QTYPE_Q5_0, QTYPE_Q5_0},
        /* use_more_bits(0, 2) and (1, 2): both layers' attn_v and ffn_down get Q6_K */
        {"q5_k_m", 17, QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_Q6_K, QTYPE_Q5_K, QTYPE_Q5_K, QTYPE_Q6_K},
        {"q6_k", 18, QTYPE_Q6_K, QTYPE_Q6_K, QTYPE_Q6_K, QTYPE_Q6_K, QTYPE_Q6_K, QTYPE_Q6_K},
        {"iq1_s", 24, QTYPE_Q2_K, QTYPE_Q5_K, QTYPE_Q4_K, QTYPE_IQ2_XXS, QTYPE_IQ1_S, QTYPE_IQ1_S},
        {"iq1_m", 31, QTYPE_Q2_K, QTYPE_Q5_K, QTYPE_Q4_K, QTYPE_IQ2_XXS, QTYPE_IQ1_M, QTYPE_IQ1_M},
        {"iq2_xxs", 19, QTYPE_Q2_K, QTYPE_Q5_K, QTYPE_Q4_K, QTYPE_IQ2_XXS, QTYPE_IQ2_XXS,
         QTYPE_IQ2_XXS},
        {"iq2_xs", 20, QTYPE_Q2_K, QTYPE_Q5_K, QTYPE_Q4_K, QTYPE_IQ2_XS, QTYPE_IQ2_XS,
         QTYPE_IQ2_XS},
        {"iq3_m", 27, QTYPE_IQ3_S, QTYPE_Q6_K, QTYPE_Q4_K, QTYPE_Q4_K, QTYPE_IQ3_S, QTYPE_IQ3_S},
    };
    static const char *const names[] = {"token_embd.weight", "output.weight",
                                         "blk.1.attn_v.weight", "blk.1.attn_output.weight",
                                         "blk.1.ffn_gate_exps.weight",
                                         "blk.1.ffn_down_exps.weight"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *path = tmp_path("corpus-mix.gguf");
        CHECK_EQ_INT(MKMODEL("-o", path, "--n-layer", "2", "--n-expert", "4", "--n-expert-used",
                             "2", "--n-ff-exp", "256", "--types", want[i].mix), 0);
        struct gguf *g = open_ok(path);
        const enum qtype types[] = {want[i].embd, want[i].output, want[i].attn_v, want[i].attn_o,
                                    want[i].gate_exps, want[i].down_exps};
        for (int k = 0; g && k < 6; k++) {
            const struct gguf_tensor *t = gguf_find_tensor(g, names[k]);
            CHECK_MSG(t && t->type == types[k], "%s: \"%s\" is %s, not %s", want[i].mix,
                      names[k], t ? qtype_name(t->type) : "missing", qtype_name(types[k]));
        }
        const struct gguf_tensor *norm = g ? gguf_find_tensor(g, "blk.0.attn_norm.weight") : NULL;
        CHECK(!g || (norm && norm->type == QTYPE_F32));
        CHECK(!g || get_u32(g, "general.file_type") == want[i].ftype);
        if (g)
            check_values(g);
        gguf_free(g);
    }
}

static const struct test_case cases[] = {
    {"split_layout", test_split_layout},
    {"corpus_mixes", test_corpus_mixes},
    {"writer_roundtrip", test_writer_roundtrip},
    {"low_bit_mixes", test_low_bit_mixes},
    {"writer_rejects", test_writer_rejects},
    {"vocab_gemma4", test_vocab_gemma4},
    {"writer_stream_errors", test_writer_stream_errors},
    {"writer_unwritable", test_writer_unwritable},
    {"full_disk", test_full_disk},
    {"tiny_moe_types", test_tiny_moe_types},
    {"tiny_dense_and_llama", test_tiny_dense_and_llama},
    {"matches_fixture_layout", test_matches_fixture_layout},
    {"qwen35_presets", test_qwen35_presets},
    {"gemma4_presets", test_gemma4_presets},
    {"seeds", test_seeds},
    {"upcycle", test_upcycle},
    {"preset_30b_reduced", test_preset_30b_reduced},
    {"gptoss_tiny", test_gptoss_tiny},
    {"gptoss_fixture", test_gptoss_fixture},
    {"gptoss_presets", test_gptoss_presets},
    {"iq_mixes", test_iq_mixes},
    {"tokenizer_json", test_tokenizer_json},
    {"tokenizer_json_spm", test_tokenizer_json_spm},
    {"bad_options", test_bad_options},
    {0, 0},
};

/* The models written here total ~150 MB: remove this binary's own temp directory at exit. */
static void remove_tmpdir(void) {
    const char *dir = test_tmpdir();
    DIR *d = opendir(dir);
    char path[4400];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv) {
    if (!getenv("SNIPER_KEEP_TMP"))
        atexit(remove_tmpdir);
    return test_run(argc, argv, cases);
}
