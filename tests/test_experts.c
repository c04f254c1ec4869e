/* test_experts.c - the expert cache: with experts on disk and a cache so small that every layer
 * misses and evicts, logits are bit-identical to the all-in-RAM run (prefill and decode); a read
 * fault fails the step cleanly and the next run is exact again; a budget below one layer's experts
 * is refused with the minimum. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "expert_cache.h"
#include "fault.h"
#include "harness.h"
#include "model.h"

static const char *moe_model(void) {
    static char path[1024];
    if (!path[0] && test_make_model(path, sizeof(path), "experts.gguf", "--preset tiny --types q4_k_m --seed 17") < 0)
        path[0] = '\0';
    return path[0] ? path : NULL;
}

enum { N_PROMPT = 40, N_GEN = 8 };

/* Prompt logits (all rows) then N_GEN greedy decode steps' logits, into out. */
static int run(struct model *m, struct expert_cache *c, float *out) {
    char err[256];
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 128;
    ep.n_batch = 16;
    ep.n_threads = 2;
    struct engine *e = engine_new(m, &ep, err, sizeof(err));
    if (!e)
        return -ENOMEM;
    engine_set_experts(e, c);
    const size_t V = (size_t)m->hp.n_vocab;
    int32_t ids[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        ids[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)m->hp.n_vocab);
    int rc = engine_eval(e, ids, N_PROMPT, out, true);
    for (int s = 0; rc == 0 && s < N_GEN; s++) {
        const float *last = out + (size_t)(N_PROMPT - 1 + s) * V;
        int32_t best = 0;
        for (size_t j = 1; j < V; j++)
            if (last[j] > last[best])
                best = (int32_t)j;
        rc = engine_eval(e, &best, 1, out + (size_t)(N_PROMPT + s) * V, false);
    }
    engine_free(e);
    return rc;
}

/* The model opened twice, all in RAM and with experts on disk, and the all-in-RAM logits. */
struct pair {
    struct model *ram, *disk;
    float *want, *got; /* [N_PROMPT + N_GEN][n_vocab] */
    size_t bytes;      /* of want and of got */
};

static bool pair_open(struct pair *p) {
    memset(p, 0, sizeof(*p));
    const char *path = moe_model();
    char err[256] = "";
    if (!path)
        return false;
    p->ram = model_load(path, err, sizeof(err));
    p->disk = model_open(path, true, err, sizeof(err));
    CHECK_MSG(p->ram && p->disk, "%s", err);
    if (!p->ram || !p->disk)
        return false;
    p->bytes = (size_t)(N_PROMPT + N_GEN) * (size_t)p->ram->hp.n_vocab * sizeof(float);
    p->want = malloc(p->bytes);
    p->got = malloc(p->bytes);
    CHECK(p->want && p->got);
    CHECK_EQ_INT(run(p->ram, NULL, p->want), 0);
    return p->want && p->got && test_failures() == 0;
}

static void pair_close(struct pair *p) {
    free(p->want);
    free(p->got);
    model_free(p->ram);
    model_free(p->disk);
}

static void test_streaming_is_exact(void) {
    struct pair p;
    if (!pair_open(&p))
        goto out;
    struct model *disk = p.disk;
    char err[256];
    CHECK(disk->resident_bytes < p.ram->resident_bytes / 2);
    size_t slot = expert_cache_slot_bytes(disk);
    /* the minimum (one layer's experts: every layer evicts) and a cache for half the experts */
    size_t sizes[2] = {slot * (size_t)disk->hp.n_expert,
                       slot * (size_t)disk->hp.n_expert * (size_t)disk->hp.n_layer / 2};
    for (int i = 0; i < 2; i++) {
        struct expert_cache *c = expert_cache_new(disk, sizes[i], 4, err, sizeof(err));
        CHECK_MSG(c != NULL, "%s", err);
        if (!c)
            continue;
        memset(p.got, 0, p.bytes);
        CHECK_EQ_INT(run(disk, c, p.got), 0);
        CHECK_MSG(memcmp(p.want, p.got, p.bytes) == 0,
                  "cache of %zu bytes: logits differ from the all-in-RAM run", sizes[i]);
        struct expert_cache_stats st;
        expert_cache_get_stats(c, &st);
        fprintf(stderr, "  %d slots: hits %llu misses %llu read %llu bytes\n", st.n_slots,
                (unsigned long long)st.hits, (unsigned long long)st.misses,
                (unsigned long long)st.bytes_read);
        CHECK(st.misses > (uint64_t)st.n_slots); /* evictions happened */
        CHECK(st.bytes_read >= st.misses * 3);
        if (i == 1)
            CHECK(st.hits > 0);
        expert_cache_free(c);
    }
out:
    pair_close(&p);
}

/* A failed read fails the step with -EIO and leaves nothing cached that was not read. */
static void test_read_fault(void) {
    struct pair p;
    char err[256];
    if (!pair_open(&p))
        goto out;
    struct expert_cache *c = expert_cache_new(
        p.disk, expert_cache_slot_bytes(p.disk) * (size_t)p.disk->hp.n_expert * 2, 4, err,
        sizeof(err));
    CHECK_MSG(c != NULL, "%s", err);
    if (c) {
        fault_arm(FAULT_READ, 5);
        CHECK_EQ_INT(run(p.disk, c, p.got), -EIO);
        fault_arm(FAULT_READ, 0);
        CHECK_EQ_INT(run(p.disk, c, p.got), 0);
        CHECK(memcmp(p.want, p.got, p.bytes) == 0);
    }
    expert_cache_free(c);
out:
    pair_close(&p);
}

static void test_too_small(void) {
    const char *path = moe_model();
    if (!path)
        return;
    char err[256] = "";
    struct model *disk = model_open(path, true, err, sizeof(err));
    CHECK_MSG(disk != NULL, "%s", err);
    if (!disk)
        return;
    size_t slot = expert_cache_slot_bytes(disk);
    struct expert_cache *c =
        expert_cache_new(disk, slot * (size_t)(disk->hp.n_expert - 1), 4, err, sizeof(err));
    CHECK(c == NULL);
    CHECK_MSG(strstr(err, "at least") != NULL, "message: %s", err);
    expert_cache_free(c);
    model_free(disk);
}

static const struct test_case cases[] = {
    {"streaming_is_exact", test_streaming_is_exact},
    {"read_fault", test_read_fault},
    {"too_small", test_too_small},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
