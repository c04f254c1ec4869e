/* router.h - which path a request takes: one short temperature-0 request asks the model for one
 * word (search, shell or chat). Plain text rather than JSON tool calls because a heavily quantised
 * model still manages one word; anything else it says falls back to chat.
 *
 *     enum route r;
 *     router_classify(&llm, "what's the weather in Paris", &r, err, sizeof(err));
 */
#ifndef SNIPER_AGENT_ROUTER_H
#define SNIPER_AGENT_ROUTER_H

#include "llm.h"

enum route { ROUTE_CHAT, ROUTE_SEARCH, ROUTE_SHELL };

/* The route a model's reply names: its first word, case and punctuation ignored ("Shell." is
 * shell); ROUTE_CHAT for anything else, NULL included. */
enum route route_parse(const char *reply);

/* "chat", "search" or "shell". Static. */
const char *route_name(enum route r);

/* The system prompt of the routing request. Static. */
const char *router_prompt(void);

/* Asks the model; st (may be NULL) gets the request's numbers. Returns 0 with *out set, or the
 * llm_chat() error with err filled (the caller decides whether to fall back). */
int router_classify(struct llm *l, const char *request, enum route *out, struct llm_stats *st,
                    char *err, size_t err_len);

#endif
