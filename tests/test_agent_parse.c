/* test_agent_parse.c - the agent's pure parsers and files: the router's one word, the command and
 * query in a model's reply, DuckDuckGo HTML and SearXNG JSON results (golden pages, broken ones),
 * context names, the config file, conversations saved and loaded, the grade log, `sniper top`'s
 * frame and rates. */
#include "commands.h"
#include "config.h"
#include "grades.h"
#include "harness.h"
#include "router.h"
#include "search.h"
#include "session.h"
#include "top.h"
#include "turn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_route_parse(void) {
    CHECK_EQ_INT(route_parse("search"), ROUTE_SEARCH);
    CHECK_EQ_INT(route_parse("Shell."), ROUTE_SHELL);
    CHECK_EQ_INT(route_parse("  SEARCH\n"), ROUTE_SEARCH);
    CHECK_EQ_INT(route_parse("\"shell\""), ROUTE_SHELL);
    CHECK_EQ_INT(route_parse("chat"), ROUTE_CHAT);
    CHECK_EQ_INT(route_parse("shellfish"), ROUTE_CHAT);
    CHECK_EQ_INT(route_parse("searching"), ROUTE_CHAT);
    CHECK_EQ_INT(route_parse("banana"), ROUTE_CHAT);
    CHECK_EQ_INT(route_parse(""), ROUTE_CHAT);
    CHECK_EQ_INT(route_parse(NULL), ROUTE_CHAT);
    CHECK_STR(route_name(ROUTE_SHELL), "shell");
    CHECK_STR(route_name(ROUTE_SEARCH), "search");
    CHECK_STR(route_name(ROUTE_CHAT), "chat");
}

static void check_clean(char *(*fn)(const char *), const char *in, const char *want) {
    char *got = fn(in);
    CHECK_STR(got, want);
    free(got);
}

static void test_command_clean(void) {
    check_clean(turn_command_clean, "ls -la", "ls -la");
    check_clean(turn_command_clean, "```sh\ndf -h\n```", "df -h");
    check_clean(turn_command_clean, "```\n\n  du -sh .  \n```\n", "du -sh .");
    check_clean(turn_command_clean, "$ pwd", "pwd");
    check_clean(turn_command_clean, "`uname -a`", "uname -a");
    check_clean(turn_command_clean, "ls\nrm -rf /", "ls");
    check_clean(turn_command_clean, "```", "");
    check_clean(turn_command_clean, NULL, "");
}

static void test_query_clean(void) {
    check_clean(search_query_clean, "\"paris weather\"", "paris weather");
    check_clean(search_query_clean, "Query: libuv 1.48 release\nextra", "libuv 1.48 release");
    check_clean(search_query_clean, "  'x y'  ", "x y");
    check_clean(search_query_clean, "", "");
}

static const char DDG_PAGE[] =
    "<html><body><div class=\"results\">"
    "<div class=\"result\"><h2><a class=\"result__a\" "
    "href=\"//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.example%2Fx%3Fy%3D1&amp;rut=z\">First "
    "<b>hit</b></a></h2><a class=\"result__snippet\">Snippet   one\n &amp; more</a></div>"
    "<div class=\"result\"><h2><a class=\"result__a\" href=\"https://b.example/\">Second</a></h2>"
    "</div>"
    "<div class=\"result\"><h2><a class=\"other result__a\" href=\"//c.example/p\">Third</a></h2>"
    "<a class=\"result__snippet\">Three</a><a class=\"result__snippet\">not this</a></div>"
    "<div><a class=\"result__a\">no href</a></div>"
    "<div class=\"result\"><a class=\"result__a\" href=\"https://d.example\">Fourth</a></div>"
    "</div></body></html>";

static void test_ddg(void) {
    struct search_results r;
    char err[256] = "";
    CHECK_EQ_INT(search_parse_ddg_html(DDG_PAGE, strlen(DDG_PAGE), 10, &r, err, sizeof(err)), 0);
    CHECK_EQ_INT(r.n, 4);
    if (r.n == 4) {
        CHECK_STR(r.v[0].title, "First hit");
        CHECK_STR(r.v[0].url, "https://a.example/x?y=1");
        CHECK_STR(r.v[0].snippet, "Snippet one & more");
        CHECK_STR(r.v[1].title, "Second");
        CHECK_STR(r.v[1].url, "https://b.example/");
        CHECK_STR(r.v[1].snippet, "");
        CHECK_STR(r.v[2].url, "https://c.example/p");
        CHECK_STR(r.v[2].snippet, "Three");
        CHECK_STR(r.v[3].title, "Fourth");
    }
    search_results_release(&r);
    CHECK_EQ_INT(search_parse_ddg_html(DDG_PAGE, strlen(DDG_PAGE), 2, &r, err, sizeof(err)), 0);
    CHECK_EQ_INT(r.n, 2);
    search_results_release(&r);
    /* broken and empty pages: no results, no crash */
    const char *broken[] = { "<html><a class=\"result__a\" href=\"x", "", "\x01\x02\xff<<<>>>",
                             "<a class=result__a href=/u>t" };
    for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
        int rc = search_parse_ddg_html(broken[i], strlen(broken[i]), 5, &r, err, sizeof(err));
        CHECK(rc == 0 || rc == -EPROTO);
        CHECK(r.n <= 1);
        search_results_release(&r);
    }
}

static void test_searxng(void) {
    struct search_results r;
    char err[256] = "";
    const char ok[] = "{\"results\": [{\"title\": \"A\", \"url\": \"https://a\", \"content\": "
                      "\"one\"}, {\"url\": \"https://b\"}, {\"title\": \"no url\"}, "
                      "{\"title\": \"C\", \"url\": \"https://c\", \"content\": 3}]}";
    CHECK_EQ_INT(search_parse_searxng_json(ok, strlen(ok), 10, &r, err, sizeof(err)), 0);
    CHECK_EQ_INT(r.n, 3);
    if (r.n == 3) {
        CHECK_STR(r.v[0].title, "A");
        CHECK_STR(r.v[0].snippet, "one");
        CHECK_STR(r.v[1].title, "https://b");
        CHECK_STR(r.v[2].snippet, "");
    }
    search_results_release(&r);
    const char *bad[] = { "", "{", "[]", "{\"results\": 3}", "null" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ_INT(search_parse_searxng_json(bad[i], strlen(bad[i]), 5, &r, err, sizeof(err)),
                     -EPROTO);
        CHECK(strstr(err, "SearXNG") != NULL);
    }
    enum search_backend b;
    CHECK(search_backend_parse("duckduckgo", &b) == 0 && b == SEARCH_DUCKDUCKGO);
    CHECK(search_backend_parse("searxng", &b) == 0 && b == SEARCH_SEARXNG);
    CHECK_EQ_INT(search_backend_parse("bing", &b), -EINVAL);
}

static void test_page_text(void) {
    const char page[] = "<html><head><title>x</title><script>bad()</script></head><body>"
                        "<p>Hello,\n  <b>world</b>.</p><style>p{}</style><noscript>no</noscript>"
                        "<div>caf\xc3\xa9</div></body></html>";
    char *t = search_page_text(page, strlen(page), 1000);
    CHECK_STR(t, "Hello, world . caf\xc3\xa9");
    free(t);
    t = search_page_text(page, strlen(page), 19);   /* would cut the two-byte e-acute */
    CHECK_STR(t, "Hello, world . caf");
    free(t);
    t = search_page_text("", 0, 100);
    CHECK(t == NULL || strcmp(t, "") == 0);
    free(t);
}

static void test_context_names(void) {
    CHECK(commands_context_name_ok("proj-1.v2_x"));
    CHECK(!commands_context_name_ok(""));
    CHECK(!commands_context_name_ok(".hidden"));
    CHECK(!commands_context_name_ok("../x"));
    CHECK(!commands_context_name_ok("a/b"));
    CHECK(!commands_context_name_ok("a b"));
    char long_name[66];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    CHECK(!commands_context_name_ok(long_name));
    long_name[64] = '\0';
    CHECK(commands_context_name_ok(long_name));
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_config(void) {
    char path[512], err[256] = "";
    struct agent_config c;
    snprintf(path, sizeof(path), "%s/agent.json", test_tmpdir());
    CHECK_EQ_INT(config_init(&c), 0);
    CHECK_STR(c.server, "http://127.0.0.1:8080");
    CHECK_STR(c.search_backend, "duckduckgo");
    write_text(path, "{\"server\": \"http://h:1/v1/\", \"model\": \"m\", \"timeout_s\": 2.5, "
                     "\"shell_output_bytes\": 100, \"yes\": true, \"api_key\": null}");
    CHECK_EQ_INT(config_load_file(&c, path, err, sizeof(err)), 0);
    config_normalize_server(&c);
    CHECK_STR(c.server, "http://h:1");
    CHECK_STR(c.model, "m");
    CHECK_NEAR(c.timeout_s, 2.5, 0);
    CHECK_EQ_INT(c.shell_output_bytes, 100);
    CHECK(c.yes);
    CHECK(c.api_key == NULL);
    const char *bad[] = { "{\"server\": 3}", "{\"timeout_s\": \"x\"}", "{\"timeout_s\": -1}",
                          "{\"shell_output_bytes\": 0}", "{\"yes\": 1}", "{\"sever\": \"x\"}",
                          "[1]", "{", "" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_text(path, bad[i]);
        err[0] = '\0';
        CHECK_MSG(config_load_file(&c, path, err, sizeof(err)) == -EINVAL, "accepted %s", bad[i]);
        CHECK(err[0] != '\0');
    }
    snprintf(path, sizeof(path), "%s/nosuch.json", test_tmpdir());
    CHECK_EQ_INT(config_load_file(&c, path, err, sizeof(err)), -ENOENT);
    config_release(&c);
    config_release(NULL);
}

static void test_conversation_file(void) {
    struct agent_config c;
    struct session s;
    volatile sig_atomic_t cancel = 0;
    char path[512], err[256] = "";
    CHECK_EQ_INT(config_init(&c), 0);
    CHECK_EQ_INT(session_init(&s, &c, NULL, &cancel), 0);
    CHECK_EQ_INT(session_remember(&s, "chat", "q1", "a1"), 0);
    CHECK_EQ_INT(session_remember(&s, "shell", "q2", "a2"), 0);
    free(s.system_prompt);
    s.system_prompt = strdup("be brief");
    snprintf(path, sizeof(path), "%s/conv.json", test_tmpdir());
    CHECK_EQ_INT(session_save(&s, path, err, sizeof(err)), 0);
    session_clear(&s);
    CHECK_EQ_INT(json_array_size(s.messages), 0);
    CHECK_EQ_INT(session_load(&s, path, err, sizeof(err)), 4);
    CHECK_STR(s.system_prompt, "be brief");
    json_t *m = session_request_messages(&s, "extra", "q3");
    CHECK_EQ_INT(json_array_size(m), 7);
    CHECK_STR(json_string_value(json_object_get(json_array_get(m, 0), "content")), "be brief");
    CHECK_STR(json_string_value(json_object_get(json_array_get(m, 1), "content")), "extra");
    CHECK_STR(json_string_value(json_object_get(json_array_get(m, 5), "content")), "a2");
    CHECK_STR(json_string_value(json_object_get(json_array_get(m, 6), "content")), "q3");
    json_decref(m);
    write_text(path, "{\"messages\": [{\"role\": \"user\"}]}");
    CHECK(session_load(&s, path, err, sizeof(err)) < 0);
    CHECK_EQ_INT(json_array_size(s.messages), 4);   /* unchanged after a failed load */
    write_text(path, "not json");
    CHECK(session_load(&s, path, err, sizeof(err)) < 0);
    session_release(&s);
    config_release(&c);
}

static void test_grades(void) {
    char path[512], err[256] = "";
    snprintf(path, sizeof(path), "%s/sub/dir/grades.jsonl", test_tmpdir());
    struct grade g = { "good", "chat", "m", "q1", "a1", NULL };
    CHECK_EQ_INT(grades_append(path, &g, err, sizeof(err)), 0);
    g.grade = "bad";
    g.route = "search";
    g.request = "weather?";
    g.note = "stale";
    CHECK_EQ_INT(grades_append(path, &g, err, sizeof(err)), 0);
    FILE *f = fopen(path, "a");
    if (f) {
        fputs("garbage line\n", f);
        fclose(f);
    }
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    CHECK_EQ_INT(grades_summary(path, out, err, sizeof(err)), 0);
    fclose(out);
    CHECK(strstr(text, "chat            1      0    100%") != NULL);
    CHECK(strstr(text, "search          0      1      0%") != NULL);
    CHECK(strstr(text, "(1 unreadable lines skipped)") != NULL);
    CHECK(strstr(text, "  - weather?") != NULL);
    free(text);
}

/* top_print of stats into a fresh string (caller frees). */
static char *top_frame(const char *stats_json, const struct top_rates *r) {
    json_t *s = json_loads(stats_json, 0, NULL);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    CHECK(s && f);
    if (s && f)
        top_print(f, s, r, "http://h:1", "\n");
    if (f)
        fclose(f);
    json_decref(s);
    return buf;
}

static void check_has(const char *text, const char *want) {
    CHECK_MSG(text && strstr(text, want), "no \"%s\" in:\n%s", want, text ? text : "(null)");
}

static void test_top(void) {
    const char *full =
        "{\"model\":\"m1\",\"uptime_s\":3725,\"requests\":7,\"errors\":1,\"completions\":5,"
        "\"cancelled\":2,\"queue\":3,\"busy\":true,\"tokens\":{\"prompt\":100,\"cached\":40,"
        "\"completion\":50},\"prefill_tokens_per_s\":600.25,\"decode_tokens_per_s\":20.5,"
        "\"rss_bytes\":1073741824,\"ram_budget_bytes\":4294967296,\"n_ctx\":4096,"
        "\"experts\":{\"streaming\":true,\"hits\":90,\"misses\":10,\"hit_rate\":0.9,"
        "\"bytes_read\":10485760,\"read_MBps\":812.3,\"io_wait_s\":1.5,\"prefetch_used\":4,"
        "\"prefetch_issued\":6,\"slots\":64,\"slot_bytes\":2097152,\"bytes_per_token\":1048576},"
        "\"transfer\":{\"kind\":\"upload\",\"name\":\"demo\",\"done_bytes\":512,"
        "\"total_bytes\":2048},\"parallel\":3,\"slots\":[{\"id\":0,\"state\":\"decode\","
        "\"decode_tokens_per_s\":12.34},{\"id\":1,\"state\":\"prefill\"},{\"id\":2,"
        "\"state\":\"idle\"}],\"step\":{\"avg_batch_tokens\":2.5,\"avg_batch_sequences\":2,"
        "\"avg_union_experts\":9.25,\"bytes_read_per_step\":3145728},\"models\":[{\"id\":\"m1\","
        "\"state\":\"loaded\"},{\"id\":\"m2\",\"state\":\"loading\",\"progress\":0.25},"
        "{\"id\":\"bad\",\"state\":\"failed\"}]}";
    struct top_rates r = { .valid = true, .prefill_tps = 10, .decode_tps = 2.5, .read_MBps = 3 };
    char *t = top_frame(full, &r);
    check_has(t, "sniper top  http://h:1\n");
    check_has(t, "model      m1, context 4096 tokens\n");
    check_has(t, "models     1 of 3 loaded: m1 (loaded), m2 (loading 25%), bad (failed)\n");
    check_has(t, "uptime     1h 02m 05s\n");
    check_has(t, "requests   7 (1 errors), 5 completions, 2 cancelled\n");
    check_has(t, "queue      3 waiting, busy\n");
    check_has(t, "tokens     prompt 100 (40 cached), completion 50\n");
    check_has(t, "prefill    600.2 tok/s avg, 10.0 now\n");
    check_has(t, "decode     20.5 tok/s avg, 2.5 now\n");
    check_has(t, "memory     RSS 1.0 GiB of 4.0 GiB budget (25 %) [#####...............]\n");
    check_has(t, "experts    hit rate 90.0 % (90 hits, 10 misses), 64 slots of 2.0 MiB\n");
    check_has(t, "reads      1.0 MiB per token, 812.3 MB/s avg, 3.0 now, 10.0 MiB in all\n");
    check_has(t, "I/O wait   1.500 s, prefetch 4 used of 6 issued\n");
    check_has(t, "transfer   upload demo: 512 B of 2.0 KiB (25 %) [#####...............]\n");
    check_has(t, "slots      2 of 3 active: 0 decode 12.3 tok/s, 1 prefill, 2 idle\n");
    check_has(t, "step       2.5 tokens of 2.0 sequences, 9.2 experts a layer; 3.0 MiB read a "
                 "step\n");
    free(t);
    /* another server's stats: what is missing shows as "-", nothing crashes */
    t = top_frame("{\"requests\": 3, \"fake\": true}", NULL);
    check_has(t, "model      -, context - tokens\n");
    check_has(t, "requests   3 (- errors), - completions, - cancelled\n");
    check_has(t, "queue      - waiting, -\n");
    check_has(t, "decode     - tok/s avg\n");
    check_has(t, "memory     RSS -, no budget\n");
    check_has(t, "experts    all in RAM");
    check_has(t, "transfer   none\n");
    check_has(t, "slots      -\n");
    free(t);

    json_t *a = json_loads("{\"tokens\":{\"prompt\":10,\"cached\":0,\"completion\":5},"
                           "\"experts\":{\"bytes_read\":1000000}}", 0, NULL);
    json_t *b = json_loads("{\"tokens\":{\"prompt\":30,\"cached\":10,\"completion\":25},"
                           "\"experts\":{\"bytes_read\":5000000}}", 0, NULL);
    r = top_rates_between(a, b, 2.0);
    CHECK(r.valid);
    CHECK_NEAR(r.prefill_tps, 5, 1e-9);
    CHECK_NEAR(r.decode_tps, 10, 1e-9);
    CHECK_NEAR(r.read_MBps, 2, 1e-9);
    CHECK(!top_rates_between(b, a, 2.0).valid); /* counters went back: a restart */
    CHECK(!top_rates_between(a, b, 0).valid);
    json_decref(a);
    json_decref(b);
}

static const struct test_case cases[] = {
    { "route_parse", test_route_parse },
    { "command_clean", test_command_clean },
    { "query_clean", test_query_clean },
    { "ddg", test_ddg },
    { "searxng", test_searxng },
    { "page_text", test_page_text },
    { "context_names", test_context_names },
    { "config", test_config },
    { "conversation_file", test_conversation_file },
    { "grades", test_grades },
    { "top", test_top },
    { 0 },
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
