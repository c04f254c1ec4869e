/* allowlist.c - see allowlist.h. Programs are matched by their exact name (no path), so
 * `/tmp/ls` or `./ls` is not `ls`. */
#include "allowlist.h"

#include <stddef.h>
#include <string.h>

static const char *const READ_ONLY[] = {
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "find", "df", "du", "pwd",
    "uname", "which", "ps", "whoami", "id", "uptime", "free", "stat", "cut", "tr", "basename",
    "dirname", "realpath", "nproc", "lscpu", "echo", "true",
};
/* Left out on purpose: date (-s sets the clock), hostname (sets it), file (-C writes), sort (-o),
 * uniq (writes its second argument), env and xargs (run other programs). */

/* find's options that act on what they find, or write files. */
static const char *const FIND_ACTIONS[] = {
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
};

static bool in_list(const char *w, size_t n, const char *const *list, size_t n_list) {
    for (size_t i = 0; i < n_list; i++)
        if (strlen(list[i]) == n && memcmp(list[i], w, n) == 0)
            return true;
    return false;
}

/* One pipeline stage [s, e): its first word is allowlisted, and find has no action. */
static bool stage_ok(const char *s, const char *e) {
    bool first = true, is_find = false;
    while (s < e) {
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        const char *w = s;
        while (s < e && *s != ' ' && *s != '\t')
            s++;
        /* the shell removes quotes, so the checks see the word without them: -ex'ec' is -exec */
        char word[64];
        size_t n = 0;
        for (const char *c = w; c < s; c++)
            if (*c != '\'' && *c != '"' && n < sizeof(word) - 1)
                word[n++] = *c;
        if (s == w)
            break;
        w = word;
        if (first) {
            if (!in_list(w, n, READ_ONLY, sizeof(READ_ONLY) / sizeof(READ_ONLY[0])))
                return false;
            is_find = n == 4 && memcmp(w, "find", 4) == 0;
            first = false;
        } else if (is_find &&
                   in_list(w, n, FIND_ACTIONS, sizeof(FIND_ACTIONS) / sizeof(FIND_ACTIONS[0]))) {
            return false;
        }
    }
    return !first;
}

bool allowlist_is_read_only(const char *cmd) {
    if (!cmd || strpbrk(cmd, "<>;&$`(){}\n\r\\"))
        return false;
    const char *s = cmd;
    for (;;) {
        const char *bar = strchr(s, '|');
        const char *e = bar ? bar : s + strlen(s);
        if (!stage_ok(s, e))
            return false;
        if (!bar)
            return true;
        s = bar + 1;
    }
}
