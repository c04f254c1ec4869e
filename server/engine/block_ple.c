/* block_ple.c - Gemma 4's per-layer embeddings (E2B, E4B): each token's per-layer inputs, made once
 * a step from a second token table and a projection of the scaled token embedding, and each
 * layer's use of its slice after the FFN. The table is most of an E2B / E4B file: under a budget
 * it stays on disk and a token's row is read as token_embd's is (engine_table_row).
 * Invariants: the order of float operations is llama.cpp's graph (src/models/gemma4.cpp,
 * docs/gemma4.md): the table row times sqrt(width) and the projection times 1 / sqrt(n_embd),
 * rms-normalised per layer, added (projection + row) and times 1 / sqrt(2); in a layer
 * proj(gelu(inp_gate x) * input), whose norm the driver applies before adding it to x. */
#include <math.h>

#include "engine_impl.h"
#include "ops.h"
#include "quant.h"

/* x[i] *= s over n values (ggml_scale). */
static void ple_scale(float *x, float s, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] * s;
}

/* The per-layer inputs of token (row t of the batch) in ple[t], its projection already there: the projection scaled and
 * normalised per layer, plus the table's row scaled, all times 1 / sqrt(2). Returns 0 or the
 * row read's error. */
static int ple_token(struct engine *e, int32_t t, int32_t token) {
    const struct model *m = e->m;
    const int32_t P = m->hp.n_embd_per_layer, L = m->hp.n_layer;
    const size_t LP = (size_t)P * (size_t)L;
    float *in = e->ple + (size_t)t * LP;
    const uint8_t *row = NULL;
    int rc = engine_table_row(e, &m->ple_embd, m->ple_on_disk, e->ple_row, token, &row);
    if (rc < 0)
        return rc;
    quant_dequantize_row(m->ple_embd.type, row, e->ple_tok, (int64_t)LP);
    ple_scale(e->ple_tok, sqrtf((float)P), LP);
    ple_scale(in, 1.0f / sqrtf((float)m->hp.n_embd), LP);
    for (int32_t il = 0; il < L; il++)
        ops_rms_norm(in + (size_t)il * P, in + (size_t)il * P, m->ple_proj_norm, P,
                     m->hp.rms_eps);
    const float half = 1.0f / sqrtf(2.0f);
    for (size_t i = 0; i < LP; i++)
        in[i] = (in[i] + e->ple_tok[i]) * half;
    return 0;
}

int block_ple_inputs(struct engine *e, const int32_t *tokens, int32_t n_tok) {
    const struct model *m = e->m;
    const size_t D = (size_t)m->hp.n_embd;
    const size_t LP = (size_t)m->hp.n_embd_per_layer * (size_t)m->hp.n_layer;
    int rc = engine_matmul(e, &m->ple_proj, e->x, D, e->ple, LP, n_tok);
    for (int32_t t = 0; rc == 0 && t < n_tok; t++)
        rc = ple_token(e, t, tokens[t]);
    if (rc == 0)
        engine_trace(e, "ple_inputs", e->ple, n_tok, (int64_t)LP, LP);
    return rc;
}

int block_ple(struct engine *e, int il, int32_t n_tok) {
    const struct model *m = e->m;
    const struct model_layer *l = &m->layers[il];
    const size_t D = (size_t)m->hp.n_embd, P = (size_t)m->hp.n_embd_per_layer;
    const size_t LP = P * (size_t)m->hp.n_layer;
    int rc = engine_matmul(e, &l->ple_gate, e->x, D, e->ple_g, P, n_tok);
    if (rc < 0)
        return rc;
    engine_trace(e, "ple_gate", e->ple_g, n_tok, (int64_t)P, P);
    for (int32_t t = 0; t < n_tok; t++)
        ops_geglu(e->ple_g + (size_t)t * P, e->ple_g + (size_t)t * P,
                  e->ple + (size_t)t * LP + (size_t)il * P, (int64_t)P);
    engine_trace(e, "ple_act", e->ple_g, n_tok, (int64_t)P, P);
    if ((rc = engine_matmul(e, &l->ple_out, e->ple_g, P, e->y, D, n_tok)) == 0)
        engine_trace(e, "ple_out", e->y, n_tok, (int64_t)D, D);
    return rc;
}
