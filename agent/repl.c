/* repl.c - see repl.h. */
#include "repl.h"
#include "commands.h"
#include "turn.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int repl_line(struct session *s, const char *line) {
    while (isspace((unsigned char)*line))
        line++;
    if (!*line)
        return 0;
    *s->cancel = 0;
    return line[0] == '/' ? commands_run(s, line) : turn_handle(s, line);
}

int repl_run(struct session *s) {
    int last = 0;
    if (s->in->tty)
        printf("sniper - talking to %s (/help for commands, Ctrl-D to leave)\n", s->cfg->server);
    while (!s->quit) {
        char *line = input_line(s->in, s->in->tty ? "> " : "");
        if (!line)
            break;
        input_remember(s->in, line);
        int rc = repl_line(s, line);
        if (rc < 0)
            last = rc;
        free(line);
    }
    if (s->in->tty)
        printf("\n");
    return s->in->tty ? 0 : last;
}
