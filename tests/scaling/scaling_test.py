#!/usr/bin/env python3
"""Two sniperd replicas behind HAProxy (deploy/haproxy.cfg as it is), sharing a context store:
the moto S3 server when it is installed, else one context directory (said loudly).

- a conversation (X-Session-Id) stays on one replica: its second turn is served from that
  replica's prompt cache; the OpenAI "user" field keeps one on a replica too;
- the conversation is saved (uploaded on save: --upload-on-save) through the balancer;
- that replica is stopped with SIGTERM while it streams another request: the stream finishes,
  /health says "draining", new requests to it get 503, and the balancer sends the conversation's
  next turn to the other replica, which downloads the context, serves the turn with the saved
  tokens cached, and says what one replica running the whole conversation says;
- every response names its replica (X-Sniper-Replica), as /v1/stats and /metrics do.

    tests/scaling/scaling_test.py BUILD_DIR TMP_DIR

Prints one line per check and ends with "N passed, N failed, N skipped". Standard library only."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

BUILD, TMP = sys.argv[1], sys.argv[2]
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check
# the replicas' API key, from deploy/replica-1.json as it is
KEY = json.load(open(os.path.join(ROOT, "deploy", "replica-1.json")))["api_key"]
AUTH = {"Authorization": f"Bearer {KEY}"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, path, body, headers=None, timeout=120):
    """(status, parsed body, response headers) of a JSON POST."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json", **AUTH}
    h.update(headers or {})
    c.request("POST", path, body=json.dumps(body).encode(), headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    try:
        return r.status, json.loads(text), hdrs
    except json.JSONDecodeError:
        return r.status, text, hdrs


def get(port, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path, headers=AUTH)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, text


def chat(port, messages, session=None, **kw):
    body = {"messages": messages, "max_tokens": 16, "temperature": 0}
    body.update(kw)
    return post(port, "/v1/chat/completions", body,
                {"X-Session-Id": session} if session else None)


def content(r):
    return r["choices"][0]["message"]["content"]


def cached(r):
    return (r.get("usage", {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)


# ---- the store: moto (started by tests/scaling.sh: MOTO_URL ...) when it is there, else a shared
# context directory
shared_dir = os.path.join(TMP, "shared-contexts")
moto = os.environ.get("MOTO_URL")
store_env = {"SNIPER_S3_ENDPOINT": moto, "SNIPER_S3_BUCKET": "sniper-contexts",
             "SNIPER_S3_ACCESS_KEY": os.environ.get("MOTO_AK", ""),
             "SNIPER_S3_SECRET_KEY": os.environ.get("MOTO_SK", ""),
             "SNIPER_S3_REGION": "us-east-1"} if moto else {}
if not moto:
    checks.skip("moto_server is not installed: the replicas share a context directory instead "
                "of an S3 store (the store path is NOT checked)")

model = http_daemon.mkmodel(BUILD, TMP, "scale.gguf", "--preset", "tiny", "--types", "q8_0",
                            "--seed", "61")


def replica(name, port):
    ctx = shared_dir if not moto else os.path.join(TMP, f"ctx-{name}")
    cmd = [os.path.join(BUILD, "sniperd"), "-c", os.path.join(ROOT, "deploy", f"{name}.json"),
           "-m", model, "--host", "127.0.0.1", "--port", str(port), "--threads", "1",
           "--context-dir", ctx]
    log = open(os.path.join(TMP, f"{name}.err"), "w+")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SNIPER_S3_", "R2_"))}
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log,
                         env=dict(env, HOME=TMP, **store_env))
    return p, log


def wait_health(port, deadline_s=60):
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            if get(port, "/health")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


ports = {"replica-1": free_port(), "replica-2": free_port()}
procs = {n: replica(n, p) for n, p in ports.items()}
up = all(wait_health(p) for p in ports.values())
check("two replicas start from deploy/replica-*.json", up,
      "" if up else "".join(open(l.name).read()[-400:] for _, l in procs.values()))

lb, stats_port = free_port(), free_port()
env = dict(os.environ, SNIPER_LB_BIND=f"127.0.0.1:{lb}",
           SNIPER_REPLICA1=f"127.0.0.1:{ports['replica-1']}",
           SNIPER_REPLICA2=f"127.0.0.1:{ports['replica-2']}",
           SNIPER_LB_STATS=f"127.0.0.1:{stats_port}")
hlog = open(os.path.join(TMP, "haproxy.log"), "w+")
hap = subprocess.Popen(["haproxy", "-db", "-f", os.path.join(ROOT, "deploy", "haproxy.cfg")],
                       env=env, stdout=hlog, stderr=hlog)


def servers_up():
    """Replica names HAProxy has up (from its stats page's CSV)."""
    try:
        st, csv = get(stats_port, "/;csv")
    except OSError:
        return set()
    return {row.split(",")[1] for row in csv.splitlines()
            if row.startswith("replicas,replica") and ",UP," in row}


end = time.time() + 30
while time.time() < end and servers_up() != {"replica1", "replica2"}:
    time.sleep(0.1)
def stats_csv():
    try:
        return get(stats_port, "/;csv")[1]
    except OSError as e:
        return str(e)


check("HAProxy runs deploy/haproxy.cfg and sees both replicas up",
      servers_up() == {"replica1", "replica2"},
      f"{open(hlog.name).read()[-600:]}\n{stats_csv()[-800:]}")
if not up or servers_up() != {"replica1", "replica2"}:
    hap.terminate()
    for p, _ in procs.values():
        p.terminate()
    sys.exit(checks.finish())

# ---- the reference: one replica (a third daemon) runs the whole conversation
turns = ["Tell me about mixtures of experts.", "Why do they save memory?", "And how fast are they?"]
ref = http_daemon.Daemon(BUILD, TMP, model, "--threads", "1", "--api-key", KEY)
msgs, ref_answers = [], []
for t in turns:
    msgs.append({"role": "user", "content": t})
    st, r, _ = chat(ref.port, msgs)
    ref_answers.append(content(r) if st == 200 else f"HTTP {st}")
    msgs.append({"role": "assistant", "content": ref_answers[-1]})
ref.stop()

# ---- a conversation sticks to one replica, whose prompt cache serves its second turn
session, msgs = "conversation-42", []
msgs.append({"role": "user", "content": turns[0]})
st, r1, h1 = chat(lb, msgs, session)
msgs.append({"role": "assistant", "content": content(r1) if st == 200 else ""})
msgs.append({"role": "user", "content": turns[1]})
st2, r2, h2 = chat(lb, msgs, session)
home = h1.get("x-sniper-replica")
check("every response names its replica", home in ("replica-1", "replica-2") and
      h2.get("x-sniper-replica") == home, f"{h1.get('x-sniper-replica')} {h2}")
check("the second turn goes to the same replica and is cached", st2 == 200 and cached(r2) > 0,
      f"{st2} cached {cached(r2) if st2 == 200 else r2}")
check("turns answer as one replica does", content(r1) == ref_answers[0] and
      content(r2) == ref_answers[1], f"{content(r1)!r} {ref_answers[0]!r}")
other = "replica-2" if home == "replica-1" else "replica-1"
users = {post(lb, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                            "max_tokens": 2, "user": "alice"})[2]
         .get("x-sniper-replica") for _ in range(4)}
check("the OpenAI user field keeps a client on one replica", len(users) == 1, f"{users}")
st, stats = get(ports[home], "/v1/stats")
check("/v1/stats names the replica", st == 200 and json.loads(stats).get("replica") == home,
      stats[:200])
st, metrics = get(ports[home], "/metrics")
check("/metrics names the replica", f'sniper_replica_info{{replica="{home}"}} 1' in metrics,
      metrics[-300:])

# ---- saved through the balancer, uploaded on save
msgs.append({"role": "assistant", "content": content(r2)})
st, saved, hs = post(lb, "/v1/context/save", {"name": "conv-42", "messages": msgs},
                     {"X-Session-Id": session})
check("the conversation is saved on its replica", st == 200 and
      hs.get("x-sniper-replica") == home and saved.get("tokens", 0) > 0, f"{st} {saved}")
if moto:
    check("... and uploaded on save", saved.get("uploaded") is True, f"{saved}")

# ---- its replica drains: a running stream finishes, new work goes to the other replica
stream_out = {}
streaming = threading.Event()


def long_stream():
    """A stream long enough to outlast the checks below even on a fast CPU: 3,000 tokens (this
    model answers "count" without an end of text for over 15,000)."""
    c = http.client.HTTPConnection("127.0.0.1", ports[home], timeout=120)
    c.request("POST", "/v1/chat/completions", body=json.dumps(
        {"messages": [{"role": "user", "content": "count"}], "max_tokens": 3000,
         "temperature": 0, "stream": True}).encode(),
        headers={"Content-Type": "application/json", **AUTH})
    r = c.getresponse()
    stream_out["status"] = r.status
    first = r.read1(4096)
    streaming.set()
    stream_out["text"] = (first + r.read()).decode("utf-8", "replace")


t = threading.Thread(target=long_stream)
t.start()
streaming.wait(60)  # the stream is running
t_term = time.time()
procs[home][0].send_signal(signal.SIGTERM)
time.sleep(0.1)
try:
    hst, htext = get(ports[home], "/health")
except OSError as e:
    hst, htext = 0, str(e)
check("a draining replica's /health says so (503)", hst == 503 and "draining" in htext,
      f"{hst} {htext}")
try:
    nst, nr, _ = chat(ports[home], [{"role": "user", "content": "new"}])
except OSError as e:
    nst, nr = 0, str(e)
check("a draining replica refuses new requests with 503", nst == 503, f"{nst} {nr}")
msgs.append({"role": "user", "content": turns[2]})
# with a store the other replica downloads the context; sharing a directory, it loads it
st, dl, hd = post(lb, "/v1/context/download" if moto else "/v1/context/load",
                  {"name": "conv-42", "load": True} if moto else {"name": "conv-42"},
                  {"X-Session-Id": session})
st3, r3, h3 = chat(lb, msgs, session)
failover_s = time.time() - t_term
t.join(120)
stream_text = stream_out.get("text", "").replace(" ", "")
check("the running stream finished during the drain", stream_out.get("status") == 200 and
      "[DONE]" in stream_text and '"finish_reason":"length"' in stream_text,
      stream_text[-300:])
rc = procs[home][0].wait(60)
check("the drained replica exits cleanly", rc == 0, f"exit {rc}")
check("the other replica " + ("downloads" if moto else "loads") + " the context",
      st == 200 and hd.get("x-sniper-replica") ==
      other and dl.get("tokens", 0) > 0, f"{st} {dl} {hd.get('x-sniper-replica')}")
check("the next turn runs on the other replica with the saved tokens cached",
      st3 == 200 and h3.get("x-sniper-replica") == other and cached(r3) >= saved.get("tokens", 1),
      f"{st3} {h3.get('x-sniper-replica')} cached {cached(r3) if st3 == 200 else r3}")
check("... and says what one replica running the whole conversation says",
      st3 == 200 and content(r3) == ref_answers[2], f"{content(r3) if st3 == 200 else r3!r} vs "
      f"{ref_answers[2]!r}")
print(f"   failover: the conversation's next turn answered {failover_s:.2f} s after SIGTERM")

hap.terminate()
hap.wait(10)
for n, (p, _) in procs.items():
    if p.poll() is None:
        p.terminate()
        p.wait(30)
sys.exit(checks.finish())
