/* budget.h - a RAM budget split: what a model's engine already holds (the resident weights, KV
 * cache, recurrent state, buffers) and the expert cache that gets the rest, so that the process
 * stays under a cap of resident memory.
 *
 *     if (budget_check(m, &ep, 4ull << 30, err, len) < 0) ... err: the sizes, what would fit ...
 *     struct engine *e = engine_new(m, &ep, err, len);     // only once the budget holds it
 *     struct expert_cache *c = budget_cache_new(m, e, 4ull << 30, &opts, stderr, err, len);
 *     if (!c) ... err names the minimum budget ...
 *     engine_set_experts(e, c);   // done by budget_cache_new
 * The check comes before the engine's memory is touched: a budget too small for the slots is
 * refused with the sizes, never overrun (the KV caches, recurrent states and checkpoints of every
 * slot are allocated and touched at once by engine_new).
 */
#ifndef SNIPER_BUDGET_H
#define SNIPER_BUDGET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "expert_cache.h"
#include "model.h"

/* Headroom kept under a cap for the sampler, stdio and allocator slack. */
#define BUDGET_MARGIN (32u << 20)

/* What a refusal's suggestion ("what fits") leaves spare: the resident set at the check moves by
 * a MiB or so between two starts of the same command (the pages the loader and the allocator
 * touch), and what it names must still fit at the next start (budget.sh failed once on 119
 * against 120 MiB). */
#define BUDGET_RSS_JITTER (2u << 20)

/* Checks, before engine_new(m, p) allocates anything, that the budget cap (bytes) holds the
 * process's resident set now (m's resident weights in it) plus everything the engine would
 * allocate and touch (engine_size: the KV caches, recurrent states and checkpoints of all
 * p->n_seq slots, the buffers), BUDGET_MARGIN and, when m's experts are on disk, the smallest
 * expert cache (one token's experts of a layer). Returns 0 when they fit; -ENOMEM when not, with
 * a message in err that says "is too small", gives the sizes and "the minimum is N MiB", and
 * names the most slots (--parallel) and, for a model with checkpoints, the most checkpoints a
 * slot (--checkpoints) that would fit; or engine_size's error for parameters the engine refuses. */
int budget_check(const struct model *m, const struct engine_params *p, uint64_t cap, char *err,
                 size_t err_len);

/* Creates the expert cache for m's engine e so that the process's resident set stays under cap
 * bytes: the cache gets cap minus the resident set now (everything e and the rest of the process
 * already hold, its whole KV cache included) minus BUDGET_MARGIN, and is handed to e
 * (engine_set_experts), where it also takes the KV pages the sequences do not use yet and gives
 * them back as the sequences grow. m must have been opened with its experts on disk. Prints the
 * split on log (may be NULL). Returns the cache (the caller frees it after the engine), or NULL
 * with a message in err: the cap cannot hold one token's experts of a layer (the message names
 * the minimum), or the cache failed. */
struct expert_cache *budget_cache_new(const struct model *m, struct engine *e, uint64_t cap,
                                      const struct expert_cache_options *o, FILE *log, char *err,
                                      size_t err_len);

/* About the bytes a model would take in RAM with an engine of parameters p, from its header g
 * alone: its tensors, the KV caches of p->n_seq sequences of p->n_ctx positions (a sliding-window
 * layer as its ring), their recurrent states and checkpoints, and the engine's buffers. Returns 0
 * when the hyperparameters cannot be read. */
uint64_t budget_estimate(const struct gguf *g, const struct engine_params *p);

/* Prints the engine's own memory on log: what the context size, KV type, slots and
 * n_checkpoints (models with recurrent or sliding-window layers) cost. */
void budget_print_memory(const struct engine *e, int32_t n_checkpoints, FILE *log);

/* Places e's steps on GPU g (engine_use_gpu) and says on log what went where ("gpu: weights
 * N MiB, KV N MiB, activations N MiB of the device's memory", and with experts on three levels
 * how many of a layer's routed experts are in VRAM and where the others are computed), or why the
 * model stays on the CPU.
 * g NULL: nothing. Returns true when the steps run on the GPU. */
struct gpu;
bool budget_place_gpu(struct engine *e, struct gpu *g, FILE *log);

#endif
