/* api_tokenize.h - POST /tokenize and POST /detokenize in llama-server's shapes: a model's
 * tokenizer over HTTP (text to ids, with their pieces if asked; ids back to text). */
#ifndef SNIPER_API_TOKENIZE_H
#define SNIPER_API_TOKENIZE_H

#include <stdbool.h>

#include "server.h"

struct api;

/* True when path is /tokenize or /detokenize (whatever the method). */
bool api_tokenize_path(const char *path);

/* Answers one request to such a path (POST only; the key as for /v1/messages; errors in OpenAI's
 * shape, as llama-server's). a and rq are borrowed for the call; out is filled. */
void api_tokenize_handle(struct api *a, const struct http_request *rq, struct http_response *out);

#endif
