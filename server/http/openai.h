/* openai.h - the OpenAI API's JSON: requests of /v1/chat/completions and /v1/completions parsed
 * and checked into plain structs, and the bodies sniperd sends back (responses, stream chunks,
 * errors). Pure functions over jansson: no I/O, no engine.
 *
 *     struct oai_request rq;
 *     struct oai_error er;
 *     if (oai_parse_chat(body, len, &limits, &rq, &er) < 0) { send(er.status, oai_error_json(&er)); }
 *     ... generate ...
 *     char *json = oai_chat_response_json(&rq, &result);
 *     oai_request_free(&rq);
 *
 * Every field the API defines that sniperd does not support (n > 1, images, audio, ...) and every
 * unknown field is refused with a 400 naming it: nothing is silently ignored. */
#ifndef SNIPER_OPENAI_H
#define SNIPER_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat.h"

#define OAI_MAX_STOP 4

/* Limits a request must respect (from the daemon's configuration). */
struct oai_limits {
    size_t max_messages;     /* e.g. 1024 */
    size_t max_message_bytes;/* e.g. 1 MiB per message content */
    int32_t max_tokens;      /* the largest max_tokens accepted (e.g. the context size) */
    size_t max_stop_bytes;   /* e.g. 256 per stop string */
};

/* An error in the OpenAI shape {"error":{"message","type","param","code"}}. */
struct oai_error {
    int status;        /* HTTP status: 400, 401, 404, 405, 413, 429, 500, 503 ... */
    char type[32];     /* "invalid_request_error", "authentication_error", "server_error", ... */
    char param[64];    /* the offending field ("messages[2].role", "n"), or "" (JSON null) */
    char code[48];     /* "context_length_exceeded", "unsupported_parameter", ... or "" (null) */
    char message[512];
};

/* True when key is one of list's strings (list ends with NULL). */
bool oai_in_list(const char *key, const char *const *list);

/* Every key of obj is in known; one in unsupported (may be NULL; a null value passes) or unknown
 * is refused in e with its name (prefix + key as param). Returns 0, or oai_fail's -1. */
struct json_t;
int oai_check_keys(struct oai_error *e, const struct json_t *obj, const char *prefix,
                   const char *const *known, const char *const *unsupported);

/* True when s is a function (tool) name: 1 to max characters of a-z, A-Z, 0-9, _ and -. */
bool oai_valid_name(const char *s, size_t max);

/* Fills e (message printf-style). Returns -1, so callers can `return oai_fail(...)`. */
int oai_fail(struct oai_error *e, int status, const char *type, const char *param,
             const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The error's JSON body (malloc'd). */
char *oai_error_json(const struct oai_error *e);

/* A parsed /v1/chat/completions or /v1/completions request. Strings are owned by the struct. */
struct oai_request {
    bool chat;                     /* chat completion (messages) or completion (prompt) */
    char *model;                   /* as sent, or NULL */
    struct chat_message *messages; /* chat: [n_messages]; their strings owned here */
    size_t n_messages;
    char *prompt;                  /* completion: the prompt text */
    bool stream;
    bool include_usage;            /* stream_options.include_usage */
    int32_t max_tokens;            /* max_tokens or max_completion_tokens; -1: not given */
    float temperature;             /* defaults as OpenAI: 1.0 */
    float top_p;                   /* 1.0 */
    int32_t top_k;                 /* 0: off (extension, as llama.cpp) */
    float min_p;                   /* 0: off (extension) */
    float presence_penalty;        /* 0 */
    float frequency_penalty;       /* 0 */
    float repeat_penalty;          /* 1: off (extension) */
    bool has_seed;
    uint64_t seed;
    char *stop[OAI_MAX_STOP];      /* stop strings (a string or an array of up to 4) */
    int n_stop;
    bool logprobs;
    int32_t top_logprobs;          /* 0..20 */
    char *tools_json;              /* chat: the tools array re-serialised, or NULL */
    char *tool_choice;             /* "auto", "none", "required" or a function name; NULL: auto */
    bool json_object;              /* response_format {"type":"json_object"} */
    bool enable_thinking;          /* chat_template_kwargs.enable_thinking / "enable_thinking";
                                    * default true */
    const char *reasoning_effort;  /* "reasoning_effort" / chat_template_kwargs.reasoning_effort:
                                    * "low", "medium" or "high" (static), NULL when not given */
};

/* Parses and checks a request body. Returns 0, or -1 with e filled (400 for bad JSON, a wrong
 * type, an unknown role, empty messages, an unsupported or unknown parameter, a limit exceeded).
 * out is freed on failure. */
int oai_parse_chat(const char *body, size_t len, const struct oai_limits *lim,
                   struct oai_request *out, struct oai_error *e);
int oai_parse_completion(const char *body, size_t len, const struct oai_limits *lim,
                         struct oai_request *out, struct oai_error *e);

void oai_request_free(struct oai_request *r);

/* One generated token's log-probability and its top alternatives (logprobs). */
struct oai_logprob {
    const char *token;        /* the token's text */
    float logprob;
    int n_top;
    const char *top_token[20];
    float top_logprob[20];
};

struct oai_tool_call {
    const char *id;        /* "call_..." */
    const char *name;
    const char *arguments; /* JSON text */
};

/* What one request produced. */
struct oai_result {
    const char *id;              /* "chatcmpl-..." / "cmpl-..." */
    int64_t created;             /* unix seconds */
    const char *model;
    const char *content;         /* visible text (NULL: none) */
    const char *reasoning;       /* <think> text or NULL */
    const struct oai_tool_call *tool_calls;
    int n_tool_calls;
    const char *finish_reason;   /* "stop", "length", "tool_calls" */
    int32_t prompt_tokens, completion_tokens, cached_tokens;
    double prefill_ms, decode_ms;/* for the llama.cpp-style "timings" object */
    const struct oai_logprob *logprobs; /* [completion_tokens] when requested, else NULL */
};

/* The non-streaming response body (malloc'd): chat.completion or text_completion. */
char *oai_response_json(const struct oai_request *rq, const struct oai_result *res);

/* One streaming chunk's JSON (malloc'd; the caller frames it as "data: ...\n\n"): a delta of role
 * (first chunk), content, reasoning_content or one tool call (index-keyed), or the final chunk
 * with finish_reason, or the usage chunk (choices empty) when include_usage. */
struct oai_delta {
    bool role;                  /* the first chunk: {"role":"assistant"} */
    const char *content;        /* text delta or NULL */
    size_t content_len;
    const char *reasoning;      /* reasoning_content delta or NULL */
    size_t reasoning_len;
    const struct oai_tool_call *tool_call; /* one call, whole, or NULL */
    int tool_index;
    const char *finish_reason;  /* the last chunk, or NULL */
    bool usage_only;            /* the usage chunk */
    const struct oai_logprob *logprob; /* for a content delta when logprobs */
};
char *oai_chunk_json(const struct oai_request *rq, const struct oai_result *res,
                     const struct oai_delta *d);

#endif
