/* grades.c - see grades.h. */
#include "grades.h"
#include "err.h"
#include "paths.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int grades_append(const char *path, const struct grade *g, char *err, size_t err_len) {
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    json_t *line = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "time", when, "grade", g->grade,
                             "route", g->route, "model", g->model ? g->model : "",
                             "request", g->request, "answer", g->answer);
    char *text = NULL;
    int rc = -ENOMEM;
    if (!line)
        goto out;
    if (g->note && *g->note)
        json_object_set_new(line, "note", json_string(g->note));
    if (!(text = json_dumps(line, JSON_COMPACT)))
        goto out;
    paths_make_parent(path);
    FILE *f = fopen(path, "a");
    if (!f) {
        rc = -errno;
        err_set(err, err_len, "cannot open grade log \"%s\": %s", path, strerror(errno));
        goto out;
    }
    fprintf(f, "%s\n", text);
    rc = fclose(f) == 0 ? 0 : -EIO;
    if (rc < 0)
        err_set(err, err_len, "cannot write grade log \"%s\"", path);
out:
    if (rc == -ENOMEM)
        err_set(err, err_len, "out of memory");
    free(text);
    json_decref(line);
    return rc;
}

#define GRADES_MAX_ROUTES 16
#define GRADES_LAST_BAD 5

struct route_count {
    char route[24];
    long good, bad;
};

static struct route_count *route_slot(struct route_count *rc, int *n, const char *route) {
    for (int i = 0; i < *n; i++)
        if (strcmp(rc[i].route, route) == 0)
            return &rc[i];
    if (*n == GRADES_MAX_ROUTES)
        return &rc[GRADES_MAX_ROUTES - 1];
    snprintf(rc[*n].route, sizeof(rc[*n].route), "%s", route);
    return &rc[(*n)++];
}

int grades_summary(const char *path, FILE *out, char *err, size_t err_len) {
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) {
            fprintf(out, "no grades yet (%s): grade answers with /good or /bad\n", path);
            return 0;
        }
        err_set(err, err_len, "cannot open grade log \"%s\": %s", path, strerror(errno));
        return -errno;
    }
    struct route_count counts[GRADES_MAX_ROUTES] = { 0 };
    int n_routes = 0;
    long n_bad_lines = 0;
    char *bad[GRADES_LAST_BAD] = { 0 };   /* ring of the last bad requests */
    long n_bad = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        const char *grade = json_string_value(json_object_get(j, "grade"));
        const char *route = json_string_value(json_object_get(j, "route"));
        if (!grade || !route) {
            n_bad_lines++;
            json_decref(j);
            continue;
        }
        struct route_count *c = route_slot(counts, &n_routes, route);
        if (strcmp(grade, "good") == 0) {
            c->good++;
        } else {
            c->bad++;
            const char *req = json_string_value(json_object_get(j, "request"));
            free(bad[n_bad % GRADES_LAST_BAD]);
            bad[n_bad % GRADES_LAST_BAD] = strdup(req ? req : "");
            n_bad++;
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    fprintf(out, "%-10s %6s %6s %7s\n", "route", "good", "bad", "good%");
    for (int i = 0; i < n_routes; i++) {
        long t = counts[i].good + counts[i].bad;
        fprintf(out, "%-10s %6ld %6ld %6.0f%%\n", counts[i].route, counts[i].good, counts[i].bad,
                t ? 100.0 * (double)counts[i].good / (double)t : 0.0);
    }
    if (n_bad_lines)
        fprintf(out, "(%ld unreadable lines skipped)\n", n_bad_lines);
    if (n_bad)
        fprintf(out, "last bad answers were to:\n");
    for (long k = n_bad > GRADES_LAST_BAD ? n_bad - GRADES_LAST_BAD : 0; k < n_bad; k++)
        fprintf(out, "  - %.100s\n", bad[k % GRADES_LAST_BAD] ? bad[k % GRADES_LAST_BAD] : "");
    for (int i = 0; i < GRADES_LAST_BAD; i++)
        free(bad[i]);
    return 0;
}
