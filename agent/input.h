/* input.h - where the agent's lines come from. On a terminal: libedit's readline with history
 * (kept in a file between runs). Otherwise (piped, scripted, tested): plain lines from standard
 * input, with the prompt written to stderr and the line echoed after it, so a transcript reads
 * like a terminal session. Requests and answers to the agent's questions come from the same
 * place, in order. */
#ifndef SNIPER_AGENT_INPUT_H
#define SNIPER_AGENT_INPUT_H

#include <signal.h>
#include <stdbool.h>

struct input {
    bool tty;                       /* standard input is a terminal: libedit */
    char *history_path;             /* owned; NULL: no history file */
    volatile sig_atomic_t *cancel;  /* borrowed: Ctrl-C at the prompt sets it */
};

/* Sets up in; history_path (copied) may be NULL. Returns 0 or -ENOMEM. */
int input_init(struct input *in, const char *history_path, volatile sig_atomic_t *cancel);

/* Writes the history file; frees. Accepts NULL. */
void input_release(struct input *in);

/* Reads one line (without its newline) after showing prompt. Returns a malloc'd line (caller
 * frees), or NULL at end of input (Ctrl-D). A Ctrl-C at a terminal prompt does not end the agent:
 * it returns "" (nothing to do) or the line typed, with *cancel cleared. */
char *input_line(struct input *in, const char *prompt);

/* Adds a request to the history (terminal only). */
void input_remember(struct input *in, const char *line);

#endif
