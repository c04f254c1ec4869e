/* replay.h - benchmark-only routing override (sniperd --route-replay FILE, one-shot modes only):
 * each moe layer's experts come from a route trace (tools/route_trace.h, real models' routing in
 * ../shared/fixtures/routing) instead of the model's router, so that the cache, the reads and the
 * prefetch run on real routing. The output text is meaningless.
 *
 *     struct replay *r = replay_open("qwen.route.csv", n_layer, n_expert, err, sizeof(err));
 *     engine_set_route_replay(e, r);      // block_moe asks replay_layer / replay_token
 *     ...
 *     replay_free(r);                     // after the engine stops using it
 *
 * Decode tokens take the trace's decode tokens in order, cycling; each prefill step takes the
 * trace's prefill: each layer's union of its prefill experts, dealt round robin to the step's
 * tokens (so a step looks up the trace's union, as bench-policy's replay of the same trace). */
#ifndef SNIPER_REPLAY_H
#define SNIPER_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct replay;

/* Reads the route trace at path for a model of n_layer layers of n_expert experts. Returns the
 * replay (free with replay_free), or NULL with a message in err: the file's errors
 * (route_trace_read's), a trace of another shape (both shapes named), a trace with no decode
 * tokens, or one whose prefill or a decode token lacks a layer. */
struct replay *replay_open(const char *path, int32_t n_layer, int32_t n_expert, char *err,
                           size_t err_len);

/* Frees r. Accepts NULL. */
void replay_free(struct replay *r);

/* Experts per token in the trace (its top-k). */
int32_t replay_n_used(const struct replay *r);

/* Decode tokens in the trace (a cycle of the replay's decode). */
int32_t replay_n_decode_tokens(const struct replay *r);

/* Tells r that layer il of a step of n_tok tokens is being routed (prefill: the step reads a
 * prompt chunk). A layer not after the previous call's starts a new step: the previous step's
 * decode tokens are consumed. Call once per moe layer of each step, before replay_token. */
void replay_layer(struct replay *r, int il, int32_t n_tok, bool prefill);

/* Token t (0 .. n_tok-1) of the step replay_layer announced, layer il: the trace's experts, best
 * first, into sel and their trace weights into w, at most k of them. Returns how many (<= k, the
 * trace's top-k and the prefill union's size); the caller fills the rest. */
int32_t replay_token(const struct replay *r, int il, int32_t t, int32_t k, int32_t *sel, float *w);

#endif
