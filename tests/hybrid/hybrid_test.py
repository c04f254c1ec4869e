#!/usr/bin/env python3
"""Qwen3.5 (hybrid Gated DeltaNet + attention) end to end against the real sniperd, on models
sniper-mkmodel generates (tiny-qwen35moe, tiny-qwen35):
- chat (whole and streamed, the same text), thinking on and off, tools, JSON mode, logprobs,
  stop strings;
- the prompt cache with recurrent state: the same prompt again reuses all but its last token,
  a chat's second turn reuses the first turn's prompt at least up to its assistant header (where
  the scheduler's checkpoints are), and both answer exactly what a freshly started daemon
  answers; thinking on and off render different prompts;
- contexts: save, restart, load, the next turn reuses every saved token and answers the same;
- a RAM budget at the minimum (routed experts, or the dense FFN, streamed): the same answers;
- every daemon exits 0 after SIGTERM (under make check: no leak reported).

    tests/hybrid/hybrid_test.py BUILD_DIR TMP_DIR

Prints ok/FAIL lines and "N passed, N failed, N skipped". Standard library only."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

BUILD, TMP = sys.argv[1], sys.argv[2]
checks = http_daemon.Checks()
check = checks.check


def daemon(model, *args):
    d = http_daemon.Daemon(BUILD, TMP, model, *args)
    if d.port is None:
        check("daemon starts", False, d.stop()[1])
        sys.exit(checks.finish())
    return d


def chat(d, messages, **kw):
    body = {"messages": messages, "max_tokens": 16, "temperature": 0}
    body.update(kw)
    st, r, _ = d.request("POST", "/v1/chat/completions", body)
    return st, r


def content(r):
    return r["choices"][0]["message"].get("content") or ""


def cached(r):
    return (r.get("usage", {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)


moe = http_daemon.mkmodel(BUILD, TMP, "h35moe.gguf", "--preset", "tiny-qwen35moe", "--types",
                          "q4_k_m", "--seed", "31")
dense = http_daemon.mkmodel(BUILD, TMP, "h35.gguf", "--preset", "tiny-qwen35", "--types",
                            "q4_k_m", "--seed", "32")
sys_msg = {"role": "system", "content": "You are a careful assistant. " * 8}
turn1 = [sys_msg, {"role": "user", "content": "Tell me about recurrent state."}]

# ---- the reference answers: every request on a freshly started daemon (nothing cached)
fresh = {}
for name, msgs in [("turn1", turn1)]:
    d = daemon(moe)
    st, r = chat(d, msgs)
    fresh[name] = content(r) if st == 200 else None
    check(f"fresh daemon answers {name}", st == 200 and cached(r) == 0, f"{st} {r}")
    checks.stopped(d, f"the daemon of the fresh {name}")
turn2 = turn1 + [{"role": "assistant", "content": fresh["turn1"] or "ok"},
                 {"role": "user", "content": "And what is a checkpoint?"}]
d = daemon(moe)
st, r = chat(d, turn2)
fresh["turn2"] = content(r) if st == 200 else None
# the first turn's prompt ends with the assistant header it opened for the reply; the second turn
# renders the same header before that reply, so a checkpoint at the header or after it serves
st, r, _ = d.request("POST", "/v1/completions", {"prompt": "<|im_start|>assistant\n",
                                                   "max_tokens": 1})
header = r["usage"]["prompt_tokens"] if st == 200 else 0
check("the assistant header's tokens counted", st == 200 and header >= 2, f"{st} {r}")
checks.stopped(d, "the daemon of the fresh turn2")

# ---- one daemon through a conversation
d = daemon(moe)
st, r = chat(d, turn1)
check("chat: qwen35moe answers", st == 200 and r["object"] == "chat.completion"
      and r["usage"]["completion_tokens"] >= 1, f"{st} {r}")
check("chat: the same answer as a fresh daemon", st == 200 and content(r) == fresh["turn1"],
      f"{content(r)!r} vs {fresh['turn1']!r}")
n1 = r["usage"]["prompt_tokens"] if st == 200 else 0
st, r = chat(d, turn1)
check("the same prompt again: all but its last token cached", st == 200 and cached(r) == n1 - 1,
      f"cached {cached(r)} of {n1}")
check("... and the same answer", st == 200 and content(r) == fresh["turn1"], f"{content(r)!r}")
st, r = chat(d, turn2)
c2 = cached(r) if st == 200 else 0
check("second turn reuses the first turn's tokens up to its assistant header",
      st == 200 and n1 - header <= c2 <= n1,
      f"cached {c2}, first turn {n1} tokens, its assistant header ({header} tokens) at "
      f"{n1 - header}")
check("second turn answers exactly as a cold run", st == 200 and content(r) == fresh["turn2"],
      f"{content(r)!r} vs {fresh['turn2']!r}")

st, frames, done = d.stream({"messages": turn1, "max_tokens": 16, "temperature": 0,
                             "stream": True})
text = "".join((f["choices"][0]["delta"].get("content") or "") for f in frames if f["choices"])
check("streamed text equals the whole reply", st == 200 and done and text == fresh["turn1"],
      f"{text!r}")
n_think = {}
for think in (True, False):
    st, r = chat(d, turn1, chat_template_kwargs={"enable_thinking": think})
    check(f"thinking {'on' if think else 'off'}", st == 200, f"{st} {r}")
    n_think[think] = r["usage"]["prompt_tokens"] if st == 200 else None
# Qwen3's template thinks by default; with thinking off it closes an empty think block for the reply
check("thinking on renders the default prompt, off a longer one (the empty think block)",
      n_think[True] == n1 and n_think[False] is not None and n_think[False] > n1,
      f"prompt tokens: default {n1}, thinking on {n_think[True]}, off {n_think[False]}")
tools = [{"type": "function", "function": {"name": "get_time", "description": "the time",
                                           "parameters": {"type": "object", "properties": {}}}}]
st, base = chat(d, turn1, max_tokens=1)
st2, r = chat(d, turn1, max_tokens=1, tools=tools)
check("tools are rendered into the prompt", st == 200 and st2 == 200
      and r["usage"]["prompt_tokens"] > base["usage"]["prompt_tokens"] + 10, f"{r} vs {base}")
st, r = chat(d, [{"role": "user", "content": "json"}], max_tokens=24,
             response_format={"type": "json_object"})
check("JSON mode: the reply opens an object", st == 200 and content(r).lstrip().startswith("{"),
      f"{st} {r}")
st, r = chat(d, turn1, max_tokens=6, logprobs=True, top_logprobs=2)
lp = (r["choices"][0].get("logprobs") or {}).get("content") if st == 200 else None
check("logprobs", isinstance(lp, list) and len(lp) == r["usage"]["completion_tokens"]
      and all(t["logprob"] <= 0 and len(t["top_logprobs"]) == 2 for t in lp), f"{r}")
full = fresh["turn1"] or ""
stop = full[len(full) // 2:len(full) // 2 + 2]
st, r = chat(d, turn1, stop=[stop])
check("stop string ends the text before it", st == 200 and len(stop) == 2
      and content(r) == full[:full.find(stop)], f"stop {stop!r} in {full!r}: {r}")

# ---- Qwen3.5's own chat template: its generation prompt opens <think>, so with thinking on the
# reply is reasoning until </think>, with thinking off an empty think block is closed for it
checks.stopped(d, "the conversation's daemon")
d = daemon(moe, "--chat-template", "qwen35")
st, on = chat(d, turn1, max_tokens=8)
st2, off = chat(d, turn1, max_tokens=8, chat_template_kwargs={"enable_thinking": False})
check("qwen35 template, thinking on: the reply is reasoning",
      st == 200 and (on["choices"][0]["message"].get("reasoning_content") or "") != ""
      and not on["choices"][0]["message"].get("content"), f"{st} {on}")
check("qwen35 template, thinking off: the reply is content, the prompt longer",
      st2 == 200 and content(off) != "" and not off["choices"][0]["message"].get("reasoning_content")
      and off["usage"]["prompt_tokens"] > on["usage"]["prompt_tokens"], f"{st2} {off} vs {on}")

st, stats, _ = d.request("GET", "/v1/stats")
check("stats: KV and recurrent-state bytes", st == 200 and stats["kv_bytes"] > 0
      and stats["recurrent_state_bytes"] > 0, f"{st} {stats}")

# ---- contexts carry the recurrent state
ctxdir = os.path.join(TMP, "contexts")
checks.stopped(d, "the qwen35 template's daemon")
d = daemon(moe, "--context-dir", ctxdir)
st, r = d.request("POST", "/v1/context/save", {"name": "conv", "messages": turn1})[:2]
saved = r.get("tokens", 0) if st == 200 else 0
check("context save", st == 200 and saved > 10, f"{st} {r}")
checks.stopped(d, "the daemon that saved")
d = daemon(moe, "--context-dir", ctxdir)
st, r = d.request("POST", "/v1/context/load", {"name": "conv"})[:2]
check("context load after a restart", st == 200 and r["tokens"] == saved, f"{st} {r}")
st, r = chat(d, turn2)
check("after load: the next turn reuses every saved token", st == 200 and cached(r) >= saved - 1,
      f"cached {cached(r)} of {saved}")
check("after load: the answer is a cold run's", st == 200 and content(r) == fresh["turn2"],
      f"{content(r)!r} vs {fresh['turn2']!r}")
checks.stopped(d, "the daemon that loaded")

# ---- streamed under the smallest budget: the same answers
for name, model in [("qwen35moe experts", moe), ("qwen35 dense FFN", dense)]:
    mb = http_daemon.min_budget(BUILD, model)
    check(f"{name}: a minimum budget is named", mb is not None, "no minimum in the refusal")
    if mb is None:
        continue
    ram = daemon(model)
    st, want = chat(ram, turn2)
    checks.stopped(ram, f"{name} in RAM")
    d = daemon(model, "--ram-budget", f"{mb + 2}M")
    st2, got = chat(d, turn1)
    st3, got = chat(d, turn2)
    err = checks.stopped(d, f"{name} streamed")
    check(f"{name}: streamed under {mb + 2} MiB, the all-in-RAM answer",
          st == st2 == st3 == 200 and content(got) == content(want),
          f"{content(got)!r} vs {content(want)!r}")
    check(f"{name}: the budget line names the recurrent state", "recurrent state" in err, err[-300:])

sys.exit(checks.finish())
