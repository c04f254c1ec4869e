#!/usr/bin/env python3
"""Parallel slots end to end, against the real sniperd on 127.0.0.1 with tiny generated models:

- eight requests of mixed prompt lengths (greedy and seeded sampling, chat and completions,
  streamed and not) sent at once to a daemon with --parallel 4 give exactly what each gives alone
  (one at a time, to a one-slot daemon); the steps really carried several sequences (/v1/stats);
- the same with experts streamed under the smallest RAM budget that holds four slots, for a moe
  (with 128 experts of 256: 104 MiB of experts against a 69 MiB budget, so the cache is full) and
  a hybrid (Qwen3.5) model, and for gpt-oss with steps of 8 tokens, so that its sliding-window
  rings (16 - 1 + 8 rows) wrap in every slot; the daemon's peak resident set (VmHWM) stays under
  the budget;
- a client that goes away ends its job: on a one-slot daemon the request queued behind it runs,
  and the departed job stopped far short of its max_tokens;
- /v1/stats and /metrics show the slots; --parallel out of range is refused; every daemon exits 0
  after SIGTERM.

    tests/parallel/parallel_test.py BUILD_DIR TMP_DIR

Prints one line per check and ends with "N passed, N failed, N skipped". Standard library only."""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

BUILD, TMP = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check
SLOTS = 4


def daemon(model, *args):
    return http_daemon.Daemon(BUILD, TMP, model, "--ctx-size", "512", *args)


def requests_for(n_vocab_text):
    """Eight requests: prompts from a few words to a few hundred tokens; even ones greedy, odd ones
    sampled with a seed; some streamed, some completions."""
    words = n_vocab_text.split()
    out = []
    for i in range(8):
        text = " ".join(words[: 3 + 29 * i % 90])  # up to ~400 tokens of the tiny vocabulary
        body = {"max_tokens": 24 + 5 * i, "temperature": 0 if i % 2 == 0 else 0.9}
        if i % 2:
            body["seed"] = 100 + i
        if i % 3 == 2:
            body["prompt"] = text
            path = "/v1/completions"
        else:
            body["messages"] = [{"role": "user", "content": text}]
            path = "/v1/chat/completions"
        out.append((path, body, i % 4 == 1))
    return out


def answer(d, path, body, stream):
    """The text (and finish reason) of one request; streamed ones are reassembled from deltas."""
    if not stream:
        st, r, _ = d.request("POST", path, body, timeout=600)
        if st != 200:
            return f"HTTP {st}: {r}"
        c = r["choices"][0]
        return (c.get("message", {}).get("content") if "message" in c else c["text"],
                c["finish_reason"])
    b = dict(body, stream=True)
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=600)
    c.request("POST", path, body=json.dumps(b).encode(), headers={"Content-Type": "application/json"})
    text, finish = "", None
    resp = c.getresponse()
    if resp.status != 200:
        return f"HTTP {resp.status}: {resp.read()!r}"
    for block in resp.read().decode().split("\n\n"):
        if not block.startswith("data: ") or block == "data: [DONE]":
            continue
        ch = json.loads(block[6:])["choices"][0]
        text += (ch.get("delta", {}).get("content") or "") if "delta" in ch else ch.get("text", "")
        finish = ch.get("finish_reason") or finish
    c.close()
    return text, finish


def side_by_side(d, reqs):
    """Sends every request at once (one thread each); returns their answers in order."""
    got = [None] * len(reqs)

    def one(i):
        try:
            got[i] = answer(d, *reqs[i])
        except Exception as e:  # noqa: BLE001 - reported as a mismatch
            got[i] = f"error: {e}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return got


TEXT = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
REQS = requests_for(TEXT)


def check_same(name, model, alone_args, par_args):
    """Each request alone on a one-slot daemon, then all at once on a SLOTS-slot one."""
    d1 = daemon(model, *alone_args)
    check(f"{name}: one-slot daemon starts", d1.port is not None,
          "" if d1.port else d1.stop()[1][-400:])
    alone = [answer(d1, *r) for r in REQS] if d1.port else []
    if d1.port:
        checks.stopped(d1, f"{name}: the one-slot daemon")
    dp = daemon(model, "--parallel", str(SLOTS), *par_args)
    check(f"{name}: {SLOTS}-slot daemon starts", dp.port is not None,
          "" if dp.port else dp.stop()[1][-400:])
    if not dp.port or not alone:
        dp.stop()
        return
    got = side_by_side(dp, REQS)
    for i, (a, g) in enumerate(zip(alone, got)):
        kind = ("sampled" if i % 2 else "greedy") + (" streamed" if REQS[i][2] else "")
        check(f"{name}: request {i} ({kind}) beside 7 others = alone", a == g and
              isinstance(a, tuple) and a[0], f"alone {a!r}\n  side by side {g!r}")
    st, stats, _ = dp.request("GET", "/v1/stats")
    step = stats.get("step", {}) if st == 200 else {}
    check(f"{name}: steps carried several sequences", step.get("avg_batch_sequences", 0) > 1.2,
          f"{step}")
    check(f"{name}: every slot ran a job",
          st == 200 and all(s["jobs"] > 0 for s in stats["slots"]), f"{stats.get('slots')}")
    # under a budget the slots' KV pages follow their conversations (the rest is the expert
    # cache's); in RAM all of it is held
    kv, res = stats.get("kv_bytes", 0), stats.get("kv_resident_bytes", -1)
    streamed = "--ram-budget" in par_args
    check(f"{name}: KV pages resident " + ("as the slots' positions need" if streamed else "all"),
          (0 < res < kv) if streamed else res == kv > 0, f"kv_bytes {kv} kv_resident_bytes {res}")
    gpu = stats.get("gpu", {})
    check(f"{name}: /v1/stats says where the steps run (the CPU here: --gpu none)",
          gpu.get("on") is False and gpu.get("weights_bytes") == 0, f"gpu {gpu}")
    if streamed:
        # what the process holds, not what it says it holds: the peak resident set against the
        # budget (AddressSanitizer's shadow memory and quarantine make it meaningless there)
        budget_mib = int(par_args[par_args.index("--ram-budget") + 1].rstrip("M"))
        hwm = dp.proc_kb("VmHWM")
        if os.environ.get("SNIPER_CHECK"):
            checks.skip(f"{name}: the resident set is not measured under AddressSanitizer")
        else:
            check(f"{name}: the peak resident set stays under the budget",
                  hwm is not None and hwm <= budget_mib * 1024,
                  f"VmHWM {hwm} KiB, budget {budget_mib * 1024} KiB; "
                  f"experts {stats.get('experts')}")
            print(f"   {name}: VmHWM {hwm / 1024:.1f} MiB of a {budget_mib} MiB budget")
    checks.stopped(dp, f"{name}: the {SLOTS}-slot daemon")


moe = http_daemon.mkmodel(BUILD, TMP, "par.gguf", "--preset", "tiny", "--types", "q8_0",
                          "--seed", "41")
check_same("moe in RAM", moe, [], [])

# 128 experts of 256 per layer (104 MiB in all): far more than the minimum budget's cache holds
wide = http_daemon.mkmodel(BUILD, TMP, "parwide.gguf", "--preset", "tiny", "--types", "q8_0",
                           "--seed", "41", "--n-expert", "128", "--n-ff-exp", "256")
mb = http_daemon.min_budget(BUILD, wide, "--ctx-size", "512", "--parallel", str(SLOTS))
check("moe: the minimum budget with 4 slots is named", mb is not None, "no minimum")
if mb:
    check_same("moe streamed at the minimum budget", wide, [], ["--ram-budget", f"{mb + 1}M"])

h35 = http_daemon.mkmodel(BUILD, TMP, "par35.gguf", "--preset", "tiny-qwen35moe", "--types",
                          "q4_k_m", "--seed", "43")
mb35 = http_daemon.min_budget(BUILD, h35, "--ctx-size", "512", "--parallel", str(SLOTS))
check("qwen35moe: the minimum budget with 4 slots is named", mb35 is not None, "no minimum")
if mb35:
    check_same("qwen35moe streamed at the minimum budget", h35, [],
               ["--ram-budget", f"{mb35 + 1}M"])

oss = http_daemon.mkmodel(BUILD, TMP, "paross.gguf", "--preset", "tiny-gpt-oss", "--types",
                          "q8_0", "--seed", "47")
OSS_ARGS = ["--ctx-size", "1024", "--batch", "8"]  # harmony's system message is long
mbo = http_daemon.min_budget(BUILD, oss, "--parallel", str(SLOTS), *OSS_ARGS)
check("gpt-oss: the minimum budget with 4 slots is named", mbo is not None, "no minimum")
if mbo:
    check_same("gpt-oss streamed at the minimum budget, batch 8", oss, OSS_ARGS,
               OSS_ARGS + ["--ram-budget", f"{mbo + 1}M"])

# ---- a client that goes away frees its slot; stats and metrics show slots
# One slot, so the request sent after the departing one waits for that very slot: it runs only if
# the departed job really stops. That job must outlast the client by far even on a fast CPU, so
# its context is long, its max_tokens fills it, and its model (seed 61) answers "count" without an
# end of text for over 15,000 tokens (seed 41's ends after 578). Once the queued request is
# answered, the tokens the daemon generated in all say the departed job stopped far short.
LONG_MAX = 32000
counter = http_daemon.mkmodel(BUILD, TMP, "count.gguf", "--preset", "tiny", "--types", "q8_0",
                              "--seed", "61")
d = http_daemon.Daemon(BUILD, TMP, counter, "--ctx-size", "32768", "--parallel", "1")
if d.port:
    long_body = {"messages": [{"role": "user", "content": "count"}], "max_tokens": LONG_MAX,
                 "temperature": 0, "stream": True}
    s = socket.create_connection(("127.0.0.1", d.port))
    raw = json.dumps(long_body).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              b"\r\nContent-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)
    s.recv(4096)  # its stream started
    other = {}
    t = threading.Thread(target=lambda: other.update(r=answer(
        d, "/v1/chat/completions", dict(long_body, stream=False, max_tokens=200), False)))
    t.start()
    deadline = time.time() + 10
    while time.time() < deadline:  # the second request is queued behind the first
        st, stats, _ = d.request("GET", "/v1/stats")
        if st == 200 and stats["queue"] >= 1:
            break
        time.sleep(0.01)
    check("one slot: the second request waits in the queue", st == 200 and stats["queue"] >= 1,
          f"{stats}")
    s.close()  # goes away mid-stream
    t.join(120)
    check("the request queued behind a departed client runs in its slot",
          isinstance(other.get("r"), tuple) and other["r"][0], f"{other}")
    st, stats, _ = d.request("GET", "/v1/stats")
    done = stats["tokens"]["completion"] if st == 200 else -1
    check("the departed client's job is cancelled", st == 200 and stats["cancelled"] == 1,
          f"{stats}")
    check("... and stopped far short of its max_tokens", 0 < done < LONG_MAX // 4,
          f"{done} tokens generated in all (its max_tokens {LONG_MAX}, the other's 200)")
checks.stopped(d, "the one-slot daemon")

d = http_daemon.Daemon(BUILD, TMP, moe, "--parallel", "2")
if d.port:
    st, r, _ = d.request("POST", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    st, stats, _ = d.request("GET", "/v1/stats")
    check("stats: parallel and two slots", st == 200 and stats["parallel"] == 2 and
          len(stats["slots"]) == 2 and {"id", "state", "cached_tokens", "decode_tokens_per_s"} <=
          set(stats["slots"][0]), f"{stats}")
    check("stats: step figures", st == 200 and {"slots_active", "batch_tokens", "union_experts",
                                                 "bytes_read_per_token"} <= set(stats["step"]),
          f"{stats.get('step')}")
    st, metrics, _ = d.request("GET", "/metrics")
    check("metrics: per-slot state and step counters", st == 200 and
          'sniper_slot_state{slot="1"}' in metrics and "sniper_steps_total" in metrics and
          "sniper_slots 2" in metrics, metrics[-500:] if isinstance(metrics, str) else metrics)
checks.stopped(d, "the two-slot daemon")

r = subprocess.run([os.path.join(BUILD, "sniperd"), "-m", moe, "--parallel", "65", "--port", "0"],
                   capture_output=True, text=True, timeout=30)
check("--parallel 65 is refused", r.returncode != 0 and "--parallel" in r.stderr, r.stderr)

sys.exit(checks.finish())
