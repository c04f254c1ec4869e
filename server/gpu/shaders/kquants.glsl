// kquants.glsl - what the products against the engine's Q8_K activation blocks share (quant.h:
// 256 int8 codes at 0, 16 int16 bsums at 256, float d at 288; 320 bytes), and the K-quants'
// 6-bit scale/min unpacking.
#define QK_ELEMS 256u
#define A_BLOCK_BYTES 320u

float q8k_d(uint64_t a_blk) {
    return F32s(a_blk + 288u).v[0];
}

int q8k_bsum(uint64_t a_blk, uint g) {
    return int(I16s(a_blk + 256u).v[g]);
}

// 2-bit code of element e (0..255) of a q2_K/q3_K qs[64]: element 128h + 32k + l (l < 32) is
// bits 2k..2k+1 of qs[32h + l] (common/quant.c's k2_code).
int k2_code(U8s qs, uint e) {
    return int((uint(qs.v[32u * (e >> 7) + (e & 31u)]) >> (2u * ((e >> 5) & 3u))) & 3u);
}

// Scale and min of sub-block j (0..7) of a q4_K/q5_K scales[12] at sc (common/quant.c's
// k_scale_min).
void k_scale_min(uint64_t sc, uint j, out int s, out int m) {
    U8s q = U8s(sc);
    if (j < 4u) {
        s = int(uint(q.v[j]) & 63u);
        m = int(uint(q.v[j + 4u]) & 63u);
    } else {
        s = int((uint(q.v[j + 4u]) & 15u) | (uint(q.v[j - 4u]) >> 6) << 4);
        m = int((uint(q.v[j + 4u]) >> 4) | (uint(q.v[j]) >> 6) << 4);
    }
}

// The two-term blocks' terms (q2_K; matmul_split.glsl's TWO_TERMS): acc = fma(a.d * fp16(w.d),
// isum, acc), then acc = fma(-(a.d * fp16(w.dmin)), msum, acc); the halves' values wd and wdmin.
vec4 k_affine_terms(uint64_t a_blk, float wd, float wdmin, int isum, int msum) {
    float ad = q8k_d(a_blk);
    precise float d = ad * wd;
    precise float dmin = ad * wdmin;
    return vec4(d, float(isum), -dmin, float(msum));
}

// The one-term blocks': acc = fma(a.d * fp16(w.d), isum, acc).
vec4 k_terms(uint64_t a_blk, float wd, int isum) {
    precise float d = q8k_d(a_blk) * wd;
    return vec4(d, float(isum), 0.0, 0.0);
}

// quant.h's lane contract (q4_K, q5_K, q6_K: their blocks_*.glsl define LANE8 and LANE8_MINS, 4, 1
// or 0, before including this). A block's factors (d, dmin) = (a.d * fp16(w.d),
// -(a.d * fp16(w.dmin))); lane accumulator l takes fma(d, lane l, acc) of every block in order,
// min accumulator k fma(dmin, min lane k, acc) (LANE8_MINS 1: the one min accumulator, the
// block's whole min sum; LANE8_MINS 0, q6_K: no min accumulators, dmin unused).
vec2 k_lane_scales(uint64_t a_blk, float wd, float wdmin) {
    float ad = q8k_d(a_blk);
    precise float d = ad * wd;
    precise float dmin = ad * wdmin;
    return vec2(d, -dmin);
}

#ifdef LANE8
// The output from pairs[l] = acc[l] + acc[l + 4] (l < 4) and the min accumulators (LANE8_MINS 1:
// mins.x alone; 0: none, mins unread): ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) +
// (acc3 + acc7)), plus ((macc0 + macc2) + (macc1 + macc3)) or msum (LANE8_MINS 0: nothing added,
// not even +0, which would turn a -0 into +0).
float lane8_result(vec4 pairs, vec4 mins) {
    precise float s = (pairs.x + pairs.z) + (pairs.y + pairs.w);
#if LANE8_MINS == 0
    return s;
#else
#if LANE8_MINS == 4
    precise float m = (mins.x + mins.z) + (mins.y + mins.w);
#else
    float m = mins.x;
#endif
    precise float r = s + m;
    return r;
#endif
}
#endif
