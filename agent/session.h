/* session.h - one run of the agent: the settings, the model client, the conversation (user and
 * assistant messages; the system prompt is kept apart and put first in every request), the mode,
 * the "always" answer to command prompts, the last answer (for /good and /bad) and the running
 * totals (/stats, /cost). Conversations save to and load from JSON files:
 * {"version": 1, "model", "system", "messages": [{"role", "content"}]}. */
#ifndef SNIPER_AGENT_SESSION_H
#define SNIPER_AGENT_SESSION_H

#include "config.h"
#include "input.h"
#include "llm.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>

struct session {
    struct agent_config *cfg;       /* borrowed, outlives the session */
    struct input *in;               /* borrowed: where requests and answers to prompts come from */
    volatile sig_atomic_t *cancel;  /* borrowed: Ctrl-C sets it */
    struct llm llm;
    json_t *messages;               /* owned array of {role, content}: the conversation */
    char *system_prompt;            /* owned, never NULL */
    bool raw;                       /* no routing: every line is chat */
    bool always;                    /* the user answered "a": run generated commands this session */
    bool quit;                      /* /quit was given */
    char *last_route, *last_request, *last_answer;  /* owned; NULL before the first answer */
    long n_turns;                   /* requests answered */
    long prompt_tokens, completion_tokens;   /* over every request to the model */
    double model_s;                 /* seconds spent waiting for the model */
    double started_s;               /* monotonic time the session began */
};

/* Sets up s for cfg (borrowed). Returns 0 or -ENOMEM. */
int session_init(struct session *s, struct agent_config *cfg, struct input *in,
                 volatile sig_atomic_t *cancel);
void session_release(struct session *s);

/* A new array: the system prompt, then (when extra_system is not NULL) a second system message,
 * then the conversation, then (when user is not NULL) one more user message. NULL on no memory. */
json_t *session_request_messages(const struct session *s, const char *extra_system,
                                 const char *user);

/* Appends the exchange to the conversation and makes it the last answer. Returns 0 or -ENOMEM. */
int session_remember(struct session *s, const char *route, const char *request,
                     const char *answer);

/* Adds one model request's numbers to the totals. */
void session_count(struct session *s, const struct llm_stats *st);

/* Forgets the conversation and the last answer (the system prompt stays). */
void session_clear(struct session *s);

/* Replaces the conversation with messages (borrowed array; system messages in it replace the
 * system prompt). Returns the number of messages kept, or -EINVAL (not an array of {role,
 * content} strings) / -ENOMEM. */
int session_set_messages(struct session *s, json_t *messages);

/* Writes the conversation as JSON to path. Returns 0 or a negative errno with err filled. */
int session_save(const struct session *s, const char *path, char *err, size_t err_len);

/* Reads a conversation written by session_save(). Returns the number of messages, or a negative
 * errno with err filled (the session is unchanged then). */
int session_load(struct session *s, const char *path, char *err, size_t err_len);

/* Seconds since an arbitrary fixed point (monotonic). */
double session_now(void);

#endif
