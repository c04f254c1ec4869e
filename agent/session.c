/* session.c - see session.h. */
#include "session.h"
#include "err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double session_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int session_init(struct session *s, struct agent_config *cfg, struct input *in,
                 volatile sig_atomic_t *cancel) {
    memset(s, 0, sizeof(*s));
    s->cfg = cfg;
    s->in = in;
    s->cancel = cancel;
    s->raw = cfg->raw;
    s->started_s = session_now();
    struct http_client hc = {
        .api_key = cfg->api_key, .timeout_s = cfg->timeout_s,
        .connect_timeout_s = cfg->connect_timeout_s, .cancel = cancel,
    };
    if (llm_init(&s->llm, cfg->server, cfg->model, &hc) < 0 || !(s->messages = json_array()) ||
        !(s->system_prompt = strdup(cfg->system_prompt ? cfg->system_prompt : "")))
        return -ENOMEM;
    return 0;
}

void session_release(struct session *s) {
    if (!s)
        return;
    llm_release(&s->llm);
    json_decref(s->messages);
    free(s->system_prompt);
    free(s->last_route);
    free(s->last_request);
    free(s->last_answer);
    memset(s, 0, sizeof(*s));
}

static json_t *message(const char *role, const char *content) {
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

json_t *session_request_messages(const struct session *s, const char *extra_system,
                                 const char *user) {
    json_t *m = json_array();
    if (!m)
        return NULL;
    int rc = 0;
    if (s->system_prompt[0])
        rc |= json_array_append_new(m, message("system", s->system_prompt));
    if (extra_system)
        rc |= json_array_append_new(m, message("system", extra_system));
    rc |= json_array_extend(m, s->messages);
    if (user)
        rc |= json_array_append_new(m, message("user", user));
    if (rc) {
        json_decref(m);
        return NULL;
    }
    return m;
}

static int replace(char **dst, const char *v) {
    char *c = strdup(v ? v : "");
    if (!c)
        return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

int session_remember(struct session *s, const char *route, const char *request,
                     const char *answer) {
    s->n_turns++;
    if (json_array_append_new(s->messages, message("user", request)) ||
        json_array_append_new(s->messages, message("assistant", answer ? answer : "")))
        return -ENOMEM;
    if (replace(&s->last_route, route) || replace(&s->last_request, request) ||
        replace(&s->last_answer, answer))
        return -ENOMEM;
    return 0;
}

void session_count(struct session *s, const struct llm_stats *st) {
    s->prompt_tokens += st->prompt_tokens;
    s->completion_tokens += st->completion_tokens;
    s->model_s += st->total_s;
}

void session_clear(struct session *s) {
    json_array_clear(s->messages);
    free(s->last_route);
    free(s->last_request);
    free(s->last_answer);
    s->last_route = s->last_request = s->last_answer = NULL;
}

int session_set_messages(struct session *s, json_t *messages) {
    if (!json_is_array(messages))
        return -EINVAL;
    json_t *keep = json_array();
    char *system = NULL;
    size_t i;
    json_t *m;
    if (!keep)
        return -ENOMEM;
    json_array_foreach(messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        if (!role || !content) {
            json_decref(keep);
            free(system);
            return -EINVAL;
        }
        if (strcmp(role, "system") == 0)
            replace(&system, content);
        else
            json_array_append_new(keep, message(role, content));
    }
    json_decref(s->messages);
    s->messages = keep;
    if (system) {
        free(s->system_prompt);
        s->system_prompt = system;
    }
    return (int)json_array_size(keep);
}

int session_save(const struct session *s, const char *path, char *err, size_t err_len) {
    json_t *root = json_pack("{s:i, s:s?, s:s, s:O}", "version", 1, "model", s->llm.model,
                             "system", s->system_prompt, "messages", s->messages);
    int rc = 0;
    if (!root) {
        err_set(err, err_len, "out of memory");
        return -ENOMEM;
    }
    if (json_dump_file(root, path, JSON_INDENT(2)) < 0) {
        err_set(err, err_len, "cannot write \"%s\": %s", path, strerror(errno));
        rc = -EIO;
    }
    json_decref(root);
    return rc;
}

int session_load(struct session *s, const char *path, char *err, size_t err_len) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *messages = json_object_get(root, "messages");
    const char *system = json_string_value(json_object_get(root, "system"));
    int rc;
    if (!root) {
        err_set(err, err_len, "cannot read \"%s\": %s", path, jerr.text);
        return -EINVAL;
    }
    if ((rc = session_set_messages(s, messages)) < 0) {
        err_set(err, err_len, "\"%s\" is not a saved conversation (no \"messages\" array of "
                "role and content)", path);
    } else if (system && replace(&s->system_prompt, system) < 0) {
        rc = -ENOMEM;
    }
    json_decref(root);
    return rc;
}
