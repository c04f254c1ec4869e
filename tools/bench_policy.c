/* bench_policy.c - which experts to keep: replays routing against expert-cache eviction policies at
 * several cache sizes and reports what each would have missed in decode. The routing is a route
 * trace (real models' routing, ../shared/fixtures/routing) or a run of a MODEL recorded here;
 * replaying one routing makes the comparison exact and free of the host's noise (misses are what
 * the disk pays for: bytes per token / bandwidth bounds decode under a budget).
 *
 *     build/bench-policy TRACE.csv [--mib N | --slots N]... [--lookahead N]
 *     build/bench-policy TRACE.csv --vram-mib N... [--mib N]...
 *     build/bench-policy MODEL.gguf [--prompt N] [--gen N] [--threads N] [--slots N]... [--mib N]...
 *                        [--write-trace FILE]
 *
 * A run: N pseudo-random prompt ids (as sniperd --bench-prompt) in one batch, then --gen greedy
 * tokens. Policies (tools/route_trace.h): lru, lirs, arc, frecency, belady (the bound); lirs and
 * frecency are the very code sniperd's expert cache runs (server/experts/cache_policy.c).
 * --lookahead N adds oracles: lru and frecency that spare the experts of the next N lookups
 * (N = 1: the next layer's, what a perfect next-layer router guess would protect).
 * --slots N sizes the cache in experts, as the expert cache's slots (one expert of any layer
 * each): a trace's layers then all count the largest layer's bytes (a slot's), so that the table
 * is the one a sniperd --route-replay run of N slots should reproduce.
 * --vram-mib N (repeatable) replays the three levels instead: VRAM slots that N MiB hold (one
 * expert of every layer a slot row), learning as the GPU's do (route_replay_vram), then each
 * --mib RAM cache (and the model wholly in RAM) for what the slots missed. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "expert_cache.h"
#include "model.h"
#include "ops.h"
#include "rng.h"
#include "route_trace.h"

#define MAX_SIZES 16

struct recorder {
    struct route_trace *t;
    bool decode; /* phase of the lookups being recorded */
    int rc;
};

static void record_route(void *ctx, int il, const int32_t *ids, int32_t n) {
    struct recorder *r = ctx;
    int rc = route_trace_add(r->t, il, ids, NULL, n, r->decode);
    if (rc < 0 && r->rc == 0)
        r->rc = rc;
}

/* Runs MODEL (experts on disk through a 4 GiB cache) and records its routing into a new trace with
 * the cache's slot bytes for every layer. Returns the trace, or NULL after a message. */
static struct route_trace *record(const char *path, int32_t n_prompt, int32_t n_gen,
                                  int n_threads) {
    char err[512];
    struct model *m = model_open(path, true, err, sizeof(err));
    if (!m) {
        fprintf(stderr, "bench-policy: %s\n", err);
        return NULL;
    }
    struct recorder rec = {0};
    struct engine *e = NULL;
    struct expert_cache *c = NULL;
    float *logits = NULL;
    int32_t *ids = NULL;
    int rc = -1;
    if (m->hp.n_expert == 0) {
        fprintf(stderr, "bench-policy: '%s' is dense: no routing to record\n", path);
        goto out;
    }
    rec.t = route_trace_new(m->hp.n_layer, m->hp.n_expert, m->hp.n_expert_used,
                            expert_cache_slot_bytes(m));
    struct engine_params ep = engine_params_default();
    ep.n_threads = n_threads;
    ep.n_ctx = n_prompt + n_gen + 1;
    e = rec.t ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    c = e ? expert_cache_new(m, (size_t)4 << 30, NULL, err, sizeof(err)) : NULL;
    logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    ids = malloc(sizeof(int32_t) * (size_t)n_prompt);
    if (!rec.t || !e || !c || !logits || !ids) {
        fprintf(stderr, "bench-policy: %s\n", e && c ? "out of memory" : err);
        goto out;
    }
    engine_set_experts(e, c);
    engine_set_route_observer(e, record_route, &rec);
    rng_bench_ids(ids, n_prompt, m->hp.n_vocab); /* the ids sniperd --bench-prompt uses */
    if ((rc = engine_eval(e, 0, ids, n_prompt, logits, false)) < 0)
        goto fail;
    rec.decode = true;
    for (int32_t g = 0; g < n_gen; g++) {
        int32_t best = ops_argmax(logits, m->hp.n_vocab);
        if ((rc = engine_eval(e, 0, &best, 1, logits, false)) < 0)
            goto fail;
    }
    rc = rec.rc;
fail:
    if (rc < 0)
        fprintf(stderr, "bench-policy: the run failed: %s\n", strerror(-rc));
out:
    free(ids);
    free(logits);
    engine_free(e);
    expert_cache_free(c);
    model_free(m);
    if (rc < 0) {
        route_trace_free(rec.t);
        return NULL;
    }
    return rec.t;
}

/* Gives every layer of t the largest layer's expert bytes: replayed caches then hold a number of
 * experts, as the expert cache's slots do (a recorded run's layers have them already). */
static void slot_sizes(struct route_trace *t) {
    uint64_t most = 0;
    for (int32_t l = 0; l < t->n_layer; l++)
        most = t->expert_bytes[l] > most ? t->expert_bytes[l] : most;
    for (int32_t l = 0; l < t->n_layer; l++)
        t->expert_bytes[l] = most;
}

static bool is_gguf(const char *path) {
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    bool yes = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f)
        fclose(f);
    return yes;
}

/* One row of the table: policy p (an oracle with lookahead) at cache_bytes, and its share of the
 * gap from lru to belady. Returns 0 or the replay's error. */
static int print_row(const struct route_trace *t, enum route_policy p, int lookahead,
                     uint64_t cache_bytes, const struct route_result *lru,
                     const struct route_result *belady) {
    struct route_result r;
    int rc = route_replay(t, p, cache_bytes, lookahead, &r);
    if (rc < 0)
        return rc;
    char name[64];
    snprintf(name, sizeof(name), lookahead ? "%s+next%d (oracle)" : "%s", route_policy_name(p),
             lookahead);
    const double gap = belady->hit_rate - lru->hit_rate;
    char closed[32] = "-";
    if (gap > 1e-9 && (lookahead > 0 || (p != ROUTE_LRU && p != ROUTE_BELADY)))
        snprintf(closed, sizeof(closed), "%.0f%%", 100.0 * (r.hit_rate - lru->hit_rate) / gap);
    printf("| %.0f | %.2f | %s | %.1f | %.1f | %llu | %s |\n", (double)cache_bytes / (1 << 20),
           (double)cache_bytes / (double)route_trace_token_bytes(t), name, 100.0 * r.hit_rate,
           r.bytes_per_token / (1 << 20), (unsigned long long)r.prefill_misses, closed);
    return 0;
}

static int print_table(const struct route_trace *t, const char *what, const uint64_t *sizes,
                       int n_sizes, int lookahead) {
    size_t n_decode = 0;
    for (size_t k = 0; k < t->n_look; k++)
        n_decode += t->look[k].decode;
    printf("routing: %s: %d layers x %d experts, %d a token (%.0f MiB a token, %.0f MiB in all); "
           "%zu prefill and %zu decode lookups, %d decoded tokens\n",
           what, t->n_layer, t->n_expert, t->n_used,
           (double)route_trace_token_bytes(t) / (1 << 20),
           (double)route_trace_all_bytes(t) / (1 << 20), t->n_look - n_decode, n_decode,
           t->n_decode_tokens);
    printf("| MiB | tokens' experts | policy | decode hit %% | decode MiB/token | prefill misses | "
           "lru-to-belady gap closed |\n|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < n_sizes; s++) {
        struct route_result lru, belady;
        int rc = route_replay(t, ROUTE_LRU, sizes[s], 0, &lru);
        if (rc == 0)
            rc = route_replay(t, ROUTE_BELADY, sizes[s], 0, &belady);
        for (int p = 0; rc == 0 && p < ROUTE_POLICY_COUNT; p++)
            rc = print_row(t, (enum route_policy)p, 0, sizes[s], &lru, &belady);
        if (rc == 0 && lookahead > 0)
            rc = print_row(t, ROUTE_LRU, lookahead, sizes[s], &lru, &belady);
        if (rc == 0 && lookahead > 0)
            rc = print_row(t, ROUTE_FRECENCY, lookahead, sizes[s], &lru, &belady);
        if (rc < 0) {
            fprintf(stderr, "bench-policy: %.0f MiB: %s\n", (double)sizes[s] / (1 << 20),
                    rc == -EINVAL ? "fewer bytes than one token's experts of a layer"
                                  : strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* ---- three levels: VRAM slots, then the RAM cache ------------------------------------------- */

/* Bytes of one VRAM slot row: one expert of every layer (a slot of each layer). */
static uint64_t slot_row_bytes(const struct route_trace *t) {
    uint64_t b = 0;
    for (int32_t l = 0; l < t->n_layer; l++)
        b += t->expert_bytes[l];
    return b;
}

/* The three levels' table: for each VRAM size (what the slots may take) and RAM cache size (0: all
 * in RAM), the decode pairs VRAM served, the CPU's RAM cache hit rate (frecency, the expert
 * cache's policy) and what the SSD reads a token. Returns 0 or an error. */
static int print_tiers(const struct route_trace *t, const uint64_t *vram, int n_vram,
                       const uint64_t *ram, int n_ram) {
    const uint64_t row = slot_row_bytes(t);
    printf("| VRAM MiB for slots | slots a layer | VRAM hit %% (decode pairs) | promoted MiB/token "
           "| RAM MiB | RAM hit %% (the CPU's) | VRAM+RAM hit %% | SSD MiB/token |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int v = 0; v < n_vram; v++) {
        const int32_t n_slots = (int32_t)(vram[v] / row < (uint64_t)t->n_expert
                                              ? vram[v] / row : (uint64_t)t->n_expert);
        struct route_trace *cpu = NULL;
        struct route_vram vr;
        int rc = route_replay_vram(t, n_slots, &cpu, &vr);
        if (rc < 0)
            return rc;
        const uint64_t pg = vr.pairs_gpu, pc = vr.pairs_cpu, moved = vr.promoted_bytes;
        const double on_gpu = pg + pc ? (double)pg / (double)(pg + pc) : 0.0;
        for (int r = 0; rc == 0 && r < n_ram; r++) {
            struct route_result res = {0};
            if (ram[r] > 0 && (rc = route_replay(cpu, ROUTE_FRECENCY, ram[r], 0, &res)) < 0)
                break;
            const double ram_hit = ram[r] > 0 ? res.hit_rate : 1.0;
            char mib[32] = "all", hit[32] = "-";
            if (ram[r] > 0)
                snprintf(mib, sizeof(mib), "%.0f", (double)ram[r] / (1 << 20));
            if (pc > 0) /* the CPU looked something up */
                snprintf(hit, sizeof(hit), "%.1f", 100.0 * ram_hit);
            printf("| %.0f | %d | %.1f | %.1f | %s | %s | %.1f | %.1f |\n",
                   (double)vram[v] / (1 << 20), n_slots, 100.0 * on_gpu,
                   t->n_decode_tokens ? (double)moved / (1 << 20) / t->n_decode_tokens : 0.0, mib,
                   hit,
                   100.0 * (on_gpu + (1.0 - on_gpu) * ram_hit),
                   ram[r] > 0 ? res.bytes_per_token / (1 << 20) : 0.0);
        }
        route_trace_free(cpu);
        if (rc < 0) {
            fprintf(stderr, "bench-policy: a RAM cache smaller than one token's experts of a layer\n");
            return rc;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *path = NULL, *write_path = NULL;
    int32_t n_prompt = 64, n_gen = 64, n_slots = 0, slots[MAX_SIZES];
    int n_threads = 2, n_sizes = 0, lookahead = 0;
    uint64_t sizes[MAX_SIZES], vram[MAX_SIZES];
    int n_vram = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--prompt") && has)
            n_prompt = atoi(argv[++i]);
        else if (!strcmp(a, "--gen") && has)
            n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && has)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--slots") && has && n_slots < MAX_SIZES)
            slots[n_slots++] = atoi(argv[++i]);
        else if (!strcmp(a, "--mib") && has && n_sizes + n_slots < MAX_SIZES)
            sizes[n_sizes++] = (uint64_t)strtoull(argv[++i], NULL, 10) << 20;
        else if (!strcmp(a, "--vram-mib") && has && n_vram < MAX_SIZES)
            vram[n_vram++] = (uint64_t)strtoull(argv[++i], NULL, 10) << 20;
        else if (!strcmp(a, "--lookahead") && has)
            lookahead = atoi(argv[++i]);
        else if (!strcmp(a, "--write-trace") && has)
            write_path = argv[++i];
        else if (a[0] != '-' && !path)
            path = a;
        else {
            fprintf(stderr, "usage: bench-policy TRACE.csv|MODEL.gguf [--mib N]... [--slots N]... "
                            "[--vram-mib N]... [--lookahead N] [--prompt N] [--gen N] "
                            "[--threads N] [--write-trace FILE]\n");
            return 2;
        }
    }
    if (!path || n_prompt < 1 || n_gen < 1 || lookahead < 0 || (n_slots > 0 && n_sizes > 0)) {
        fprintf(stderr, "bench-policy: pass a route trace or a moe MODEL, --prompt >= 1, --gen >= 1, "
                        "--lookahead >= 0, and --mib or --slots, not both\n");
        return 2;
    }
    char err[512];
    const bool model = is_gguf(path);
    struct route_trace *t = model ? record(path, n_prompt, n_gen, n_threads)
                                  : route_trace_read(path, err, sizeof(err));
    if (!t) {
        if (!model)
            fprintf(stderr, "bench-policy: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (write_path && (rc = route_trace_write(t, write_path)) < 0)
        fprintf(stderr, "bench-policy: cannot write '%s': %s\n", write_path, strerror(-rc));
    if (n_slots > 0) /* a slot holds an expert of any layer: every layer takes the largest's bytes */
        slot_sizes(t);
    for (int32_t k = 0; k < n_slots; k++)
        sizes[n_sizes++] = (uint64_t)(slots[k] > 0 ? slots[k] : 0) * t->expert_bytes[0];
    if (rc == 0 && n_vram > 0) { /* three levels: the VRAM sizes against each --mib RAM size */
        uint64_t ram[MAX_SIZES + 1];
        int n_ram = 0;
        ram[n_ram++] = 0;
        for (int k = 0; k < n_sizes; k++)
            ram[n_ram++] = sizes[k];
        printf("routing: %s: %d layers x %d experts, %d a token; VRAM slots, then the RAM cache\n",
               path, t->n_layer, t->n_expert, t->n_used);
        rc = print_tiers(t, vram, n_vram, ram, n_ram);
        route_trace_free(t);
        return rc == 0 ? 0 : 1;
    }
    if (n_sizes == 0) { /* 500 MiB up to 4000 MiB, and a third of all experts */
        const uint64_t third = route_trace_all_bytes(t) / 3;
        for (uint64_t mib = 500; mib <= 4000 && ((uint64_t)mib << 20) < third; mib *= 2)
            sizes[n_sizes++] = mib << 20;
        sizes[n_sizes++] = third;
    }
    if (rc == 0) {
        char what[600];
        if (model)
            snprintf(what, sizeof(what), "%s, prompt %d + %d generated (recorded)", path, n_prompt,
                     n_gen);
        else
            snprintf(what, sizeof(what), "%s%s", path,
                     n_slots > 0 ? " (in slots: every expert at the largest layer's bytes)" : "");
        rc = print_table(t, what, sizes, n_sizes, lookahead);
    }
    route_trace_free(t);
    return rc == 0 ? 0 : 1;
}
