/* math.h - the macOS SDK stand-in (tests/macos/sdk/README.md). */
#ifndef SDK_MATH_H
#define SDK_MATH_H
float fmaf(float x, float y, float z);
#endif
