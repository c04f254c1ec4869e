/* test_chat.c - chat templates and the output splitter: chat_render against the strings jinja2
 * renders from the real templates (tests/chat/expected.json, made by tests/chat/gen_expected.py),
 * render errors, family detection on the fixture's template, the family table (names, message
 * starts), and chat_stream fed at every split point and byte by byte (tags split across feeds,
 * unfinished tags, several tool calls). */
#include "chat.h"
#include "gguf.h"
#include "harness.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECTED_JSON "tests/chat/expected.json"

static json_t *load_expected(void) {
    json_error_t je;
    json_t *doc = json_load_file(EXPECTED_JSON, 0, &je);
    CHECK_MSG(doc != NULL, "%s: %s (line %d)", EXPECTED_JSON, je.text, je.line);
    return doc;
}

/* Borrowed strings of a JSON member, or NULL. */
static const char *str_or_null(const json_t *o, const char *key) {
    return json_string_value(json_object_get(o, key));
}

/* Fills msgs from one case's messages; tool_calls are dumped into calls[i] (caller frees). */
static size_t case_messages(const json_t *c, struct chat_message *msgs, char **calls, size_t cap) {
    const json_t *arr = json_object_get(c, "messages");
    size_t i;
    json_t *m;
    json_array_foreach(arr, i, m) {
        if (i >= cap)
            break;
        const json_t *tc = json_object_get(m, "tool_calls");
        calls[i] = tc ? json_dumps(tc, JSON_COMPACT) : NULL;
        msgs[i] = (struct chat_message){
            .role = str_or_null(m, "role"), .content = str_or_null(m, "content"),
            .reasoning_content = str_or_null(m, "reasoning_content"), .tool_calls_json = calls[i],
            .tool_call_id = str_or_null(m, "tool_call_id"), .name = str_or_null(m, "name")};
    }
    return json_array_size(arr);
}

static void report_diff(const char *name, const char *got, const char *want) {
    size_t k = 0;
    while (got[k] && got[k] == want[k])
        k++;
    test_fail(__FILE__, __LINE__, "%s: differs at byte %zu:\n--- got\n%s\n--- want\n%s", name, k,
              got + (k > 40 ? k - 40 : 0), want + (k > 40 ? k - 40 : 0));
}

static void render_case(const json_t *c) {
    struct chat_message msgs[16];
    char *calls[16] = {0}, err[256] = "";
    const char *name = str_or_null(c, "name"), *want = str_or_null(c, "expected");
    size_t n = case_messages(c, msgs, calls, 16);
    const json_t *tools = json_object_get(c, "tools");
    char *tools_json = json_is_array(tools) ? json_dumps(tools, 0) : NULL;
    struct chat_render_opts o = {
        .add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt")),
        .enable_thinking = json_is_true(json_object_get(c, "enable_thinking")),
        .tools_json = tools_json, .reasoning_effort = str_or_null(c, "reasoning_effort"),
        .date = str_or_null(c, "date")};
    const char *fam = str_or_null(c, "family");
    enum chat_family f = strcmp(fam, "llama3") == 0    ? CHAT_LLAMA3
                         : strcmp(fam, "qwen35") == 0  ? CHAT_QWEN35
                         : strcmp(fam, "harmony") == 0 ? CHAT_HARMONY
                         : strcmp(fam, "gemma4") == 0  ? CHAT_GEMMA4
                         : strcmp(fam, "gemma4-interleaved") == 0 ? CHAT_GEMMA4_INTERLEAVED
                                                       : CHAT_CHATML;
    char *got = chat_render(f, msgs, n, &o, err, sizeof(err));
    CHECK_MSG(got != NULL, "%s: %s", name, err);
    if (got && want && strcmp(got, want) != 0)
        report_diff(name, got, want);
    free(got);
    free(tools_json);
    for (size_t i = 0; i < 16; i++)
        free(calls[i]);
}

static void test_render_golden(void) {
    json_t *doc = load_expected();
    size_t i, n_chatml = 0, n_llama = 0, n_qwen35 = 0, n_harmony = 0, n_gemma4 = 0, n_g4i = 0;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        render_case(c);
        const char *fam = str_or_null(c, "family");
        n_chatml += strcmp(fam, "chatml") == 0;
        n_qwen35 += strcmp(fam, "qwen35") == 0;
        n_llama += strcmp(fam, "llama3") == 0;
        n_harmony += strcmp(fam, "harmony") == 0;
        n_gemma4 += strcmp(fam, "gemma4") == 0;
        n_g4i += strcmp(fam, "gemma4-interleaved") == 0;
    }
    CHECK(n_chatml >= 12);
    CHECK(n_qwen35 >= 12);
    CHECK(n_llama >= 3);
    CHECK(n_harmony >= 15);
    CHECK(n_gemma4 >= 20);
    CHECK(n_g4i >= 26);
    json_decref(doc);
}

/* The fixture's template is the one the goldens were rendered from, and is detected as ChatML. */
static void test_family_fixture(void) {
    char path[4096], err[256];
    const char *dir = test_fixtures_dir();
    if (!dir) {
        test_skip("fixtures absent: the fixture's chat template is not checked");
        return;
    }
    snprintf(path, sizeof(path), "%s/models/tiny-qwen3moe-q8_0.gguf", dir);
    struct gguf *g = gguf_open(path, err, sizeof(err));
    CHECK_MSG(g != NULL, "%s", err);
    if (!g)
        return;
    const char *tmpl = gguf_get_str(g, "tokenizer.chat_template");
    json_t *doc = load_expected();
    CHECK(tmpl != NULL);
    CHECK_MSG(tmpl && strcmp(tmpl, str_or_null(doc, "qwen3_template")) == 0,
              "the fixture's template changed: run tests/chat/gen_expected.py");
    CHECK_EQ_INT(chat_family_detect(tmpl), CHAT_CHATML);
    CHECK_EQ_INT(chat_family_detect(str_or_null(doc, "llama3_template")), CHAT_LLAMA3);
    CHECK_EQ_INT(chat_family_detect(str_or_null(doc, "qwen35_template")), CHAT_QWEN35);
    CHECK_EQ_INT(chat_family_detect(str_or_null(doc, "harmony_template")), CHAT_HARMONY);
    CHECK_EQ_INT(chat_family_detect(str_or_null(doc, "gemma4_template")), CHAT_GEMMA4);
    CHECK_EQ_INT(chat_family_detect(str_or_null(doc, "gemma4_interleaved_template")),
                 CHAT_GEMMA4_INTERLEAVED);
    json_decref(doc);
    gguf_free(g);
}

/* sniper-mkmodel's gpt-oss models carry a template of the harmony family. */
static void test_family_gptoss_model(void) {
    char path[4096], err[256];
    if (test_make_model(path, sizeof(path), "tiny-gpt-oss.gguf", "--preset tiny-gpt-oss") < 0)
        return;
    struct gguf *g = gguf_open(path, err, sizeof(err));
    CHECK_MSG(g != NULL, "%s", err);
    CHECK_EQ_INT(chat_family_detect(g ? gguf_get_str(g, "tokenizer.chat_template") : NULL),
                 CHAT_HARMONY);
    gguf_free(g);
}

static void test_family_detect(void) {
    CHECK_EQ_INT(chat_family_detect(NULL), CHAT_CHATML);
    CHECK_EQ_INT(chat_family_detect(""), CHAT_CHATML);
    CHECK_EQ_INT(chat_family_detect("{{ '<|im_start|>' + m.role }}"), CHAT_CHATML);
    CHECK_EQ_INT(chat_family_detect("{{ '<|start_header_id|>' + r + '<|end_header_id|>' + c + "
                                    "'<|eot_id|>' }}"),
                 CHAT_LLAMA3);
    CHECK_STR(chat_family_name(CHAT_CHATML), "chatml");
    CHECK_STR(chat_family_name(CHAT_LLAMA3), "llama3");
    CHECK_STR(chat_family_name(CHAT_QWEN35), "qwen35");
    CHECK_STR(chat_family_name(CHAT_HARMONY), "harmony");
    CHECK_EQ_INT(chat_family_detect("{{ '<|start|>' + role + '<|channel|>final<|message|>' }}"),
                 CHAT_HARMONY);
}

static void expect_render_error(enum chat_family f, const struct chat_message *m, size_t n,
                                const char *tools, const char *needle) {
    char err[256] = "";
    struct chat_render_opts o = {.add_generation_prompt = true, .tools_json = tools};
    char *got = chat_render(f, m, n, &o, err, sizeof(err));
    CHECK_MSG(got == NULL, "rendered where '%s' was expected", needle);
    CHECK_MSG(strstr(err, needle) != NULL, "error '%s' lacks '%s'", err, needle);
    free(got);
}

static void test_render_errors(void) {
    struct chat_message bad_role[] = {{.role = "developer", .content = "x"}};
    struct chat_message no_role[] = {{.content = "x"}};
    struct chat_message lone_tool[] = {{.role = "user", .content = "q"},
                                       {.role = "tool", .content = "r"}};
    struct chat_message first_tool[] = {{.role = "tool", .content = "r"}};
    struct chat_message bad_call[] = {{.role = "user", .content = "q"},
                                      {.role = "assistant", .tool_calls_json = "{"}};
    struct chat_message no_name[] = {{.role = "user", .content = "q"},
                                     {.role = "assistant", .tool_calls_json =
                                      "[{\"function\":{\"arguments\":\"{}\"}}]"}};
    struct chat_message ok[] = {{.role = "user", .content = "q"}};
    expect_render_error(CHAT_CHATML, bad_role, 1, NULL, "unknown role 'developer'");
    expect_render_error(CHAT_CHATML, no_role, 1, NULL, "unknown role");
    expect_render_error(CHAT_CHATML, lone_tool, 2, NULL, "without a preceding tool call");
    expect_render_error(CHAT_CHATML, first_tool, 1, NULL, "without a preceding tool call");
    expect_render_error(CHAT_CHATML, bad_call, 2, NULL, "tool_calls");
    expect_render_error(CHAT_CHATML, no_name, 2, NULL, "tool_calls[0]");
    expect_render_error(CHAT_CHATML, ok, 0, NULL, "no messages");
    expect_render_error(CHAT_CHATML, ok, 1, "{\"a\":1}", "tools");
    expect_render_error(CHAT_CHATML, ok, 1, "[", "tools");
    expect_render_error(CHAT_LLAMA3, ok, 1, "[{\"type\":\"function\"}]", "not supported");
    expect_render_error(CHAT_LLAMA3, bad_call, 2, NULL, "not supported");
    /* harmony: channel markers in a reply, a call without a name, a tool without a function */
    struct chat_message marked[] = {{.role = "user", .content = "q"},
                                    {.role = "assistant", .content = "x<|channel|>final<|message|>y"},
                                    {.role = "user", .content = "q"}};
    struct chat_message marked_r[] = {{.role = "user", .content = "q"},
                                      {.role = "assistant", .content = "y",
                                       .reasoning_content = "<|channel|>analysis<|message|>"}};
    expect_render_error(CHAT_HARMONY, marked, 3, NULL, "channel markers");
    expect_render_error(CHAT_HARMONY, marked_r, 2, NULL, "channel markers");
    expect_render_error(CHAT_HARMONY, no_name, 2, NULL, "tool_calls[0]");
    expect_render_error(CHAT_HARMONY, lone_tool, 2, NULL, "without a preceding tool call");
    expect_render_error(CHAT_HARMONY, ok, 1, "[{\"type\":\"function\"}]", "tools[0]");
    /* Gemma 4's interleaved template: calls that are no array or have no name, a nameless tool */
    struct chat_message obj_call[] = {{.role = "user", .content = "q"},
                                      {.role = "assistant", .tool_calls_json = "{\"a\":[]}"}};
    expect_render_error(CHAT_GEMMA4_INTERLEAVED, bad_call, 2, NULL, "messages[1]: tool_calls");
    expect_render_error(CHAT_GEMMA4_INTERLEAVED, obj_call, 2, NULL, "not a JSON array");
    expect_render_error(CHAT_GEMMA4_INTERLEAVED, no_name, 2, NULL, "tool_calls[0]");
    expect_render_error(CHAT_GEMMA4_INTERLEAVED, lone_tool, 2, NULL, "without a preceding");
    expect_render_error(CHAT_GEMMA4_INTERLEAVED, ok, 1, "[{\"type\":\"function\"}]", "tools[0]");
}

/* The family table: every family's name comes back to it, an unknown one is ChatML, and its
 * message-start marker (the scheduler's checkpoint place, the prefix cut) is the text that opens
 * the generation prompt's assistant header in its own rendering. */
static void test_family_table(void) {
    static const char *const marker[CHAT_N_FAMILIES] = {
        [CHAT_CHATML] = "<|im_start|>", [CHAT_LLAMA3] = "<|start_header_id|>",
        [CHAT_QWEN35] = "<|im_start|>", [CHAT_HARMONY] = "<|start|>", [CHAT_GEMMA4] = "<|turn>",
        [CHAT_GEMMA4_INTERLEAVED] = "<|turn>"};
    static const char *const role[CHAT_N_FAMILIES] = {
        [CHAT_CHATML] = "assistant", [CHAT_LLAMA3] = "assistant", [CHAT_QWEN35] = "assistant",
        [CHAT_HARMONY] = "assistant", [CHAT_GEMMA4] = "model", [CHAT_GEMMA4_INTERLEAVED] = "model"};
    const struct chat_message m[] = {{.role = "user", .content = "hi"}};
    for (int f = CHAT_CHATML; f < CHAT_N_FAMILIES; f++) {
        const char *name = chat_family_name((enum chat_family)f);
        const char *start = chat_family_message_start((enum chat_family)f);
        CHECK_EQ_INT(chat_family_from_name(name), f);
        CHECK_STR(start, marker[f]);
        char err[256] = "";
        char *p = chat_render((enum chat_family)f, m, 1, NULL, err, sizeof(err));
        CHECK_MSG(p != NULL, "%s: %s", name, err);
        const char *last = NULL;
        for (const char *q = p; q && (q = strstr(q, start)); q++)
            last = q;
        CHECK_MSG(last && strncmp(last + strlen(start), role[f], strlen(role[f])) == 0,
                  "%s: the last %s does not open the assistant's header in \"%s\"", name, start,
                  p ? p : "");
        free(p);
    }
    CHECK_STR(chat_family_name(CHAT_N_FAMILIES), "chatml");
    CHECK_STR(chat_family_message_start(CHAT_N_FAMILIES), "<|im_start|>");
    CHECK_EQ_INT(chat_family_from_name("jinja"), -1);
    CHECK_EQ_INT(chat_family_from_name(NULL), -1);
}

/* Arguments that are an object (not a JSON string) are written as tojson writes them. */
/* as_prefix: a conversation rendered as a prefix is the start of the rendering of the same
 * messages with a user turn added (the request that continues a saved context), and differs from
 * the rendering of the messages on their own (Qwen3's last assistant turn keeps its think block). */
static void test_render_prefix(void) {
    struct chat_message conv[] = {{.role = "system", .content = "Be brief."},
                                  {.role = "user", .content = "Read this."},
                                  {.role = "assistant", .content = "Read.",
                                   .reasoning_content = "fine"},
                                  {.role = "user", .content = "And now?"}};
    for (int f = CHAT_CHATML; f < CHAT_N_FAMILIES; f++) {
        char err[256] = "";
        struct chat_render_opts pre = {.enable_thinking = true, .as_prefix = true};
        struct chat_render_opts full = {.add_generation_prompt = true, .enable_thinking = true};
        char *p = chat_render((enum chat_family)f, conv, 3, &pre, err, sizeof(err));
        char *q = chat_render((enum chat_family)f, conv, 4, &full, err, sizeof(err));
        CHECK_MSG(p && q, "%s: %s", chat_family_name((enum chat_family)f), err);
        if (p && q) {
            CHECK_MSG(strncmp(p, q, strlen(p)) == 0, "%s: prefix \"%s\" does not start \"%s\"",
                      chat_family_name((enum chat_family)f), p, q);
            CHECK(strlen(p) > strlen("Read.") && strstr(p, "Read.") != NULL);
            CHECK(strstr(p, "And now?") == NULL);
        }
        free(p);
        free(q);
    }
}

static void test_render_object_arguments(void) {
    struct chat_message m[] = {
        {.role = "user", .content = "q"},
        {.role = "assistant", .tool_calls_json = "[{\"id\":\"c\",\"type\":\"function\",\"function\":"
                                                 "{\"name\":\"f\",\"arguments\":{\"b\":[1,2.5],"
                                                 "\"a\":\"\\u00e9\\n\"}}}]"}};
    char err[256];
    struct chat_render_opts o = {.enable_thinking = true};
    char *got = chat_render(CHAT_CHATML, m, 2, &o, err, sizeof(err));
    CHECK_STR(got, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                   "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"b\": [1, 2.5], \"a\": "
                   "\"\xc3\xa9\\n\"}}\n</tool_call><|im_end|>\n");
    free(got);
}

/* ---- the splitter ---- */

/* The events as one string: R[...] reasoning, C[...] content (runs merged), T[name|args|index]. */
struct rec {
    char buf[4096];
    size_t n;
    int last; /* kind of the last text event, -1 after a tool call */
};

static void rec_put(struct rec *r, const char *s, size_t n) {
    if (r->n + n < sizeof(r->buf)) {
        memcpy(r->buf + r->n, s, n);
        r->n += n;
        r->buf[r->n] = '\0';
    }
}

static void rec_event(void *ctx, const struct chat_event *ev) {
    struct rec *r = ctx;
    CHECK(ev->kind == CHAT_EVENT_TOOL_CALL || ev->len > 0);
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        char t[512];
        if (r->last >= 0)
            rec_put(r, "]", 1);
        int k = snprintf(t, sizeof(t), "T[%s|%s|%d]", ev->name, ev->arguments, ev->index);
        rec_put(r, t, (size_t)k);
        r->last = -1;
        return;
    }
    if (r->last != (int)ev->kind) {
        if (r->last >= 0 && r->n)
            rec_put(r, "]", 1);
        rec_put(r, ev->kind == CHAT_EVENT_CONTENT ? "C[" : "R[", 2);
    }
    r->last = (int)ev->kind;
    rec_put(r, ev->text, ev->len);
}

static void rec_end(struct rec *r) {
    if (r->last >= 0 && r->n)
        rec_put(r, "]", 1);
}

/* Feeds text cut at the given points (cuts[0..n_cuts), increasing) and returns finish's count. */
static int run_stream(enum chat_family f, bool in_think, const char *text, const size_t *cuts,
                      size_t n_cuts, struct rec *r) {
    struct chat_stream *s = chat_stream_new(f, in_think);
    size_t at = 0, len = strlen(text);
    memset(r, 0, sizeof(*r));
    r->last = -1;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        CHECK(chat_stream_feed(s, text + at, end - at, rec_event, r) == 0);
        at = end;
    }
    int n = chat_stream_finish(s, rec_event, r);
    rec_end(r);
    chat_stream_free(s);
    return n;
}

/* Checks the events for text fed whole, split at every byte position, and byte by byte. */
static void expect_stream(enum chat_family f, bool in_think, const char *text, const char *want,
                          int want_tools) {
    struct rec r;
    size_t len = strlen(text), cuts[1024];
    CHECK_EQ_INT(run_stream(f, in_think, text, NULL, 0, &r), want_tools);
    CHECK_MSG(strcmp(r.buf, want) == 0, "whole: got %s, want %s", r.buf, want);
    for (size_t k = 0; k <= len; k++) {
        cuts[0] = k;
        CHECK_EQ_INT(run_stream(f, in_think, text, cuts, 1, &r), want_tools);
        CHECK_MSG(strcmp(r.buf, want) == 0, "cut at %zu: got %s, want %s", k, r.buf, want);
    }
    for (size_t k = 0; k < len && k < 1024; k++)
        cuts[k] = k + 1;
    CHECK_EQ_INT(run_stream(f, in_think, text, cuts, len < 1024 ? len : 1024, &r), want_tools);
    CHECK_MSG(strcmp(r.buf, want) == 0, "bytewise: got %s, want %s", r.buf, want);
}

static void test_stream_think(void) {
    expect_stream(CHAT_CHATML, false, "<think>\nThe user greets.\n</think>\n\nHello world!",
                  "R[The user greets.]C[Hello world!]", 0);
    expect_stream(CHAT_CHATML, false, "<think>\n\n</think>\n\nHi", "C[Hi]", 0);
    expect_stream(CHAT_CHATML, true, "still thinking\n\n</think>\n\nDone.",
                  "R[still thinking]C[Done.]", 0);
    expect_stream(CHAT_CHATML, false, "<think>only thoughts</think>", "R[only thoughts]", 0);
    expect_stream(CHAT_CHATML, false, "<think>only\nthoughts\n</think>\n\n", "R[only\nthoughts]", 0);
    expect_stream(CHAT_CHATML, false, "<think>a <b> </thin c</think>x", "R[a <b> </thin c]C[x]", 0);
}

static void test_stream_content(void) {
    expect_stream(CHAT_CHATML, false, "Plain answer, a < b <= c; <th> <tool>",
                  "C[Plain answer, a < b <= c; <th> <tool>]", 0);
    expect_stream(CHAT_CHATML, false, "\n\nLeading newlines dropped\n", "C[Leading newlines dropped\n]",
                  0);
    expect_stream(CHAT_CHATML, false, "utf-8: 日本語 🇫🇷", "C[utf-8: 日本語 🇫🇷]", 0);
    expect_stream(CHAT_CHATML, false, "", "", 0);
}

static void test_stream_unfinished(void) {
    expect_stream(CHAT_CHATML, false, "Hello <thi", "C[Hello <thi]", 0);
    expect_stream(CHAT_CHATML, false, "Hello <tool_ca", "C[Hello <tool_ca]", 0);
    expect_stream(CHAT_CHATML, false, "<think>deep </thi", "R[deep </thi]", 0);
    expect_stream(CHAT_CHATML, false, "<think>deep\n", "R[deep\n]", 0);
    expect_stream(CHAT_CHATML, false, "Hi <tool_call>\n{\"name\": \"f\"",
                  "C[Hi<tool_call>\n{\"name\": \"f\"]", 0);
}

static void test_stream_tool_calls(void) {
    expect_stream(CHAT_CHATML, false,
                  "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                  "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", "
                  "\"arguments\": {}}\n</tool_call>",
                  "C[Let me check.]T[get_weather|{\"city\":\"Paris\"}|0]T[search|{}|1]", 2);
    expect_stream(CHAT_CHATML, false,
                  "<think>\nneed a tool\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
                  "{\"x\": [1, \"</tool\"]}}\n</tool_call>",
                  "R[need a tool]T[f|{\"x\":[1,\"</tool\"]}|0]", 1);
    expect_stream(CHAT_CHATML, false,
                  "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}</tool_call> after",
                  "T[f|{\"a\":1}|0]C[after]", 1);
    expect_stream(CHAT_CHATML, false, "<tool_call>\nnot json\n</tool_call>",
                  "C[<tool_call>\nnot json\n</tool_call>]", 0);
    expect_stream(CHAT_CHATML, false, "<tool_call>{\"arguments\": {}}</tool_call>",
                  "C[<tool_call>{\"arguments\": {}}</tool_call>]", 0);
}

/* Qwen3.5: the reply starts inside <think> (its generation prompt opened it) unless thinking is
 * off; tool calls come as <function=NAME><parameter=KEY>VALUE</parameter></function>, values that
 * are JSON texts as those values, the rest as strings. */
static void test_stream_qwen35(void) {
    expect_stream(CHAT_QWEN35, true, "the user greets\n</think>\n\nHello!",
                  "R[the user greets]C[Hello!]", 0);
    expect_stream(CHAT_QWEN35, false, "Hello!", "C[Hello!]", 0);
    expect_stream(CHAT_QWEN35, true,
                  "need weather\n</think>\n\nChecking.\n\n<tool_call>\n<function=get_weather>\n"
                  "<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
                  "<parameter=opts>\n{\"metric\": true}\n</parameter>\n</function>\n</tool_call>\n"
                  "<tool_call>\n<function=now>\n</function>\n</tool_call>",
                  "R[need weather]C[Checking.]T[get_weather|{\"city\":\"New York\",\"days\":3,"
                  "\"opts\":{\"metric\":true}}|0]T[now|{}|1]", 2);
    expect_stream(CHAT_QWEN35, false,
                  "<tool_call>\n<function=f>\n<parameter=text>\nline 1\nline 2\n</parameter>\n"
                  "</function>\n</tool_call>",
                  "T[f|{\"text\":\"line 1\\nline 2\"}|0]", 1);
    expect_stream(CHAT_QWEN35, false, "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
                  "C[<tool_call>\n{\"name\": \"f\"}\n</tool_call>]", 0);
}

/* gpt-oss (harmony): the reply continues the prompt's "<|start|>assistant". The analysis channel
 * is reasoning; final, and a commentary preamble, are content; a message to functions.NAME (the
 * recipient in the role or in the channel header) is a tool call whose arguments end at <|call|>
 * (or at the end of the reply, since <|call|> ends generation); other recipients are content. */
static void test_stream_harmony(void) {
    const enum chat_family h = CHAT_HARMONY;
    expect_stream(h, false, "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant"
                  "<|channel|>final<|message|>Hello!", "R[The user greets.]C[Hello!]", 0);
    expect_stream(h, false, "<|channel|>final<|message|>Done.<|return|>", "C[Done.]", 0);
    expect_stream(h, false, "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>"
                  "assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                  "{\"city\": \"Paris\"}", "R[Need the weather.]T[get_weather|{\"city\":\"Paris\"}|0]",
                  1);
    expect_stream(h, false, "<|channel|>commentary to=functions.search <|constrain|>json<|message|>"
                  "{\"q\":\"x\"}<|call|>", "T[search|{\"q\":\"x\"}|0]", 1);
    expect_stream(h, false, " to=functions.now<|channel|>commentary json<|message|>{}",
                  "T[now|{}|0]", 1);
    expect_stream(h, false, "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant"
                  " to=functions.a<|channel|>commentary json<|message|>{\"x\": [1, 2]}<|end|>"
                  "<|start|>assistant to=functions.b<|channel|>commentary json<|message|>not json",
                  "C[Checking both.]T[a|{\"x\":[1,2]}|0]T[b|not json|1]", 2);
    expect_stream(h, false, "<|channel|>analysis<|message|>x<|end|><|start|>assistant "
                  "to=browser.search<|channel|>analysis<|message|>{\"query\":\"q\"}<|call|>",
                  "R[x]C[{\"query\":\"q\"}]", 0);
    expect_stream(h, false, "<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final"
                  "<|message|>日本語 🇫🇷\n", "C[日本語 🇫🇷\n]", 0);
}

/* Gemma 4: the thought channel is reasoning, a call's body in the template's notation becomes
 * JSON arguments (strings, numbers, booleans, nested objects and arrays, quoted keys), a body that
 * is not a call stays content with its tags, an unfinished call is content. */
static void test_stream_gemma4(void) {
    const enum chat_family g = CHAT_GEMMA4;
    expect_stream(g, false, "<|channel>thought\nThe user greets.\n<channel|>Hello!",
                  "R[The user greets.]C[Hello!]", 0);
    expect_stream(g, false, "Hi <there> <|channel", "C[Hi <there> <|channel]", 0);
    expect_stream(g, false, "<|channel>thought\nNeed it.<channel|><|tool_call>call:get_weather"
                  "{city:<|\"|>Paris, \"FR\"<|\"|>,days:3}<tool_call|>",
                  "R[Need it.]T[get_weather|{\"city\":\"Paris, \\\"FR\\\"\",\"days\":3}|0]", 1);
    expect_stream(g, false, "Checking. <|tool_call>call:a{x:[1,2.5,<|\"|>]}<|\"|>],o:{deep:true,"
                  "n:null},<|\"|>k y<|\"|>:-4}<tool_call|><|tool_call>call:now{}<tool_call|>",
                  "C[Checking.]T[a|{\"x\":[1,2.5,\"]}\"],\"o\":{\"deep\":true,\"n\":null},"
                  "\"k y\":-4}|0]T[now|{}|1]", 2);
    expect_stream(g, false, "<|tool_call>call:f{city:Paris}<tool_call|>",
                  "T[f|{\"city\":\"Paris\"}|0]", 1);
    expect_stream(g, false, "<|tool_call>not a call<tool_call|>",
                  "C[<|tool_call>not a call<tool_call|>]", 0);
    expect_stream(g, false, "<|tool_call>call:f{x:<|\"|>1<|\"|>", "C[<|tool_call>call:f{x:<|\"|>1<|\"|>]",
                  0);
}

/* What is not harmony is content, and nothing is lost: text with no header, an unfinished header
 * or end tag, text with '<' and '<|' in it, a header too long to be one. */
static void test_stream_harmony_unfinished(void) {
    const enum chat_family h = CHAT_HARMONY;
    char longer[400], want[410];
    expect_stream(h, false, "<|channel|>final<|message|>a < b <| c <|en", "C[a < b <| c <|en]", 0);
    expect_stream(h, false, "Hello world", "C[Hello world]", 0);
    expect_stream(h, false, "<|channel|>analy", "C[<|channel|>analy]", 0);
    expect_stream(h, false, "<|channel|>analysis<|message|>still thinking <|end",
                  "R[still thinking <|end]", 0);
    expect_stream(h, false, "", "", 0);
    memset(longer, 'x', 300);
    strcpy(longer + 300, "<|end|>tail");
    snprintf(want, sizeof(want), "C[%.300s%s]", longer, "tail");
    expect_stream(h, false, longer, want, 0);
}

static void test_stream_llama3(void) {
    expect_stream(CHAT_LLAMA3, false, "<think>not special</think> <tool_call>x",
                  "C[<think>not special</think> <tool_call>x]", 0);
    expect_stream(CHAT_LLAMA3, false, "\nHello", "C[\nHello]", 0);
}

static const struct test_case cases[] = {
    {"family_table", test_family_table},
    {"render_prefix", test_render_prefix},
    {"render_golden", test_render_golden},
    {"family_fixture", test_family_fixture},
    {"family_detect", test_family_detect},
    {"family_gptoss_model", test_family_gptoss_model},
    {"render_errors", test_render_errors},
    {"render_object_arguments", test_render_object_arguments},
    {"stream_think", test_stream_think},
    {"stream_content", test_stream_content},
    {"stream_unfinished", test_stream_unfinished},
    {"stream_tool_calls", test_stream_tool_calls},
    {"stream_qwen35", test_stream_qwen35},
    {"stream_llama3", test_stream_llama3},
    {"stream_harmony", test_stream_harmony},
    {"stream_gemma4", test_stream_gemma4},
    {"stream_harmony_unfinished", test_stream_harmony_unfinished},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
