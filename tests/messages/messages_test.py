#!/usr/bin/env python3
"""POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API) against the real
sniperd on 127.0.0.1 with a tiny generated model: the message and event shapes, a stream equal to
the whole reply, the prompt cache in usage, count_tokens, stop sequences, both key headers, and
hostile requests (every one a 4xx in Anthropic's error shape, the daemon still serving after).

    tests/messages/messages_test.py BUILD_DIR TMP_DIR

Prints "ok NAME" / "FAIL NAME: why" and ends with "N passed, N failed, N skipped". Standard
library only."""
import json
import os
import random
import sys

BUILD, TMP = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check
KEY = "m-key"
H = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


def anthropic_error(st, body, etype="invalid_request_error"):
    """A 4xx whose body is {"type":"error","error":{"type":etype,"message":...}}."""
    e = body.get("error") if isinstance(body, dict) else None
    return (400 <= st < 500 and body.get("type") == "error" and isinstance(e, dict)
            and e.get("type") == etype and isinstance(e.get("message"), str) and e["message"])


def events(d, body, headers=H):
    """POSTs a streaming request; returns (status, [(event, data)])."""
    return d.events("/v1/messages", dict(body, stream=True), headers, timeout=120)


def assemble(evs):
    """The message a stream of events builds (as the SDKs' stream helpers do)."""
    msg = None
    for name, data in evs:
        if name != data.get("type"):
            return None
        if name == "message_start":
            msg = data["message"]
        elif name == "content_block_start":
            if data["index"] != len(msg["content"]):
                return None
            msg["content"].append(dict(data["content_block"]))
        elif name == "content_block_delta":
            b, dl = msg["content"][data["index"]], data["delta"]
            key = {"text_delta": "text", "thinking_delta": "thinking",
                   "input_json_delta": "partial_json"}[dl["type"]]
            b[key if key != "partial_json" else "_json"] = b.get(
                key if key != "partial_json" else "_json", "") + dl[key]
        elif name == "content_block_stop":
            b = msg["content"][data["index"]]
            if "_json" in b:
                b["input"] = json.loads(b.pop("_json"))
        elif name == "message_delta":
            msg.update(data["delta"])
            msg["usage"].update(data["usage"])
    return msg


model = http_daemon.mkmodel(BUILD, TMP, "m.gguf", "--preset", "tiny", "--types", "q8_0", "--seed",
                            "11")
d = http_daemon.Daemon(BUILD, TMP, model, "--api-key", KEY)
check("daemon starts", d.port is not None)
if d.port is None:
    sys.exit(checks.finish())


def post(body, path="/v1/messages", headers=H, raw=None):
    st, b, _ = d.request("POST", path, body, headers=headers, raw=raw)
    return st, b


# ---- shapes
base = {"model": "any-name", "max_tokens": 12, "temperature": 0, "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello there"}]}
st, m = post(base)
ok = (st == 200 and m["type"] == "message" and m["role"] == "assistant"
      and m["id"].startswith("msg_") and isinstance(m["model"], str)
      and [b["type"] for b in m["content"]] == ["text"] and m["content"][0]["text"]
      and m["stop_reason"] in ("end_turn", "max_tokens") and m["stop_sequence"] is None
      and set(m["usage"]) == {"input_tokens", "output_tokens", "cache_read_input_tokens",
                              "cache_creation_input_tokens"})
check("message shape", ok, f"{st} {m}")
first_total = m["usage"]["input_tokens"] + m["usage"]["cache_read_input_tokens"] if ok else -1
check("output_tokens within max_tokens", ok and 0 < m["usage"]["output_tokens"] <= 12, f"{m}")

st, m2 = post(base)
check("a second identical call reads the prompt cache",
      st == 200 and m2["usage"]["cache_read_input_tokens"] > 0
      and m2["usage"]["input_tokens"] + m2["usage"]["cache_read_input_tokens"] == first_total
      and m2["content"] == m["content"], f"{m2.get('usage')} vs {first_total}")

count_body = {k: v for k, v in base.items() if k in ("model", "system", "messages")}
st, ct = post(count_body, "/v1/messages/count_tokens")
check("count_tokens equals the prompt tokens", st == 200 and ct == {"input_tokens": first_total},
      f"{st} {ct} {first_total}")

st, evs = events(d, base)
names = [e for e, _ in evs]
check("stream event order",
      st == 200 and names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta",
                                                                          "message_stop"]
      and "content_block_start" in names and "content_block_stop" in names, f"{st} {names}")
sm = assemble(evs)
check("the stream assembles into the same message",
      sm is not None and sm["content"] == m["content"] and sm["stop_reason"] == m["stop_reason"]
      and sm["usage"]["output_tokens"] == m["usage"]["output_tokens"], f"{sm} vs {m}")

# stop sequences: a piece of the greedy reply ends it there
text = m["content"][0]["text"]
cut = next((i for i in range(2, len(text) - 1)
            if text[i:i + 2].isascii() and text[i:i + 2].isalpha()), None)
if cut is not None:
    stop = text[cut:cut + 2]
    st, s = post(dict(base, stop_sequences=[stop, "zzzz-never"]))
    check("stop_sequence ends the reply and is named",
          st == 200 and s["stop_reason"] == "stop_sequence" and s["stop_sequence"] == stop
          and "".join(b.get("text", "") for b in s["content"]) == text[:text.index(stop)],
          f"{stop!r} {s}")
else:
    checks.skip("stop_sequence: the greedy reply has no usable piece")

# tool_result answering a tool_use of the previous assistant message
tools = [{"name": "get_weather", "description": "Weather of a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
turn = [{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should call the tool.", "signature": "x"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C, sunny"},
            {"type": "text", "text": "Thanks"}]}]
st, r = post({"model": "m", "max_tokens": 4, "tools": tools, "messages": turn})
check("a tool_result turn", st == 200 and r["type"] == "message", f"{st} {r}")
st, r = post({"model": "m", "max_tokens": 4, "tools": tools, "messages": turn,
              "tool_choice": {"type": "tool", "name": "get_weather"}})
tu = [b for b in r.get("content", []) if b.get("type") == "tool_use"] if st == 200 else []
check("a forced tool_use (its input an object)",
      st == 200 and r["stop_reason"] in ("tool_use", "max_tokens")
      and (r["stop_reason"] != "tool_use" or (len(tu) == 1 and tu[0]["name"] == "get_weather"
                                              and isinstance(tu[0]["input"], dict)
                                              and tu[0]["id"].startswith("toolu_"))),
      f"{st} {r}")
st, r = post(dict(base, messages=base["messages"] + [
    {"role": "system", "content": "A reminder mid-conversation."},
    {"role": "user", "content": [{"type": "text", "text": "More", "cache_control": {
        "type": "ephemeral"}}]}],
    system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    metadata={"user_id": "u"}, thinking={"type": "adaptive"}, output_config={"effort": "high"},
    context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}))
check("Claude Code's fields (system blocks, cache_control, mid-conversation system, adaptive "
      "thinking, output_config, context_management)", st == 200, f"{st} {r}")
st, r = post(dict(base, max_tokens=1 << 20))
check("max_tokens above the context is capped by it", st == 200 and r["type"] == "message",
      f"{st} {r}")

# ---- keys
st, r = post(base, headers={"anthropic-version": "2023-06-01"})
check("no key: 401 authentication_error", st == 401 and anthropic_error(st, r,
                                                                       "authentication_error"),
      f"{st} {r}")
st, r = post(base, headers={"x-api-key": "wrong"})
check("a wrong x-api-key: 401", st == 401 and anthropic_error(st, r, "authentication_error"),
      f"{st} {r}")
st, r = post(dict(base, max_tokens=2), headers={"Authorization": "Bearer " + KEY})
check("Authorization: Bearer also works", st == 200, f"{st} {r}")
st, r, _ = d.request("GET", "/v1/messages", headers=H)
check("GET /v1/messages: 405 in Anthropic's shape", st == 405 and anthropic_error(st, r),
      f"{st} {r}")

# ---- hostile requests: each a 4xx in Anthropic's shape
big = "word " * (300 * 1024)  # 1.5 MB: above the per-text limit
long_prompt = "word " * 6000  # more tokens than the 4096 context
U = lambda c: {"role": "user", "content": c}  # noqa: E731
A = lambda c: {"role": "assistant", "content": c}  # noqa: E731
hostile = [
    ("malformed JSON", None, b'{"model": "x", "max_tokens": 5, "messages": ['),
    ("invalid UTF-8", None, b'{"model":"x","max_tokens":5,"messages":[{"role":"user","content":"\xff"}]}'),
    ("a body that is not an object", None, b'[1, 2, 3]'),
    ("no max_tokens", {"model": "x", "messages": [U("hi")]}, None),
    ("max_tokens 0", {"model": "x", "max_tokens": 0, "messages": [U("hi")]}, None),
    ("no model", {"max_tokens": 5, "messages": [U("hi")]}, None),
    ("no messages", {"model": "x", "max_tokens": 5}, None),
    ("empty messages", {"model": "x", "max_tokens": 5, "messages": []}, None),
    ("messages not a list", {"model": "x", "max_tokens": 5, "messages": {"role": "user"}}, None),
    ("an unknown field", dict(base, frobnicate=1), None),
    ("an unknown role", dict(base, messages=[{"role": "tool", "content": "x"}]), None),
    ("assistant first", dict(base, messages=[A("hi"), U("hi")]), None),
    ("assistant last (prefill)", dict(base, messages=[U("hi"), A("Sure")]), None),
    ("an unknown block type", dict(base, messages=[U([{"type": "hologram", "text": "x"}])]), None),
    ("a long multibyte block type (cut in the error message)",
     dict(base, messages=[U([{"type": "\u20ac" * 30, "text": "x"}])]), None),
    ("a block without a type", dict(base, messages=[U([{"text": "x"}])]), None),
    ("an image block", dict(base, messages=[U([{"type": "image", "source": {}}])]), None),
    ("empty content", dict(base, messages=[U([])]), None),
    ("content a number", dict(base, messages=[U(5)]), None),
    ("tool_result without its tool_use",
     dict(base, messages=[U([{"type": "tool_result", "tool_use_id": "toolu_x", "content": "1"}])]),
     None),
    ("tool_result naming another tool_use",
     dict(base, tools=tools, messages=[turn[0], turn[1], U([{"type": "tool_result",
                                                          "tool_use_id": "toolu_2",
                                                          "content": "1"}])]), None),
    ("tool_use with a string input",
     dict(base, messages=[U("a"), A([{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]),
                          U("b")]), None),
    ("a server tool", dict(base, tools=[{"type": "web_search_20250305", "name": "web_search"}]),
     None),
    ("a tool without input_schema", dict(base, tools=[{"name": "f"}]), None),
    ("a tool with a bad name", dict(base, tools=[{"name": "a b", "input_schema": {}}]), None),
    ("tool_choice naming a missing tool",
     dict(base, tools=tools, tool_choice={"type": "tool", "name": "nope"}), None),
    ("tool_choice any without tools", dict(base, tool_choice={"type": "any"}), None),
    ("tool_choice of an unknown type", dict(base, tools=tools, tool_choice={"type": "some"}), None),
    ("thinking with a forced tool",
     dict(base, max_tokens=2000, tools=tools, tool_choice={"type": "any"},
          thinking={"type": "enabled", "budget_tokens": 1024}), None),
    ("thinking budget below 1024", dict(base, thinking={"type": "enabled", "budget_tokens": 10}),
     None),
    ("thinking budget not below max_tokens",
     dict(base, thinking={"type": "enabled", "budget_tokens": 2048}), None),
    ("temperature above 1", dict(base, temperature=1.5), None),
    ("top_k negative", dict(base, top_k=-1), None),
    ("five stop sequences", dict(base, stop_sequences=["a", "b", "c", "d", "e"]), None),
    ("an empty stop sequence", dict(base, stop_sequences=[""]), None),
    ("stream not a boolean", dict(base, stream="yes"), None),
    ("system a number", dict(base, system=5), None),
    ("system with an image block", dict(base, system=[{"type": "image"}]), None),
    ("a text above the 1 MiB limit", dict(base, messages=[U(big)]), None),
    ("a prompt longer than the context", dict(base, messages=[U(long_prompt)]), None),
    ("output_config.format (structured output)", dict(base, output_config={"format": {}}), None),
    ("an unknown context_management edit",
     dict(base, context_management={"edits": [{"type": "summarize"}]}), None),
]
for name, body, raw in hostile:
    st, r = post(body, raw=raw)
    check("hostile: " + name, anthropic_error(st, r), f"{st} {str(r)[:300]}")
st, r = post({"model": "x", "messages": [U("a"), A("b")]}, "/v1/messages/count_tokens")
check("hostile: count_tokens with assistant last", anthropic_error(st, r), f"{st} {r}")

# random mutations of a valid body: never a 5xx, never a crash
rng = random.Random(7)
valid = json.dumps(dict(base, tools=tools, messages=turn)).encode()
worst = 0
for i in range(300):
    b = bytearray(valid)
    for _ in range(rng.randint(1, 8)):
        op, at = rng.random(), rng.randrange(len(b))
        if op < 0.4:
            b[at] = rng.choice(b'{}[]":,0a\\\xff -')
        elif op < 0.7:
            del b[at:at + rng.randint(1, 20)]
        else:
            b[at:at] = b[rng.randrange(len(b)):][:rng.randint(1, 30)]
    st, r = post(None, raw=bytes(b))
    worst = max(worst, st)
    if st >= 500 or (st >= 400 and not anthropic_error(st, r, r.get("error", {}).get("type")
                                                      if isinstance(r, dict) else "")):
        break
check("300 mutated bodies: no 5xx, every error in Anthropic's shape", worst < 500,
      f"{st} {bytes(b)[:200]!r} {r}")
st, r, _ = d.request("GET", "/health")
check("the daemon still serves after the hostile requests", st == 200, f"{st}")
rc, log = d.stop()
check("no crash in the log", "Sanitizer" not in log and "Segmentation" not in log, log[-500:])
sys.exit(checks.finish())
