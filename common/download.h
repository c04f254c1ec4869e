/* download.h - one file over HTTP(S) into a partial file that a later call resumes (libcurl):
 *
 *     struct download_opts o = {.label = "model.gguf", .progress = stderr, .tty = true};
 *     long status;
 *     int rc = download_resume(&o, url, "model.gguf.part", size, &status, err, sizeof(err));
 *     // rc 0: the part holds all `size` bytes (status 200 or 206, or 0 when it already did)
 *
 * The part file is opened for appending: what it holds is kept and the rest asked for with a
 * Range header (a server that ignores it answers 200 and the part starts over). Redirects are
 * followed; a bearer token goes to the first host only (libcurl's default). Nothing here renames
 * or verifies: the caller checks the sha256 (download_sha256_file) and renames. */
#ifndef SNIPER_DOWNLOAD_H
#define SNIPER_DOWNLOAD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct download_opts {
    const char *token;             /* Authorization: Bearer TOKEN; NULL or "": none */
    const char *label;             /* the file's name in progress lines */
    FILE *progress;                /* NULL: silent */
    bool tty;                      /* a bar redrawn in place; else a line every 10% */
    volatile sig_atomic_t *cancel; /* non-zero stops the transfer; may be NULL */
};

/* Brings part up to size bytes from url. Returns 0 (complete), or with one line in err:
 * -EHOSTUNREACH (cannot resolve or connect), -ENOSPC (the disk filled: err says how many bytes
 * more are needed; the part keeps what arrived), -ECANCELED, -EPROTO (an HTTP status other than
 * 200/206: *status has it, err is empty for the caller to word), -EIO (the transfer stopped or the
 * server sent another size: the part keeps what arrived), -ENOMEM, or -errno of the part file.
 * *status is the last HTTP status (0: none came). */
int download_resume(const struct download_opts *o, const char *url, const char *part,
                    uint64_t size, long *status, char *err, size_t err_len);

/* The sha256 of the file at path as 64 lowercase hex digits into hex. Returns 0 or -errno. */
int download_sha256_file(const char *path, char hex[65]);

#endif
