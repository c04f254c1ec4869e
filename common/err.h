/* err.h - the error-message buffer convention: functions that can fail take (char *err, size_t
 * err_len) and fill it with one line naming what failed; callers print it. */
#ifndef SNIPER_ERR_H
#define SNIPER_ERR_H

#include <stddef.h>

/* Formats a message into err (always NUL-terminated when err_len > 0). Accepts err NULL. */
void err_set(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
