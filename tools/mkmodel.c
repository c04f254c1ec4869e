/* tools/mkmodel.c - sniper-mkmodel: writes valid qwen3moe / qwen3 / llama / qwen35* / gpt-oss / gemma4
 * GGUFs
 * with deterministic random but well-scaled weights, llama.cpp's tensor names, metadata and type
 * mixes, and a byte-level BPE tokenizer (built in, or imported from a Hugging Face tokenizer.json).
 * Invariants: a tensor's bytes depend only on (seed, its name, its type and shape), so two models
 * that share a tensor share its bytes; quantized tensors are written as random codes plus chosen
 * scales, block by block in chunks, so a 17 GB model streams at disk speed in constant memory.
 * Reading order: options and presets, PRNG, block generators, tokenizer, model plan, output. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "gguf_write.h"
#include "quant.h"
#include "quant_iq.h"
#include "rng.h"
#include "units.h"

#define MK_MAX_NAME 64
#define MK_MAX_VOCAB (1u << 24)
#define MK_CHUNK_BYTES ((size_t)8 << 20)

/* ==== options and presets ===================================================================== */

enum mk_arch {
    MK_ARCH_QWEN3MOE, MK_ARCH_QWEN3, MK_ARCH_LLAMA, MK_ARCH_QWEN35MOE, MK_ARCH_QWEN35, MK_ARCH_GPTOSS,
    MK_ARCH_GEMMA4,
};
/* Indexes of mk_mixes (the --types choices). */
enum mk_types {
    MK_TYPES_F32, MK_TYPES_Q8_0, MK_TYPES_Q4_K_M, MK_TYPES_Q3_K_M, MK_TYPES_Q2_K,
    MK_TYPES_IQ4_XS, MK_TYPES_IQ4_NL, MK_TYPES_MXFP4_MOE, MK_TYPES_Q4_1, MK_TYPES_Q5_1,
    MK_TYPES_IQ2_M, MK_TYPES_IQ3_XXS, MK_TYPES_F16, MK_TYPES_BF16, MK_TYPES_Q4_0, MK_TYPES_Q5_0,
    MK_TYPES_Q5_K_M, MK_TYPES_Q6_K, MK_TYPES_IQ1_S, MK_TYPES_IQ1_M, MK_TYPES_IQ2_XXS,
    MK_TYPES_IQ2_XS, MK_TYPES_IQ3_M,
};

struct mk_opts {
    const char *out;            /* output path */
    const char *preset;         /* a name of mk_presets */
    const char *tok_json;       /* tokenizer.json to import, or NULL */
    bool vocab_gemma4;          /* --vocab gemma4: the built-in SPM-style vocabulary of Gemma 4's
                                 * kind instead of the byte-level one */
    const char *template_path;  /* chat template file, or NULL for the built-in ChatML one */
    int arch;                   /* enum mk_arch, -1 until set */
    int types;                  /* enum mk_types, -1 until set */
    uint64_t seed;
    bool upcycle, quiet;
    /* hyper-parameters; 0 = take the preset's */
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    uint32_t n_expert, n_expert_used, n_ff_exp, ctx, n_vocab;
    float rope_base, eps;
    /* qwen35*: the preset's, no flags */
    uint32_t n_ff_shexp, n_rot, ssm_state, ssm_group, ssm_rank, ssm_conv, attn_interval;
    uint32_t nextn;             /* qwen35*: multi-token-prediction blocks after the trunk */
    /* gpt-oss: the preset's (mk_gptoss_presets), no flags */
    uint32_t n_swa;             /* sliding window of the even layers, in positions */
    float yarn_factor;          /* rope.scaling.factor */
    uint32_t yarn_orig_ctx;     /* rope.scaling.original_context_length */
    bool mxfp4_experts;         /* ffn_*_exps in MXFP4, as the published files carry them */
    uint64_t split_max_bytes;   /* --split-max-size: tensor data per shard, 0 = one file */
    /* gemma4: the preset's (mk_gemma4_presets), no flags; n_swa above is its window */
    uint32_t swa_period;        /* layer il is global iff (il + 1) % swa_period == 0 */
    uint32_t head_dim_full, n_head_kv_full; /* the global layers' head size and KV heads */
    uint32_t n_kv_shared;       /* last layers reading earlier layers' KV */
    int64_t n_kv_shared_opt;    /* --n-kv-shared (a layer-cut real preset), -1: the preset's */
    float rope_base_swa;        /* the window layers' RoPE base */
    bool k_eq_v;                /* the global layers have no attn_v: V is K's projection */
    uint32_t rope_rot_full;     /* global layers: rotated pairs of head_dim_full / 2 (the rest
                                 * get freq factor 1e30 in rope_freqs, as the converter writes) */
    float softcap;              /* final_logit_softcapping */
    uint32_t n_embd_per_layer;  /* per-layer embeddings (E2B, E4B): each layer's slice of
                                 * per_layer_token_embd; 0: none */
    bool double_wide;           /* the shared-KV layers' FFN twice n_ff (use_double_wide_mlp) */
};

/* A Qwen3.5 preset's Gated DeltaNet and shared-expert shapes (zero for the other families). */
struct mk_hybrid {
    uint32_t n_ff_shexp, n_rot, ssm_state, ssm_group, ssm_rank, ssm_conv, attn_interval;
    float rope_base;
};

struct mk_preset {
    const char *name;
    enum mk_arch arch;
    enum mk_types types;
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    uint32_t n_expert, n_expert_used, n_ff_exp, ctx, n_vocab; /* n_vocab 0: the tokenizer's */
    struct mk_hybrid hy;
};

static const struct mk_preset mk_presets[] = {
    {"tiny", MK_ARCH_QWEN3MOE, MK_TYPES_F32, 4, 256, 8, 2, 64, 512, 16, 4, 128, 4096, 0, {0}},
    {"tiny-dense", MK_ARCH_QWEN3, MK_TYPES_F32, 4, 256, 8, 2, 64, 512, 16, 4, 128, 4096, 0, {0}},
    {"qwen3-30b-a3b", MK_ARCH_QWEN3MOE, MK_TYPES_Q4_K_M, 48, 2048, 32, 4, 128, 6144, 128, 8, 768,
     40960, 151936, {0}},
    /* the shapes of ../shared/fixtures' tiny-qwen35moe / tiny-qwen35 */
    {"tiny-qwen35moe", MK_ARCH_QWEN35MOE, MK_TYPES_F32, 4, 256, 8, 2, 64, 0, 16, 4, 64, 4096, 0,
     {64, 16, 32, 4, 8, 4, 4, 1e7f}},
    {"tiny-qwen35", MK_ARCH_QWEN35, MK_TYPES_F32, 4, 256, 8, 2, 64, 256, 0, 0, 0, 4096, 0,
     {0, 16, 32, 4, 8, 4, 4, 1e7f}},
    /* Qwen3.5-35B-A3B: 40 layers (10 x 3 DeltaNet + 1 gated attention), 2048 wide, attention
     * 16 / 2 heads of 256 with 64 rotated dims, DeltaNet 16 QK / 32 V heads of 128, 256 experts
     * of 512 (8 used) plus a shared one of 512, vocabulary 248,320 */
    {"qwen3.5-35b-a3b", MK_ARCH_QWEN35MOE, MK_TYPES_Q4_K_M, 40, 2048, 16, 2, 256, 0, 256, 8, 512,
     262144, 248320, {512, 64, 128, 16, 32, 4, 4, 1e7f}},
    /* Qwen3.5-9B: 32 layers, 4096 wide, attention 16 / 4 heads of 256, the same DeltaNet heads,
     * a dense FFN of 12,288 */
    {"qwen3.5-9b", MK_ARCH_QWEN35, MK_TYPES_Q4_K_M, 32, 4096, 16, 4, 256, 12288, 0, 0, 0, 262144,
     248320, {0, 64, 128, 16, 32, 4, 4, 1e7f}},
    /* gpt-oss (window, YaRN and expert type in mk_gptoss_presets): tiny-gpt-oss is the shape of
     * tests/fixtures/gpt-oss; the real ones are 2880 wide, attention 64 / 8 heads of 64, experts
     * of 2880 (4 used), vocabulary 201,088: gpt-oss-20b 24 layers and 32 experts, gpt-oss-120b 36
     * layers and 128 experts; MXFP4 experts and Q8_0 for the other matrices, as llama-quantize's
     * MXFP4_MOE writes them (about 12.1 and 63.2 GB) */
    {"tiny-gpt-oss", MK_ARCH_GPTOSS, MK_TYPES_F32, 4, 128, 8, 2, 64, 64, 16, 4, 64, 131072, 0, {0}},
    {"gpt-oss-20b", MK_ARCH_GPTOSS, MK_TYPES_Q8_0, 24, 2880, 64, 8, 64, 2880, 32, 4, 2880, 131072,
     201088, {0}},
    {"gpt-oss-120b", MK_ARCH_GPTOSS, MK_TYPES_Q8_0, 36, 2880, 64, 8, 64, 2880, 128, 4, 2880, 131072,
     201088, {0}},
    /* gemma4 (window, global heads and shared KV in mk_gemma4_presets): tiny-gemma4 is the shape
     * family of Gemma 4 26B-A4B: every layer a dense GeGLU FFN beside routed experts with fused
     * gate_up; 6 layers alternating window and global, the last two reading the KV of layers 2
     * and 3; window heads of 64, global ones of 128 */
    {"tiny-gemma4", MK_ARCH_GEMMA4, MK_TYPES_F32, 6, 256, 4, 2, 64, 256, 4, 2, 256, 4096, 0, {0}},
    /* Gemma 4 26B-A4B: 30 layers (5 window, 1 global), 2816 wide, 16 heads over 8 KV heads of 256
     * (window) or 2 of 512 (global, no attn_v), a dense FFN of 2112 beside 128 experts of 704 (8
     * used), vocabulary 262,144, window 1024 (its published config.json) */
    {"gemma4-26b-a4b", MK_ARCH_GEMMA4, MK_TYPES_Q4_K_M, 30, 2816, 16, 8, 256, 2112, 128, 8, 704,
     262144, 262144, {0}},
    /* tiny-gemma4-ple is the shape family of E2B / E4B: no experts, per-layer embeddings of 128
     * per layer, the shared-KV layers' FFN twice as wide (E2B's), attn_v in every layer with KV */
    {"tiny-gemma4-ple", MK_ARCH_GEMMA4, MK_TYPES_F32, 6, 256, 4, 2, 64, 256, 0, 0, 0, 4096, 0,
     {0}},
    /* The published config.json files (text_config) of the dense Gemma 4 models, all with window
     * heads of 256 and global heads of 512 (a quarter of their pairs rotated), vocabulary 262,144:
     * E2B: 35 layers (4 window, 1 global) of 1536, 8 heads over 1 KV head, FFN 6144 (12,288 in
     * the 20 shared-KV layers), per-layer embeddings of 256, window 512, context 131,072;
     * E4B: 42 layers (5 window, 1 global) of 2560, 8 heads over 2 KV heads, FFN 10,240, 18
     * shared-KV layers, per-layer embeddings of 256, window 512, context 131,072;
     * 31B: 60 layers (5 window, 1 global) of 5376, 32 heads over 16 KV heads (window) or 4
     * (global, no attn_v), FFN 21,504, window 1024, context 262,144 */
    {"gemma4-e2b", MK_ARCH_GEMMA4, MK_TYPES_Q4_K_M, 35, 1536, 8, 1, 256, 6144, 0, 0, 0, 131072,
     262144, {0}},
    {"gemma4-e4b", MK_ARCH_GEMMA4, MK_TYPES_Q4_K_M, 42, 2560, 8, 2, 256, 10240, 0, 0, 0, 131072,
     262144, {0}},
    {"gemma4-31b", MK_ARCH_GEMMA4, MK_TYPES_Q4_K_M, 60, 5376, 32, 16, 256, 21504, 0, 0, 0, 262144,
     262144, {0}},
};

/* What a gpt-oss preset adds to its row: the sliding window of its even layers, YaRN (factor 32
 * over an original context of 4,096, RoPE base 150,000), RMS eps 1e-5, and whether its experts are
 * MXFP4. The tiny one's window is 16 so that short prompts cross it. */
static const struct mk_gptoss {
    const char *preset;
    uint32_t n_swa;
    float yarn_factor;
    uint32_t yarn_orig_ctx;
    bool mxfp4_experts;
} mk_gptoss_presets[] = {
    {"tiny-gpt-oss", 16, 32.0f, 4096, false},
    {"gpt-oss-20b", 128, 32.0f, 4096, true},
    {"gpt-oss-120b", 128, 32.0f, 4096, true},
};

/* What a gemma4 preset adds to its row: the window and its layer period, the global layers' head
 * size, KV heads and RoPE (base 1e6 for the global layers, partial rotation by freq factors), the
 * layers sharing KV, the final soft-capping, the per-layer embeddings' width and the double-wide
 * FFN of the shared-KV layers (llama.cpp's src/models/gemma4.cpp reads them). */
static const struct mk_gemma4 {
    const char *preset;
    uint32_t n_swa, swa_period, head_dim_full, n_head_kv_full, n_kv_shared, rope_rot_full;
    float rope_base_swa, softcap;
    bool k_eq_v;
    uint32_t n_embd_per_layer;
    bool double_wide;
} mk_gemma4_presets[] = {
    {"tiny-gemma4", 16, 2, 128, 1, 2, 16, 10000.0f, 30.0f, true, 0, false},
    {"gemma4-26b-a4b", 1024, 6, 512, 2, 0, 64, 10000.0f, 30.0f, true, 0, false},
    {"tiny-gemma4-ple", 16, 2, 128, 1, 2, 16, 10000.0f, 30.0f, false, 128, true},
    {"gemma4-e2b", 512, 5, 512, 1, 20, 64, 10000.0f, 30.0f, false, 256, true},
    {"gemma4-e4b", 512, 6, 512, 2, 18, 64, 10000.0f, 30.0f, false, 256, false},
    {"gemma4-31b", 1024, 6, 512, 4, 0, 64, 10000.0f, 30.0f, true, 0, false},
};

static const char *const mk_arch_names[] = {"qwen3moe", "qwen3", "llama", "qwen35moe", "qwen35",
                                             "gpt-oss", "gemma4"};

static int mk_mix_find(const char *name);

static void mk_usage(FILE *f) {
    fprintf(f,
        "usage: sniper-mkmodel -o OUT.gguf [--preset tiny|tiny-dense|qwen3-30b-a3b|tiny-qwen35moe|\n"
        "         tiny-qwen35|qwen3.5-35b-a3b|qwen3.5-9b|tiny-gpt-oss|gpt-oss-20b|gpt-oss-120b|\n"
        "         tiny-gemma4|gemma4-26b-a4b|tiny-gemma4-ple|gemma4-e2b|gemma4-e4b|gemma4-31b]\n"
        "         [--arch qwen3moe|qwen3|llama]\n"
        "         [--types f32|q8_0|q4_k_m|q3_k_m|q2_k|iq4_xs|iq4_nl|mxfp4_moe|q4_1|q5_1|\n"
        "         iq2_m|iq3_xxs|f16|bf16|q4_0|q5_0|q5_k_m|q6_k|iq1_s|iq1_m|iq2_xxs|iq2_xs|iq3_m]\n"
        "         [--seed N]\n"
        "         [--n-layer N] [--n-embd N] [--n-head N] [--n-head-kv N] [--head-dim N]\n"
        "         [--n-ff N] [--n-expert N] [--n-expert-used N] [--n-ff-exp N] [--ctx N]\n"
        "         [--n-vocab N] [--rope-base F] [--eps F] [--tokenizer-json PATH]\n"
        "         [--chat-template PATH] [--upcycle] [--nextn N] [--split-max-size SIZE]\n"
        "         [--vocab gemma4] [--n-kv-shared N] [--quiet]\n"
        "Writes a GGUF with deterministic random weights (default: --preset tiny --seed 42).\n"
        "--upcycle (qwen3moe): every expert of layer N copies the dense blk.N.ffn_* tensors that\n"
        "--arch qwen3 with the same seed writes; expert width = --n-ff.\n"
        "--nextn N (qwen35*): N multi-token-prediction blocks after the trunk, as Qwen3.5 files\n"
        "may carry them (counted in block_count, named by nextn_predict_layers).\n"
        "--split-max-size SIZE (e.g. 64M; K/M/G are powers of 1024): a split model as llama.cpp's\n"
        "gguf-split writes it, OUT-00001-of-0000N.gguf ... (OUT without .gguf), each shard at most\n"
        "SIZE of tensor data (at least one tensor), the metadata in the first.\n"
        "--vocab gemma4: a small vocabulary of Gemma 4's kind (tokenizer.ggml.model gemma4: spaces\n"
        "as U+2581, <0xXX> byte tokens, its turn and tool markers) and a compact Gemma 4 template.\n"
        "--n-kv-shared N (gemma4): the last N layers read earlier layers' KV (default: the\n"
        "preset's), so that a real preset cut with --n-layer keeps layers of its own KV.\n");
}

static bool mk_is_moe(int arch) {
    return arch == MK_ARCH_QWEN3MOE || arch == MK_ARCH_QWEN35MOE || arch == MK_ARCH_GPTOSS ||
           arch == MK_ARCH_GEMMA4;
}

static bool mk_is_hybrid(int arch) {
    return arch == MK_ARCH_QWEN35MOE || arch == MK_ARCH_QWEN35;
}

static int parse_name(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* Parses a positive decimal integer that fits in max into *out. Returns 0 or -EINVAL. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    char *end = NULL;
    if (!s || !*s || *s == '-')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_u32_pos(const char *s, uint32_t *out) {
    uint64_t v;
    if (parse_u64(s, UINT32_MAX, &v) || v == 0)
        return -EINVAL;
    *out = (uint32_t)v;
    return 0;
}

static int parse_f32_pos(const char *s, float *out) {
    char *end = NULL;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || !*s || *end || !(v > 0.0f) || !isfinite(v))
        return -EINVAL;
    *out = v;
    return 0;
}

enum { /* long-only options */
    OPT_ARCH = 256, OPT_TYPES, OPT_NLAYER, OPT_NEMBD, OPT_NHEAD, OPT_NHEADKV, OPT_HEADDIM, OPT_NFF,
    OPT_NEXPERT, OPT_NEXPUSED, OPT_NFFEXP, OPT_CTX, OPT_NVOCAB, OPT_ROPE, OPT_EPS, OPT_TOKJSON,
    OPT_TEMPLATE, OPT_UPCYCLE, OPT_QUIET, OPT_NEXTN, OPT_SPLIT, OPT_VOCAB, OPT_NKVSHARED,
};

static const struct option mk_long_opts[] = {
    {"out", required_argument, 0, 'o'}, {"preset", required_argument, 0, 'p'},
    {"seed", required_argument, 0, 's'}, {"help", no_argument, 0, 'h'},
    {"arch", required_argument, 0, OPT_ARCH}, {"types", required_argument, 0, OPT_TYPES},
    {"n-layer", required_argument, 0, OPT_NLAYER}, {"n-embd", required_argument, 0, OPT_NEMBD},
    {"n-head", required_argument, 0, OPT_NHEAD}, {"n-head-kv", required_argument, 0, OPT_NHEADKV},
    {"head-dim", required_argument, 0, OPT_HEADDIM}, {"n-ff", required_argument, 0, OPT_NFF},
    {"n-expert", required_argument, 0, OPT_NEXPERT},
    {"n-expert-used", required_argument, 0, OPT_NEXPUSED},
    {"n-ff-exp", required_argument, 0, OPT_NFFEXP}, {"ctx", required_argument, 0, OPT_CTX},
    {"n-vocab", required_argument, 0, OPT_NVOCAB}, {"rope-base", required_argument, 0, OPT_ROPE},
    {"eps", required_argument, 0, OPT_EPS}, {"tokenizer-json", required_argument, 0, OPT_TOKJSON},
    {"chat-template", required_argument, 0, OPT_TEMPLATE},
    {"upcycle", no_argument, 0, OPT_UPCYCLE}, {"quiet", no_argument, 0, OPT_QUIET},
    {"nextn", required_argument, 0, OPT_NEXTN},
    {"split-max-size", required_argument, 0, OPT_SPLIT},
    {"vocab", required_argument, 0, OPT_VOCAB},
    {"n-kv-shared", required_argument, 0, OPT_NKVSHARED},
    {0, 0, 0, 0},
};

/* The uint32 field an option number sets, or NULL. */
static uint32_t *opt_u32_field(struct mk_opts *o, int c) {
    switch (c) {
    case OPT_NLAYER: return &o->n_layer;
    case OPT_NEMBD: return &o->n_embd;
    case OPT_NHEAD: return &o->n_head;
    case OPT_NHEADKV: return &o->n_head_kv;
    case OPT_HEADDIM: return &o->head_dim;
    case OPT_NFF: return &o->n_ff;
    case OPT_NEXPERT: return &o->n_expert;
    case OPT_NEXPUSED: return &o->n_expert_used;
    case OPT_NFFEXP: return &o->n_ff_exp;
    case OPT_CTX: return &o->ctx;
    case OPT_NVOCAB: return &o->n_vocab;
    case OPT_NEXTN: return &o->nextn;
    default: return NULL;
    }
}

/* Applies one parsed option. Returns 0, 1 for --help, or -EINVAL with a message printed. */
static int opt_apply(struct mk_opts *o, int c, const char *arg) {
    uint32_t *u = opt_u32_field(o, c);
    int rc = 0;
    if (u)
        rc = parse_u32_pos(arg, u);
    else if (c == 'o')
        o->out = arg;
    else if (c == 'p')
        o->preset = arg;
    else if (c == 's')
        rc = parse_u64(arg, UINT64_MAX, &o->seed);
    else if (c == 'h')
        return 1;
    else if (c == OPT_ARCH)
        rc = (o->arch = parse_name(arg, mk_arch_names, 3)) < 0 ? -EINVAL : 0; /* qwen35*: presets */
    else if (c == OPT_TYPES)
        rc = (o->types = mk_mix_find(arg)) < 0 ? -EINVAL : 0;
    else if (c == OPT_ROPE)
        rc = parse_f32_pos(arg, &o->rope_base);
    else if (c == OPT_EPS)
        rc = parse_f32_pos(arg, &o->eps);
    else if (c == OPT_TOKJSON)
        o->tok_json = arg;
    else if (c == OPT_TEMPLATE)
        o->template_path = arg;
    else if (c == OPT_UPCYCLE)
        o->upcycle = true;
    else if (c == OPT_QUIET)
        o->quiet = true;
    else if (c == OPT_SPLIT)
        rc = units_parse_bytes(arg, &o->split_max_bytes);
    else if (c == OPT_VOCAB)
        rc = (o->vocab_gemma4 = strcmp(arg, "gemma4") == 0) ? 0 : -EINVAL;
    else if (c == OPT_NKVSHARED) {
        uint64_t v = 0;
        rc = parse_u64(arg, 512, &v);
        o->n_kv_shared_opt = (int64_t)v;
    }
    else
        rc = -EINVAL;
    if (rc)
        fprintf(stderr, "sniper-mkmodel: bad value \"%s\" for an option\n", arg ? arg : "");
    return rc;
}

static void set_default(uint32_t *v, uint32_t preset_value) {
    if (*v == 0)
        *v = preset_value;
}

/* A gpt-oss preset's own keys (its family only: --arch refused); its expert FFN is also its
 * feed_forward_length, as the converter writes intermediate_size for both. Returns 0 or -EINVAL. */
static int opts_apply_gptoss(struct mk_opts *o, const struct mk_preset *p) {
    const struct mk_gptoss *g = NULL;
    for (size_t i = 0; i < sizeof(mk_gptoss_presets) / sizeof(mk_gptoss_presets[0]); i++)
        if (strcmp(p->name, mk_gptoss_presets[i].preset) == 0)
            g = &mk_gptoss_presets[i];
    if (!g || o->arch != MK_ARCH_GPTOSS || o->upcycle) {
        fprintf(stderr, "sniper-mkmodel: --arch and --upcycle do not go with --preset %s\n",
                p->name);
        return -EINVAL;
    }
    o->n_swa = g->n_swa;
    o->yarn_factor = g->yarn_factor;
    o->yarn_orig_ctx = g->yarn_orig_ctx;
    o->mxfp4_experts = g->mxfp4_experts && o->types != MK_TYPES_F32;
    o->n_ff = o->n_ff_exp;
    if (o->rope_base == 0.0f)
        o->rope_base = 150000.0f;
    if (o->eps == 0.0f)
        o->eps = 1e-5f;
    return 0;
}

/* A gemma4 preset's own keys (its family only: --arch and --upcycle refused). Returns 0 or
 * -EINVAL. */
static int opts_apply_gemma4(struct mk_opts *o, const struct mk_preset *p) {
    const struct mk_gemma4 *g = NULL;
    for (size_t i = 0; i < sizeof(mk_gemma4_presets) / sizeof(mk_gemma4_presets[0]); i++)
        if (strcmp(p->name, mk_gemma4_presets[i].preset) == 0)
            g = &mk_gemma4_presets[i];
    if (!g || o->arch != MK_ARCH_GEMMA4 || o->upcycle) {
        fprintf(stderr, "sniper-mkmodel: --arch and --upcycle do not go with --preset %s\n",
                p->name);
        return -EINVAL;
    }
    o->n_swa = g->n_swa;
    o->swa_period = g->swa_period;
    o->head_dim_full = g->head_dim_full;
    o->n_head_kv_full = g->n_head_kv_full;
    o->n_kv_shared = o->n_kv_shared_opt >= 0 ? (uint32_t)o->n_kv_shared_opt : g->n_kv_shared;
    o->rope_rot_full = g->rope_rot_full;
    o->rope_base_swa = g->rope_base_swa;
    o->softcap = g->softcap;
    o->k_eq_v = g->k_eq_v;
    o->n_embd_per_layer = g->n_embd_per_layer;
    o->double_wide = g->double_wide;
    return 0;
}

/* Fills every unset field from the preset. Returns 0 or -EINVAL for an unknown preset. */
static int opts_apply_preset(struct mk_opts *o) {
    const struct mk_preset *p = NULL;
    for (size_t i = 0; i < sizeof(mk_presets) / sizeof(mk_presets[0]); i++)
        if (strcmp(o->preset, mk_presets[i].name) == 0)
            p = &mk_presets[i];
    if (!p) {
        fprintf(stderr, "sniper-mkmodel: unknown preset \"%s\"\n", o->preset);
        return -EINVAL;
    }
    if (o->arch < 0)
        o->arch = (int)p->arch;
    else if (p->hy.ssm_state) { /* a hybrid preset's shapes fit only its own family */
        fprintf(stderr, "sniper-mkmodel: --arch does not go with --preset %s\n", p->name);
        return -EINVAL;
    }
    o->n_ff_shexp = p->hy.n_ff_shexp;
    o->n_rot = p->hy.n_rot;
    o->ssm_state = p->hy.ssm_state;
    o->ssm_group = p->hy.ssm_group;
    o->ssm_rank = p->hy.ssm_rank;
    o->ssm_conv = p->hy.ssm_conv;
    o->attn_interval = p->hy.attn_interval;
    if (o->rope_base == 0.0f && p->hy.rope_base > 0.0f)
        o->rope_base = p->hy.rope_base;
    if (o->types < 0)
        o->types = (int)p->types;
    set_default(&o->n_layer, p->n_layer);
    set_default(&o->n_embd, p->n_embd);
    set_default(&o->n_head, p->n_head);
    set_default(&o->n_head_kv, p->n_head_kv);
    set_default(&o->head_dim, p->head_dim);
    set_default(&o->n_ff, p->n_ff);
    set_default(&o->n_expert, p->n_expert);
    set_default(&o->n_expert_used, p->n_expert_used);
    if (o->upcycle && o->n_ff_exp && o->n_ff_exp != o->n_ff) {
        fprintf(stderr, "sniper-mkmodel: --upcycle needs --n-ff-exp equal to --n-ff\n");
        return -EINVAL;
    }
    set_default(&o->n_ff_exp, o->upcycle ? o->n_ff : p->n_ff_exp);
    set_default(&o->ctx, p->ctx);
    set_default(&o->n_vocab, p->n_vocab);
    if (p->arch == MK_ARCH_GPTOSS && opts_apply_gptoss(o, p) < 0)
        return -EINVAL;
    if (p->arch == MK_ARCH_GEMMA4 && opts_apply_gemma4(o, p) < 0)
        return -EINVAL;
    if (o->rope_base == 0.0f)
        o->rope_base = 1e6f;
    if (o->eps == 0.0f)
        o->eps = 1e-6f;
    return 0;
}

/* gemma4: whether layer il is a window layer, and whether it has KV of its own (the last
 * n_kv_shared layers read an earlier layer's). */
static bool gemma4_swa(const struct mk_opts *o, uint32_t il) {
    return (il + 1) % o->swa_period != 0;
}

static bool gemma4_has_kv(const struct mk_opts *o, uint32_t il) {
    return il + o->n_kv_shared < o->n_layer;
}

/* gemma4: whether layer il has attn_v (its own KV, and a window layer or no k_eq_v). */
static bool gemma4_has_v(const struct mk_opts *o, uint32_t il) {
    return gemma4_has_kv(o, il) && (gemma4_swa(o, il) || !o->k_eq_v);
}

/* gemma4: layer il's attn_v index among the model's attn_v tensors (*iv), and their count (*nv):
 * llama-quantize's i_attention_wv and n_attention_wv. */
static void gemma4_v_index(const struct mk_opts *o, uint32_t il, uint32_t *iv, uint32_t *nv) {
    *iv = *nv = 0;
    for (uint32_t i = 0; i < o->n_layer; i++) {
        *iv += i < il && gemma4_has_v(o, i);
        *nv += gemma4_has_v(o, i);
    }
}

/* Whether the model has routed experts: every MoE family, gemma4 only with an expert count (its
 * E2B, E4B and 31B are dense). */
static bool mk_has_experts(const struct mk_opts *o) {
    return mk_is_moe(o->arch) && (o->arch != MK_ARCH_GEMMA4 || o->n_expert > 0);
}

/* gemma4: layer il's dense FFN width (twice n_ff in a shared-KV layer with double_wide). */
static uint32_t gemma4_n_ff(const struct mk_opts *o, uint32_t il) {
    return o->double_wide && !gemma4_has_kv(o, il) ? 2 * o->n_ff : o->n_ff;
}

/* Row lengths that quantized types must divide. Returns 0 or -EINVAL with a message. */
static int opts_check(const struct mk_opts *o) {
    const char *why = NULL;
    uint64_t q_dim = (uint64_t)o->n_head * o->head_dim;
    if (!o->out)
        why = "-o OUT.gguf is required";
    else if (o->n_head % o->n_head_kv != 0)
        why = "--n-head must be a multiple of --n-head-kv";
    else if (mk_is_moe(o->arch) && o->n_expert_used > o->n_expert)
        why = "--n-expert-used exceeds --n-expert";
    else if (o->upcycle && o->arch != MK_ARCH_QWEN3MOE)
        why = "--upcycle needs --arch qwen3moe";
    else if (o->nextn && !mk_is_hybrid(o->arch))
        why = "--nextn needs a qwen35 preset";
    else if (o->n_kv_shared_opt >= 0 && o->arch != MK_ARCH_GEMMA4)
        why = "--n-kv-shared needs a gemma4 preset";
    else if (o->arch == MK_ARCH_GEMMA4 && (o->n_layer > 512 || o->n_layer < o->n_kv_shared + 2 ||
                                           o->n_head % o->n_head_kv_full != 0))
        why = "gemma4 needs at most 512 layers, two with KV of their own, heads divisible by KV heads";
    else if (o->arch == MK_ARCH_GEMMA4 && o->n_kv_shared &&
             (gemma4_swa(o, o->n_layer - o->n_kv_shared - 1) ||
              !gemma4_swa(o, o->n_layer - o->n_kv_shared - 2)))
        why = "gemma4's last layer with KV must be global and the one before it a window layer";
    else if (q_dim > UINT32_MAX)
        why = "--n-head * --head-dim is too large";
    else if (o->types != MK_TYPES_F32 &&
             (o->n_embd % 32 || q_dim % 32 || o->n_ff % 32 || o->n_ff_exp % 32 ||
              o->n_ff_shexp % 32 || o->n_embd_per_layer % 32))
        why = "quantized types need n-embd, n-head*head-dim, n-ff, n-ff-exp and the per-layer "
              "embedding multiples of 32";
    if (why)
        fprintf(stderr, "sniper-mkmodel: %s\n", why);
    return why ? -EINVAL : 0;
}

/* Parses argv into o. Returns 0, 1 when help was asked for, or -EINVAL. */
static int opts_parse(struct mk_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof(*o));
    o->arch = o->types = -1;
    o->n_kv_shared_opt = -1;
    o->seed = 42;
    o->preset = "tiny";
    int c, rc = 0;
    opterr = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, "o:p:s:h", mk_long_opts, NULL)) != -1)
        rc = c == '?' ? -EINVAL : opt_apply(o, c, optarg);
    if (rc == 0 && optind < argc) {
        fprintf(stderr, "sniper-mkmodel: unexpected argument \"%s\"\n", argv[optind]);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = opts_apply_preset(o);
    return rc == 0 ? opts_check(o) : rc;
}

/* ==== PRNG: xoshiro256** seeded per tensor by splitmix64(seed, FNV-1a(name)) ================= */

static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* The stream of tensor `name`: seeded from the model seed and the name, so the same name gets the
 * same values in two models with the same seed. */
static void mk_rng_seed(struct rng *r, uint64_t seed, const char *name) {
    uint64_t x = seed;
    rng_seed(r, rng_splitmix64(&x) ^ fnv1a64(name));
}

/* Uniform in [0, 1). */
static inline float rng_unit(struct rng *r) {
    return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Roughly standard normal (Irwin-Hall of four 16-bit uniforms, rescaled to unit variance). */
static inline float rng_gauss(struct rng *r) {
    uint64_t v = rng_next(r);
    uint32_t sum = (uint32_t)(v & 0xffff) + (uint32_t)((v >> 16) & 0xffff) +
                   (uint32_t)((v >> 32) & 0xffff) + (uint32_t)(v >> 48);
    return ((float)sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

/* n random bytes; consumes ceil(n/8) outputs. */
static void rng_bytes(struct rng *r, void *dst, size_t n) {
    uint8_t *d = dst;
    for (; n >= 8; n -= 8, d += 8) {
        uint64_t v = rng_next(r);
        memcpy(d, &v, 8);
    }
    if (n) {
        uint64_t v = rng_next(r);
        memcpy(d, &v, n);
    }
}

/* ==== block generators: random codes + scales giving values of mean ~0 and std ~std ========= */

_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K layout");

/* Standard deviations of the uniform codes each format decodes to (times its scales). */
#define MK_Q8_0_CODE_STD 73.60f  /* q in -127..127 */
#define MK_Q5_0_CODE_STD 9.233f  /* q - 16, q in 0..31 */
#define MK_Q4_K_CODE_STD 4.610f  /* q in 0..15, sub-block scales 32..63 (rms 48.4) */
#define MK_Q4_K_SC_RMS 48.4f
#define MK_Q6_K_CODE_STD 18.47f  /* q - 32, q in 0..63, sub-block scales 64..127 (rms 97.1) */
#define MK_Q6_K_SC_RMS 97.1f

/* A per-block scale factor in [0.85, 1.15) so blocks differ as real ones do. */
static inline float rng_jitter(struct rng *r) {
    return 0.85f + 0.3f * rng_unit(r);
}

static void gen_q8_0(struct rng *r, float std, struct block_q8_0 *b) {
    b->d = f32_to_fp16(std / MK_Q8_0_CODE_STD * rng_jitter(r));
    rng_bytes(r, b->qs, sizeof(b->qs));
    for (int i = 0; i < QK8_0; i++) /* ggml's quantizer never writes -128 */
        b->qs[i] = b->qs[i] == -128 ? -127 : b->qs[i];
}

static void gen_q5_0(struct rng *r, float std, struct block_q5_0 *b) {
    b->d = f32_to_fp16(std / MK_Q5_0_CODE_STD * rng_jitter(r));
    rng_bytes(r, b->qh, sizeof(b->qh));
    rng_bytes(r, b->qs, sizeof(b->qs));
}

/* Packs the 8 six-bit sub-block scales and mins of a Q4_K block as ggml's get_scale_min_k4
 * unpacks them: j < 4 in the low 6 bits of bytes j / j+4; j >= 4 split over nibbles of byte
 * j+4 and the top 2 bits of bytes j-4 / j. */
static void q4_K_pack_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[K_SCALE_SIZE]) {
    memset(out, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            out[j] |= sc[j] & 63;
            out[j + 4] |= mn[j] & 63;
        } else {
            out[j + 4] = (uint8_t)((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
            out[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            out[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

/* value = d*sc*q - dmin*m with dmin = 8d and m = round(7.5 sc / 8): each sub-block centred. */
static void gen_q4_K(struct rng *r, float std, struct block_q4_K *b) {
    float d = std / (MK_Q4_K_CODE_STD * MK_Q4_K_SC_RMS) * rng_jitter(r);
    uint8_t sc[8], mn[8], raw[8];
    b->d = f32_to_fp16(d);
    b->dmin = f32_to_fp16(8.0f * d);
    rng_bytes(r, raw, sizeof(raw));
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(32 + (raw[j] & 31));
        mn[j] = (uint8_t)((sc[j] * 15 + 8) / 16);
    }
    q4_K_pack_scales(sc, mn, b->scales);
    rng_bytes(r, b->qs, sizeof(b->qs));
}

static void gen_q6_K(struct rng *r, float std, struct block_q6_K *b) {
    float d = std / (MK_Q6_K_CODE_STD * MK_Q6_K_SC_RMS) * rng_jitter(r);
    uint8_t raw[QK_K / 16];
    b->d = f32_to_fp16(d);
    rng_bytes(r, raw, sizeof(raw));
    for (int j = 0; j < QK_K / 16; j++)
        b->scales[j] = (int8_t)(64 + (raw[j] & 63));
    rng_bytes(r, b->ql, sizeof(b->ql));
    rng_bytes(r, b->qh, sizeof(b->qh));
}

/* The low-bit types: random code bytes (every code, scale and min uniform over its range) with
 * one super-scale per block chosen for the std; the constants are the rms of what the random
 * bytes decode to per unit of that scale. */
#define MK_Q2_K_RMS 13.87f   /* d*sc*q - 1.5d*m, sc, m in 0..15, q in 0..3 (mean 0) */
#define MK_Q3_K_RMS 43.33f   /* d*s*q, s in -32..31 (rms 18.48), q in -4..3 (rms 2.345) */
#define MK_Q5_K_CODE_STD 9.233f /* q in 0..31 */
#define MK_IQ4_RMS 67.44f    /* the IQ4_NL table's rms */
#define MK_IQ4_XS_RMS 1246.4f /* (ls - 32) * table, ls uniform in 0..63 */
#define MK_MXFP4_RMS 5.852f  /* the doubled e2m1 values' rms */
#define MK_Q4_0_CODE_STD 4.637f /* q - 8, q in 0..15 */

/* std / rms with the block jitter, and a random sign where the codes' mean is not 0. */
static float gen_scale(struct rng *r, float std, float rms, bool random_sign) {
    float d = std / rms * rng_jitter(r);
    return random_sign && (rng_next(r) & 1) ? -d : d;
}

static void gen_q2_K(struct rng *r, float std, struct block_q2_K *b) {
    float d = gen_scale(r, std, MK_Q2_K_RMS, false);
    b->d = f32_to_fp16(d);
    b->dmin = f32_to_fp16(1.5f * d);
    rng_bytes(r, b->scales, sizeof(b->scales));
    rng_bytes(r, b->qs, sizeof(b->qs));
}

static void gen_q3_K(struct rng *r, float std, struct block_q3_K *b) {
    b->d = f32_to_fp16(gen_scale(r, std, MK_Q3_K_RMS, false));
    rng_bytes(r, b->hmask, sizeof(b->hmask));
    rng_bytes(r, b->qs, sizeof(b->qs));
    rng_bytes(r, b->scales, sizeof(b->scales));
}

/* As gen_q4_K with 5-bit codes: dmin = 16d, m = round(15.5 sc / 16). */
static void gen_q5_K(struct rng *r, float std, struct block_q5_K *b) {
    float d = std / (MK_Q5_K_CODE_STD * MK_Q4_K_SC_RMS) * rng_jitter(r);
    uint8_t sc[8], mn[8], raw[8];
    b->d = f32_to_fp16(d);
    b->dmin = f32_to_fp16(16.0f * d);
    rng_bytes(r, raw, sizeof(raw));
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(32 + (raw[j] & 31));
        mn[j] = (uint8_t)((sc[j] * 31 + 16) / 32);
    }
    q4_K_pack_scales(sc, mn, b->scales);
    rng_bytes(r, b->qh, sizeof(b->qh));
    rng_bytes(r, b->qs, sizeof(b->qs));
}

static void gen_iq4_xs(struct rng *r, float std, struct block_iq4_xs *b) {
    b->d = f32_to_fp16(gen_scale(r, std, MK_IQ4_XS_RMS, false));
    rng_bytes(r, (uint8_t *)&b->scales_h, sizeof(b->scales_h));
    rng_bytes(r, b->scales_l, sizeof(b->scales_l));
    rng_bytes(r, b->qs, sizeof(b->qs));
}

/* The table's mean is -5.9 of its rms 67: a random sign per block cancels it. */
static void gen_iq4_nl(struct rng *r, float std, struct block_iq4_nl *b) {
    b->d = f32_to_fp16(gen_scale(r, std, MK_IQ4_RMS, true));
    rng_bytes(r, b->qs, sizeof(b->qs));
}

/* The scale is a power of two: 2^e0 or 2^(e0+1) at random, weighted so that the mean square
 * is std^2. */
static void gen_mxfp4(struct rng *r, float std, struct block_mxfp4 *b) {
    float t = log2f(std / MK_MXFP4_RMS), e0 = floorf(t);
    float p_up = (exp2f(2.0f * (t - e0)) - 1.0f) / 3.0f;
    int e = 128 + (int)e0 + (rng_unit(r) < p_up ? 1 : 0);
    b->e = (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
    rng_bytes(r, b->qs, sizeof(b->qs));
}

static void gen_q4_0(struct rng *r, float std, struct block_q4_0 *b) {
    b->d = f32_to_fp16(gen_scale(r, std, MK_Q4_0_CODE_STD, true));
    rng_bytes(r, b->qs, sizeof(b->qs));
}

/* q4_1 / q5_1: d*q + m with m = -d * (the codes' mean). */
static void gen_q4_1(struct rng *r, float std, struct block_q4_1 *b) {
    float d = gen_scale(r, std, MK_Q4_K_CODE_STD, false);
    b->d = f32_to_fp16(d);
    b->m = f32_to_fp16(-7.5f * d);
    rng_bytes(r, b->qs, sizeof(b->qs));
}

static void gen_q5_1(struct rng *r, float std, struct block_q5_1 *b) {
    float d = gen_scale(r, std, MK_Q5_K_CODE_STD, false);
    b->d = f32_to_fp16(d);
    b->m = f32_to_fp16(-15.5f * d);
    rng_bytes(r, b->qh, sizeof(b->qh));
    rng_bytes(r, b->qs, sizeof(b->qs));
}

/* One block of a quantized type without a generator here: uniform values of the std, quantized
 * (slower: for types that no large preset writes). Returns 0 or -EINVAL. */
static int gen_quantized(struct rng *r, float std, enum qtype t, uint8_t *dst) {
    float x[QK_K];
    uint32_t n = qtype_block_elems(t);
    if (n > QK_K)
        return -EINVAL;
    for (uint32_t i = 0; i < n; i++)
        x[i] = std * 1.7320508f * (2.0f * rng_unit(r) - 1.0f);
    return quant_quantize_row(t, x, dst, n);
}

/* One tensor's deterministic stream of blocks. */
/* How an F32 tensor's values are drawn. */
enum mk_dist {
    MK_DIST_GAUSS,     /* mean + std * N(0, 1) */
    MK_DIST_UNIFORM,   /* U(mean - std, mean + std) */
    MK_DIST_NEG_LOGU,  /* -exp(U(log 0.01, log 4)): a DeltaNet head's -A */
};

struct mk_stream {
    struct rng rng;
    enum qtype type;
    float mean, std;   /* of the decoded values (mean only for F32 tensors) */
    enum mk_dist dist; /* F32 tensors */
};

static void stream_init(struct mk_stream *s, uint64_t seed, const char *name, enum qtype type,
                        float mean, float std) {
    mk_rng_seed(&s->rng, seed, name);
    s->type = type;
    s->mean = mean;
    s->std = std;
    s->dist = MK_DIST_GAUSS;
}

/* -exp(U(log 0.01, log 4)) for u in [0, 1): computed in double and rounded once to float, so the
 * value is the same with any libm whose exp/log are within an ulp (a float libm's expf may differ
 * in the last bit from one C library to another). */
static float mk_neg_logu(float u) {
    double lo = log(0.01), hi = log(4.0);
    return (float)-exp(lo + (double)u * (hi - lo));
}

/* Writes the next n_blocks blocks of s->type (elements for F32) into dst. Returns 0, or -EINVAL
 * for a type nothing here can write. */
static int stream_fill(struct mk_stream *s, uint8_t *dst, uint64_t n_blocks) {
    uint32_t bb = qtype_block_bytes(s->type);
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < n_blocks; i++, dst += bb) {
        void *b = dst;
        switch (s->type) {
        case QTYPE_Q8_0: gen_q8_0(&s->rng, s->std, b); break;
        case QTYPE_Q5_0: gen_q5_0(&s->rng, s->std, b); break;
        case QTYPE_Q4_K: gen_q4_K(&s->rng, s->std, b); break;
        case QTYPE_Q6_K: gen_q6_K(&s->rng, s->std, b); break;
        case QTYPE_Q2_K: gen_q2_K(&s->rng, s->std, b); break;
        case QTYPE_Q3_K: gen_q3_K(&s->rng, s->std, b); break;
        case QTYPE_Q5_K: gen_q5_K(&s->rng, s->std, b); break;
        case QTYPE_IQ4_XS: gen_iq4_xs(&s->rng, s->std, b); break;
        case QTYPE_IQ4_NL: gen_iq4_nl(&s->rng, s->std, b); break;
        case QTYPE_MXFP4: gen_mxfp4(&s->rng, s->std, b); break;
        case QTYPE_Q4_0: gen_q4_0(&s->rng, s->std, b); break;
        case QTYPE_Q4_1: gen_q4_1(&s->rng, s->std, b); break;
        case QTYPE_Q5_1: gen_q5_1(&s->rng, s->std, b); break;
        case QTYPE_F32: {
            float v = s->dist == MK_DIST_UNIFORM ? s->mean + s->std * (2 * rng_unit(&s->rng) - 1)
                    : s->dist == MK_DIST_NEG_LOGU
                        ? mk_neg_logu(rng_unit(&s->rng))
                        : s->mean + s->std * rng_gauss(&s->rng);
            memcpy(dst, &v, sizeof(v));
            break;
        }
        default: /* grid i-quants: random valid codes (a grid search would take hours) */
            rc = quant_iq_is_grid(s->type) ? quant_iq_random_block(s->type, &s->rng, s->std, b)
                                           : gen_quantized(&s->rng, s->std, s->type, dst);
            break;
        }
    }
    return rc;
}

/* ==== tokenizer =============================================================================== */

enum { /* llama.cpp's token types */
    MK_TOK_NORMAL = 1, MK_TOK_UNKNOWN = 2, MK_TOK_CONTROL = 3, MK_TOK_USER_DEFINED = 4,
    MK_TOK_UNUSED = 5, MK_TOK_BYTE = 6,
};

struct mk_vocab {
    char **tokens;        /* [n_tokens] UTF-8, owned */
    int32_t *types;       /* [n_tokens] MK_TOK_* */
    uint32_t n_tokens, cap;
    char **merges;        /* [n_merges] "left right", owned */
    uint32_t n_merges, merges_cap;
    int32_t eos_id, pad_id, bos_id; /* -1 when absent */
};

static void vocab_release(struct mk_vocab *v) {
    for (uint32_t i = 0; i < v->n_tokens; i++)
        free(v->tokens[i]);
    for (uint32_t i = 0; i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->tokens);
    free(v->types);
    free(v->merges);
    memset(v, 0, sizeof(*v));
}

static char *mk_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Sets token id (growing the table, gaps NULL) to a copy of text. Returns 0 or -ENOMEM/-EINVAL. */
static int vocab_set(struct mk_vocab *v, uint32_t id, const char *text, int32_t type) {
    if (id >= MK_MAX_VOCAB)
        return -EINVAL;
    if (id >= v->cap) {
        uint32_t cap = v->cap ? v->cap : 1024;
        while (cap <= id)
            cap *= 2;
        char **t = realloc(v->tokens, cap * sizeof(*t));
        if (t)
            v->tokens = t;
        int32_t *ty = t ? realloc(v->types, cap * sizeof(*ty)) : NULL;
        if (!ty)
            return -ENOMEM;
        v->types = ty;
        memset(v->tokens + v->cap, 0, (cap - v->cap) * sizeof(*t));
        v->cap = cap;
    }
    char *copy = mk_strdup(text);
    if (!copy)
        return -ENOMEM;
    free(v->tokens[id]);
    v->tokens[id] = copy;
    v->types[id] = type;
    if (id >= v->n_tokens)
        v->n_tokens = id + 1;
    return 0;
}

static int vocab_add_merge(struct mk_vocab *v, const char *left, const char *right) {
    if (v->n_merges == v->merges_cap) {
        uint32_t cap = v->merges_cap ? v->merges_cap * 2 : 512;
        char **m = realloc(v->merges, cap * sizeof(*m));
        if (!m)
            return -ENOMEM;
        v->merges = m;
        v->merges_cap = cap;
    }
    size_t a = strlen(left), b = strlen(right);
    char *s = malloc(a + b + 2);
    if (!s)
        return -ENOMEM;
    memcpy(s, left, a);
    s[a] = ' ';
    memcpy(s + a + 1, right, b + 1);
    v->merges[v->n_merges++] = s;
    return 0;
}

static int32_t vocab_find(const struct mk_vocab *v, const char *text) {
    for (uint32_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i] && strcmp(v->tokens[i], text) == 0)
            return (int32_t)i;
    return -1;
}

/* Fills gaps and pads up to n_total with "[PAD<id>]" tokens of type UNUSED, as llama.cpp's
 * converter pads Qwen vocabularies. Returns 0, -EINVAL (n_total below the size) or -ENOMEM. */
static int vocab_pad(struct mk_vocab *v, uint32_t n_total) {
    char name[32];
    if (n_total && n_total < v->n_tokens)
        return -EINVAL;
    uint32_t n = n_total ? n_total : v->n_tokens;
    for (uint32_t id = 0; id < n; id++) {
        if (id < v->n_tokens && v->tokens[id])
            continue;
        snprintf(name, sizeof(name), "[PAD%u]", id);
        int rc = vocab_set(v, id, name, MK_TOK_UNUSED);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- GPT-2 byte alphabet ---- */

/* The code point GPT-2's bytes_to_unicode gives byte b, and the byte's token id (its rank in
 * that table: the printable bytes first in order, then the others mapped to U+0100...). */
static void gpt2_byte_table(uint32_t cp[256], uint32_t rank[256]) {
    uint32_t n = 0, next = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (printable) {
            cp[b] = b;
            rank[b] = n++;
        }
    }
    for (uint32_t b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (!printable) {
            cp[b] = 256 + next++;
            rank[b] = n++;
        }
    }
}

static size_t utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6)); /* all code points here are below U+0800 */
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* ---- built-in BPE: merges learned from a short English text ---- */

static const char mk_train_text[] =
    "The engine reads a model file from the disk and keeps only the experts it needs in memory. "
    "When a token arrives, the router of each layer picks a few experts out of many, and the "
    "engine loads those experts before it computes the next layer. A good cache holds the experts "
    "that were used recently, because the same experts are often chosen again for the following "
    "tokens. The rest of the weights, the attention and the embeddings, stay in memory the whole "
    "time. This is how a large mixture of experts can run on a small computer with a fast solid "
    "state drive. We measured the speed of the drive, the number of bytes read for each token and "
    "the time to the first token, and we wrote the results into a table with the commands that "
    "produced them.\n"
    "Hello world. The quick brown fox jumps over the lazy dog, and then it runs into the forest "
    "where the other animals are sleeping. In the morning the birds sing, the sun rises over the "
    "hills and the people of the village go to work in the fields. Some of them are farmers, "
    "some are teachers, and some are writing programs for the computers in the town hall. They "
    "talk about the weather, the prices of bread and the news from the city.\n"
    "Tests are written for every module: the parser, the tokenizer, the kernels and the server. "
    "Each test creates its own files in a temporary directory, checks the results against known "
    "values, and removes nothing that it did not create. When a test fails, it prints the name "
    "of the case, the file and the line, and the values that were expected and found. The "
    "server answers requests over HTTP and streams the generated text back to the client, one "
    "piece at a time, so that the user can read the answer while the model is still thinking.\n"
    "Please write a short story about a robot who learns to paint. The robot lived in a small "
    "house near the sea. Every day it watched the waves and the light on the water, and every "
    "evening it tried to paint what it had seen. At first the paintings were grey and flat, but "
    "the robot kept working, and after many months its colors became bright and its lines became "
    "free. People came from other towns to see the paintings, and the robot was happy.\n"
    "def main(): return 0 if the program ran without errors, otherwise print the error and "
    "return 1. The function takes a list of numbers and returns their sum, their mean and their "
    "largest value. for i in range(10): print(i) while the value is less than the limit.\n"
    "The history of the region is long and interesting. Many years ago, travelers crossed the "
    "mountains on foot, carrying salt, cloth and books between the northern and southern "
    "valleys. They stopped at small inns along the river, where they exchanged stories, "
    "traded their goods and learned the languages of the people they met. Some of those stories "
    "were written down by the monks who lived in the old monastery above the lake, and their "
    "books are still kept in the library of the university today. Students and researchers "
    "from different countries visit the library every summer to study them.\n"
    "Question: what is the capital of France? Answer: the capital of France is Paris. Question: "
    "how many minutes are there in an hour? Answer: there are sixty minutes in an hour. The "
    "assistant should answer clearly and briefly, explain its reasoning when the user asks for "
    "it, and say so when it does not know something. It should not invent information, and it "
    "should respect the instructions given by the system and the user.\n";

#define MK_BPE_MAX_MERGES 480
#define MK_BPE_MIN_COUNT 2

struct bpe_word {
    int32_t *sym;   /* token ids */
    uint32_t n;
};

/* Splits the text as the qwen2 pre-tokenizer would for ASCII: an optional space or punctuation
 * mark followed by letters, single digits, punctuation runs, and whitespace; each piece becomes
 * a word of byte token ids. Returns the number of words or -ENOMEM. */
static int bpe_split(const char *text, const uint32_t rank[256], struct bpe_word *words,
                     uint32_t max_words) {
    uint32_t n = 0;
    for (const char *p = text; *p && n < max_words;) {
        const char *s = p;
        if (*p == ' ' && ((p[1] >= 'a' && p[1] <= 'z') || (p[1] >= 'A' && p[1] <= 'Z')))
            p++;
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
            while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
                p++;
        else
            p++; /* one digit, space, newline or punctuation mark: never merged */
        words[n].n = (uint32_t)(p - s);
        words[n].sym = malloc(words[n].n * sizeof(int32_t));
        if (!words[n].sym)
            return -ENOMEM;
        for (uint32_t i = 0; i < words[n].n; i++)
            words[n].sym[i] = (int32_t)rank[(uint8_t)s[i]];
        n++;
    }
    return (int)n;
}

/* The most frequent adjacent pair (ties to the smallest ids) with count >= MK_BPE_MIN_COUNT.
 * counts is a scratch [n_tok * n_tok] array of zeros, left zeroed. Returns false when none. */
static bool bpe_best_pair(const struct bpe_word *words, uint32_t n_words, uint32_t n_tok,
                          uint32_t *counts, int32_t *best_a, int32_t *best_b) {
    uint32_t best = MK_BPE_MIN_COUNT - 1;
    for (uint32_t w = 0; w < n_words; w++)
        for (uint32_t i = 0; i + 1 < words[w].n; i++)
            counts[(uint32_t)words[w].sym[i] * n_tok + (uint32_t)words[w].sym[i + 1]]++;
    for (uint32_t w = 0; w < n_words; w++) {
        for (uint32_t i = 0; i + 1 < words[w].n; i++) {
            uint32_t a = (uint32_t)words[w].sym[i], b = (uint32_t)words[w].sym[i + 1];
            uint32_t c = counts[a * n_tok + b];
            bool tie_lower = c == best && best >= MK_BPE_MIN_COUNT &&
                             (a < (uint32_t)*best_a || (a == (uint32_t)*best_a &&
                                                        b < (uint32_t)*best_b));
            if (c > best || tie_lower) {
                best = c;
                *best_a = (int32_t)a;
                *best_b = (int32_t)b;
            }
        }
    }
    for (uint32_t w = 0; w < n_words; w++)
        for (uint32_t i = 0; i + 1 < words[w].n; i++)
            counts[(uint32_t)words[w].sym[i] * n_tok + (uint32_t)words[w].sym[i + 1]] = 0;
    return best >= MK_BPE_MIN_COUNT;
}

static void bpe_apply(struct bpe_word *words, uint32_t n_words, int32_t a, int32_t b, int32_t ab) {
    for (uint32_t w = 0; w < n_words; w++) {
        uint32_t o = 0;
        for (uint32_t i = 0; i < words[w].n; i++) {
            if (i + 1 < words[w].n && words[w].sym[i] == a && words[w].sym[i + 1] == b) {
                words[w].sym[o++] = ab;
                i++;
            } else {
                words[w].sym[o++] = words[w].sym[i];
            }
        }
        words[w].n = o;
    }
}

/* One merge step: records "a b", adds the joined token unless that text exists already. */
static int bpe_merge(struct mk_vocab *v, int32_t a, int32_t b, int32_t *ab) {
    size_t la = strlen(v->tokens[a]), lb = strlen(v->tokens[b]);
    char *joined = malloc(la + lb + 1);
    if (!joined)
        return -ENOMEM;
    memcpy(joined, v->tokens[a], la);
    memcpy(joined + la, v->tokens[b], lb + 1);
    int rc = vocab_add_merge(v, v->tokens[a], v->tokens[b]);
    *ab = vocab_find(v, joined);
    if (rc == 0 && *ab < 0) {
        *ab = (int32_t)v->n_tokens;
        rc = vocab_set(v, v->n_tokens, joined, MK_TOK_NORMAL);
    }
    free(joined);
    return rc;
}

/* Learns up to MK_BPE_MAX_MERGES merges over words[0..n_words) (ids below v->n_tokens, which
 * must leave room for the merges below n_tok). Returns 0 or -ENOMEM. */
static int bpe_learn(struct mk_vocab *v, struct bpe_word *words, uint32_t n_words, uint32_t n_tok) {
    uint32_t *counts = calloc((size_t)n_tok * n_tok, sizeof(*counts));
    int rc = counts ? 0 : -ENOMEM;
    int32_t a = 0, b = 0, ab = 0;
    for (uint32_t m = 0; rc == 0 && m < MK_BPE_MAX_MERGES; m++) {
        if (!bpe_best_pair(words, n_words, n_tok, counts, &a, &b))
            break;
        rc = bpe_merge(v, a, b, &ab);
        if (rc == 0)
            bpe_apply(words, n_words, a, b, ab);
    }
    free(counts);
    return rc;
}

/* Learns up to MK_BPE_MAX_MERGES merges over the 256 byte tokens already in v. */
static int bpe_train(struct mk_vocab *v, const uint32_t rank[256]) {
    const uint32_t n_tok = 256 + MK_BPE_MAX_MERGES, max_words = sizeof(mk_train_text);
    struct bpe_word *words = calloc(max_words, sizeof(*words));
    int rc = words ? 0 : -ENOMEM;
    int n_words = rc ? 0 : bpe_split(mk_train_text, rank, words, max_words);
    if (n_words < 0)
        rc = n_words;
    if (rc == 0)
        rc = bpe_learn(v, words, (uint32_t)n_words, n_tok);
    for (uint32_t w = 0; words && w < max_words; w++)
        free(words[w].sym);
    free(words);
    return rc;
}

/* Qwen3's added tokens in their order; special=false ones are USER_DEFINED, as in its GGUFs. */
static const struct { const char *text; bool special; } mk_qwen3_added[] = {
    {"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
    {"<|object_ref_start|>", true}, {"<|object_ref_end|>", true}, {"<|box_start|>", true},
    {"<|box_end|>", true}, {"<|quad_start|>", true}, {"<|quad_end|>", true},
    {"<|vision_start|>", true}, {"<|vision_end|>", true}, {"<|vision_pad|>", true},
    {"<|image_pad|>", true}, {"<|video_pad|>", true}, {"<tool_call>", false},
    {"</tool_call>", false}, {"<|fim_prefix|>", false}, {"<|fim_middle|>", false},
    {"<|fim_suffix|>", false}, {"<|fim_pad|>", false}, {"<|repo_name|>", false},
    {"<|file_sep|>", false}, {"<tool_response>", false}, {"</tool_response>", false},
    {"<think>", false}, {"</think>", false},
};

/* gpt-oss's added tokens (o200k_harmony) in their order, all special (CONTROL in its GGUFs);
 * the reserved ones keep the names of their ids in the real vocabulary (199,998 ...). */
static const char *const mk_harmony_added[] = {
    "<|startoftext|>", "<|endoftext|>", "<|reserved_200000|>", "<|reserved_200001|>",
    "<|return|>", "<|constrain|>", "<|reserved_200004|>", "<|channel|>", "<|start|>", "<|end|>",
    "<|message|>", "<|reserved_200009|>", "<|reserved_200010|>", "<|reserved_200011|>",
    "<|call|>", "<|reserved_200013|>", "<|reserved_200014|>", "<|reserved_200015|>",
    "<|reserved_200016|>", "<|reserved_200017|>", "<|endofprompt|>",
};

/* The first of names[n] that is a control token, else the first present at all; -1 when none. A
 * vocabulary may hold a name as plain text too (Gemma's has "<s>" and "</s>" as ordinary words
 * beside its control <bos> and <eos>). */
static int32_t vocab_find_special(const struct mk_vocab *v, const char *const *names, size_t n) {
    int32_t any = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = vocab_find(v, names[i]);
        if (id >= 0 && v->types[id] == MK_TOK_CONTROL)
            return id;
        any = any < 0 ? id : any;
    }
    return any;
}

/* Picks eos/pad/bos among the special tokens present (Qwen's choices first; gpt-oss's eos is
 * <|return|>, its bos <|startoftext|>; Gemma's <eos>, <pad> and <bos>). */
static void vocab_pick_specials(struct mk_vocab *v) {
    static const char *const eos[] = {"<|im_end|>", "<|return|>", "<|endoftext|>", "<|eot_id|>",
                                      "</s>", "<eos>"};
    static const char *const pad[] = {"<|endoftext|>", "<|end_of_text|>", "<pad>"};
    static const char *const bos[] = {"<|startoftext|>", "<|endoftext|>", "<|begin_of_text|>",
                                      "<s>", "<bos>"};
    v->eos_id = vocab_find_special(v, eos, sizeof(eos) / sizeof(eos[0]));
    v->pad_id = vocab_find_special(v, pad, sizeof(pad) / sizeof(pad[0]));
    v->bos_id = vocab_find_special(v, bos, sizeof(bos) / sizeof(bos[0]));
}

/* The built-in vocabulary: 256 byte tokens, learned merges, then Qwen3's 26 added tokens, or
 * gpt-oss's 21 (harmony). */
static int vocab_builtin(struct mk_vocab *v, bool harmony) {
    uint32_t cp[256], rank[256];
    char text[4];
    int rc = 0;
    gpt2_byte_table(cp, rank);
    for (uint32_t b = 0; rc == 0 && b < 256; b++) {
        text[utf8_put(cp[b], text)] = '\0';
        rc = vocab_set(v, rank[b], text, MK_TOK_NORMAL);
    }
    if (rc == 0)
        rc = bpe_train(v, rank);
    for (size_t i = 0; harmony && rc == 0 && i < sizeof(mk_harmony_added) / sizeof(char *); i++)
        rc = vocab_set(v, v->n_tokens, mk_harmony_added[i], MK_TOK_CONTROL);
    for (size_t i = 0; !harmony && rc == 0 && i < sizeof(mk_qwen3_added) / sizeof(mk_qwen3_added[0]);
         i++)
        rc = vocab_set(v, v->n_tokens, mk_qwen3_added[i].text,
                       mk_qwen3_added[i].special ? MK_TOK_CONTROL : MK_TOK_USER_DEFINED);
    return rc;
}

/* ---- built-in Gemma 4-style vocabulary (--vocab gemma4) ---- */

/* Its special tokens first (the ids Gemma's own vocabularies give <pad> <eos> <bos> <unk>), then
 * the turn, tool, channel and media markers Gemma 4's chat template writes, all control. */
static const char *const mk_gemma4_specials[] = {
    "<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|tool>", "<tool|>",
    "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|channel>",
    "<channel|>", "<|think|>", "<|\"|>", "<|image|>", "<|audio|>", "<|video|>",
};

/* Characters with tokens of their own beside the printable ASCII ones: U+2581 (the space) and a
 * few accented letters; every other character is spelled in <0xXX> byte tokens. */
static const char *const mk_gemma4_chars[] = {"\xe2\x96\x81", "\xc3\xa9", "\xc3\xa4",
                                              "\xc3\xb6", "\xc3\xbc", "\xc3\x9f"};

/* The training text's lines as words of character ids (spaces as U+2581: merges cross them, as
 * in an SPM vocabulary). Returns the number of words or -ENOMEM. */
static int gemma4_split(const struct mk_vocab *v, struct bpe_word *words, uint32_t max_words) {
    uint32_t n = 0;
    int32_t space = vocab_find(v, mk_gemma4_chars[0]);
    for (const char *p = mk_train_text; *p && n < max_words; p++) {
        size_t len = strcspn(p, "\n");
        words[n].sym = malloc((len ? len : 1) * sizeof(int32_t));
        if (!words[n].sym)
            return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
            char c[2] = {p[i], '\0'};
            words[n].sym[i] = p[i] == ' ' ? space : vocab_find(v, c);
        }
        words[n++].n = (uint32_t)len;
        p += len;
        if (!*p)
            break;
    }
    return (int)n;
}

/* The specials, 256 byte tokens, newline runs of 1-4, the characters, then learned merges. */
static int vocab_gemma4(struct mk_vocab *v) {
    char text[8];
    int rc = 0;
    size_t n_specials = sizeof(mk_gemma4_specials) / sizeof(mk_gemma4_specials[0]);
    for (size_t i = 0; rc == 0 && i < n_specials; i++)
        rc = vocab_set(v, v->n_tokens, mk_gemma4_specials[i], i == 3 ? MK_TOK_UNKNOWN
                                                                     : MK_TOK_CONTROL);
    for (uint32_t b = 0; rc == 0 && b < 256; b++) {
        snprintf(text, sizeof(text), "<0x%02X>", b);
        rc = vocab_set(v, v->n_tokens, text, MK_TOK_BYTE);
    }
    for (int k = 1; rc == 0 && k <= 4; k++)
        rc = vocab_set(v, v->n_tokens, &"\n\n\n\n"[4 - k], MK_TOK_NORMAL);
    for (size_t i = 0; rc == 0 && i < sizeof(mk_gemma4_chars) / sizeof(char *); i++)
        rc = vocab_set(v, v->n_tokens, mk_gemma4_chars[i], MK_TOK_NORMAL);
    for (char c = '!'; rc == 0 && c <= '~'; c++)
        rc = vocab_set(v, v->n_tokens, (char[]){c, '\0'}, MK_TOK_NORMAL);
    const uint32_t max_words = 64, n_tok = v->n_tokens + MK_BPE_MAX_MERGES;
    struct bpe_word *words = rc ? NULL : calloc(max_words, sizeof(*words));
    int n_words = words ? gemma4_split(v, words, max_words) : -ENOMEM;
    rc = rc ? rc : n_words < 0 ? n_words : bpe_learn(v, words, (uint32_t)n_words, n_tok);
    for (uint32_t w = 0; words && w < max_words; w++)
        free(words[w].sym);
    free(words);
    return rc;
}

/* ---- tokenizer.json import ---- */

static int json_import_vocab(struct mk_vocab *v, json_t *vocab) {
    const char *key;
    json_t *val;
    int rc = json_is_object(vocab) ? 0 : -EINVAL;
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        if (rc == 0 && (id < 0 || id >= (json_int_t)MK_MAX_VOCAB))
            rc = -EINVAL;
        if (rc == 0)
            rc = vocab_set(v, (uint32_t)id, key, MK_TOK_NORMAL);
    }
    return rc;
}

/* Merges as "a b" strings or ["a", "b"] pairs. */
static int json_import_merges(struct mk_vocab *v, json_t *merges) {
    size_t i;
    json_t *m;
    int rc = json_is_array(merges) ? 0 : -EINVAL;
    json_array_foreach(merges, i, m) {
        if (rc)
            break;
        const char *s = json_string_value(m);
        const char *sp = s ? strchr(s + (s[0] != '\0'), ' ') : NULL;
        if (s && sp) {
            char *left = mk_strdup(s);
            rc = left ? 0 : -ENOMEM;
            if (left)
                left[sp - s] = '\0';
            if (rc == 0)
                rc = vocab_add_merge(v, left, sp + 1);
            free(left);
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            rc = vocab_add_merge(v, json_string_value(json_array_get(m, 0)),
                                 json_string_value(json_array_get(m, 1)));
        } else {
            rc = -EINVAL;
        }
    }
    return rc;
}

static int json_import_added(struct mk_vocab *v, json_t *added) {
    size_t i;
    json_t *a;
    int rc = 0;
    if (!added)
        return 0;
    if (!json_is_array(added))
        return -EINVAL;
    json_array_foreach(added, i, a) {
        json_t *id = json_object_get(a, "id");
        const char *content = json_string_value(json_object_get(a, "content"));
        if (rc == 0 && (!json_is_integer(id) || !content || json_integer_value(id) < 0 ||
                        json_integer_value(id) >= (json_int_t)MK_MAX_VOCAB))
            rc = -EINVAL;
        if (rc == 0)
            rc = vocab_set(v, (uint32_t)json_integer_value(id), content,
                           json_is_true(json_object_get(a, "special")) ? MK_TOK_CONTROL
                                                                        : MK_TOK_USER_DEFINED);
    }
    return rc;
}

/* A BPE vocabulary with byte_fallback (SentencePiece-style, as Gemma's) spells the bytes it has no
 * token for as "<0xXX>" tokens: those become type BYTE, as llama.cpp's converter types them. */
static void json_mark_bytes(struct mk_vocab *v, json_t *model) {
    if (!json_is_true(json_object_get(model, "byte_fallback")))
        return;
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        const char *t = v->tokens[i];
        if (t && v->types[i] == MK_TOK_NORMAL && strlen(t) == 6 && strncmp(t, "<0x", 3) == 0 &&
            isxdigit((unsigned char)t[3]) && isxdigit((unsigned char)t[4]) && t[5] == '>')
            v->types[i] = MK_TOK_BYTE;
    }
}

/* Reads a Hugging Face BPE tokenizer.json (untrusted): model.vocab, model.merges, added_tokens. */
static int vocab_from_json(struct mk_vocab *v, const char *path) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        fprintf(stderr, "vocab_from_json: cannot parse \"%s\": %s (line %d)\n", path, jerr.text,
                jerr.line);
        return -EINVAL;
    }
    json_t *model = json_object_get(root, "model");
    int rc = json_import_vocab(v, json_object_get(model, "vocab"));
    if (rc == 0)
        rc = json_import_merges(v, json_object_get(model, "merges"));
    if (rc == 0)
        rc = json_import_added(v, json_object_get(root, "added_tokens"));
    if (rc == 0)
        json_mark_bytes(v, model);
    if (rc == 0 && v->n_tokens == 0)
        rc = -EINVAL;
    if (rc)
        fprintf(stderr, "vocab_from_json: bad BPE tokenizer \"%s\" (model.vocab, model.merges, "
                        "added_tokens)\n", path);
    json_decref(root);
    return rc;
}

/* The tokenizer for o: imported or built in, padded to o->n_vocab when set. */
static int vocab_build(struct mk_vocab *v, const struct mk_opts *o) {
    int rc = o->tok_json       ? vocab_from_json(v, o->tok_json)
             : o->vocab_gemma4 ? vocab_gemma4(v)
                               : vocab_builtin(v, o->arch == MK_ARCH_GPTOSS);
    if (rc == 0) {
        rc = vocab_pad(v, o->n_vocab);
        if (rc == -EINVAL)
            fprintf(stderr, "vocab_build: tokenizer has %u tokens, more than --n-vocab %u\n",
                    v->n_tokens, o->n_vocab);
    }
    if (rc == 0)
        vocab_pick_specials(v);
    return rc;
}

/* A compact ChatML template (Qwen-style roles, tool results, and the enable_thinking switch). */
static const char mk_chat_template[] =
    "{%- for message in messages %}\n"
    "{%- if message.role == 'tool' %}\n"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + "
    "'\\n</tool_response><|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- if enable_thinking is defined and enable_thinking is false %}\n"
    "{{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "{%- endif %}\n"
    "{%- endif %}\n";

/* A compact harmony template for gpt-oss models (the real one also renders tools, reasoning and
 * the date): enough for `tokenizer.chat_template` to name the family, by its <|channel|> marker. */
static const char mk_harmony_template[] =
    "{{- '<|start|>system<|message|>Reasoning: ' + (reasoning_effort | default('medium')) + "
    "'\\n\\n# Valid channels: analysis, commentary, final. Channel must be included for every "
    "message.<|end|>' }}\n"
    "{%- for message in messages %}\n"
    "{%- if message.role == 'system' or message.role == 'developer' %}\n"
    "{{- '<|start|>developer<|message|># Instructions\\n\\n' + message.content + "
    "'\\n\\n<|end|>' }}\n"
    "{%- elif message.role == 'assistant' %}\n"
    "{{- '<|start|>assistant<|channel|>final<|message|>' + message.content + '<|end|>' }}\n"
    "{%- elif message.role == 'user' %}\n"
    "{{- '<|start|>user<|message|>' + message.content + '<|end|>' }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}\n";

/* A compact Gemma 4 template (--vocab gemma4; the real one also renders tools, tool calls and
 * thinking): turns as <|turn>ROLE\n...<turn|>\n, the assistant's role "model". */
static const char mk_gemma4_template[] =
    "{{- bos_token -}}\n"
    "{%- set loop_messages = messages -%}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "{{- '<|turn>system\\n' + messages[0]['content'] | trim + '<turn|>\\n' -}}\n"
    "{%- set loop_messages = messages[1:] -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "{{- '<|turn>' + role + '\\n' + message['content'] | trim + '<turn|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}{%- endif -%}\n";

/* ==== model plan: names, shapes, types ======================================================== */

enum mk_role {
    MK_ROLE_EMBD, MK_ROLE_OUTPUT, MK_ROLE_NORM, MK_ROLE_ROUTER, MK_ROLE_ATTN_Q, MK_ROLE_ATTN_K,
    MK_ROLE_ATTN_V, MK_ROLE_ATTN_O, MK_ROLE_FFN_GATE, MK_ROLE_FFN_UP, MK_ROLE_FFN_DOWN,
    MK_ROLE_SSM_QKV,   /* DeltaNet attn_qkv: llama-quantize counts it with attn_v */
    MK_ROLE_MATRIX,    /* any other matrix: Q4_K under Q4_K_M */
    MK_ROLE_PLE_PROJ,  /* gemma4's per_layer_model_proj: llama-quantize keeps the converter's type
                        * (F16 from --outtype f16, else BF16, the published weights' type) */
    MK_ROLE_SSM_CONV,  /* f32, N(0, 1/4) */
    MK_ROLE_SSM_DT,    /* f32, U(0.5, 1.5) */
    MK_ROLE_SSM_A,     /* f32, -A with A log-uniform in [0.01, 4]: negative, so exp(g) < 1 */
    MK_ROLE_BIAS,      /* f32, N(0, std set by the planner): gpt-oss's biases and sinks */
    MK_ROLE_ROPE_FREQS,/* f32, gemma4's rope_freqs: 1 for the rotated pairs, 1e30 for the rest */
};

struct mk_tensor {
    char name[MK_MAX_NAME];
    char src[MK_MAX_NAME];     /* --upcycle: the dense tensor each expert slice copies, or "" */
    enum qtype type;
    enum mk_role role;
    uint32_t n_dims;
    uint64_t ne[3];            /* ne[0] = input dimension (row length) */
    float mean, std;           /* of the values */
};

struct mk_model {
    struct mk_tensor *t;       /* [n] in file order */
    uint32_t n;
};

/* ---- type mixes: llama-quantize's recipes ---------------------------------------------------- */
/* Each --types choice restates one llama-quantize ftype's rules (llama_tensor_get_type) for the
 * roles here, as applied with an importance matrix where a rule depends on one (every published
 * low-bit GGUF is made with one); Mixtral-style 8-expert special cases are not modelled. A mix is
 * a rule and a line in mk_mixes. */

/* What a rule sees of a tensor: its role, layer (0 for global tensors), whether it stacks experts
 * (ne2 > 1), and the model's options. */
struct mk_slot {
    const struct mk_opts *o;
    enum mk_role role;
    uint32_t il;
    bool experts;
    uint32_t iv, nv;  /* attn_v: its index among the file's attn_v tensors, and their count
                       * (llama-quantize counts them; gemma4's shared-KV layers and k_eq_v
                       * global layers have none, elsewhere il and n_layer) */
};

/* llama-quantize's use_more_bits: which layers' attn_v / ffn_down get more bits. */
static bool use_more_bits(uint32_t i, uint32_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* attn_v, and the DeltaNet attn_qkv that llama-quantize counts with it. */
static bool role_is_attn_v(enum mk_role r) {
    return r == MK_ROLE_ATTN_V || r == MK_ROLE_SSM_QKV;
}

static uint32_t n_gqa(const struct mk_opts *o) {
    return o->n_head / o->n_head_kv;
}

static enum qtype mix_f32(const struct mk_slot *s) {
    (void)s;
    return QTYPE_F32;
}

static enum qtype mix_q8_0(const struct mk_slot *s) {
    (void)s;
    return QTYPE_Q8_0;
}

static enum qtype mix_q4_k_m(const struct mk_slot *s) {
    bool more = (role_is_attn_v(s->role) && use_more_bits(s->iv, s->nv)) ||
                (s->role == MK_ROLE_FFN_DOWN && use_more_bits(s->il, s->o->n_layer));
    return s->role == MK_ROLE_OUTPUT || more ? QTYPE_Q6_K : QTYPE_Q4_K;
}

static enum qtype mix_q3_k_m(const struct mk_slot *s) {
    switch (s->role) {
    case MK_ROLE_OUTPUT: return QTYPE_Q6_K;
    case MK_ROLE_ATTN_V:
    case MK_ROLE_SSM_QKV: return s->iv < 2 ? QTYPE_Q5_K : QTYPE_Q4_K;
    case MK_ROLE_FFN_DOWN: return s->il < s->o->n_layer / 16 ? QTYPE_Q5_K : QTYPE_Q4_K;
    case MK_ROLE_ATTN_O: return QTYPE_Q4_K;
    default: return QTYPE_Q3_K;
    }
}

static enum qtype mix_q2_k(const struct mk_slot *s) {
    switch (s->role) {
    case MK_ROLE_OUTPUT: return QTYPE_Q6_K;
    case MK_ROLE_ATTN_V:
    case MK_ROLE_SSM_QKV: return n_gqa(s->o) >= 4 ? QTYPE_Q4_K : QTYPE_Q3_K;
    case MK_ROLE_FFN_DOWN:
    case MK_ROLE_ATTN_O: return QTYPE_Q3_K;
    default: return QTYPE_Q2_K;
    }
}

/* IQ4_XS and IQ4_NL: attn_v gets Q5_K with 4 or more query heads per KV head. */
static enum qtype mix_iq4(const struct mk_slot *s, enum qtype base) {
    if (s->role == MK_ROLE_OUTPUT)
        return QTYPE_Q6_K;
    if (role_is_attn_v(s->role) && n_gqa(s->o) >= 4)
        return QTYPE_Q5_K;
    return base;
}

static enum qtype mix_iq4_xs(const struct mk_slot *s) {
    return mix_iq4(s, QTYPE_IQ4_XS);
}

static enum qtype mix_iq4_nl(const struct mk_slot *s) {
    return mix_iq4(s, QTYPE_IQ4_NL);
}

/* MXFP4_MOE: the stacked expert tensors MXFP4, every other matrix (output included) Q8_0. */
static enum qtype mix_mxfp4_moe(const struct mk_slot *s) {
    return s->experts ? QTYPE_MXFP4 : QTYPE_Q8_0;
}

static enum qtype mix_q4_1(const struct mk_slot *s) {
    return s->role == MK_ROLE_OUTPUT ? QTYPE_Q6_K : QTYPE_Q4_1;
}

static enum qtype mix_q5_1(const struct mk_slot *s) {
    return s->role == MK_ROLE_OUTPUT ? QTYPE_Q6_K : QTYPE_Q5_1;
}

/* IQ2_M and IQ3_XXS: IQ3_S token_embd and attn_output, Q5_K output; attn_v Q4_K with 4 or more
 * query heads per KV head (IQ2_M also with 4 or more experts; else IQ3_S / IQ3_XXS). IQ2_M: IQ2_S
 * elsewhere, but IQ3_S ffn_down in the first eighth of the layers (llama-quantize counts ffn_down
 * tensors); IQ3_XXS: IQ2_S attn_q/attn_k, IQ3_XXS elsewhere. */
static enum qtype mix_iq_grid(const struct mk_slot *s, bool iq2_m) {
    switch (s->role) {
    case MK_ROLE_EMBD:
    case MK_ROLE_ATTN_O: return QTYPE_IQ3_S;
    case MK_ROLE_OUTPUT: return QTYPE_Q5_K;
    case MK_ROLE_ATTN_V:
    case MK_ROLE_SSM_QKV:
        if (n_gqa(s->o) >= 4 || (iq2_m && mk_is_moe(s->o->arch) && s->o->n_expert >= 4))
            return QTYPE_Q4_K;
        return iq2_m ? QTYPE_IQ3_S : QTYPE_IQ3_XXS;
    case MK_ROLE_ATTN_Q:
    case MK_ROLE_ATTN_K: return QTYPE_IQ2_S;
    case MK_ROLE_FFN_DOWN:
        return !iq2_m ? QTYPE_IQ3_XXS : s->il < s->o->n_layer / 8 ? QTYPE_IQ3_S : QTYPE_IQ2_S;
    default: return iq2_m ? QTYPE_IQ2_S : QTYPE_IQ3_XXS;
    }
}

static enum qtype mix_iq2_m(const struct mk_slot *s) {
    return mix_iq_grid(s, true);
}

static enum qtype mix_iq3_xxs(const struct mk_slot *s) {
    return mix_iq_grid(s, false);
}

/* F16 and BF16: every matrix in the float type (convert_hf_to_gguf's --outtype). */
static enum qtype mix_f16(const struct mk_slot *s) {
    (void)s;
    return QTYPE_F16;
}

static enum qtype mix_bf16(const struct mk_slot *s) {
    (void)s;
    return QTYPE_BF16;
}

/* Q4_0, Q5_0 and Q6_K: every matrix in the type, output Q6_K (without an importance matrix the
 * Q4_0/Q5_0 ffn_down guard does not apply). */
static enum qtype mix_q4_0(const struct mk_slot *s) {
    return s->role == MK_ROLE_OUTPUT ? QTYPE_Q6_K : QTYPE_Q4_0;
}

static enum qtype mix_q5_0(const struct mk_slot *s) {
    return s->role == MK_ROLE_OUTPUT ? QTYPE_Q6_K : QTYPE_Q5_0;
}

static enum qtype mix_q6_k(const struct mk_slot *s) {
    (void)s;
    return QTYPE_Q6_K;
}

/* Q5_K_M: Q4_K_M's rule with Q5_K as the base type. */
static enum qtype mix_q5_k_m(const struct mk_slot *s) {
    enum qtype t = mix_q4_k_m(s);
    return t == QTYPE_Q4_K ? QTYPE_Q5_K : t;
}

/* IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS: Q2_K token_embd, Q5_K output; attn_v Q4_K with 4 or more query
 * heads per KV head or 4 or more experts, else Q2_K; ffn_down Q2_K in the first eighth of the
 * layers; attn_output IQ2_XXS under the IQ1 types; base elsewhere. */
static enum qtype mix_iq_low(const struct mk_slot *s, enum qtype base) {
    switch (s->role) {
    case MK_ROLE_EMBD: return QTYPE_Q2_K;
    case MK_ROLE_OUTPUT: return QTYPE_Q5_K;
    case MK_ROLE_ATTN_V:
    case MK_ROLE_SSM_QKV:
        return n_gqa(s->o) >= 4 || (mk_is_moe(s->o->arch) && s->o->n_expert >= 4) ? QTYPE_Q4_K
                                                                                   : QTYPE_Q2_K;
    case MK_ROLE_FFN_DOWN: return s->il < s->o->n_layer / 8 ? QTYPE_Q2_K : base;
    case MK_ROLE_ATTN_O:
        return base == QTYPE_IQ1_S || base == QTYPE_IQ1_M ? QTYPE_IQ2_XXS : base;
    default: return base;
    }
}

static enum qtype mix_iq1_s(const struct mk_slot *s) {
    return mix_iq_low(s, QTYPE_IQ1_S);
}

static enum qtype mix_iq1_m(const struct mk_slot *s) {
    return mix_iq_low(s, QTYPE_IQ1_M);
}

static enum qtype mix_iq2_xxs(const struct mk_slot *s) {
    return mix_iq_low(s, QTYPE_IQ2_XXS);
}

static enum qtype mix_iq2_xs(const struct mk_slot *s) {
    return mix_iq_low(s, QTYPE_IQ2_XS);
}

/* IQ3_M: IQ3_S base, Q6_K output; Q4_K attn_v, attn_output and ffn_down in the first eighth of
 * the layers. */
static enum qtype mix_iq3_m(const struct mk_slot *s) {
    switch (s->role) {
    case MK_ROLE_OUTPUT: return QTYPE_Q6_K;
    case MK_ROLE_ATTN_V:
    case MK_ROLE_SSM_QKV:
    case MK_ROLE_ATTN_O: return QTYPE_Q4_K;
    case MK_ROLE_FFN_DOWN: return s->il < s->o->n_layer / 8 ? QTYPE_Q4_K : QTYPE_IQ3_S;
    default: return QTYPE_IQ3_S;
    }
}

struct mk_mix {
    const char *name;                          /* the --types value */
    uint32_t file_type;                        /* general.file_type: llama.cpp's llama_ftype */
    enum qtype (*rule)(const struct mk_slot *); /* a matrix's type (norms, routers: F32) */
};

/* Indexed by enum mk_types. */
static const struct mk_mix mk_mixes[] = {
    [MK_TYPES_F32] = {"f32", 0, mix_f32},
    [MK_TYPES_Q8_0] = {"q8_0", 7, mix_q8_0},
    [MK_TYPES_Q4_K_M] = {"q4_k_m", 15, mix_q4_k_m},
    [MK_TYPES_Q3_K_M] = {"q3_k_m", 12, mix_q3_k_m},
    [MK_TYPES_Q2_K] = {"q2_k", 10, mix_q2_k},
    [MK_TYPES_IQ4_XS] = {"iq4_xs", 30, mix_iq4_xs},
    [MK_TYPES_IQ4_NL] = {"iq4_nl", 25, mix_iq4_nl},
    [MK_TYPES_MXFP4_MOE] = {"mxfp4_moe", 38, mix_mxfp4_moe},
    [MK_TYPES_Q4_1] = {"q4_1", 3, mix_q4_1},
    [MK_TYPES_Q5_1] = {"q5_1", 9, mix_q5_1},
    [MK_TYPES_IQ2_M] = {"iq2_m", 29, mix_iq2_m},
    [MK_TYPES_IQ3_XXS] = {"iq3_xxs", 23, mix_iq3_xxs},
    [MK_TYPES_F16] = {"f16", 1, mix_f16},
    [MK_TYPES_BF16] = {"bf16", 32, mix_bf16},
    [MK_TYPES_Q4_0] = {"q4_0", 2, mix_q4_0},
    [MK_TYPES_Q5_0] = {"q5_0", 8, mix_q5_0},
    [MK_TYPES_Q5_K_M] = {"q5_k_m", 17, mix_q5_k_m},
    [MK_TYPES_Q6_K] = {"q6_k", 18, mix_q6_k},
    [MK_TYPES_IQ1_S] = {"iq1_s", 24, mix_iq1_s},
    [MK_TYPES_IQ1_M] = {"iq1_m", 31, mix_iq1_m},
    [MK_TYPES_IQ2_XXS] = {"iq2_xxs", 19, mix_iq2_xxs},
    [MK_TYPES_IQ2_XS] = {"iq2_xs", 20, mix_iq2_xs},
    [MK_TYPES_IQ3_M] = {"iq3_m", 27, mix_iq3_m},
};
#define MK_N_MIXES (int)(sizeof(mk_mixes) / sizeof(mk_mixes[0]))

/* The mk_mixes index named name, or -1. */
static int mk_mix_find(const char *name) {
    for (int i = 0; i < MK_N_MIXES; i++)
        if (mk_mixes[i].name && strcmp(name, mk_mixes[i].name) == 0)
            return i;
    return -1;
}

/* llama-quantize's fallback for rows that are not whole blocks of t (tensor_type_fallback). */
static enum qtype mk_fallback(enum qtype t) {
    switch (t) {
    case QTYPE_IQ1_S:
    case QTYPE_IQ1_M:
    case QTYPE_IQ2_XXS:
    case QTYPE_IQ2_XS:
    case QTYPE_IQ2_S:
    case QTYPE_IQ3_XXS:
    case QTYPE_IQ3_S:
    case QTYPE_IQ4_XS: return QTYPE_IQ4_NL;
    case QTYPE_Q2_K:
    case QTYPE_Q3_K: return QTYPE_Q4_0;
    case QTYPE_Q4_K: return QTYPE_Q5_0;
    case QTYPE_Q5_K: return QTYPE_Q5_1;
    case QTYPE_Q6_K: return QTYPE_Q8_0;
    default: return t;
    }
}

/* The type llama-quantize would give a tensor of this role, layer, row length and expert count. */
static enum qtype mk_type(const struct mk_opts *o, enum mk_role role, uint32_t il, uint64_t ne0,
                          uint64_t ne2) {
    if (o->types == MK_TYPES_F32 || role == MK_ROLE_NORM || role == MK_ROLE_ROUTER ||
        role >= MK_ROLE_SSM_CONV)
        return QTYPE_F32;
    if (role == MK_ROLE_PLE_PROJ)
        return o->types == MK_TYPES_F16 ? QTYPE_F16 : QTYPE_BF16;
    struct mk_slot slot = {o, role, il, ne2 > 1, il, o->n_layer};
    if (o->arch == MK_ARCH_GEMMA4)
        gemma4_v_index(o, il, &slot.iv, &slot.nv);
    enum qtype t = mk_mixes[o->types].rule(&slot);
    if (ne0 % qtype_block_elems(t) != 0)
        t = mk_fallback(t);
    return t;
}

/* Appends one tensor; n_dims from how many of ne1/ne2 are nonzero. Its name gets ".weight" unless
 * it is a bias ("ssm_dt.bias"), a scale ("ffn_gate_inp.scale") or ssm_a (llama.cpp's converter
 * names them bare). */
static void plan_add(struct mk_model *m, const struct mk_opts *o, const char *name, int il,
                     enum mk_role role, uint64_t ne0, uint64_t ne1, uint64_t ne2) {
    struct mk_tensor *t = &m->t[m->n++];
    memset(t, 0, sizeof(*t));
    size_t len = strlen(name);
    bool bare = (len > 5 && strcmp(name + len - 5, ".bias") == 0) ||
                (len > 6 && strcmp(name + len - 6, ".scale") == 0) || strcmp(name, "ssm_a") == 0;
    const char *suffix = bare ? "" : ".weight";
    if (il >= 0)
        snprintf(t->name, sizeof(t->name), "blk.%d.%s%s", il, name, suffix);
    else
        snprintf(t->name, sizeof(t->name), "%s%s", name, suffix);
    t->role = role;
    t->type = mk_type(o, role, il < 0 ? 0 : (uint32_t)il, ne0, ne2);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->n_dims = ne2 ? 3 : ne1 ? 2 : 1;
    t->mean = role == MK_ROLE_NORM ? 1.0f : 0.0f;
    t->std = role == MK_ROLE_NORM ? 0.05f
           : role == MK_ROLE_EMBD ? 1.0f
           : role == MK_ROLE_SSM_CONV ? 0.5f
           : 1.0f / sqrtf((float)ne0);
}

/* The FFN of layer il: dense, or experts (copies of the dense ones with --upcycle), with
 * qwen35moe's gated shared expert. */
static void plan_ffn(struct mk_model *m, const struct mk_opts *o, int il) {
    uint64_t e = o->n_embd;
    if (o->arch == MK_ARCH_QWEN35MOE) {
        plan_add(m, o, "ffn_gate_inp_shexp", il, MK_ROLE_ROUTER, e, 0, 0);
        plan_add(m, o, "ffn_gate_shexp", il, MK_ROLE_FFN_GATE, e, o->n_ff_shexp, 0);
        plan_add(m, o, "ffn_up_shexp", il, MK_ROLE_FFN_UP, e, o->n_ff_shexp, 0);
        plan_add(m, o, "ffn_down_shexp", il, MK_ROLE_FFN_DOWN, o->n_ff_shexp, e, 0);
    }
    if (!mk_is_moe(o->arch)) {
        plan_add(m, o, "ffn_gate", il, MK_ROLE_FFN_GATE, e, o->n_ff, 0);
        plan_add(m, o, "ffn_up", il, MK_ROLE_FFN_UP, e, o->n_ff, 0);
        plan_add(m, o, "ffn_down", il, MK_ROLE_FFN_DOWN, o->n_ff, e, 0);
        return;
    }
    static const char *const exps[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    static const char *const dense[3] = {"ffn_gate", "ffn_up", "ffn_down"};
    plan_add(m, o, "ffn_gate_inp", il, MK_ROLE_ROUTER, e, o->n_expert, 0);
    for (int k = 0; k < 3; k++) {
        bool down = k == 2;
        plan_add(m, o, exps[k], il, down ? MK_ROLE_FFN_DOWN : k ? MK_ROLE_FFN_UP
                                                                  : MK_ROLE_FFN_GATE,
                 down ? o->n_ff_exp : e, down ? e : o->n_ff_exp, o->n_expert);
        if (o->upcycle)
            snprintf(m->t[m->n - 1].src, MK_MAX_NAME, "blk.%d.%s.weight", il, dense[k]);
    }
}

/* gpt-oss's random biases, sinks and expert gain: large enough that a forgotten bias or sink
 * moves the logits well beyond the fixtures' bar, and that the clamps of its SwiGLU (limit 7) are
 * hit: the experts' gate and up values have std 3.5, so beyond 7 about one time in twenty. */
#define MK_GPTOSS_BIAS_STD 0.1f
#define MK_GPTOSS_ROUTER_BIAS_STD 0.5f
#define MK_GPTOSS_SINK_STD 1.0f
#define MK_GPTOSS_GATE_UP_GAIN 3.5f

static void plan_bias(struct mk_model *m, const struct mk_opts *o, const char *name, int il,
                      uint64_t ne0, uint64_t ne1, float std) {
    plan_add(m, o, name, il, MK_ROLE_BIAS, ne0, ne1, 0);
    m->t[m->n - 1].std = std;
}

/* Layer il of a gpt-oss model, as llama.cpp's loader lists it: attention with biases on q, k, v
 * and the output and a sink logit per head (attn_sinks, named ".weight" as the converter does),
 * post_attention_norm, the router with its bias, and the experts with one bias row each (MXFP4
 * when the preset's published file has them so). */
static void plan_gptoss_layer(struct mk_model *m, const struct mk_opts *o, int il) {
    static const char *const exps[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    static const char *const bias[3] = {"ffn_gate_exps.bias", "ffn_up_exps.bias",
                                        "ffn_down_exps.bias"};
    uint64_t e = o->n_embd, qd = (uint64_t)o->n_head * o->head_dim;
    uint64_t kvd = (uint64_t)o->n_head_kv * o->head_dim, ff = o->n_ff_exp, n_exp = o->n_expert;
    plan_add(m, o, "attn_norm", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "attn_q", il, MK_ROLE_ATTN_Q, e, qd, 0);
    plan_bias(m, o, "attn_q.bias", il, qd, 0, MK_GPTOSS_BIAS_STD);
    plan_add(m, o, "attn_k", il, MK_ROLE_ATTN_K, e, kvd, 0);
    plan_bias(m, o, "attn_k.bias", il, kvd, 0, MK_GPTOSS_BIAS_STD);
    plan_add(m, o, "attn_v", il, MK_ROLE_ATTN_V, e, kvd, 0);
    plan_bias(m, o, "attn_v.bias", il, kvd, 0, MK_GPTOSS_BIAS_STD);
    plan_add(m, o, "attn_output", il, MK_ROLE_ATTN_O, qd, e, 0);
    plan_bias(m, o, "attn_output.bias", il, e, 0, MK_GPTOSS_BIAS_STD);
    plan_bias(m, o, "attn_sinks", il, o->n_head, 0, MK_GPTOSS_SINK_STD);
    plan_add(m, o, "post_attention_norm", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "ffn_gate_inp", il, MK_ROLE_ROUTER, e, n_exp, 0);
    plan_bias(m, o, "ffn_gate_inp.bias", il, n_exp, 0, MK_GPTOSS_ROUTER_BIAS_STD);
    for (int k = 0; k < 3; k++) {
        bool down = k == 2;
        plan_add(m, o, exps[k], il, down ? MK_ROLE_FFN_DOWN : k ? MK_ROLE_FFN_UP : MK_ROLE_FFN_GATE,
                 down ? ff : e, down ? e : ff, n_exp);
        struct mk_tensor *t = &m->t[m->n - 1];
        t->type = o->mxfp4_experts ? QTYPE_MXFP4 : t->type;
        t->std *= down ? 1.0f : MK_GPTOSS_GATE_UP_GAIN;
        plan_bias(m, o, bias[k], il, down ? e : ff, n_exp, MK_GPTOSS_BIAS_STD);
    }
}

/* Layer il's mixer in a qwen35* model: gated attention every attn_interval-th layer (attn_q
 * holds each head's query then its gate), else Gated DeltaNet. */
static void plan_hybrid_mixer(struct mk_model *m, const struct mk_opts *o, int il) {
    uint64_t e = o->n_embd, qd = (uint64_t)o->n_head * o->head_dim;
    uint64_t kvd = (uint64_t)o->n_head_kv * o->head_dim;
    uint64_t vd = (uint64_t)o->ssm_rank * o->ssm_state;
    uint64_t conv = 2ull * o->ssm_group * o->ssm_state + vd;
    if ((il + 1) % (int)o->attn_interval == 0 || il >= (int)o->n_layer) { /* prediction blocks too */
        plan_add(m, o, "attn_q", il, MK_ROLE_ATTN_Q, e, 2 * qd, 0);
        plan_add(m, o, "attn_k", il, MK_ROLE_ATTN_K, e, kvd, 0);
        plan_add(m, o, "attn_v", il, MK_ROLE_ATTN_V, e, kvd, 0);
        plan_add(m, o, "attn_output", il, MK_ROLE_ATTN_O, qd, e, 0);
        plan_add(m, o, "attn_q_norm", il, MK_ROLE_NORM, o->head_dim, 0, 0);
        plan_add(m, o, "attn_k_norm", il, MK_ROLE_NORM, o->head_dim, 0, 0);
        return;
    }
    plan_add(m, o, "attn_qkv", il, MK_ROLE_SSM_QKV, e, conv, 0);
    plan_add(m, o, "attn_gate", il, MK_ROLE_MATRIX, e, vd, 0);
    plan_add(m, o, "ssm_conv1d", il, MK_ROLE_SSM_CONV, o->ssm_conv, conv, 0);
    plan_add(m, o, "ssm_dt.bias", il, MK_ROLE_SSM_DT, o->ssm_rank, 0, 0);
    plan_add(m, o, "ssm_a", il, MK_ROLE_SSM_A, o->ssm_rank, 0, 0);
    plan_add(m, o, "ssm_beta", il, MK_ROLE_MATRIX, e, o->ssm_rank, 0);
    plan_add(m, o, "ssm_alpha", il, MK_ROLE_MATRIX, e, o->ssm_rank, 0);
    plan_add(m, o, "ssm_norm", il, MK_ROLE_NORM, o->ssm_state, 0, 0);
    plan_add(m, o, "ssm_out", il, MK_ROLE_MATRIX, vd, e, 0);
}

/* gemma4 attends with kq scale 1 on rms-normalised q and k: norm weights near hd^(-1/4) give
 * scores of about unit spread (near 1 they would be sqrt(hd) wide and the softmax nearly one-hot,
 * where ties make the logits jump at the slightest rounding difference). */
static void gemma4_qk_norm_scale(struct mk_tensor *t) {
    t->mean = 1.0f / sqrtf(sqrtf((float)t->ne[0]));
    t->std = 0.05f * t->mean;
}

/* Layer il of a gemma4 model as llama.cpp's loader lists it (src/models/gemma4.cpp): attention
 * with q/k norms (window or global head size and KV heads; no K or V in a shared-KV layer, no V in
 * a global layer with k_eq_v),
 * post_attention_norm, the dense GeGLU FFN (twice as wide in a shared-KV layer with double_wide),
 * post_ffw_norm, the per-layer embedding's tensors (inp_gate, proj, post_norm) when the model has
 * them, and with experts post_ffw_norm_1, the router with its input scale, pre_ffw_norm_2, the
 * experts (gate and up fused, a scale per expert on down) with post_ffw_norm_2; the layer's
 * output scale. */
static void plan_gemma4_layer(struct mk_model *m, const struct mk_opts *o, int il) {
    const bool swa = gemma4_swa(o, (uint32_t)il);
    const uint64_t e = o->n_embd, hd = swa ? o->head_dim : o->head_dim_full;
    const uint64_t qd = o->n_head * hd, kvd = (swa ? o->n_head_kv : o->n_head_kv_full) * hd;
    const uint64_t ff = o->n_ff_exp, n_exp = o->n_expert, n_ff = gemma4_n_ff(o, (uint32_t)il);
    plan_add(m, o, "attn_norm", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "attn_q", il, MK_ROLE_ATTN_Q, e, qd, 0);
    if (gemma4_has_kv(o, (uint32_t)il)) {
        plan_add(m, o, "attn_k", il, MK_ROLE_ATTN_K, e, kvd, 0);
        if (gemma4_has_v(o, (uint32_t)il))
            plan_add(m, o, "attn_v", il, MK_ROLE_ATTN_V, e, kvd, 0);
        plan_add(m, o, "attn_k_norm", il, MK_ROLE_NORM, hd, 0, 0);
        gemma4_qk_norm_scale(&m->t[m->n - 1]);
    }
    plan_add(m, o, "attn_output", il, MK_ROLE_ATTN_O, qd, e, 0);
    plan_add(m, o, "attn_q_norm", il, MK_ROLE_NORM, hd, 0, 0);
    gemma4_qk_norm_scale(&m->t[m->n - 1]);
    plan_add(m, o, "post_attention_norm", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "layer_output_scale", il, MK_ROLE_NORM, 1, 0, 0);
    plan_add(m, o, "ffn_norm", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "ffn_gate", il, MK_ROLE_FFN_GATE, e, n_ff, 0);
    plan_add(m, o, "ffn_up", il, MK_ROLE_FFN_UP, e, n_ff, 0);
    plan_add(m, o, "ffn_down", il, MK_ROLE_FFN_DOWN, n_ff, e, 0);
    plan_add(m, o, "post_ffw_norm", il, MK_ROLE_NORM, e, 0, 0);
    if (o->n_embd_per_layer) { /* the per-layer embedding's gate, projection and norm */
        plan_add(m, o, "inp_gate", il, MK_ROLE_MATRIX, e, o->n_embd_per_layer, 0);
        plan_add(m, o, "proj", il, MK_ROLE_MATRIX, o->n_embd_per_layer, e, 0);
        plan_add(m, o, "post_norm", il, MK_ROLE_NORM, e, 0, 0);
    }
    if (!mk_has_experts(o))
        return;
    plan_add(m, o, "ffn_gate_inp", il, MK_ROLE_ROUTER, e, n_exp, 0);
    m->t[m->n - 1].std = 1.0f; /* its input is rms-normalised then divided by sqrt(n_embd) */
    plan_add(m, o, "ffn_gate_inp.scale", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "pre_ffw_norm_2", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "post_ffw_norm_1", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "post_ffw_norm_2", il, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "ffn_gate_up_exps", il, MK_ROLE_FFN_GATE, e, 2 * ff, n_exp);
    plan_add(m, o, "ffn_down_exps", il, MK_ROLE_FFN_DOWN, ff, e, n_exp);
    plan_add(m, o, "ffn_down_exps.scale", il, MK_ROLE_NORM, n_exp, 0, 0);
}

/* gemma4's per-layer embeddings (E2B, E4B): the table of n_layer slices of n_embd_per_layer per
 * token (tied embeddings: llama-quantize gives it the output's type, as token_embd; values of
 * std 1/sqrt(width) so that, times sqrt(width), they weigh as much as the projection they join),
 * the projection from the scaled token embedding, and its norm. */
static void plan_ple(struct mk_model *m, const struct mk_opts *o) {
    const uint64_t P = o->n_embd_per_layer, LP = P * o->n_layer;
    plan_add(m, o, "per_layer_token_embd", -1, MK_ROLE_OUTPUT, LP, m->t[0].ne[1], 0);
    m->t[m->n - 1].std = 1.0f / sqrtf((float)P);
    plan_add(m, o, "per_layer_model_proj", -1, MK_ROLE_PLE_PROJ, o->n_embd, LP, 0);
    plan_add(m, o, "per_layer_proj_norm", -1, MK_ROLE_NORM, P, 0, 0);
}

/* All tensors in convert_hf_to_gguf's order. Returns 0 or -ENOMEM. */
static int plan_build(struct mk_model *m, const struct mk_opts *o, uint32_t n_vocab) {
    uint64_t e = o->n_embd, qd = (uint64_t)o->n_head * o->head_dim;
    uint64_t kvd = (uint64_t)o->n_head_kv * o->head_dim;
    bool qk_norm = o->arch != MK_ARCH_LLAMA;
    m->n = 0;
    m->t = calloc(8 + (size_t)(o->n_layer + o->nextn) * 24, sizeof(*m->t));
    if (!m->t)
        return -ENOMEM;
    /* gemma4 ties the output to token_embd, which then gets the output's type and scale */
    plan_add(m, o, "token_embd", -1, o->arch == MK_ARCH_GEMMA4 ? MK_ROLE_OUTPUT : MK_ROLE_EMBD, e,
             n_vocab, 0);
    if (o->arch == MK_ARCH_GEMMA4) {
        if (o->n_layer >= o->swa_period) /* read by the global layers only (llama.cpp refuses
                                          * a tensor it does not read) */
            plan_add(m, o, "rope_freqs", -1, MK_ROLE_ROPE_FREQS, o->head_dim_full / 2, 0, 0);
        if (o->n_embd_per_layer)
            plan_ple(m, o);
        for (int il = 0; il < (int)o->n_layer; il++)
            plan_gemma4_layer(m, o, il);
        plan_add(m, o, "output_norm", -1, MK_ROLE_NORM, e, 0, 0);
        return 0;
    }
    for (int il = 0; mk_is_hybrid(o->arch) && il < (int)(o->n_layer + o->nextn); il++) {
        plan_add(m, o, "attn_norm", il, MK_ROLE_NORM, e, 0, 0);
        plan_hybrid_mixer(m, o, il);
        plan_add(m, o, "post_attention_norm", il, MK_ROLE_NORM, e, 0, 0);
        plan_ffn(m, o, il);
        if (il >= (int)o->n_layer) { /* a prediction block: attention, FFN and its own tensors */
            plan_add(m, o, "nextn.eh_proj", il, MK_ROLE_MATRIX, 2 * e, e, 0);
            plan_add(m, o, "nextn.enorm", il, MK_ROLE_NORM, e, 0, 0);
            plan_add(m, o, "nextn.hnorm", il, MK_ROLE_NORM, e, 0, 0);
            plan_add(m, o, "nextn.shared_head_norm", il, MK_ROLE_NORM, e, 0, 0);
        }
    }
    for (int il = 0; o->arch == MK_ARCH_GPTOSS && il < (int)o->n_layer; il++)
        plan_gptoss_layer(m, o, il);
    for (int il = 0; !mk_is_hybrid(o->arch) && o->arch != MK_ARCH_GPTOSS && il < (int)o->n_layer;
         il++) {
        plan_add(m, o, "attn_norm", il, MK_ROLE_NORM, e, 0, 0);
        plan_add(m, o, "attn_q", il, MK_ROLE_ATTN_Q, e, qd, 0);
        plan_add(m, o, "attn_k", il, MK_ROLE_ATTN_K, e, kvd, 0);
        plan_add(m, o, "attn_v", il, MK_ROLE_ATTN_V, e, kvd, 0);
        plan_add(m, o, "attn_output", il, MK_ROLE_ATTN_O, qd, e, 0);
        if (qk_norm) {
            plan_add(m, o, "attn_q_norm", il, MK_ROLE_NORM, o->head_dim, 0, 0);
            plan_add(m, o, "attn_k_norm", il, MK_ROLE_NORM, o->head_dim, 0, 0);
        }
        plan_add(m, o, "ffn_norm", il, MK_ROLE_NORM, e, 0, 0);
        plan_ffn(m, o, il);
    }
    plan_add(m, o, "output_norm", -1, MK_ROLE_NORM, e, 0, 0);
    plan_add(m, o, "output", -1, MK_ROLE_OUTPUT, e, n_vocab, 0);
    return 0;
}

/* ==== output: metadata, tensor table, streamed data ========================================== */

/* Adds "ARCH.suffix" = v (u32). */
static int meta_u32(struct gguf_writer *w, const char *arch, const char *suffix, uint32_t v) {
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return gguf_writer_add_u32(w, key, v);
}

static int meta_f32(struct gguf_writer *w, const char *arch, const char *suffix, float v) {
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return gguf_writer_add_f32(w, key, v);
}

/* The qwen35* keys: shared expert, partial IMRoPE (the rotated half-dimensions split into
 * sections [s, s, rest, 0]), the DeltaNet sizes and the layer pattern. */
static int meta_hybrid(struct gguf_writer *w, const struct mk_opts *o, const char *a) {
    int32_t half = (int32_t)o->n_rot / 2, s0 = (half + 2) / 3;
    const int32_t sections[4] = {s0, s0, half - 2 * s0, 0};
    char key[128];
    snprintf(key, sizeof(key), "%s.rope.dimension_sections", a);
    int rc = o->arch != MK_ARCH_QWEN35MOE ? 0
             : meta_u32(w, a, "expert_shared_feed_forward_length", o->n_ff_shexp);
    rc = rc ? rc : meta_u32(w, a, "rope.dimension_count", o->n_rot);
    rc = rc ? rc : gguf_writer_add_arr_i32(w, key, sections, 4);
    rc = rc ? rc : meta_u32(w, a, "ssm.conv_kernel", o->ssm_conv);
    rc = rc ? rc : meta_u32(w, a, "ssm.state_size", o->ssm_state);
    rc = rc ? rc : meta_u32(w, a, "ssm.group_count", o->ssm_group);
    rc = rc ? rc : meta_u32(w, a, "ssm.time_step_rank", o->ssm_rank);
    rc = rc ? rc : meta_u32(w, a, "ssm.inner_size", o->ssm_rank * o->ssm_state);
    rc = rc ? rc : meta_u32(w, a, "full_attention_interval", o->attn_interval);
    return rc;
}

/* The gpt-oss keys: the window of the sliding-window layers (every other one, from layer 0) and
 * YaRN as its converter writes it (the type, the factor, the original context). */
static int meta_gptoss(struct gguf_writer *w, const struct mk_opts *o, const char *a) {
    char key[128];
    snprintf(key, sizeof(key), "%s.rope.scaling.type", a);
    int rc = meta_u32(w, a, "attention.sliding_window", o->n_swa);
    rc = rc ? rc : gguf_writer_add_str(w, key, "yarn");
    rc = rc ? rc : meta_f32(w, a, "rope.scaling.factor", o->yarn_factor);
    rc = rc ? rc : meta_u32(w, a, "rope.scaling.original_context_length", o->yarn_orig_ctx);
    return rc;
}

/* The gemma4 keys (conversion/gemma.py's Gemma4Model): the window and which layers have it, the
 * window layers' head size, KV heads (an array: window layers then global ones differ), rotation
 * and RoPE base, the shared-KV layers, no per-layer embeddings, the final soft-capping. */
static int meta_gemma4(struct gguf_writer *w, const struct mk_opts *o, const char *a) {
    char key[128];
    int32_t kv[512];
    uint8_t swa[512];
    for (uint32_t il = 0; il < o->n_layer && il < 512; il++) {
        swa[il] = gemma4_swa(o, il);
        kv[il] = (int32_t)(swa[il] ? o->n_head_kv : o->n_head_kv_full);
    }
    snprintf(key, sizeof(key), "%s.attention.head_count_kv", a);
    int rc = gguf_writer_add_arr_i32(w, key, kv, o->n_layer);
    snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", a);
    rc = rc ? rc : gguf_writer_add_arr_bool(w, key, swa, o->n_layer);
    rc = rc ? rc : meta_u32(w, a, "attention.sliding_window", o->n_swa);
    rc = rc ? rc : meta_u32(w, a, "attention.shared_kv_layers", o->n_kv_shared);
    rc = rc ? rc : meta_u32(w, a, "embedding_length_per_layer_input", o->n_embd_per_layer);
    rc = rc ? rc : meta_u32(w, a, "attention.key_length_swa", o->head_dim);
    rc = rc ? rc : meta_u32(w, a, "attention.value_length_swa", o->head_dim);
    rc = rc ? rc : meta_u32(w, a, "rope.dimension_count", o->head_dim_full);
    rc = rc ? rc : meta_u32(w, a, "rope.dimension_count_swa", o->head_dim);
    rc = rc ? rc : meta_f32(w, a, "rope.freq_base_swa", o->rope_base_swa);
    rc = rc ? rc : meta_f32(w, a, "final_logit_softcapping", o->softcap);
    return rc;
}

/* gemma4 with double_wide: feed_forward_length as an array, one width per layer (the converter's
 * use_double_wide_mlp). */
static int meta_gemma4_ff(struct gguf_writer *w, const struct mk_opts *o, const char *a) {
    int32_t ff[512];
    char key[128];
    for (uint32_t il = 0; il < o->n_layer && il < 512; il++)
        ff[il] = (int32_t)gemma4_n_ff(o, il);
    snprintf(key, sizeof(key), "%s.feed_forward_length", a);
    return gguf_writer_add_arr_i32(w, key, ff, o->n_layer);
}

/* general.* and the architecture's hyper-parameters, in the order llama.cpp's converter writes. */
static int meta_model(struct gguf_writer *w, const struct mk_opts *o) {
    const char *a = mk_arch_names[o->arch];
    bool moe = mk_has_experts(o);
    char name[128], desc[160];
    snprintf(name, sizeof(name), "sniper-mkmodel-%s-%s%s", o->preset, a,
             o->upcycle ? "-upcycled" : "");
    snprintf(desc, sizeof(desc), "synthetic random-weight model (seed %llu); not a trained model",
             (unsigned long long)o->seed);
    int rc = gguf_writer_add_str(w, "general.architecture", a);
    rc = rc ? rc : gguf_writer_add_str(w, "general.name", name);
    rc = rc ? rc : gguf_writer_add_str(w, "general.description", desc);
    rc = rc ? rc : meta_u32(w, a, "block_count", o->n_layer + o->nextn);
    rc = rc || !o->nextn ? rc : meta_u32(w, a, "nextn_predict_layers", o->nextn);
    rc = rc ? rc : meta_u32(w, a, "context_length", o->ctx);
    rc = rc ? rc : meta_u32(w, a, "embedding_length", o->n_embd);
    /* qwen35moe files, as Qwen3.5-MoE's converter writes them, have no feed_forward_length */
    if (o->double_wide)
        rc = rc ? rc : meta_gemma4_ff(w, o, a);
    else if (o->arch != MK_ARCH_QWEN35MOE)
        rc = rc ? rc : meta_u32(w, a, "feed_forward_length", o->n_ff);
    rc = rc || !moe ? rc : meta_u32(w, a, "expert_feed_forward_length", o->n_ff_exp);
    rc = rc ? rc : meta_u32(w, a, "attention.head_count", o->n_head);
    if (o->arch != MK_ARCH_GEMMA4) { /* gemma4: an array, below */
        rc = rc ? rc : meta_u32(w, a, "attention.head_count_kv", o->n_head_kv);
        rc = rc ? rc : meta_u32(w, a, "attention.key_length", o->head_dim);
        rc = rc ? rc : meta_u32(w, a, "attention.value_length", o->head_dim);
    } else {
        rc = rc ? rc : meta_u32(w, a, "attention.key_length", o->head_dim_full);
        rc = rc ? rc : meta_u32(w, a, "attention.value_length", o->head_dim_full);
    }
    rc = rc || o->arch != MK_ARCH_LLAMA ? rc : meta_u32(w, a, "rope.dimension_count", o->head_dim);
    rc = rc ? rc : meta_f32(w, a, "rope.freq_base", o->rope_base);
    rc = rc ? rc : meta_f32(w, a, "attention.layer_norm_rms_epsilon", o->eps);
    rc = rc || !moe ? rc : meta_u32(w, a, "expert_count", o->n_expert);
    rc = rc || !moe ? rc : meta_u32(w, a, "expert_used_count", o->n_expert_used);
    rc = rc || !mk_is_hybrid(o->arch) ? rc : meta_hybrid(w, o, a);
    rc = rc || o->arch != MK_ARCH_GPTOSS ? rc : meta_gptoss(w, o, a);
    rc = rc || o->arch != MK_ARCH_GEMMA4 ? rc : meta_gemma4(w, o, a);
    rc = rc ? rc : gguf_writer_add_u32(w, "general.file_type",
                                       o->mxfp4_experts ? mk_mixes[MK_TYPES_MXFP4_MOE].file_type
                                                        : mk_mixes[o->types].file_type);
    rc = rc ? rc : gguf_writer_add_u32(w, "general.quantization_version", 2);
    return rc;
}

static int meta_tokenizer(struct gguf_writer *w, const struct mk_opts *o, const struct mk_vocab *v,
                          const char *tmpl) {
    int rc = gguf_writer_add_str(w, "tokenizer.ggml.model", o->vocab_gemma4 ? "gemma4" : "gpt2");
    rc = rc ? rc : gguf_writer_add_str(w, "tokenizer.ggml.pre",
                                       o->vocab_gemma4 ? "gemma4"
                                       : o->arch == MK_ARCH_GPTOSS ? "gpt-4o"
                                       : mk_is_hybrid(o->arch) ? "qwen35" : "qwen2");
    rc = rc ? rc : gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens",
                                           (const char *const *)v->tokens, v->n_tokens);
    rc = rc ? rc : gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", v->types, v->n_tokens);
    rc = rc ? rc : gguf_writer_add_arr_str(w, "tokenizer.ggml.merges",
                                           (const char *const *)v->merges, v->n_merges);
    if (rc == 0 && v->eos_id >= 0)
        rc = gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos_id);
    if (rc == 0 && v->pad_id >= 0)
        rc = gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad_id);
    if (rc == 0 && v->bos_id >= 0)
        rc = gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos_id);
    rc = rc ? rc : gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", o->vocab_gemma4);
    rc = rc ? rc : gguf_writer_add_str(w, "tokenizer.chat_template", tmpl);
    return rc;
}

/* Streams n_bytes of the tensor called name (type, mean, std) through buf. */
static int write_stream(struct gguf_writer *w, uint64_t seed, const char *name,
                        const struct mk_tensor *t, uint64_t n_bytes, uint8_t *buf) {
    struct mk_stream s;
    uint32_t bb = qtype_block_bytes(t->type);
    uint64_t per_chunk = MK_CHUNK_BYTES / bb, left = n_bytes / bb;
    int rc = 0;
    stream_init(&s, seed, name, t->type, t->mean, t->std);
    if (t->role == MK_ROLE_SSM_DT) {
        s.dist = MK_DIST_UNIFORM;
        s.mean = 1.0f;
        s.std = 0.5f;
    } else if (t->role == MK_ROLE_SSM_A) {
        s.dist = MK_DIST_NEG_LOGU;
    }
    while (rc == 0 && left > 0) {
        uint64_t n = left < per_chunk ? left : per_chunk;
        rc = stream_fill(&s, buf, n);
        rc = rc ? rc : gguf_writer_write(w, buf, (size_t)(n * bb));
        left -= n;
    }
    return rc;
}

/* gemma4's rope_freqs (f32, n_bytes of them): the global layers' "proportional" RoPE as the
 * converter writes it, 1 for the first rope_rot_full pairs and 1e30 (no rotation) after. */
static int write_rope_freqs(struct gguf_writer *w, const struct mk_opts *o, uint64_t n_bytes,
                            uint8_t *buf) {
    float *f = (float *)buf;
    const uint64_t n = n_bytes / sizeof(float);
    for (uint64_t i = 0; i < n; i++)
        f[i] = i < o->rope_rot_full ? 1.0f : 1e30f;
    return gguf_writer_write(w, buf, (size_t)n_bytes);
}

/* A tensor's data: its own stream, or with --upcycle one copy of the dense stream per expert. */
static int write_tensor(struct gguf_writer *w, const struct mk_opts *o, const struct mk_tensor *t,
                        uint64_t n_bytes, uint8_t *buf) {
    const uint64_t seed = o->seed;
    if (t->role == MK_ROLE_ROPE_FREQS)
        return write_rope_freqs(w, o, n_bytes, buf);
    if (!t->src[0])
        return write_stream(w, seed, t->name, t, n_bytes, buf);
    int rc = 0;
    for (uint64_t e = 0; rc == 0 && e < t->ne[2]; e++)
        rc = write_stream(w, seed, t->src, t, n_bytes / t->ne[2], buf);
    return rc;
}

/* Where model_write's progress stands across the files it writes. */
struct mk_progress {
    uint64_t total;       /* tensor data bytes of the whole model */
    uint64_t done;        /* of them written */
    uint64_t next_report;
    uint64_t file_bytes;  /* bytes of the files finished */
};

/* Declares tensors [lo, hi) of m in w (its metadata already added), then writes the header and
 * their data to path. Returns 0 or a negative errno. */
static int file_write(struct gguf_writer *w, const struct mk_opts *o, const struct mk_model *m,
                      uint32_t lo, uint32_t hi, const char *path, uint8_t *buf,
                      struct mk_progress *pr) {
    int rc = 0;
    for (uint32_t i = lo; rc == 0 && i < hi; i++)
        rc = gguf_writer_add_tensor(w, m->t[i].name, m->t[i].type, m->t[i].n_dims, m->t[i].ne);
    rc = rc ? rc : gguf_writer_open(w, path);
    for (uint32_t i = lo; rc == 0 && i < hi; i++) {
        uint64_t n_bytes = gguf_writer_tensor_bytes(w, i - lo);
        rc = write_tensor(w, o, &m->t[i], n_bytes, buf);
        pr->done += n_bytes;
        if (!o->quiet && pr->done >= pr->next_report) {
            fprintf(stderr, "sniper-mkmodel: %.1f / %.1f GiB\n", pr->done / 1073741824.0,
                    pr->total / 1073741824.0);
            pr->next_report += 1ull << 30;
        }
    }
    rc = rc ? rc : gguf_writer_finish(w);
    if (rc == 0)
        pr->file_bytes += gguf_writer_file_bytes(w);
    return rc;
}

/* The shards of --split-max-size as gguf-split cuts them: tensors in order, a new shard when the
 * next tensor's data (padded to 32 bytes) would take this one past max_bytes, at least one tensor
 * each. sizes has every tensor of m declared (and nothing else). Fills first[k] with shard k's
 * first tensor and first[n] = m->n; returns n (1 when everything fits one file). first holds
 * m->n + 1. */
static uint32_t split_plan(const struct gguf_writer *sizes, const struct mk_model *m,
                           uint64_t max_bytes, uint32_t *first) {
    uint32_t n = 0;
    uint64_t cur = 0;
    first[n++] = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        uint64_t b = (gguf_writer_tensor_bytes(sizes, i) + 31) & ~(uint64_t)31;
        if (cur > 0 && cur + b > max_bytes) {
            first[n++] = i;
            cur = 0;
        }
        cur += b;
    }
    first[n] = m->n;
    return n;
}

/* Shard k of n: "PREFIX-%05u-of-%05u.gguf" with k + 1, PREFIX being out without ".gguf". */
static void split_path(const char *out, uint32_t k, uint32_t n, char *path, size_t len) {
    size_t n_out = strlen(out);
    if (n_out > 5 && strcmp(out + n_out - 5, ".gguf") == 0)
        n_out -= 5;
    snprintf(path, len, "%.*s-%05u-of-%05u.gguf", (int)n_out, out, k + 1, n);
}

/* Writes shard k of n (tensors [first[k], first[k + 1])) with gguf-split's split.* keys through w,
 * which holds the model's metadata for the first shard and nothing for the others. */
static int shard_write(struct gguf_writer *w, const struct mk_opts *o, const struct mk_model *m,
                       const uint32_t *first, uint32_t k, uint32_t n, uint8_t *buf,
                       struct mk_progress *pr) {
    char path[4096];
    int rc = gguf_writer_add_u16(w, "split.no", (uint16_t)k);
    rc = rc ? rc : gguf_writer_add_u16(w, "split.count", (uint16_t)n);
    rc = rc ? rc : gguf_writer_add_i32(w, "split.tensors.count", (int32_t)m->n);
    split_path(o->out, k, n, path, sizeof(path));
    rc = rc ? rc : file_write(w, o, m, first[k], first[k + 1], path, buf, pr);
    if (rc == 0 && !o->quiet)
        fprintf(stderr, "sniper-mkmodel: wrote shard \"%s\": %u tensors\n", path,
                first[k + 1] - first[k]);
    return rc;
}

/* Writes the model through w (empty): one file, or with --split-max-size the shards of a split
 * model (w writes the first). Returns 0 or a negative errno. */
static int model_write(struct gguf_writer *w, const struct mk_opts *o, const struct mk_model *m,
                       const struct mk_vocab *v, const char *tmpl) {
    struct mk_progress pr = {.next_report = 1ull << 30};
    struct gguf_writer *sizes = gguf_writer_new(), *next = NULL;
    uint8_t *buf = malloc(MK_CHUNK_BYTES);
    uint32_t *first = calloc((size_t)m->n + 1, sizeof(*first)), n_shards = 1;
    double t0 = clock_now_s();
    int rc = sizes && buf && first ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < m->n; i++) {
        rc = gguf_writer_add_tensor(sizes, m->t[i].name, m->t[i].type, m->t[i].n_dims, m->t[i].ne);
        pr.total += gguf_writer_tensor_bytes(sizes, i);
    }
    if (rc == 0 && o->split_max_bytes)
        n_shards = split_plan(sizes, m, o->split_max_bytes, first);
    rc = rc ? rc : meta_model(w, o);
    rc = rc ? rc : meta_tokenizer(w, o, v, tmpl);
    if (rc == 0 && n_shards == 1)
        rc = file_write(w, o, m, 0, m->n, o->out, buf, &pr);
    for (uint32_t k = 0; rc == 0 && n_shards > 1 && k < n_shards; k++) {
        gguf_writer_free(next);
        next = k == 0 ? NULL : gguf_writer_new();
        rc = k == 0 || next ? shard_write(k == 0 ? w : next, o, m, first, k, n_shards, buf, &pr)
                            : -ENOMEM;
    }
    double dt = clock_now_s() - t0;
    if (rc == 0 && !o->quiet)
        fprintf(stderr, "sniper-mkmodel: wrote \"%s\"%s: %u tensors, %u tokens, %llu bytes in %.2f "
                "s (%.0f MB/s)\n", o->out, n_shards > 1 ? " as shards" : "", m->n, v->n_tokens,
                (unsigned long long)pr.file_bytes, dt, dt > 0 ? pr.file_bytes / dt / 1e6 : 0.0);
    gguf_writer_free(next);
    gguf_writer_free(sizes);
    free(first);
    free(buf);
    return rc;
}

/* The chat template text: the file's contents (malloc'd into *owned) or the built-in one (of the
 * gemma4 vocabulary, of gpt-oss, else ChatML). */
static const char *load_template(const char *path, const struct mk_opts *o, char **owned) {
    *owned = NULL;
    if (!path)
        return o->vocab_gemma4               ? mk_gemma4_template
               : o->arch == MK_ARCH_GPTOSS ? mk_harmony_template
                                           : mk_chat_template;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    while (s) {
        n += fread(s + n, 1, cap - 1 - n, f);
        if (n < cap - 1 || cap >= (1u << 24))
            break;
        char *g = realloc(s, cap * 2);
        if (!g) {
            free(s);
            s = NULL;
        } else {
            s = g;
            cap *= 2;
        }
    }
    if (s && (ferror(f) || n == cap - 1)) { /* read error or over 16 MiB */
        free(s);
        s = NULL;
    }
    fclose(f);
    if (s)
        s[n] = '\0';
    *owned = s;
    return s;
}

int main(int argc, char **argv) {
    struct mk_opts o;
    struct mk_vocab v = {0};
    struct mk_model m = {0};
    struct gguf_writer *w = NULL;
    char *tmpl_owned = NULL;
    const char *tmpl = NULL;
    int rc = opts_parse(&o, argc, argv);
    if (rc > 0)
        mk_usage(stdout);
    else if (rc < 0)
        fprintf(stderr, "sniper-mkmodel: see --help\n");
    if (rc)
        return rc > 0 ? 0 : 2;
    rc = vocab_build(&v, &o);
    if (rc)
        goto out;
    tmpl = load_template(o.template_path, &o, &tmpl_owned);
    if (!tmpl) {
        fprintf(stderr, "sniper-mkmodel: cannot read chat template \"%s\"\n", o.template_path);
        rc = -EINVAL;
        goto out;
    }
    rc = plan_build(&m, &o, v.n_tokens);
    if (rc)
        goto out;
    w = gguf_writer_new();
    rc = w ? model_write(w, &o, &m, &v, tmpl) : -ENOMEM;
out:
    if (rc)
        fprintf(stderr, "sniper-mkmodel: failed to write \"%s\": %s\n", o.out, strerror(-rc));
    gguf_writer_free(w);
    free(m.t);
    free(tmpl_owned);
    vocab_release(&v);
    return rc ? 1 : 0;
}
