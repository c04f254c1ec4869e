/* turn.c - see turn.h. Order of a shell turn, which a test pins: the command is printed before
 * anything runs, and nothing runs without consent unless it is on the read-only allowlist. */
#include "turn.h"
#include "allowlist.h"
#include "router.h"
#include "search.h"
#include "shell.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

void turn_report(int rc, const char *err) {
    if (rc == -ECANCELED)
        fprintf(stderr, "\n[cancelled]\n");
    else
        fprintf(stderr, "sniper: %s\n", err && *err ? err : strerror(-rc));
}

/* ---- streaming ---- */

struct printer {
    bool any;
    char last;
};

static void print_token(void *ctx, const char *text, size_t n) {
    struct printer *p = ctx;
    fwrite(text, 1, n, stdout);
    fflush(stdout);
    p->any = true;
    p->last = text[n - 1];
}

int turn_stream(struct session *s, json_t *messages, const struct llm_opts *o, char **answer,
                struct llm_stats *st) {
    struct printer p = { 0 };
    struct llm_stats local;
    char err[512] = "";
    struct llm_opts so = *o;
    so.stream = true;
    if (!st)
        st = &local;
    memset(st, 0, sizeof(*st));
    int rc = llm_chat(&s->llm, messages, &so, print_token, &p, answer, st, err, sizeof(err));
    if (p.any && p.last != '\n')
        fputc('\n', stdout);
    fflush(stdout);
    session_count(s, st);
    if (rc < 0) {
        turn_report(rc, err);
        free(*answer);
        *answer = NULL;
        return rc;
    }
    fprintf(stderr, "[%ld tokens, %.1f tok/s, TTFT %.0f ms]\n", st->completion_tokens,
            st->tok_per_s, st->ttft_s * 1000);
    return 0;
}

/* A short non-streamed request at temperature 0 (rewrites, commands). Returns 0 with *reply set
 * or a negative error (printed). */
static int ask(struct session *s, const char *system, const char *user, int max_tokens,
               char **reply) {
    json_t *m = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", system,
                          "role", "user", "content", user);
    struct llm_opts o = { .temperature = 0, .max_tokens = max_tokens, .stream = false };
    struct llm_stats st = { 0 };
    char err[512] = "";
    int rc = m ? llm_chat(&s->llm, m, &o, NULL, NULL, reply, &st, err, sizeof(err)) : -ENOMEM;
    session_count(s, &st);
    if (rc < 0)
        turn_report(rc, err);
    json_decref(m);
    return rc;
}

/* ---- chat ---- */

int turn_chat(struct session *s, const char *request, const char *route) {
    json_t *m = session_request_messages(s, NULL, request);
    struct llm_opts o = LLM_OPTS_DEFAULT;
    char *answer = NULL;
    int rc = m ? turn_stream(s, m, &o, &answer, NULL) : -ENOMEM;
    if (rc == 0)
        rc = session_remember(s, route, request, answer);
    free(answer);
    json_decref(m);
    return rc;
}

/* ---- search ---- */

static void today(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    strftime(buf, n, "%Y-%m-%d", localtime_r(&t, &tm));
}

#define TURN_PAGE_TEXT_BYTES 3000

/* The text of the page at url (malloc'd), or NULL when it could not be had (said on stderr). */
static char *fetch_page(const struct http_client *hc, const char *url) {
    struct http_response r;
    char err[512] = "", *text = NULL;
    int rc = http_request(hc, "GET", url, NULL, NULL, NULL, &r, err, sizeof(err));
    if (rc == 0 && r.status >= 200 && r.status < 300)
        text = search_page_text(r.body, r.body_bytes, TURN_PAGE_TEXT_BYTES);
    if (text)
        fprintf(stderr, "[read %s: %zu bytes of text]\n", url, strlen(text));
    else
        fprintf(stderr, "[could not read %s: %s]\n", url,
                rc < 0 ? err : (r.status ? "HTTP error" : "no text"));
    http_response_release(&r);
    return text;
}

/* The numbered results as the model sees them (with the text of the first
 * cfg->search_fetch_pages pages), malloc'd, or NULL. */
static char *search_context(const struct session *s, const struct http_client *hc,
                            const struct search_results *r, const char *date) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        return NULL;
    fprintf(f, "Today is %s. Answer the user's last question from the numbered web search "
               "results below. Cite the results you use as [1], [2] ... If they do not answer "
               "it, say so.\n", date);
    for (size_t i = 0; i < r->n; i++) {
        fprintf(f, "\n[%zu] %s\n%s\n%s\n", i + 1, r->v[i].title, r->v[i].url, r->v[i].snippet);
        char *page = (int)i < s->cfg->search_fetch_pages ? fetch_page(hc, r->v[i].url) : NULL;
        if (page && *page)
            fprintf(f, "Page text: %s\n", page);
        free(page);
    }
    fclose(f);
    return text;
}

/* The query the search path sends: the given one, or the model's rewrite. NULL on error. */
static char *search_query(struct session *s, const char *request, const char *query,
                          const char *date) {
    if (query)
        return strdup(query);
    char system[512], *reply = NULL;
    snprintf(system, sizeof(system),
             "Today is %s. Rewrite the user's request as a short web search query: a few "
             "keywords, with the year or date when it matters. Answer with the query only.",
             date);
    if (ask(s, system, request, 32, &reply) < 0)
        return NULL;
    char *q = search_query_clean(reply);
    free(reply);
    if (q && !*q) {
        free(q);
        q = strdup(request);
    }
    return q;
}

int turn_search(struct session *s, const char *request, const char *query) {
    char date[32], err[512] = "";
    struct search_results res = { 0 };
    enum search_backend backend;
    char *q = NULL, *context = NULL, *answer = NULL;
    json_t *m = NULL;
    int rc = -EINVAL;
    today(date, sizeof(date));
    if (search_backend_parse(s->cfg->search_backend, &backend) < 0) {
        fprintf(stderr, "sniper: unknown search backend \"%s\" (duckduckgo or searxng)\n",
                s->cfg->search_backend);
        goto out;
    }
    rc = -ENOMEM;
    if (!(q = search_query(s, request, query, date)))
        goto out;
    fprintf(stderr, "[search: %s]\n", q);
    struct http_client hc = s->llm.http;
    hc.api_key = NULL;   /* the model server's key is not the search engine's business */
    if ((rc = search_run(&hc, backend, s->cfg->search_url, q, (size_t)s->cfg->search_results,
                         &res, err, sizeof(err))) < 0) {
        turn_report(rc, err);
        goto out;
    }
    if (res.n == 0) {
        fprintf(stderr, "sniper: no search results for \"%s\"\n", q);
        rc = -ENOENT;
        goto out;
    }
    rc = -ENOMEM;
    if (!(context = search_context(s, &hc, &res, date)) ||
        !(m = session_request_messages(s, context, request)))
        goto out;
    struct llm_opts o = LLM_OPTS_DEFAULT;
    if ((rc = turn_stream(s, m, &o, &answer, NULL)) < 0)
        goto out;
    printf("Sources:\n");
    for (size_t i = 0; i < res.n; i++)
        printf("[%zu] %s - %s\n", i + 1, res.v[i].title, res.v[i].url);
    rc = session_remember(s, "search", request, answer);
out:
    free(answer);
    json_decref(m);
    free(context);
    search_results_release(&res);
    free(q);
    return rc;
}

/* ---- shell ---- */

char *turn_command_clean(const char *reply) {
    const char *p = reply ? reply : "";
    for (;;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (strncmp(p, "```", 3) != 0)
            break;
        p += strcspn(p, "\n");   /* a fence line, maybe "```sh" */
    }
    size_t n = strcspn(p, "\r\n");
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    if (n >= 2 && p[0] == '$' && p[1] == ' ')
        p += 2, n -= 2;
    while (n >= 2 && p[0] == '`' && p[n - 1] == '`')
        p++, n -= 2;
    return strndup(p, n);
}

/* Whether cmd may run: read-only, --yes, "always", or the user's y / a. */
static bool consent(struct session *s, const char *cmd, bool typed) {
    if (typed || allowlist_is_read_only(cmd)) {
        if (!typed)
            fprintf(stderr, "[read-only: runs without asking]\n");
        return true;
    }
    if (s->cfg->yes || s->always) {
        fprintf(stderr, "[%s: runs without asking]\n", s->cfg->yes ? "--yes" : "always");
        return true;
    }
    for (int tries = 0; tries < 3; tries++) {
        char *a = input_line(s->in, "run it? [y/n/a] ");
        if (!a)
            return false;
        for (char *c = a; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        bool yes = strcmp(a, "y") == 0 || strcmp(a, "yes") == 0;
        bool always = strcmp(a, "a") == 0 || strcmp(a, "always") == 0;
        bool no = strcmp(a, "n") == 0 || strcmp(a, "no") == 0 || a[0] == '\0';
        free(a);
        if (always)
            s->always = true;
        if (yes || always || no)
            return yes || always;
        fprintf(stderr, "answer y (run it), n (do not) or a (run this and every later "
                        "command this session)\n");
    }
    return false;
}

/* What the model is told about the run, malloc'd, or NULL. */
static char *run_report(const char *request, const char *cmd, const struct shell_result *r) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        return NULL;
    fprintf(f, "%s\n\nI ran: %s\n", request, cmd);
    if (r->timed_out)
        fprintf(f, "It was killed after the time limit.\n");
    else if (r->term_signal)
        fprintf(f, "It was killed by signal %d.\n", r->term_signal);
    else
        fprintf(f, "Exit status: %ld\n", r->exit_status);
    fprintf(f, "Output%s:\n```\n%s\n```\nSummarise the result for me in a few sentences.",
            r->truncated ? " (truncated)" : "", r->output);
    fclose(f);
    return text;
}

/* Prints the run's output and how it ended. */
static void show_run(const struct session *s, const struct shell_result *r) {
    fwrite(r->output, 1, r->output_bytes, stdout);
    if (r->output_bytes && r->output[r->output_bytes - 1] != '\n')
        fputc('\n', stdout);
    fflush(stdout);
    if (r->truncated)
        fprintf(stderr, "[output truncated to %zu bytes]\n", s->cfg->shell_output_bytes);
    if (r->timed_out)
        fprintf(stderr, "[timed out after %.1f s: killed]\n", s->cfg->shell_timeout_s);
    else if (r->cancelled)
        fprintf(stderr, "[cancelled: killed]\n");
    else if (r->term_signal)
        fprintf(stderr, "[killed by signal %d]\n", r->term_signal);
    else
        fprintf(stderr, "[exit %ld, %.2f s]\n", r->exit_status, r->seconds);
}

int turn_command(struct session *s, const char *request, const char *cmd, bool typed) {
    struct shell_result r = { 0 };
    char err[512] = "", *report = NULL, *answer = NULL;
    json_t *m = NULL;
    int rc = 0;
    fprintf(stderr, "$ %s\n", cmd);
    if (!consent(s, cmd, typed)) {
        fprintf(stderr, "[not run]\n");
        goto out;
    }
    rc = shell_run(cmd, s->cfg->shell_timeout_s, s->cfg->shell_output_bytes, s->cancel, &r, err,
                   sizeof(err));
    if (rc < 0) {
        turn_report(rc, err);
        goto out;
    }
    show_run(s, &r);
    if (r.cancelled) {
        rc = -ECANCELED;
        goto out;
    }
    rc = -ENOMEM;
    if (!(report = run_report(request, cmd, &r)) ||
        !(m = session_request_messages(s, NULL, report)))
        goto out;
    struct llm_opts o = LLM_OPTS_DEFAULT;
    if ((rc = turn_stream(s, m, &o, &answer, NULL)) == 0)
        rc = session_remember(s, "shell", request, answer);
out:
    free(answer);
    json_decref(m);
    free(report);
    shell_result_release(&r);
    return rc;
}

int turn_shell(struct session *s, const char *request) {
    char system[1024], cwd[512], *reply = NULL, *cmd = NULL;
    struct utsname u;
    if (uname(&u) < 0)
        snprintf(u.sysname, sizeof(u.sysname), "Linux");
    if (!getcwd(cwd, sizeof(cwd)))
        snprintf(cwd, sizeof(cwd), ".");
    snprintf(system, sizeof(system),
             "You turn a request into one shell command for %s %s (/bin/sh), run in the "
             "directory %s. Answer with the command only: one line, no explanation, no code "
             "fences. Prefer read-only commands. Examples:\n"
             "what files are here -> ls -la\n"
             "how much disk space is free -> df -h\n"
             "which processes use the most memory -> ps aux --sort=-rss | head -n 5\n"
             "how many lines are in main.c -> wc -l main.c",
             u.sysname, u.machine, cwd);
    int rc = ask(s, system, request, 128, &reply);
    if (rc < 0)
        return rc;
    if (!(cmd = turn_command_clean(reply))) {
        rc = -ENOMEM;
    } else if (!*cmd) {
        fprintf(stderr, "sniper: the model wrote no command\n");
        rc = -EPROTO;
    } else {
        rc = turn_command(s, request, cmd, false);
    }
    free(cmd);
    free(reply);
    return rc;
}

/* ---- routing ---- */

int turn_handle(struct session *s, const char *line) {
    if (line[0] == '!') {
        const char *cmd = line + 1;
        while (isspace((unsigned char)*cmd))
            cmd++;
        if (!*cmd) {
            fprintf(stderr, "sniper: usage: !command\n");
            return -EINVAL;
        }
        return turn_command(s, line, cmd, true);
    }
    if (s->raw)
        return turn_chat(s, line, "raw");
    enum route r;
    struct llm_stats st = { 0 };
    char err[512] = "";
    int rc = router_classify(&s->llm, line, &r, &st, err, sizeof(err));
    session_count(s, &st);
    if (rc == -ECONNREFUSED || rc == -ECANCELED || rc == -ETIMEDOUT ||
        (rc == -EPROTO && strstr(err, "answered 401"))) {
        turn_report(rc, err);
        return rc;
    }
    if (rc < 0)
        fprintf(stderr, "sniper: routing failed (%s): answering as chat\n", err);
    fprintf(stderr, "[route: %s]\n", route_name(r));
    switch (r) {
    case ROUTE_SEARCH: return turn_search(s, line, NULL);
    case ROUTE_SHELL: return turn_shell(s, line);
    case ROUTE_CHAT: break;
    }
    return turn_chat(s, line, "chat");
}
