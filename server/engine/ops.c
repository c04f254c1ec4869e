/* ops.c - row operations of the forward pass, rounding like ggml's CPU backend (see ops.h). */
#include "ops.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "os.h"
#include "quant.h"

/* The AVX2 twins below give the scalar paths' bits; other CPUs run the scalar paths. */
#if defined(__x86_64__) || defined(__i386__)
#define OPS_X86 1
#include <immintrin.h>
#else
#define OPS_X86 0
#endif

/* 2^(j/32), j < 32, rounded to double (the GLSL twin holds the same bits). */
static const double exp_table[32] = {
    0x1p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f09p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e454p+0,
};

float ops_exp(float x) {
    if (x != x)
        return x;
    if (x >= 88.72283935546875f)
        return INFINITY;
    if (x < -104.0f)
        return 0.0f;
    const double xd = x;
    const double shift = 0x1.8p52; /* (z + shift) - shift rounds z to an integer, ties to even */
    const double kd = (xd * 0x1.71547652b82fep+5 + shift) - shift;
    const double r = (xd - kd * 0x1.62e42fefa39efp-6) - kd * 0x1.acp-61;
    const int64_t k = (int64_t)kd;
    const double p = 1.0 + r * (1.0 + r * (0x1p-1 + r * (0x1.5555555555555p-3 +
                     r * (0x1.5555555555555p-5 + r * 0x1.1111111111111p-7))));
    /* 2^(k >> 5) as a double's exponent field: k >> 5 is within -151 .. 128 here */
    const double scale = ldexp(1.0, (int)(k >> 5));
    const double v = exp_table[k & 31] * scale * p;
    return v < 0x1p-126 ? 0.0f : (float)v;
}

/* 1 / (1 + j/32) and ln(1 + j/32), j < 32, rounded to double (the GLSL twin holds the same
 * bits). */
static const double log_inv[32] = {
    0x1p+0, 0x1.f07c1f07c1f08p-1, 0x1.e1e1e1e1e1e1ep-1, 0x1.d41d41d41d41dp-1,
    0x1.c71c71c71c71cp-1, 0x1.bacf914c1bad0p-1, 0x1.af286bca1af28p-1, 0x1.a41a41a41a41ap-1,
    0x1.999999999999ap-1, 0x1.8f9c18f9c18fap-1, 0x1.8618618618618p-1, 0x1.7d05f417d05f4p-1,
    0x1.745d1745d1746p-1, 0x1.6c16c16c16c17p-1, 0x1.642c8590b2164p-1, 0x1.5c9882b931057p-1,
    0x1.5555555555555p-1, 0x1.4e5e0a72f0539p-1, 0x1.47ae147ae147bp-1, 0x1.4141414141414p-1,
    0x1.3b13b13b13b14p-1, 0x1.3521cfb2b78c1p-1, 0x1.2f684bda12f68p-1, 0x1.29e4129e4129ep-1,
    0x1.2492492492492p-1, 0x1.1f7047dc11f70p-1, 0x1.1a7b9611a7b96p-1, 0x1.15b1e5f75270dp-1,
    0x1.1111111111111p-1, 0x1.0c9714fbcda3bp-1, 0x1.0842108421084p-1, 0x1.0410410410410p-1,
};
static const double log_table[32] = {
    0x0p+0, 0x1.f829b0e783300p-6, 0x1.f0a30c01162a6p-5, 0x1.6f0d28ae56b4cp-4,
    0x1.e27076e2af2e6p-4, 0x1.29552f81ff523p-3, 0x1.5ff3070a793d4p-3, 0x1.9525a9cf456b4p-3,
    0x1.c8ff7c79a9a22p-3, 0x1.fb9186d5e3e2bp-3, 0x1.1675cababa60ep-2, 0x1.2e8e2bae11d31p-2,
    0x1.4618bc21c5ec2p-2, 0x1.5d1bdbf5809cap-2, 0x1.739d7f6bbd007p-2, 0x1.89a3386c1425bp-2,
    0x1.9f323ecbf984cp-2, 0x1.b44f77bcc8f63p-2, 0x1.c8ff7c79a9a22p-2, 0x1.dd46a04c1c4a1p-2,
    0x1.f128f5faf06edp-2, 0x1.02552a5a5d0ffp-1, 0x1.0be72e4252a83p-1, 0x1.154c3d2f4d5eap-1,
    0x1.1e85f5e7040d0p-1, 0x1.2795e1289b11bp-1, 0x1.307d7334f10bep-1, 0x1.393e0d3562a1ap-1,
    0x1.41d8fe84672aep-1, 0x1.4a4f85db03ebbp-1, 0x1.52a2d265bc5abp-1, 0x1.5ad404c359f2dp-1,
};

float ops_log(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    if (x != x || x == INFINITY)
        return x;
    if (x < 0.0f)
        return NAN;
    if ((u & 0x7fffffffu) >> 23 == 0) /* +-0 and the subnormals, which the contract flushes */
        return -INFINITY;
    const int32_t e = (int32_t)(u >> 23) - 127;
    const uint32_t j = (u >> 18) & 31;
    uint32_t mu = (u & 0x7fffffu) | 0x3f800000u; /* x's significand m in [1, 2) */
    float m;
    memcpy(&m, &mu, sizeof(m));
    const double r = (double)m * log_inv[j] - 1.0; /* m / (1 + j/32) - 1, in [0, 2^-5) */
    const double p = r * (1.0 + r * (-0x1p-1 + r * (0x1.5555555555555p-2 + r * (-0x1p-2 +
                     r * (0x1.999999999999ap-3 + r * (-0x1.5555555555555p-3 +
                     r * (0x1.2492492492492p-3 + r * -0x1p-3)))))));
    return (float)(((double)e * 0x1.62e42fefa39efp-1 + log_table[j]) + p);
}

void ops_lanes_clear(struct ops_lanes *s) {
    for (int l = 0; l < 32; l++)
        s->lane[l] = 0.0;
    s->n = 0;
}

void ops_lanes_add(struct ops_lanes *s, double v) {
    s->lane[s->n & 31] += v;
    s->n++;
}

double ops_lanes_total(struct ops_lanes *s) {
    for (int w = 16; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            s->lane[l] += s->lane[l + w];
    return s->lane[0];
}

void ops_rms_norm(float *y, const float *x, const float *w, int64_t n, float eps) {
    struct ops_lanes s;
    ops_lanes_clear(&s);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) /* whole rounds of the lanes, in a loop the compiler unrolls */
        for (int l = 0; l < 32; l++)
            s.lane[l] += (double)(x[i + l] * x[i + l]);
    s.n = i;
    for (; i < n; i++)
        ops_lanes_add(&s, (double)(x[i] * x[i]));
    const float mean = (float)(ops_lanes_total(&s) * (1.0 / (double)n));
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (i = 0; i < n; i++)
            y[i] = (x[i] * scale) * w[i];
    } else {
        for (i = 0; i < n; i++)
            y[i] = x[i] * scale;
    }
}

int32_t ops_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int32_t)best;
}

void ops_softmax(float *x, int64_t n) {
    ops_softmax_sink(x, n, -INFINITY);
}

void ops_softmax_sink(float *x, int64_t n, float sink) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > max)
            max = x[i];
    if (sink > max)
        max = sink;
    struct ops_lanes s;
    ops_lanes_clear(&s);
    for (int64_t i = 0; i < n; i++) {
        float e = x[i] == -INFINITY ? 0.0f : ops_exp(x[i] - max);
        x[i] = e;
        ops_lanes_add(&s, (double)e);
    }
    double sum = ops_lanes_total(&s);
    if (sink != -INFINITY)
        sum += (double)ops_exp(sink - max);
    const float inv = 1.0f / (float)sum;
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

void ops_add(float *restrict y, const float *restrict b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = y[i] + b[i];
}

void ops_swiglu(float *y, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float s = g[i] / (1.0f + ops_exp(-g[i]));
        y[i] = s * u[i];
    }
}

void ops_swiglu_oai(float *y, const float *g, const float *u, int64_t n) {
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float v = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        const float out_glu = x / (1.0f + ops_exp(alpha * (-x)));
        y[i] = out_glu * (v + 1.0f);
    }
}

/* ggml's gelu with GGML_GELU_FP16 (its CPU default): the input rounded to f16, the tanh
 * approximation 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) of that in float, rounded to f16
 * (the table ggml fills at start-up); 0 at or below -10, x at or above 10. ggml's native build
 * contracts 1 + 0.044715 x x into a fused multiply-add: with fmaf there every one of the 63,490
 * finite f16 inputs gives the pinned llama.cpp build's table entry bit for bit (without it one
 * differs, at x = -1.99902), and fmaf rounds once on every CPU. */
static fp16_t gelu_of_f16(fp16_t hb) {
    const float h = fp16_to_f32(hb);
    const float c = 0.79788456080286535587989211986876f, a = 0.044715f;
    const float r = 0.5f * h * (1.0f + tanhf(c * h * fmaf(a * h, h, 1.0f)));
    return f32_to_fp16(r);
}

static float gelu_f16(float x) {
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    return fp16_to_f32(gelu_of_f16(f32_to_fp16(x)));
}

void ops_gelu_f16_table(uint16_t *table) {
    for (uint32_t h = 0; h < 65536u; h++)
        table[h] = gelu_of_f16((fp16_t)h);
}

void ops_gelu(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = gelu_f16(x[i]);
}

void ops_geglu(float *y, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = gelu_f16(g[i]) * u[i];
}

/* ggml_rope_yarn_corr_dim: the dimension whose wavelength fits n_ctx_orig / beta turns. */
static float rope_corr_dim(int32_t n_dims, int32_t n_ctx_orig, float beta, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (beta * 2 * (float)M_PI)) / (2 * logf(base));
}

struct ops_rope ops_rope_init(int32_t n_rot, float freq_base, float freq_scale, float ext_factor,
                              float attn_factor, int32_t n_ctx_orig, float beta_fast,
                              float beta_slow) {
    struct ops_rope r = {.n_rot = n_rot, .freq_base = freq_base, .freq_scale = freq_scale,
                         .ext_factor = ext_factor, .attn_factor = attn_factor};
    const float start = floorf(rope_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
    const float end = ceilf(rope_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
    r.corr[0] = start > 0.0f ? start : 0.0f;
    r.corr[1] = end < (float)(n_rot - 1) ? end : (float)(n_rot - 1);
    return r;
}

/* ggml's rope_yarn_ramp: 1 below corr[0], 0 above corr[1], linear between (pair index i). */
static float rope_ramp(const struct ops_rope *r, int32_t i) {
    const float span = r->corr[1] - r->corr[0] > 0.001f ? r->corr[1] - r->corr[0] : 0.001f;
    const float y = ((float)i - r->corr[0]) / span;
    return 1.0f - (y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y);
}

void ops_rope_cache(float *cs, int32_t pos, const struct ops_rope *r) {
    ops_rope_cache_ff(cs, pos, r, NULL);
}

void ops_rope_cache_ff(float *cs, int32_t pos, const struct ops_rope *r, const float *ff) {
    const float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    float theta_extrap = (float)pos;
    for (int32_t i = 0; i < r->n_rot / 2; i++) {
        const float theta_ff = ff ? theta_extrap / ff[i] : theta_extrap;
        const float theta_interp = r->freq_scale * theta_ff;
        float theta = theta_interp, mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            const float mix = rope_ramp(r, i) * r->ext_factor;
            theta = theta_interp * (1 - mix) + theta_ff * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
        }
        cs[2 * i] = cosf(theta) * mscale;
        cs[2 * i + 1] = sinf(theta) * mscale;
        theta_extrap *= theta_scale;
    }
}

void ops_rope_neox(float *x, const float *cs, int32_t n_rot) {
    const int32_t half = n_rot / 2;
    for (int32_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x0 * s + x1 * c;
    }
}

void ops_rope_norm(float *x, const float *cs, int32_t n_rot) {
    for (int32_t i = 0; i < n_rot / 2; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
    }
}

/* ---- axpy: the attention's weighted sum of V rows ----------------------------------------------- */
#if OPS_X86

__attribute__((target("avx2,f16c"))) static void axpy_f16_avx2(float *restrict y, float a,
                                                              const uint16_t *restrict x,
                                                              int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, xv)));
    }
    for (; i < n; i++)
        y[i] += a * fp16_to_f32(x[i]);
}

__attribute__((target("avx2"))) static void axpy_f32_avx2(float *restrict y, float a,
                                                         const float *restrict x, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, xv)));
    }
    for (; i < n; i++)
        y[i] += a * x[i];
}

static bool ops_has_avx2(void) {
    static _Atomic int has = -1; /* racing first calls store the same value */
    if (has < 0)
        has = __builtin_cpu_supports("avx2") && os_cpu_x86_f16c();
    return has;
}

static bool ops_has_fma(void) {
    static _Atomic int has = -1;
    if (has < 0)
        has = ops_has_avx2() && __builtin_cpu_supports("fma");
    return has;
}
#endif

/* ---- ggml's f32 dot and mad, bit for bit ---------------------------------------------------- */

#if OPS_X86
__attribute__((target("avx2,fma"))) static float dot_f32_fma(const float *x, const float *y,
                                                            int64_t n) {
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            s[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j), _mm256_loadu_ps(y + i + 8 * j),
                                   s[j]);
    s[0] = _mm256_add_ps(s[0], s[2]);
    s[1] = _mm256_add_ps(s[1], s[3]);
    s[0] = _mm256_add_ps(s[0], s[1]);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s[0]), _mm256_extractf128_ps(s[0], 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    float sum = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}
#endif

float ops_dot_f32_ref(const float *x, const float *y, int64_t n) {
    float s[4][8] = {{0}};
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++)
                s[j][l] = fmaf(x[i + 8 * j + l], y[i + 8 * j + l], s[j][l]);
    float t0[4];
    for (int l = 0; l < 8; l++)
        s[0][l] = (s[0][l] + s[2][l]) + (s[1][l] + s[3][l]);
    for (int l = 0; l < 4; l++)
        t0[l] = s[0][l] + s[0][l + 4];
    float sum = (t0[0] + t0[1]) + (t0[2] + t0[3]);
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

float ops_dot_f32(const float *x, const float *y, int64_t n) {
#if OPS_X86
    if (ops_has_fma())
        return dot_f32_fma(x, y, n);
#endif
    return ops_dot_f32_ref(x, y, n);
}

#if OPS_X86
__attribute__((target("avx2,fma"))) static void mad_f32_fma(float *restrict y,
                                                           const float *restrict x, float a,
                                                           int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(y + i)));
    for (int64_t i = np; i < n; i++)
        y[i] += x[i] * a;
}
#endif

void ops_mad_f32_ref(float *restrict y, const float *restrict x, float a, int64_t n) {
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i++)
        y[i] = fmaf(x[i], a, y[i]);
    for (int64_t i = np; i < n; i++)
        y[i] += x[i] * a;
}

void ops_mad_f32(float *restrict y, const float *restrict x, float a, int64_t n) {
#if OPS_X86
    if (ops_has_fma()) {
        mad_f32_fma(y, x, a, n);
        return;
    }
#endif
    ops_mad_f32_ref(y, x, a, n);
}

void ops_axpy_f32(float *restrict y, float a, const float *restrict x, int64_t n) {
#if OPS_X86
    if (ops_has_avx2()) {
        axpy_f32_avx2(y, a, x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

void ops_axpy_f16(float *restrict y, float a, const uint16_t *restrict x, int64_t n) {
#if OPS_X86
    if (ops_has_avx2()) {
        axpy_f16_avx2(y, a, x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        y[i] += a * fp16_to_f32(x[i]);
}
