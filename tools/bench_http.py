#!/usr/bin/env python3
"""bench_http.py - a server under concurrent clients: aggregate and per-client decode tok/s and
time to the first token, for sniperd's --parallel slots or llama-server's -np slots on one file.

    tools/bench_http.py [--server sniperd|llama] BIN MODEL [--clients 1,2,4,8] [--requests 2]
                        [--max-tokens 64] [--cap SIZE] [--ctx 4096] [--args "..."]
    tools/bench_http.py --url HOST:PORT [--clients ...] [--requests ...] [--max-tokens ...]

For each client count N it starts BIN on MODEL with N slots of --ctx positions each (sniperd
--parallel N --ctx-size C; llama-server -np N -c N x C), waits until it answers, sends one warm-up
request, then runs N threads that each send --requests streaming chat completions one after
another (a distinct short conversation each, temperature 0), stops the server, and prints one
Markdown row: aggregate tok/s (completion tokens of all requests / wall time from the first
request to the last answer, prompts included), per-client decode tok/s (each request's tokens
after its first / the time between its first and last token, averaged), decode tok/s of all
clients (clients x per-client: the rate while they all decode, without the prompts' time), and
the p50 / p95 time to the first token. With --cap (root only) the page cache is dropped and the
server runs in a cgroup v1 memory cgroup capped at SIZE (page cache counted), as `make bench`
does. With --url the clients go to a server already running there (a balancer in front of
replicas: docs/scaling.md), each client with its own X-Session-Id.
A benchmark, not a test: nothing is asserted.
Standard library only."""
import argparse
import http.client
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CG = "/sys/fs/cgroup/memory/sniper-http-bench"


def parse_size(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)", s.strip().upper())
    if not m:
        sys.exit(f"bench_http: bad size {s!r}")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cgroup_prefix(cap):
    """The command prefix that runs a program inside the capped cgroup (made fresh), after the page
    cache is dropped; [] without a cap."""
    if not cap:
        return []
    if os.geteuid() != 0 or not os.path.isdir(os.path.dirname(CG)):
        sys.exit("bench_http: --cap needs root and a cgroup v1 memory controller")
    cgroup_remove()
    os.makedirs(CG)
    with open(os.path.join(CG, "memory.limit_in_bytes"), "w") as f:
        f.write(str(cap))
    subprocess.run(["sync"], check=False)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
    return ["sh", "-c", 'echo $$ >"$0/cgroup.procs" && exec "$@"', CG]


def cgroup_remove():
    if not os.path.isdir(CG):
        return
    for _ in range(50):
        try:
            os.rmdir(CG)
            return
        except OSError:
            time.sleep(0.1)


def cgroup_peak():
    try:
        with open(os.path.join(CG, "memory.max_usage_in_bytes")) as f:
            return int(f.read()) / (1 << 20)
    except OSError:
        return None


def start(kind, binary, model, slots, cap, extra, ctx):
    """Starts the server with `slots` slots of ctx positions each; returns (process, port, log)."""
    port = free_port()
    if kind == "sniperd":
        cmd = [binary, "-m", model, "--port", str(port), "--threads", "2", "--queue", "256",
               "--parallel", str(slots), "--ctx-size", str(ctx)]
    else:
        cmd = [binary, "-m", model, "--port", str(port), "--host", "127.0.0.1", "-t", "2",
               "-np", str(slots), "-c", str(ctx * slots), "--no-webui"]
    cmd = cgroup_prefix(cap) + cmd + shlex.split(extra)
    log = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=log, stderr=log)
    deadline = time.time() + 1800
    while time.time() < deadline:
        if p.poll() is not None:
            log.seek(0)
            sys.exit(f"bench_http: the server exited: {log.read()[-2000:]}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p, port, log
        except OSError:
            pass
        time.sleep(0.5)
    p.kill()
    sys.exit("bench_http: the server did not become ready")


HOST = "127.0.0.1"


def one_request(port, i, max_tokens):
    """Returns (seconds to the first token, seconds to the last, completion tokens)."""
    body = {"messages": [{"role": "user", "content": f"Question number {i}: tell me a story "
                                                     f"about the number {i * 7919 % 1000}."}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    c = http.client.HTTPConnection(HOST, port, timeout=7200)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json", "X-Session-Id": f"client-{i // 1000}"})
    r = c.getresponse()
    first = last = None
    tokens, chunks, buf = 0, 0, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            if not frame.startswith(b"data: ") or frame == b"data: [DONE]":
                continue
            d = json.loads(frame[6:])
            if d.get("usage"):
                tokens = d["usage"].get("completion_tokens", tokens)
            ch = d["choices"][0] if d.get("choices") else {}
            delta = ch.get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content"):
                now = time.perf_counter() - t0
                first = now if first is None else first
                last = now
                chunks += 1
    c.close()
    end = time.perf_counter() - t0
    return (first if first is not None else end, last if last is not None else end,
            tokens or chunks)


def run(port, clients, requests, max_tokens):
    results, lock = [], threading.Lock()

    def client(k):
        for j in range(requests):
            r = one_request(port, k * 1000 + j, max_tokens)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = sorted(r[0] for r in results)
    p95 = ttft[min(len(ttft) - 1, int(round(0.95 * (len(ttft) - 1))))]
    per = [(r[2] - 1) / (r[1] - r[0]) for r in results if r[2] > 1 and r[1] > r[0]]
    return (sum(r[2] for r in results) / wall, statistics.mean(per) if per else 0.0,
            statistics.median(ttft), p95, sum(r[2] for r in results))


def header(peak):
    """The table's header: decode tok/s of all clients is clients x per-client tok/s (the rate at
    which tokens stream while every client decodes; the aggregate also pays the prompts)."""
    cols = ["clients", "requests", "tokens", "aggregate tok/s", "per-client tok/s",
            "decode tok/s, all clients", "TTFT p50 ms", "TTFT p95 ms"]
    cols += ["peak MiB"] if peak else []
    return "| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|"


def row(n, requests, r):
    agg, per, p50, p95, tokens = r
    return (f"| {n} | {n * requests} | {tokens} | {agg:.2f} | {per:.2f} | {n * per:.2f} | "
            f"{1e3 * p50:.0f} | {1e3 * p95:.0f} |")


def run_url(a):
    """The rows for a server already running at a.url."""
    global HOST
    HOST, _, port = a.url.rpartition(":")
    print(f"url {a.url}")
    print(header(False))
    one_request(int(port), -1, 4)
    for n in [int(x) for x in a.clients.split(",")]:
        print(row(n, a.requests, run(int(port), n, a.requests, a.max_tokens)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=["sniperd", "llama"], default="sniperd")
    ap.add_argument("binary", nargs="?")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--url", default="", help="HOST:PORT of a running server (no BIN, MODEL)")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--cap", default="", help="memory cgroup cap, e.g. 4G (root)")
    ap.add_argument("--ctx", type=int, default=4096, help="positions per slot")
    ap.add_argument("--args", default="", help="more arguments for the server")
    a = ap.parse_args()
    if a.url:
        run_url(a)
        return
    if not a.binary or not a.model:
        ap.error("BIN and MODEL (or --url)")
    cap = parse_size(a.cap) if a.cap else 0
    print(f"{a.server} {os.path.basename(a.model)} cap={a.cap or 'none'} ctx={a.ctx}/slot "
          f"args={a.args!r}")
    print(header(True))
    for n in [int(x) for x in a.clients.split(",")]:
        p, port, log = start(a.server, a.binary, a.model, n, cap, a.args, a.ctx)
        try:
            one_request(port, -1, 4)  # warm-up: the first request's page faults and caches
            r = run(port, n, a.requests, a.max_tokens)
            peak = cgroup_peak() if cap else None
            print(row(n, a.requests, r) + f" {'%.0f' % peak if peak is not None else '-'} |",
                  flush=True)
        finally:
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            cgroup_remove()


if __name__ == "__main__":
    main()
