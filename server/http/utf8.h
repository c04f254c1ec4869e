/* utf8.h - generated text into JSON strings. A model's pieces may hold invalid UTF-8, or end in
 * the middle of a character the next piece completes: JSON strings must be valid, and a streamed
 * delta must not split a character (or the client would see U+FFFD where the whole text has the
 * character). Pure functions.
 *
 *     size_t ready = n - utf8_tail(text, n);     // stream text[0..ready) now, the rest later
 *     json_t *s = utf8_json_string(text, ready);  // invalid bytes as U+FFFD */
#ifndef SNIPER_UTF8_H
#define SNIPER_UTF8_H

#include <jansson.h>
#include <stddef.h>

/* The bytes at the end of s[0..n) that begin a UTF-8 character the next bytes may complete
 * (0 to 3). */
size_t utf8_tail(const char *s, size_t n);

/* A JSON string of s[0..n) with each byte that is not part of a valid UTF-8 character replaced
 * by U+FFFD. Returns a new reference, or NULL on no memory. */
json_t *utf8_json_string(const char *s, size_t n);

#endif
