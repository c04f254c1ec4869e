// matmul_q3_K.comp - Q3_K weights against Q8_K activations: Q2_K's 2-bit codes minus 4 where bit
// e / 32 of hmask[e % 32] is clear; per sub-block g of 16 isum += scale_g * dot with the signed
// 6-bit scales; acc = fma(a.d * fp16(w.d), isum, acc).
#version 450
#include "common.glsl"
#include "kquants.glsl"

#define W_BLOCK_BYTES 110u

// common/quant.c's q3_K_scale: scale j (0..15) of scales[12] at sc, minus 32.
int q3_scale(U8s sc, uint j) {
    uint lo = j < 8u ? uint(sc.v[j]) & 15u : uint(sc.v[j - 8u]) >> 4;
    uint hi = (uint(sc.v[8u + (j & 3u)]) >> (2u * (j >> 2))) & 3u;
    return int(lo | hi << 4) - 32;
}

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U8s hm = U8s(w_blk), qs = U8s(w_blk + 32u), sc = U8s(w_blk + 96u);
    I8s qa = I8s(a_blk);
    int isum = 0;
    for (uint g = 0u; g < 16u; g++) {
        int dot = 0;
        for (uint e = 16u * g; e < 16u * g + 16u; e++) {
            int q = k2_code(qs, e);
            q -= ((uint(hm.v[e & 31u]) >> (e >> 5)) & 1u) != 0u ? 0 : 4;
            dot += q * int(qa.v[e]);
        }
        isum += q3_scale(sc, g) * dot;
    }
    return k_terms(a_blk, load_f16(w_blk, 108u), isum);
}

#include "matmul_blocks.glsl"
