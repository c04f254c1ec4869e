/* qtype.c - block geometry of ggml's tensor types (the on-disk numbering is ggml's). */
#include "qtype.h"

#include <errno.h>

struct qtype_info {
    const char *name;
    uint32_t block_elems;
    uint32_t block_bytes;
};

static const struct qtype_info qtype_table[QTYPE_COUNT] = {
    [QTYPE_F32] = {"f32", 1, 4},
    [QTYPE_F16] = {"f16", 1, 2},
    [QTYPE_Q4_0] = {"q4_0", 32, 18},
    [QTYPE_Q4_1] = {"q4_1", 32, 20},
    [QTYPE_Q5_0] = {"q5_0", 32, 22},
    [QTYPE_Q5_1] = {"q5_1", 32, 24},
    [QTYPE_Q8_0] = {"q8_0", 32, 34},
    [QTYPE_Q8_1] = {"q8_1", 32, 36},
    [QTYPE_Q2_K] = {"q2_K", 256, 84},
    [QTYPE_Q3_K] = {"q3_K", 256, 110},
    [QTYPE_Q4_K] = {"q4_K", 256, 144},
    [QTYPE_Q5_K] = {"q5_K", 256, 176},
    [QTYPE_Q6_K] = {"q6_K", 256, 210},
    [QTYPE_Q8_K] = {"q8_K", 256, 292},
    [QTYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [QTYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [QTYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [QTYPE_IQ1_S] = {"iq1_s", 256, 50},
    [QTYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [QTYPE_IQ3_S] = {"iq3_s", 256, 110},
    [QTYPE_IQ2_S] = {"iq2_s", 256, 82},
    [QTYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [QTYPE_I8] = {"i8", 1, 1},
    [QTYPE_I16] = {"i16", 1, 2},
    [QTYPE_I32] = {"i32", 1, 4},
    [QTYPE_I64] = {"i64", 1, 8},
    [QTYPE_F64] = {"f64", 1, 8},
    [QTYPE_IQ1_M] = {"iq1_m", 256, 56},
    [QTYPE_BF16] = {"bf16", 1, 2},
    [QTYPE_TQ1_0] = {"tq1_0", 256, 54},
    [QTYPE_TQ2_0] = {"tq2_0", 256, 66},
    [QTYPE_MXFP4] = {"mxfp4", 32, 17},
};

bool qtype_is_known(uint32_t t) {
    return t < QTYPE_COUNT && qtype_table[t].block_elems != 0;
}

uint32_t qtype_block_elems(enum qtype t) {
    return qtype_is_known(t) ? qtype_table[t].block_elems : 0;
}

uint32_t qtype_block_bytes(enum qtype t) {
    return qtype_is_known(t) ? qtype_table[t].block_bytes : 0;
}

const char *qtype_name(enum qtype t) {
    return qtype_is_known(t) ? qtype_table[t].name : "unknown";
}

int qtype_row_bytes(enum qtype t, uint64_t n, uint64_t *out) {
    if (!qtype_is_known(t) || n % qtype_table[t].block_elems != 0)
        return -EINVAL;
    uint64_t blocks = n / qtype_table[t].block_elems;
    if (__builtin_mul_overflow(blocks, (uint64_t)qtype_table[t].block_bytes, out))
        return -EOVERFLOW;
    return 0;
}
