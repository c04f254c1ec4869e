/* units.c - see units.h. */
#include "units.h"

#include <errno.h>
#include <stdlib.h>

int units_parse_bytes(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    }
    if (*end == 'i' || *end == 'B')
        end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
    if (errno || end == s || *end || !(v > 0) || v * mul > 1e18)
        return -EINVAL;
    *out = (uint64_t)(v * mul);
    return 0;
}

int units_parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}
