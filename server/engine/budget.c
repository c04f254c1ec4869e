/* budget.c - the RAM budget check and split (see budget.h). The resident set is measured, not
 * summed from the parts, so whatever else the process holds (other models, the HTTP server's
 * threads, the allocator's slack) is inside the cap too; what the engine will add is computed
 * from its parameters (engine_size) before it allocates anything, so a budget too small for the
 * slots is refused, never overrun. */
#include "budget.h"
#include "arch.h"

#include <errno.h>
#include <inttypes.h>

#include "err.h"
#include "gpu.h"
#include "procstat.h"

#define MIB (UINT64_C(1) << 20)

static uint64_t mib_up(uint64_t bytes) { return (bytes + MIB - 1) / MIB; }

/* The smallest expert cache m can stream with: one token's experts of a layer (0 in RAM). */
static uint64_t budget_min_cache(const struct model *m) {
    if (!m->experts_on_disk)
        return 0;
    return (uint64_t)expert_cache_slot_bytes(m) * (uint64_t)expert_cache_min_slots(m);
}

/* What the budget must hold for an engine of parameters p beside the resident set rss: the
 * engine's bytes (es), the headroom and the smallest expert cache, into *need. Returns 0 or
 * engine_size's error. */
static int budget_need(const struct model *m, const struct engine_params *p, uint64_t rss,
                       struct engine_size *es, uint64_t *need, char *err, size_t err_len) {
    const int rc = engine_size(m, p, es, err, err_len);
    if (rc < 0)
        return rc;
    *need = rss + (uint64_t)es->kv_bytes + (uint64_t)es->rec_bytes + (uint64_t)es->scratch_bytes +
            BUDGET_MARGIN + budget_min_cache(m);
    return 0;
}

/* True when an engine of p fits under cap beside the resident set rss. */
static bool budget_fits(const struct model *m, const struct engine_params *p, uint64_t rss,
                        uint64_t cap) {
    struct engine_size es;
    uint64_t need;
    char err[128];
    return budget_need(m, p, rss, &es, &need, err, sizeof(err)) == 0 && need <= cap;
}

/* The most slots below p's, or the most checkpoints a slot below p's (with p's slots), that fit
 * under cap with BUDGET_RSS_JITTER spare; 0: none. */
static int32_t most_slots(const struct model *m, const struct engine_params *p, uint64_t rss,
                          uint64_t cap) {
    struct engine_params q = *p;
    for (q.n_seq = p->n_seq - 1; q.n_seq >= 1; q.n_seq--)
        if (budget_fits(m, &q, rss + BUDGET_RSS_JITTER, cap))
            return q.n_seq;
    return 0;
}

static int32_t most_checkpoints(const struct model *m, const struct engine_params *p,
                                uint64_t rss, uint64_t cap) {
    struct engine_params q = *p;
    for (q.n_checkpoints = p->n_checkpoints - 1; q.n_checkpoints >= 1; q.n_checkpoints--)
        if (budget_fits(m, &q, rss + BUDGET_RSS_JITTER, cap))
            return q.n_checkpoints;
    return 0;
}

int budget_check(const struct model *m, const struct engine_params *p, uint64_t cap, char *err,
                 size_t err_len) {
    struct engine_params ep = p ? *p : engine_params_default();
    const uint64_t rss = procstat_rss_bytes(), min_cache = budget_min_cache(m);
    struct engine_size es;
    uint64_t need;
    int rc = budget_need(m, &ep, rss, &es, &need, err, err_len);
    if (rc < 0 || need <= cap)
        return rc;
    const int32_t slots = most_slots(m, &ep, rss, cap);
    const int32_t ckpts = es.n_checkpoints > 1 ? most_checkpoints(m, &ep, rss, cap) : 0;
    char fits[128] = "", rec[128] = "", cache[80] = "";
    if (min_cache)
        snprintf(cache, sizeof(cache), "one token's %s of a layer %" PRIu64 " MiB, ",
                 m->hp.n_expert > 0 ? "experts" : "FFN", mib_up(min_cache));
    if (slots > 0 && ckpts > 0)
        snprintf(fits, sizeof(fits), "; what fits: --parallel %d, or --checkpoints %d with "
                 "--parallel %d", slots, ckpts, es.n_seq);
    else if (slots > 0 || ckpts > 0)
        snprintf(fits, sizeof(fits), "; what fits: --%s %d", slots ? "parallel" : "checkpoints",
                 slots ? slots : ckpts);
    else if (es.n_seq > 1 || es.n_checkpoints > 1)
        snprintf(fits, sizeof(fits), "; fewer slots%s do not fit either",
                 es.n_checkpoints > 1 ? " or checkpoints" : "");
    if (es.rec_bytes)
        snprintf(rec, sizeof(rec), ", %s (%d a slot) %" PRIu64 " MiB",
                 model_is_recurrent(m) ? "recurrent states with their checkpoints"
                                       : "window checkpoints", es.n_checkpoints,
                 mib_up(es.rec_bytes));
    err_set(err, err_len, "--ram-budget %" PRIu64 " MiB is too small for %d slot%s of %d "
            "positions: the process holds %" PRIu64 " MiB (resident weights %" PRIu64 "), the "
            "slots' KV caches %" PRIu64 " MiB%s (%.1f MiB a slot), buffers %" PRIu64 " MiB, %s"
            "headroom %u MiB; the minimum is %" PRIu64 " MiB%s", cap / MIB, es.n_seq,
            es.n_seq > 1 ? "s" : "", es.n_ctx, mib_up(rss), mib_up(m->resident_bytes),
            mib_up(es.kv_bytes), rec,
            (double)(es.seq_kv_bytes + es.seq_rec_bytes) / (double)MIB, mib_up(es.scratch_bytes),
            cache, BUDGET_MARGIN >> 20,
            mib_up(need), fits);
    return -ENOMEM;
}

struct expert_cache *budget_cache_new(const struct model *m, struct engine *e, uint64_t cap,
                                      const struct expert_cache_options *o, FILE *log, char *err,
                                      size_t err_len) {
    const uint64_t mib = 1u << 20, rss = procstat_rss_bytes();
    const size_t slot = expert_cache_slot_bytes(m);
    const int per_layer = expert_cache_experts_per_layer(m), min = expert_cache_min_slots(m);
    const uint64_t need = rss + BUDGET_MARGIN + (uint64_t)slot * (uint64_t)min;
    if (cap < need) {
        err_set(err, err_len, "--ram-budget %" PRIu64 " MiB is too small: the resident weights, KV "
                "cache, recurrent state and buffers take %" PRIu64 " MiB, one token's %s of a layer "
                "%" PRIu64 " MiB and headroom %u MiB; the minimum is %" PRIu64 " MiB", cap / mib,
                mib_up(rss), m->hp.n_expert > 0 ? "experts" : "FFN",
                mib_up((uint64_t)slot * (uint64_t)min), BUDGET_MARGIN >> 20, mib_up(need));
        return NULL;
    }
    /* the KV pages the sequences do not use yet are the cache's until they do */
    struct expert_cache_options grow = o ? *o : (struct expert_cache_options){0}; /* 0: defaults */
    grow.grow_bytes = cap - rss - BUDGET_MARGIN + engine_kv_bytes(e);
    grow.contention = engine_contention(e); /* the reads' waits and the pool's: one machine */
    struct expert_cache *c = expert_cache_new(m, cap - rss - BUDGET_MARGIN, &grow, err, err_len);
    if (!c)
        return NULL;
    struct expert_cache_stats st;
    expert_cache_get_stats(c, &st);
    engine_set_experts(e, c);
    const int32_t now = expert_cache_n_slots(c);
    const uint64_t known = m->resident_bytes + engine_kv_bytes(e) + engine_rec_bytes(e) +
                           engine_scratch_bytes(e);
    const uint64_t other = (rss > known ? rss - known : 0) + BUDGET_MARGIN;
    if (log)
        fprintf(log,
                "budget: %" PRIu64 " MiB = resident weights %" PRIu64 " + KV cache %zu + recurrent "
                "state %zu + buffers %zu + other %" PRIu64 " + expert cache %" PRIu64 " (%d slots "
                "of %.2f MiB, %.0f%% of the %d experts; %s reads, %s eviction), %d slots "
                "while the KV cache's pages are not in use\n",
                cap / mib, m->resident_bytes / mib, engine_kv_bytes(e) / mib,
                engine_rec_bytes(e) / mib, engine_scratch_bytes(e) / mib, other / mib,
                (uint64_t)st.n_slots * st.slot_bytes / mib, st.n_slots,
                (double)st.slot_bytes / (double)mib,
                100.0 * st.n_slots / ((double)m->hp.n_layer * per_layer),
                m->hp.n_layer * per_layer, st.backend, st.eviction, now);
    return c;
}

/* The engine's buffers for n_batch tokens, roughly as engine_new sizes them: per token the
 * residual stream and block outputs, q/k/v and attention rows, the experts' hidden rows, the
 * quantized activation slots, the router's logits and gemma4's per-layer inputs (an estimate:
 * engine_scratch_bytes is the truth once it exists). */
static uint64_t scratch_estimate(const struct model_hparams *hp, const struct engine_params *p) {
    const uint64_t B = (uint64_t)(p->n_batch > 0 ? p->n_batch : 512);
    const uint64_t k = hp->n_expert > 0 ? (uint64_t)hp->n_expert_used : 1;
    const uint64_t ff = (uint64_t)(hp->n_expert > 0 ? hp->n_ff_exp : hp->n_ff);
    const uint64_t wide = (uint64_t)(hp->n_ff > hp->n_embd ? hp->n_ff : hp->n_embd);
    const uint64_t q = (uint64_t)hp->n_head * (uint64_t)hp->head_dim;
    const uint64_t kv = (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim;
    const uint64_t per_token = 4 * (uint64_t)hp->n_embd + 4 * q + 2 * kv + k * (2 * ff +
                               (uint64_t)hp->n_embd) + 3 * wide + (uint64_t)hp->n_expert +
                               (uint64_t)hp->n_embd_per_layer * ((uint64_t)hp->n_layer + 1);
    return B * per_token * sizeof(float);
}

/* Layer il's K (or V) row bytes, whether it keeps a window ring, and whether it keeps KV of its
 * own: gpt-oss's window layers by their period (swa_pattern); gemma4's by the per-layer
 * sliding_window_pattern, each kind with its head size and KV heads, and its last
 * shared_kv_layers layers reading an earlier layer's KV (arch_gemma4.c). */
static void budget_layer_kv(const struct gguf *g, const struct model_hparams *hp, int32_t il,
                            enum qtype kv_type, uint64_t *row, bool *swa, bool *has_kv) {
    uint64_t n = 0;
    uint32_t shared = 0;
    char err[64];
    const uint8_t *pat = gguf_get_arr(g, "gemma4.attention.sliding_window_pattern",
                                      GGUF_VTYPE_BOOL, &n);
    int32_t head_dim = hp->head_dim, n_head_kv = hp->n_head_kv;
    *swa = hp->n_swa > 0 && hp->swa_pattern > 0 && il % hp->swa_pattern < hp->swa_pattern - 1;
    *has_kv = true;
    if (pat && n == (uint64_t)hp->n_layer) {
        *swa = hp->n_swa > 0 && pat[il] != 0;
        head_dim = *swa ? hp->head_dim_swa : hp->head_dim;
        if (model_key_i32_at(g, "attention.head_count_kv", il, hp->n_head, &n_head_kv, err,
                             sizeof(err)) < 0)
            n_head_kv = hp->n_head_kv;
        if (gguf_get_u32(g, "gemma4.attention.shared_kv_layers", &shared) == 0)
            *has_kv = il < hp->n_layer - (int32_t)shared;
    }
    if (qtype_row_bytes(kv_type, (uint64_t)n_head_kv * (uint64_t)head_dim, row) < 0)
        *row = (uint64_t)n_head_kv * (uint64_t)head_dim * 4;
}

uint64_t budget_estimate(const struct gguf *g, const struct engine_params *p) {
    struct model_hparams hp;
    char err[256];
    if (model_read_hparams(g, &hp, err, sizeof(err)) < 0)
        return 0;
    /* gemma4's FFN width is per layer (E2B/E4B double it in the shared-KV layers): the buffers
     * are the widest's */
    for (int32_t il = 0; il < hp.n_layer; il++) {
        int32_t ff = 0;
        if (model_key_i32_at(g, "feed_forward_length", il, hp.n_ff, &ff, err, sizeof(err)) == 0 &&
            ff > hp.n_ff)
            hp.n_ff = ff;
    }
    uint64_t tensors = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        tensors += g->tensors[i].n_bytes;
    const int32_t n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp.n_ctx_train < 4096 ? hp.n_ctx_train : 4096);
    /* a sliding-window layer keeps a ring of n_swa - 1 + n_batch positions (engine.c) */
    const int64_t ring = (int64_t)hp.n_swa - 1 + (p->n_batch > 0 ? p->n_batch : 512);
    /* a hybrid (qwen35*) layer is attention when (il + 1) % full_attn_interval == 0, else Gated
     * DeltaNet with a conv and an SSM state (arch_qwen35.c) */
    const bool hybrid = hp.ssm_d_state > 0 && hp.full_attn_interval > 0;
    uint64_t kv_row_positions = 0, n_rec = 0, n_swa = 0, tail_rows = 0;
    for (int32_t il = 0; il < hp.n_layer; il++) {
        uint64_t row = 0;
        bool swa = false, has_kv = true;
        budget_layer_kv(g, &hp, il, p->kv_type, &row, &swa, &has_kv);
        if (hybrid && (il + 1) % hp.full_attn_interval != 0)
            n_rec++;
        else if (has_kv)
            kv_row_positions += row * (uint64_t)(swa && ring < n_ctx ? ring : n_ctx);
        n_swa += swa && has_kv;
        tail_rows += swa && has_kv ? row : 0;
    }
    const uint64_t n_seq = (uint64_t)(p->n_seq > 0 ? p->n_seq : 1);
    const uint64_t kv = 2 * kv_row_positions * n_seq;
    /* each slot's state and its checkpoints (each the state and the rings' last n_swa - 1 rows) */
    const uint64_t Dk = (uint64_t)hp.ssm_d_state, Hv = (uint64_t)hp.ssm_dt_rank;
    const uint64_t conv_ch = 2 * (uint64_t)hp.ssm_n_group * Dk + Hv * Dk;
    const uint64_t state = n_rec * 4 * ((uint64_t)(hp.ssm_d_conv > 0 ? hp.ssm_d_conv - 1 : 0) *
                                        conv_ch + Hv * Dk * Dk);
    const uint64_t tail = 2 * (uint64_t)(hp.n_swa > 0 ? hp.n_swa - 1 : 0) * tail_rows;
    const uint64_t n_ckpt = n_rec + n_swa ? (uint64_t)(p->n_checkpoints > 0 ? p->n_checkpoints
                                                                              : 4) : 0;
    const uint64_t rec = n_seq * (state + n_ckpt * (state + tail));
    return tensors + kv + rec + scratch_estimate(&hp, p);
}

void budget_print_memory(const struct engine *e, int32_t n_checkpoints, FILE *log) {
    const double mib = 1024.0 * 1024.0;
    struct engine_kv_shape s = engine_kv_shape(e);
    char slots[32] = "", windows[96] = "";
    if (engine_n_seq(e) > 1)
        snprintf(slots, sizeof(slots), "%d slots of ", engine_n_seq(e));
    if (s.n_swa_layer > 0)
        snprintf(windows, sizeof(windows), ", %d of them sliding windows of %d in rings",
                 s.n_swa_layer, s.n_swa);
    fprintf(log, "memory: KV cache %.1f MiB (%s%d positions of %s in %d attention layers%s), "
            "%s %.1f MiB (with %d checkpoints), buffers %.1f MiB\n",
            (double)engine_kv_bytes(e) / mib, slots, s.n_ctx, qtype_name(s.type), s.n_layer,
            windows, engine_is_recurrent(e) || !engine_has_checkpoints(e) ? "recurrent state"
                                                                           : "window checkpoints",
            (double)engine_rec_bytes(e) / mib, engine_has_checkpoints(e) ? n_checkpoints : 0,
            (double)engine_scratch_bytes(e) / mib);
}

bool budget_place_gpu(struct engine *e, struct gpu *g, FILE *log) {
    if (!g)
        return false;
    char err[256] = "";
    const double mib = 1024.0 * 1024.0;
    if (engine_use_gpu(e, g, err, sizeof(err)) < 0) {
        if (log)
            fprintf(log, "%s; running on the CPU\n", err);
        return false;
    }
    size_t w = 0, kv = 0, act = 0;
    engine_gpu_bytes(e, &w, &kv, &act);
    struct engine_gpu_experts x;
    engine_gpu_experts(e, &x);
    char experts[256] = "";
    if (x.in_place)
        snprintf(experts, sizeof(experts), "; routed experts: every one computed by the GPU in "
                 "the expert cache's slots (unified memory: the SSD's reads land where the GPU "
                 "reads them)");
    else if (x.exchange && x.n_slots == x.n_expert)
        snprintf(experts, sizeof(experts), "; routed experts: all %d a layer in VRAM (%.1f MiB "
                 "of the weights, read through the expert cache)", x.n_expert,
                 (double)x.slot_bytes / mib);
    else if (x.exchange)
        snprintf(experts, sizeof(experts), "; routed experts: %d of %d a layer in VRAM (%.1f MiB "
                 "of the weights), the others computed on the CPU %s", x.n_slots, x.n_expert,
                 (double)x.slot_bytes / mib, x.cached ? "through the expert cache "
                 "(RAM, then the SSD)" : "from RAM");
    if (log)
        fprintf(log, "gpu: weights %.1f MiB, KV cache %.1f MiB, activations %.1f MiB in device "
                "memory (%.1f of %.1f MiB used); every step runs on the GPU%s\n", (double)w / mib,
                (double)kv / mib, (double)act / mib, (double)gpu_used_bytes(g) / mib,
                (double)gpu_budget_bytes(g) / mib, experts);
    return true;
}
