// nibble_tables.glsl - the 16 values of the nibble-indexed types (common/quant.c's
// quant_iq4nl_values, and quant_mxfp4_values: e2m1 times two), and nibble_run_dot: the dot of a
// 32-element nibble run (byte j: element j low, element j + 16 high) through the values the kernel
// names as NIBBLE_VALUE(n) (iq4nl_value or mxfp4_value, defined before including this) against 32
// int8 activations. The values are packed into constants and taken by shifts: a constant array
// indexed by the nibble cost a memory read per element on the H100 (gpt-oss's MXFP4 experts ran
// at a twentieth of the card's bandwidth).

// IQ4_NL's values as signed bytes, value n in byte n of the pair (entries 0-7, 8-15).
int iq4nl_value(uint n) {
    uint64_t w = n < 8u ? 0xF6EADDCFBFAD9881ul : 0x7159453526190D01ul;
    return int(int64_t(w << (56u - 8u * (n & 7u))) >> 56);
}

// MXFP4's: the magnitudes 0, 1, 2, 3, 4, 6, 8, 12 as the nibbles of one word, bit 3 the sign.
int mxfp4_value(uint n) {
    int m = int((0xC8643210u >> (4u * (n & 7u))) & 15u);
    return (n & 8u) != 0u ? -m : m;
}

int nibble_run_dot(uint64_t qs, uint64_t a) {
    U8s q = U8s(qs);
    I8s y = I8s(a);
    int sum = 0;
    for (int j = 0; j < 16; j++) {
        uint b = uint(q.v[j]);
        sum += NIBBLE_VALUE(b & 15u) * int(y.v[j]) + NIBBLE_VALUE(b >> 4) * int(y.v[j + 16]);
    }
    return sum;
}
