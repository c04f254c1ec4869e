/* tools/goldens/tokenize.c - llama.cpp's token ids for a vocabulary test file, in the format of its
 * own models/ggml-vocab-*.gguf.out: one line of ids per string of the .inp file (strings each
 * followed by "\n__ggml_vocab_test__\n"), tokenized without BOS and without parsing special
 * tokens (--special: with BOS when the vocabulary adds one, special tokens parsed: a chat prompt
 * as llama.cpp's server tokenizes it). Built against a llama.cpp checkout outside this repository
 * (its public C API, llama.h), as tools/goldens/make.sh builds dump.c; never part of `make` or
 * `make test`.
 *
 *   tokenize [--special] VOCAB.gguf STRINGS.inp > STRINGS.out
 *
 * tests/tokenizer/gemma4*.out were written so (tests/tokenizer/README.md). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static const char SEP[] = "\n__ggml_vocab_test__\n";

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        s = malloc((size_t)len + 1);
    if (s && fread(s, 1, (size_t)len, f) != (size_t)len) {
        free(s);
        s = NULL;
    }
    if (f)
        fclose(f);
    if (s) {
        s[len] = '\0';
        *n = (size_t)len;
    }
    return s;
}

/* Prints the ids of text[0..len) on one line (special: BOS added, special tokens parsed). Returns
 * 0 or -1. */
static int print_ids(const struct llama_vocab *vocab, const char *text, size_t len, bool special) {
    int cap = (int)len * 3 + 16;
    llama_token *ids = malloc((size_t)cap * sizeof(*ids));
    int n = ids ? llama_tokenize(vocab, text, (int32_t)len, ids, cap, special, special) : -1;
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    free(ids);
    return n < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    bool special = argc == 4 && strcmp(argv[1], "--special") == 0;
    if (argc != 3 + special) {
        fprintf(stderr, "usage: tokenize [--special] VOCAB.gguf STRINGS.inp\n");
        return 2;
    }
    argv += special;
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    size_t n = 0;
    char *inp = read_file(argv[2], &n);
    int rc = model && inp ? 0 : 1;
    if (rc)
        fprintf(stderr, "tokenize: cannot load \"%s\" or read \"%s\"\n", argv[1], argv[2]);
    const struct llama_vocab *vocab = model ? llama_model_get_vocab(model) : NULL;
    for (char *s = inp, *sep; rc == 0 && (sep = strstr(s, SEP)); s = sep + strlen(SEP))
        rc = print_ids(vocab, s, (size_t)(sep - s), special) < 0 ? 1 : 0;
    free(inp);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
