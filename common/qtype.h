/* qtype.h - the tensor element types of GGUF/ggml, numbered as ggml numbers them on disk.
 * Knows each type's block geometry (elements per block, bytes per block) so that the GGUF reader
 * can size every tensor, even of types for which no kernel exists yet. */
#ifndef SNIPER_QTYPE_H
#define SNIPER_QTYPE_H

#include <stdbool.h>
#include <stdint.h>

enum qtype {
    QTYPE_F32 = 0,
    QTYPE_F16 = 1,
    QTYPE_Q4_0 = 2,
    QTYPE_Q4_1 = 3,
    QTYPE_Q5_0 = 6,
    QTYPE_Q5_1 = 7,
    QTYPE_Q8_0 = 8,
    QTYPE_Q8_1 = 9,
    QTYPE_Q2_K = 10,
    QTYPE_Q3_K = 11,
    QTYPE_Q4_K = 12,
    QTYPE_Q5_K = 13,
    QTYPE_Q6_K = 14,
    QTYPE_Q8_K = 15,
    QTYPE_IQ2_XXS = 16,
    QTYPE_IQ2_XS = 17,
    QTYPE_IQ3_XXS = 18,
    QTYPE_IQ1_S = 19,
    QTYPE_IQ4_NL = 20,
    QTYPE_IQ3_S = 21,
    QTYPE_IQ2_S = 22,
    QTYPE_IQ4_XS = 23,
    QTYPE_I8 = 24,
    QTYPE_I16 = 25,
    QTYPE_I32 = 26,
    QTYPE_I64 = 27,
    QTYPE_F64 = 28,
    QTYPE_IQ1_M = 29,
    QTYPE_BF16 = 30,
    QTYPE_TQ1_0 = 34,
    QTYPE_TQ2_0 = 35,
    QTYPE_MXFP4 = 39,
    QTYPE_COUNT = 40,
};

/* True when t is a type whose block geometry we know (a GGUF tensor of another type is rejected). */
bool qtype_is_known(uint32_t t);

/* Elements per block (1 for plain scalar types); 0 for an unknown type. */
uint32_t qtype_block_elems(enum qtype t);

/* Bytes per block; 0 for an unknown type. */
uint32_t qtype_block_bytes(enum qtype t);

/* Lower-case name as ggml prints it ("q4_K", "f32"); "unknown" for an unknown type. Static string. */
const char *qtype_name(enum qtype t);

/* Bytes of a row of n elements into *out. Returns 0, or -EINVAL when t is unknown or n is not a
 * multiple of the block size, -EOVERFLOW when the size does not fit in 64 bits. */
int qtype_row_bytes(enum qtype t, uint64_t n, uint64_t *out);

#endif
