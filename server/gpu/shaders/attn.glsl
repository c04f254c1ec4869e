// attn.glsl - what the attention kernels share (gpu_attn.c; gpu_ops.h's struct gpu_attn): the push
// constants, the positions a token sees, and where a head's K and V rows, its query in the KV
// type's format and its scores (then probabilities) are. A segment's tokens t < n_tok are at
// positions pos0 + t; token t sees attn_first(t) .. pos0 + t, position q at row q % ring_rows.
// The scratch: n_tok n_head query rows of ATTN_Q_BYTES, then n_tok n_head rows of n_kv_max
// floats (gpu_attn_scratch_bytes). Include after common.glsl.
layout(push_constant) uniform Push {
    uint64_t q;           // head h of token t at q + (t q_tok_stride + h q_head_stride) floats
    uint64_t k;           // the layer's K rows (row 0), row_bytes apart
    uint64_t v;           // and its V rows
    uint64_t out_;        // head h of token t at out_ + (t out_stride + h head_dim) floats
    uint64_t sinks;       // [n_head] floats, or 0
    uint64_t scratch;
    uint q_tok_stride;
    uint q_head_stride;
    uint row_bytes;
    uint ring_rows;
    uint out_stride;
    uint n_head;
    uint n_head_kv;
    uint head_dim;
    uint pos0;
    uint n_tok;
    uint window;          // 0: the whole context
    uint n_kv_max;        // positions the segment's last token sees: a scores row's length
    uint head_bytes;      // a KV head's bytes in a row (the layer's head_dim in the KV type)
    float scale;
} p;

const uint ATTN_Q_BYTES = 1024u; // a query row in the scratch: 512 halves, or 16 Q8_0 blocks
#define NEG_INF uintBitsToFloat(0xff800000u)

uint attn_first(uint t) {
    uint pos = p.pos0 + t;
    return p.window != 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
}

uint attn_n_kv(uint t) {
    return p.pos0 + t + 1u - attn_first(t);
}

// The query of head h of token t (f32).
uint64_t attn_q(uint t, uint h) {
    return p.q + (uint64_t(t) * p.q_tok_stride + uint64_t(h) * p.q_head_stride) * 4u;
}

// Head h's bytes in a K or V row: its kv head's (GQA); the row may be wider than the layer's
// heads (gemma4's layers differ, the rows are the widest's).
uint64_t attn_head_off(uint h) {
    return uint64_t(h / (p.n_head / p.n_head_kv)) * p.head_bytes;
}

// Head h's part of the K or V row (base: p.k or p.v) of position pos.
uint64_t attn_row(uint64_t base, uint h, uint pos) {
    return base + uint64_t(pos % p.ring_rows) * p.row_bytes + attn_head_off(h);
}

// The ring row of entry j of a token's scores, from its first position's row (first % ring_rows):
// a token sees at most ring_rows positions, so the row wraps at most once (no division).
uint attn_ring_row(uint first_row, uint j) {
    uint r = first_row + j;
    return r >= p.ring_rows ? r - p.ring_rows : r;
}

// The query of head h of token t in the KV type's format (attn_query_*.comp writes it).
uint64_t attn_qrow(uint t, uint h) {
    return p.scratch + uint64_t(t * p.n_head + h) * ATTN_Q_BYTES;
}

// The n_kv_max floats of head h of token t: its scores, then its probabilities.
uint64_t attn_probs(uint t, uint h) {
    return p.scratch + uint64_t(p.n_tok) * p.n_head * ATTN_Q_BYTES +
           uint64_t(t * p.n_head + h) * p.n_kv_max * 4u;
}
