/* commands.c - see commands.h. One function per command, found through one table (which /help
 * prints). Arguments are the rest of the line after the command word. */
#include "commands.h"
#include "grades.h"
#include "turn.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*command_fn)(struct session *s, const char *args);

struct command {
    const char *name;
    const char *usage;
    const char *help;
    command_fn fn;
};

static const struct command *command_find(const char *name, size_t n);

static int usage_error(const char *usage) {
    fprintf(stderr, "sniper: usage: %s\n", usage);
    return -EINVAL;
}

/* Prints err for rc and passes rc on. */
static int fail(int rc, const char *err) {
    turn_report(rc, err);
    return rc;
}

/* ---- modes and requests ---- */

static int cmd_agent(struct session *s, const char *args) {
    (void)args;
    s->raw = false;
    printf("agent mode: requests are routed to search, shell or chat\n");
    return 0;
}

static int cmd_raw(struct session *s, const char *args) {
    (void)args;
    s->raw = true;
    printf("raw mode: every line is plain chat (/agent to route again)\n");
    return 0;
}

static int cmd_search(struct session *s, const char *args) {
    if (!*args)
        return usage_error("/search QUERY");
    return turn_search(s, args, args);
}

static int cmd_system(struct session *s, const char *args) {
    if (*args) {
        char *p = strdup(args);
        if (!p)
            return -ENOMEM;
        free(s->system_prompt);
        s->system_prompt = p;
    }
    printf("system prompt: %s\n", s->system_prompt);
    return 0;
}

static int cmd_clear(struct session *s, const char *args) {
    (void)args;
    session_clear(s);
    printf("conversation cleared\n");
    return 0;
}

static int cmd_quit(struct session *s, const char *args) {
    (void)args;
    s->quit = true;
    return 0;
}

/* ---- the server ---- */

/* One line of /model's list: current mark, id, state, architecture, quantization, size, error. */
static void print_model(const json_t *m, const char *current) {
    const char *id = llm_model_id(m), *state = json_string_value(json_object_get(m, "state"));
    const char *arch = json_string_value(json_object_get(m, "architecture"));
    const char *quant = json_string_value(json_object_get(m, "quantization"));
    const char *error = json_string_value(json_object_get(m, "error"));
    json_t *size = json_object_get(m, "size_bytes");
    printf("%s %s", current && strcmp(current, id) == 0 ? "*" : " ", id);
    if (state)
        printf("  %s", state);
    if (arch && arch[0])
        printf("  %s %s", arch, quant ? quant : "");
    double bytes = json_is_number(size) ? json_number_value(size) : 0;
    if (bytes >= (1u << 30))
        printf("  %.1f GiB", bytes / (1u << 30));
    else if (bytes > 0)
        printf("  %.1f MiB", bytes / (1u << 20));
    if (error)
        printf("  (%s)", error);
    printf("\n");
}

/* /model: the server's models and their states; /model NAME: the next requests go to NAME. */
static int cmd_model(struct session *s, const char *args) {
    char err[512] = "";
    json_t *models = NULL;
    int rc = llm_models(&s->llm, &models, err, sizeof(err));
    if (rc < 0 && !*args)
        return fail(rc, err);
    if (rc == 0 && !s->llm.model && json_array_size(models) > 0)
        rc = llm_ensure_model(&s->llm, err, sizeof(err)); /* the server's default */
    if (*args) {
        const json_t *found = NULL;
        for (size_t i = 0; i < json_array_size(models); i++)
            if (strcmp(llm_model_id(json_array_get(models, i)), args) == 0)
                found = json_array_get(models, i);
        if (models && !found) { /* the server answered and has no such model */
            fprintf(stderr, "sniper: the server does not list \"%s\" (/model lists them)\n", args);
            json_decref(models);
            return -ENOENT;
        }
        if (!models)
            fprintf(stderr, "sniper: warning: the server did not answer (%s); using \"%s\"\n",
                    err, args);
        rc = llm_set_model(&s->llm, args);
        if (rc == 0)
            printf("model: %s\n", args);
    } else {
        for (size_t i = 0; i < json_array_size(models); i++)
            print_model(json_array_get(models, i), s->llm.model);
    }
    json_decref(models);
    return rc;
}

static int cmd_stats(struct session *s, const char *args) {
    (void)args;
    char err[512] = "";
    json_t *server = NULL;
    printf("session: %ld turns, %ld prompt + %ld completion tokens, %.1f s waiting for the "
           "model, %.0f s since start\n", s->n_turns, s->prompt_tokens, s->completion_tokens,
           s->model_s, session_now() - s->started_s);
    if (llm_json(&s->llm, "GET", "/v1/stats", NULL, &server, err, sizeof(err)) < 0) {
        printf("server stats unavailable: %s\n", err);
        return 0;
    }
    char *text = json_dumps(server, JSON_INDENT(2) | JSON_SORT_KEYS);
    printf("server: %s\n", text ? text : "?");
    free(text);
    json_decref(server);
    return 0;
}

static int cmd_cost(struct session *s, const char *args) {
    (void)args;
    double in = s->cfg->price_input_per_mtok, out = s->cfg->price_output_per_mtok;
    double usd = ((double)s->prompt_tokens * in + (double)s->completion_tokens * out) / 1e6;
    printf("this session: %ld prompt + %ld completion tokens; at $%.2f per million input and "
           "$%.2f per million output tokens a cloud API would have charged $%.4f\n",
           s->prompt_tokens, s->completion_tokens, in, out, usd);
    return 0;
}

static const char BENCH_PROMPT[] =
    "Explain in one paragraph why a mixture-of-experts model reads only part of its weights for "
    "each token.";

static int cmd_bench(struct session *s, const char *args) {
    (void)args;
    json_t *m = json_pack("[{s:s, s:s}]", "role", "user", "content", BENCH_PROMPT);
    struct llm_opts o = { .temperature = 0, .max_tokens = 128, .stream = true };
    struct llm_stats st;
    char *answer = NULL;
    int rc = m ? turn_stream(s, m, &o, &answer, &st) : -ENOMEM;
    json_decref(m);
    free(answer);
    if (rc < 0)
        return rc;
    if (st.prompt_tokens > 0 && st.ttft_s > 0)
        printf("bench: prompt %ld tokens, prefill %.1f tok/s (TTFT %.0f ms); %ld tokens "
               "generated at %.1f tok/s\n", st.prompt_tokens, (double)st.prompt_tokens / st.ttft_s,
               st.ttft_s * 1000, st.completion_tokens, st.tok_per_s);
    else
        printf("bench: prefill unknown (the server sent no usage); TTFT %.0f ms; %ld tokens "
               "generated at %.1f tok/s\n", st.ttft_s * 1000, st.completion_tokens, st.tok_per_s);
    return 0;
}

/* ---- contexts on the server ---- */

bool commands_context_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 64 || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
            return false;
    return true;
}

/* The conversation a load or download answer carries (top level or under "metadata"), or NULL. */
static json_t *context_messages(json_t *answer) {
    json_t *m = json_object_get(answer, "messages");
    if (!m)
        m = json_object_get(json_object_get(answer, "metadata"), "messages");
    return json_is_array(m) ? m : NULL;
}

/* Prints an answer's scalar fields as "key=value" on one line after what. */
static void print_fields(const char *what, json_t *obj) {
    const char *k;
    json_t *v;
    printf("%s", what);
    json_object_foreach(obj, k, v) {
        if (json_is_string(v))
            printf(" %s=%s", k, json_string_value(v));
        else if (json_is_integer(v))
            printf(" %s=%lld", k, (long long)json_integer_value(v));
        else if (json_is_real(v))
            printf(" %s=%.1f", k, json_real_value(v));
        else if (json_is_boolean(v))
            printf(" %s=%s", k, json_is_true(v) ? "true" : "false");
    }
    printf("\n");
}

static int context_list(struct session *s) {
    char err[512] = "";
    json_t *a = NULL;
    int rc = llm_json(&s->llm, "GET", "/v1/context", NULL, &a, err, sizeof(err));
    if (rc < 0)
        return fail(rc, err);
    json_t *list = json_is_array(a) ? a : json_object_get(a, "contexts");
    if (!list)
        list = json_object_get(a, "data");
    if (json_array_size(list) == 0)
        printf("no contexts\n");
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        if (json_is_object(c))
            print_fields(" ", c);
    }
    json_decref(a);
    return 0;
}

/* After a load or download: resume the conversation the context was made from. */
static void context_resume(struct session *s, json_t *answer) {
    json_t *m = context_messages(answer);
    int n = m ? session_set_messages(s, m) : -EINVAL;
    if (n >= 0)
        printf("resumed the conversation: %d messages\n", n);
    else
        printf("(the context carries no conversation to resume)\n");
}

static int cmd_context(struct session *s, const char *args) {
    static const char usage[] = "/context list | save NAME | load NAME | upload NAME | "
                                "download NAME | delete NAME";
    char verb[16] = "", name[128] = "", err[512] = "", path[256];
    if (sscanf(args, "%15s %127s", verb, name) < 1)
        return usage_error(usage);
    if (strcmp(verb, "list") == 0)
        return context_list(s);
    if (!name[0])
        return usage_error(usage);
    if (!commands_context_name_ok(name)) {
        fprintf(stderr, "sniper: bad context name \"%s\": use letters, digits, . _ - (1 to 64, "
                        "no leading dot)\n", name);
        return -EINVAL;
    }
    json_t *body = NULL, *answer = NULL;
    int rc;
    if (strcmp(verb, "delete") == 0) {
        snprintf(path, sizeof(path), "/v1/context/%s", name);
        rc = llm_json(&s->llm, "DELETE", path, NULL, &answer, err, sizeof(err));
        goto done;
    }
    if (strcmp(verb, "save") == 0) {
        json_t *m = session_request_messages(s, NULL, NULL);
        body = json_pack("{s:s, s:o?}", "name", name, "messages", m);
    } else if (strcmp(verb, "download") == 0) {
        body = json_pack("{s:s, s:b}", "name", name, "load", 1);
    } else if (strcmp(verb, "load") == 0 || strcmp(verb, "upload") == 0) {
        body = json_pack("{s:s}", "name", name);
    } else {
        return usage_error(usage);
    }
    snprintf(path, sizeof(path), "/v1/context/%s", verb);
    rc = body ? llm_json(&s->llm, "POST", path, body, &answer, err, sizeof(err)) : -ENOMEM;
done:
    if (rc < 0) {
        json_decref(body);
        return fail(rc, err);
    }
    char what[200];
    snprintf(what, sizeof(what), "%s %s:", verb, name);
    print_fields(what, answer);
    if (strcmp(verb, "load") == 0 || strcmp(verb, "download") == 0)
        context_resume(s, answer);
    json_decref(answer);
    json_decref(body);
    return 0;
}

/* ---- grades ---- */

static int grade(struct session *s, const char *g, const char *note) {
    char err[512] = "";
    if (!s->last_answer) {
        fprintf(stderr, "sniper: nothing to grade yet\n");
        return -EINVAL;
    }
    struct grade gr = {
        .grade = g, .route = s->last_route, .model = s->llm.model,
        .request = s->last_request, .answer = s->last_answer, .note = note,
    };
    int rc = grades_append(s->cfg->grades_path, &gr, err, sizeof(err));
    if (rc < 0)
        return fail(rc, err);
    printf("graded %s (%s route) in %s\n", g, s->last_route, s->cfg->grades_path);
    return 0;
}

static int cmd_good(struct session *s, const char *args) {
    return grade(s, "good", args);
}

static int cmd_bad(struct session *s, const char *args) {
    return grade(s, "bad", args);
}

static int cmd_improve(struct session *s, const char *args) {
    (void)args;
    char err[512] = "";
    int rc = grades_summary(s->cfg->grades_path, stdout, err, sizeof(err));
    return rc < 0 ? fail(rc, err) : 0;
}

/* ---- conversation files ---- */

static int cmd_save(struct session *s, const char *args) {
    char err[512] = "";
    if (!*args)
        return usage_error("/save FILE");
    int rc = session_save(s, args, err, sizeof(err));
    if (rc < 0)
        return fail(rc, err);
    printf("saved %zu messages to %s\n", json_array_size(s->messages), args);
    return 0;
}

static int cmd_load(struct session *s, const char *args) {
    char err[512] = "";
    if (!*args)
        return usage_error("/load FILE");
    int rc = session_load(s, args, err, sizeof(err));
    if (rc < 0)
        return fail(rc, err);
    printf("loaded %d messages from %s\n", rc, args);
    return 0;
}

/* ---- help ---- */

static int cmd_help(struct session *s, const char *args);

static const struct command COMMANDS[] = {
    { "agent", "/agent", "route each request to search, shell or chat (the default)", cmd_agent },
    { "raw", "/raw", "plain chat, no routing", cmd_raw },
    { "search", "/search QUERY", "search the web for QUERY and answer with sources", cmd_search },
    { "model", "/model [NAME]", "list the server's models, or switch to NAME", cmd_model },
    { "context", "/context list|save|load|upload|download|delete [NAME]",
      "contexts (processed prompts) on the server; load and download resume the conversation",
      cmd_context },
    { "bench", "/bench", "a fixed request: prefill and decode tok/s", cmd_bench },
    { "stats", "/stats", "this session's turns, tokens and time, and the server's stats",
      cmd_stats },
    { "cost", "/cost", "what this session would have cost on a cloud API", cmd_cost },
    { "good", "/good [NOTE]", "grade the last answer good (JSONL log)", cmd_good },
    { "bad", "/bad [NOTE]", "grade the last answer bad", cmd_bad },
    { "improve", "/improve", "summary of the grades by route", cmd_improve },
    { "clear", "/clear", "forget the conversation", cmd_clear },
    { "save", "/save FILE", "write the conversation as JSON", cmd_save },
    { "load", "/load FILE", "read a conversation written by /save", cmd_load },
    { "system", "/system [TEXT]", "show or set the system prompt", cmd_system },
    { "help", "/help", "this list", cmd_help },
    { "quit", "/quit", "leave (also /exit, Ctrl-D)", cmd_quit },
    { "exit", NULL, NULL, cmd_quit },
};
#define N_COMMANDS (sizeof(COMMANDS) / sizeof(COMMANDS[0]))

static int cmd_help(struct session *s, const char *args) {
    (void)s, (void)args;
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (COMMANDS[i].usage)
            printf("  %-56s %s\n", COMMANDS[i].usage, COMMANDS[i].help);
    printf("  %-56s %s\n", "!COMMAND", "run a shell command, then summarise its output");
    printf("Anything else is a request: the model routes it to search, shell or chat.\n");
    return 0;
}

static const struct command *command_find(const char *name, size_t n) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strlen(COMMANDS[i].name) == n && memcmp(COMMANDS[i].name, name, n) == 0)
            return &COMMANDS[i];
    return NULL;
}

int commands_run(struct session *s, const char *line) {
    const char *name = line + 1;
    size_t n = strcspn(name, " \t");
    if (n == 0) {
        for (size_t i = 0; i < N_COMMANDS; i++)
            if (COMMANDS[i].usage)
                printf("/%s ", COMMANDS[i].name);
        printf("\n");
        return 0;
    }
    const struct command *c = command_find(name, n);
    if (!c) {
        fprintf(stderr, "sniper: unknown command \"/%.*s\" (/help lists them)\n", (int)n, name);
        return -EINVAL;
    }
    const char *args = name + n;
    while (isspace((unsigned char)*args))
        args++;
    char *a = strdup(args);
    if (!a)
        return -ENOMEM;
    for (size_t k = strlen(a); k > 0 && isspace((unsigned char)a[k - 1]); k--)
        a[k - 1] = '\0';
    int rc = c->fn(s, a);
    free(a);
    return rc;
}
