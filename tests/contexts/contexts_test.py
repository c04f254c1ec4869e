#!/usr/bin/env python3
"""/v1/context end to end against the real sniperd: save a multi-turn chat's context, restart the
daemon, load it, continue: the saved tokens are cached and greedy output is identical to a run
that prefilled everything; list, delete, bad names, a context of another model (409), a corrupted
file (422); with a local moto_server (when installed): upload, delete locally, download with
load, continue (same output), progress fields, and a wrong secret answered with the store's code;
every daemon exits 0 after SIGTERM (under make check: no leak reported).

    tests/contexts/contexts_test.py BUILD_DIR TMP_DIR [S3_ENDPOINT BUCKET ACCESS_KEY SECRET_KEY]

Prints ok/FAIL lines and "N passed, N failed, N skipped". Standard library only."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402  (the Daemon helper shared with http_test.py)

BUILD, TMP = sys.argv[1], sys.argv[2]
S3 = sys.argv[3:7] if len(sys.argv) >= 7 else None
checks = http_daemon.Checks()
check = checks.check


ctxdir = os.path.join(TMP, "contexts")
model = http_daemon.mkmodel(BUILD, TMP, "ctx.gguf", "--preset", "tiny", "--types", "q8_0",
                            "--seed", "11")
other = http_daemon.mkmodel(BUILD, TMP, "other.gguf", "--preset", "tiny", "--types", "q8_0",
                            "--seed", "12")
chat = [{"role": "system", "content": "You answer about code."},
        {"role": "user", "content": "Here is a long file to remember: " + "int x = 1; " * 40},
        {"role": "assistant", "content": "I have read it."}]
turn = chat + [{"role": "user", "content": "What does it do?"}]
ask = {"messages": turn, "max_tokens": 16, "temperature": 0}

# the reference: everything prefilled by a fresh daemon
d = http_daemon.Daemon(BUILD, TMP, model, "--context-dir", ctxdir)
st, want, _ = d.request("POST", "/v1/chat/completions", ask)
check("reference completion", st == 200, f"{st} {want}")
want_text = want["choices"][0]["message"]["content"] if st == 200 else None

st, body, _ = d.request("POST", "/v1/context/save",
                        {"name": "review", "messages": chat, "metadata": {"project": "x"}})
saved_tokens = body.get("tokens", 0) if st == 200 else 0
check("save", st == 200 and saved_tokens > 100 and body["bytes"] > 0
      and os.path.exists(os.path.join(ctxdir, "review")), f"{st} {body}")
st, body, _ = d.request("GET", "/v1/context")
names = [c["name"] for c in body.get("data", [])] if st == 200 else []
check("list", st == 200 and "review" in names and body["data"][0]["tokens"] == saved_tokens,
      f"{st} {body}")
st, body, _ = d.request("GET", "/v1/context/list")
check("list (the other path)", st == 200 and body["object"] == "list", f"{st} {body}")
for bad in ["", ".hidden", "a/b", "../x", "x" * 65, "sp ace", "naïve"]:
    st, body, _ = d.request("POST", "/v1/context/save", {"name": bad, "prompt": "x"})
    check(f"bad name {bad!r} refused", st == 400 and body["error"]["param"] == "name", f"{st} {body}")
st, body, _ = d.request("POST", "/v1/context/save", {"name": "n", "prompt": "x", "colour": 1})
check("unknown field refused", st == 400 and body["error"]["param"] == "colour", f"{st} {body}")
st, body, _ = d.request("POST", "/v1/context/save", {"name": "n", "prompt": "x", "zstd": "yes"})
check("zstd not a boolean: 400", st == 400 and body["error"]["param"] == "zstd"
      and body["error"]["code"] == "invalid_type", f"{st} {body}")
st, body, _ = d.request("POST", "/v1/context/load", {"name": "absent"})
check("load of an absent context: 404", st == 404, f"{st} {body}")
checks.stopped(d, "the daemon that saved")

# a restarted daemon loads it: the saved tokens are cached, the output is the same
d = http_daemon.Daemon(BUILD, TMP, model, "--context-dir", ctxdir)
st, body, _ = d.request("POST", "/v1/context/load", {"name": "review"})
check("load after a restart", st == 200 and body["tokens"] == saved_tokens
      and body["metadata"]["messages"] == chat and body["metadata"]["metadata"] == {"project": "x"},
      f"{st} {body}")
st, got, _ = d.request("POST", "/v1/chat/completions", ask)
cached = got["usage"]["prompt_tokens_details"]["cached_tokens"] if st == 200 else -1
check("the next turn reuses all the loaded tokens", cached == saved_tokens,
      f"cached {cached} of {saved_tokens}")
check("greedy output identical to prefilling everything",
      st == 200 and got["choices"][0]["message"]["content"] == want_text,
      f"{got['choices'][0]['message']['content']!r} vs {want_text!r}" if st == 200 else st)

# corrupted and foreign contexts are refused, and the daemon goes on
with open(os.path.join(ctxdir, "review"), "rb") as f:
    data = bytearray(f.read())
data[len(data) // 2] ^= 0x5A
with open(os.path.join(ctxdir, "broken"), "wb") as f:
    f.write(data)
st, body, _ = d.request("POST", "/v1/context/load", {"name": "broken"})
check("a corrupted context: 422", st == 422 and body["error"]["code"] == "corrupt_context",
      f"{st} {body}")
st, body, _ = d.request("DELETE", "/v1/context/broken")
check("delete", st == 200 and not os.path.exists(os.path.join(ctxdir, "broken")), f"{st} {body}")
st, body, _ = d.request("DELETE", "/v1/context/broken")
check("delete of an absent context: 404", st == 404, f"{st} {body}")
st, body, _ = d.request("POST", "/v1/chat/completions", ask)
check("serves after the refusals", st == 200, f"{st}")
checks.stopped(d, "the daemon that loaded")
d = http_daemon.Daemon(BUILD, TMP, other, "--context-dir", ctxdir)
st, body, _ = d.request("POST", "/v1/context/load", {"name": "review"})
# the fingerprints: the file's (its header's bytes 16-23, little-endian; docs/formats.md) and this
# model's, read from a context this daemon saves
st2, _, _ = d.request("POST", "/v1/context/save", {"name": "other-model", "prompt": "x"})
fps = []
for name in ("review", "other-model"):
    with open(os.path.join(ctxdir, name), "rb") as f:
        fps.append(f"{int.from_bytes(f.read(24)[16:24], 'little'):016x}")
check("a context of another model: 409 naming both fingerprints", st == 409 and st2 == 200
      and body["error"]["code"] == "model_mismatch" and fps[0] != fps[1]
      and all(fp in body["error"]["message"] for fp in fps), f"{st} {body}; fingerprints {fps}")
d.request("DELETE", "/v1/context/other-model")
st, body, _ = d.request("POST", "/v1/context/upload", {"name": "review"})
check("upload without a store: 400", st == 400 and body["error"]["code"] == "no_store", f"{st} {body}")
checks.stopped(d, "the other model's daemon")

if S3 is None:
    checks.skip("no local S3 store (moto_server): upload and download are NOT checked")
else:
    endpoint, bucket, ak, sk = S3
    s3flags = ["--s3-endpoint", endpoint, "--s3-bucket", bucket, "--s3-access-key", ak,
               "--s3-region", "us-east-1"]
    d = http_daemon.Daemon(BUILD, TMP, model, "--context-dir", ctxdir, *s3flags,
                           "--s3-secret-key", sk)
    st, body, _ = d.request("POST", "/v1/context/upload", {"name": "review"})
    check("upload", st == 200 and body["bytes"] > 0, f"{st} {body}")
    st, body, _ = d.request("GET", "/v1/context")
    remote = [c["name"] for c in body.get("remote", [])] if st == 200 else []
    check("list shows the remote context", "review" in remote, f"{st} {body}")
    os.unlink(os.path.join(ctxdir, "review"))
    st, body, _ = d.request("POST", "/v1/context/download", {"name": "review", "load": "yes"})
    check("download: load not a boolean: 400", st == 400 and body["error"]["param"] == "load"
          and body["error"]["code"] == "invalid_type", f"{st} {body}")
    st, body, _ = d.request("POST", "/v1/context/download", {"name": "review", "load": True})
    check("download with load", st == 200 and body["tokens"] == saved_tokens
          and os.path.exists(os.path.join(ctxdir, "review")), f"{st} {body}")
    st, got, _ = d.request("POST", "/v1/chat/completions", ask)
    check("after download: cached and identical", st == 200
          and got["usage"]["prompt_tokens_details"]["cached_tokens"] == saved_tokens
          and got["choices"][0]["message"]["content"] == want_text, f"{st} {got}")
    st, body, _ = d.request("GET", "/v1/stats")
    check("stats carry the transfer fields", st == 200 and "transfer" in body, f"{body}")
    st, body, _ = d.request("POST", "/v1/context/download", {"name": "never-uploaded"})
    check("download of an absent object: 404", st == 404, f"{st} {body}")
    leftovers = [n for n in os.listdir(ctxdir) if n.startswith(".")]
    check("a failed download leaves no file", not leftovers, f"{leftovers}")
    checks.stopped(d, "the daemon with a store")
    d = http_daemon.Daemon(BUILD, TMP, model, "--context-dir", ctxdir, *s3flags,
                           "--s3-secret-key", "wrong" + sk)
    st, body, _ = d.request("POST", "/v1/context/upload", {"name": "review"})
    check("a wrong secret: 502 with the store's code", st == 502
          and body["error"]["code"] == "SignatureDoesNotMatch", f"{st} {body}")
    checks.stopped(d, "the daemon with a wrong secret")

sys.exit(checks.finish())
