/* test_quant_simd.c - the AVX2 and AVX-512 (x86) and NEON (arm64: plain, with SDOT, and with SDOT
 * and SMMLA, "i8mm") vec_dot kernels against the scalar reference. For every weight type (the
 * grid i-quants included: each ISA's table is quant.c's, quant_register_* and
 * quant_iq_register_* over the reference) and each ISA this CPU has: random rows (quantized floats, and raw random
 * codes with random fp16 scales incl. negative and zero) at 1, 2, 3, 7, 8 blocks and 768/2048
 * elements, activations from the reference from_float. Pass: |simd - ref| <= SIMD_REL_TOL *
 * sum|w_i a_i| + SIMD_ABS_TOL, the terms taken from the dequantized rows.
 * vec_dot4 (one weight row, four activation rows) must equal the same table's vec_dot for every
 * column bit for bit (memcmp of the floats), in the reference table and in every ISA's; so must
 * vec_dot_rows4 (four weight rows, row_bytes apart, one activation row) for every row, and
 * vec_dot_2xn (two weight rows against two or four activation rows; arm64's i8mm) for every
 * output. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "clock.h"
#include "harness.h"
#include "os.h"
#include "quant.h"
#include "quant_iq.h"

static const enum qtype all_types[] = {
    QTYPE_F32,  QTYPE_F16,  QTYPE_BF16,  QTYPE_Q8_0,   QTYPE_Q4_0,   QTYPE_Q5_0,
    QTYPE_Q4_1, QTYPE_Q5_1, QTYPE_Q2_K,  QTYPE_Q3_K,   QTYPE_Q4_K,   QTYPE_Q5_K,
    QTYPE_Q6_K, QTYPE_MXFP4, QTYPE_IQ4_NL, QTYPE_IQ4_XS,
    QTYPE_IQ2_XXS, QTYPE_IQ2_XS, QTYPE_IQ2_S, QTYPE_IQ3_XXS, QTYPE_IQ3_S, QTYPE_IQ1_S, QTYPE_IQ1_M,
};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

/* ---- random data ----------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Uniform in [-1, 1). */
static float rng_unit(void) {
    return (float)((double)(rng_next() >> 11) / 4503599627370496.0 - 1.0);
}

/* A block scale: mostly random magnitudes over several decades and both signs, sometimes 0. */
static fp16_t rng_scale(void) {
    uint64_t r = rng_next() % 16;
    if (r == 0)
        return f32_to_fp16(0.0f);
    float mag = powf(10.0f, -4.0f + 4.0f * (rng_unit() + 1.0f) / 2.0f);
    return f32_to_fp16(r < 5 ? -mag : mag);
}

/* Random floats with a few outliers, like activations and weights. */
static void fill_floats(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) {
        x[i] = scale * rng_unit();
        if (rng_next() % 64 == 0)
            x[i] *= 20.0f;
    }
}

/* Overwrites every block's fp16 scale fields (the codes stay random) with rng_scale(). */
static void randomize_scales(enum qtype t, void *row, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        switch (t) {
        case QTYPE_Q4_0: ((struct block_q4_0 *)row)[i].d = rng_scale(); break;
        case QTYPE_Q5_0: ((struct block_q5_0 *)row)[i].d = rng_scale(); break;
        case QTYPE_Q8_0: ((struct block_q8_0 *)row)[i].d = rng_scale(); break;
        case QTYPE_Q4_1:
            ((struct block_q4_1 *)row)[i].d = rng_scale();
            ((struct block_q4_1 *)row)[i].m = rng_scale();
            break;
        case QTYPE_Q5_1:
            ((struct block_q5_1 *)row)[i].d = rng_scale();
            ((struct block_q5_1 *)row)[i].m = rng_scale();
            break;
        case QTYPE_Q4_K:
            ((struct block_q4_K *)row)[i].d = rng_scale();
            ((struct block_q4_K *)row)[i].dmin = rng_scale();
            break;
        case QTYPE_Q5_K:
            ((struct block_q5_K *)row)[i].d = rng_scale();
            ((struct block_q5_K *)row)[i].dmin = rng_scale();
            break;
        case QTYPE_Q6_K: ((struct block_q6_K *)row)[i].d = rng_scale(); break;
        case QTYPE_Q2_K:
            ((struct block_q2_K *)row)[i].d = rng_scale();
            ((struct block_q2_K *)row)[i].dmin = rng_scale();
            break;
        case QTYPE_Q3_K: ((struct block_q3_K *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ4_NL: ((struct block_iq4_nl *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ4_XS: ((struct block_iq4_xs *)row)[i].d = rng_scale(); break;
        case QTYPE_MXFP4: /* a scale of 2^-32..2^31 keeps the sums finite */
            ((struct block_mxfp4 *)row)[i].e = (uint8_t)(96 + rng_next() % 64);
            break;
        case QTYPE_IQ2_XXS: ((struct block_iq2_xxs *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ2_XS: ((struct block_iq2_xs *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ2_S: ((struct block_iq2_s *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ3_XXS: ((struct block_iq3_xxs *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ3_S: ((struct block_iq3_s *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ1_S: ((struct block_iq1_s *)row)[i].d = rng_scale(); break;
        case QTYPE_IQ1_M: { /* d's nibbles top the four scale words (quant_iq1_m_d) */
            struct block_iq1_m *b = &((struct block_iq1_m *)row)[i];
            const fp16_t d = rng_scale();
            for (int k = 0; k < 4; k++)
                b->scales[2 * k + 1] =
                    (uint8_t)((b->scales[2 * k + 1] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
            break;
        }
        default: break;
        }
    }
}

static bool is_float_type(enum qtype t) {
    return t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16;
}

/* ---- one comparison -------------------------------------------------------------------------- */

/* Fills w (w_bytes) with a random weight row of n elements of type t: mode 0 quantizes random
 * floats, mode 1 writes random codes and random scales. The grid i-quants take mode 1's rows in
 * both modes: their quantizer searches the codebooks for every 8 values, seconds per row under
 * qemu (test_quant_iq checks their kernels on quantized rows). xf is scratch for n floats. */
static void fill_weight_row(enum qtype t, uint8_t *w, uint64_t w_bytes, int64_t n, int mode,
                            float *xf) {
    if ((mode == 1 || quant_iq_is_grid(t)) && !is_float_type(t)) {
        for (uint64_t i = 0; i < w_bytes; i++)
            w[i] = (uint8_t)rng_next();
        randomize_scales(t, w, n / qtype_block_elems(t));
    } else {
        fill_floats(xf, n, mode ? 4.0f : 0.5f);
        CHECK_EQ_INT(quant_quantize_row(t, xf, w, n), 0);
    }
}

/* Builds a random weight row (mode 0: quantized floats; mode 1: random codes and scales) and
 * activation row of n elements and checks that k->vec_dot has the reference's bits. */
static void compare_one(const struct quant_kernels *k, enum qtype t, int64_t n, int mode) {
    const struct quant_kernels *ref = quant_kernels_ref(t);
    uint64_t w_bytes = 0;
    size_t a_bytes = quant_act_row_bytes(t, n);
    CHECK_EQ_INT(qtype_row_bytes(t, (uint64_t)n, &w_bytes), 0);
    float *xf = calloc((size_t)n, sizeof(*xf));
    uint8_t *w = calloc(w_bytes + 64, 1), *a = calloc(a_bytes + 64, 1);
    if (!xf || !w || !a || !a_bytes) {
        CHECK_MSG(false, "alloc/size failed for %s n=%lld", qtype_name(t), (long long)n);
        goto out;
    }
    fill_weight_row(t, w, w_bytes, n, mode, xf);
    fill_floats(xf, n, mode ? 30.0f : 1.0f);
    ref->from_float(xf, a, n);

    float got = NAN, want = NAN;
    ref->vec_dot(n, &want, w, a);
    k->vec_dot(n, &got, w, a);
    CHECK_MSG(memcmp(&got, &want, sizeof(float)) == 0,
              "%s %s n=%lld mode=%d: simd %.9g ref %.9g (not bitwise equal)", k->isa,
              qtype_name(t), (long long)n, mode, got, want);
out:
    free(xf);
    free(w);
    free(a);
}

/* One random weight row against four random activation rows (the last one twice when dup): each
 * k->vec_dot4 column, and each column of k->vec_dot2 on rows 0-1 and 2-3 where the table has it,
 * must be bit-identical to k->vec_dot of that column. Activation rows sit at
 * offsets of one buffer that keep 4-byte alignment (what C requires of the formats' fields) but
 * nothing wider, so no kernel may rely on vector alignment. */
static void compare_four(const struct quant_kernels *k, enum qtype t, int64_t n, int mode,
                         bool dup) {
    uint64_t w_bytes = 0;
    size_t a_bytes = quant_act_row_bytes(t, n);
    CHECK_EQ_INT(qtype_row_bytes(t, (uint64_t)n, &w_bytes), 0);
    float *xf = calloc((size_t)n, sizeof(*xf));
    uint8_t *w = calloc(w_bytes + 64, 1), *abuf = calloc(4 * (a_bytes + 64), 1);
    if (!xf || !w || !abuf || !a_bytes) {
        CHECK_MSG(false, "alloc/size failed for %s n=%lld", qtype_name(t), (long long)n);
        goto out;
    }
    fill_weight_row(t, w, w_bytes, n, mode, xf);
    const void *a[4];
    for (int j = 0; j < 4; j++) {
        uint8_t *aj = abuf + (size_t)j * (a_bytes + 64) + 4 + (size_t)j * 4;
        fill_floats(xf, n, mode ? 30.0f : (float)(j + 1));
        k->from_float(xf, aj, n);
        a[j] = dup && j == 3 ? a[2] : aj;
    }
    float got[4], want[4];
    memset(got, 0xA5, sizeof(got));
    k->vec_dot4(n, got, w, a);
    for (int j = 0; j < 4; j++)
        k->vec_dot(n, &want[j], w, a[j]);
    for (int j = 0; j < 4; j++)
        CHECK_MSG(memcmp(&got[j], &want[j], sizeof(float)) == 0,
                  "%s %s n=%lld mode=%d col %d: vec_dot4 %.9g vec_dot %.9g (not bitwise equal)",
                  k->isa, qtype_name(t), (long long)n, mode, j, got[j], want[j]);
    for (int j = 0; k->vec_dot2 && j < 4; j += 2) { /* columns 0-1, then 2-3 (equal when dup) */
        float two[2];
        k->vec_dot2(n, two, w, a + j);
        for (int c = 0; c < 2; c++)
            CHECK_MSG(memcmp(&two[c], &want[j + c], sizeof(float)) == 0,
                      "%s %s n=%lld mode=%d col %d: vec_dot2 %.9g vec_dot %.9g (not bitwise equal)",
                      k->isa, qtype_name(t), (long long)n, mode, j + c, two[c], want[j + c]);
    }
out:
    free(xf);
    free(w);
    free(abuf);
}

/* vec_dot4 against vec_dot for type t in table k over the block counts and row sizes that
 * check_isa uses. */
static void check_four(const struct quant_kernels *k, enum qtype t) {
    CHECK_MSG(k->vec_dot4 != NULL, "%s %s: vec_dot4 is NULL", k->isa, qtype_name(t));
    if (!k->vec_dot4)
        return;
    int64_t be = qtype_block_elems(t);
    const int64_t blocks[] = {1, 2, 3, 5, 7, 8};
    for (int mode = 0; mode < 2; mode++) {
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
            for (int rep = 0; rep < 3; rep++)
                compare_four(k, t, blocks[b] * be, mode, rep == 2);
        if (be == 1) {
            compare_four(k, t, 17, mode, false);
            compare_four(k, t, 33, mode, false);
            compare_four(k, t, 100, mode, true);
        }
        for (int rep = 0; rep < 3; rep++) {
            compare_four(k, t, 768, mode, rep == 2);
            compare_four(k, t, 2048, mode, rep == 2);
        }
    }
}

/* Four random weight rows of n elements, row_bytes = their size plus pad bytes apart (pad = 0 is a
 * real matrix's layout), against one random activation row 4 bytes off vector alignment: the
 * four outputs of k->vec_dot_rows4 must be bit-identical to k->vec_dot of that row. */
static void compare_rows4(const struct quant_kernels *k, enum qtype t, int64_t n, int mode,
                          size_t pad) {
    uint64_t w_bytes = 0;
    size_t a_bytes = quant_act_row_bytes(t, n);
    CHECK_EQ_INT(qtype_row_bytes(t, (uint64_t)n, &w_bytes), 0);
    const size_t rb = (size_t)w_bytes + pad;
    float *xf = calloc((size_t)n, sizeof(*xf));
    uint8_t *w = calloc(4 * rb + 64, 1), *abuf = calloc(a_bytes + 64, 1);
    if (!xf || !w || !abuf || !a_bytes) {
        CHECK_MSG(false, "alloc/size failed for %s n=%lld", qtype_name(t), (long long)n);
        goto out;
    }
    for (int r = 0; r < 4; r++) {
        fill_weight_row(t, w + (size_t)r * rb, w_bytes, n, mode, xf);
        for (size_t b = 0; b < pad; b++) /* garbage between rows must not matter */
            w[(size_t)r * rb + (size_t)w_bytes + b] = (uint8_t)rng_next();
    }
    uint8_t *a = abuf + 4;
    fill_floats(xf, n, mode ? 30.0f : 1.0f);
    k->from_float(xf, a, n);
    float got[4], want[4];
    memset(got, 0xA5, sizeof(got));
    k->vec_dot_rows4(n, got, w, rb, a);
    for (int r = 0; r < 4; r++)
        k->vec_dot(n, &want[r], w + (size_t)r * rb, a);
    for (int r = 0; r < 4; r++)
        CHECK_MSG(memcmp(&got[r], &want[r], sizeof(float)) == 0,
                  "%s %s n=%lld mode=%d pad=%zu row %d: vec_dot_rows4 %.9g vec_dot %.9g (not "
                  "bitwise equal)",
                  k->isa, qtype_name(t), (long long)n, mode, pad, r, got[r], want[r]);
out:
    free(xf);
    free(w);
    free(abuf);
}

/* A random row padding: 0 (contiguous rows) half the time, else a multiple of 4 below 256 (keeps
 * every format's fields naturally aligned). */
static size_t rng_pad(void) {
    return rng_next() % 2 ? 0 : 4 * (size_t)(rng_next() % 64);
}

/* vec_dot_rows4 against vec_dot for type t in table k: odd and even block counts, 768- and
 * 2048-element rows, contiguous and padded row spacing. */
static void check_rows4(const struct quant_kernels *k, enum qtype t) {
    CHECK_MSG(k->vec_dot_rows4 != NULL, "%s %s: vec_dot_rows4 is NULL", k->isa, qtype_name(t));
    if (!k->vec_dot_rows4)
        return;
    int64_t be = qtype_block_elems(t);
    const int64_t blocks[] = {1, 2, 3, 5, 7, 8};
    for (int mode = 0; mode < 2; mode++) {
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
            for (int rep = 0; rep < 3; rep++)
                compare_rows4(k, t, blocks[b] * be, mode, rep == 0 ? 0 : rng_pad());
        if (be == 1) {
            compare_rows4(k, t, 17, mode, 0);
            compare_rows4(k, t, 33, mode, rng_pad());
            compare_rows4(k, t, 100, mode, rng_pad());
        }
        for (int rep = 0; rep < 3; rep++) {
            compare_rows4(k, t, 768, mode, rep == 0 ? 0 : rng_pad());
            compare_rows4(k, t, 2048, mode, rep == 0 ? 0 : rng_pad());
        }
    }
}

/* Two random weight rows of n elements, row_bytes = their size plus pad bytes apart, against
 * n_act (2 or 4) random activation rows 4 bytes off vector alignment (the last repeated when
 * dup): output i * n_act + j of k->vec_dot_2xn must be bit-identical to k->vec_dot of row i and
 * activation row j. */
static void compare_2xn(const struct quant_kernels *k, enum qtype t, int64_t n, int mode,
                        size_t pad, int n_act, bool dup) {
    uint64_t w_bytes = 0;
    size_t a_bytes = quant_act_row_bytes(t, n);
    CHECK_EQ_INT(qtype_row_bytes(t, (uint64_t)n, &w_bytes), 0);
    const size_t rb = (size_t)w_bytes + pad;
    float *xf = calloc((size_t)n, sizeof(*xf));
    uint8_t *w = calloc(2 * rb + 64, 1), *abuf = calloc(4 * (a_bytes + 64), 1);
    if (!xf || !w || !abuf || !a_bytes) {
        CHECK_MSG(false, "alloc/size failed for %s n=%lld", qtype_name(t), (long long)n);
        goto out;
    }
    for (int r = 0; r < 2; r++) {
        fill_weight_row(t, w + (size_t)r * rb, w_bytes, n, mode, xf);
        for (size_t b = 0; b < pad; b++) /* garbage between rows must not matter */
            w[(size_t)r * rb + (size_t)w_bytes + b] = (uint8_t)rng_next();
    }
    const void *a[4];
    for (int j = 0; j < n_act; j++) {
        uint8_t *aj = abuf + (size_t)j * (a_bytes + 64) + 4 + (size_t)j * 4;
        fill_floats(xf, n, mode ? 30.0f : (float)(j + 1));
        k->from_float(xf, aj, n);
        a[j] = dup && j == n_act - 1 ? a[j - 1] : aj;
    }
    float got[8], want;
    memset(got, 0xA5, sizeof(got));
    k->vec_dot_2xn(n, got, w, rb, a, n_act);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < n_act; j++) {
            k->vec_dot(n, &want, w + (size_t)i * rb, a[j]);
            CHECK_MSG(memcmp(&got[i * n_act + j], &want, sizeof(float)) == 0,
                      "%s %s n=%lld mode=%d pad=%zu n_act=%d row %d col %d: vec_dot_2xn %.9g "
                      "vec_dot %.9g (not bitwise equal)",
                      k->isa, qtype_name(t), (long long)n, mode, pad, n_act, i, j,
                      got[i * n_act + j], want);
        }
out:
    free(xf);
    free(w);
    free(abuf);
}

/* vec_dot_2xn against vec_dot for type t in table k (nothing where k has none): two and four
 * activation rows, the block counts and row sizes of check_rows4, contiguous and padded rows. */
static void check_2xn(const struct quant_kernels *k, enum qtype t) {
    if (!k->vec_dot_2xn)
        return;
    int64_t be = qtype_block_elems(t);
    const int64_t blocks[] = {1, 2, 3, 5, 7, 8};
    for (int mode = 0; mode < 2; mode++)
        for (int n_act = 2; n_act <= 4; n_act += 2) {
            for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
                for (int rep = 0; rep < 2; rep++)
                    compare_2xn(k, t, blocks[b] * be, mode, rep == 0 ? 0 : rng_pad(), n_act,
                                rep == 1);
            compare_2xn(k, t, 2048, mode, rng_pad(), n_act, false);
        }
}

/* ---- ISA selection --------------------------------------------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
static bool cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           os_cpu_x86_f16c();
}

static bool cpu_has_avx512(void) {
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}
#else /* another CPU family: the AVX cases skip, and these are never called */
static bool cpu_has_avx2(void) {
    return false;
}

static bool cpu_has_avx512(void) {
    return false;
}
#endif

/* Each ISA's table as quant.c builds it: its twins of the other types, then of the grid i-quants. */
#if defined(__x86_64__) || defined(__i386__)
static void register_avx2(struct quant_kernels *tab, int n_tab) {
    quant_register_avx2(tab, n_tab);
    quant_iq_register_avx2(tab, n_tab);
}

static void register_avx512(struct quant_kernels *tab, int n_tab) {
    quant_register_avx512(tab, n_tab);
    quant_iq_register_avx512(tab, n_tab);
}
#elif defined(__aarch64__)
static void register_neon(struct quant_kernels *tab, int n_tab) {
    quant_register_neon(tab, n_tab);
    quant_iq_register_neon(tab, n_tab);
}

static void register_neondot(struct quant_kernels *tab, int n_tab) {
    quant_register_neondot(tab, n_tab);
    quant_iq_register_neondot(tab, n_tab);
}

static void register_i8mm(struct quant_kernels *tab, int n_tab) {
    quant_register_i8mm(tab, n_tab);
    quant_iq_register_i8mm(tab, n_tab);
}
#endif

#if defined(__aarch64__)
static bool cpu_has_neon(void) {
    return true; /* part of every Armv8-A CPU */
}

static bool cpu_has_neondot(void) {
    return (os_cpu_arm_features() & OS_CPU_ARM_DOTPROD) != 0;
}

static bool cpu_has_i8mm(void) { /* the i8mm build uses SDOT as well */
    const unsigned f = os_cpu_arm_features();
    return (f & OS_CPU_ARM_DOTPROD) && (f & OS_CPU_ARM_I8MM);
}
#else /* another CPU family: the NEON cases skip, and these are never called */
static bool cpu_has_neon(void) {
    return false;
}

static bool cpu_has_neondot(void) {
    return false;
}

static bool cpu_has_i8mm(void) {
    return false;
}
#endif

/* A table holding the reference kernels, then whatever register() put over them. */
static void table_for(struct quant_kernels tab[QTYPE_COUNT],
                      void (*reg)(struct quant_kernels *, int)) {
    memset(tab, 0, sizeof(*tab) * QTYPE_COUNT);
    for (int t = 0; t < QTYPE_COUNT; t++) {
        const struct quant_kernels *ref = quant_kernels_ref((enum qtype)t);
        if (ref)
            tab[t] = *ref;
    }
    reg(tab, QTYPE_COUNT);
}

static void check_isa(const char *isa, void (*reg)(struct quant_kernels *, int),
                      const enum qtype *required, int n_required) {
    struct quant_kernels tab[QTYPE_COUNT];
    table_for(tab, reg);
    for (int r = 0; r < n_required; r++)
        CHECK_MSG(strcmp(tab[required[r]].isa, isa) == 0, "%s: %s not registered (isa %s)", isa,
                  qtype_name(required[r]), tab[required[r]].isa);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        enum qtype t = all_types[ti];
        const struct quant_kernels *ref = quant_kernels_ref(t);
        CHECK_MSG(ref != NULL, "no reference kernels for %s", qtype_name(t));
        if (!ref)
            continue;
        /* registration must leave the activation format alone */
        CHECK(tab[t].type == ref->type);
        CHECK(tab[t].vec_dot_type == ref->vec_dot_type);
        CHECK(tab[t].from_float == ref->from_float);
        int64_t be = qtype_block_elems(t);
        const int64_t blocks[] = {1, 2, 3, 7, 8};
        for (int mode = 0; mode < 2; mode++) {
            for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
                for (int rep = 0; rep < 4; rep++)
                    compare_one(&tab[t], t, blocks[b] * be, mode);
            if (be == 1) {
                compare_one(&tab[t], t, 17, mode);
                compare_one(&tab[t], t, 33, mode);
                compare_one(&tab[t], t, 100, mode);
            }
            for (int rep = 0; rep < 4; rep++) {
                compare_one(&tab[t], t, 768, mode);
                compare_one(&tab[t], t, 2048, mode);
            }
        }
        check_four(&tab[t], t);
        check_rows4(&tab[t], t);
        check_2xn(&tab[t], t);
    }
}

/* ---- cases ----------------------------------------------------------------------------------- */

/* Each CPU family's cases exist in its own builds only (the others' kernels are not linked). */
#if defined(__x86_64__) || defined(__i386__)
static void test_avx2_vs_ref(void) {
    if (!cpu_has_avx2()) {
        test_skip("cpu lacks avx2/fma/f16c: AVX2 kernels NOT checked");
        return;
    }
    check_isa("avx2", register_avx2, all_types, (int)N_TYPES);
}

static void test_avx512_vs_ref(void) {
    if (!cpu_has_avx512()) {
        test_skip("cpu lacks avx512 f/bw/vl/dq/vnni: AVX-512 kernels NOT checked");
        return;
    }
    check_isa("avx512", register_avx512, all_types, (int)N_TYPES);
}
#endif

#if defined(__aarch64__)
static void test_neon_vs_ref(void) {
    if (!cpu_has_neon()) {
        test_skip("cpu is not arm64: NEON kernels NOT checked");
        return;
    }
    check_isa("neon", register_neon, all_types, (int)N_TYPES);
}

static void test_neondot_vs_ref(void) {
    if (!cpu_has_neondot()) {
        test_skip("cpu lacks the arm64 dot-product extension: NEON SDOT kernels NOT checked");
        return;
    }
    check_isa("neondot", register_neondot, all_types, (int)N_TYPES);
}

/* The i8mm table: every type registered, and every block-quantized type (none of the float
 * types) with a vec_dot_2xn, each output of which check_isa compares with vec_dot. */
static void test_i8mm_vs_ref(void) {
    if (!cpu_has_i8mm()) {
        test_skip("cpu lacks the arm64 int8 matrix multiply extension: SMMLA kernels NOT checked");
        return;
    }
    struct quant_kernels tab[QTYPE_COUNT];
    table_for(tab, register_i8mm);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        enum qtype t = all_types[ti];
        bool blocked = qtype_block_elems(t) > 1;
        CHECK_MSG((tab[t].vec_dot_2xn != NULL) == blocked, "i8mm %s: vec_dot_2xn %s",
                  qtype_name(t), blocked ? "missing" : "set for a float type");
    }
    check_isa("i8mm", register_i8mm, all_types, (int)N_TYPES);
}
#endif

/* One wrong code anywhere in a row changes the result's bits: the bitwise comparison would see a
 * kernel that mishandles a single weight. */
static void test_one_code_changes_bits(void) {
    const int64_t n = 2048;
    float *xf = calloc((size_t)n, sizeof(*xf));
    struct block_q4_K *w = calloc((size_t)(n / QK_K), sizeof(*w));
    struct block_q8_K *a = calloc((size_t)(n / QK_K), sizeof(*a));
    if (!xf || !w || !a) {
        CHECK(false);
        goto out;
    }
    fill_floats(xf, n, 1.0f);
    CHECK_EQ_INT(quant_quantize_row(QTYPE_Q4_K, xf, w, n), 0);
    quant_q8_K_from_f32(xf, a, n);
    float before, after;
    quant_kernels_ref(QTYPE_Q4_K)->vec_dot(n, &before, w, a);
    w[3].qs[17] ^= 0x01;
    quant_kernels_ref(QTYPE_Q4_K)->vec_dot(n, &after, w, a);
    CHECK_MSG(memcmp(&before, &after, sizeof(float)) != 0, "one code did not change the result");
out:
    free(xf);
    free(w);
    free(a);
}

/* quant_kernels() must hand out one of our SIMD tables on a CPU that has the ISA. */
static void test_dispatch_picks_simd(void) {
    const char *env = getenv("SNIPER_ISA");
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const struct quant_kernels *k = quant_kernels(all_types[ti]);
        CHECK(k != NULL);
        if (!k || (env && *env))
            continue;
        if (cpu_has_avx512())
            CHECK_MSG(strcmp(k->isa, "avx512") == 0, "%s: %s", qtype_name(all_types[ti]), k->isa);
        else if (cpu_has_avx2())
            CHECK_MSG(strcmp(k->isa, "avx2") == 0, "%s: %s", qtype_name(all_types[ti]), k->isa);
        else if (cpu_has_i8mm())
            CHECK_MSG(strcmp(k->isa, "i8mm") == 0, "%s: %s", qtype_name(all_types[ti]), k->isa);
        else if (cpu_has_neondot())
            CHECK_MSG(strcmp(k->isa, "neondot") == 0, "%s: %s", qtype_name(all_types[ti]), k->isa);
        else if (cpu_has_neon())
            CHECK_MSG(strcmp(k->isa, "neon") == 0, "%s: %s", qtype_name(all_types[ti]), k->isa);
    }
}

/* The reference table's vec_dot4 (four calls of vec_dot) and the dispatched table's, per type. */
static void test_vec_dot4_ref_and_best(void) {
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const struct quant_kernels *ref = quant_kernels_ref(all_types[ti]);
        const struct quant_kernels *best = quant_kernels(all_types[ti]);
        CHECK(ref != NULL && best != NULL);
        if (!ref || !best)
            continue;
        check_four(ref, all_types[ti]);
        check_four(best, all_types[ti]);
        check_rows4(ref, all_types[ti]);
        check_rows4(best, all_types[ti]);
        check_2xn(best, all_types[ti]);
    }
}

/* The AVX-512 tables replace vec_dot, vec_dot4 and vec_dot_rows4 together, and every SIMD table
 * has its own vec_dot_rows4 (never the reference's) where its vec_dot is not the reference's. */
#if defined(__x86_64__) || defined(__i386__)
static void test_vec_dot4_registered_with_vec_dot(void) {
    if (!cpu_has_avx512()) {
        test_skip("cpu lacks avx512 f/bw/vl/dq/vnni: AVX-512 registration NOT checked");
        return;
    }
    struct quant_kernels t2[QTYPE_COUNT], t5[QTYPE_COUNT];
    table_for(t2, register_avx2);
    table_for(t5, register_avx512);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        enum qtype t = all_types[ti];
        bool replaced = t5[t].vec_dot != t2[t].vec_dot;
        CHECK_MSG(replaced == (t5[t].vec_dot4 != t2[t].vec_dot4),
                  "%s: avx512 did not replace vec_dot and vec_dot4 together", qtype_name(t));
        CHECK_MSG(replaced == (t5[t].vec_dot_rows4 != t2[t].vec_dot_rows4),
                  "%s: avx512 did not replace vec_dot and vec_dot_rows4 together", qtype_name(t));
        const struct quant_kernels *ref = quant_kernels_ref(t);
        CHECK_MSG(t2[t].vec_dot == ref->vec_dot || t2[t].vec_dot_rows4 != ref->vec_dot_rows4,
                  "%s: avx2 left the reference vec_dot_rows4 beside its vec_dot", qtype_name(t));
    }
}
#endif

/* Runs quant_kernels_select(tab, cap, corrupt) with stderr captured into log (size bytes). */
static int select_logged(struct quant_kernels *tab, const char *cap, const char *corrupt,
                         char *log, size_t size) {
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO), rc;
    log[0] = 0;
    if (!tmp || saved < 0) {
        CHECK_MSG(false, "cannot capture stderr");
        if (tmp)
            fclose(tmp);
        return quant_kernels_select(tab, cap, corrupt);
    }
    fflush(stderr);
    dup2(fileno(tmp), STDERR_FILENO);
    rc = quant_kernels_select(tab, cap, corrupt);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t got = fread(log, 1, size - 1, tmp);
    log[got] = 0;
    fclose(tmp);
    return rc;
}

/* Every type of a freshly selected table against the reference on random rows (bitwise). */
static void check_table_vs_ref(const struct quant_kernels *tab) {
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        enum qtype t = all_types[ti];
        for (int mode = 0; mode < 2; mode++) {
            compare_one(&tab[t], t, 3 * qtype_block_elems(t), mode);
            compare_one(&tab[t], t, 2048, mode);
        }
        check_rows4(&tab[t], t);
        check_2xn(&tab[t], t);
    }
}

/* The start-up self-check passes every kernel of this CPU, and quickly (it runs in every
 * process). */
static void test_self_check_clean(void) {
    struct quant_kernels tab[QTYPE_COUNT];
    char log[4096];
    double t0 = clock_now_s();
    int rejected = select_logged(tab, NULL, NULL, log, sizeof(log));
    double ms = (clock_now_s() - t0) * 1e3;
    CHECK_MSG(rejected == 0 && log[0] == 0, "%d kernels rejected: %s", rejected, log);
    printf("  start-up self-check: %.2f ms, q4_K -> %s\n", ms, tab[QTYPE_Q4_K].isa);
    check_table_vs_ref(tab);
}

/* test_self_check_fallback on arm64 with i8mm: i8mm -> neondot, and a cap below i8mm leaves
 * every vec_dot_2xn out. */
static __attribute__((unused)) void self_check_fallback_i8mm(void) {
    struct quant_kernels tab[QTYPE_COUNT];
    char log[4096];
    int rejected = select_logged(tab, NULL, "q4_K:i8mm", log, sizeof(log));
    CHECK_EQ_INT(rejected, 1);
    CHECK_STR(tab[QTYPE_Q4_K].isa, "neondot");
    CHECK(tab[QTYPE_Q4_K].vec_dot_2xn == NULL);
    CHECK_STR(tab[QTYPE_Q6_K].isa, "i8mm");
    CHECK(tab[QTYPE_Q6_K].vec_dot_2xn != NULL);
    CHECK_MSG(strstr(log, "quant_kernels: q4_K i8mm kernel disagrees with the reference; using "
                          "neondot\n") != NULL, "log: %s", log);
    check_table_vs_ref(tab);
    rejected = select_logged(tab, "neondot", NULL, log, sizeof(log));
    CHECK_EQ_INT(rejected, 0);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        CHECK_STR(tab[all_types[ti]].isa, "neondot");
        CHECK(tab[all_types[ti]].vec_dot_2xn == NULL);
    }
}

/* test_self_check_fallback on arm64: neondot -> neon -> ref. */
static __attribute__((unused)) void self_check_fallback_neon(void) {
    struct quant_kernels tab[QTYPE_COUNT];
    char log[4096];
    int rejected = select_logged(tab, "neon", "q4_K:neon", log, sizeof(log));
    CHECK_EQ_INT(rejected, 1);
    CHECK_STR(tab[QTYPE_Q4_K].isa, "ref");
    CHECK_STR(tab[QTYPE_Q6_K].isa, "neon");
    CHECK_MSG(strstr(log, "quant_kernels: q4_K neon kernel disagrees with the reference; using "
                          "ref\n") != NULL, "log: %s", log);
    check_table_vs_ref(tab);
    /* another family's ISA as the cap: the reference */
    rejected = select_logged(tab, "avx2", NULL, log, sizeof(log));
    CHECK_EQ_INT(rejected, 0);
    CHECK_STR(tab[QTYPE_Q4_K].isa, "ref");
    if (!cpu_has_neondot()) {
        test_skip("cpu lacks the dot-product extension: the neondot -> neon fallback NOT checked");
        return;
    }
    rejected = select_logged(tab, "neondot", "q8_0:neondot", log, sizeof(log)); /* under i8mm */
    CHECK_EQ_INT(rejected, 1);
    CHECK_STR(tab[QTYPE_Q8_0].isa, "neon");
    CHECK_STR(tab[QTYPE_Q4_K].isa, "neondot");
    CHECK_MSG(strstr(log, "quant_kernels: q8_0 neondot kernel disagrees with the reference; using "
                          "neon\n") != NULL, "log: %s", log);
    check_table_vs_ref(tab);
    if (!cpu_has_i8mm()) {
        test_skip("cpu lacks the int8 matrix multiply extension: i8mm -> neondot NOT checked");
        return;
    }
    self_check_fallback_i8mm();
}

/* A kernel that disagrees with the reference is not used: the log names it, the next narrower
 * twin takes over (avx512 -> avx2, avx2 -> ref), and the results stay the reference's. */
static void test_self_check_fallback(void) {
    struct quant_kernels tab[QTYPE_COUNT];
    char log[4096];
    if (cpu_has_neon()) {
        self_check_fallback_neon();
        return;
    }
    if (!cpu_has_avx2()) {
        test_skip("cpu lacks avx2: no SIMD kernel to reject");
        return;
    }
    int rejected = select_logged(tab, "avx2", "q4_K:avx2", log, sizeof(log));
    CHECK_EQ_INT(rejected, 1);
    CHECK_STR(tab[QTYPE_Q4_K].isa, "ref");
    CHECK_STR(tab[QTYPE_Q6_K].isa, "avx2");
    CHECK_MSG(strstr(log, "quant_kernels: q4_K avx2 kernel disagrees with the reference; using "
                          "ref\n") != NULL, "log: %s", log);
    check_table_vs_ref(tab);
    if (!cpu_has_avx512()) {
        test_skip("cpu lacks avx512: the avx512 -> avx2 fallback NOT checked");
        return;
    }
    rejected = select_logged(tab, NULL, "q8_0:avx512", log, sizeof(log));
    CHECK_EQ_INT(rejected, 1);
    CHECK_STR(tab[QTYPE_Q8_0].isa, "avx2");
    CHECK_STR(tab[QTYPE_Q4_K].isa, "avx512");
    CHECK_MSG(strstr(log, "quant_kernels: q8_0 avx512 kernel disagrees with the reference; using "
                          "avx2\n") != NULL, "log: %s", log);
    check_table_vs_ref(tab);
    /* a corruption naming an ISA above the cap changes nothing */
    rejected = select_logged(tab, "avx2", "q8_0:avx512", log, sizeof(log));
    CHECK_EQ_INT(rejected, 0);
    CHECK_STR(tab[QTYPE_Q8_0].isa, "avx2");
}

static const struct test_case cases[] = {
#if defined(__x86_64__) || defined(__i386__)
    {"avx2_vs_ref", test_avx2_vs_ref},
    {"avx512_vs_ref", test_avx512_vs_ref},
#endif
#if defined(__aarch64__)
    {"neon_vs_ref", test_neon_vs_ref},
    {"neondot_vs_ref", test_neondot_vs_ref},
    {"i8mm_vs_ref", test_i8mm_vs_ref},
#endif
    {"one_code_changes_bits", test_one_code_changes_bits},
    {"dispatch_picks_simd", test_dispatch_picks_simd},
    {"vec_dot4_ref_and_best", test_vec_dot4_ref_and_best},
#if defined(__x86_64__) || defined(__i386__)
    {"vec_dot4_registered_with_vec_dot", test_vec_dot4_registered_with_vec_dot},
#endif
    {"self_check_clean", test_self_check_clean},
    {"self_check_fallback", test_self_check_fallback},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
