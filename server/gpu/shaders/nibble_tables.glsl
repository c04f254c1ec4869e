// nibble_tables.glsl - the 16-value tables of the nibble-indexed types (common/quant.c's
// quant_iq4nl_values, and quant_mxfp4_values: e2m1 times two), and nibble_run_dot: the dot of a
// 32-element nibble run (byte j: element j low, element j + 16 high) through the table the kernel
// names as NIBBLE_VALUES (defined before including this) against 32 int8 activations.
const int IQ4NL_VALUES[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10,
                                     1, 13, 25, 38, 53, 69, 89, 113);
const int MXFP4_VALUES[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

int nibble_run_dot(uint64_t qs, uint64_t a) {
    U8s q = U8s(qs);
    I8s y = I8s(a);
    int sum = 0;
    for (int j = 0; j < 16; j++) {
        uint b = uint(q.v[j]);
        sum += NIBBLE_VALUES[b & 15u] * int(y.v[j]) + NIBBLE_VALUES[b >> 4] * int(y.v[j + 16]);
    }
    return sum;
}
