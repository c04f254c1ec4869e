// quantize_q8_K.glsl - one Q8_K activation block (quant.h: 256 codes, 16 bsums, d, zero pad; 320
// bytes) from 256 floats by 64 invocations, bit for bit quant_q8_K_from_f32: the element of
// largest magnitude (first on ties) sets iscale = -127 / max, codes = min(127,
// round-half-even(iscale * x)), d = 1 / iscale, bsums = sums of 16 codes; an all-zero block is all
// zero. Invocation i takes four elements: the largest magnitude by subgroup reductions (the
// magnitudes' bits are ordered as the floats; then the lowest index among the largest, the
// sequential scan's first, with its sign), the subgroups' answers combined through shared memory
// (a block's 64 invocations are whole subgroups: gpu.c requires subgroups of at most 64, and they
// are the workgroup's invocations in order), the codes side by side, the bsums from four
// invocations' integer sums (exact in any order). A workgroup works Q8K_SLOTS blocks at once (the
// includer defines it), invocations 64 s .. 64 s + 63 on slot s's; every invocation of the
// workgroup calls q8K_block together (it holds barriers), an inactive one with live false.
// One invocation per block read 256 floats one after another: 19 us a decode row on the H100; a
// tree of six barriers for the largest magnitude: 1.2 us a round (H200, in-kernel clock).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

shared uint q8K_sg_abs[64 * Q8K_SLOTS / 4u]; // per subgroup (of at least 4): its largest magnitude
shared uint q8K_sg_key[64 * Q8K_SLOTS / 4u]; // and its first index of it, times 2, plus its sign
shared int q8K_sum[64 * Q8K_SLOTS];

// The block from v, invocation i's four elements (4i .. 4i + 3; zeros where not live): for a
// caller that has them in registers or shared memory.
void q8K_block_v(vec4 v, uint64_t blk, uint i, uint slot, bool live) {
    uint o = 64u * slot;
    float amax = 0.0; // never NaN: a NaN's magnitude is never larger
    uint key = 0xffffffffu;
    for (uint j = 0u; j < 4u; j++)
        if (abs(v[j]) > amax) {
            amax = abs(v[j]);
            key = (4u * i + j) << 1 | (v[j] < 0.0 ? 1u : 0u);
        }
    uint a = floatBitsToUint(amax), m = subgroupMax(a);
    key = subgroupMin(a == m ? key : 0xffffffffu);
    if (subgroupElect()) {
        q8K_sg_abs[gl_SubgroupID] = m;
        q8K_sg_key[gl_SubgroupID] = key;
    }
    barrier();
    uint s0 = o / gl_SubgroupSize, bm = 0u, bk = 0xffffffffu;
    for (uint s = s0; s < s0 + 64u / gl_SubgroupSize; s++) {
        uint m2 = q8K_sg_abs[s], k2 = q8K_sg_key[s];
        if (m2 > bm || (m2 == bm && k2 < bk)) {
            bm = m2;
            bk = k2;
        }
    }
    float max_ = bm == 0u ? 0.0 : (bk & 1u) != 0u ? -uintBitsToFloat(bm) : uintBitsToFloat(bm);
    U32s words = U32s(blk);
    float iscale = max_ != 0.0 ? div_rn(-127.0, max_) : 0.0;
    int sum = 0;
    uint packed = 0u;
    for (uint j = 0u; j < 4u; j++) {
        precise float q = iscale * v[j];
        int c = min(int(roundEven(q)), 127);
        sum += c;
        packed |= (uint(c) & 255u) << (8u * j);
    }
    q8K_sum[o + i] = sum;
    barrier();
    if (!live)
        return;
    if (max_ == 0.0) {
        for (uint k = i; k < 80u; k += 64u)
            words.v[k] = 0u;
        return;
    }
    words.v[i] = packed; // codes 4i .. 4i + 3, little-endian
    if (i < 16u) { // bsum g: codes 16g .. 16g + 15, invocations 4g .. 4g + 3
        int g = q8K_sum[o + 4u * i] + q8K_sum[o + 4u * i + 1u] + q8K_sum[o + 4u * i + 2u] +
                q8K_sum[o + 4u * i + 3u];
        I16s(blk + 256u).v[i] = int16_t(g);
    }
    if (i == 0u)
        F32s(blk + 288u).v[0] = div_rn(1.0, iscale);
    if (i >= 57u) // the pad after d: bytes 292 .. 319, words 73 .. 79
        words.v[73u + (i - 57u)] = 0u;
}

// The block from the 256 floats at x (read only where live).
void q8K_block(F32s x, uint64_t blk, uint i, uint slot, bool live) {
    vec4 v = vec4(0.0);
    if (live)
        v = vec4(x.v[4u * i], x.v[4u * i + 1u], x.v[4u * i + 2u], x.v[4u * i + 3u]);
    q8K_block_v(v, blk, i, slot, live);
}
