/* test_quant_iq.c - the grid i-quants (quant_iq.c): the derived codebooks, hand-built golden
 * blocks that pin each type's bit layout, pattern blocks against values gguf-py computed for them,
 * and the SIMD twins (AVX2 and AVX-512 on x86, NEON with and without SDOT on arm64) bitwise.
 * (../shared/fixtures' dequant tensors of these types are checked by test_quant's fixture case.) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "quant.h"
#include "quant_iq.h"
#include "rng.h"

static const enum qtype iq_types[] = {QTYPE_IQ2_XXS, QTYPE_IQ2_XS, QTYPE_IQ2_S, QTYPE_IQ3_XXS,
                                      QTYPE_IQ3_S,   QTYPE_IQ1_S,  QTYPE_IQ1_M};
#define N_IQ_TYPES (int)(sizeof(iq_types) / sizeof(iq_types[0]))
#define MAX_BLOCK 110

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/* ==== codebooks =============================================================================== */

/* Distinct entries whose bytes all lie in the set of levels the format allows. */
static void check_grid(const char *name, const void *grid, int n, int width, const int *levels,
                       int n_levels) {
    const uint8_t *g = grid;
    int stride = width == 4 ? 4 : 8, bad = 0, dup = 0;
    for (int e = 0; e < n; e++) {
        for (int j = 0; j < width; j++) {
            int v = width == 8 && levels[0] < 0 ? (int8_t)g[stride * e + j] : g[stride * e + j];
            bool ok = false;
            for (int k = 0; k < n_levels; k++)
                ok |= v == levels[k];
            bad += !ok;
        }
        for (int f = 0; f < e; f++)
            dup += memcmp(g + stride * e, g + stride * f, (size_t)stride) == 0;
    }
    CHECK_MSG(bad == 0, "%s: %d values off the levels", name, bad);
    CHECK_MSG(dup == 0, "%s: %d duplicate entries", name, dup);
}

static void test_codebooks(void) {
    static const int l2[] = {8, 25, 43}, l3xxs[] = {4, 12, 20, 28, 36, 44, 52, 62};
    static const int l3s[] = {1, 3, 5, 7, 9, 11, 13, 15}, l1[] = {-1, 0, 1};
    check_grid("grid2xxs", quant_iq_grid2xxs, 256, 8, l2, 3);
    check_grid("grid2xs", quant_iq_grid2xs, 512, 8, l2, 3);
    check_grid("grid2s", quant_iq_grid2s, 1024, 8, l2, 3);
    check_grid("grid3xxs", quant_iq_grid3xxs, 256, 4, l3xxs, 8);
    check_grid("grid3s", quant_iq_grid3s, 512, 4, l3s, 8);
    check_grid("grid1s", quant_iq_grid1s, 2048, 8, l1, 3);
    /* the sign table: the index in bits 0-6, bit 7 making the count of set bits even */
    for (int k = 0; k < 128; k++) {
        CHECK_EQ_INT(quant_iq_ksigns[k] & 127, k);
        CHECK_EQ_INT(__builtin_popcount(quant_iq_ksigns[k]) % 2, 0);
    }
    /* a few entries read off gguf-py's dequantization by hand */
    CHECK(quant_iq_grid2xxs[0] == 0x0808080808080808ull);
    CHECK(quant_iq_grid2xxs[5] == 0x0808080808190819ull);
    CHECK(quant_iq_grid3s[0] == 0x01010101u);
}

/* ==== golden blocks =========================================================================== */

struct golden_byte {
    int off;
    uint8_t v;
};
struct golden_val {
    int i;
    float v;
};
struct golden {
    enum qtype t;
    struct golden_byte set[8];  /* over a zeroed block; off -1 ends */
    struct golden_val want[12]; /* i -1 ends */
    int first_changed, n_changed; /* the values that differ from value 0 */
};

/* Hand-built blocks: d = 0.5 (fp16 0x3800; iq1_m spreads it over its scale words' top nibbles),
 * index/sign/scale fields set in one group, every other field zero (grid entry 0, smallest scale).
 * Expected values were read off gguf-py's dequantization of the same bytes; the comment says which
 * field each byte is and what it must do. */
static const struct golden goldens[] = {
    /* group 2 slot 1: index 5 (byte 19); sign index 3 in bits 7-13 (0x80, 0x01: values 0 and 1
     * negated, ksigns[3] = 0x03); s = 6 in bits 28-31 (byte 25 = 0x60): 0.5 * 13/8 * grid */
    {QTYPE_IQ2_XXS,
     {{0, 0x00}, {1, 0x38}, {19, 0x05}, {22, 0x80}, {23, 0x01}, {25, 0x60}, {-1, 0}},
     {{0, 0.5f}, {64, 6.5f}, {72, -20.3125f}, {73, -6.5f}, {74, 20.3125f}, {75, 6.5f},
      {76, 6.5f}, {79, 6.5f}, {80, 6.5f}, {-1, 0}},
     64, 32},
    /* group 1 slot 3: u16 = index 300 | sign index 5 << 9 (bytes 16-17); scales[1] = 0x92: s = 2
     * for slots 0-1, s = 9 for slots 2-3 */
    {QTYPE_IQ2_XS,
     {{0, 0x00}, {1, 0x38}, {16, 0x2c}, {17, 0x0b}, {67, 0x92}, {-1, 0}},
     {{0, 0.5f}, {32, 2.5f}, {56, -9.5f}, {57, 29.6875f}, {58, -29.6875f}, {59, 9.5f},
      {60, 9.5f}, {61, 29.6875f}, {62, 9.5f}, {63, 29.6875f}, {-1, 0}},
     32, 32},
    /* group 3 slot 2: low index byte 0x34 (byte 16), qh[3] bits 4-5 = 2 (index 0x234), sign byte
     * 0xa5 (byte 48), scales[3] = 0x71: s = 1 for slots 0-1, 7 for slots 2-3 */
    {QTYPE_IQ2_S,
     {{0, 0x00}, {1, 0x38}, {16, 0x34}, {48, 0xa5}, {69, 0x20}, {77, 0x71}, {-1, 0}},
     {{0, 0.5f}, {96, 1.5f}, {112, -23.4375f}, {113, 23.4375f}, {114, -23.4375f},
      {115, 23.4375f}, {116, 7.5f}, {117, -23.4375f}, {118, 7.5f}, {119, -23.4375f}, {-1, 0}},
     96, 32},
    /* group 4, quad 3: index 200 (byte 37); group 4's word (bytes 82-85): sign index 0x55 for
     * slot 1 (bits 7-13) and s = 10; quad 3 takes the sign bits 4-7 of slot 1 */
    {QTYPE_IQ3_XXS,
     {{0, 0x00}, {1, 0x38}, {37, 0xc8}, {82, 0x80}, {83, 0x2a}, {85, 0xa0}, {-1, 0}},
     {{0, 0.5f}, {128, 10.5f}, {140, -10.5f}, {141, 162.75f}, {142, -10.5f}, {143, 115.5f},
      {144, 10.5f}, {-1, 0}},
     128, 32},
    /* group 5, quad 6: low index 0x77 (byte 48), qh[5] bit 6 (index 0x177), sign byte 23 = 0x0b
     * (bits 0-3 for the even quad), scales[2] high nibble 12 (the odd group): 0.5 * 25 * grid */
    {QTYPE_IQ3_S,
     {{0, 0x00}, {1, 0x38}, {48, 0x77}, {71, 0x40}, {97, 0x0b}, {108, 0xc0}, {-1, 0}},
     {{0, 0.5f}, {160, 12.5f}, {184, -62.5f}, {185, -162.5f}, {186, 62.5f}, {187, -112.5f},
      {188, 12.5f}, {-1, 0}},
     160, 32},
    /* group 6 slot 2: low index 0x9a (byte 28); qh[6] = 0xb140: index bits 6-8 = 5, s = 3 in bits
     * 12-14, bit 15 = negative delta: 0.5 * 7 * (grid - 1/8) */
    {QTYPE_IQ1_S,
     {{0, 0x00}, {1, 0x38}, {28, 0x9a}, {46, 0x40}, {47, 0xb1}, {-1, 0}},
     {{0, -0.4375f}, {192, -3.9375f}, {208, -3.9375f}, {209, 3.0625f}, {210, 3.0625f},
      {211, -3.9375f}, {212, -3.9375f}, {215, 3.0625f}, {216, -3.9375f}, {-1, 0}},
     192, 32},
    /* d = 0x3800 from the top nibbles of bytes 49, 51, 53, 55 (0, 0, 8, 3); group 3 slot 3: low
     * index 0x21 (byte 15), qh[7] high nibble 0xe (index bits 6, negative delta); scale word 1
     * bits 9-11 = 4 (byte 51 = 0x08): slots 2-3 of group 3 get m = 9 */
    {QTYPE_IQ1_M,
     {{15, 0x21}, {39, 0xe0}, {51, 0x08}, {53, 0x80}, {55, 0x30}, {-1, 0}},
     {{0, -0.4375f}, {96, -0.4375f}, {112, -3.9375f}, {120, -0.5625f}, {121, -0.5625f},
      {122, -5.0625f}, {124, -5.0625f}, {125, 3.9375f}, {127, 3.9375f}, {-1, 0}},
     112, 16},
};

static void test_golden_blocks(void) {
    for (size_t g = 0; g < sizeof(goldens) / sizeof(goldens[0]); g++) {
        const struct golden *gd = &goldens[g];
        uint8_t blk[MAX_BLOCK] = {0};
        float y[QK_K];
        for (int k = 0; gd->set[k].off >= 0; k++)
            blk[gd->set[k].off] = gd->set[k].v;
        CHECK_EQ_INT(quant_dequantize_row(gd->t, blk, y, QK_K), 0);
        for (int k = 0; gd->want[k].i >= 0; k++)
            CHECK_MSG(bits_of(y[gd->want[k].i]) == bits_of(gd->want[k].v),
                      "%s value %d: got %.9g want %.9g", qtype_name(gd->t), gd->want[k].i,
                      y[gd->want[k].i], gd->want[k].v);
        int first = -1, n = 0;
        for (int i = 0; i < QK_K; i++) {
            if (y[i] != y[0]) {
                first = first < 0 ? i : first;
                n++;
            }
        }
        CHECK_MSG(first == gd->first_changed && n == gd->n_changed,
                  "%s: values %d.. (%d of them) differ from value 0, want %d.. (%d)",
                  qtype_name(gd->t), first, n, gd->first_changed, gd->n_changed);
    }
}

/* Two blocks of bytes (73k + 29) mod 256 with d = 0.25 (iq1_m: its d nibbles set to 0x3400): the
 * checksum sum_i y_i * (i mod 7 + 1) and six values, as gguf-py dequantizes them. */
struct pattern_want {
    enum qtype t;
    double checksum;
    float at[6];
};
static const int pattern_pos[6] = {0, 37, 100, 255, 300, 511};
static const struct pattern_want patterns[] = {
    {QTYPE_IQ2_XXS, -1097.375, {-5.25f, 41.65625f, 4.25f, -5.25f, 6.25f, 3.75f}},
    {QTYPE_IQ2_XS, 1550.34375, {24.21875f, -22.84375f, 5.25f, 7.25f, -3.90625f, 0.25f}},
    {QTYPE_IQ2_S, 634.21875, {-3.75f, -0.25f, -6.71875f, -9.40625f, -6.71875f, 14.84375f}},
    {QTYPE_IQ3_XXS, 684.125, {-96.875f, 50.75f, -8.75f, 43.75f, -36.25f, -40.25f}},
    {QTYPE_IQ3_S, -2734.75, {-41.25f, 19.25f, 15.75f, 19.25f, 17.25f, 4.75f}},
    {QTYPE_IQ1_S, -174.21875, {0.84375f, -1.40625f, -0.28125f, 0.09375f, -3.65625f, 0.34375f}},
    {QTYPE_IQ1_M, -76.40625, {-3.09375f, 1.53125f, 0.09375f, -3.65625f, -0.21875f, 1.40625f}},
};

/* Fills n_blocks blocks of type t with the pattern above. */
static void pattern_blocks(enum qtype t, uint8_t *b, int n_blocks) {
    int bb = (int)qtype_block_bytes(t);
    for (int k = 0; k < n_blocks * bb; k++)
        b[k] = (uint8_t)((k * 73 + 29) & 255);
    for (int r = 0; r < n_blocks; r++, b += bb) {
        if (t == QTYPE_IQ1_M) {
            b[49] &= 0x0f;
            b[51] &= 0x0f;
            b[53] = (uint8_t)((b[53] & 0x0f) | 0x40);
            b[55] = (uint8_t)((b[55] & 0x0f) | 0x30);
        } else {
            b[0] = 0x00;
            b[1] = 0x34;
        }
    }
}

static void test_golden_patterns(void) {
    for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
        enum qtype t = patterns[p].t;
        uint8_t b[2 * MAX_BLOCK];
        float y[2 * QK_K];
        pattern_blocks(t, b, 2);
        CHECK_EQ_INT(quant_dequantize_row(t, b, y, 2 * QK_K), 0);
        double sum = 0.0;
        for (int i = 0; i < 2 * QK_K; i++)
            sum += (double)y[i] * (i % 7 + 1);
        CHECK_MSG(sum == patterns[p].checksum, "%s: checksum %.17g want %.17g", qtype_name(t), sum,
                  patterns[p].checksum);
        for (int k = 0; k < 6; k++)
            CHECK_MSG(bits_of(y[pattern_pos[k]]) == bits_of(patterns[p].at[k]),
                      "%s value %d: got %.9g want %.9g", qtype_name(t), pattern_pos[k],
                      y[pattern_pos[k]], patterns[p].at[k]);
    }
}

/* Bad sizes and other types are refused. */
static void test_dequant_rejects(void) {
    uint8_t b[MAX_BLOCK] = {0};
    float y[QK_K];
    for (int k = 0; k < N_IQ_TYPES; k++) {
        CHECK(quant_iq_is_grid(iq_types[k]));
        CHECK(quant_can_dequantize(iq_types[k]));
        CHECK_EQ_INT(quant_dequantize_row(iq_types[k], b, y, 128), -EINVAL);
        CHECK_EQ_INT(quant_dequantize_row(iq_types[k], b, y, -256), -EINVAL);
    }
    CHECK(!quant_iq_is_grid(QTYPE_Q4_K));
    CHECK_EQ_INT(quant_iq_dequantize_row(QTYPE_Q4_K, b, y, QK_K), -EINVAL);
}

/* ==== the dot product's spec ================================================================== */

/* The pattern blocks against a Q8_K row of codes (29k + 7) mod 255 - 127 with d = 1 and 0.5: every
 * product is exact, so the result must be sum_i y_i * a_i over gguf-py's values exactly. */
static const struct {
    enum qtype t;
    double dot;
} pattern_dots[] = {
    {QTYPE_IQ2_XXS, -17734.453125}, {QTYPE_IQ2_XS, -38867.75}, {QTYPE_IQ2_S, -4195.84375},
    {QTYPE_IQ3_XXS, 20591.125},     {QTYPE_IQ3_S, 14066.375},  {QTYPE_IQ1_S, -2969.953125},
    {QTYPE_IQ1_M, -796.890625},
};

static void pattern_act(struct block_q8_K a[2]) {
    for (int k = 0; k < 2 * QK_K; k++)
        a[k / QK_K].qs[k % QK_K] = (int8_t)((k * 29 + 7) % 255 - 127);
    for (int r = 0; r < 2; r++) {
        a[r].d = r ? 0.5f : 1.0f;
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += a[r].qs[16 * g + j];
            a[r].bsums[g] = (int16_t)sum;
        }
    }
}

static void test_vec_dot_golden(void) {
    struct block_q8_K a[2];
    pattern_act(a);
    for (size_t p = 0; p < sizeof(pattern_dots) / sizeof(pattern_dots[0]); p++) {
        enum qtype t = pattern_dots[p].t;
        const struct quant_kernels *k = quant_kernels_ref(t);
        uint8_t b[2 * MAX_BLOCK];
        pattern_blocks(t, b, 2);
        CHECK(k && k->vec_dot_type == QTYPE_Q8_K && k->from_float == quant_q8_K_from_f32);
        if (!k)
            continue;
        float got = NAN;
        k->vec_dot(2 * QK_K, &got, b, a);
        CHECK_MSG((double)got == pattern_dots[p].dot, "%s: vec_dot %.9g want %.9g",
                  qtype_name(t), got, pattern_dots[p].dot);
    }
}

static struct rng rng = {{0x2545F4914F6CDD1DULL, 1, 2, 3}};

static uint64_t next_u64(void) {
    return rng_next(&rng);
}

/* Uniform in [-1, 1). */
static float rng_unit(void) {
    return (float)((double)(next_u64() >> 11) * 0x1p-52 - 1.0);
}

/* n_blocks random blocks of t: random bytes, the fp16 d a random finite value of either sign. */
static void random_blocks(enum qtype t, uint8_t *w, int64_t n_blocks) {
    uint32_t bb = qtype_block_bytes(t);
    for (int64_t i = 0; i < n_blocks * bb; i++)
        w[i] = (uint8_t)next_u64();
    for (int64_t i = 0; i < n_blocks; i++) {
        fp16_t d = f32_to_fp16(rng_unit() * 0.01f);
        uint8_t *b = w + i * bb;
        if (t == QTYPE_IQ1_M) { /* the top nibbles of bytes 49, 51, 53, 55 */
            for (int k = 0; k < 4; k++)
                b[49 + 2 * k] = (uint8_t)((b[49 + 2 * k] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
        } else {
            memcpy(b, &d, sizeof(d));
        }
    }
}

/* The accumulation contract, written out here from the decoded blocks: four float accumulators,
 * block b into acc[b % 4] with one fmaf, summed as (acc0 + acc1) + (acc2 + acc3). */
static float contract_dot(enum qtype t, const uint8_t *w, const struct block_q8_K *a, int nb) {
    float acc[4] = {0, 0, 0, 0};
    struct quant_iq_decoded o;
    for (int i = 0; i < nb; i++, w += qtype_block_bytes(t)) {
        CHECK_EQ_INT(quant_iq_decode(t, w, &o), 0);
        int64_t isum = 0;
        for (int j = 0; j < QK_K; j++)
            isum += (int64_t)o.m[j / 16] * o.q[j] * a[i].qs[j];
        CHECK(isum == (int32_t)isum);
        acc[i % 4] = fmaf(o.d * a[i].d * o.unit, (float)isum, acc[i % 4]);
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static void test_vec_dot_contract(void) {
    const int nb = 9;
    uint8_t *w = malloc((size_t)nb * MAX_BLOCK);
    struct block_q8_K *a = calloc(nb, sizeof(*a));
    float *x = calloc((size_t)nb * QK_K, sizeof(*x));
    if (!w || !a || !x) {
        CHECK(false);
        goto out;
    }
    for (int rep = 0; rep < 20; rep++) {
        for (int k = 0; k < N_IQ_TYPES; k++) {
            enum qtype t = iq_types[k];
            random_blocks(t, w, nb);
            for (int i = 0; i < nb * QK_K; i++)
                x[i] = rng_unit() * (rep % 2 ? 100.0f : 1.0f);
            quant_q8_K_from_f32(x, a, (int64_t)nb * QK_K);
            for (int n = 1; n <= nb; n += 4) {
                float got = NAN, want = contract_dot(t, w, a, n);
                quant_kernels_ref(t)->vec_dot((int64_t)n * QK_K, &got, w, a);
                CHECK_MSG(bits_of(got) == bits_of(want), "%s %d blocks: %.9g want %.9g",
                          qtype_name(t), n, got, want);
            }
        }
    }
out:
    free(w);
    free(a);
    free(x);
}

/* The largest codes and multipliers against +-127 everywhere: the integer sum must not overflow
 * (the spec's int32 against a 64-bit sum). */
static void test_vec_dot_extremes(void) {
    struct block_q8_K a[1];
    uint8_t w[MAX_BLOCK];
    for (int k = 0; k < N_IQ_TYPES; k++) {
        enum qtype t = iq_types[k];
        for (int rep = 0; rep < 64; rep++) {
            random_blocks(t, w, 1);
            struct quant_iq_decoded o;
            quant_iq_decode(t, w, &o);
            a[0].d = 1.0f;
            for (int j = 0; j < QK_K; j++) /* the sign that makes every product positive */
                a[0].qs[j] = (int8_t)(o.q[j] < 0 ? -127 : 127);
            for (int g = 0; g < QK_K / 16; g++)
                a[0].bsums[g] = 0;
            for (int g = 0; g < QK_K / 16; g++)
                for (int j = 0; j < 16; j++)
                    a[0].bsums[g] = (int16_t)(a[0].bsums[g] + a[0].qs[16 * g + j]);
            float got = NAN, want = contract_dot(t, w, a, 1);
            quant_kernels_ref(t)->vec_dot(QK_K, &got, w, a);
            CHECK_MSG(bits_of(got) == bits_of(want), "%s: %.9g want %.9g", qtype_name(t), got,
                      want);
        }
    }
}

/* ==== SIMD twins: bit-identical to the spec =================================================== */

/* The reference table with an ISA's kernels registered over it by reg. */
static void table_for(struct quant_kernels tab[QTYPE_COUNT],
                      void (*reg)(struct quant_kernels *, int)) {
    memset(tab, 0, sizeof(*tab) * QTYPE_COUNT);
    for (int t = 0; t < QTYPE_COUNT; t++)
        if (quant_kernels_ref((enum qtype)t))
            tab[t] = *quant_kernels_ref((enum qtype)t);
    reg(tab, QTYPE_COUNT);
}

/* A random activation row of n values: mode 0 small, 1 with outliers, 2 only +-127 codes. */
static void random_act(struct block_q8_K *a, float *x, int64_t n, int mode) {
    for (int64_t i = 0; i < n; i++) {
        x[i] = rng_unit();
        if (mode == 1 && next_u64() % 32 == 0)
            x[i] *= 50.0f;
        if (mode == 2)
            x[i] = x[i] < 0 ? -1.0f : 1.0f;
    }
    quant_q8_K_from_f32(x, a, n);
}

static int n_compared;

static bool same_float(float a, float b) {
    return memcmp(&a, &b, sizeof(a)) == 0;
}

/* One random case of nb blocks (weights: random bytes with a finite d, or for mode 3 rows the
 * quantizer wrote): k->vec_dot against the reference, vec_dot4, vec_dot2 (where k has one),
 * vec_dot_rows4 and vec_dot_2xn (where k has one; rows 0-1) against k->vec_dot (row spacing
 * padded by pad bytes), all bitwise. */
static void compare_simd(const struct quant_kernels *k, enum qtype t, int nb, int mode,
                         size_t pad) {
    const struct quant_kernels *ref = quant_kernels_ref(t);
    const int64_t n = (int64_t)nb * QK_K;
    const size_t rb = (size_t)nb * qtype_block_bytes(t) + pad;
    uint8_t *w = malloc(4 * rb + 8);
    uint8_t *abuf = malloc(4 * ((size_t)nb * sizeof(struct block_q8_K) + 8));
    float *x = calloc((size_t)n, sizeof(*x));
    if (!w || !abuf || !x) {
        CHECK(false);
        goto out;
    }
    const void *a[4];
    for (int r = 0; r < 4; r++) {
        if (mode == 3) { /* rows the quantizer wrote */
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_unit() * 0.05f;
            CHECK_EQ_INT(quant_quantize_row(t, x, w + (size_t)r * rb, n), 0);
        } else {
            random_blocks(t, w + (size_t)r * rb, nb);
        }
        for (size_t b = 0; b < pad; b++)
            w[(size_t)r * rb + rb - pad + b] = (uint8_t)next_u64();
        /* activation rows 4 bytes off any vector alignment, the last one repeated sometimes */
        struct block_q8_K *ar =
            (void *)(abuf + 4 + (size_t)r * ((size_t)nb * sizeof(struct block_q8_K) + 8));
        random_act(ar, x, n, (mode + r) % 3);
        a[r] = r == 3 && mode == 1 ? a[2] : ar;
    }
    float want = NAN, got = NAN, got4[4], one[4], rows4[4];
    ref->vec_dot(n, &want, w, a[0]);
    k->vec_dot(n, &got, w, a[0]);
    CHECK_MSG(same_float(got, want), "%s %s %d blocks mode %d: vec_dot %.9g ref %.9g", k->isa,
              qtype_name(t), nb, mode, got, want);
    k->vec_dot4(n, got4, w, a);
    for (int j = 0; j < 4; j++) {
        k->vec_dot(n, &one[j], w, a[j]);
        CHECK_MSG(same_float(got4[j], one[j]), "%s %s %d blocks col %d: vec_dot4 %.9g vec_dot %.9g",
                  k->isa, qtype_name(t), nb, j, got4[j], one[j]);
    }
    for (int j = 0; k->vec_dot2 && j < 4; j += 2) { /* columns 0-1, then 2-3 */
        float two[2];
        k->vec_dot2(n, two, w, a + j);
        for (int c = 0; c < 2; c++)
            CHECK_MSG(same_float(two[c], one[j + c]),
                      "%s %s %d blocks col %d: vec_dot2 %.9g vec_dot %.9g", k->isa,
                      qtype_name(t), nb, j + c, two[c], one[j + c]);
    }
    k->vec_dot_rows4(n, rows4, w, rb, a[1]);
    for (int r = 0; r < 4; r++) {
        k->vec_dot(n, &one[r], w + (size_t)r * rb, a[1]);
        CHECK_MSG(same_float(rows4[r], one[r]),
                  "%s %s %d blocks pad %zu row %d: vec_dot_rows4 %.9g vec_dot %.9g", k->isa,
                  qtype_name(t), nb, pad, r, rows4[r], one[r]);
    }
    for (int n_act = 2; k->vec_dot_2xn && n_act <= 4; n_act += 2) {
        float tile[8];
        k->vec_dot_2xn(n, tile, w, rb, a, n_act);
        for (int i = 0; i < 2 * n_act; i++) {
            k->vec_dot(n, &got, w + (size_t)(i / n_act) * rb, a[i % n_act]);
            CHECK_MSG(same_float(tile[i], got),
                      "%s %s %d blocks pad %zu n_act %d row %d col %d: vec_dot_2xn %.9g "
                      "vec_dot %.9g", k->isa, qtype_name(t), nb, pad, n_act, i / n_act,
                      i % n_act, tile[i], got);
        }
    }
    n_compared++;
out:
    free(w);
    free(abuf);
    free(x);
}

static void check_isa(void (*reg)(struct quant_kernels *, int), const char *isa) {
    struct quant_kernels tab[QTYPE_COUNT];
    table_for(tab, reg);
    static const int blocks[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 32};
    static const int quantized[] = {1, 5, 8};
    n_compared = 0;
    for (int k = 0; k < N_IQ_TYPES; k++) {
        enum qtype t = iq_types[k];
        const struct quant_kernels *ref = quant_kernels_ref(t);
        CHECK_MSG(strcmp(tab[t].isa, isa) == 0, "%s: %s not registered (isa %s)", isa,
                  qtype_name(t), tab[t].isa);
        CHECK(tab[t].vec_dot_type == ref->vec_dot_type && tab[t].from_float == ref->from_float);
        CHECK_MSG((tab[t].vec_dot_2xn != NULL) == (strcmp(isa, "i8mm") == 0),
                  "%s %s: vec_dot_2xn only in i8mm", isa, qtype_name(t));
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
            for (int mode = 0; mode < 3; mode++)
                compare_simd(&tab[t], t, blocks[b], mode, mode == 2 ? 4 * (next_u64() % 16) : 0);
        for (size_t b = 0; b < sizeof(quantized) / sizeof(quantized[0]); b++)
            compare_simd(&tab[t], t, quantized[b], 3, 0);
    }
    printf("  %s: %d random rows of %d types, bitwise\n", isa, n_compared, N_IQ_TYPES);
}

/* Each CPU family's cases exist in its own builds only (the others' kernels are not linked). */
#if defined(__x86_64__) || defined(__i386__)
static void test_avx2_bitwise(void) {
    if (!test_cpu_has("avx2")) {
        test_skip("cpu lacks avx2/fma/f16c: AVX2 i-quant kernels NOT checked");
        return;
    }
    check_isa(quant_iq_register_avx2, "avx2");
}

static void test_avx512_bitwise(void) {
    if (!test_cpu_has("avx512")) {
        test_skip("cpu lacks avx512 f/bw/vl/dq/vnni: AVX-512 i-quant kernels NOT checked");
        return;
    }
    check_isa(quant_iq_register_avx512, "avx512");
}
#endif

#if defined(__aarch64__)
static void test_neon_bitwise(void) {
    check_isa(quant_iq_register_neon, "neon");
}

static void test_neondot_bitwise(void) {
    if (!test_cpu_has("neondot")) {
        test_skip("cpu lacks the arm64 dot-product extension: SDOT i-quant kernels NOT checked");
        return;
    }
    check_isa(quant_iq_register_neondot, "neondot");
}

static void test_i8mm_bitwise(void) {
    if (!test_cpu_has("i8mm")) {
        test_skip("cpu lacks the arm64 int8 matrix multiply extension: SMMLA i-quant kernels "
                  "NOT checked");
        return;
    }
    check_isa(quant_iq_register_i8mm, "i8mm");
}
#endif

/* The dispatched table hands out SIMD kernels for every grid type (unless SNIPER_ISA caps it). */
static void test_dispatch(void) {
    const char *env = getenv("SNIPER_ISA");
    for (int k = 0; k < N_IQ_TYPES; k++) {
        const struct quant_kernels *best = quant_kernels(iq_types[k]);
        CHECK(best != NULL);
        if (!best || (env && *env))
            continue;
        const char *want = test_cpu_has("avx512")    ? "avx512"
                           : test_cpu_has("avx2")    ? "avx2"
                           : test_cpu_has("i8mm")    ? "i8mm"
                           : test_cpu_has("neondot") ? "neondot"
                           : test_cpu_has("neon")    ? "neon"
                                                     : "ref";
        CHECK_MSG(strcmp(best->isa, want) == 0, "%s dispatched to %s, want %s",
                  qtype_name(iq_types[k]), best->isa, want);
    }
}

/* ==== the weight quantizer ==================================================================== */

/* Quantize and dequantize 4096 values (a sum of four uniforms, like weights): the relative RMS
 * error stays within what the format holds (measured: 0.36 0.31 0.26 0.19 0.13 0.57 0.49; random
 * codes would be above 1), and an all-zero block comes back as zeros. */
static void test_quantize_round_trip(void) {
    static const struct {
        enum qtype t;
        double bound;
    } cases[] = {
        {QTYPE_IQ2_XXS, 0.40}, {QTYPE_IQ2_XS, 0.35}, {QTYPE_IQ2_S, 0.30}, {QTYPE_IQ3_XXS, 0.22},
        {QTYPE_IQ3_S, 0.16},   {QTYPE_IQ1_S, 0.62},  {QTYPE_IQ1_M, 0.55},
    };
    const int n = 4096;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint8_t *q = malloc((size_t)n);
    if (!x || !y || !q) {
        CHECK(false);
        goto out;
    }
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (int i = 0; i < n; i++)
            x[i] = 0.01f * (rng_unit() + rng_unit() + rng_unit() + rng_unit());
        memset(x + 2 * QK_K, 0, QK_K * sizeof(float));
        CHECK_EQ_INT(quant_quantize_row(cases[c].t, x, q, n), 0);
        CHECK_EQ_INT(quant_dequantize_row(cases[c].t, q, y, n), 0);
        double err = 0.0, sum = 0.0;
        for (int i = 0; i < n; i++) {
            err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            sum += (double)x[i] * x[i];
        }
        double rel = sqrt(err / sum);
        printf("  %-8s relative rms error %.3f (bound %.2f)\n", qtype_name(cases[c].t), rel,
               cases[c].bound);
        CHECK_MSG(rel <= cases[c].bound, "%s: relative rms error %.3f > %.2f",
                  qtype_name(cases[c].t), rel, cases[c].bound);
        for (int i = 2 * QK_K; i < 3 * QK_K; i++)
            CHECK_MSG(y[i] == 0.0f, "%s: zero block value %d = %g", qtype_name(cases[c].t), i, y[i]);
        CHECK_EQ_INT(quant_quantize_row(cases[c].t, x, q, 100), -EINVAL);
    }
out:
    free(x);
    free(y);
    free(q);
}

static const struct test_case cases[] = {
    {"codebooks", test_codebooks},
    {"golden_blocks", test_golden_blocks},
    {"golden_patterns", test_golden_patterns},
    {"dequant_rejects", test_dequant_rejects},
    {"vec_dot_golden", test_vec_dot_golden},
    {"vec_dot_contract", test_vec_dot_contract},
    {"vec_dot_extremes", test_vec_dot_extremes},
    {"quantize_round_trip", test_quantize_round_trip},
#if defined(__x86_64__) || defined(__i386__)
    {"avx2_bitwise", test_avx2_bitwise},
    {"avx512_bitwise", test_avx512_bitwise},
#endif
#if defined(__aarch64__)
    {"neon_bitwise", test_neon_bitwise},
    {"neondot_bitwise", test_neondot_bitwise},
    {"i8mm_bitwise", test_i8mm_bitwise},
#endif
    {"dispatch", test_dispatch},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
