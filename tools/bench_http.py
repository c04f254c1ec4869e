#!/usr/bin/env python3
"""bench_http.py - the daemon under concurrent clients: requests/s and time to first token.

    tools/bench_http.py SNIPERD MODEL [--clients 1,4,8] [--requests 16] [--max-tokens 32]

Starts `SNIPERD -m MODEL --port 0`, then for each client count runs that many threads, each
sending --requests streaming chat completions (a short distinct conversation each, temperature 0),
and prints requests/s, tokens/s and the p50 / p95 time to the first content chunk. One engine
serves one request at a time, so time to first token grows with the queue: that is what this
measures. A benchmark, not a test: nothing is asserted. Standard library only."""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def start(sniperd, model):
    log = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen([sniperd, "-m", model, "--port", "0", "--queue", "64"],
                         stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 120
    while time.time() < deadline:
        log.seek(0)
        text = log.read()
        m = re.search(r"listening on http://[^:]+:(\d+)", text)
        if m and "ready" in text:
            return p, int(m.group(1))
        if p.poll() is not None:
            sys.exit(f"bench_http: sniperd exited: {text}")
        time.sleep(0.1)
    p.kill()
    sys.exit("bench_http: sniperd did not become ready")


def one_request(port, i, max_tokens):
    """Returns (seconds to the first content chunk, seconds in all, completion tokens)."""
    body = {"messages": [{"role": "user", "content": f"Question number {i}: tell me a story."}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    first, tokens, buf = None, 0, b""
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
                tokens = d["usage"]["completion_tokens"]
            if first is None and d["choices"] and (d["choices"][0]["delta"].get("content")
                                                   or d["choices"][0].get("finish_reason")):
                first = time.perf_counter() - t0
    c.close()
    return first if first is not None else time.perf_counter() - t0, time.perf_counter() - t0, tokens


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
    return len(results) / wall, sum(r[2] for r in results) / wall, statistics.median(ttft), p95


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sniperd")
    ap.add_argument("model")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    a = ap.parse_args()
    p, port = start(a.sniperd, a.model)
    try:
        one_request(port, -1, 4)  # warm-up
        print(f"| clients | requests | requests/s | tokens/s | TTFT p50 ms | TTFT p95 ms |")
        print(f"|---|---|---|---|---|---|")
        for n in [int(x) for x in a.clients.split(",")]:
            rps, tps, p50, p95 = run(port, n, a.requests, a.max_tokens)
            print(f"| {n} | {n * a.requests} | {rps:.2f} | {tps:.1f} | {1e3 * p50:.1f} | "
                  f"{1e3 * p95:.1f} |", flush=True)
    finally:
        p.terminate()
        p.wait(30)


if __name__ == "__main__":
    main()
