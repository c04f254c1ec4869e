#!/usr/bin/env python3
"""scripted_model.py - turns an all-F32 gpt-oss GGUF from sniper-mkmodel into a model whose greedy
reply is a given token chain, so that a test can drive the daemon's harmony parser with a real
forward pass (a tiny random model never writes harmony on its own).

    scripted_model.py IN.gguf OUT.gguf ID0 ID1 ... IDn

The model is a bigram table: every attention output and expert down projection (weights and
biases) is zeroed, so the residual stream is the token's embedding; token ID_i's embedding is the
unit vector of dimension i, and the output matrix maps dimension i to ID_{i+1}. So after ID0 (the
prompt's last token) greedy decoding writes ID1 .. IDn. A token may repeat only with the same
successor; the chain is refused otherwise. Standard library only.

A model whose output matrix is its embedding (Gemma 4's, tied) gets an output.weight of its own
appended (the engine reads one when present), its dense FFNs' down projections zeroed too, and its
final norm and per-layer output scales set to 1, so the same chain holds through Gemma 4's layers.
"""
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def parse(data):
    """({name: (type, ne, absolute offset)}, where the tensor infos end, the alignment) of a GGUF
    file's bytes."""
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)

    def skip_value(t):
        nonlocal pos
        if t == 8:
            pos += 8 + struct.unpack_from("<Q", data, pos)[0]
        elif t == 9:
            at, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(n):
                skip_value(at)
        else:
            pos += SCALAR[t]

    align = 32
    for _ in range(n_kv):
        klen = struct.unpack_from("<Q", data, pos)[0]
        key = data[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        t = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if key == "general.alignment":
            align = struct.unpack_from("<I", data, pos)[0]
        skip_value(t)
    out = {}
    for _ in range(n_tensors):
        nlen = struct.unpack_from("<Q", data, pos)[0]
        name = data[pos + 8:pos + 8 + nlen].decode()
        pos += 8 + nlen
        nd = struct.unpack_from("<I", data, pos)[0]
        ne = list(struct.unpack_from("<%dQ" % nd, data, pos + 4))
        pos += 4 + 8 * nd
        t, off = struct.unpack_from("<IQ", data, pos)
        pos += 12
        out[name] = (t, ne, off)
    base = (pos + align - 1) // align * align
    return {k: (t, ne, base + off) for k, (t, ne, off) in out.items()}, pos, align


def tensors(data):
    """{name: (type, ne, absolute offset)} of a GGUF file's bytes."""
    return parse(data)[0]


def with_output(data, n_embd, n_vocab):
    """data with an F32 output.weight [n_embd, n_vocab] of zeros appended (a GGUF rewritten: one
    more tensor info, the data moved to the new aligned start, the new tensor after it)."""
    n_tensors = struct.unpack_from("<Q", data, 8)[0]
    ts, info_end, align = parse(data)
    base = (info_end + align - 1) // align * align
    if any(t != 0 for t, _, _ in ts.values()):
        sys.exit("scripted_model.py: a tied model must be all F32")
    end = (len(data) - base + align - 1) // align * align
    name = b"output.weight"
    info = struct.pack("<Q", len(name)) + name + struct.pack("<IQQIQ", 2, n_embd, n_vocab, 0, end)
    head = bytearray(data[:info_end]) + info
    struct.pack_into("<Q", head, 8, n_tensors + 1)
    head += bytes((-len(head)) % align)
    body = bytes(data[base:]).ljust(end, b"\0")
    return bytearray(head + body + bytes(4 * n_embd * n_vocab))


def main():
    src, dst, chain = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
    data = bytearray(open(src, "rb").read())
    ts = tensors(data)
    n_embd, n_vocab = ts["token_embd.weight"][1]
    tied = "output.weight" not in ts
    if tied:
        data = with_output(data, n_embd, n_vocab)
        ts = tensors(data)
    nexts = {}
    for a, b in zip(chain, chain[1:]):
        if nexts.setdefault(a, b) != b:
            sys.exit("scripted_model.py: token %d is followed by both %d and %d" % (a, nexts[a], b))
    if len(nexts) > n_embd:
        sys.exit("scripted_model.py: %d tokens with a successor, more than %d dims" %
                 (len(nexts), n_embd))

    def put(name, index, value):
        t, ne, off = ts[name]
        assert t == 0, name + " is not F32"
        struct.pack_into("<f", data, off + 4 * index, value)

    def zero(name):
        t, ne, off = ts[name]
        assert t == 0, name + " is not F32"
        n = 1
        for d in ne:
            n *= d
        data[off:off + 4 * n] = bytes(4 * n)

    def ones(name):
        t, ne, off = ts[name]
        assert t == 0, name + " is not F32"
        n = 1
        for d in ne:
            n *= d
        struct.pack_into("<%df" % n, data, off, *([1.0] * n))

    for name in ts:
        if name.endswith((".attn_output.weight", ".attn_output.bias", ".ffn_down_exps.weight",
                          ".ffn_down_exps.bias")) or (tied and name.endswith(".ffn_down.weight")):
            zero(name)
        if tied and (name == "output_norm.weight" or name.endswith(".layer_output_scale.weight")):
            ones(name)
    zero("token_embd.weight")
    zero("output.weight")
    for dim, (a, b) in enumerate(nexts.items()):
        put("token_embd.weight", a * n_embd + dim, 1.0)
        put("output.weight", b * n_embd + dim, 10.0)
    open(dst, "wb").write(data)


if __name__ == "__main__":
    main()
