#!/usr/bin/env python3
"""derive_quant_values.py - derives the value tables of IQ4_NL/IQ4_XS and MXFP4, and MXFP4's E8M0
scale rule, as data from the format's reference (gguf-py's dequantization of ggml's formats), by
dequantizing crafted blocks. Prints the C tables common/quant.c holds and the golden blocks
tests/test_quant.c pins them with.

    /usr/bin/python3 tools/derive_quant_values.py [path/to/llama.cpp/gguf-py]

Nothing here is copied from the reference: it is only asked what crafted blocks decode to."""
import struct
import sys

import numpy as np

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/work/ref/llama.cpp/gguf-py")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.quants import dequantize  # noqa: E402


def deq(raw: bytes, qtype) -> np.ndarray:
    return dequantize(np.frombuffer(raw, dtype=np.uint8).copy(), qtype).astype(np.float32).ravel()


def nibbles(codes):
    """16 bytes: code j in the low nibble of byte j, code j+16 in the high nibble."""
    return bytes((codes[j] & 15) | (codes[j + 16] & 15) << 4 for j in range(16))


def as_int8_table(values, name):
    ints = [int(v) for v in values]
    assert all(float(i) == float(v) for i, v in zip(ints, values)), f"{name}: not integers"
    assert all(-128 <= i <= 127 for i in ints), f"{name}: not int8"
    return ints


def iq4nl_table():
    codes = list(range(16)) + list(range(15, -1, -1))
    raw = struct.pack("<e", 1.0) + nibbles(codes)  # d = 1: the values themselves
    v = deq(raw, T.IQ4_NL)
    assert all(v[16 + j] == v[15 - j] for j in range(16)), "iq4_nl: high nibbles index the same table"
    return as_int8_table(v[:16], "iq4_nl")


def mxfp4_table():
    codes = list(range(16)) + list(range(15, -1, -1))
    raw = bytes([128]) + nibbles(codes)  # e = 128: scale 1 for the doubled values
    v = deq(raw, T.MXFP4)
    assert all(v[16 + j] == v[15 - j] for j in range(16))
    return as_int8_table(v[:16], "mxfp4")


def mxfp4_scale_rule(table):
    """Checks that byte e scales the (doubled) values by exactly 2^(e - 128), for every e."""
    one = table.index(1) if 1 in table else None
    code = one if one is not None else 1
    for e in range(256):
        raw = bytes([e]) + nibbles([code] * 32)
        v = deq(raw, T.MXFP4)
        want = np.float32(np.ldexp(np.float64(table[code]), e - 128))
        assert v[0] == want and np.all(v == v[0]), f"mxfp4: e = {e}: {v[0]!r} != {want!r}"
    return "2^(e - 128)"


def c_table(name, values):
    return f"const int8_t {name}[16] = {{{', '.join(str(v) for v in values)}}};"


def golden(name, qtype, raw):
    v = deq(raw, qtype)
    print(f"/* {name}: bytes {raw.hex()} */")
    print("    " + ", ".join(f"{x!r}f" if x != int(x) else f"{int(x)}.0f" for x in v.tolist()))


def main():
    nl = iq4nl_table()
    mx = mxfp4_table()
    rule = mxfp4_scale_rule(mx)
    print(c_table("quant_iq4nl_values", nl))
    print(c_table("quant_mxfp4_values", mx))
    print(f"/* mxfp4: block scale (for the doubled values) = {rule}, checked for e = 0..255 */")
    # golden blocks for tests/test_quant.c
    codes = [(7 * j + 3) % 16 for j in range(32)]
    golden("iq4_nl d=-0.375", T.IQ4_NL, struct.pack("<e", -0.375) + nibbles(codes))
    golden("mxfp4 e=125", T.MXFP4, bytes([125]) + nibbles(codes))
    golden("mxfp4 e=1", T.MXFP4, bytes([1]) + nibbles(codes))


if __name__ == "__main__":
    main()
