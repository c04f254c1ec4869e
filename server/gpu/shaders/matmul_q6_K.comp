// matmul_q6_K.comp - Q6_K weights against Q8_K activations: element 128h + 32k + l takes its low
// 4 bits from ql[64h + l + 32(k & 1)] (low nibble for k < 2) and its top 2 from bits 2k..2k+1 of
// qh[32h + l], minus 32 (common/quant.c's q6_K_code); per sub-block g of 16 isum += scales[g] *
// dot (signed); acc = fma(a.d * fp16(w.d), isum, acc).
#version 450
#include "common.glsl"
#include "kquants.glsl"

#define W_BLOCK_BYTES 210u

vec4 block_terms(uint64_t w_blk, uint64_t a_blk) {
    U8s ql = U8s(w_blk), qh = U8s(w_blk + 128u);
    I8s sc = I8s(w_blk + 192u), qa = I8s(a_blk);
    int isum = 0;
    for (uint g = 0u; g < 16u; g++) {
        int dot = 0;
        for (uint e = 16u * g; e < 16u * g + 16u; e++) {
            uint h = e >> 7, k = (e >> 5) & 3u, l = e & 31u;
            uint lo = uint(ql.v[64u * h + l + 32u * (k & 1u)]) >> (k < 2u ? 0u : 4u);
            uint hi = (uint(qh.v[32u * h + l]) >> (2u * k)) & 3u;
            dot += (int((lo & 15u) | hi << 4) - 32) * int(qa.v[e]);
        }
        isum += int(sc.v[g]) * dot;
    }
    return k_terms(a_blk, load_f16(w_blk, 208u), isum);
}

#include "matmul_blocks.glsl"
