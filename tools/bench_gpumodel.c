/* bench_gpumodel.c - a model's prefill and decode on the GPU (engine_use_gpu), against the same
 * on the CPU, with the logits compared bit for bit: what the Vulkan backend reaches on a whole
 * model, and the proof on that device that it computes the CPU's numbers.
 *
 *     bench-gpumodel -m MODEL [--gpu N] [--prompt N] [--gen N] [--threads T] [--batch B]
 *                      [--cpu-prompt N] [--cpu-gen N] [--kv-type f16|f32|q8_0|q4_0]
 *                      [--gpu-budget SIZE] [--gpu-experts N] [--gpu-transit -1|0|1]
 *                      [--ram-budget SIZE] [--warmup N] [--trace]
 *
 * The experts on three levels: --gpu-budget bounds the device memory (the routed experts take
 * the VRAM slots that the rest leaves, the others are computed on the CPU), --gpu-experts caps the
 * slots a MoE layer holds (-1: none, every routed expert on the CPU), --gpu-transit whether a
 * batch's missed experts are uploaded for its step (engine_params.gpu_transit: -1 never, 0 where
 * it is faster, 1 always), --ram-budget opens the model with its experts on disk behind an expert
 * cache of SIZE (each engine its own), and the line
 * "experts:" says where the decode's experts were computed and what the cache read.
 *
 * Prints the device, the upload (weights GB/s from RAM), the GPU's prefill of --prompt ids and
 * greedy decode of --gen tokens (tok/s) after --warmup untimed runs of the same (default 1: the
 * first run makes the kernels' pipelines and finds the device's clocks low, as llama-bench's
 * warm-up run does; on three levels it also fills the caches), then the CPU's of --cpu-prompt / --cpu-gen (0: skipped)
 * and whether every logit of those rows matched. Ids are pseudo-random, as sniperd's
 * --bench-prompt. With $SNIPER_GPU_PROFILE=1 it also prints where the GPU's time went (device
 * timestamps per op kind) in a prefill and in decode.
 *
 * --trace runs, instead of the benchmark, the prompt's --prompt ids (16 unless given) once on the
 * CPU and once on the GPU with the engine's per-op trace on (engine_set_trace: every op of every
 * layer leaves its rows, "L0 q_norm", "L3 moe_out", ..., the GPU's read back after each), and
 * prints the first op whose rows differ in any bit (op_trace.h: how many elements, the largest
 * difference, the first few elements' bits), or "no op differs"; then how many logits rows differ,
 * traced and in a second GPU run without the trace. The trace waits for the device at every point,
 * so a difference only the untraced run shows is an op reading rows that no barrier orders after
 * their writer. Exit status 0 when nothing differs, 3 when something does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "expert_cache.h"
#include "gpu.h"
#include "model.h"
#include "op_trace.h"
#include "ops.h"
#include "units.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct opts {
    const char *model, *gpu;
    int32_t prompt, gen, cpu_prompt, cpu_gen, batch, threads;
    enum qtype kv;
    uint64_t gpu_budget, ram_budget; /* bytes; 0: the device's, the whole model in RAM */
    int32_t gpu_experts;             /* engine_params.gpu_expert_slots */
    int32_t gpu_transit;             /* engine_params.gpu_transit */
    bool trace;                      /* --trace: the per-op comparison instead of the benchmark */
    int32_t warmup;                  /* untimed runs of the same prompt and decode before */
};

/* A run's figures and its logits rows (the prompt's last, then each decode step's). */
struct run {
    double prefill_s, decode_s;
    float *rows; /* [1 + gen][n_vocab] */
};

/* Prefill n ids, then gen greedy steps (the first from the prompt's last row). Returns 0 or the
 * engine's error. */
static int run_engine(struct engine *e, const int32_t *ids, int32_t n, int32_t gen, int32_t V,
                      struct run *r) {
    double t0 = now_s();
    int rc = engine_eval(e, 0, ids, n, r->rows, false);
    r->prefill_s = now_s() - t0;
    t0 = now_s();
    for (int32_t s = 0; rc == 0 && s < gen; s++) {
        int32_t tok = ops_argmax(r->rows + (size_t)s * V, V);
        rc = engine_eval(e, 0, &tok, 1, r->rows + (size_t)(s + 1) * V, false);
    }
    r->decode_s = now_s() - t0;
    return rc;
}

/* Bytes of weights one decode token reads: every tensor, but of an embedding table one row and of
 * the routed experts' tensors (ffn_*_exps) n_expert_used of their n_expert matrices; a model
 * without output.weight reads the whole token embedding for its logits. */
static double decode_weight_bytes(const struct model *m) {
    const struct gguf *g = m->gguf;
    double sum = 0.0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        double b = (double)t->n_bytes;
        if (strstr(t->name, "token_embd."))
            b = (double)t->row_bytes + (strcmp(t->name, "token_embd.weight") == 0 &&
                                                !gguf_find_tensor(g, "output.weight")
                                            ? (double)t->n_bytes
                                            : 0.0);
        else if (strstr(t->name, "_exps.") && m->hp.n_expert > 0)
            b = b * m->hp.n_expert_used / m->hp.n_expert;
        sum += b;
    }
    return sum;
}

/* An engine for m; with --ram-budget its expert cache into *cache (freed by the caller after
 * the engine). */
static struct engine *make_engine(const struct model *m, const struct opts *o,
                                  struct expert_cache **cache) {
    struct engine_params ep = engine_params_default();
    ep.n_ctx = o->prompt + o->gen + 16;
    ep.n_batch = o->batch;
    ep.kv_type = o->kv;
    ep.n_threads = o->threads;
    ep.gpu_expert_slots = o->gpu_experts;
    ep.gpu_transit = o->gpu_transit;
    char err[256];
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    *cache = e && o->ram_budget ? expert_cache_new(m, o->ram_budget, NULL, err, sizeof(err)) : NULL;
    if (!e || (o->ram_budget && !*cache)) {
        fprintf(stderr, "bench-gpumodel: %s\n", err);
        engine_free(e);
        return NULL;
    }
    engine_set_experts(e, *cache);
    return e;
}

/* Where the experts of the GPU's run were computed, and what the cache read. */
static void print_experts(const struct engine *e, const struct expert_cache *c) {
    struct engine_gpu_experts x;
    engine_gpu_experts(e, &x);
    const uint64_t all = x.pairs_gpu + x.pairs_cpu;
    if (x.in_place) {
        printf("experts: every routed expert computed by the GPU in the expert cache's slots "
               "(unified memory), %llu pairs", (unsigned long long)x.pairs_gpu);
    } else {
        printf("experts: %d of %d a layer in VRAM (%.2f GB); pairs on the GPU %llu, on the CPU "
               "%llu (%.1f%% on the GPU)", x.n_slots, x.n_expert, (double)x.slot_bytes * 1e-9,
               (unsigned long long)x.pairs_gpu, (unsigned long long)x.pairs_cpu,
               all ? 100.0 * (double)x.pairs_gpu / (double)all : 100.0);
        printf("; VRAM slots: hits %llu, misses %llu, promotions %llu",
               (unsigned long long)x.hits, (unsigned long long)x.misses,
               (unsigned long long)x.promotions);
    }
    if (x.exchange)
        printf("; transit: %llu experts uploaded for %llu pairs",
               (unsigned long long)x.transit_experts, (unsigned long long)x.transit_pairs);
    if (c) {
        struct expert_cache_stats st;
        expert_cache_get_stats(c, &st);
        printf("; cache %d slots, hits %llu, misses %llu, %.2f GB read", st.n_slots,
               (unsigned long long)st.hits, (unsigned long long)st.misses,
               (double)st.bytes_read * 1e-9);
    }
    printf("\n");
}

/* Option a's value v, an integer in [lo, hi], into *out; says why not. Returns 0 or -EINVAL. */
static int parse_count(const char *a, const char *v, long long lo, long long hi, int32_t *out) {
    long long n;
    if (units_parse_int(v, lo, hi, &n) < 0) {
        fprintf(stderr, "bench-gpumodel: %s wants an integer in [%lld, %lld], got \"%s\"\n", a, lo,
                hi, v);
        return -EINVAL;
    }
    *out = (int32_t)n;
    return 0;
}

/* Option a's value v, a size such as 4G (units.h), into *out; says why not. Returns 0 or -EINVAL. */
static int parse_size(const char *a, const char *v, uint64_t *out) {
    if (units_parse_bytes(v, out) < 0) {
        fprintf(stderr, "bench-gpumodel: %s wants a size such as 4G or 512M, got \"%s\"\n", a, v);
        return -EINVAL;
    }
    return 0;
}

/* Option a's value v, a KV type the engine takes, into *out; says why not. Returns 0 or -EINVAL. */
static int parse_kv(const char *a, const char *v, enum qtype *out) {
    *out = engine_kv_type_named(v);
    if (*out == QTYPE_COUNT) {
        fprintf(stderr, "bench-gpumodel: %s \"%s\" is not supported (" ENGINE_KV_TYPE_NAMES ")\n",
                a, v);
        return -EINVAL;
    }
    return 0;
}

/* Option a's value v into o. Returns 0, or -EINVAL for an unknown option or a bad value (said). */
static int parse_opt(const char *a, const char *v, struct opts *o) {
    const long long most = 1 << 24; /* tokens: sniperd's bound */
    if (!strcmp(a, "-m"))
        o->model = v;
    else if (!strcmp(a, "--gpu"))
        o->gpu = v;
    else if (!strcmp(a, "--prompt"))
        return parse_count(a, v, 1, most, &o->prompt);
    else if (!strcmp(a, "--gen"))
        return parse_count(a, v, 0, most, &o->gen);
    else if (!strcmp(a, "--cpu-prompt"))
        return parse_count(a, v, 0, most, &o->cpu_prompt);
    else if (!strcmp(a, "--cpu-gen"))
        return parse_count(a, v, 0, most, &o->cpu_gen);
    else if (!strcmp(a, "--batch"))
        return parse_count(a, v, 1, 4096, &o->batch);
    else if (!strcmp(a, "--threads"))
        return parse_count(a, v, 0, 1024, &o->threads); /* 0: the online CPUs */
    else if (!strcmp(a, "--kv-type"))
        return parse_kv(a, v, &o->kv);
    else if (!strcmp(a, "--gpu-experts"))
        return parse_count(a, v, -1, INT32_MAX, &o->gpu_experts);
    else if (!strcmp(a, "--gpu-transit"))
        return parse_count(a, v, -1, 1, &o->gpu_transit);
    else if (!strcmp(a, "--warmup"))
        return parse_count(a, v, 0, 100, &o->warmup);
    else if (!strcmp(a, "--gpu-budget"))
        return parse_size(a, v, &o->gpu_budget);
    else if (!strcmp(a, "--ram-budget"))
        return parse_size(a, v, &o->ram_budget);
    else {
        fprintf(stderr, "bench-gpumodel: unknown option \"%s\"\n", a);
        return -EINVAL;
    }
    return 0;
}

/* The command line into o (options with a value each but --trace, -m required, the CPU's run
 * within the GPU's; --trace: 16 prompt tokens unless given, no CPU run).
 * Returns 0, or -EINVAL with the reason on stderr. */
static int parse(int argc, char **argv, struct opts *o) {
    *o = (struct opts){.gpu = "auto", .prompt = 512, .gen = 128, .cpu_prompt = 32, .cpu_gen = 8,
                       .batch = 512, .threads = 0, .kv = QTYPE_F16, .warmup = 1};
    bool prompt_set = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trace")) { /* the one option without a value */
            o->trace = true;
            continue;
        }
        if (i + 1 == argc) {
            fprintf(stderr, "bench-gpumodel: \"%s\" wants a value\n", argv[i]);
            return -EINVAL;
        }
        prompt_set |= !strcmp(argv[i], "--prompt");
        if (parse_opt(argv[i], argv[i + 1], o) < 0)
            return -EINVAL;
        i++;
    }
    if (!o->model) {
        fprintf(stderr, "bench-gpumodel: -m MODEL is required\n");
        return -EINVAL;
    }
    if (o->trace && !prompt_set)
        o->prompt = 16;
    if (o->trace) /* the trace's comparison takes the place of the CPU's run */
        o->cpu_prompt = o->cpu_gen = 0;
    if (o->cpu_prompt > o->prompt || o->cpu_gen > o->gen) {
        fprintf(stderr, "bench-gpumodel: the CPU's run (--cpu-prompt %d, --cpu-gen %d) must be "
                        "within the GPU's (--prompt %d, --gen %d)\n", o->cpu_prompt, o->cpu_gen,
                o->prompt, o->gen);
        return -EINVAL;
    }
    return 0;
}

/* Rows of n_vocab floats among a and b's n that differ in any bit. */
static int32_t rows_differ(const float *a, const float *b, int32_t n, int32_t V) {
    int32_t bad = 0;
    for (int32_t r = 0; r < n; r++)
        bad += memcmp(a + (size_t)r * V, b + (size_t)r * V, (size_t)V * sizeof(float)) != 0;
    return bad;
}

/* --trace: the prompt's n ids on a CPU engine and on a GPU one, each with its per-op trace
 * recorded, compared op by op and the logits row by row; then the GPU's run again without the
 * trace. Returns 0 (nothing differs), 3 (something does) or 1 (a run or an allocation failed). */
static int run_trace(const struct model *m, struct gpu *g, const struct opts *o,
                     const int32_t *ids) {
    const int32_t n = o->prompt, V = m->hp.n_vocab;
    struct expert_cache *cc = NULL, *ce = NULL;
    struct engine *c = make_engine(m, o, &cc), *e = c ? make_engine(m, o, &ce) : NULL;
    struct op_trace *tc = op_trace_new(), *tg = op_trace_new();
    float *lc = calloc((size_t)n * (size_t)V, sizeof(float));
    float *lg = calloc((size_t)n * (size_t)V, sizeof(float));
    char err[512] = "";
    int status = 1;
    if (!e || !tc || !tg || !lc || !lg)
        goto out;
    if (engine_use_gpu(e, g, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench-gpumodel: %s\n", err);
        goto out;
    }
    engine_set_trace(c, op_trace_record, tc);
    engine_set_trace(e, op_trace_record, tg);
    if (engine_eval(c, 0, ids, n, lc, true) < 0 || engine_eval(e, 0, ids, n, lg, true) < 0) {
        fprintf(stderr, "bench-gpumodel: the traced run failed\n");
        goto out;
    }
    struct op_trace_diff d;
    const int rc = op_trace_compare(tc, tg, &d);
    if (rc < 0) {
        fprintf(stderr, "bench-gpumodel: out of memory recording the trace\n");
        goto out;
    }
    op_trace_report(&d, tc, tg, stdout);
    const int32_t bad = rows_differ(lc, lg, n, V);
    printf("logits: %d of %d rows differ between the GPU and the CPU%s\n", bad, n,
           bad ? "" : " (same bits)");
    engine_set_trace(e, NULL, NULL);
    engine_truncate(e, 0, 0);
    if (engine_eval(e, 0, ids, n, lg, true) < 0) {
        fprintf(stderr, "bench-gpumodel: the untraced run failed\n");
        goto out;
    }
    const int32_t bad_free = rows_differ(lc, lg, n, V);
    printf("logits without the trace: %d of %d rows differ%s\n", bad_free, n,
           bad_free && !rc && !bad ? " (the trace's waits hide it: an op reads rows that no "
                                     "barrier orders after their writer)" : "");
    status = rc || bad || bad_free ? 3 : 0;
out:
    engine_free(c);
    engine_free(e);
    expert_cache_free(cc);
    expert_cache_free(ce);
    op_trace_free(tc);
    op_trace_free(tg);
    free(lc);
    free(lg);
    return status;
}

int main(int argc, char **argv) {
    struct opts o;
    char err[512] = "", desc[1024];
    if (parse(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: bench-gpumodel -m MODEL [--gpu N] [--prompt N] [--gen N] "
                        "[--threads T] [--batch B] [--cpu-prompt N] [--cpu-gen N] "
                        "[--kv-type f16|f32|q8_0|q4_0] [--gpu-budget SIZE] [--gpu-experts N] "
                        "[--gpu-transit -1|0|1] [--ram-budget SIZE] [--warmup N] "
                        "[--trace]\n");
        return 2;
    }
    double t0 = now_s();
    struct model *m = model_open(o.model, o.ram_budget > 0, err, sizeof(err));
    if (!m) {
        fprintf(stderr, "bench-gpumodel: %s\n", err);
        return 1;
    }
    printf("model: %s, %.2f GB read in %.1f s\n", o.model, (double)m->resident_bytes * 1e-9,
           now_s() - t0);
    int idx = gpu_choose(o.gpu, err, sizeof(err));
    struct gpu *g = idx >= 0 ? gpu_open(idx, o.gpu_budget, err, sizeof(err)) : NULL;
    if (!g) {
        fprintf(stderr, "bench-gpumodel: %s\n", err[0] ? err : "no device");
        model_free(m);
        return 1;
    }
    const struct gpu_info *in = gpu_get_info(g);
    printf("device: %s (%s); %s\n", in->name, in->driver, gpu_describe(g, desc, sizeof(desc)));
    const int32_t V = m->hp.n_vocab;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)o.prompt);
    struct run rg = {0}, rc = {0};
    rg.rows = calloc((size_t)(o.gen + 1) * (size_t)V, sizeof(float));
    rc.rows = calloc((size_t)(o.cpu_gen + 1) * (size_t)V, sizeof(float));
    uint64_t x = 42;
    for (int32_t i = 0; ids && i < o.prompt; i++) { /* xorshift ids over the vocabulary */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)V);
    }
    struct expert_cache *ce = NULL, *cc = NULL;
    struct engine *e = NULL;
    int status = 1;
    if (!ids || !rg.rows || !rc.rows) {
        fprintf(stderr, "bench-gpumodel: no memory for the ids and logits rows of %d + %d tokens\n",
                o.prompt, o.gen);
        goto out;
    }
    if (o.trace) {
        status = run_trace(m, g, &o, ids);
        goto out;
    }
    e = make_engine(m, &o, &ce);
    if (!e)
        goto out;
    t0 = now_s();
    if (engine_use_gpu(e, g, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench-gpumodel: %s\n", err);
        goto out;
    }
    size_t wb, kvb, ab;
    engine_gpu_bytes(e, &wb, &kvb, &ab);
    double up = now_s() - t0;
    printf("upload: %.2f GB of weights in %.2f s (%.1f GB/s); KV %.1f MiB, activations %.1f MiB\n",
           (double)wb * 1e-9, up, (double)wb / up * 1e-9, (double)kvb / 1048576.0,
           (double)ab / 1048576.0);
    for (int32_t w = 0; w < o.warmup; w++) { /* pipelines made, clocks up; the rows rewritten */
        if (run_engine(e, ids, o.prompt, o.gen, V, &rg) < 0) {
            fprintf(stderr, "bench-gpumodel: the GPU's warm-up run failed\n");
            goto out;
        }
        engine_truncate(e, 0, 0);
    }
    if (run_engine(e, ids, o.prompt, o.gen, V, &rg) < 0) {
        fprintf(stderr, "bench-gpumodel: the GPU's run failed\n");
        goto out;
    }
    if (getenv("SNIPER_GPU_PROFILE")) { /* prefill and decode apart */
        struct run rp = {.rows = rg.rows};
        engine_truncate(e, 0, 0);
        engine_gpu_profile(e, stdout); /* drops the first run's */
        if (run_engine(e, ids, o.prompt, 0, V, &rp) == 0) {
            printf("gpu profile, prefill of %d tokens:\n", o.prompt);
            engine_gpu_profile(e, stdout);
        }
        engine_truncate(e, 0, 0);
        if (run_engine(e, ids, 1, o.gen, V, &rp) == 0) {
            printf("gpu profile, 1 token then %d decode steps:\n", o.gen);
            engine_gpu_profile(e, stdout);
        }
    }
    printf("gpu: prefill %d tokens in %.3f s (%.1f tok/s), decode %d tokens in %.3f s "
           "(%.2f tok/s, %.2f ms/token)\n", o.prompt, rg.prefill_s, o.prompt / rg.prefill_s,
           o.gen, rg.decode_s, o.gen / rg.decode_s, rg.decode_s * 1e3 / (o.gen ? o.gen : 1));
    const double wpt = decode_weight_bytes(m);
    printf("decode reads %.3f GB of weights a token (the routed experts' %d of %d): %.0f GB/s of "
           "them at that speed\n", wpt * 1e-9, m->hp.n_expert_used, m->hp.n_expert,
           o.gen && rg.decode_s > 0 ? wpt * o.gen / rg.decode_s * 1e-9 : 0.0);
    if (m->hp.n_expert > 0)
        print_experts(e, ce);
    status = 0;
    if (o.cpu_prompt > 0) { /* the CPU's run of the first ids, and the GPU's again to compare */
        struct engine *c = make_engine(m, &o, &cc);
        struct run rg2 = {.rows = calloc((size_t)(o.cpu_gen + 1) * (size_t)V, sizeof(float))};
        engine_truncate(e, 0, 0);
        if (!c || !rg2.rows || run_engine(c, ids, o.cpu_prompt, o.cpu_gen, V, &rc) < 0 ||
            run_engine(e, ids, o.cpu_prompt, o.cpu_gen, V, &rg2) < 0) {
            fprintf(stderr, "bench-gpumodel: the comparison run failed\n");
            status = 1;
        } else {
            int32_t bad = 0;
            for (int32_t r = 0; r <= o.cpu_gen; r++)
                bad += memcmp(rc.rows + (size_t)r * V, rg2.rows + (size_t)r * V,
                              (size_t)V * sizeof(float)) != 0;
            printf("cpu: prefill %d tokens in %.3f s (%.1f tok/s), decode %d tokens in %.3f s "
                   "(%.2f tok/s), %d threads\n", o.cpu_prompt, rc.prefill_s,
                   o.cpu_prompt / rc.prefill_s, o.cpu_gen, rc.decode_s,
                   o.cpu_gen / (rc.decode_s > 0 ? rc.decode_s : 1), engine_n_threads(c));
            printf("logits: %d of %d rows differ between the GPU and the CPU%s\n", bad,
                   o.cpu_gen + 1, bad ? "" : " (same bits)");
            status = bad ? 3 : 0;
        }
        free(rg2.rows);
        engine_free(c);
        expert_cache_free(cc);
    }
out:
    engine_free(e);
    expert_cache_free(ce);
    gpu_close(g);
    model_free(m);
    free(ids);
    free(rg.rows);
    free(rc.rows);
    return status;
}
