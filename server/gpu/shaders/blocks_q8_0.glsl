// blocks_q8_0.glsl - a Q8_0 block against a Q8_0 block under quant.h's contract: d = fp16(w.d) *
// fp16(a.d) (a float product), isum = sum q_w * q_a exact; the chain adds fma(d, float(isum), acc).
// Shared by the product (matmul_q8_0.comp) and the attention's scores (attn_scores_q8_0.comp).
#define QK_ELEMS 32u
#define W_BLOCK_BYTES 34u
#define A_BLOCK_BYTES 34u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U16s qw = U16s(w_blk), qa = U16s(a_blk); // 17 halfwords: the scale, then 16 pairs of codes
    int isum = 0;
    for (int k = 1; k <= 16; k++) {
        uint x = uint(qw.v[k]), y = uint(qa.v[k]);
        isum += (int(x << 24) >> 24) * (int(y << 24) >> 24) + (int(x << 16) >> 24) * (int(y << 16) >> 24);
    }
    precise float d = fp16_to_f32(uint(qw.v[0])) * fp16_to_f32(uint(qa.v[0]));
    return vec4(d, float(isum), 0.0, 0.0);
}
