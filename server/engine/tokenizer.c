/* tokenizer.c - BPE tokenizer built from GGUF metadata: byte-level (tokenizer.ggml.model "gpt2")
 * or SPM-style (model "gemma4", or pre "gemma4": Gemma 4's vocabulary).
 *
 * Encoding runs in three stages, as llama.cpp's does: special tokens are cut out of the text first
 * (longest text first), each remaining fragment is split into pre-tokens by the regex that
 * tokenizer.ggml.pre names (pcre2), and each pre-token starts as one symbol per byte (the token of
 * the byte's GPT-2 alphabet character) whose neighbours merge lowest rank first. The SPM-style
 * vocabulary writes spaces as U+2581, splits only at newline runs and starts from one symbol per
 * UTF-8 character; a symbol that is no token falls back to <0xXX> byte tokens. Invariants: token
 * text <-> id is a bijection; every merge in the table joins two tokens into a third token. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer.h"

#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

/* Token attributes: tokenizer.ggml.token_type values 1..6 become one bit each. */
enum tok_attr {
    TOK_ATTR_NORMAL = 1 << 0,
    TOK_ATTR_UNKNOWN = 1 << 1,
    TOK_ATTR_CONTROL = 1 << 2,
    TOK_ATTR_USER_DEFINED = 1 << 3,
    TOK_ATTR_UNUSED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_EOG = 1 << 6,
};

/* Tokens cut out of the text before BPE (llama.cpp's "special tokens cache"). */
#define TOK_ATTR_SPECIAL (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)

/* One slot of the merge table: the pair (left id << 32 | right id) -> rank and merged token. */
struct merge_slot {
    uint64_t key;   /* MERGE_EMPTY when free */
    int32_t rank;   /* index in tokenizer.ggml.merges: lower merges first */
    int32_t result; /* id of the token left+right */
};

#define MERGE_EMPTY UINT64_MAX
#define N_ALPHABET 0x144 /* the byte alphabet uses code points below U+0144 */

struct tokenizer {
    int32_t n_vocab;
    char *text;          /* all token texts, each NUL-terminated */
    uint32_t *text_off;  /* [n_vocab] offset of each text in text */
    uint32_t *text_len;  /* [n_vocab] bytes */
    uint8_t *attr;       /* [n_vocab] enum tok_attr bits */
    int32_t *vocab_slot; /* [vocab_mask + 1] open-addressing table of ids, -1 when free */
    uint64_t vocab_mask;
    struct merge_slot *merge_slot; /* [merge_mask + 1] */
    uint64_t merge_mask;
    char *piece;          /* the bytes every token stands for, back to back */
    uint32_t *piece_off;  /* [n_vocab] */
    uint32_t *piece_len;  /* [n_vocab] */
    int32_t *special;     /* [n_special] ids cut out before BPE, longest text first */
    size_t n_special;
    int32_t byte_id[256];          /* token of each byte's alphabet character, -1 when absent */
    uint16_t byte_cpt[256];        /* byte -> alphabet code point */
    int16_t cpt_byte[N_ALPHABET];  /* alphabet code point -> byte, -1 for others */
    pcre2_code *re;                /* the pre-tokenizer (NULL when spm) */
    bool ignore_merges;            /* a pre-token that is a whole token skips BPE (llama3) */
    bool spm;                      /* SPM-style (gemma4): ' ' is U+2581, raw UTF-8 symbols, byte_id
                                    * holds the <0xXX> tokens, newline runs are pre-tokens */
    bool add_bos;
    int32_t bos, eos, eot;
};

/* ---------------------------------------------------------------------------------------------
 * Pre-tokenizers: the regexes of llama.cpp's llm_tokenizer_bpe, by tokenizer.ggml.pre, with \s
 * spelled out as llama.cpp's whitespace set (Unicode White_Space: PCRE2's \s adds U+180E).
 * gpt-2's gets llama.cpp's implicit trailing "\s+" (its hand-written splitter has it). */

#define WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}" \
           "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define SP "[" WS "]"
#define NOT_SP "[^" WS "]"
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* \s+(?!\S)|\s+, and the alternatives llama3 and qwen2 share after letters and digits. */
#define SPACES SP "+(?!" NOT_SP ")|" SP "+"
#define PUNCT_WS_TAIL " ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" SP "*[\\r\\n]+|" SPACES

static const char PAT_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" SPACES;
static const char PAT_LLAMA3[] =
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|" PUNCT_WS_TAIL;
static const char PAT_QWEN2[] = CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|" PUNCT_WS_TAIL;
/* qwen2's with combining marks (\p{M}) joining letters and leaving the punctuation class */
static const char PAT_QWEN35[] =
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^" WS "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" SP
    "*[\\r\\n]+|" SPACES;

/* gpt-4o (o200k, gpt-oss's): llama.cpp's spelling of tokenizer.json's pattern, which PCRE2 runs
 * as written. A word is an optional non-letter/digit, "upper" letters (any letter but a-z), then
 * "lower" ones (any letter but A-Z), or the reverse, then a contraction in either case; digits go
 * in runs of up to three; punctuation keeps trailing \r \n and /. Unlike o200k's own pattern,
 * combining marks (\p{M}) are not letters here: they split words, as in llama.cpp. */
#define UPPER "(?:(?=\\p{L})[^a-z])"
#define LOWER "(?:(?=\\p{L})[^A-Z])"
static const char PAT_GPT4O[] =
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTRACTIONS "?|"
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER "*" CONTRACTIONS "?|"
    "\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|" SP "*[\\r\\n]+|" SPACES;

struct pre_spec {
    const char *name;
    const char *pattern;
    bool ignore_merges;
};

static const struct pre_spec pre_specs[] = {
    {"gpt-2", PAT_GPT2, false},      {"phi-2", PAT_GPT2, false},
    {"llama-bpe", PAT_LLAMA3, true}, {"llama3", PAT_LLAMA3, true},
    {"llama-v3", PAT_LLAMA3, true},  {"qwen2", PAT_QWEN2, false},
    {"deepseek-r1-qwen", PAT_QWEN2, false}, {"qwen35", PAT_QWEN35, false},
    {"gpt-4o", PAT_GPT4O, false},
};

/* Token texts that end generation (llama.cpp also marks them control when the GGUF did not);
 * gpt-oss's <|return|> and <|call|> (o200k_harmony) end the reply, its <|end|> only a message
 * (load_harmony); Gemma 4's turn ends at <turn|>, and at <|tool_response> after a tool call. */
static const char *const eog_texts[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>",
                                        "<|end_of_text|>", "<|end|>", "<|return|>", "<|call|>",
                                        "<eos>", "<turn|>", "<|tool_response>"};

/* gpt-oss's message markers, rendered in the output and cut from text like user-defined tokens
 * (llama.cpp's rule for them, whatever the GGUF's types). */
static const char *const harmony_markers[] = {"<|channel|>", "<|message|>", "<|start|>",
                                              "<|constrain|>"};

/* ---------------------------------------------------------------------------------------------
 * Hash tables: token text -> id and (left id, right id) -> merge. Open addressing, linear probing,
 * at most half full. */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 finalizer */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The smallest power of two >= 2 * n (and >= 16). */
static uint64_t table_size(uint64_t n) {
    uint64_t size = 16;
    while (size < 2 * n)
        size <<= 1;
    return size;
}

static int32_t vocab_lookup(const struct tokenizer *tk, const char *s, size_t n) {
    uint64_t i = hash_bytes(s, n) & tk->vocab_mask;
    for (;;) {
        int32_t id = tk->vocab_slot[i];
        if (id < 0)
            return -1;
        if (tk->text_len[id] == n && memcmp(tk->text + tk->text_off[id], s, n) == 0)
            return id;
        i = (i + 1) & tk->vocab_mask;
    }
}

/* Inserts id under its text. Returns false when another id already holds that text. */
static bool vocab_insert(struct tokenizer *tk, int32_t id) {
    const char *s = tk->text + tk->text_off[id];
    size_t n = tk->text_len[id];
    uint64_t i = hash_bytes(s, n) & tk->vocab_mask;
    for (;;) {
        int32_t other = tk->vocab_slot[i];
        if (other < 0) {
            tk->vocab_slot[i] = id;
            return true;
        }
        if (tk->text_len[other] == n && memcmp(tk->text + tk->text_off[other], s, n) == 0)
            return false;
        i = (i + 1) & tk->vocab_mask;
    }
}

static uint64_t merge_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static const struct merge_slot *merge_lookup(const struct tokenizer *tk, int32_t left,
                                             int32_t right) {
    uint64_t key = merge_key(left, right);
    uint64_t i = hash_u64(key) & tk->merge_mask;
    for (;;) {
        const struct merge_slot *s = &tk->merge_slot[i];
        if (s->key == key)
            return s;
        if (s->key == MERGE_EMPTY)
            return NULL;
        i = (i + 1) & tk->merge_mask;
    }
}

/* Keeps the first rank of a pair listed twice, as llama.cpp's map emplace does. */
static void merge_insert(struct tokenizer *tk, int32_t left, int32_t right, int32_t rank,
                         int32_t result) {
    uint64_t key = merge_key(left, right);
    uint64_t i = hash_u64(key) & tk->merge_mask;
    while (tk->merge_slot[i].key != MERGE_EMPTY) {
        if (tk->merge_slot[i].key == key)
            return;
        i = (i + 1) & tk->merge_mask;
    }
    tk->merge_slot[i] = (struct merge_slot){key, rank, result};
}

/* ---------------------------------------------------------------------------------------------
 * Building from the GGUF. */

static size_t utf8_put(char *dst, uint32_t cpt) {
    if (cpt < 0x80) {
        dst[0] = (char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        dst[0] = (char)(0xc0 | (cpt >> 6));
        dst[1] = (char)(0x80 | (cpt & 0x3f));
        return 2;
    }
    if (cpt < 0x10000) {
        dst[0] = (char)(0xe0 | (cpt >> 12));
        dst[1] = (char)(0x80 | ((cpt >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cpt & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cpt >> 18));
    dst[1] = (char)(0x80 | ((cpt >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cpt >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cpt & 0x3f));
    return 4;
}

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
 * take U+0100, U+0101, ... in byte order. */
static void alphabet_init(struct tokenizer *tk) {
    uint32_t next = 0x100;
    for (int i = 0; i < N_ALPHABET; i++)
        tk->cpt_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        uint32_t cpt = printable ? (uint32_t)b : next++;
        tk->byte_cpt[b] = (uint16_t)cpt;
        tk->cpt_byte[cpt] = (int16_t)b;
    }
}

/* Copies the token texts into one pool (an empty text becomes "[EMPTY_<id>]" as in llama.cpp) and
 * fills the text -> id table. Returns 0 or -1 with err set. */
static int load_tokens(struct tokenizer *tk, const struct gguf *g, char *err, size_t err_len) {
    static const char key[] = "tokenizer.ggml.tokens";
    uint64_t n;
    const struct gguf_str *strs = gguf_get_arr(g, key, GGUF_VTYPE_STRING, &n);
    if (!strs) {
        err_set(err, err_len, "tokenizer_new: missing or bad key '%s'", key);
        return -1;
    }
    if (n == 0 || n > INT32_MAX / 2) {
        err_set(err, err_len, "tokenizer_new: bad token count in '%s'", key);
        return -1;
    }
    uint64_t pool = 0;
    for (uint64_t i = 0; i < n; i++)
        pool += (strs[i].len ? strs[i].len : 32) + 1; /* each len is below the file size */
    if (pool > UINT32_MAX) {
        err_set(err, err_len, "tokenizer_new: token texts too large in '%s'", key);
        return -1;
    }
    tk->n_vocab = (int32_t)n;
    tk->text = malloc(pool);
    tk->text_off = calloc(n, sizeof(*tk->text_off));
    tk->text_len = calloc(n, sizeof(*tk->text_len));
    tk->vocab_mask = table_size(n) - 1;
    tk->vocab_slot = malloc((tk->vocab_mask + 1) * sizeof(*tk->vocab_slot));
    if (!tk->text || !tk->text_off || !tk->text_len || !tk->vocab_slot) {
        err_set(err, err_len, "tokenizer_new: out of memory for '%s'", key);
        return -1;
    }
    memset(tk->vocab_slot, 0xff, (tk->vocab_mask + 1) * sizeof(*tk->vocab_slot));
    uint32_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        char *dst = tk->text + off;
        size_t len = strs[i].len;
        if (len)
            memcpy(dst, strs[i].data, len);
        else
            len = (size_t)snprintf(dst, 32, "[EMPTY_%u]", (unsigned)i);
        dst[len] = '\0';
        tk->text_off[i] = off;
        tk->text_len[i] = (uint32_t)len;
        off += (uint32_t)len + 1;
        if (!vocab_insert(tk, (int32_t)i)) {
            err_set(err, err_len, "tokenizer_new: duplicate token text '%s'", dst);
            return -1;
        }
    }
    return 0;
}

/* tokenizer.ggml.token_type (optional, INT32): 1 normal, 2 unknown, 3 control, 4 user-defined,
 * 5 unused, 6 byte; absent means all normal. Returns 0 or -1 with err set. */
static int load_types(struct tokenizer *tk, const struct gguf *g, char *err, size_t err_len) {
    static const char key[] = "tokenizer.ggml.token_type";
    tk->attr = calloc((size_t)tk->n_vocab, 1);
    if (!tk->attr) {
        err_set(err, err_len, "tokenizer_new: out of memory for '%s'", key);
        return -1;
    }
    if (!gguf_find_kv(g, key)) {
        memset(tk->attr, TOK_ATTR_NORMAL, (size_t)tk->n_vocab);
        return 0;
    }
    uint64_t n;
    const unsigned char *types = gguf_get_arr(g, key, GGUF_VTYPE_INT32, &n);
    if (!types || n < (uint64_t)tk->n_vocab) {
        err_set(err, err_len, "tokenizer_new: bad key '%s' (want INT32[n_tokens])", key);
        return -1;
    }
    for (int32_t i = 0; i < tk->n_vocab; i++) {
        int32_t t;
        memcpy(&t, types + 4 * (size_t)i, sizeof(t)); /* packed little-endian */
        tk->attr[i] = t >= 1 && t <= 6 ? (uint8_t)(1u << (t - 1)) : 0;
    }
    return 0;
}

/* An optional special id: -1 when absent or out of range (with a warning). */
static int32_t load_special_id(const struct tokenizer *tk, const struct gguf *g, const char *key) {
    uint32_t id;
    if (gguf_get_u32(g, key, &id) < 0)
        return -1;
    if (id >= (uint32_t)tk->n_vocab) {
        fprintf(stderr, "load_special_id: id %u out of range, ignoring '%s'\n", id, key);
        return -1;
    }
    return (int32_t)id;
}

static int32_t vocab_lookup_str(const struct tokenizer *tk, const char *s) {
    return vocab_lookup(tk, s, strlen(s));
}

/* o200k_harmony, as llama.cpp loads it: the message markers become user-defined, and when
 * <|return|> and <|call|> both exist, <|end|> is no end of generation and user-defined too. */
static void load_harmony(struct tokenizer *tk) {
    for (size_t i = 0; i < sizeof(harmony_markers) / sizeof(harmony_markers[0]); i++) {
        int32_t id = vocab_lookup_str(tk, harmony_markers[i]);
        if (id >= 0)
            tk->attr[id] = TOK_ATTR_USER_DEFINED;
    }
    int32_t end = vocab_lookup_str(tk, "<|end|>");
    if (end >= 0 && vocab_lookup_str(tk, "<|return|>") >= 0 &&
        vocab_lookup_str(tk, "<|call|>") >= 0)
        tk->attr[end] = TOK_ATTR_USER_DEFINED;
}

/* Special ids, add_bos and the end-of-generation set; EOG texts that the GGUF did not type as
 * control become control (llama.cpp does the same, which lets them be parsed as specials). */
static void load_specials(struct tokenizer *tk, const struct gguf *g) {
    tk->bos = load_special_id(tk, g, "tokenizer.ggml.bos_token_id");
    tk->eos = load_special_id(tk, g, "tokenizer.ggml.eos_token_id");
    tk->eot = load_special_id(tk, g, "tokenizer.ggml.eot_token_id");
    if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &tk->add_bos) < 0)
        tk->add_bos = false;
    for (size_t i = 0; i < sizeof(eog_texts) / sizeof(eog_texts[0]); i++) {
        int32_t id = vocab_lookup(tk, eog_texts[i], strlen(eog_texts[i]));
        if (id < 0)
            continue;
        tk->attr[id] |= TOK_ATTR_EOG | TOK_ATTR_CONTROL;
    }
    if (tk->eos >= 0)
        tk->attr[tk->eos] |= TOK_ATTR_EOG;
    if (tk->eot >= 0)
        tk->attr[tk->eot] |= TOK_ATTR_EOG;
    load_harmony(tk);
}

/* Fills the merge table from "left right" strings (split at the first space after the first
 * byte, as llama.cpp does). Pairs whose parts or result are not tokens can never apply to
 * symbols that are tokens, so they are skipped with one warning. Returns 0 or -1 with err set. */
static int load_merges(struct tokenizer *tk, const struct gguf *g, char *err, size_t err_len) {
    static const char key[] = "tokenizer.ggml.merges";
    uint64_t n;
    const struct gguf_str *strs = gguf_get_arr(g, key, GGUF_VTYPE_STRING, &n);
    char *buf = NULL;
    int ret = -1;
    if (!strs || n > INT32_MAX) {
        err_set(err, err_len, "tokenizer_new: missing or bad key '%s'", key);
        goto out;
    }
    tk->merge_mask = table_size(n) - 1;
    tk->merge_slot = malloc((tk->merge_mask + 1) * sizeof(*tk->merge_slot));
    size_t max_len = 0;
    for (uint64_t i = 0; i < n; i++)
        max_len = strs[i].len > max_len ? strs[i].len : max_len;
    buf = malloc(max_len + 1);
    if (!tk->merge_slot || !buf) {
        err_set(err, err_len, "tokenizer_new: out of memory for '%s'", key);
        goto out;
    }
    for (uint64_t i = 0; i <= tk->merge_mask; i++)
        tk->merge_slot[i] = (struct merge_slot){MERGE_EMPTY, 0, 0};
    uint64_t n_skipped = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = strs[i].data;
        size_t len = strs[i].len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            n_skipped++;
            continue;
        }
        size_t left_len = (size_t)(sp - s), right_len = len - left_len - 1;
        int32_t left = vocab_lookup(tk, s, left_len);
        int32_t right = vocab_lookup(tk, sp + 1, right_len);
        memcpy(buf, s, left_len);
        memcpy(buf + left_len, sp + 1, right_len);
        int32_t result = vocab_lookup(tk, buf, left_len + right_len);
        if (left < 0 || right < 0 || result < 0) {
            n_skipped++;
            continue;
        }
        merge_insert(tk, left, right, (int32_t)i, result);
    }
    if (n_skipped)
        fprintf(stderr, "load_merges: skipped %llu merges that do not join tokens in '%s'\n",
                (unsigned long long)n_skipped, key);
    ret = 0;
out:
    free(buf);
    return ret;
}

/* The token of each byte's alphabet character, or (spm) of its "<0xXX>" byte token; -1 when the
 * vocabulary lacks it. */
static void load_byte_ids(struct tokenizer *tk) {
    for (int b = 0; b < 256; b++) {
        char s[8];
        size_t n = tk->spm ? (size_t)snprintf(s, sizeof(s), "<0x%02X>", b)
                           : utf8_put(s, tk->byte_cpt[b]);
        tk->byte_id[b] = vocab_lookup(tk, s, n);
    }
}

/* Decodes one UTF-8 character of s[0..n) into *cpt; returns its length, or 0 when malformed. */
static size_t utf8_get(const unsigned char *s, size_t n, uint32_t *cpt) {
    size_t len = s[0] < 0x80 ? 1 : s[0] < 0xc0 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
    if (len == 0 || len > n)
        return 0;
    uint32_t c = len == 1 ? s[0] : s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    *cpt = c;
    return len;
}

static const char SPM_SPACE[] = "\xe2\x96\x81"; /* U+2581, the SPM vocabularies' space */

/* piece_build of an SPM-style vocabulary: a byte token "<0xXX>" is that byte, other texts have
 * each U+2581 written as a space. Returns the length (never more than the text's). */
static size_t piece_build_spm(const struct tokenizer *tk, int32_t id, char *dst) {
    const char *s = tk->text + tk->text_off[id];
    size_t n = tk->text_len[id], out = 0;
    unsigned int byte;
    if ((tk->attr[id] & TOK_ATTR_BYTE) && n == 6 && sscanf(s, "<0x%2X>", &byte) == 1) {
        dst[0] = (char)byte;
        return 1;
    }
    for (size_t i = 0; i < n;) {
        bool space = n - i >= 3 && memcmp(s + i, SPM_SPACE, 3) == 0;
        dst[out++] = space ? ' ' : s[i];
        i += space ? 3 : 1;
    }
    return out;
}

/* Writes the bytes token id stands for into dst (room for text_len bytes: never longer): special
 * tokens verbatim, others with each alphabet character mapped back to its byte (characters
 * outside the alphabet are kept as they are). Returns the length. */
static size_t piece_build(const struct tokenizer *tk, int32_t id, char *dst) {
    const unsigned char *s = (const unsigned char *)tk->text + tk->text_off[id];
    size_t n = tk->text_len[id];
    if (tk->attr[id] & TOK_ATTR_SPECIAL) {
        memcpy(dst, s, n);
        return n;
    }
    if (tk->spm)
        return piece_build_spm(tk, id, dst);
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cpt = 0;
        size_t len = utf8_get(s + i, n - i, &cpt);
        if (len > 0 && cpt < N_ALPHABET && tk->cpt_byte[cpt] >= 0) {
            dst[out++] = (char)tk->cpt_byte[cpt];
        } else {
            len = len ? len : 1;
            memcpy(dst + out, s + i, len);
            out += len;
        }
        i += len;
    }
    return out;
}

static int load_pieces(struct tokenizer *tk) {
    size_t n = (size_t)tk->n_vocab;
    tk->piece = malloc(tk->text_off[n - 1] + tk->text_len[n - 1] + 1);
    tk->piece_off = calloc(n, sizeof(*tk->piece_off));
    tk->piece_len = calloc(n, sizeof(*tk->piece_len));
    if (!tk->piece || !tk->piece_off || !tk->piece_len)
        return -1;
    uint32_t off = 0;
    for (size_t i = 0; i < n; i++) {
        tk->piece_off[i] = off;
        tk->piece_len[i] = (uint32_t)piece_build(tk, (int32_t)i, tk->piece + off);
        off += tk->piece_len[i];
    }
    return 0;
}

struct special_entry {
    uint32_t len;
    int32_t id;
};

static int special_cmp(const void *a, const void *b) {
    const struct special_entry *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The ids split out before BPE, longest text first (ties by id). */
static int load_special_list(struct tokenizer *tk) {
    size_t n = 0;
    for (int32_t i = 0; i < tk->n_vocab; i++)
        n += (tk->attr[i] & TOK_ATTR_SPECIAL) != 0;
    struct special_entry *e = calloc(n ? n : 1, sizeof(*e));
    tk->special = calloc(n ? n : 1, sizeof(*tk->special));
    if (!e || !tk->special) {
        free(e);
        return -1;
    }
    size_t k = 0;
    for (int32_t i = 0; i < tk->n_vocab; i++)
        if (tk->attr[i] & TOK_ATTR_SPECIAL)
            e[k++] = (struct special_entry){tk->text_len[i], i};
    qsort(e, n, sizeof(*e), special_cmp);
    for (size_t i = 0; i < n; i++)
        tk->special[i] = e[i].id;
    tk->n_special = n;
    free(e);
    return 0;
}

/* Compiles the regex that tokenizer.ggml.pre names (gpt-2's, with a warning, when unknown). */
static int load_pre(struct tokenizer *tk, const struct gguf *g, char *err, size_t err_len) {
    const char *pre = gguf_get_str(g, "tokenizer.ggml.pre");
    const struct pre_spec *spec = NULL;
    if (tk->spm)
        return 0; /* split at newline runs only (encode_spm) */
    for (size_t i = 0; pre && i < sizeof(pre_specs) / sizeof(pre_specs[0]); i++)
        if (strcmp(pre, pre_specs[i].name) == 0)
            spec = &pre_specs[i];
    if (!spec) {
        fprintf(stderr, "load_pre: unknown pre-tokenizer '%s', using gpt-2's\n",
                pre ? pre : "(none)");
        spec = &pre_specs[0];
    }
    tk->ignore_merges = spec->ignore_merges;
    int errcode;
    PCRE2_SIZE erroff;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    tk->re = pcre2_compile((PCRE2_SPTR)spec->pattern, PCRE2_ZERO_TERMINATED, opts, &errcode,
                           &erroff, NULL);
    if (!tk->re) {
        err_set(err, err_len, "tokenizer_new: cannot compile the regex of '%s'", spec->name);
        return -1;
    }
    pcre2_jit_compile(tk->re, PCRE2_JIT_COMPLETE); /* failure leaves the interpreter: fine */
    return 0;
}

/* Returns a tokenizer owning copies of everything it needs from g (g may be freed), or NULL with
 * err naming the missing or bad key. Free with tokenizer_free. */
struct tokenizer *tokenizer_new(const struct gguf *g, char *err, size_t err_len) {
    struct tokenizer *tk = calloc(1, sizeof(*tk));
    if (!tk) {
        err_set(err, err_len, "tokenizer_new: out of memory");
        goto fail;
    }
    const char *model = gguf_get_str(g, "tokenizer.ggml.model");
    const char *pre = gguf_get_str(g, "tokenizer.ggml.pre");
    if (!model || (strcmp(model, "gpt2") != 0 && strcmp(model, "gemma4") != 0)) {
        err_set(err, err_len, "tokenizer_new: unsupported 'tokenizer.ggml.model' '%s'",
                model ? model : "(missing)");
        goto fail;
    }
    /* llama.cpp: model gemma4 implies pre gemma4; pre gemma4 makes any BPE vocabulary SPM-style */
    tk->spm = strcmp(model, "gemma4") == 0 || (pre && strcmp(pre, "gemma4") == 0);
    alphabet_init(tk);
    if (load_tokens(tk, g, err, err_len) < 0 || load_types(tk, g, err, err_len) < 0)
        goto fail;
    load_specials(tk, g);
    if (tk->spm)
        tk->add_bos = true; /* as llama.cpp overrides it for Gemma 4 */
    if (load_merges(tk, g, err, err_len) < 0)
        goto fail;
    load_byte_ids(tk);
    if (load_pieces(tk) < 0 || load_special_list(tk) < 0) {
        err_set(err, err_len, "tokenizer_new: out of memory");
        goto fail;
    }
    if (load_pre(tk, g, err, err_len) < 0)
        goto fail;
    return tk;
fail:
    tokenizer_free(tk);
    return NULL;
}

/* Frees tk and all it owns. Accepts NULL (and a half-built tokenizer). */
void tokenizer_free(struct tokenizer *tk) {
    if (!tk)
        return;
    pcre2_code_free(tk->re);
    free(tk->special);
    free(tk->piece_len);
    free(tk->piece_off);
    free(tk->piece);
    free(tk->merge_slot);
    free(tk->vocab_slot);
    free(tk->attr);
    free(tk->text_len);
    free(tk->text_off);
    free(tk->text);
    free(tk);
}

/* ---------------------------------------------------------------------------------------------
 * Encoding. */

/* A piece of the text: raw text (id -1) or a special token found in it. */
struct frag {
    size_t off, len;
    int32_t id;
};

/* One BPE symbol of a pre-token: a token id (or -1) linked to its live neighbours, and the bytes
 * of the pre-token it covers (what a symbol that is no token falls back to). */
struct bpe_sym {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
    uint32_t off, len;  /* bytes of the pre-token */
    bool alive;
};

/* A candidate merge of the adjacent symbols left and right while they hold left_id and right_id;
 * lower rank, then lower left, first. */
struct bpe_pair {
    int32_t rank;
    int32_t left, right;
    int32_t left_id, right_id;
    int32_t result;
};

/* Scratch of one tokenizer_encode() call, grown to the longest pre-token. */
struct encoder {
    const struct tokenizer *tk;
    pcre2_match_data *md;
    struct bpe_sym *sym;   /* [cap] */
    struct bpe_pair *heap; /* [3 * cap]: n - 1 pairs at the start, at most 2 more per merge */
    char *enc;             /* [2 * cap]: a pre-token in the byte alphabet (ignore_merges) */
    size_t cap, n_heap;
    char *esc;             /* spm: a raw fragment with spaces as U+2581, invalid UTF-8 as U+FFFD */
    int32_t *out; /* ids written so far: never more than the bytes consumed */
    size_t n_out;
};

static int encoder_reserve(struct encoder *e, size_t n) {
    if (n <= e->cap)
        return 0;
    size_t cap = e->cap ? e->cap : 64;
    while (cap < n)
        cap *= 2;
    struct bpe_sym *sym = realloc(e->sym, cap * sizeof(*sym));
    if (sym)
        e->sym = sym;
    struct bpe_pair *heap = realloc(e->heap, 3 * cap * sizeof(*heap));
    if (heap)
        e->heap = heap;
    char *enc = realloc(e->enc, 2 * cap);
    if (enc)
        e->enc = enc;
    if (!sym || !heap || !enc)
        return -1;
    e->cap = cap;
    return 0;
}

static bool pair_less(const struct bpe_pair *a, const struct bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(struct encoder *e, struct bpe_pair p) {
    size_t i = e->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_less(&p, &e->heap[parent]))
            break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = p;
}

static struct bpe_pair heap_pop(struct encoder *e) {
    struct bpe_pair top = e->heap[0], last = e->heap[--e->n_heap];
    size_t i = 0, n = e->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && pair_less(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!pair_less(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n > 0)
        e->heap[i] = last;
    return top;
}

static void bpe_try_pair(struct encoder *e, int32_t left, int32_t right) {
    if (left < 0 || right < 0 || e->sym[left].id < 0 || e->sym[right].id < 0)
        return;
    int32_t left_id = e->sym[left].id, right_id = e->sym[right].id;
    const struct merge_slot *m = merge_lookup(e->tk, left_id, right_id);
    if (m)
        heap_push(e, (struct bpe_pair){m->rank, left, right, left_id, right_id, m->result});
}

/* Whole-token shortcut of ignore_merges: true when the pre-token is itself a token (emitted). */
static bool bpe_whole_word(struct encoder *e, const unsigned char *w, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += utf8_put(e->enc + len, e->tk->byte_cpt[w[i]]);
    int32_t id = vocab_lookup(e->tk, e->enc, len);
    if (id >= 0)
        e->out[e->n_out++] = id;
    return id >= 0;
}

/* Merges the n symbols in e->sym, the lowest-ranked adjacent pair first, until none is left, then
 * writes the ids out; a symbol that is no token becomes the byte_id of each of its bytes of w
 * where there is one (the <0xXX> tokens of an spm vocabulary; in a byte-level one no such byte
 * has a token: llama.cpp's byte fallback finds none, and the symbol is dropped). */
static void bpe_merge_emit(struct encoder *e, const unsigned char *w, size_t n) {
    e->n_heap = 0;
    for (size_t i = 1; i < n; i++)
        bpe_try_pair(e, (int32_t)i - 1, (int32_t)i);
    while (e->n_heap > 0) {
        struct bpe_pair p = heap_pop(e);
        struct bpe_sym *l = &e->sym[p.left], *r = &e->sym[p.right];
        if (!l->alive || !r->alive || l->id != p.left_id || r->id != p.right_id)
            continue; /* stale: a side was merged away, or grew, since the pair was queued */
        l->id = p.result;
        l->len += r->len;
        r->alive = false;
        l->next = r->next;
        if (r->next >= 0)
            e->sym[r->next].prev = p.left;
        bpe_try_pair(e, l->prev, p.left);
        bpe_try_pair(e, p.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = e->sym[i].next) {
        const struct bpe_sym *sy = &e->sym[i];
        if (sy->id >= 0) {
            e->out[e->n_out++] = sy->id;
            continue;
        }
        for (uint32_t k = sy->off; k < sy->off + sy->len; k++)
            if (e->tk->byte_id[w[k]] >= 0)
                e->out[e->n_out++] = e->tk->byte_id[w[k]];
    }
}

/* BPE of one pre-token of a byte-level vocabulary: one symbol per byte, then merges. */
static int bpe_word(struct encoder *e, const unsigned char *w, size_t n) {
    if (n == 0)
        return 0;
    if (encoder_reserve(e, n) < 0)
        return -1;
    if (e->tk->ignore_merges && bpe_whole_word(e, w, n))
        return 0;
    for (size_t i = 0; i < n; i++)
        e->sym[i] = (struct bpe_sym){e->tk->byte_id[w[i]], (int32_t)i - 1,
                                     i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)i, 1, true};
    bpe_merge_emit(e, w, n);
    return 0;
}

/* The length of the UTF-8 character at s[0] by its first byte alone, as llama.cpp's
 * unicode_len_utf8 (no check of what follows), cut to the n bytes left. */
static size_t utf8_lead_len(unsigned char c, size_t n) {
    size_t len = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    return len < n ? len : n;
}

/* BPE of one pre-token of an spm vocabulary: one symbol per UTF-8 character, then merges. A
 * pre-token of newlines only that is itself a token is that token (llama.cpp's Gemma 4 rule). */
static int spm_word(struct encoder *e, const unsigned char *w, size_t n) {
    if (n == 0)
        return 0;
    if (encoder_reserve(e, n) < 0)
        return -1;
    if (w[0] == '\n') {
        int32_t id = vocab_lookup(e->tk, (const char *)w, n);
        if (id >= 0) {
            e->out[e->n_out++] = id;
            return 0;
        }
    }
    size_t n_sym = 0;
    for (size_t i = 0; i < n; n_sym++) {
        size_t len = utf8_lead_len(w[i], n - i);
        e->sym[n_sym] = (struct bpe_sym){vocab_lookup(e->tk, (const char *)w + i, len),
                                         (int32_t)n_sym - 1, i + len < n ? (int32_t)n_sym + 1 : -1,
                                         (uint32_t)i, (uint32_t)len, true};
        i += len;
    }
    bpe_merge_emit(e, w, n_sym);
    return 0;
}

/* Decodes the character at s[0..n) as llama.cpp's unicode_cpt_from_utf8 does (the bit pattern
 * only: overlong forms and surrogates pass); returns its length, or 0 when malformed. */
static size_t utf8_get_loose(const unsigned char *s, size_t n, uint32_t *cpt) {
    if (s[0] >= 0xf8)
        return 0;
    return utf8_get(s, n, cpt);
}

/* Writes s[0..n) into dst as llama.cpp hands an spm fragment to BPE: every space as U+2581 and
 * every character decoded and encoded again (a malformed byte becomes U+FFFD). dst has room for
 * 3 * n bytes. Returns the length written. */
static size_t spm_escape(const unsigned char *s, size_t n, char *dst) {
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cpt = 0;
        size_t len = utf8_get_loose(s + i, n - i, &cpt);
        if (len == 0)
            cpt = 0xfffd, len = 1;
        if (cpt == ' ') {
            memcpy(dst + out, SPM_SPACE, 3);
            out += 3;
        } else {
            out += utf8_put(dst + out, cpt);
        }
        i += len;
    }
    return out;
}

/* An spm fragment: escaped, split into runs of newlines and runs of anything else (llama.cpp's
 * "[^\n]+|[\n]+"), each run BPE'd. */
static int encode_spm(struct encoder *e, const char *s, size_t n) {
    size_t m = spm_escape((const unsigned char *)s, n, e->esc);
    const unsigned char *u = (const unsigned char *)e->esc;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        bool nl = u[i] == '\n';
        while (j < m && (u[j] == '\n') == nl)
            j++;
        if (spm_word(e, u + i, j - i) < 0)
            return -1;
        i = j;
    }
    return 0;
}

/* Splits raw text into pre-tokens with the regex and BPEs each; text between matches (only
 * invalid UTF-8, which no branch matches) is a pre-token of its own. */
static int encode_raw(struct encoder *e, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t pos = 0;
    while (pos < n) {
        int rc = pcre2_match(e->tk->re, (PCRE2_SPTR)s, n, pos, 0, e->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            fprintf(stderr, "encode_raw: pcre2 error %d, one pre-token for the rest\n", rc);
            break;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        if (ov[1] <= ov[0] || ov[0] < pos)
            break; /* no branch matches empty: defensive */
        if (bpe_word(e, u + pos, ov[0] - pos) < 0 || bpe_word(e, u + ov[0], ov[1] - ov[0]) < 0)
            return -1;
        pos = ov[1];
    }
    return bpe_word(e, u + pos, n - pos);
}

/* Cuts special tokens out of text[0..len), longest first, as llama.cpp's
 * tokenizer_st_partition: every occurrence of a longer token wins over shorter ones. Without
 * parse_special only user-defined tokens are cut. Fills frag[] (room for max(len, 1) entries:
 * every fragment is non-empty) and returns the count. */
static size_t split_special(const struct tokenizer *tk, const char *text, size_t len,
                            bool parse_special, struct frag *a, struct frag *b) {
    size_t n = 0;
    if (len > 0)
        a[n++] = (struct frag){0, len, -1};
    for (size_t k = 0; k < tk->n_special; k++) {
        int32_t id = tk->special[k];
        if (!parse_special && (tk->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)))
            continue;
        const char *st = tk->text + tk->text_off[id];
        size_t slen = tk->text_len[id], m = 0;
        for (size_t i = 0; i < n; i++) {
            if (a[i].id >= 0 || a[i].len < slen) {
                b[m++] = a[i];
                continue;
            }
            size_t off = a[i].off, end = a[i].off + a[i].len;
            const char *p;
            while (end - off >= slen && (p = memmem(text + off, end - off, st, slen))) {
                size_t at = (size_t)(p - text);
                if (at > off)
                    b[m++] = (struct frag){off, at - off, -1};
                b[m++] = (struct frag){at, slen, id};
                off = at + slen;
            }
            if (off < end)
                b[m++] = (struct frag){off, end - off, -1};
        }
        memcpy(a, b, m * sizeof(*a));
        n = m;
    }
    return n;
}

/* Returns a malloc'd array of *n_out ids (at most max(len, 1) of them: every id consumes at least
 * one byte; 3 times that in an spm vocabulary, whose byte fallback spells a space's U+2581 in
 * three), or NULL when out of memory. text is borrowed for the call; tk is only read, so
 * threads may share it. */
int32_t *tokenizer_encode(const struct tokenizer *tk, const char *text, size_t len,
                          bool parse_special, size_t *n_out) {
    size_t cap = len ? len : 1, cap_out = tk->spm ? 3 * cap : cap;
    struct encoder e = {.tk = tk};
    struct frag *a = malloc(cap * sizeof(*a)), *b = malloc(cap * sizeof(*b));
    int32_t *ret = NULL;
    e.out = malloc(cap_out * sizeof(*e.out));
    e.md = pcre2_match_data_create(1, NULL);
    e.esc = tk->spm ? malloc(3 * cap) : NULL;
    if (!a || !b || !e.out || !e.md || (tk->spm && !e.esc))
        goto out;
    size_t n = split_special(tk, text, len, parse_special, a, b);
    for (size_t i = 0; i < n; i++) {
        int rc = 0;
        if (a[i].id >= 0)
            e.out[e.n_out++] = a[i].id;
        else if (tk->spm)
            rc = encode_spm(&e, text + a[i].off, a[i].len);
        else
            rc = encode_raw(&e, text + a[i].off, a[i].len);
        if (rc < 0)
            goto out;
    }
    ret = e.out;
    e.out = NULL;
    *n_out = e.n_out;
out:
    pcre2_match_data_free(e.md);
    free(e.esc);
    free(e.out);
    free(e.enc);
    free(e.heap);
    free(e.sym);
    free(b);
    free(a);
    return ret;
}

/* ---------------------------------------------------------------------------------------------
 * Queries (contracts in tokenizer.h): constant time, tk only read. */

int32_t tokenizer_n_vocab(const struct tokenizer *tk) {
    return tk->n_vocab;
}

int32_t tokenizer_bos(const struct tokenizer *tk) {
    return tk->bos;
}

int32_t tokenizer_eos(const struct tokenizer *tk) {
    return tk->eos;
}

bool tokenizer_add_bos(const struct tokenizer *tk) {
    return tk->add_bos;
}

bool tokenizer_is_eog(const struct tokenizer *tk, int32_t id) {
    return id >= 0 && id < tk->n_vocab && (tk->attr[id] & TOK_ATTR_EOG);
}

bool tokenizer_is_special(const struct tokenizer *tk, int32_t id) {
    return id >= 0 && id < tk->n_vocab && (tk->attr[id] & (TOK_ATTR_SPECIAL | TOK_ATTR_EOG));
}

/* The id whose text (in the GGUF's spelling, e.g. "\xc4\xa0the") is s, or -1. */
int32_t tokenizer_find(const struct tokenizer *tk, const char *s) {
    return vocab_lookup(tk, s, strlen(s));
}

/* The token's bytes, borrowed from tk until tokenizer_free; NULL and *len 0 out of range. */
const char *tokenizer_piece(const struct tokenizer *tk, int32_t id, size_t *len) {
    if (id < 0 || id >= tk->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = tk->piece_len[id];
    return tk->piece + tk->piece_off[id];
}

/* ---------------------------------------------------------------------------------------------
 * Streaming decode: bytes go through a one-character buffer (st->pending) that is written out
 * when it holds a whole valid character and replaced by U+FFFD once it can no longer become one
 * (one U+FFFD per maximal invalid subpart, as the Unicode standard recommends). */

static const char REPLACEMENT[3] = {(char)0xef, (char)0xbf, (char)0xbd};

/* The state of s[0..n): > 0 a whole character of that length, 0 a valid unfinished prefix,
 * -k when the first k bytes can never start a character (a maximal invalid subpart). */
static int utf8_state(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    int len;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c < 0x80)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return -1;
    len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n)
            return 0;
        bool ok = i == 1 ? s[i] >= lo && s[i] <= hi : (s[i] & 0xc0) == 0x80;
        if (!ok)
            return -i;
    }
    return len;
}

/* Appends n bytes to out[*n_out..cap) unless they do not fit, which stops all later writes. */
static void emit(char *out, size_t cap, size_t *n_out, bool *full, const void *src, size_t n) {
    if (*full || *n_out + n > cap) {
        *full = true;
        return;
    }
    memcpy(out + *n_out, src, n);
    *n_out += n;
}

/* Feeds one byte to the stream, writing every character it completes or invalidates. */
static void stream_feed(struct tokenizer_stream *st, unsigned char byte, char *out, size_t cap,
                        size_t *n_out, bool *full) {
    st->pending[st->n_pending++] = byte;
    while (st->n_pending > 0) {
        int state = utf8_state(st->pending, st->n_pending);
        if (state == 0)
            return;
        size_t used = (size_t)(state > 0 ? state : -state);
        if (state > 0)
            emit(out, cap, n_out, full, st->pending, used);
        else
            emit(out, cap, n_out, full, REPLACEMENT, sizeof(REPLACEMENT));
        memmove(st->pending, st->pending + used, st->n_pending - used);
        st->n_pending -= used;
    }
}

/* Writes at most cap bytes of whole characters; what does not fit is dropped, not held. An id out
 * of range writes nothing. Returns the bytes written. */
size_t tokenizer_decode_stream(const struct tokenizer *tk, struct tokenizer_stream *st, int32_t id,
                               char *out, size_t cap) {
    size_t len, n_out = 0;
    bool full = false;
    const char *piece = tokenizer_piece(tk, id, &len);
    if (st->n_pending >= sizeof(st->pending))
        st->n_pending = 0; /* a corrupted state: never index past pending[] */
    for (size_t i = 0; i < len; i++)
        stream_feed(st, (unsigned char)piece[i], out, cap, &n_out, &full);
    return n_out;
}

/* Writes one U+FFFD when a character was held back (nothing when cap < 3) and empties st. */
size_t tokenizer_stream_flush(struct tokenizer_stream *st, char *out, size_t cap) {
    size_t n_out = 0;
    bool full = false;
    if (st->n_pending > 0)
        emit(out, cap, &n_out, &full, REPLACEMENT, sizeof(REPLACEMENT));
    st->n_pending = 0;
    return n_out;
}
