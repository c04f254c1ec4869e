#!/usr/bin/env python3
"""POST /v1/responses, GET and DELETE /v1/responses/{id} against the real sniperd on 127.0.0.1 with
a tiny generated model: the response object's shape, the event stream's order, a call forced by
tool_choice, text.format, previous_response_id through the prompt cache, the store, and hostile
requests (each a 4xx in OpenAI's error shape, never a 5xx; the daemon still serves after).

    tests/responses/responses_test.py BUILD_DIR TMP_DIR

Prints "ok NAME" / "FAIL NAME: why" and "N passed, N failed, N skipped". Standard library only."""
import json
import os
import sys

BUILD, TMP = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check
TOOLS = [{"type": "function", "name": "get_weather", "description": "the weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def events(d, body):
    """POSTs a streaming request: (status, [(event name, data)])."""
    return d.events("/v1/responses", body)


def text_of(resp):
    return "".join(p["text"] for it in resp["output"] if it["type"] == "message"
                   for p in it["content"] if p["type"] == "output_text")


model = http_daemon.mkmodel(BUILD, TMP, "m.gguf", "--preset", "tiny", "--types", "q8_0",
                            "--seed", "5")
d = http_daemon.Daemon(BUILD, TMP, model, "--max-body", "2M")

# ---- a plain response
st, r, _ = d.request("POST", "/v1/responses", {"input": "Hello", "max_output_tokens": 12,
                                               "temperature": 0, "instructions": "Be terse."})
u = r.get("usage") or {}
check("plain: a response object", st == 200 and r["object"] == "response"
      and r["id"].startswith("resp_") and r["status"] in ("completed", "incomplete")
      and r["output"][0]["type"] == "message" and r["output"][0]["role"] == "assistant"
      and r["output"][0]["content"][0]["type"] == "output_text"
      and r["instructions"] == "Be terse." and r["max_output_tokens"] == 12, f"{st} {r}")
check("plain: usage", u.get("output_tokens") == 12 and u["total_tokens"] == u["input_tokens"] + 12
      and "cached_tokens" in u["input_tokens_details"]
      and r["incomplete_details"] == {"reason": "max_output_tokens"}, f"{u} {r['status']}")
whole = text_of(r)

# ---- streamed: the documented order, and the same text at temperature 0
st, ev = events(d, {"input": "Hello", "max_output_tokens": 12, "temperature": 0,
                    "instructions": "Be terse.", "stream": True})
names = [n for n, _ in ev]
want = ["response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added"]
tail = ["response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.incomplete"]
deltas = [e["delta"] for n, e in ev if n == "response.output_text.delta"]
check("stream: event order", st == 200 and names[:4] == want and names[-4:] == tail
      and len(deltas) >= 1 and names[4:-4] == ["response.output_text.delta"] * len(deltas),
      f"{st} {names}")
check("stream: sequence numbers and types", all(e["sequence_number"] == i and e["type"] == n
                                                for i, (n, e) in enumerate(ev)), str(ev[:3]))
final = ev[-1][1]["response"] if ev else {}
check("stream: text equals the whole reply's", "".join(deltas) == whole == text_of(final)
      and ev[-4][1]["text"] == whole, f"{''.join(deltas)!r} vs {whole!r}")
check("stream: usage at the end", (final.get("usage") or {}).get("output_tokens") == 12, str(final))

# ---- a call forced by tool_choice: its arguments are one JSON object when it completes
done_calls, bad = 0, []
for seed in range(12):
    st, r, _ = d.request("POST", "/v1/responses", {
        "input": "Weather in Paris?", "tools": TOOLS, "max_output_tokens": 64, "seed": seed,
        "tool_choice": {"type": "function", "name": "get_weather"}})
    it = r["output"][0] if st == 200 and r["output"] else {}
    if it.get("type") != "function_call" or it.get("name") != "get_weather" \
            or not it.get("call_id", "").startswith("call_"):
        bad.append(r)
    elif r["status"] == "completed":
        done_calls += 1
        try:
            if not isinstance(json.loads(it["arguments"]), dict):
                bad.append(it)
        except json.JSONDecodeError:
            bad.append(it)
check("forced call: function_call items, JSON arguments", done_calls >= 1 and not bad,
      f"{done_calls} completed; bad: {bad[:2]}")

# ---- json_schema through the JSON grammar
ok_json, bad = 0, []
for seed in range(12):
    st, r, _ = d.request("POST", "/v1/responses", {
        "input": "json please", "max_output_tokens": 64, "seed": seed,
        "text": {"format": {"type": "json_schema", "name": "x", "strict": False,
                            "schema": {"type": "object"}}}})
    if st != 200:
        bad.append(r)
    elif r["status"] == "completed":
        try:
            ok_json += isinstance(json.loads(text_of(r)), dict)
        except json.JSONDecodeError:
            bad.append(text_of(r))
check("json_schema: completed replies are objects", ok_json >= 1 and not bad,
      f"{ok_json}; {bad[:2]}")

# ---- previous_response_id: the stored conversation, through the prompt cache
st, r1, _ = d.request("POST", "/v1/responses", {"input": "Remember: blue.", "max_output_tokens": 6,
                                                "temperature": 0})
st, r2, _ = d.request("POST", "/v1/responses", {"input": "What colour?", "max_output_tokens": 6,
                                                "temperature": 0, "previous_response_id": r1["id"]})
check("previous_response_id: cached input", st == 200
      and r2["previous_response_id"] == r1["id"]
      and r2["usage"]["input_tokens_details"]["cached_tokens"] >= r1["usage"]["input_tokens"]
      and r2["usage"]["input_tokens"] > r1["usage"]["input_tokens"] + r1["usage"]["output_tokens"],
      f"{st} {r1.get('usage')} {r2}")
st, g, _ = d.request("GET", f"/v1/responses/{r2['id']}")
check("GET a stored response", st == 200 and g == r2, f"{st} {g}")
st, g, _ = d.request("DELETE", f"/v1/responses/{r1['id']}")
check("DELETE", st == 200 and g == {"id": r1["id"], "object": "response.deleted", "deleted": True},
      f"{st} {g}")
st, g, _ = d.request("GET", f"/v1/responses/{r1['id']}")
check("GET a deleted response: 404", st == 404 and g["error"]["code"] == "not_found", f"{st} {g}")
st, g, _ = d.request("POST", "/v1/responses", {"input": "x", "previous_response_id": r1["id"]})
check("unknown previous_response_id: 404", st == 404
      and g["error"]["param"] == "previous_response_id", f"{st} {g}")
st, r3, _ = d.request("POST", "/v1/responses", {"input": "x", "max_output_tokens": 1,
                                                "store": False})
st, g, _ = d.request("GET", f"/v1/responses/{r3['id']}")
check("store false: not kept", r3["store"] is False and st == 404, f"{st} {g}")

# a tool call's result in the next turn
st, r4, _ = d.request("POST", "/v1/responses", {
    "input": [{"role": "user", "content": "Weather?"},
              {"type": "function_call", "call_id": "c1", "name": "get_weather",
               "arguments": "{\"city\":\"Paris\"}"},
              {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
              {"type": "reasoning", "id": "rs_1", "summary": [],
               "content": [{"type": "reasoning_text", "text": "so"}]},
              {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
              {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                               "text": "Thanks"}]}],
    "tools": TOOLS, "max_output_tokens": 2})
check("function_call, function_call_output, reasoning items", st == 200, f"{st} {r4}")

# ---- hostile requests: the API's error shape and a 4xx, never a 5xx
big = "x" * (1 << 20 | 1)
bad_bodies = [
    ("not JSON", b"{\"input\": ", 400),
    ("not an object", b"[1, 2]", 400),
    ("empty body", b"", 400),
    ("invalid UTF-8", b"{\"input\": \"\xff\xfe\"}", 400),
    ("deep nesting", b"[" * 100000 + b"]" * 100000, 400),
    ("no input", {}, 400),
    ("input a number", {"input": 5}, 400),
    ("item not an object", {"input": [5]}, 400),
    ("unknown item type", {"input": [{"type": "item_reference", "id": "x"}]}, 400),
    ("item without type", {"input": [{"content": "x"}]}, 400),
    ("unknown role", {"input": [{"role": "wizard", "content": "x"}]}, 400),
    ("image part", {"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, 400),
    ("content a number", {"input": [{"role": "user", "content": 5}]}, 400),
    ("call output without its call", {"input": [{"type": "function_call_output",
                                                 "call_id": "nope", "output": "x"}]}, 400),
    ("function_call without name", {"input": [{"type": "function_call", "call_id": "a",
                                               "arguments": "{}"}]}, 400),
    ("unknown field", {"input": "x", "frobnicate": 1}, 400),
    ("unknown item field", {"input": [{"role": "user", "content": "x", "frob": 1}]}, 400),
    ("hosted tool", {"input": "x", "tools": [{"type": "web_search"}]}, 400),
    ("tool without name", {"input": "x", "tools": [{"type": "function"}]}, 400),
    ("tool_choice names no tool", {"input": "x", "tools": TOOLS,
                                   "tool_choice": {"type": "function", "name": "nope"}}, 400),
    ("tool_choice required without tools", {"input": "x", "tool_choice": "required"}, 400),
    ("tool_choice a number", {"input": "x", "tool_choice": 1}, 400),
    ("temperature 3", {"input": "x", "temperature": 3}, 400),
    ("max_output_tokens 0", {"input": "x", "max_output_tokens": 0}, 400),
    ("max_output_tokens a string", {"input": "x", "max_output_tokens": "9"}, 400),
    ("schema not an object type", {"input": "x", "text": {"format": {
        "type": "json_schema", "name": "n", "schema": {"type": "array"}}}}, 400),
    ("unknown format", {"input": "x", "text": {"format": {"type": "yaml"}}}, 400),
    ("bad effort", {"input": "x", "reasoning": {"effort": "max"}}, 400),
    ("stream_options without stream", {"input": "x", "stream_options": {}}, 400),
    ("background", {"input": "x", "background": True}, 400),
    ("truncation auto", {"input": "x", "truncation": "auto"}, 400),
    ("include an unknown value", {"input": "x", "include": ["file_search_call.results"]}, 400),
    ("metadata not strings", {"input": "x", "metadata": {"a": 1}}, 400),
    ("previous_response_id a number", {"input": "x", "previous_response_id": 5}, 400),
    ("text above 1 MiB", {"input": big}, 400),
    ("too many items", {"input": [{"role": "user", "content": "x"}] * 4097}, 400),
    ("context exceeded", {"input": "word " * 5000}, 400),
    ("body above --max-body", {"input": "y" * (3 << 20)}, 413),
]
for name, body, want in bad_bodies:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        st, g, _ = d.request("POST", "/v1/responses", raw=raw)
    except OSError as e:  # the daemon may close a connection whose body it refused unread
        st, g = (413, {"error": {"message": "closed"}}) if want == 413 else (0, str(e))
    check(f"bad: {name}: {want}", st == want and isinstance(g, dict)
          and isinstance(g.get("error", {}).get("message"), str), f"{st} {str(g)[:200]}")
for method, path, want in [("PUT", "/v1/responses", 405), ("GET", "/v1/responses", 405),
                           ("POST", "/v1/responses/resp_1", 405),
                           ("GET", "/v1/responses/resp_nope", 404),
                           ("DELETE", "/v1/responses/resp_nope", 404),
                           ("GET", "/v1/responses/..%2F..%2Fetc", 404),
                           ("GET", "/v1/responses/" + "a" * 300, 404)]:
    st, g, _ = d.request(method, path)
    check(f"bad: {method} {path[:40]}: {want}", st == want and "error" in g, f"{st} {g}")
# sampled (temperature 1): the reply may end (completed) before its 2 tokens (incomplete)
st, r, _ = d.request("POST", "/v1/responses", {"input": "still there?", "max_output_tokens": 2})
check("serves after the hostile requests",
      st == 200 and r["status"] in ("incomplete", "completed") and r["usage"]["output_tokens"] >= 1,
      f"{st} {r}")
rc, log = d.stop()
check("daemon stopped cleanly", rc == 0, log[-500:])
sys.exit(checks.finish())
