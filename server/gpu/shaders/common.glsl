// common.glsl - what every kernel shares: byte-addressed views of buffers reached by device
// address, and the exact conversions the CPU's kernels use (common/quant.c), written with integer
// operations so that no driver's rounding mode decides a bit.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#ifdef INT_DOT
// the integer dot product instructions (VK_KHR_shader_integer_dot_product): kernels built with
// INT_DOT are named NAME_dot and made only on devices that have it (gpu.c)
#extension GL_EXT_spirv_intrinsics : require
#endif

layout(buffer_reference, std430, buffer_reference_align = 1) buffer U8s { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer I8s { int8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer U16s { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer I16s { int16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32s { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32s { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U32x2s { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64s { uint64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer U32x4s { uvec4 v[]; };

// The float at index i of the floats at base (an index past 2^32 elements kept exact).
float f32_at(uint64_t base, uint64_t i) {
    return F32s(base + i * 4ul).v[0];
}

// IEEE half (bits) -> float: exact (common/quant.c's fp16_to_f32).
float fp16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint mant = h & 0x3ffu;
    if (e == 0u)
        return uintBitsToFloat(floatBitsToUint(float(mant) * 5.9604644775390625e-8) | sign);
    if (e == 31u)
        return uintBitsToFloat(sign | 0x7f800000u | (mant << 13) | (mant != 0u ? 0x400000u : 0u));
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (mant << 13));
}

// float -> IEEE half (bits), round to nearest even as F16C (common/quant.c's f32_to_fp16).
uint f32_to_fp16(float f) {
    uint u = floatBitsToUint(f);
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u)
        return sign | 0x7c00u;
    if (a >= 0x38800000u)
        return sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13);
    uint e = a >> 23;
    if (e < 102u)
        return sign;
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e;
    uint q = m >> shift;
    uint rem = m & ((1u << shift) - 1u);
    uint half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u))
        q++;
    return sign | q;
}

// bfloat16 (bits) -> float: exact (common/quant.c's bf16_to_f32).
float bf16_to_f32(uint h) {
    return uintBitsToFloat(h << 16);
}

// float -> bfloat16 (bits), round to nearest even, NaN kept quiet (common/quant.c's f32_to_bf16).
uint f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// a / b in float, correctly rounded as the CPU's division: the double quotient is within a few of
// its ulps, and a quotient of two floats is never that close to a float's rounding boundary.
float div_rn(float a, float b) {
    return float(double(a) / double(b));
}

// 1 where the device's fma() rounds once (NVIDIA, AMD, Intel), 0 where its compiler splits it into
// a multiply and an add (lavapipe): set at gpu_open from probe_fma's answer.
layout(constant_id = 0) const uint FMA_FUSED = 1u;

#ifdef PHASE_CLOCK
// The in-kernel clock (make PHASES=1; gpu.c prints it): each kernel's workgroup 0 stamps the
// device's clock at its start (slot 0), at a PHASE(j) marker (1 <= j < 30; put one after a value
// is used, e.g. `if (x != 12345.0) PHASE(3)`, so that it waits for what computes x) and at its end
// (30); every workgroup's end goes to slot 31 by atomicMax. 32 uint64 slots a kernel at the
// address in constants 1 (low) and 2 (high), the kernel's index in 3. main() wraps the kernel's
// own, renamed kernel_main, so that every return passes the end's stamps. Elsewhere PHASE(j) is
// nothing.
#extension GL_EXT_shader_realtime_clock : require
#extension GL_EXT_shader_atomic_int64 : require
layout(constant_id = 1) const uint PHASE_LO = 0u;
layout(constant_id = 2) const uint PHASE_HI = 0u;
layout(constant_id = 3) const uint PHASE_KERNEL = 0u;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer PhaseU64s { uint64_t v[]; };
uint64_t phase_slot() {
    return packUint2x32(uvec2(PHASE_LO, PHASE_HI)) + uint64_t(PHASE_KERNEL) * 256ul;
}
#define PHASE(j)                                                                               \
    if (gl_WorkGroupID == uvec3(0u) && gl_LocalInvocationIndex == 0u)                          \
        PhaseU64s(phase_slot()).v[j] = clockRealtimeEXT();
void kernel_main();
void main() {
    PHASE(0)
    kernel_main();
    PHASE(30)
    if (gl_LocalInvocationIndex == 0u)
        atomicMax(PhaseU64s(phase_slot()).v[31], clockRealtimeEXT());
}
#define main kernel_main
#else
#define PHASE(j)
#endif

// fma(a, b, c) rounded once, as C's fmaf: the device's own where it is fused; otherwise a * b is
// exact in double, the sum's rounding error is recovered exactly (Knuth's two-sum), and a sum that
// was inexact is made odd in its last bit (rounding to odd), so that rounding it to float rounds
// once.
float fma_rn(float a, float b, float c) {
    if (FMA_FUSED != 0u)
        return fma(a, b, c);
    precise double p = double(a) * double(b);
    precise double s = p + double(c);
    precise double bv = s - p;
    precise double e = (p - (s - bv)) + (double(c) - bv);
    uvec2 w = unpackDouble2x32(s);
    if (e != 0.0 && (w.x & 1u) == 0u) {
        bool away = (e > 0.0) == (s > 0.0); // the exact sum is further from zero than s
        uint lo = away ? w.x + 1u : w.x - 1u;
        uint hi = away ? w.y + (lo == 0u ? 1u : 0u) : w.y - (w.x == 0u ? 1u : 0u);
        s = packDouble2x32(uvec2(lo, hi));
    }
    return float(s);
}

// fma_rn of each lane: (fma_rn(a, b.x, c.x), ...).
vec4 fma_rn4(float a, vec4 b, vec4 c) {
    return vec4(fma_rn(a, b.x, c.x), fma_rn(a, b.y, c.y), fma_rn(a, b.z, c.z), fma_rn(a, b.w, c.w));
}

// A half stored at byte offset off (even) of base.
float load_f16(uint64_t base, uint64_t off) {
    return fp16_to_f32(uint(U16s(base + off).v[0]));
}

// The byte at offset off of base, as an unsigned int.
uint load_u8(uint64_t base, uint off) {
    return uint(U8s(base + off).v[0]);
}

// The little-endian u16 / u32 at byte offset off of base, read a byte at a time (blocks pack them
// at offsets no wider alignment holds).
uint load_le16(uint64_t base, uint off) {
    U8s b = U8s(base + off);
    return uint(b.v[0]) | uint(b.v[1]) << 8;
}

uint load_le32(uint64_t base, uint off) {
    U8s b = U8s(base + off);
    return uint(b.v[0]) | uint(b.v[1]) << 8 | uint(b.v[2]) << 16 | uint(b.v[3]) << 24;
}

// The little-endian u32 at byte offset off of base, where base + off is 4-byte aligned (one
// load) / only 2-byte aligned (two); the 2 and 4 words at an 8- and 16-byte aligned base + off.
uint load_w32(uint64_t base, uint off) {
    return U32s(base + off).v[0];
}

uvec2 load_w64(uint64_t base, uint off) {
    return U32x2s(base + off).v[0];
}

uvec4 load_w128(uint64_t base, uint off) {
    return U32x4s(base + off).v[0];
}

uint load_w32_a2(uint64_t base, uint off) {
    U16s h = U16s(base + off);
    return uint(h.v[0]) | uint(h.v[1]) << 16;
}

#ifdef INT_DOT
// OpSUDotKHR on packed 4 x 8-bit words (format 0: PackedVectorFormat4x8Bit): the sum over byte j
// of (byte j of s, signed) * (byte j of u, unsigned), exact.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4452)
int sudot_packed(uint s, uint u, spirv_literal int format);

int dot4(uint w, uint a) {
    return sudot_packed(a, w, 0);
}

int sum4(uint a) {
    return sudot_packed(a, 0x01010101u, 0);
}
#else
// sum over byte j < 4 of (byte j of w, unsigned) * (byte j of a, signed): a word of weight codes
// against a word of int8 activations.
int dot4(uint w, uint a) {
    int s = 0;
    for (int j = 0; j < 32; j += 8)
        s += int((w >> j) & 255u) * bitfieldExtract(int(a), j, 8);
    return s;
}

// The sum of the 4 signed bytes of a.
int sum4(uint a) {
    return bitfieldExtract(int(a), 0, 8) + bitfieldExtract(int(a), 8, 8) +
           bitfieldExtract(int(a), 16, 8) + bitfieldExtract(int(a), 24, 8);
}
#endif
