/* gpu_shaders.h - the SPIR-V of every kernel in server/gpu/shaders, embedded at build time (the
 * Makefile compiles each NAME.comp with glslc and generates the table). */
#ifndef SNIPER_GPU_SHADERS_H
#define SNIPER_GPU_SHADERS_H

#include <stddef.h>

struct gpu_spirv {
    const char *name;          /* NAME of shaders/NAME.comp */
    const unsigned char *code; /* SPIR-V words, as bytes (not 4-byte aligned) */
    const size_t *bytes;
};

extern const struct gpu_spirv gpu_spirv_table[];
extern const int gpu_spirv_count;

#endif
