/* api_ollama.h - Ollama's API (what Open WebUI, Continue and many editors speak): /api/version,
 * /api/tags, /api/ps, /api/show, /api/chat and /api/generate (NDJSON streaming), as a conversion
 * into the daemon's one request shape and back (api_ollama.c). */
#ifndef SNIPER_API_OLLAMA_H
#define SNIPER_API_OLLAMA_H

#include <stdbool.h>

#include "api.h"
#include "server.h"

/* True when path is one of Ollama's (/api/...). */
bool api_ollama_path(const char *path);

/* Answers a request whose path api_ollama_path accepts (the caller has checked the key, that the
 * daemon is ready and not draining): fills out, errors in Ollama's shape {"error": "..."}. */
void api_ollama_route(struct api *a, const struct http_request *rq, struct http_response *out);

#endif
