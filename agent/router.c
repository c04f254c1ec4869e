/* router.c - see router.h. */
#include "router.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char ROUTER_PROMPT[] =
    "You route requests for a command-line assistant. Answer with exactly one word:\n"
    "search - the request needs current or factual information from the web (news, weather, "
    "prices, recent events, documentation lookups);\n"
    "shell - the request is about this computer: files, directories, processes, disk, system "
    "state, or asks to run a command;\n"
    "chat - anything else (explanations, writing, code, conversation).\n"
    "Answer with the one word only.";

const char *router_prompt(void) {
    return ROUTER_PROMPT;
}

enum route route_parse(const char *reply) {
    char word[16];
    size_t n = 0;
    if (!reply)
        return ROUTE_CHAT;
    const char *p = reply;
    while (*p && !isalpha((unsigned char)*p))
        p++;
    while (*p && isalpha((unsigned char)*p) && n < sizeof(word) - 1)
        word[n++] = (char)tolower((unsigned char)*p++);
    word[n] = '\0';
    if (isalpha((unsigned char)*p))
        return ROUTE_CHAT;    /* a longer word that merely starts like one of ours */
    if (strcmp(word, "search") == 0)
        return ROUTE_SEARCH;
    if (strcmp(word, "shell") == 0)
        return ROUTE_SHELL;
    return ROUTE_CHAT;
}

const char *route_name(enum route r) {
    switch (r) {
    case ROUTE_SEARCH: return "search";
    case ROUTE_SHELL: return "shell";
    case ROUTE_CHAT: break;
    }
    return "chat";
}

int router_classify(struct llm *l, const char *request, enum route *out, struct llm_stats *st,
                    char *err, size_t err_len) {
    json_t *messages = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content",
                                 ROUTER_PROMPT, "role", "user", "content", request);
    struct llm_opts o = { .temperature = 0, .max_tokens = 4, .stream = false };
    char *reply = NULL;
    int rc = messages ? llm_chat(l, messages, &o, NULL, NULL, &reply, st, err, err_len)
                      : -ENOMEM;
    *out = rc == 0 ? route_parse(reply) : ROUTE_CHAT;
    free(reply);
    json_decref(messages);
    return rc;
}
