#!/usr/bin/env python3
"""gemma4_test.py - Gemma 4 through the real sniperd: tiny-gemma4 with sniper-mkmodel's Gemma 4-style
vocabulary (--vocab gemma4), random and scripted (tests/openai_js/scripted_model.py: greedy replies
that are given token chains). /v1/chat/completions renders Gemma 4's template (the prompt's token
count is the one of the string the template renders), stops at <turn|>, turns
<|tool_call>call:NAME{...} into OpenAI tool_calls (whole and streamed) and renders the tool's
answer back; two slots side by side, the prompt cache, logprobs, JSON mode, and a context saved,
loaded by a restarted daemon and continued as if prefilled.

    tests/gemma4/gemma4_test.py BUILD_DIR TMP_DIR

Prints ok/FAIL lines and "N passed, N failed, N skipped". Standard library only."""
import json
import os
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "http"))
import http_daemon  # noqa: E402

BUILD, TMP = sys.argv[1], sys.argv[2]
checks = http_daemon.Checks()
check = checks.check

Q = '<|"|>'
NOW = {"type": "function", "function": {"name": "now", "description": "The time",
                                        "parameters": {"type": "object", "properties": {}}}}
NOW_DECL = ("<|tool>declaration:now{description:" + Q + "The time" + Q +
            ",parameters:{type:" + Q + "OBJECT" + Q + "}}<tool|>")


def ids(model, text):
    """The ids sniperd gives text (a BOS first: the vocabulary adds one)."""
    out = subprocess.run([os.path.join(BUILD, "sniperd"), "-m", model, "--tokenize", "-p", text],
                         capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


model = http_daemon.mkmodel(BUILD, TMP, "g4.gguf", "--preset", "tiny-gemma4", "--vocab", "gemma4",
                            "--types", "f32", "--seed", "7")
# the scripted replies: after "<|turn>model\n" (thinking on, the prompt's last token "\n") the
# text "Hello world!<turn|>"; after the closed thought channel (thinking off, "<channel|>") a call
# of now with no arguments, ended by <|tool_response> (where Gemma 4 stops for the tool's answer)
reply = ids(model, "<|turn>model\nHello world!<turn|>")[len(ids(model, "<|turn>model\n")) - 1:]
call = ids(model, "<channel|><|tool_call>call:now{}<tool_call|><|tool_response>")[1:]
scripted = os.path.join(TMP, "scripted.gguf")
subprocess.run([sys.executable, os.path.join(HERE, "..", "openai_js", "scripted_model.py"),
                model, scripted, *map(str, reply + call)], check=True)

hi = [{"role": "user", "content": "Hi"}]
ask_time = [{"role": "user", "content": "What time is it?"}]
d = http_daemon.Daemon(BUILD, TMP, scripted, "--parallel", "2")
st, body, _ = d.request("POST", "/v1/chat/completions", {"messages": hi, "temperature": 0,
                                                         "max_tokens": 20})
ch = body["choices"][0] if st == 200 else {}
check("a reply ends at <turn|>, the marker not in the text",
      st == 200 and ch["message"]["content"] == "Hello world!" and ch["finish_reason"] == "stop"
      and body["usage"]["completion_tokens"] == 6, f"{st} {body}")
prompt = "<|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
check("the prompt is Gemma 4's template, a BOS before it",
      st == 200 and body["usage"]["prompt_tokens"] == len(ids(model, prompt)), f"{body}")
st, again, _ = d.request("POST", "/v1/chat/completions", {"messages": hi, "temperature": 0,
                                                          "max_tokens": 20})
cached = again["usage"]["prompt_tokens_details"]["cached_tokens"] if st == 200 else -1
check("the prompt cache serves the same prompt again",
      st == 200 and cached >= body["usage"]["prompt_tokens"] - 1
      and again["choices"][0]["message"]["content"] == "Hello world!", f"{st} {again}")

st, body, _ = d.request("POST", "/v1/chat/completions", {
    "messages": ask_time, "tools": [NOW], "enable_thinking": False, "temperature": 0,
    "max_tokens": 20})
ch = body["choices"][0] if st == 200 else {}
calls = ch.get("message", {}).get("tool_calls") or []
check("a tool call becomes OpenAI tool_calls",
      st == 200 and ch["finish_reason"] == "tool_calls" and len(calls) == 1
      and calls[0]["function"] == {"name": "now", "arguments": "{}"}
      and ch["message"]["content"] is None, f"{st} {body}")
prompt = ("<|turn>system\n" + NOW_DECL + "<turn|>\n<|turn>user\nWhat time is it?<turn|>\n"
          "<|turn>model\n<|channel>thought\n<channel|>")
check("the tools are declared in the system turn",
      st == 200 and body["usage"]["prompt_tokens"] == len(ids(model, prompt)), f"{body}")
st, frames, done = d.stream({"messages": ask_time, "tools": [NOW], "enable_thinking": False,
                             "temperature": 0, "max_tokens": 20, "stream": True})
deltas = [tc for f in frames if f["choices"]
          for tc in (f["choices"][0].get("delta") or {}).get("tool_calls") or []]
finish = [f["choices"][0]["finish_reason"] for f in frames if f["choices"]
          and f["choices"][0].get("finish_reason")]
check("a streamed tool call", st == 200 and done and deltas
      and deltas[0]["function"]["name"] == "now" and finish == ["tool_calls"], f"{frames}")
answered = ask_time + [{"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}]
st, body, _ = d.request("POST", "/v1/chat/completions", {
    "messages": answered, "tools": [NOW], "enable_thinking": False, "temperature": 0,
    "max_tokens": 2})
prompt = ("<|turn>system\n" + NOW_DECL + "<turn|>\n<|turn>user\nWhat time is it?<turn|>\n"
          "<|turn>model\n<|tool_call>call:now{}<tool_call|><|tool_response>response:now{value:" +
          Q + "12:00" + Q + "}<tool_response|>")
check("the tool's answer continues the model's turn",
      st == 200 and body["usage"]["prompt_tokens"] == len(ids(model, prompt)), f"{st} {body}")

st, body, _ = d.request("POST", "/v1/chat/completions", {"messages": hi, "temperature": 0,
                                                         "max_tokens": 20, "logprobs": True,
                                                         "top_logprobs": 2})
lp = (body["choices"][0].get("logprobs") or {}).get("content") if st == 200 else None
check("logprobs", isinstance(lp, list) and len(lp) == 6
      and "".join(t["token"] for t in lp) == "Hello world!"
      and all(t["logprob"] <= 0 and len(t["top_logprobs"]) == 2 for t in lp), f"{st} {body}")

results = [None, None]


def side(i):
    msgs = [{"role": "user", "content": f"Slot {i} says hi"}]
    results[i] = d.request("POST", "/v1/chat/completions",
                           {"messages": msgs, "temperature": 0, "max_tokens": 20})


threads = [threading.Thread(target=side, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("two slots side by side", all(r and r[0] == 200 and r[1]["choices"][0]["message"]["content"]
                                     == "Hello world!" for r in results), f"{results}")
checks.stopped(d, "the scripted daemon")

# the random model: JSON mode, and a context saved, loaded after a restart and continued
ctxdir = os.path.join(TMP, "contexts")
d = http_daemon.Daemon(BUILD, TMP, model, "--context-dir", ctxdir)
bad, stops = [], 0
for seed in range(6):
    st, body, _ = d.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "json please"}], "max_tokens": 48, "seed": seed,
        "temperature": 1, "response_format": {"type": "json_object"}})
    ch = body["choices"][0] if st == 200 else {}
    text = (ch.get("message") or {}).get("content") or ""
    # JSON may open after whitespace, which the reply's start drops: a reply cut short by
    # max_tokens may have no text yet
    if st != 200 or not (text.lstrip().startswith("{") or
                         (not text.strip() and ch["finish_reason"] == "length")):
        bad.append((st, text))
    elif ch["finish_reason"] == "stop":
        stops += 1
        try:
            json.loads(text)
        except json.JSONDecodeError:
            bad.append(text)
check("json_object: the replies are JSON", stops >= 1 and not bad,
      f"{stops} stopped; bad: {bad[:3]}")
chat = [{"role": "system", "content": "You answer about code."},
        {"role": "user", "content": "Remember this file: " + "int x = 1; " * 30},
        {"role": "assistant", "content": "I have read it."}]
ask = {"messages": chat + [{"role": "user", "content": "What does it do?"}], "max_tokens": 12,
       "temperature": 0}
st, want, _ = d.request("POST", "/v1/chat/completions", ask)
st2, body, _ = d.request("POST", "/v1/context/save", {"name": "g4", "messages": chat})
saved = body.get("tokens", 0) if st2 == 200 else 0
check("a context saved", st == 200 and st2 == 200 and saved > 50, f"{st} {st2} {body}")
checks.stopped(d, "the daemon that saved")
d = http_daemon.Daemon(BUILD, TMP, model, "--context-dir", ctxdir)
st, body, _ = d.request("POST", "/v1/context/load", {"name": "g4"})
st2, got, _ = d.request("POST", "/v1/chat/completions", ask)
cached = got["usage"]["prompt_tokens_details"]["cached_tokens"] if st2 == 200 else -1
check("loaded after a restart, its tokens reused",
      st == 200 and body["tokens"] == saved and cached == saved, f"{st} {body}; cached {cached}")
check("greedy output as if prefilled", st2 == 200 and want["choices"][0]["message"]["content"]
      == got["choices"][0]["message"]["content"], f"{got} vs {want}")
checks.stopped(d, "the daemon that loaded")
sys.exit(checks.finish())
