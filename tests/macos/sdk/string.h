/* string.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_STRING_H
#define SDK_STRING_H
#include <stddef.h>
void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memset(void *dst, int c, size_t n);
int strcmp(const char *a, const char *b);
size_t strlen(const char *s);
#endif
