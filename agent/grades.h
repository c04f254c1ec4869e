/* grades.h - /good and /bad append one JSON line per graded answer to a log; /improve reads the
 * log back and summarises it by route, so one can see which path (search, shell, chat) fails and
 * on what requests. A line: {"time", "grade": "good"|"bad", "route", "model", "request", "answer",
 * "note"}. */
#ifndef SNIPER_AGENT_GRADES_H
#define SNIPER_AGENT_GRADES_H

#include <stdio.h>

struct grade {
    const char *grade;     /* "good" or "bad" */
    const char *route;     /* "chat", "search", "shell", "raw", ... */
    const char *model;
    const char *request;
    const char *answer;
    const char *note;      /* may be NULL */
};

/* Appends g to the log at path (its directory created). Returns 0 or a negative errno with err
 * filled. */
int grades_append(const char *path, const struct grade *g, char *err, size_t err_len);

/* Writes to out, per route, the counts of good and bad and the share good, then the last few bad
 * requests. Lines that are not JSON are counted and skipped. Returns 0 (also when the log does not
 * exist yet: it says so) or a negative errno with err filled. */
int grades_summary(const char *path, FILE *out, char *err, size_t err_len);

#endif
