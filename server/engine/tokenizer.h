/* tokenizer.h - BPE tokenizer built from a GGUF's tokenizer.ggml.* keys: byte-level (model "gpt2")
 * with the pre-tokenizer regexes of tokenizer.ggml.pre ("qwen2", "llama-bpe", "gpt-4o", ...) run by
 * pcre2, or SPM-style (model or pre "gemma4": spaces as U+2581, <0xXX> byte fallback); special/
 * control tokens matched before BPE, and a decoder that only emits whole UTF-8 characters.
 *
 *     struct tokenizer *tk = tokenizer_new(g, err, sizeof(err));
 *     size_t n;
 *     int32_t *ids = tokenizer_encode(tk, "Hello world", 11, true, &n);  // caller frees ids
 *     struct tokenizer_stream st = {0};
 *     char out[64];
 *     size_t len = tokenizer_decode_stream(tk, &st, ids[0], out, sizeof(out));
 *
 * Matches llama.cpp's tokenization bit for bit on its test vectors (tests/test_tokenizer.c). */
#ifndef SNIPER_TOKENIZER_H
#define SNIPER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct tokenizer;

/* Builds the tokenizer from g's metadata (copies what it needs: g may be freed after). Returns it or
 * NULL with a message in err naming the missing or bad key. */
struct tokenizer *tokenizer_new(const struct gguf *g, char *err, size_t err_len);

void tokenizer_free(struct tokenizer *tk);

/* Tokenizes len bytes of text (need not be NUL-terminated). With parse_special, special and control
 * tokens written in the text (e.g. "<|im_start|>") become their ids; otherwise they are plain text.
 * Adds no BOS (the caller asks tokenizer_add_bos()). Returns a malloc'd array of *n_out ids (the
 * caller frees it; an empty text gives a valid 1-element allocation and *n_out 0), or NULL on
 * allocation failure. Invalid UTF-8 is tokenized byte by byte, never rejected. */
int32_t *tokenizer_encode(const struct tokenizer *tk, const char *text, size_t len,
                          bool parse_special, size_t *n_out);

int32_t tokenizer_n_vocab(const struct tokenizer *tk);

/* Special ids from the GGUF (tokenizer.ggml.bos_token_id ...), -1 when absent. */
int32_t tokenizer_bos(const struct tokenizer *tk);
int32_t tokenizer_eos(const struct tokenizer *tk);

/* tokenizer.ggml.add_bos_token (false when absent; always true for gemma4, as llama.cpp has it). */
bool tokenizer_add_bos(const struct tokenizer *tk);

/* True for end-of-generation ids: eos, eot (tokenizer.ggml.eot_token_id) and, when present in the
 * vocabulary, "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|return|>",
 * "<|call|>", "<eos>", "<turn|>", "<|tool_response>" (Gemma 4's) and "<|end|>" (but not gpt-oss's: with <|return|> and <|call|> present, <|end|> only
 * ends a message and is a user-defined token, as are <|channel|>, <|message|>, <|start|> and
 * <|constrain|>, as llama.cpp loads o200k_harmony). */
bool tokenizer_is_eog(const struct tokenizer *tk, int32_t id);

/* True for special tokens (control, user-defined, unknown: <|im_start|>, <think> ...). */
bool tokenizer_is_special(const struct tokenizer *tk, int32_t id);

/* The id of the token whose text is exactly s, or -1. */
int32_t tokenizer_find(const struct tokenizer *tk, const char *s);

/* The bytes the token stands for (byte-level BPE mapping undone, or U+2581 as a space and <0xXX> as
 * its byte in an SPM-style vocabulary; special tokens as their text),
 * *len bytes, not NUL-terminated. NULL with *len 0 for an id out of range. Borrowed from tk. */
const char *tokenizer_piece(const struct tokenizer *tk, int32_t id, size_t *len);

/* Streaming decoder state: bytes of an unfinished UTF-8 character held back between calls. */
struct tokenizer_stream {
    unsigned char pending[8];
    size_t n_pending;
};

/* Appends token id's bytes to the stream and writes to out (capacity cap) the longest prefix made of
 * whole UTF-8 characters, holding back an unfinished trailing sequence. Bytes that can never form a
 * valid character are emitted as U+FFFD. Returns the number of bytes written (never more than cap;
 * a piece longer than cap is cut at a character boundary). */
size_t tokenizer_decode_stream(const struct tokenizer *tk, struct tokenizer_stream *st, int32_t id,
                               char *out, size_t cap);

/* Flushes what the stream holds back (as U+FFFD), returns bytes written. */
size_t tokenizer_stream_flush(struct tokenizer_stream *st, char *out, size_t cap);

#endif
