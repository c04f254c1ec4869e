/* units.h - numbers as people write them on command lines: sizes ("4G", "512M", "2592K",
 * "1.5GiB") and counts ("512", "-1"). */
#ifndef SNIPER_UNITS_H
#define SNIPER_UNITS_H

#include <stdint.h>

/* Parses a positive number with an optional K, M, G or T suffix (powers of 1024; "i" and "B" may
 * follow: 4GiB, 4GB). Returns 0 with *out set, or -EINVAL (nothing else, trailing text, <= 0, or
 * more than 1e18 bytes). */
int units_parse_bytes(const char *s, uint64_t *out);

/* Parses a whole decimal number in [lo, hi]: an optional sign and digits, nothing after them (no
 * suffix, no fraction). Returns 0 with *out set, or -EINVAL (nothing, trailing text, out of
 * [lo, hi] or of long long's range), *out untouched. */
int units_parse_int(const char *s, long long lo, long long hi, long long *out);

#endif
