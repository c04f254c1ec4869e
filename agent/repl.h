/* repl.h - the read-eval-print loop: a line at a time from the session's input, slash commands to
 * commands_run(), the rest to turn_handle(), until Ctrl-D, end of input or /quit. Ctrl-C (the
 * session's cancel flag) stops the answer in progress, never the loop. */
#ifndef SNIPER_AGENT_REPL_H
#define SNIPER_AGENT_REPL_H

#include "session.h"

/* Handles one line (a request or a slash command). Returns 0 or the negative error the request
 * ended with (already printed). */
int repl_line(struct session *s, const char *line);

/* Runs the loop. Returns 0 when it ended normally, or the last request's error when standard input
 * is not a terminal (so a script sees a failure). */
int repl_run(struct session *s);

#endif
