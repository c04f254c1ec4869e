/* turn.h - one request, start to finish: routed (or bypassed) to chat, search or shell, the
 * answer streamed to stdout as it comes, the turn's numbers to stderr, the exchange remembered in
 * the session. Every function prints its own errors (one line, "sniper: ...") and returns a
 * negative code, so the REPL just goes on to the next line.
 *
 *     turn_handle(&session, "what's in this directory?");   routed by the model
 *     turn_handle(&session, "!ls -la");                      straight to the shell path
 *     turn_search(&session, "libuv release notes", "libuv release notes");
 */
#ifndef SNIPER_AGENT_TURN_H
#define SNIPER_AGENT_TURN_H

#include "session.h"

#include <stdbool.h>

/* A request line that is not a slash command: "!cmd" runs cmd (the user typed it: no question),
 * raw mode chats, otherwise the router picks the path; a routing failure (not a dead server)
 * falls back to chat. Returns 0 or a negative error (already printed). */
int turn_handle(struct session *s, const char *line);

/* The chat path: the conversation plus request, streamed. route names the turn in the grade log.
 * Returns 0 or a negative error (printed). */
int turn_chat(struct session *s, const char *request, const char *route);

/* The search path. query NULL: the model rewrites request into one (with today's date). Returns 0
 * or a negative error (printed). */
int turn_search(struct session *s, const char *request, const char *query);

/* The shell path: the model writes one command for request, then turn_command() runs it. */
int turn_shell(struct session *s, const char *request);

/* Shows cmd, asks y/n/a unless it is read-only, --yes was given, the user typed it (typed) or
 * answered "a" before; runs it; shows the output; has the model summarise it. Returns 0 (also
 * when the user declined) or a negative error (printed). */
int turn_command(struct session *s, const char *request, const char *cmd, bool typed);

/* The command in a model's reply: the first line that is not a code fence, without a leading
 * "$ " or surrounding backquotes. Returns a malloc'd string ("" when none) or NULL on no memory. */
char *turn_command_clean(const char *reply);

/* Streams messages (borrowed) with opts to stdout, then prints "[N tokens, X tok/s, TTFT Y ms]"
 * to stderr and adds the numbers to the session. Returns 0 with *answer (malloc'd, caller frees)
 * set, or a negative error (printed; *answer NULL). st may be NULL. */
int turn_stream(struct session *s, json_t *messages, const struct llm_opts *o, char **answer,
                struct llm_stats *st);

/* Prints one error line for rc ("cancelled" for -ECANCELED). */
void turn_report(int rc, const char *err);

#endif
