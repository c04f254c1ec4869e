#!/usr/bin/python3
"""derive_iq_tables.py - derives the i-quant codebooks (grids, sign table) as data from a reference
implementation's behaviour and writes common/quant_iq_tables.c.

    /usr/bin/python3 tools/derive_iq_tables.py --gguf-py /work/ref/llama.cpp/gguf-py \
        -o common/quant_iq_tables.c

The reference is gguf-py's dequantize() (ggml's formats in numpy): only called, never read. For each
table the script crafts blocks with scale d = 1, the smallest sub-block scale, no signs and one
known grid index per group of 8 (or 4) values, dequantizes them and reads each entry back from the
values. It then re-implements every type's dequantizer with the derived tables (the layouts that
common/quant_iq.c implements) and checks it bit for bit against the reference on thousands of
random blocks, so a wrong entry, a wrong layout assumption or a wrong scale rule fails here. The
output is deterministic (no randomness reaches it).
"""
import argparse
import sys

import numpy as np

QK_K = 256


def load_reference(path):
    sys.path.insert(0, path)
    from gguf.constants import GGMLQuantizationType as T  # noqa: E402
    from gguf.quants import dequantize  # noqa: E402

    def deq(qtype_name, blocks):
        """Dequantizes an (n_blocks, block_bytes) uint8 array into (n_blocks, 256) float32."""
        blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
        y = dequantize(blocks.reshape(-1), getattr(T, qtype_name))
        return np.asarray(y, dtype=np.float32).reshape(blocks.shape[0], QK_K)

    return deq


# ---- crafting blocks ---------------------------------------------------------------------------

FP16_ONE = np.frombuffer(np.float16(1.0).tobytes(), np.uint8)


def put_u16(b, off, v):
    b[off] = v & 0xFF
    b[off + 1] = (v >> 8) & 0xFF


def put_u32(b, off, v):
    for k in range(4):
        b[off + k] = (v >> (8 * k)) & 0xFF


def integral(values, what):
    r = np.rint(values)
    if not np.all(r == values):
        raise SystemExit(f"derive: {what}: values are not integers in the assumed unit")
    return r.astype(np.int64)


def derive_ksigns(deq):
    """The 7-bit sign index -> 8-bit sign mask table of iq2_xxs/iq2_xs/iq3_xxs: iq2_xxs blocks, grid
    index 0 everywhere (its values are all positive), sign index k in slot k."""
    blocks = np.zeros((4, 66), np.uint8)
    for k in range(128):
        b, slot = divmod(k, 32)
        ib, l = divmod(slot, 4)
        blocks[b, 0:2] = FP16_ONE
        word = int.from_bytes(bytes(blocks[b, 6 + 8 * ib:10 + 8 * ib]), "little")
        put_u32(blocks[b], 6 + 8 * ib, word | k << (7 * l))
    y = deq("IQ2_XXS", blocks).reshape(128, 8)
    if np.any(y == 0):
        raise SystemExit("derive: iq2_xxs grid entry 0 has a zero value: cannot read signs")
    return [int(sum(1 << j for j in range(8) if y[k, j] < 0)) for k in range(128)]


def derive_grid_iq2xxs(deq):
    """256 entries of 8 values; value = d * (2s+1)/8 * grid, so with d = 1, s = 0: grid = 8y."""
    blocks = np.zeros((8, 66), np.uint8)
    for e in range(256):
        b, slot = divmod(e, 32)
        ib, l = divmod(slot, 4)
        blocks[b, 0:2] = FP16_ONE
        blocks[b, 2 + 8 * ib + l] = e
    y = deq("IQ2_XXS", blocks).reshape(256, 8)
    return integral(y * 8, "iq2_xxs grid")


def derive_grid_iq2xs(deq):
    """512 entries: u16 qs[4*ib + l] = index (9 bits) | sign index << 9; scale nibbles 0."""
    blocks = np.zeros((16, 74), np.uint8)
    for e in range(512):
        b, slot = divmod(e, 32)
        blocks[b, 0:2] = FP16_ONE
        put_u16(blocks[b], 2 + 2 * slot, e)
    y = deq("IQ2_XS", blocks).reshape(512, 8)
    return integral(y * 8, "iq2_xs grid")


def derive_grid_iq2s(deq):
    """1024 entries: index = qs[4*ib + l] | bits 2l..2l+1 of qh[ib] << 8; sign bytes 0."""
    blocks = np.zeros((32, 82), np.uint8)
    for e in range(1024):
        b, slot = divmod(e, 32)
        ib, l = divmod(slot, 4)
        blocks[b, 0:2] = FP16_ONE
        blocks[b, 2 + slot] = e & 0xFF
        blocks[b, 66 + ib] |= (e >> 8) << (2 * l)
    y = deq("IQ2_S", blocks).reshape(1024, 8)
    return integral(y * 8, "iq2_s grid")


def derive_grid_iq3xxs(deq):
    """256 entries of 4 values: 64 index bytes per block, value = d * (2s+1)/4 * grid."""
    blocks = np.zeros((4, 98), np.uint8)
    for e in range(256):
        b, slot = divmod(e, 64)
        blocks[b, 0:2] = FP16_ONE
        blocks[b, 2 + slot] = e
    y = deq("IQ3_XXS", blocks).reshape(256, 4)
    return integral(y * 4, "iq3_xxs grid")


def derive_grid_iq3s(deq):
    """512 entries of 4 values: index = qs[k] | bit k%8 of qh[k/8] << 8;
    value = d * (2s+1) * grid."""
    blocks = np.zeros((8, 110), np.uint8)
    for e in range(512):
        b, slot = divmod(e, 64)
        blocks[b, 0:2] = FP16_ONE
        blocks[b, 2 + slot] = e & 0xFF
        blocks[b, 66 + slot // 8] |= (e >> 8) << (slot % 8)
    y = deq("IQ3_S", blocks).reshape(512, 4)
    return integral(y, "iq3_s grid")


def derive_grid_iq1s(deq):
    """2048 entries of 8 values in {-1, 0, 1}: index = qs[4*ib + l] | bits 3l..3l+2 of qh[ib] << 8;
    value = d * (2s+1) * (grid + delta) with delta = +1/8 when bit 15 of qh[ib] is clear."""
    blocks = np.zeros((64, 50), np.uint8)
    for e in range(2048):
        b, slot = divmod(e, 32)
        ib, l = divmod(slot, 4)
        blocks[b, 0:2] = FP16_ONE
        blocks[b, 2 + slot] = e & 0xFF
        qh = int(blocks[b, 34 + 2 * ib]) | int(blocks[b, 35 + 2 * ib]) << 8
        put_u16(blocks[b], 34 + 2 * ib, qh | (e >> 8) << (3 * l))
    y = deq("IQ1_S", blocks).reshape(2048, 8)
    return integral((y - 0.125) * 1, "iq1_s grid")


# ---- an independent dequantizer from the derived tables, checked against the reference ---------

def f16(blocks, off):
    return blocks[:, off:off + 2].copy().view(np.float16).astype(np.float32).reshape(-1)


def u16s(blocks, off, n):
    return blocks[:, off:off + 2 * n].copy().view("<u2").astype(np.int64)


def u32s(blocks, off, n):
    return blocks[:, off:off + 4 * n].copy().view("<u4").astype(np.int64)


def sign_of(mask, j):
    return np.where((mask >> j) & 1, np.float32(-1), np.float32(1))


def ours_iq2(blocks, kind, t):
    """iq2_xxs / iq2_xs / iq2_s: 8 groups of 32, 4 grid entries of 8 values each."""
    n = blocks.shape[0]
    y = np.zeros((n, QK_K), np.float32)
    d = f16(blocks, 0)
    for ib in range(8):
        for l in range(4):
            if kind == "xxs":
                w = u32s(blocks, 2 + 8 * ib, 2)
                idx = (w[:, 0] >> (8 * l)) & 0xFF
                mask = np.array(t["ksigns"])[(w[:, 1] >> (7 * l)) & 127]
                s = w[:, 1] >> 28
                grid = t["iq2xxs"]
            elif kind == "xs":
                q = u16s(blocks, 2 + 8 * ib + 2 * l, 1)[:, 0]
                idx, mask = q & 511, np.array(t["ksigns"])[q >> 9]
                s = (blocks[:, 66 + ib].astype(np.int64) >> (4 * (l // 2))) & 15
                grid = t["iq2xs"]
            else:
                qh = blocks[:, 66 + ib].astype(np.int64)
                idx = blocks[:, 2 + 4 * ib + l].astype(np.int64) | ((qh >> (2 * l)) & 3) << 8
                mask = blocks[:, 34 + 4 * ib + l].astype(np.int64)
                s = (blocks[:, 74 + ib].astype(np.int64) >> (4 * (l // 2))) & 15
                grid = t["iq2s"]
            dl = d * (2 * s + 1).astype(np.float32) * np.float32(0.125)
            for j in range(8):
                g = grid[idx, j].astype(np.float32)
                y[:, 32 * ib + 8 * l + j] = dl * g * sign_of(mask, j)
    return y


def ours_iq3xxs(blocks, t):
    n = blocks.shape[0]
    y = np.zeros((n, QK_K), np.float32)
    d = f16(blocks, 0)
    for ib in range(8):
        w = u32s(blocks, 66 + 4 * ib, 1)[:, 0]
        dl = d * (2 * (w >> 28) + 1).astype(np.float32) * np.float32(0.25)
        for l in range(4):
            mask = np.array(t["ksigns"])[(w >> (7 * l)) & 127]
            for h in range(2):
                idx = blocks[:, 2 + 8 * ib + 2 * l + h].astype(np.int64)
                for j in range(4):
                    g = t["iq3xxs"][idx, j].astype(np.float32)
                    y[:, 32 * ib + 8 * l + 4 * h + j] = dl * g * sign_of(mask, 4 * h + j)
    return y


def ours_iq3s(blocks, t):
    n = blocks.shape[0]
    y = np.zeros((n, QK_K), np.float32)
    d = f16(blocks, 0)
    for ib in range(8):
        s = (blocks[:, 106 + ib // 2].astype(np.int64) >> (4 * (ib % 2))) & 15
        dl = d * (2 * s + 1).astype(np.float32)
        qh = blocks[:, 66 + ib].astype(np.int64)
        for l in range(4):
            mask = blocks[:, 74 + 4 * ib + l].astype(np.int64)
            for h in range(2):
                k = 2 * l + h
                idx = blocks[:, 2 + 8 * ib + k].astype(np.int64) | ((qh >> k) & 1) << 8
                for j in range(4):
                    g = t["iq3s"][idx, j].astype(np.float32)
                    y[:, 32 * ib + 8 * l + 4 * h + j] = dl * g * sign_of(mask, 4 * h + j)
    return y


def ours_iq1s(blocks, t):
    n = blocks.shape[0]
    y = np.zeros((n, QK_K), np.float32)
    d = f16(blocks, 0)
    for ib in range(8):
        qh = u16s(blocks, 34 + 2 * ib, 1)[:, 0]
        dl = d * (2 * ((qh >> 12) & 7) + 1).astype(np.float32)
        delta = np.where(qh & 0x8000, np.float32(-0.125), np.float32(0.125))
        for l in range(4):
            idx = blocks[:, 2 + 4 * ib + l].astype(np.int64) | ((qh >> (3 * l)) & 7) << 8
            for j in range(8):
                g = t["iq1s"][idx, j].astype(np.float32)
                y[:, 32 * ib + 8 * l + j] = dl * (g + delta)
    return y


def ours_iq1m(blocks, t):
    n = blocks.shape[0]
    y = np.zeros((n, QK_K), np.float32)
    sc = u16s(blocks, 48, 4)
    dbits = (sc[:, 0] >> 12) | (sc[:, 1] >> 8) & 0xF0 | (sc[:, 2] >> 4) & 0xF00 | sc[:, 3] & 0xF000
    d = dbits.astype(np.uint16).view(np.float16).astype(np.float32)
    for ib in range(8):
        for l in range(4):
            s = (sc[:, ib // 2] >> (6 * (ib % 2) + 3 * (l // 2))) & 7
            dl = d * (2 * s + 1).astype(np.float32)
            qh = blocks[:, 32 + 2 * ib + l // 2].astype(np.int64) >> (4 * (l % 2))
            idx = blocks[:, 4 * ib + l].astype(np.int64) | (qh & 7) << 8
            delta = np.where(qh & 8, np.float32(-0.125), np.float32(0.125))
            for j in range(8):
                g = t["iq1s"][idx, j].astype(np.float32)
                y[:, 32 * ib + 8 * l + j] = dl * (g + delta)
    return y


def random_blocks(rng, n, nbytes, d_offsets):
    """Random bytes with each fp16 field at d_offsets set to a random finite, normal value."""
    b = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    for off in d_offsets:
        v = (rng.standard_normal(n) * 0.05).astype(np.float16)
        b[:, off:off + 2] = v.view(np.uint8).reshape(n, 2)
    return b


def check_against_reference(deq, t):
    rng = np.random.default_rng(12345)
    cases = [
        ("IQ2_XXS", 66, lambda b: ours_iq2(b, "xxs", t)),
        ("IQ2_XS", 74, lambda b: ours_iq2(b, "xs", t)),
        ("IQ2_S", 82, lambda b: ours_iq2(b, "s", t)),
        ("IQ3_XXS", 98, lambda b: ours_iq3xxs(b, t)),
        ("IQ3_S", 110, lambda b: ours_iq3s(b, t)),
        ("IQ1_S", 50, lambda b: ours_iq1s(b, t)),
        ("IQ1_M", 56, lambda b: ours_iq1m(b, t)),
    ]
    for name, nbytes, ours in cases:
        b = random_blocks(rng, 4096, nbytes, [] if name == "IQ1_M" else [0])
        if name == "IQ1_M":  # keep d (the top nibbles of the scales) finite: exponent < 16
            b[:, 55] &= 0xBF
        want, got = deq(name, b), ours(b)
        if not np.array_equal(want.view(np.uint32), got.view(np.uint32)):
            bad = np.argwhere(want.view(np.uint32) != got.view(np.uint32))[0]
            raise SystemExit(f"derive: {name}: our dequantizer differs from the reference at block "
                             f"{bad[0]} value {bad[1]}: {got[tuple(bad)]} vs {want[tuple(bad)]}")
        print(f"derive: {name}: 4096 random blocks dequantize bit-identically", file=sys.stderr)


# ---- output --------------------------------------------------------------------------------------

def packed(entry, bits):
    v = 0
    for j, x in enumerate(entry):
        v |= (int(x) & 0xFF) << (8 * j)
    return f"0x{v:0{bits // 4}x}"


def c_table(decl, items, per_line):
    lines = [decl + " = {"]
    for i in range(0, len(items), per_line):
        lines.append("    " + ", ".join(items[i:i + per_line]) + ",")
    lines.append("};")
    return "\n".join(lines)


def emit(t):
    out = [
        "/* quant_iq_tables.c - the i-quant codebooks, GENERATED: do not edit. Regenerate with",
        " *     /usr/bin/python3 tools/derive_iq_tables.py --gguf-py LLAMA_CPP/gguf-py",
        " *         -o common/quant_iq_tables.c",
        " * (LLAMA_CPP: a llama.cpp checkout, 34af94c here), which derives every entry by dequantizing",
        " * crafted blocks with the reference (gguf-py) and checks the tables bit for bit on random",
        " * blocks of every type. Entry e of a grid packs its values little-endian, value j in byte j",
        " * (int8 for the iq1 grid). */",
        '#include "quant_iq.h"',
        "",
        "/* ksigns: sign index (7 bits) -> mask of 8 sign bits (bit j negates value j) */",
        c_table("const uint8_t quant_iq_ksigns[128]", [f"0x{v:02x}" for v in t["ksigns"]], 16),
        "",
        "/* the same as multipliers for the SIMD twins: byte j = -1 (0xff) where bit j is set, else 1 */",
        c_table("const uint64_t quant_iq_ksigns64[128]",
                [packed([0xFF if (v >> j) & 1 else 1 for j in range(8)], 64) for v in t["ksigns"]],
                4),
        "",
        "/* iq2_xxs: 256 entries of 8 values */",
        c_table("const uint64_t quant_iq_grid2xxs[256]", [packed(e, 64) for e in t["iq2xxs"]], 4),
        "",
        "/* iq2_xs: 512 entries of 8 values */",
        c_table("const uint64_t quant_iq_grid2xs[512]", [packed(e, 64) for e in t["iq2xs"]], 4),
        "",
        "/* iq2_s: 1024 entries of 8 values */",
        c_table("const uint64_t quant_iq_grid2s[1024]", [packed(e, 64) for e in t["iq2s"]], 4),
        "",
        "/* iq3_xxs: 256 entries of 4 values */",
        c_table("const uint32_t quant_iq_grid3xxs[256]", [packed(e, 32) for e in t["iq3xxs"]], 8),
        "",
        "/* iq3_s: 512 entries of 4 values */",
        c_table("const uint32_t quant_iq_grid3s[512]", [packed(e, 32) for e in t["iq3s"]], 8),
        "",
        "/* iq1_s and iq1_m: 2048 entries of 8 values in {-1, 0, 1} */",
        c_table("const uint64_t quant_iq_grid1s[2048]", [packed(e, 64) for e in t["iq1s"]], 4),
        "",
    ]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf-py", required=True, help="path of gguf-py (the reference)")
    ap.add_argument("-o", "--output", required=True, help="the C file to write")
    args = ap.parse_args()
    deq = load_reference(args.gguf_py)
    t = {
        "ksigns": derive_ksigns(deq),
        "iq2xxs": derive_grid_iq2xxs(deq),
        "iq2xs": derive_grid_iq2xs(deq),
        "iq2s": derive_grid_iq2s(deq),
        "iq3xxs": derive_grid_iq3xxs(deq),
        "iq3s": derive_grid_iq3s(deq),
        "iq1s": derive_grid_iq1s(deq),
    }
    for name in ("iq2xxs", "iq2xs", "iq2s", "iq3xxs", "iq3s", "iq1s"):
        lo, hi = int(t[name].min()), int(t[name].max())
        if lo < -128 or hi > 127:
            raise SystemExit(f"derive: {name}: values {lo}..{hi} do not fit a signed byte")
        print(f"derive: {name}: {len(t[name])} entries, values {sorted(set(t[name].ravel()))}",
              file=sys.stderr)
    check_against_reference(deq, t)
    with open(args.output, "w") as f:
        f.write(emit(t))


if __name__ == "__main__":
    main()
