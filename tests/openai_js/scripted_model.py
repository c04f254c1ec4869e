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
"""
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def tensors(data):
    """{name: (type, ne, absolute offset)} of a GGUF file's bytes."""
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
    return {k: (t, ne, base + off) for k, (t, ne, off) in out.items()}


def main():
    src, dst, chain = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
    data = bytearray(open(src, "rb").read())
    ts = tensors(data)
    n_embd, n_vocab = ts["token_embd.weight"][1]
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

    for name in ts:
        if name.endswith((".attn_output.weight", ".attn_output.bias", ".ffn_down_exps.weight",
                          ".ffn_down_exps.bias")):
            zero(name)
    zero("token_embd.weight")
    zero("output.weight")
    for dim, (a, b) in enumerate(nexts.items()):
        put("token_embd.weight", a * n_embd + dim, 1.0)
        put("output.weight", b * n_embd + dim, 10.0)
    open(dst, "wb").write(data)


if __name__ == "__main__":
    main()
