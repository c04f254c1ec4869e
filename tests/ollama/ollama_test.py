#!/usr/bin/env python3
"""Ollama's routes (/api/*) against the real sniperd on 127.0.0.1 with a tiny generated model: the
shapes of version, tags, ps, show, chat and generate (whole and NDJSON-streamed), and hostile
requests (each a 4xx with Ollama's {"error": "..."}, never a 5xx; the daemon still serves after).

    tests/ollama/ollama_test.py BUILD_DIR TMP_DIR

Prints "ok NAME" / "FAIL NAME: why" and "N passed, N failed, N skipped". Standard library only."""
import http.client
import json
import os
import sys

BUILD, TMP = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check


def lines(d, path, body):
    """POSTs body: (status, content type, [parsed NDJSON lines])."""
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    c.request("POST", path, body=json.dumps(body).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, r.getheader("Content-Type"), [json.loads(x) for x in text.split("\n") if x]


model = http_daemon.mkmodel(BUILD, TMP, "m.gguf", "--preset", "tiny", "--types", "q8_0",
                            "--seed", "5")
d = http_daemon.Daemon(BUILD, TMP, model, "--max-body", "2M")
msgs = [{"role": "user", "content": "Hello"}]
opts = {"temperature": 0, "num_predict": 6}

st, v, _ = d.request("GET", "/api/version")
check("version", st == 200 and isinstance(v["version"], str), f"{st} {v}")
st, t, _ = d.request("GET", "/api/tags")
name = t["models"][0]["name"] if st == 200 and t["models"] else ""
check("tags", st == 200 and len(t["models"]) == 1 and t["models"][0]["details"]["family"]
      == "qwen3moe", f"{st} {t}")
st, s, _ = d.request("POST", "/api/show", {"model": name})
check("show", st == 200 and s["model_info"]["general.architecture"] == "qwen3moe", f"{st} {s}")
st, w, _ = d.request("POST", "/api/chat", {"model": name, "messages": msgs, "options": opts,
                                           "stream": False})
check("chat whole", st == 200 and w["done"] and w["message"]["role"] == "assistant"
      and w["eval_count"] == 6 and w["done_reason"] == "length", f"{st} {w}")
st, ctype, ls = lines(d, "/api/chat", {"model": name, "messages": msgs, "options": opts})
check("chat streams by default (NDJSON)", st == 200 and ctype == "application/x-ndjson"
      and len(ls) > 1 and all(not x["done"] for x in ls[:-1]) and ls[-1]["done"]
      and "".join(x["message"]["content"] for x in ls) == w["message"]["content"],
      f"{st} {ctype} {ls[-2:]}")
st, g, _ = d.request("POST", "/api/generate", {"model": name, "prompt": "Hi", "options": opts,
                                               "stream": False, "system": "Be terse."})
check("generate", st == 200 and g["done"] and isinstance(g["response"], str)
      and g["eval_count"] == 6, f"{st} {g}")
st, g, _ = d.request("POST", "/api/generate", {"model": name, "prompt": "Hi", "raw": True,
                                               "options": opts, "stream": False})
check("generate raw", st == 200 and g["prompt_eval_count"] <= 3, f"{st} {g}")
st, g, _ = d.request("POST", "/api/generate", {"model": name})
check("generate without a prompt loads", st == 200 and g["done_reason"] == "load", f"{st} {g}")

big = "x" * (1 << 20 | 1)
bad = [
    ("/api/chat", b"{", 400), ("/api/chat", b"[]", 400), ("/api/generate", b"", 400),
    ("/api/chat", {"model": name}, 400),
    ("/api/chat", {"messages": []}, 400),
    ("/api/chat", {"messages": "hi"}, 400),
    ("/api/chat", {"messages": [5]}, 400),
    ("/api/chat", {"messages": [{"role": "wizard", "content": "x"}]}, 400),
    ("/api/chat", {"messages": [{"role": "user", "content": 5}]}, 400),
    ("/api/chat", {"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, 400),
    ("/api/chat", {"messages": [{"role": "user", "content": "x", "frob": 1}]}, 400),
    ("/api/chat", {"messages": [{"role": "tool", "content": "x"}]}, 400),
    ("/api/chat", {"messages": [{"role": "assistant", "content": "",
                                 "tool_calls": [{"function": {"name": "f"}}]}]}, 400),
    ("/api/chat", {"messages": msgs, "options": {"mirostat": 2}}, 400),
    ("/api/chat", {"messages": msgs, "options": {"temperature": "hot"}}, 400),
    ("/api/chat", {"messages": msgs, "options": {"stop": "x"}}, 400),
    ("/api/chat", {"messages": msgs, "options": 5}, 400),
    ("/api/chat", {"messages": msgs, "format": "yaml"}, 400),
    ("/api/chat", {"messages": msgs, "format": {"type": "array"}}, 400),
    ("/api/chat", {"messages": msgs, "think": "very"}, 400),
    ("/api/chat", {"messages": msgs, "stream": "yes"}, 400),
    ("/api/chat", {"messages": msgs, "tools": [{"type": "web"}]}, 400),
    ("/api/chat", {"messages": msgs, "frob": 1}, 400),
    ("/api/chat", {"messages": [{"role": "user", "content": big}]}, 400),
    ("/api/chat", {"messages": [{"role": "user", "content": "word " * 5000}]}, 400),
    ("/api/chat", {"messages": [{"role": "user", "content": "y" * (3 << 20)}]}, 413),
    ("/api/generate", {"prompt": 5}, 400),
    ("/api/generate", {"prompt": "x", "suffix": "y"}, 400),
    ("/api/generate", {"prompt": "x", "images": ["aGk="]}, 400),
    ("/api/chat", {"model": "nope", "messages": msgs}, 200),  # one model: any name gets it
    ("/api/pull", {"model": "llama3"}, 400), ("/api/create", {"model": "x"}, 400),
    ("/api/delete", {"model": name}, 400), ("/api/embed", {"model": name, "input": "x"}, 400),
]
for path, body, want in bad:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if isinstance(body, dict) and path == "/api/chat" and want == 200:
        body["stream"] = False
        body["options"] = {"num_predict": 1}
        raw = json.dumps(body).encode()
    try:
        st, g, _ = d.request("DELETE" if path == "/api/delete" else "POST", path, raw=raw)
    except OSError:  # the daemon may close a connection whose body it refused unread
        st, g = (413, {"error": "closed"}) if want == 413 else (0, None)
    label = body if isinstance(body, bytes) else json.dumps(body)[:60]
    # (413 comes from the HTTP layer, before any route: OpenAI's error shape)
    ok = st == want and isinstance(g, dict) and (want == 200 or isinstance(g.get("error"), str)
                                                 or (want == 413 and "error" in g))
    check(f"bad: {path} {label}: {want}", ok, f"{st} {str(g)[:200]}")
for method, path, want in [("GET", "/api/chat", 405), ("POST", "/api/tags", 405),
                           ("GET", "/api/nope", 404), ("GET", "/api/../v1/models", 404)]:
    st, g, _ = d.request(method, path)
    check(f"bad: {method} {path}: {want}", st == want and isinstance(g.get("error"), str),
          f"{st} {g}")
st, w, _ = d.request("POST", "/api/chat", {"messages": msgs, "options": opts, "stream": False})
check("serves after the hostile requests", st == 200 and w["done"], f"{st} {w}")
rc, log = d.stop()
check("daemon stopped cleanly", rc == 0, log[-500:])
sys.exit(checks.finish())
