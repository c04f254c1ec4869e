#!/usr/bin/env python3
"""How sniperd stops (server/main.c's drain, docs/scaling.md), against the real daemon on
127.0.0.1 with a tiny generated model whose answer to "count" runs past 15,000 tokens:

- SIGTERM with a stream running: /health says "draining" (503), a new request gets 503, and with
  --drain-timeout 1 the daemon stops with the stream still running ("drain timeout"), cutting it
  (no [DONE]), and exits 0;
- a second SIGTERM during a drain of 600 s stops it at once ("second signal"), cutting the stream,
  and it exits 0;
- SIGTERM with nothing running: exit 0 without waiting the drain out.

    tests/drain/drain_test.py BUILD_DIR TMP_DIR

Prints one line per check and ends with "N passed, N failed, N skipped". Standard library only."""
import json
import os
import signal
import socket
import sys
import threading
import time

BUILD, TMP = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check
model = http_daemon.mkmodel(BUILD, TMP, "drain.gguf", "--preset", "tiny", "--types", "q8_0",
                            "--seed", "61")
LONG = json.dumps({"messages": [{"role": "user", "content": "count"}], "max_tokens": 30000,
                   "temperature": 0, "stream": True}).encode()


def start_stream(port):
    """A long streamed reply read by a thread; returns (its bytes so far, a started event, the
    thread) once its first frame came."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              b"\r\nContent-Length: " + str(len(LONG)).encode() + b"\r\n\r\n" + LONG)
    got, started = bytearray(), threading.Event()

    def read():
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            got.extend(chunk)
            if b"data: {" in got:
                started.set()
        started.set()
        s.close()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    started.wait(60)
    return got, t


def wait_log(d, text, secs=30):
    end = time.time() + secs
    while time.time() < end:
        d.log.seek(0)
        if text in d.log.read():
            return True
        time.sleep(0.02)
    return False


def exit_status(d, secs=60):
    """The daemon's exit status once it exits by itself (None if it did not within secs; then it
    is killed)."""
    try:
        return d.p.wait(secs)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
        d.p.kill()
        d.p.wait()
        return None


# ---- --drain-timeout: the running stream is cut when it runs out
d = http_daemon.Daemon(BUILD, TMP, model, "--ctx-size", "32768", "--drain-timeout", "1")
check("daemon starts", d.port is not None, "" if d.port else d.stop()[1][-400:])
if d.port:
    got, reader = start_stream(d.port)
    check("the long reply streams", b"data: {" in got, bytes(got[-300:]))
    d.p.send_signal(signal.SIGTERM)
    check("SIGTERM with a request running: the daemon drains", wait_log(d, "sniperd: draining: 1"),
          d.stop()[1][-600:] if d.p.poll() is not None else "")
    try:
        hst, health, _ = d.request("GET", "/health", timeout=10)
        nst, new, _ = d.request("POST", "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
                                timeout=10)
    except OSError as e:
        hst = nst = health = new = repr(e)
    check("draining: /health answers 503 draining", hst == 503 and "draining" in str(health),
          f"{hst} {health}")
    check("draining: a new request gets 503", nst == 503, f"{nst} {new}")
    rc = exit_status(d)
    reader.join(10)
    d.log.seek(0)
    log = d.log.read()
    check("--drain-timeout 1: the daemon stops with the stream still running",
          "drain timeout: stopping with 1 request running" in log and "drained" not in log,
          log[-800:])
    check("... cutting the stream (no [DONE])", b"data: [DONE]" not in got,
          bytes(got[-200:]))
    check("... and exits 0", rc == 0, f"exit {rc}: {log[-1500:]}")

# ---- a second signal during a long drain stops at once
d = http_daemon.Daemon(BUILD, TMP, model, "--ctx-size", "32768", "--drain-timeout", "600")
if d.port:
    got, reader = start_stream(d.port)
    d.p.send_signal(signal.SIGTERM)
    draining = wait_log(d, "sniperd: draining: 1")
    check("a 600 s drain begins", draining, "")
    d.p.send_signal(signal.SIGTERM)
    rc = exit_status(d)
    reader.join(10)
    d.log.seek(0)
    log = d.log.read()
    check("a second SIGTERM stops it at once", "second signal: stopping now" in log
          and "drained" not in log, log[-800:])
    check("... cutting the stream (no [DONE])", b"data: [DONE]" not in got, bytes(got[-200:]))
    check("... and exits 0", rc == 0, f"exit {rc}: {log[-1500:]}")

# ---- nothing running: no drain
d = http_daemon.Daemon(BUILD, TMP, model, "--drain-timeout", "600")
if d.port:
    st, r, _ = d.request("POST", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    d.p.send_signal(signal.SIGTERM)
    rc = exit_status(d)
    d.log.seek(0)
    log = d.log.read()
    # (the request answered may still be counted for the moment its reply's end takes to be
    # written: then a drain begins and ends at once)
    check("SIGTERM with nothing running: no drain to wait out, exit 0", st == 200 and rc == 0
          and ("draining" not in log or "drained" in log), f"{st} exit {rc}: {log[-800:]}")

sys.exit(checks.finish())
