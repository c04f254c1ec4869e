/* config.c - defaults, the JSON file and the environment; see config.h. The file is untrusted:
 * every key's type is checked and unknown keys are refused. */
#include "config.h"
#include "defaults.h"
#include "err.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int config_set_str(char **dst, const char *value) {
    char *copy = NULL;
    if (value && !(copy = strdup(value)))
        return -ENOMEM;
    free(*dst);
    *dst = copy;
    return 0;
}

/* home-relative path into a fresh string, or NULL. */
static char *home_path(const char *rel) {
    const char *home = getenv("HOME");
    char *p = NULL;
    if (!home || !*home || asprintf(&p, "%s/%s", home, rel) < 0)
        return NULL;
    return p;
}

int config_init(struct agent_config *c) {
    memset(c, 0, sizeof(*c));
    c->timeout_s = 300;
    c->connect_timeout_s = 5;
    c->shell_timeout_s = 30;
    c->shell_output_bytes = 16384;
    c->search_results = 5;
    c->price_input_per_mtok = 3.0;
    c->price_output_per_mtok = 15.0;
    c->grades_path = home_path(".local/share/sniper/grades.jsonl");
    c->history_path = home_path(".local/share/sniper/history");
    if (config_set_str(&c->server, SNIPER_SERVER_URL) < 0 ||
        config_set_str(&c->system_prompt, "You are a helpful, concise assistant.") < 0 ||
        config_set_str(&c->search_backend, "duckduckgo") < 0 ||
        config_set_str(&c->search_url, "https://html.duckduckgo.com/html/") < 0)
        return -ENOMEM;
    return 0;
}

void config_normalize_server(struct agent_config *c) {
    if (!c->server)
        return;
    size_t n = strlen(c->server);
    while (n > 0 && c->server[n - 1] == '/')
        c->server[--n] = '\0';
    if (n >= 3 && strcmp(c->server + n - 3, "/v1") == 0)
        c->server[n - 3] = '\0';
}

/* ---- the file ---- */

struct str_key { const char *name; size_t off; };
struct num_key { const char *name; size_t off; };

#define STR_KEY(f) { #f, offsetof(struct agent_config, f) }
static const struct str_key str_keys[] = {
    STR_KEY(server), STR_KEY(api_key), STR_KEY(model), STR_KEY(system_prompt),
    STR_KEY(search_backend), STR_KEY(search_url), STR_KEY(grades_path), STR_KEY(history_path),
};
static const struct num_key num_keys[] = {
    { "timeout_s", offsetof(struct agent_config, timeout_s) },
    { "connect_timeout_s", offsetof(struct agent_config, connect_timeout_s) },
    { "shell_timeout_s", offsetof(struct agent_config, shell_timeout_s) },
    { "price_input_per_mtok", offsetof(struct agent_config, price_input_per_mtok) },
    { "price_output_per_mtok", offsetof(struct agent_config, price_output_per_mtok) },
};

/* One key of the file into c. Returns 0, -EINVAL (wrong type, unknown key) or -ENOMEM. */
static int config_apply_key(struct agent_config *c, const char *key, json_t *v,
                            char *err, size_t err_len) {
    for (size_t i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++) {
        if (strcmp(key, str_keys[i].name) != 0)
            continue;
        if (!json_is_string(v) && !json_is_null(v))
            goto wrong_type;
        return config_set_str((char **)((char *)c + str_keys[i].off), json_string_value(v));
    }
    for (size_t i = 0; i < sizeof(num_keys) / sizeof(num_keys[0]); i++) {
        if (strcmp(key, num_keys[i].name) != 0)
            continue;
        if (!json_is_number(v) || json_number_value(v) < 0)
            goto wrong_type;
        *(double *)((char *)c + num_keys[i].off) = json_number_value(v);
        return 0;
    }
    if (strcmp(key, "shell_output_bytes") == 0) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 26))
            goto wrong_type;
        c->shell_output_bytes = (size_t)json_integer_value(v);
        return 0;
    }
    if (strcmp(key, "search_results") == 0 || strcmp(key, "search_fetch_pages") == 0) {
        bool results = strcmp(key, "search_results") == 0;
        if (!json_is_integer(v) || json_integer_value(v) < (results ? 1 : 0) ||
            json_integer_value(v) > 20)
            goto wrong_type;
        *(results ? &c->search_results : &c->search_fetch_pages) = (int)json_integer_value(v);
        return 0;
    }
    if (strcmp(key, "yes") == 0 || strcmp(key, "raw") == 0) {
        if (!json_is_boolean(v))
            goto wrong_type;
        *(key[0] == 'y' ? &c->yes : &c->raw) = json_is_true(v);
        return 0;
    }
    err_set(err, err_len, "unknown config key \"%s\"", key);
    return -EINVAL;
wrong_type:
    err_set(err, err_len, "config key \"%s\" has the wrong type or range", key);
    return -EINVAL;
}

int config_load_file(struct agent_config *c, const char *path, char *err, size_t err_len) {
    char *dflt = NULL;
    int rc = 0;
    bool explicit_path = path != NULL;
    if (!path && getenv("SNIPER_CONFIG") && *getenv("SNIPER_CONFIG")) {
        path = getenv("SNIPER_CONFIG");
        explicit_path = true;
    }
    if (!path && !(path = dflt = home_path(".config/sniper/agent.json")))
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno != ENOENT || explicit_path) {
            err_set(err, err_len, "cannot open config \"%s\": %s", path, strerror(errno));
            rc = errno == ENOENT ? -ENOENT : -EINVAL;
        }
        goto out;
    }
    json_error_t jerr;
    json_t *root = json_loadf(f, 0, &jerr);
    fclose(f);
    if (!json_is_object(root)) {
        err_set(err, err_len, "bad config \"%s\": %s", path,
                root ? "not a JSON object" : jerr.text);
        rc = -EINVAL;
        json_decref(root);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        char kerr[200] = "";
        if ((rc = config_apply_key(c, key, v, kerr, sizeof(kerr))) < 0) {
            err_set(err, err_len, "%s in \"%s\"", kerr[0] ? kerr : "out of memory", path);
            break;
        }
    }
    json_decref(root);
out:
    free(dflt);
    return rc;
}

int config_apply_env(struct agent_config *c, char *err, size_t err_len) {
    static const struct { const char *env; size_t off; } envs[] = {
        { "SNIPER_SERVER", offsetof(struct agent_config, server) },
        { "SNIPER_API_KEY", offsetof(struct agent_config, api_key) },
        { "SNIPER_MODEL", offsetof(struct agent_config, model) },
        { "SNIPER_SEARCH_BACKEND", offsetof(struct agent_config, search_backend) },
        { "SNIPER_SEARCH_URL", offsetof(struct agent_config, search_url) },
    };
    for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
        const char *v = getenv(envs[i].env);
        if (v && *v && config_set_str((char **)((char *)c + envs[i].off), v) < 0)
            return -ENOMEM;
    }
    const char *t = getenv("SNIPER_TIMEOUT");
    if (t && *t) {
        char *end;
        double d = strtod(t, &end);
        if (*end || d < 0) {
            err_set(err, err_len, "SNIPER_TIMEOUT=\"%s\" is not a number of seconds", t);
            return -EINVAL;
        }
        c->timeout_s = d;
    }
    return 0;
}

void config_release(struct agent_config *c) {
    if (!c)
        return;
    for (size_t i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++)
        free(*(char **)((char *)c + str_keys[i].off));
    memset(c, 0, sizeof(*c));
}
