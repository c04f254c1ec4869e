// blocks_q4_0.glsl - a Q4_0 block against a Q8_0 block under quant.h's contract: d = fp16(w.d) *
// fp16(a.d), isum = sum (nibble - 8) * q_a (byte j: element j low, element j + 16 high), acc =
// fma(d, isum, acc). Shared by the product (matmul_q4_0.comp) and the attention's scores.
#define QK_ELEMS 32u
#define W_BLOCK_BYTES 18u
#define A_BLOCK_BYTES 34u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U8s qw = U8s(w_blk + 2u);
    I8s qa = I8s(a_blk + 2u);
    int isum = 0;
    for (int j = 0; j < 16; j++) {
        uint b = uint(qw.v[j]);
        isum += (int(b & 15u) - 8) * int(qa.v[j]) + (int(b >> 4) - 8) * int(qa.v[j + 16]);
    }
    precise float d = load_f16(w_blk, 0u) * load_f16(a_blk, 0u);
    return vec4(d, float(isum), 0.0, 0.0);
}
