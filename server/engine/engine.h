/* engine.h - runs a loaded model: the KV cache of one sequence, scratch buffers sized once at
 * creation, the thread pool, and the forward pass of qwen3moe / qwen3 / llama.
 *
 *     struct engine_params ep = engine_params_default();
 *     ep.n_ctx = 4096; ep.kv_type = QTYPE_F32;
 *     struct engine *e = engine_new(m, &ep, err, sizeof(err));
 *     engine_eval(e, prompt, n_prompt, logits_all, true);   // logits for every prompt token
 *     engine_eval(e, &next, 1, logits, false);              // one decode step
 *     engine_free(e);
 *
 * engine_eval does not allocate: every buffer is sized in engine_new for n_batch tokens. */
#ifndef SNIPER_ENGINE_H
#define SNIPER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Next-layer lookahead for moe models under a RAM budget. Measured on the generated 30B model
 * (docs/benchmarks.md): in prefill steps the guesses for a batch are 84% right and prefill gains
 * 15%; in decode half are wrong and the extra reads cost more than the overlap wins. A dense
 * model's next FFN, a sure guess, is always read ahead. */
enum engine_prefetch {
    ENGINE_PREFETCH_PREFILL, /* steps of more than one token (the default) */
    ENGINE_PREFETCH_OFF,
    ENGINE_PREFETCH_ALWAYS,
};

struct engine_params {
    int n_threads;      /* <= 0: the online CPUs */
    int32_t n_ctx;      /* KV cache positions; <= 0: min(model's context, 4096) */
    int32_t n_batch;    /* tokens per forward step in prefill (default 512: more tokens share each
                         * routed expert, and under a RAM budget an expert is read once a step) */
    enum qtype kv_type; /* QTYPE_F32 or QTYPE_F16 (default) */
    enum engine_prefetch prefetch; /* with an expert cache (moe): when to read the next layer's
                                    * guessed experts ahead; the outputs are the same either way */
    /* Lossy speed-ups, off by default (quality cost in docs/benchmarks.md): */
    int32_t moe_top_k;  /* experts per token, 1 .. the model's; 0: the model's (exact) */
    float cache_bias;   /* with an expert cache, 0 < R <= 1: a selected expert that is not
                         * resident gives its place to the most probable resident one outside the
                         * selection whose probability is at least R times its own; 0: off */
};

struct engine_params engine_params_default(void);

/* Creates an engine for m (borrowed: it must outlive the engine). Returns it or NULL with a message
 * in err (bad parameters, a weight type without kernels, out of memory). */
struct engine *engine_new(const struct model *m, const struct engine_params *p, char *err,
                          size_t err_len);

void engine_free(struct engine *e);

/* Feeds n tokens at positions n_past .. n_past+n-1 and appends them to the KV cache. With
 * all_logits, logits receives [n][n_vocab] rows (one per token); otherwise [n_vocab] for the last
 * token only; logits may be NULL when no row is wanted. Returns 0, -ENOSPC when the context would
 * overflow (nothing is changed then), -EINVAL for a token id out of range, or an expert read error
 * (-EIO ...; the cache keeps n_past, the request fails, the engine stays usable). */
int engine_eval(struct engine *e, const int32_t *tokens, int32_t n, float *logits, bool all_logits);

/* Tokens in the KV cache. */
int32_t engine_n_past(const struct engine *e);
int32_t engine_n_ctx(const struct engine *e);
int engine_n_threads(const struct engine *e);
int32_t engine_n_batch(const struct engine *e);

struct expert_cache;

/* Routed experts (a dense model's FFN matrices) come from cache c from now on (borrowed; NULL: from
 * the model's image). The model must have been opened with experts on disk for a cache to save
 * RAM. */
void engine_set_experts(struct engine *e, struct expert_cache *c);

/* fn(ctx, il, ids, n) is told, for each step and moe layer, the experts the batch routed to
 * (ascending ids), before they are fetched: what cache policies are simulated on. NULL: nobody. */
typedef void (*engine_route_fn)(void *ctx, int il, const int32_t *ids, int32_t n);
void engine_set_route_observer(struct engine *e, engine_route_fn fn, void *ctx);

/* Forgets positions from n on (n <= n_past), so the cache can be reused for a shared prefix. */
void engine_truncate(struct engine *e, int32_t n);

/* Bytes of the KV cache and of the scratch buffers (for the RAM budget report). */
size_t engine_kv_bytes(const struct engine *e);
size_t engine_scratch_bytes(const struct engine *e);

/* ---- KV cache access (contexts: server/context) ------------------------------------------------
 * Layer il's cache holds, for positions 0 .. n_ctx-1, one K row and one V row of kv_dim elements of
 * the cache's type (row_bytes each). Export copies rows out; import writes rows in, then
 * engine_kv_commit says how many positions are valid. Typical import:
 *     engine_truncate(e, 0);
 *     for (il ...) engine_kv_import(e, il, shape.type, shape.kv_dim, n, k_rows, v_rows);
 *     engine_kv_commit(e, n); */
struct engine_kv_shape {
    enum qtype type;   /* QTYPE_F32, QTYPE_F16, QTYPE_Q8_0 or QTYPE_Q4_0 */
    int32_t n_layer;
    int32_t kv_dim;    /* elements per row (n_head_kv * head_dim) */
    int32_t n_ctx;     /* positions the cache holds */
    size_t row_bytes;  /* bytes of one row of kv_dim elements of type */
};

/* The cache's type and shape. */
struct engine_kv_shape engine_kv_shape(const struct engine *e);

/* Copies positions 0 .. n-1 of layer il into k and v (each n * row_bytes, either may be NULL).
 * Returns 0, or -EINVAL when il is out of range or n is not in 0 .. n_past. */
int engine_kv_export(const struct engine *e, int32_t il, int32_t n, void *k, void *v);

/* Writes positions 0 .. n-1 of layer il from k and v (each n * row_bytes of type, borrowed for the
 * call). The positions hold other rows now, so n_past drops to 0 until engine_kv_commit. Returns 0,
 * or -EINVAL when type or kv_dim differ from the cache's, il is out of range or n > n_ctx. */
int engine_kv_import(struct engine *e, int32_t il, enum qtype type, int32_t kv_dim, int32_t n,
                     const void *k, const void *v);

/* Declares positions 0 .. n-1 valid (n_past = n) after every layer was imported. Returns 0, or
 * -EINVAL when n is not in 0 .. n_ctx. */
int engine_kv_commit(struct engine *e, int32_t n);

#endif
