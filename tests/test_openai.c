/* test_openai.c - the OpenAI JSON layer: a table of bad requests (each checked for status, param,
 * code and a useful message, and its error body for the exact OpenAI shape), good requests parsed
 * into the right fields, and the response, chunk and error bodies parsed back with jansson and
 * checked key by key. */
#include "harness.h"
#include "jsonw.h"
#include "openai.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct oai_limits LIMITS = {
    .max_messages = 8, .max_message_bytes = 64, .max_tokens = 4096, .max_stop_bytes = 16};

#define U "{\"role\":\"user\",\"content\":\"hi\"}"
#define MSGS "\"messages\":[" U "]"
#define CALL "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}"
#define ASSIST_CALL "{\"role\":\"assistant\",\"tool_calls\":[" CALL "]}"
#define TOOL "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}"

struct bad {
    bool chat;         /* /v1/chat/completions or /v1/completions */
    const char *body;
    const char *param; /* "" for none */
    const char *code;
    const char *needle; /* a part of the message */
};

static const struct bad BAD[] = {
    /* the body */
    {true, "{", "", "invalid_json", "not valid JSON"},
    {true, "[]", "", "invalid_type", "JSON object"},
    {true, "null", "", "invalid_json", "not valid JSON"},
    {true, "{" MSGS ",\"temperature\":1,\"temperature\":2}", "", "invalid_json", "duplicate"},
    /* messages */
    {true, "{}", "messages", "missing_required_parameter", "'messages' is required"},
    {true, "{\"messages\":[]}", "messages", "empty_array", "at least one"},
    {true, "{\"messages\":\"hi\"}", "messages", "invalid_type", "an array"},
    {true, "{\"messages\":[1]}", "messages[0]", "invalid_type", "an object"},
    {true, "{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role", "missing_required_parameter",
     "must be a string"},
    {true, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0].role",
     "invalid_value", "unknown role 'wizard'"},
    {true, "{\"messages\":[{\"role\":5,\"content\":\"x\"}]}", "messages[0].role",
     "missing_required_parameter", "must be a string"},
    {true, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content",
     "missing_required_parameter", "is required"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content",
     "invalid_type", "a string or an array of text parts"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":[]}]}", "messages[0].content",
     "empty_array", "empty array"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
           "{\"url\":\"http://x/a.png\"}}]}]}",
     "messages[0].content[0].type", "unsupported_value", "'image_url'"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
           "{\"type\":\"input_audio\",\"input_audio\":{}}]}]}",
     "messages[0].content[1].type", "unsupported_value", "'input_audio'"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
     "messages[0].content[0].text", "invalid_type", "a string"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\","
           "\"extra\":1}]}]}",
     "messages[0].content[0].extra", "unknown_parameter", "unknown parameter"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":[\"x\"]}]}", "messages[0].content[0]",
     "invalid_type", "an object"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":\"0123456789012345678901234567890123456"
           "789012345678901234567890123456789\"}]}",
     "messages[0].content", "string_above_max_length", "above the limit of 64"},
    {true, "{\"messages\":[" U "," U "," U "," U "," U "," U "," U "," U "," U "]}", "messages",
     "array_above_max_length", "above the limit of 8"},
    {true, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"bob\"}]}",
     "messages[0].name", "unknown_parameter", "'messages[0].name'"},
    {true, "{\"messages\":[{\"role\":\"system\",\"content\":\"x\",\"foo\":1}]}", "messages[0].foo",
     "unknown_parameter", "unknown parameter"},
    {true, "{\"messages\":[" U ",{\"role\":\"assistant\"}]}", "messages[1].content",
     "missing_required_parameter", "or tool_calls"},
    {true, "{\"messages\":[" U ",{\"role\":\"assistant\",\"tool_calls\":{}}]}",
     "messages[1].tool_calls", "invalid_type", "an array"},
    {true, "{\"messages\":[" U ",{\"role\":\"assistant\",\"tool_calls\":[]}]}",
     "messages[1].tool_calls", "empty_array", "empty array"},
    {true, "{\"messages\":[" U ",{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
           "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
     "messages[1].tool_calls[0].id", "invalid_type", "a string"},
    {true, "{\"messages\":[" U ",{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
           "\"code\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
     "messages[1].tool_calls[0].type", "invalid_value", "\"function\""},
    {true, "{\"messages\":[" U ",{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
           "\"function\",\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}",
     "messages[1].tool_calls[0].function.arguments", "invalid_type", "JSON text"},
    {true, "{\"messages\":[" U "," ASSIST_CALL ",{\"role\":\"tool\",\"content\":\"r\"}]}",
     "messages[2].tool_call_id", "missing_required_parameter", "is required"},
    {true, "{\"messages\":[" U ",{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":\"c\"}]}",
     "messages[1].role", "invalid_value", "must follow an assistant message"},
    {true, "{\"messages\":[" U ",{\"role\":\"assistant\",\"content\":\"x\",\"refusal\":null}]}",
     "messages[1].refusal", "unknown_parameter", "unknown parameter"},
    /* top-level parameters */
    {true, "{" MSGS ",\"foo\":1}", "foo", "unknown_parameter", "unknown parameter: 'foo'"},
    {true, "{" MSGS ",\"logit_bias\":{\"1\":5}}", "logit_bias", "unsupported_parameter",
     "unsupported parameter: 'logit_bias'"},
    {true, "{" MSGS ",\"audio\":{\"voice\":\"x\"}}", "audio", "unsupported_parameter", "'audio'"},
    {true, "{" MSGS ",\"modalities\":[\"text\",\"audio\"]}", "modalities", "unsupported_parameter",
     "'modalities'"},
    {true, "{" MSGS ",\"functions\":[]}", "functions", "unsupported_parameter", "'functions'"},
    {true, "{" MSGS ",\"reasoning_effort\":\"extreme\"}", "reasoning_effort", "invalid_value",
     "\"low\", \"medium\" or \"high\""},
    {true, "{" MSGS ",\"reasoning_effort\":1}", "reasoning_effort", "invalid_value", "\"low\""},
    {true, "{" MSGS ",\"chat_template_kwargs\":{\"reasoning_effort\":\"LOW\"}}",
     "chat_template_kwargs.reasoning_effort", "invalid_value", "\"medium\""},
    {true, "{" MSGS ",\"reasoning_effort\":\"low\",\"chat_template_kwargs\":"
           "{\"reasoning_effort\":\"high\"}}", "reasoning_effort", "invalid_value", "disagree"},
    {true, "{" MSGS ",\"n\":2}", "n", "unsupported_value", "'n' must be 1"},
    {true, "{" MSGS ",\"n\":0}", "n", "integer_below_min_value", "below the minimum 1"},
    {true, "{" MSGS ",\"temperature\":\"hot\"}", "temperature", "invalid_type", "a number"},
    {true, "{" MSGS ",\"temperature\":3}", "temperature", "decimal_above_max_value",
     "above the maximum 2"},
    {true, "{" MSGS ",\"top_p\":-0.1}", "top_p", "decimal_below_min_value", "below the minimum 0"},
    {true, "{" MSGS ",\"top_k\":1.5}", "top_k", "invalid_type", "an integer"},
    {true, "{" MSGS ",\"top_k\":-1}", "top_k", "integer_below_min_value", "below the minimum 0"},
    {true, "{" MSGS ",\"min_p\":2}", "min_p", "decimal_above_max_value", "above the maximum 1"},
    {true, "{" MSGS ",\"presence_penalty\":5}", "presence_penalty", "decimal_above_max_value",
     "above the maximum 2"},
    {true, "{" MSGS ",\"frequency_penalty\":-3}", "frequency_penalty", "decimal_below_min_value",
     "below the minimum -2"},
    {true, "{" MSGS ",\"repeat_penalty\":0}", "repeat_penalty", "decimal_below_min_value",
     "above 0"},
    {true, "{" MSGS ",\"seed\":\"x\"}", "seed", "invalid_type", "an integer"},
    {true, "{" MSGS ",\"max_tokens\":0}", "max_tokens", "integer_below_min_value",
     "below the minimum 1"},
    {true, "{" MSGS ",\"max_tokens\":5000}", "max_tokens", "integer_above_max_value",
     "above the maximum 4096"},
    {true, "{" MSGS ",\"max_tokens\":5,\"max_completion_tokens\":5}", "max_tokens", "invalid_value",
     "not both"},
    {true, "{" MSGS ",\"max_completion_tokens\":\"10\"}", "max_completion_tokens", "invalid_type",
     "an integer"},
    {true, "{" MSGS ",\"stop\":5}", "stop", "invalid_type", "a string or an array"},
    {true, "{" MSGS ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop", "array_above_max_length",
     "limit of 4"},
    {true, "{" MSGS ",\"stop\":[\"\"]}", "stop[0]", "invalid_value", "empty"},
    {true, "{" MSGS ",\"stop\":\"01234567890123456\"}", "stop", "string_above_max_length",
     "limit of 16"},
    {true, "{" MSGS ",\"stop\":[\"a\",1]}", "stop[1]", "invalid_type", "a string"},
    {true, "{" MSGS ",\"stream\":\"yes\"}", "stream", "invalid_type", "a boolean"},
    {true, "{" MSGS ",\"stream_options\":{\"include_usage\":true}}", "stream_options",
     "invalid_value", "only allowed when 'stream' is true"},
    {true, "{" MSGS ",\"stream\":true,\"stream_options\":{\"include_usage\":\"y\"}}",
     "stream_options.include_usage", "invalid_type", "a boolean"},
    {true, "{" MSGS ",\"stream\":true,\"stream_options\":{\"foo\":1}}", "stream_options.foo",
     "unknown_parameter", "unknown parameter"},
    {true, "{" MSGS ",\"logprobs\":1}", "logprobs", "invalid_type", "a boolean"},
    {true, "{" MSGS ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs",
     "integer_above_max_value", "above the maximum 20"},
    {true, "{" MSGS ",\"top_logprobs\":3}", "top_logprobs", "invalid_value", "requires 'logprobs'"},
    {true, "{" MSGS ",\"tools\":{}}", "tools", "invalid_type", "an array"},
    {true, "{" MSGS ",\"tools\":[]}", "tools", "empty_array", "empty array"},
    {true, "{" MSGS ",\"tools\":[{\"type\":\"retrieval\"}]}", "tools[0].type", "unsupported_value",
     "\"function\""},
    {true, "{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get weather\"}}]}",
     "tools[0].function.name", "invalid_value", "1-64 characters"},
    {true, "{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
           "\"x\"}}]}",
     "tools[0].function.parameters", "invalid_type", "JSON Schema"},
    {true, "{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"foo\":1}}]}",
     "tools[0].function.foo", "unknown_parameter", "unknown parameter"},
    {true, "{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":5}]}", "tools[0].function",
     "invalid_type", "an object"},
    {true, "{" MSGS ",\"tools\":[" TOOL "],\"tool_choice\":\"always\"}", "tool_choice",
     "invalid_value", "\"required\""},
    {true, "{" MSGS ",\"tool_choice\":\"required\"}", "tool_choice", "invalid_value",
     "requires 'tools'"},
    {true, "{" MSGS ",\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"function\",\"function\":"
           "{\"name\":\"g\"}}}",
     "tool_choice.function.name", "invalid_value", "not in 'tools'"},
    {true, "{" MSGS ",\"tools\":[" TOOL "],\"tool_choice\":5}", "tool_choice", "invalid_type",
     "a string or an object"},
    {true, "{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}",
     "response_format.type", "unsupported_value", "'json_schema' is not supported"},
    {true, "{" MSGS ",\"response_format\":{\"type\":\"xml\"}}", "response_format.type",
     "invalid_value", "'xml' is unknown"},
    {true, "{" MSGS ",\"response_format\":\"json\"}", "response_format", "invalid_type",
     "an object"},
    {true, "{" MSGS ",\"enable_thinking\":\"no\"}", "enable_thinking", "invalid_type", "a boolean"},
    {true, "{" MSGS ",\"chat_template_kwargs\":{\"foo\":1}}", "chat_template_kwargs.foo",
     "unknown_parameter", "unknown parameter"},
    {true, "{" MSGS ",\"chat_template_kwargs\":1}", "chat_template_kwargs", "invalid_type",
     "an object"},
    {true, "{" MSGS ",\"enable_thinking\":true,\"chat_template_kwargs\":{\"enable_thinking\":false}}",
     "enable_thinking", "invalid_value", "disagree"},
    {true, "{" MSGS ",\"parallel_tool_calls\":false}", "parallel_tool_calls", "unsupported_value",
     "not supported"},
    {true, "{" MSGS ",\"model\":5}", "model", "invalid_type", "a string"},
    {true, "{" MSGS ",\"prompt\":\"x\"}", "prompt", "unknown_parameter", "unknown parameter"},
    /* /v1/completions */
    {false, "{}", "prompt", "missing_required_parameter", "'prompt' is required"},
    {false, "{\"prompt\":5}", "prompt", "invalid_type", "a string"},
    {false, "{\"prompt\":[1,2,3]}", "prompt", "unsupported_value", "exactly one string"},
    {false, "{\"prompt\":[[1,2]]}", "prompt", "unsupported_value", "token ids"},
    {false, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "unsupported_value", "exactly one string"},
    {false, "{\"prompt\":\"x\",\"echo\":true}", "echo", "unsupported_value", "'echo'"},
    {false, "{\"prompt\":\"x\",\"best_of\":2}", "best_of", "unsupported_value", "'best_of'"},
    {false, "{\"prompt\":\"x\",\"suffix\":\"end\"}", "suffix", "unsupported_value", "'suffix'"},
    {false, "{\"prompt\":\"x\",\"logprobs\":6}", "logprobs", "integer_above_max_value",
     "above the maximum 5"},
    {false, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs", "invalid_type", "an integer"},
    {false, "{" MSGS "}", "messages", "unknown_parameter", "unknown parameter: 'messages'"},
    {false, "{\"prompt\":\"x\",\"max_completion_tokens\":5}", "max_completion_tokens",
     "unknown_parameter", "unknown parameter"},
    {false, "{\"prompt\":\"x\",\"tools\":[]}", "tools", "unknown_parameter", "unknown parameter"},
    {false, "{\"prompt\":\"x\",\"logit_bias\":{}}", "logit_bias", "unsupported_parameter",
     "unsupported parameter"},
    {false, "{\"prompt\":\"01234567890123456789012345678901234567890123456789012345678901234\"}",
     "prompt", "string_above_max_length", "limit of 64"},
};

/* The error body has exactly {"error":{"message","type","param","code"}} with the right values. */
static void check_error_body(const struct oai_error *e, const char *param, const char *code) {
    char *s = oai_error_json(e);
    json_error_t je;
    json_t *v = s ? json_loads(s, 0, &je) : NULL, *err = json_object_get(v, "error");
    CHECK_MSG(v && json_object_size(v) == 1 && json_object_size(err) == 4, "error body %s", s);
    CHECK_STR(json_string_value(json_object_get(err, "message")), e->message);
    CHECK_STR(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    if (*param)
        CHECK_STR(json_string_value(json_object_get(err, "param")), param);
    else
        CHECK(json_is_null(json_object_get(err, "param")));
    CHECK_STR(json_string_value(json_object_get(err, "code")), code);
    json_decref(v);
    free(s);
}

static void test_bad_requests(void) {
    size_t n = sizeof(BAD) / sizeof(BAD[0]);
    CHECK(n >= 50);
    for (size_t i = 0; i < n; i++) {
        const struct bad *b = &BAD[i];
        struct oai_request rq;
        struct oai_error e;
        memset(&e, 0, sizeof(e));
        int rc = b->chat ? oai_parse_chat(b->body, strlen(b->body), &LIMITS, &rq, &e)
                         : oai_parse_completion(b->body, strlen(b->body), &LIMITS, &rq, &e);
        CHECK_MSG(rc == -1, "accepted: %s", b->body);
        if (rc != -1) {
            oai_request_free(&rq);
            continue;
        }
        CHECK_MSG(e.status == 400 && strcmp(e.param, b->param) == 0 && strcmp(e.code, b->code) == 0
                      && strstr(e.message, b->needle),
                  "%s\n    got %d param '%s' code '%s' message '%s'\n    want param '%s' code '%s' "
                  "message with '%s'",
                  b->body, e.status, e.param, e.code, e.message, b->param, b->code, b->needle);
        check_error_body(&e, b->param, b->code);
    }
}

static struct oai_request parse_ok(bool chat, const char *body) {
    struct oai_request rq;
    struct oai_error e = {0};
    int rc = chat ? oai_parse_chat(body, strlen(body), &LIMITS, &rq, &e)
                  : oai_parse_completion(body, strlen(body), &LIMITS, &rq, &e);
    CHECK_MSG(rc == 0, "refused (%s: %s): %s", e.param, e.message, body);
    if (rc != 0)
        memset(&rq, 0, sizeof(rq));
    return rq;
}

static void test_defaults(void) {
    struct oai_request r = parse_ok(true, "{" MSGS "}");
    CHECK(r.chat);
    CHECK(r.model == NULL);
    CHECK_EQ_INT(r.n_messages, 1);
    CHECK_STR(r.messages[0].role, "user");
    CHECK_STR(r.messages[0].content, "hi");
    CHECK(!r.stream && !r.include_usage);
    CHECK_EQ_INT(r.max_tokens, -1);
    CHECK_NEAR(r.temperature, 1.0, 0);
    CHECK_NEAR(r.top_p, 1.0, 0);
    CHECK_EQ_INT(r.top_k, 0);
    CHECK_NEAR(r.min_p, 0.0, 0);
    CHECK_NEAR(r.presence_penalty, 0.0, 0);
    CHECK_NEAR(r.frequency_penalty, 0.0, 0);
    CHECK_NEAR(r.repeat_penalty, 1.0, 0);
    CHECK(!r.has_seed);
    CHECK_EQ_INT(r.n_stop, 0);
    CHECK(!r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 0);
    CHECK(r.tools_json == NULL && r.tool_choice == NULL);
    CHECK(!r.json_object);
    CHECK(r.enable_thinking);
    CHECK(r.reasoning_effort == NULL);
    CHECK(r.prompt == NULL);
    oai_request_free(&r);
}

static void test_full_chat(void) {
    struct oai_request r = parse_ok(true,
        "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello \"},{\"type\":\"text\","
        "\"text\":\"there\"}]}],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"max_completion_tokens\":100,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repeat_penalty\":1.1,\"seed\":-1,"
        "\"stop\":[\"\\n\\n\",\"END\"],\"logprobs\":true,\"top_logprobs\":5,\"response_format\":"
        "{\"type\":\"json_object\"},\"chat_template_kwargs\":{\"enable_thinking\":false},\"n\":1,"
        "\"user\":\"u-1\",\"logit_bias\":null,\"parallel_tool_calls\":true}");
    CHECK_STR(r.model, "qwen3");
    CHECK_EQ_INT(r.n_messages, 2);
    if (r.n_messages == 2) {
        CHECK_STR(r.messages[0].role, "system");
        CHECK_STR(r.messages[1].content, "Hello there");
    }
    CHECK(r.stream && r.include_usage);
    CHECK_EQ_INT(r.max_tokens, 100);
    CHECK_NEAR(r.temperature, 0.5, 1e-7);
    CHECK_NEAR(r.top_p, 0.9, 1e-7);
    CHECK_EQ_INT(r.top_k, 40);
    CHECK_NEAR(r.min_p, 0.05, 1e-7);
    CHECK_NEAR(r.presence_penalty, 0.5, 1e-7);
    CHECK_NEAR(r.frequency_penalty, -0.5, 1e-7);
    CHECK_NEAR(r.repeat_penalty, 1.1, 1e-6);
    CHECK(r.has_seed && r.seed == UINT64_MAX);
    CHECK_EQ_INT(r.n_stop, 2);
    CHECK_STR(r.stop[0], "\n\n");
    CHECK_STR(r.stop[1], "END");
    CHECK(r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 5);
    CHECK(r.json_object);
    CHECK(!r.enable_thinking);
    oai_request_free(&r);

    r = parse_ok(true, "{" MSGS ",\"enable_thinking\":false,\"max_tokens\":7,\"stop\":\"x\"}");
    CHECK(!r.enable_thinking);
    CHECK_EQ_INT(r.max_tokens, 7);
    CHECK_EQ_INT(r.n_stop, 1);
    CHECK_STR(r.stop[0], "x");
    oai_request_free(&r);

    r = parse_ok(true, "{" MSGS ",\"stream\":false,\"stop\":null,\"tools\":null,\"temperature\":0,"
                       "\"response_format\":{\"type\":\"text\"},\"enable_thinking\":true,"
                       "\"chat_template_kwargs\":{\"enable_thinking\":true}}");
    CHECK(!r.stream && r.n_stop == 0 && r.tools_json == NULL && !r.json_object);
    CHECK_NEAR(r.temperature, 0.0, 0);
    CHECK(r.enable_thinking);
    oai_request_free(&r);

    r = parse_ok(true, "{" MSGS ",\"reasoning_effort\":\"high\"}");
    CHECK_STR(r.reasoning_effort, "high");
    oai_request_free(&r);
    r = parse_ok(true, "{" MSGS ",\"reasoning_effort\":null,\"chat_template_kwargs\":"
                       "{\"reasoning_effort\":\"low\"}}");
    CHECK_STR(r.reasoning_effort, "low");
    oai_request_free(&r);
    r = parse_ok(true, "{" MSGS ",\"reasoning_effort\":\"medium\",\"chat_template_kwargs\":"
                       "{\"reasoning_effort\":\"medium\",\"enable_thinking\":true}}");
    CHECK_STR(r.reasoning_effort, "medium");
    oai_request_free(&r);
}

/* A tool conversation parses into messages chat_render accepts. */
static void test_tool_conversation(void) {
    struct oai_request r = parse_ok(true,
        "{\"messages\":[" U ",{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"r\","
        "\"tool_calls\":[" CALL "]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"name\":\"f\","
        "\"content\":\"42\"}],\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"function\","
        "\"function\":{\"name\":\"f\"}}}");
    CHECK_EQ_INT(r.n_messages, 3);
    if (r.n_messages == 3) {
        CHECK(r.messages[1].content == NULL);
        CHECK_STR(r.messages[1].reasoning_content, "r");
        CHECK_STR(r.messages[1].tool_calls_json, "[" CALL "]");
        CHECK_STR(r.messages[2].tool_call_id, "c1");
        CHECK_STR(r.messages[2].name, "f");
        CHECK_STR(r.messages[2].content, "42");
    }
    CHECK_STR(r.tools_json, "[" TOOL "]");
    CHECK_STR(r.tool_choice, "f");
    char err[128];
    struct chat_render_opts o = {.add_generation_prompt = true, .enable_thinking = true,
                                 .tools_json = r.tools_json};
    char *prompt = r.n_messages ? chat_render(CHAT_CHATML, r.messages, r.n_messages, &o, err,
                                              sizeof(err))
                                : NULL;
    CHECK(prompt && strstr(prompt, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"));
    CHECK(prompt && strstr(prompt, "<tool_response>\n42\n</tool_response>"));
    free(prompt);
    oai_request_free(&r);

    r = parse_ok(true, "{" MSGS ",\"tools\":[" TOOL "],\"tool_choice\":\"required\"}");
    CHECK_STR(r.tool_choice, "required");
    oai_request_free(&r);
    r = parse_ok(true, "{" MSGS ",\"tool_choice\":\"none\"}");
    CHECK_STR(r.tool_choice, "none");
    oai_request_free(&r);
}

static void test_completion(void) {
    struct oai_request r = parse_ok(false, "{\"model\":\"m\",\"prompt\":\"Once upon\",\"max_tokens\":"
                                           "16,\"logprobs\":3,\"echo\":false,\"best_of\":1,"
                                           "\"suffix\":null,\"stream\":true}");
    CHECK(!r.chat);
    CHECK_STR(r.prompt, "Once upon");
    CHECK(r.messages == NULL && r.n_messages == 0);
    CHECK_EQ_INT(r.max_tokens, 16);
    CHECK(r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 3);
    CHECK(r.stream);
    oai_request_free(&r);
    r = parse_ok(false, "{\"prompt\":[\"only one\"]}");
    CHECK_STR(r.prompt, "only one");
    CHECK(!r.logprobs);
    oai_request_free(&r);
}

/* ---- bodies sent back ---- */

/* o has exactly the keys in the comma-separated list. */
static void check_keys(const json_t *o, const char *keys) {
    char buf[256];
    size_t n = 0;
    snprintf(buf, sizeof(buf), "%s", keys);
    for (char *save = NULL, *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save), n++)
        CHECK_MSG(json_object_get(o, k) != NULL, "key '%s' missing", k);
    CHECK_MSG(json_is_object(o) && json_object_size(o) == n, "keys are not exactly %s", keys);
}

static json_t *parse_back(char *s) {
    json_error_t je;
    CHECK(s != NULL);
    json_t *v = s ? json_loads(s, 0, &je) : NULL;
    CHECK_MSG(v != NULL, "not JSON: %s", s);
    free(s);
    return v;
}

static const struct oai_tool_call CALLS[] = {{"call_a", "get_weather", "{\"city\":\"Paris\"}"},
                                             {"call_b", "search", "{}"}};

static struct oai_logprob LP[2] = {
    {.token = "Hi", .logprob = -0.25f, .n_top = 2, .top_token = {"Hi", "Hello"},
     .top_logprob = {-0.25f, -1.5f}},
    {.token = "\xc3", .logprob = -2.0f, .n_top = 0},
};

static struct oai_result result(void) {
    return (struct oai_result){.id = "chatcmpl-1", .created = 1700000000, .model = "tiny",
                               .content = "Hello", .finish_reason = "stop", .prompt_tokens = 10,
                               .completion_tokens = 2, .cached_tokens = 4, .prefill_ms = 12.0,
                               .decode_ms = 40.0};
}

static void check_usage(const json_t *u) {
    check_keys(u, "prompt_tokens,completion_tokens,total_tokens,prompt_tokens_details");
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "prompt_tokens")), 10);
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "completion_tokens")), 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "total_tokens")), 12);
    const json_t *d = json_object_get(u, "prompt_tokens_details");
    check_keys(d, "cached_tokens");
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "cached_tokens")), 4);
}

static void check_timings(const json_t *t) {
    check_keys(t, "cache_n,prompt_n,prompt_ms,prompt_per_second,predicted_n,predicted_ms,"
                  "predicted_per_second");
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "prompt_n")), 6);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "cache_n")), 4);
    CHECK_NEAR(json_number_value(json_object_get(t, "prompt_ms")), 12.0, 1e-9);
    CHECK_NEAR(json_number_value(json_object_get(t, "prompt_per_second")), 500.0, 1e-9);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "predicted_n")), 2);
    CHECK_NEAR(json_number_value(json_object_get(t, "predicted_per_second")), 50.0, 1e-9);
}

static void test_chat_response(void) {
    struct oai_request rq = {.chat = true, .model = "asked"};
    struct oai_result res = result();
    json_t *v = parse_back(oai_response_json(&rq, &res));
    check_keys(v, "id,object,created,model,choices,usage,timings");
    CHECK_STR(json_string_value(json_object_get(v, "id")), "chatcmpl-1");
    CHECK_STR(json_string_value(json_object_get(v, "object")), "chat.completion");
    CHECK_EQ_INT(json_integer_value(json_object_get(v, "created")), 1700000000);
    CHECK_STR(json_string_value(json_object_get(v, "model")), "tiny");
    json_t *choices = json_object_get(v, "choices"), *c = json_array_get(choices, 0);
    CHECK_EQ_INT(json_array_size(choices), 1);
    check_keys(c, "index,message,logprobs,finish_reason");
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "index")), 0);
    CHECK(json_is_null(json_object_get(c, "logprobs")));
    CHECK_STR(json_string_value(json_object_get(c, "finish_reason")), "stop");
    check_keys(json_object_get(c, "message"), "role,content");
    CHECK_STR(json_string_value(json_object_get(json_object_get(c, "message"), "role")),
              "assistant");
    CHECK_STR(json_string_value(json_object_get(json_object_get(c, "message"), "content")), "Hello");
    check_usage(json_object_get(v, "usage"));
    check_timings(json_object_get(v, "timings"));
    json_decref(v);
}

static void test_chat_response_tools_logprobs(void) {
    struct oai_request rq = {.chat = true, .logprobs = true};
    struct oai_result res = result();
    res.content = NULL;
    res.reasoning = "thought";
    res.tool_calls = CALLS;
    res.n_tool_calls = 2;
    res.finish_reason = "tool_calls";
    res.logprobs = LP;
    json_t *v = parse_back(oai_response_json(&rq, &res));
    json_t *c = json_array_get(json_object_get(v, "choices"), 0), *m = json_object_get(c, "message");
    check_keys(m, "role,content,reasoning_content,tool_calls");
    CHECK(json_is_null(json_object_get(m, "content")));
    CHECK_STR(json_string_value(json_object_get(m, "reasoning_content")), "thought");
    json_t *calls = json_object_get(m, "tool_calls"), *t = json_array_get(calls, 1);
    CHECK_EQ_INT(json_array_size(calls), 2);
    check_keys(t, "id,type,function");
    CHECK_STR(json_string_value(json_object_get(t, "id")), "call_b");
    CHECK_STR(json_string_value(json_object_get(t, "type")), "function");
    check_keys(json_object_get(t, "function"), "name,arguments");
    CHECK_STR(json_string_value(json_object_get(json_object_get(t, "function"), "name")), "search");
    t = json_array_get(calls, 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(t, "function"), "arguments")),
              "{\"city\":\"Paris\"}");
    CHECK_STR(json_string_value(json_object_get(c, "finish_reason")), "tool_calls");
    json_t *lp = json_object_get(c, "logprobs"), *content = json_object_get(lp, "content");
    check_keys(lp, "content");
    CHECK_EQ_INT(json_array_size(content), 2);
    json_t *e0 = json_array_get(content, 0), *e1 = json_array_get(content, 1);
    check_keys(e0, "token,logprob,bytes,top_logprobs");
    CHECK_STR(json_string_value(json_object_get(e0, "token")), "Hi");
    CHECK_NEAR(json_number_value(json_object_get(e0, "logprob")), -0.25, 1e-7);
    CHECK_EQ_INT(json_array_size(json_object_get(e0, "bytes")), 2);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(e0, "bytes"), 0)), 'H');
    json_t *top = json_object_get(e0, "top_logprobs");
    CHECK_EQ_INT(json_array_size(top), 2);
    check_keys(json_array_get(top, 1), "token,logprob,bytes");
    CHECK_STR(json_string_value(json_object_get(json_array_get(top, 1), "token")), "Hello");
    /* a token that is half a UTF-8 character: U+FFFD as text, the raw byte in bytes */
    CHECK_STR(json_string_value(json_object_get(e1, "token")), "\xef\xbf\xbd");
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(e1, "bytes"), 0)), 0xc3);
    CHECK_EQ_INT(json_array_size(json_object_get(e1, "top_logprobs")), 0);
    json_decref(v);
}

static void test_text_completion_response(void) {
    struct oai_request rq = {.chat = false, .logprobs = true, .top_logprobs = 2};
    struct oai_result res = result();
    res.id = "cmpl-1";
    res.finish_reason = "length";
    res.logprobs = LP;
    json_t *v = parse_back(oai_response_json(&rq, &res));
    check_keys(v, "id,object,created,model,choices,usage,timings");
    CHECK_STR(json_string_value(json_object_get(v, "object")), "text_completion");
    json_t *c = json_array_get(json_object_get(v, "choices"), 0);
    check_keys(c, "text,index,logprobs,finish_reason");
    CHECK_STR(json_string_value(json_object_get(c, "text")), "Hello");
    CHECK_STR(json_string_value(json_object_get(c, "finish_reason")), "length");
    json_t *lp = json_object_get(c, "logprobs");
    check_keys(lp, "tokens,token_logprobs,top_logprobs,text_offset");
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), 1)), 2);
    CHECK_NEAR(json_number_value(json_object_get(json_array_get(json_object_get(lp, "top_logprobs"),
                                                                0), "Hello")), -1.5, 1e-7);
    check_usage(json_object_get(v, "usage"));
    json_decref(v);
}

/* The one choice of a chunk, its keys checked; returns its delta. */
static json_t *chunk_delta(json_t *v, const char *finish) {
    check_keys(v, "id,object,created,model,choices");
    CHECK_STR(json_string_value(json_object_get(v, "object")), "chat.completion.chunk");
    json_t *c = json_array_get(json_object_get(v, "choices"), 0);
    CHECK_EQ_INT(json_array_size(json_object_get(v, "choices")), 1);
    check_keys(c, "index,delta,logprobs,finish_reason");
    if (finish)
        CHECK_STR(json_string_value(json_object_get(c, "finish_reason")), finish);
    else
        CHECK(json_is_null(json_object_get(c, "finish_reason")));
    return json_object_get(c, "delta");
}

static void test_chunks(void) {
    struct oai_request rq = {.chat = true};
    struct oai_result res = result();
    json_t *v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.role = true}));
    check_keys(chunk_delta(v, NULL), "role");
    json_decref(v);
    v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.content = "Hello!", .content_len = 5}));
    json_t *d = chunk_delta(v, NULL);
    check_keys(d, "content");
    CHECK_STR(json_string_value(json_object_get(d, "content")), "Hello");
    json_decref(v);
    v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.reasoning = "hm", .reasoning_len = 2}));
    d = chunk_delta(v, NULL);
    check_keys(d, "reasoning_content");
    CHECK_STR(json_string_value(json_object_get(d, "reasoning_content")), "hm");
    json_decref(v);
    v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.tool_call = &CALLS[1],
                                                                 .tool_index = 1}));
    d = chunk_delta(v, NULL);
    check_keys(d, "tool_calls");
    json_t *t = json_array_get(json_object_get(d, "tool_calls"), 0);
    check_keys(t, "index,id,type,function");
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "index")), 1);
    CHECK_STR(json_string_value(json_object_get(json_object_get(t, "function"), "name")), "search");
    json_decref(v);
    v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.finish_reason = "stop"}));
    check_keys(chunk_delta(v, "stop"), "");
    json_decref(v);
    /* invalid UTF-8 (half a character) never reaches the client */
    v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.content = "a\xe6\x97", .content_len = 3}));
    CHECK_STR(json_string_value(json_object_get(chunk_delta(v, NULL), "content")), "a\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(v);
}

static void test_chunks_usage_logprobs(void) {
    struct oai_request rq = {.chat = true, .stream = true, .include_usage = true, .logprobs = true};
    struct oai_result res = result();
    json_t *v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.content = "Hi",
                                                                         .content_len = 2,
                                                                         .logprob = &LP[0]}));
    check_keys(v, "id,object,created,model,choices,usage");
    CHECK(json_is_null(json_object_get(v, "usage")));
    json_t *c = json_array_get(json_object_get(v, "choices"), 0);
    json_t *lp = json_object_get(json_object_get(c, "logprobs"), "content");
    CHECK_EQ_INT(json_array_size(lp), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(lp, 0), "token")), "Hi");
    json_decref(v);
    v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.usage_only = true}));
    check_keys(v, "id,object,created,model,choices,usage,timings");
    CHECK(json_is_array(json_object_get(v, "choices")));
    CHECK_EQ_INT(json_array_size(json_object_get(v, "choices")), 0);
    check_usage(json_object_get(v, "usage"));
    check_timings(json_object_get(v, "timings"));
    json_decref(v);
    rq.chat = false;
    v = parse_back(oai_chunk_json(&rq, &res, &(struct oai_delta){.content = "x", .content_len = 1,
                                                                 .finish_reason = "length"}));
    CHECK_STR(json_string_value(json_object_get(v, "object")), "text_completion");
    c = json_array_get(json_object_get(v, "choices"), 0);
    check_keys(c, "text,index,logprobs,finish_reason");
    CHECK_STR(json_string_value(json_object_get(c, "text")), "x");
    json_decref(v);
}

static void test_error_json(void) {
    struct oai_error e;
    CHECK_EQ_INT(oai_fail(&e, 503, "server_error", NULL, NULL, "queue full (%d waiting)", 8), -1);
    json_t *v = parse_back(oai_error_json(&e)), *err = json_object_get(v, "error");
    check_keys(v, "error");
    check_keys(err, "message,type,param,code");
    CHECK_STR(json_string_value(json_object_get(err, "message")), "queue full (8 waiting)");
    CHECK_STR(json_string_value(json_object_get(err, "type")), "server_error");
    CHECK(json_is_null(json_object_get(err, "param")) && json_is_null(json_object_get(err, "code")));
    CHECK_EQ_INT(e.status, 503);
    json_decref(v);
    /* a message cut inside a UTF-8 character still gives valid JSON */
    char longmsg[600];
    memset(longmsg, 'a', sizeof(longmsg));
    memcpy(longmsg + 509, "\xe6\x97\xa5\xe6\x97\xa5", 6);
    longmsg[599] = '\0';
    oai_fail(&e, 400, NULL, "x", "c", "%s", longmsg);
    v = parse_back(oai_error_json(&e));
    CHECK(v != NULL);
    json_decref(v);
}

/* ---- allocation failures: jansson's Nth allocation fails, for every N until none is left ---- */

static long alloc_countdown; /* > 0: that many allocations from now, the last one fails */

static void *failing_malloc(size_t n) {
    if (alloc_countdown > 0 && --alloc_countdown == 0)
        return NULL;
    return malloc(n);
}

/* Each body either comes out as valid JSON or is NULL: no crash, no leak (ASan in make check).
 * Parsing is not fault-injected: jansson 2.14's own lexer asserts or crashes when an allocation
 * fails inside it (load.c lex_scan_string). */
static void test_alloc_failures(void) {
    struct oai_request rq = {.chat = true, .include_usage = true, .logprobs = true};
    struct oai_result res = result();
    struct oai_error e;
    res.reasoning = "r";
    res.tool_calls = CALLS;
    res.n_tool_calls = 2;
    res.logprobs = LP;
    oai_fail(&e, 400, NULL, "messages[0].role", "invalid_value", "unknown role 'x'");
    json_set_alloc_funcs(failing_malloc, free);
    for (int what = 0; what < 4; what++) {
        rq.chat = what != 3;
        for (long k = 1; k < 100000; k++) {
            alloc_countdown = k;
            char *s = what == 0   ? oai_error_json(&e)
                      : what == 1 ? oai_chunk_json(&rq, &res, &(struct oai_delta){
                                        .tool_call = &CALLS[0], .logprob = &LP[0]})
                                  : oai_response_json(&rq, &res);
            bool done = alloc_countdown > 0;
            alloc_countdown = 0;
            CHECK_MSG(done == (s != NULL), "allocation %ld of body %d", k, what);
            if (s) {
                json_set_alloc_funcs(malloc, free);
                json_t *back = json_loads(s, 0, NULL);
                CHECK_MSG(back != NULL, "not JSON: %s", s);
                json_decref(back);
                json_set_alloc_funcs(failing_malloc, free);
            }
            free(s);
            if (done)
                break;
        }
    }
    json_set_alloc_funcs(malloc, free);
}

/* The writer's two spellings, pinned: key order kept, Python's float repr, escapes. */
static void test_jsonw(void) {
    const char *in = "{\"b\":[1,-2,0.1,1e16,1.5e-7,100.0,123456.789,-0.0,1e300],\"a\":"
                     "{\"s\":\"\u00e9\\\"\\\\/\\n\\t\\u0001\\u007f<&>\"},\"t\":true,"
                     "\"f\":false,\"n\":null,\"e\":{},\"l\":[]}";
    json_t *v = json_loads(in, 0, NULL);
    CHECK(v != NULL);
    char *c = jsonw_dumps(v, JSONW_COMPACT), *py = jsonw_dumps(v, JSONW_PYTHON);
    CHECK_STR(c, "{\"b\":[1,-2,0.1,1e+16,1.5e-07,100.0,123456.789,-0.0,1e+300],\"a\":{\"s\":"
                 "\"\xc3\xa9\\\"\\\\/\\n\\t\\u0001\x7f<&>\"},\"t\":true,\"f\":false,"
                 "\"n\":null,\"e\":{},\"l\":[]}");
    CHECK_STR(py, "{\"b\": [1, -2, 0.1, 1e+16, 1.5e-07, 100.0, 123456.789, -0.0, 1e+300], "
                  "\"a\": {\"s\": \"\xc3\xa9\\\"\\\\/\\n\\t\\u0001\x7f<&>\"}, "
                  "\"t\": true, \"f\": false, \"n\": null, \"e\": {}, \"l\": []}");
    CHECK(jsonw_dumps(NULL, JSONW_COMPACT) == NULL);
    free(c);
    free(py);
    json_decref(v);
}

/* A log-probability of -inf (a token ruled out) is written as OpenAI does: -9999. */
static void test_logprob_infinite(void) {
    struct oai_request rq = {.chat = true, .logprobs = true};
    struct oai_result res = result();
    struct oai_logprob lp = {.token = "x", .logprob = -1.0f / 0.0f, .n_top = 1,
                             .top_token = {"x"}, .top_logprob = {-1.0f / 0.0f}};
    res.completion_tokens = 1;
    res.logprobs = &lp;
    json_t *v = parse_back(oai_response_json(&rq, &res));
    json_t *e = json_array_get(json_object_get(json_object_get(json_array_get(
                                   json_object_get(v, "choices"), 0), "logprobs"), "content"), 0);
    CHECK_NEAR(json_number_value(json_object_get(e, "logprob")), -9999.0, 0);
    json_decref(v);
}

static const struct test_case cases[] = {
    {"jsonw", test_jsonw},
    {"logprob_infinite", test_logprob_infinite},
    {"alloc_failures", test_alloc_failures},
    {"bad_requests", test_bad_requests},
    {"defaults", test_defaults},
    {"full_chat", test_full_chat},
    {"tool_conversation", test_tool_conversation},
    {"completion", test_completion},
    {"chat_response", test_chat_response},
    {"chat_response_tools_logprobs", test_chat_response_tools_logprobs},
    {"text_completion_response", test_text_completion_response},
    {"chunks", test_chunks},
    {"chunks_usage_logprobs", test_chunks_usage_logprobs},
    {"error_json", test_error_json},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
