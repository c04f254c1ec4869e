/* utf8.c - UTF-8 checks for generated text: a character is valid when it is the shortest form of
 * a code point up to U+10FFFF that is not a surrogate (RFC 3629). */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* The length of the valid UTF-8 character at s[0..n), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                                : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const unsigned min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t utf8_tail(const char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned c = (unsigned char)s[n - k];
        if ((c & 0xc0) == 0x80)
            continue;
        size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return len > k ? k : 0;
    }
    return 0;
}

json_t *utf8_json_string(const char *s, size_t n) {
    char *fixed = malloc(n * 3 + 1);
    size_t o = 0;
    if (!fixed)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k) {
            memcpy(fixed + o, s + i, k);
            o += k, i += k;
        } else {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3, i++;
        }
    }
    json_t *v = json_stringn_nocheck(fixed, o);
    free(fixed);
    return v;
}
