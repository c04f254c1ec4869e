/* shell.h - runs one command line with /bin/sh -c through libuv: standard input from /dev/null,
 * standard output and error collected together up to a cap, a timeout, and a cancel flag (Ctrl-C)
 * polled while it runs. The command gets its own session (process group), so a timeout or cancel
 * kills everything it started, and the terminal's Ctrl-C reaches the agent, not the command.
 *
 *     struct shell_result r;
 *     if (shell_run("ls -l", 30, 16384, &cancel, &r, err, sizeof(err)) == 0) ... r.output ...
 *     shell_result_release(&r);
 */
#ifndef SNIPER_AGENT_SHELL_H
#define SNIPER_AGENT_SHELL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

struct shell_result {
    long exit_status;     /* the exit code; meaningful when term_signal is 0 */
    int term_signal;      /* the signal that ended it, or 0 */
    bool timed_out;       /* killed after timeout_s */
    bool cancelled;       /* killed because *cancel became non-zero */
    bool truncated;       /* more output came than the cap kept */
    char *output;         /* owned, NUL-terminated; stdout and stderr as they arrived */
    size_t output_bytes;
    double seconds;       /* wall time */
};

/* Runs cmd and waits for it. Returns 0 when it ran (whatever its exit status: read r), or
 * -ENOMEM / a libuv error (negative errno, e.g. the spawn failed) with err filled. r is always
 * initialised; release it with shell_result_release(). */
int shell_run(const char *cmd, double timeout_s, size_t output_cap, volatile sig_atomic_t *cancel,
              struct shell_result *r, char *err, size_t err_len);

void shell_result_release(struct shell_result *r);

#endif
