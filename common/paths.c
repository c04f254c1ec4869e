/* paths.c - see paths.h. */
#include "paths.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int paths_make_parent(const char *path) {
    char *p = strdup(path);
    int rc = 0;
    if (!p)
        return -ENOMEM;
    char *slash = strrchr(p, '/');
    if (slash && slash != p) {
        *slash = '\0';
        for (char *c = p + 1; *c && rc == 0; c++) {
            if (*c != '/')
                continue;
            *c = '\0';
            if (mkdir(p, 0700) < 0 && errno != EEXIST)
                rc = -errno;
            *c = '/';
        }
        if (rc == 0 && mkdir(p, 0700) < 0 && errno != EEXIST)
            rc = -errno;
    }
    free(p);
    return rc;
}
