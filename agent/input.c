/* input.c - see input.h. libedit is reached only through its readline interface. */
#include "input.h"
#include "paths.h"

#include <editline/readline.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int input_init(struct input *in, const char *history_path, volatile sig_atomic_t *cancel) {
    memset(in, 0, sizeof(*in));
    in->tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    in->cancel = cancel;
    if (history_path && !(in->history_path = strdup(history_path)))
        return -ENOMEM;
    if (in->tty) {
        using_history();
        stifle_history(1000);
        if (in->history_path)
            read_history(in->history_path);
    }
    return 0;
}

void input_release(struct input *in) {
    if (!in)
        return;
    if (in->tty && in->history_path && paths_make_parent(in->history_path) == 0)
        write_history(in->history_path);
    free(in->history_path);
    in->history_path = NULL;
}

/* A plain line from stdin, prompt and echo on stderr. */
static char *input_plain(const char *prompt) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (prompt && *prompt)
        fprintf(stderr, "%s%s\n", prompt, line);
    return line;
}

char *input_line(struct input *in, const char *prompt) {
    fflush(stdout);
    if (!in->tty)
        return input_plain(prompt);
    char *line = readline(prompt);
    if (!line && in->cancel && *in->cancel) {
        *in->cancel = 0;
        fputc('\n', stdout);
        return strdup("");
    }
    if (line && in->cancel)
        *in->cancel = 0;    /* a Ctrl-C while typing: nothing was running to cancel */
    return line;
}

void input_remember(struct input *in, const char *line) {
    if (in->tty && line && *line)
        add_history(line);
}
