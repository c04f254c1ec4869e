/* api_responses.h - OpenAI's Responses API (what Codex CLI speaks): POST /v1/responses, GET and
 * DELETE /v1/responses/{id}, as a conversion into the daemon's one request shape and back
 * (api_responses.c). */
#ifndef SNIPER_API_RESPONSES_H
#define SNIPER_API_RESPONSES_H

#include <stdbool.h>

#include "api.h"
#include "server.h"

/* True when path is /v1/responses or below it (the routes of this file). */
bool api_responses_path(const char *path);

/* Answers a request whose path api_responses_path accepts (the caller has checked the key, that
 * the model is ready and that the daemon is not draining): fills out, errors in OpenAI's shape. */
void api_responses_route(struct api *a, const struct http_request *rq, struct http_response *out);

#endif
