/* engine.h - runs a loaded model: n_seq sequences (parallel slots), each with its own state (KV
 * cache, recurrent state, checkpoints: sequence.h), scratch buffers sized once at creation, the
 * thread pool, and the forward pass of every architecture model.h loads (the blocks each layer
 * names; engine_impl.h).
 *
 *     struct engine_params ep = engine_params_default();
 *     ep.n_ctx = 4096; ep.kv_type = QTYPE_F32; ep.n_seq = 2;
 *     struct engine *e = engine_new(m, &ep, err, sizeof(err));
 *     engine_eval(e, 0, prompt, n_prompt, logits_all, true);  // sequence 0: every prompt row
 *     struct engine_part parts[2] = {{.seq = 0, .tokens = &next0, .n = 1, .logits = l0},
 *                                    {.seq = 1, .tokens = &next1, .n = 1, .logits = l1}};
 *     engine_eval_batch(e, parts, 2);   // one step decodes both: every weight is read once
 *     engine_free(e);
 *
 * A token's logits do not depend on the batch it ran in nor on the other sequences in it.
 * engine_eval does not allocate: every buffer is sized in engine_new for n_batch tokens. */
#ifndef SNIPER_ENGINE_H
#define SNIPER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* Next-layer lookahead for moe models under a RAM budget. Measured on the generated 30B model
 * (docs/benchmarks.md): in prefill steps the guesses for a batch are 84% right and prefill gains
 * 15%; in decode half are wrong and the extra reads cost more than the overlap wins. A dense
 * model's next FFN, a sure guess, is always read ahead. */
enum engine_prefetch {
    ENGINE_PREFETCH_PREFILL, /* steps that read a prompt chunk, not only decode tokens (default) */
    ENGINE_PREFETCH_OFF,
    ENGINE_PREFETCH_ALWAYS,
};

struct engine_params {
    int n_threads;      /* <= 0: the online CPUs */
    int32_t n_ctx;      /* KV cache positions; <= 0: min(model's context, 4096) */
    int32_t n_batch;    /* tokens per forward step in prefill (default 512: more tokens share each
                         * routed expert, and under a RAM budget an expert is read once a step) */
    enum qtype kv_type; /* QTYPE_F16 (default), QTYPE_F32, QTYPE_Q8_0 or QTYPE_Q4_0 */
    enum engine_prefetch prefetch; /* with an expert cache (moe): when to read the next layer's
                                    * guessed experts ahead; the outputs are the same either way */
    /* Lossy speed-ups, off by default (quality cost in docs/benchmarks.md): */
    int32_t moe_top_k;  /* experts per token, 1 .. the model's; 0: the model's (exact) */
    float cache_bias;   /* with an expert cache, 0 < R <= 1: a selected expert that is not
                         * resident gives its place to the most probable resident one outside the
                         * selection whose probability is at least R times its own; 0: off */
    /* Recurrent models (a state that cannot be cut back) keep checkpoints of it: */
    int32_t n_checkpoints;    /* kept at once, 1 .. 64 (default 4) */
    int32_t checkpoint_every; /* also save one at every multiple of this position (default 512;
                               * 0: only where engine_checkpoint is called) */
    int32_t n_seq;      /* sequences (parallel slots), 1 .. ENGINE_MAX_SEQ (default 1); each has
                         * its own KV cache of n_ctx positions and recurrent state */
    int32_t gpu_expert_slots; /* on a GPU (engine_use_gpu), routed experts a MoE layer holds in
                               * VRAM at most: 0 (default) as many as the device's budget leaves
                               * room for, -1 none; the others are computed on the CPU */
    int32_t gpu_transit;      /* with experts on three levels, a batch's missed experts uploaded
                               * for its step and computed on the GPU (issue 27): 0 (default)
                               * where the measured upload and CPU speeds say it is faster, 1
                               * every one with two pairs or more (tests), -1 never */
};

#define ENGINE_MAX_SEQ 64

struct engine_params engine_params_default(void);

/* The KV types engine_params.kv_type takes, by the names command lines and messages use. */
#define ENGINE_KV_TYPE_NAMES "f32, f16, q8_0, q4_0"

/* The KV type called name ("f32", "f16", "q8_0", "q4_0": qtype_name's), or QTYPE_COUNT where name
 * names no type the engine keeps K and V rows in. */
enum qtype engine_kv_type_named(const char *name);

/* Creates an engine for m (borrowed: it must outlive the engine). Returns it or NULL with a message
 * in err (bad parameters, a weight type without kernels, out of memory). */
struct engine *engine_new(const struct model *m, const struct engine_params *p, char *err,
                          size_t err_len);

void engine_free(struct engine *e);

/* What engine_new(m, p) would allocate, in bytes, for all its sequences: what a RAM budget checks
 * before anything is allocated. The parameters' defaults are filled as engine_new fills them
 * (n_threads <= 0: the online CPUs). */
struct engine_size {
    int32_t n_seq;          /* sequences (slots) */
    int32_t n_ctx;          /* positions of each */
    int32_t n_checkpoints;  /* checkpoints each keeps (0: the model needs none) */
    size_t seq_kv_bytes;    /* one sequence's KV cache (full layers' n_ctx rows, window rings) */
    size_t seq_rec_bytes;   /* one sequence's recurrent state and checkpoints */
    size_t kv_bytes;        /* n_seq * seq_kv_bytes: engine_kv_bytes */
    size_t rec_bytes;       /* n_seq * seq_rec_bytes: engine_rec_bytes */
    size_t scratch_bytes;   /* the buffers: engine_scratch_bytes */
};

/* Fills out for an engine of m (borrowed for the call) with parameters p (NULL: the defaults),
 * allocating none of it. Returns 0, or -EINVAL (parameters engine_new refuses: the message in
 * err), -EOVERFLOW or -ENOMEM. */
int engine_size(const struct model *m, const struct engine_params *p, struct engine_size *out,
                char *err, size_t err_len);

/* One sequence's share of engine_eval_batch: n tokens fed at positions n_past .. n_past+n-1 of
 * sequence seq. With all_logits, logits receives [n][n_vocab] rows (one per token); otherwise
 * [n_vocab] for the last token only; logits may be NULL when no row is wanted. */
struct engine_part {
    int32_t seq;
    const int32_t *tokens;
    int32_t n;
    float *logits;
    bool all_logits;
};

/* Feeds every part (each sequence at most once) in steps of at most n_batch tokens that mix the
 * parts: one step reads each weight once for all of them, and under a RAM budget looks up the
 * union of their experts once. Returns 0; -ENOSPC when a sequence would overflow its context,
 * -EINVAL for a token id out of range, a sequence out of range or repeated (nothing is changed
 * then); or a step's failure: an expert read error (-EIO ...), or a product the step could not
 * run (-ENOTSUP: no quantize path for a weight's activations; -ENOSPC from a step: its job queue
 * full; both are bugs, never input). Then tokens of earlier steps stay fed, the failed step's
 * sequences end at their n_past, or for a recurrent model at its newest checkpoint (see
 * engine_n_past), no logits row of that step is valid, and the engine stays usable. */
int engine_eval_batch(struct engine *e, const struct engine_part *parts, int n_parts);

/* engine_eval_batch of one part: n tokens of sequence seq. */
int engine_eval(struct engine *e, int32_t seq, const int32_t *tokens, int32_t n, float *logits,
                bool all_logits);

/* Tokens in sequence seq's KV cache. */
int32_t engine_n_past(const struct engine *e, int32_t seq);
int32_t engine_n_seq(const struct engine *e);
int32_t engine_n_ctx(const struct engine *e);
int engine_n_threads(const struct engine *e);
int32_t engine_n_batch(const struct engine *e);

struct expert_cache;
struct contention;

/* The contention monitor of e's thread pool (threadpool_contention): give it to e's expert cache
 * (expert_cache_options.contention) so that the reads' waits and the pool's see one machine.
 * Borrowed; it lives as long as e (the cache may still be freed after e: that does not use it). */
struct contention *engine_contention(struct engine *e);

/* Routed experts (a dense model's FFN matrices) come from cache c from now on (borrowed; NULL: from
 * the model's image). The model must have been opened with experts on disk for a cache to save
 * RAM. The cache's bytes now and the KV pages now become one room the two share: the sequences'
 * full attention layers give back their pages past the positions in use, and from then on the
 * cache grows into what they give back (up to its grow_bytes) and shrinks, before a step writes
 * new rows, by what they take. */
void engine_set_experts(struct engine *e, struct expert_cache *c);

/* fn(ctx, il, ids, n) is told, for each step and moe layer, the experts the batch routed to
 * (ascending ids), before they are fetched: what cache policies are simulated on. NULL: nobody. */
typedef void (*engine_route_fn)(void *ctx, int il, const int32_t *ids, int32_t n);
void engine_set_route_observer(struct engine *e, engine_route_fn fn, void *ctx);

/* The per-op trace (bench-gpumodel --trace, tools/op_trace.h): fn(ctx, il, op, rows, n_rows, n,
 * stride) is told, at named points of every step on either backend (the CPU's blocks and the
 * Vulkan backend alike: "q_norm", "attn_out", "moe_out", ...), the rows an op left: n_rows rows
 * (the step's tokens, or its (token, expert) pairs) of n floats, stride floats apart, borrowed for
 * the call; il is the layer, -1 outside the layers (the embeddings, the logits before and after
 * the soft-capping). On the GPU each point ends the recording, waits and reads the rows back:
 * slow, for finding the first op whose bits differ. NULL: off, no cost. */
typedef void (*engine_trace_fn)(void *ctx, int il, const char *op, const float *rows,
                                int32_t n_rows, int64_t n, size_t stride);
void engine_set_trace(struct engine *e, engine_trace_fn fn, void *ctx);

/* Benchmarks only (sniperd --route-replay): from now on each moe layer's experts come from r
 * (replay.h; borrowed, it must outlive its use by e) instead of the model's router, the model's
 * own filling where the trace routes fewer than k_used; the logits become meaningless. The cache,
 * reads, prefetch (the model's routers' guesses) and statistics run as usual. NULL: the model's
 * routing again. */
struct replay;
void engine_set_route_replay(struct engine *e, struct replay *r);

/* ---- the GPU (engine v3's Vulkan backend: backend_vulkan.c) ----------------------------------- */
struct gpu;

/* From now on the steps run on g (gpu.h; borrowed: it must outlive the engine): the weights are
 * uploaded, and every sequence's K and V rows live in g's memory (each sequence starts empty).
 * Routed experts that the budget (or p.gpu_expert_slots) leaves out of VRAM, or that stream from
 * disk through an expert cache (engine_set_experts first), are computed on the CPU, layer by
 * layer (engine_gpu_experts). The logits are the CPU's bit for bit, wherever an expert was
 * computed. Returns 0, or a negative error with a message, the engine staying on the CPU:
 * -ENOTSUP for what the backend does not take yet (the message names it: gemma4, replayed
 * routing, a dense FFN streamed from disk, experts on disk without an expert cache, a weight type
 * without kernels), -ENOMEM when even the part that must be in VRAM passes g's budget, -EIO when
 * the device failed. A device lost later fails the step it happens in (-EIO): the engine then
 * drops the GPU, every sequence starts over, and later steps run on the CPU. */
int engine_use_gpu(struct engine *e, struct gpu *g, char *err, size_t err_len);

/* True while the steps run on a GPU. */
bool engine_on_gpu(const struct engine *e);

/* With $SNIPER_GPU_PROFILE=1 at engine_use_gpu, each op kind's device time since the last call
 * (timestamps at the barriers) on out, then starts over; nothing on the CPU. */
void engine_gpu_profile(struct engine *e, FILE *out);

/* Device bytes of the weights, the sequences' K and V rows and the activations (0 on the CPU). */
void engine_gpu_bytes(const struct engine *e, size_t *weights, size_t *kv, size_t *act);

/* Where the routed experts are on the GPU: n_slots of each MoE layer's n_expert in VRAM
 * (slot_bytes, part of engine_gpu_bytes' weights); with exchange, per MoE layer the others are
 * computed on the CPU (from the model image, or with cached through the expert cache), pairs_gpu
 * and pairs_cpu the (token, expert) pairs each side computed so far, hits and misses a layer's
 * distinct experts found in a VRAM slot or not (as the RAM cache counts its lookups), promotions
 * the experts the slots took in since (they learn: frecency); transit_experts and transit_pairs
 * the missed experts a batch's step uploaded (engine_params.gpu_transit) and their pairs, part
 * of pairs_gpu. n_slots 0 on the CPU. */
struct engine_gpu_experts {
    int32_t n_expert, n_slots;
    bool exchange, cached;
    bool in_place; /* unified memory: every routed expert computed by the GPU in the expert
                    * cache's slots (n_slots 0: no VRAM slots; pairs_gpu counts them all) */
    size_t slot_bytes;
    uint64_t pairs_gpu, pairs_cpu;
    uint64_t hits, misses, promotions;
    uint64_t transit_experts, transit_pairs;
};
void engine_gpu_experts(const struct engine *e, struct engine_gpu_experts *out);

/* Cuts sequence seq back to at most n tokens, so a shared prefix can be reused, and returns its
 * new length: n for a model with only full attention layers, or with sliding-window layers whose
 * rings still hold the window before n; otherwise (a recurrent state, a ring that has moved on)
 * the newest checkpoint at or before n (0 when there is none). n >= n_past changes nothing. */
int32_t engine_truncate(struct engine *e, int32_t seq, int32_t n);

/* What engine_truncate(e, seq, n) would return, changing nothing. */
int32_t engine_reusable(const struct engine *e, int32_t seq, int32_t n);

/* Saves a checkpoint of sequence seq's recurrent state and window rings at its n_past (nothing
 * for models without either): the end of a prompt, the start of the last message, where a later
 * request is likely to diverge. */
void engine_checkpoint(struct engine *e, int32_t seq);

/* True when the model has recurrent (Gated DeltaNet) layers. */
bool engine_is_recurrent(const struct engine *e);

/* True when sequences keep checkpoints (recurrent or sliding-window layers): a prefix may be
 * reusable only up to one, so engine_checkpoint where a later request may diverge pays. */
bool engine_has_checkpoints(const struct engine *e);

/* What the forward passes did since engine_new. Time in seconds: all of it (steps), and the part
 * spent on the streamable FFN (routed experts, or a dense model's FFN, from their lookup to their
 * last product, waits for reads included). The rest runs while no expert read can be in flight
 * (which experts layer L+1 needs is known only after layer L): the compute the exact-engine bound
 * adds to the disk's time. Counts: steps, the tokens and sequences they carried, and for moe
 * layers the (layer, step) pairs and the experts their unions held (a step looks up each expert
 * its tokens routed to once, whatever the number of tokens). */
struct engine_timing {
    double step_s;
    double ffn_s;
    uint64_t n_steps;
    uint64_t n_step_tokens;
    uint64_t n_step_seqs;
    uint64_t n_moe_layer_steps;
    uint64_t n_union_experts;
};
void engine_get_timing(const struct engine *e, struct engine_timing *out);

/* Bytes of the KV caches (full layers' n_ctx positions, window layers' rings) and of the
 * recurrent states with the checkpoints (which also hold the rings' last rows) of all n_seq
 * sequences, and of the scratch buffers (for the RAM budget report). */
size_t engine_kv_bytes(const struct engine *e);
/* Bytes of KV pages that may be resident now: engine_kv_bytes, less what the sequences gave back
 * (with an expert cache: see engine_set_experts). */
size_t engine_kv_resident_bytes(const struct engine *e);
size_t engine_rec_bytes(const struct engine *e);
size_t engine_scratch_bytes(const struct engine *e);

/* ---- KV cache and recurrent state access (contexts: server/context) ---------------------------
 * Each sequence's attention layer il's cache (il counts attention layers only) holds one K row and
 * one V row of kv_dim elements of the cache's type (row_bytes each) per position: positions
 * 0 .. n-1 of a sequence of n tokens, or for a sliding-window layer only the last ones the next
 * token sees, engine_kv_first(e, il, n) .. n-1. A recurrent model also has a state of
 * engine_state_size bytes per sequence: the state after its n_past tokens. Export copies out;
 * import writes in, then engine_kv_commit says how many positions are valid. Typical import into
 * sequence s:
 *     engine_truncate(e, s, 0);
 *     for (il ...) engine_kv_import(e, s, il, shape.type, shape.kv_dim, n, k_rows, v_rows);
 *     engine_state_import(e, s, state, engine_state_size(e));   // recurrent models
 *     engine_kv_commit(e, s, n); */
struct engine_kv_shape {
    enum qtype type;   /* QTYPE_F32, QTYPE_F16, QTYPE_Q8_0 or QTYPE_Q4_0 */
    int32_t n_layer;   /* attention layers */
    int32_t kv_dim;    /* elements per row (n_head_kv * head_dim) */
    int32_t n_ctx;     /* positions a full attention layer holds */
    size_t row_bytes;  /* bytes of one row of kv_dim elements of type */
    int32_t n_swa_layer; /* of n_layer, the sliding-window ones */
    int32_t n_swa;     /* their window (0: none) */
};

/* The cache's type and shape. */
struct engine_kv_shape engine_kv_shape(const struct engine *e);

/* The first position attention layer il keeps for a sequence of n tokens: 0, or for a
 * sliding-window layer max(0, n - (window - 1)). */
int32_t engine_kv_first(const struct engine *e, int32_t il, int32_t n);

/* Copies the rows layer il keeps for the first n tokens of sequence seq, positions
 * engine_kv_first(e, il, n) .. n-1, into k and v (each (n - first) * row_bytes, either may be
 * NULL). Returns 0, or -EINVAL when seq or il is out of range, n is not in 0 .. n_past or a
 * window ring no longer holds those positions (engine_reusable(e, seq, n) < n). */
int engine_kv_export(const struct engine *e, int32_t seq, int32_t il, int32_t n, void *k, void *v);

/* Writes the rows layer il keeps for a sequence of n tokens (positions engine_kv_first(e, il, n)
 * .. n-1) of sequence seq from k and v (each (n - first) * row_bytes of type, borrowed for the
 * call). The positions hold other rows now, so n_past drops to 0 until engine_kv_commit. Returns
 * 0, or -EINVAL when type or kv_dim differ from the cache's, seq or il is out of range or
 * n > n_ctx. */
int engine_kv_import(struct engine *e, int32_t seq, int32_t il, enum qtype type, int32_t kv_dim,
                     int32_t n, const void *k, const void *v);

/* Bytes of the recurrent state (0 for a model without recurrent layers): f32 values, for each
 * recurrent layer its conv state then its SSM state. */
size_t engine_state_size(const struct engine *e);

/* Copies sequence seq's state after its n_past tokens into buf (n = engine_state_size bytes).
 * Returns 0 or -EINVAL for another n or a sequence out of range. */
int engine_state_export(const struct engine *e, int32_t seq, void *buf, size_t n);

/* Writes sequence seq's state from buf (n = engine_state_size bytes, borrowed for the call); like
 * a KV import, n_past drops to 0 until engine_kv_commit. Returns 0 or -EINVAL for another n or a
 * sequence out of range. */
int engine_state_import(struct engine *e, int32_t seq, const void *buf, size_t n);

/* Declares positions 0 .. n-1 of sequence seq valid (n_past = n) after every layer (and the
 * state) was imported, and checkpoints the state and rings there. Returns 0, or -EINVAL when n is
 * not in 0 .. n_ctx or seq is out of range. */
int engine_kv_commit(struct engine *e, int32_t seq, int32_t n);

#endif
