#!/usr/bin/env python3
"""POST /tokenize and /detokenize (llama-server's shapes) against the real sniperd on a tiny
generated model: the ids equal the CLI's (sniperd --tokenize), pieces, special tokens parsed or
not, the round trip, and bad requests (4xx in OpenAI's shape).

    tests/tokenize/tokenize_test.py BUILD_DIR TMP_DIR

Prints "ok NAME" / "FAIL NAME: why" and ends with "N passed, N failed, N skipped". Standard
library only."""
import os
import subprocess
import sys

BUILD, TMP = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check
KEY = "t-key"
H = {"Authorization": "Bearer " + KEY}

model = http_daemon.mkmodel(BUILD, TMP, "m.gguf", "--preset", "tiny", "--types", "q8_0")
d = http_daemon.Daemon(BUILD, TMP, model, "--api-key", KEY)
check("daemon starts", d.port is not None)
if d.port is None:
    sys.exit(checks.finish())


def post(path, body, headers=H):
    st, b, _ = d.request("POST", path, body, headers=headers)
    return st, b


text = "Hello world, <|im_start|>user\nÜber 1234 tokens! 😀"
cli = subprocess.run([os.path.join(BUILD, "sniperd"), "-m", model, "--tokenize", "-p", text],
                     capture_output=True, text=True).stdout.split()
cli = [int(x) for x in cli]
st, r = post("/tokenize", {"content": text})
check("tokenize equals the CLI's ids (special tokens parsed)", st == 200 and r == {"tokens": cli},
      f"{st} {r} vs {cli}")
st, plain = post("/tokenize", {"content": text, "parse_special": False})
check("parse_special false: <|im_start|> is text",
      st == 200 and len(plain["tokens"]) > len(cli), f"{st} {plain}")
st, p = post("/tokenize", {"content": text, "with_pieces": True})
ok = st == 200 and [t["id"] for t in p["tokens"]] == cli
pieces = b""
for t in p["tokens"] if ok else []:
    pieces += t["piece"].encode() if isinstance(t["piece"], str) else bytes(t["piece"])
check("with_pieces: ids and pieces that join into the text", ok and pieces == text.encode(),
      f"{st} {p}")
st, r = post("/detokenize", {"tokens": cli})
check("detokenize gives the text back", st == 200 and r == {"content": text}, f"{st} {r}")
st, r = post("/tokenize", {"content": ""})
check("an empty text: no tokens", st == 200 and r == {"tokens": []}, f"{st} {r}")
st, r = post("/detokenize", {"tokens": [cli[-1]]})
check("half a character detokenizes to valid UTF-8", st == 200 and isinstance(r["content"], str),
      f"{st} {r}")

for name, path, body in [
        ("an id out of the vocabulary", "/detokenize", {"tokens": [1, 10 ** 9]}),
        ("a negative id", "/detokenize", {"tokens": [-1]}),
        ("an id that is a string", "/detokenize", {"tokens": ["1"]}),
        ("tokens not an array", "/detokenize", {"tokens": 5}),
        ("no content", "/tokenize", {}),
        ("content a number", "/tokenize", {"content": 5}),
        ("with_pieces not a boolean", "/tokenize", {"content": "a", "with_pieces": "yes"}),
        ("an unknown field", "/tokenize", {"content": "a", "frob": 1}),
        ("a body that is not an object", "/tokenize", [1])]:
    st, r = post(path, body)
    e = r.get("error") if isinstance(r, dict) else None
    check("bad request: " + name, st == 400 and isinstance(e, dict) and e.get("message"),
          f"{st} {r}")
st, r, _ = d.request("GET", "/tokenize", headers=H)
check("GET /tokenize: 405", st == 405, f"{st} {r}")
st, r = post("/tokenize", {"content": "a"}, headers={})
check("no key: 401", st == 401, f"{st} {r}")
st, r = post("/tokenize", {"content": "a"}, headers={"x-api-key": KEY})
check("x-api-key works too", st == 200, f"{st} {r}")
d.stop()
sys.exit(checks.finish())
