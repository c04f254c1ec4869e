/* api_messages.h - Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens):
 * what Claude Code and the @anthropic-ai/sdk clients speak, as a conversion into the daemon's one
 * request shape (struct oai_request, api_prompt_ids, the scheduler's jobs) and back into
 * Anthropic's bodies, events and errors. api.c routes here; the scheduler never learns which API
 * a request came in by. */
#ifndef SNIPER_API_MESSAGES_H
#define SNIPER_API_MESSAGES_H

#include <stdbool.h>

#include "server.h"

struct api;

/* True when path is one of this file's routes (whatever the method). */
bool api_messages_path(const char *path);

/* True when the daemon has no key, or rq carries it in Authorization: Bearer or in x-api-key
 * (Anthropic's clients send either), compared in constant time. */
bool api_messages_key_ok(const struct api *a, const struct http_request *rq);

/* Answers one request to such a path in Anthropic's shapes: checks the method, the key
 * (Authorization: Bearer or x-api-key), readiness, then parses, runs and replies (a whole body or
 * an SSE stream). a and rq are borrowed for the call; out is filled. */
void api_messages_handle(struct api *a, const struct http_request *rq, struct http_response *out);

#endif
