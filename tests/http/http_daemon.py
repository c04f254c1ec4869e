"""http_daemon.py - the real sniperd for tests: started on a free port with a model, waited for
until /health answers, driven with JSON requests and SSE streams, its memory read from /proc,
stopped with SIGTERM (Checks.stopped: and its exit status checked). Shared by the daemon's
end-to-end scripts (tests/http, contexts, hybrid, parallel, models, scaling, messages, responses,
ollama, tokenize). Standard library only."""
import http.client
import json
import os
import re
import subprocess
import time


class Checks:
    """Counts checks and prints one line each, then the summary line tests/run.sh sums."""

    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def check(self, name, cond, why=""):
        if cond:
            self.passed += 1
            print(f"ok     {name}")
        else:
            self.failed += 1
            print(f"FAIL   {name}: {why}")

    def stopped(self, d, name):
        """Stops d with SIGTERM and checks that it exits 0: a crash at shutdown, a hang past the
        wait, or under make check a leak report (LeakSanitizer's non-zero status) fails. Returns
        its stderr."""
        rc, log = d.stop()
        self.check(f"{name}: exits 0 after SIGTERM", rc == 0, f"exit {rc}: {log[-1500:]}")
        return log

    def skip(self, why):
        self.skipped += 1
        print(f"SKIP: {why}")

    def finish(self):
        """Prints the summary and returns the exit status."""
        print(f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped")
        return 1 if self.failed else 0


def popen_logged(cmd, path, **kw):
    """Starts cmd with stdout discarded and stderr to the file path. Returns (process, the file
    opened for reading). The child writes through its own open file, in append mode: sharing the
    reader's would share its offset, and a reader's seek(0) would send the child's next line over
    the file's head (a lost "listening on" line: a daemon seen as never started)."""
    log = open(path, "w+")
    with open(path, "a") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, **kw)
    return p, log


class Daemon:
    """sniperd serving a model (or, with model None, the models its args name) on a free port;
    stderr kept in a file."""

    def __init__(self, build, tmp, model, *args):
        model_args = ["-m", model] if model else []  # None: the models come from args
        self.p, self.log = popen_logged(
            [os.path.join(build, "sniperd"), *model_args, "--port", "0", "--threads", "2", *args],
            os.path.join(tmp, f"sniperd-{len(args)}-{time.time_ns()}.err"),
            env=dict(os.environ, HOME=tmp))
        self.port = None
        deadline = time.time() + 30
        while time.time() < deadline and self.port is None:
            self.log.seek(0)
            m = re.search(r"listening on http://[^:]+:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
            elif self.p.poll() is not None:
                break
            else:
                time.sleep(0.05)
        while self.port and time.time() < deadline:
            try:
                if self.request("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)

    def request(self, method, path, body=None, headers=None, raw=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        try:
            return r.status, json.loads(text) if text else None, r.getheader("Content-Type")
        except json.JSONDecodeError:
            return r.status, text, r.getheader("Content-Type")

    def stream(self, body, headers=None):
        """POSTs a streaming request; returns (status, [parsed data frames], saw_done)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        frames, done = [], False
        for block in text.split("\n\n"):
            if not block.startswith("data: "):
                continue
            payload = block[6:]
            if payload == "[DONE]":
                done = True
            else:
                frames.append(json.loads(payload))
        return r.status, frames, done

    def proc_kb(self, field):
        """A memory figure of the running daemon from /proc/PID/status (VmRSS, VmHWM: the peak
        resident set), in KiB; None when it has exited."""
        try:
            with open(f"/proc/{self.p.pid}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def events(self, path, body, headers=None, timeout=60):
        """POSTs body to path; returns (status, [(event name, parsed data)]) of the named SSE
        events the reply holds (the Responses and Messages APIs' streams)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request("POST", path, body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        out = []
        for block in text.split("\n\n"):
            lines = block.split("\n")
            if len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "):
                out.append((lines[0][7:], json.loads(lines[1][6:])))
        return r.status, out

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.seek(0)
        return self.p.returncode, self.log.read()


def min_budget(build, model, *args):
    """The smallest --ram-budget the daemon accepts for model with args (its slots' KV caches
    counted), in MiB: read from its refusal of 1M. Under the sanitizers (SNIPER_CHECK) 8 MiB
    more: the refusal names what the engine will allocate before it does, and the check after the
    load then also meets the sanitizers' shadow of those buffers (4 MiB on these models)."""
    r = subprocess.run([os.path.join(build, "sniperd"), "-m", model, "--port", "0",
                        "--ram-budget", "1M", "--threads", "2", *args], capture_output=True,
                       text=True, timeout=60)
    m = re.search(r"the minimum is (\d+) MiB", r.stderr)
    return int(m.group(1)) + (8 if os.environ.get("SNIPER_CHECK") else 0) if m else None


def mkmodel(build, tmp, name, *args):
    path = os.path.join(tmp, name)
    subprocess.run([os.path.join(build, "sniper-mkmodel"), "--quiet", "-o", path, *args],
                   check=True)
    return path
