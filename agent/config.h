/* config.h - the agent's settings: built-in defaults, then ~/.config/sniper/agent.json (or
 * $SNIPER_CONFIG), then the environment, then the command line (main.c) - each layer overriding the
 * one before. Every string is owned by the struct and freed by config_release().
 *
 *     struct agent_config c;
 *     config_init(&c);
 *     if (config_load_file(&c, NULL, err, sizeof(err)) < 0 ||
 *         config_apply_env(&c, err, sizeof(err)) < 0) ...
 *     config_release(&c);
 */
#ifndef SNIPER_AGENT_CONFIG_H
#define SNIPER_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct agent_config {
    char *server;            /* base URL without /v1, e.g. "http://127.0.0.1:8000" */
    char *api_key;           /* NULL: no Authorization header */
    char *model;             /* NULL: the first model the server lists */
    char *system_prompt;     /* prepended to every chat request; never NULL */
    char *search_backend;    /* "duckduckgo" or "searxng" */
    char *search_url;        /* the backend's base URL */
    char *grades_path;       /* JSONL log of /good and /bad */
    char *history_path;      /* line-editing history; NULL: none */
    double timeout_s;        /* one whole HTTP request, seconds (0: none) */
    double connect_timeout_s;
    double shell_timeout_s;  /* one shell command, seconds */
    size_t shell_output_bytes;  /* bytes of a command's output kept (and shown to the model) */
    int search_results;      /* results kept per search */
    int search_fetch_pages;  /* top results whose pages are fetched and given as text (0: none) */
    double price_input_per_mtok;   /* USD per million prompt tokens, for /cost */
    double price_output_per_mtok;  /* USD per million completion tokens */
    bool yes;                /* --yes: run generated commands without asking */
    bool raw;                /* --raw: no routing, plain chat */
};

/* Fills c with the built-in defaults. Returns 0, or -ENOMEM (c is then safe to release). */
int config_init(struct agent_config *c);

/* Reads the JSON config file at path (NULL: $SNIPER_CONFIG, else ~/.config/sniper/agent.json).
 * A missing default file is not an error; a missing explicit one, bad JSON or a key of the wrong
 * type is: returns -EINVAL (or -ENOENT) with err filled. Unknown keys are an error too, so a typo
 * is not silently ignored. */
int config_load_file(struct agent_config *c, const char *path, char *err, size_t err_len);

/* Applies SNIPER_SERVER, SNIPER_API_KEY, SNIPER_MODEL, SNIPER_SEARCH_BACKEND, SNIPER_SEARCH_URL,
 * SNIPER_TIMEOUT. Returns 0 or -EINVAL (a bad number) with err filled. */
int config_apply_env(struct agent_config *c, char *err, size_t err_len);

/* Replaces *dst with a copy of value (NULL allowed). Returns 0 or -ENOMEM (*dst unchanged). */
int config_set_str(char **dst, const char *value);

/* Drops a trailing "/" and "/v1" from c->server so paths can be appended. */
void config_normalize_server(struct agent_config *c);

/* Frees every string; accepts NULL. */
void config_release(struct agent_config *c);

#endif
