#!/usr/bin/env python3
"""A RAM budget too small for the slots is refused before anything big is allocated, inside a
memory cgroup capped a little above the budget (cgroup v1 or v2, as root), for a qwen35moe model
(recurrent state and checkpoints per slot) and a gpt-oss one (KV caches and window rings):

- sniperd -m with more slots than fit ends with a refusal that gives the sizes, the minimum and
  the most --parallel (and --checkpoints) that fit: not killed by the cgroup's OOM killer, the
  cgroup's peak under the cap;
- what the refusal names really fits: started that way it serves a request on every slot with the
  process's peak RSS (VmHWM) under the budget and the cgroup's peak under the cap;
- the one-shot CLI refuses a context too large for the budget the same way;
- under --models-dir a model that does not fit is refused to its request with the sizes, while
  the daemon keeps serving the other model, holds no more memory after the refusal, and exits 0.

    tests/budget/budget_test.py BUILD_DIR TMP_DIR

Without root or a memory cgroup controller (and under AddressSanitizer, whose shadow memory and
quarantine the budget does not count) the cgroup and RSS checks are skipped, each with its reason;
the refusals are still checked. Prints one line per check and ends with "N passed, N failed, N
skipped". Standard library only."""
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

BUILD, TMP = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "http"))
import http_daemon  # noqa: E402

checks = http_daemon.Checks()
check = checks.check
MIB = 1 << 20
SNIPERD = os.path.join(BUILD, "sniperd")
ASAN = bool(os.environ.get("SNIPER_CHECK"))
CAP_SLACK = 8 * MIB  # the cgroup's cap above the budget: page cache, page tables, thread stacks


# ---- memory cgroups ---------------------------------------------------------------------------

def cgroup_kind():
    """'v1' or 'v2' when this process may make memory cgroups, else (None, why)."""
    if ASAN:
        return None, "AddressSanitizer's shadow memory and quarantine are not in the budget"
    if os.geteuid() != 0:
        return None, "not root: no memory cgroup"
    v1 = "/sys/fs/cgroup/memory"
    if os.access(os.path.join(v1, "cgroup.procs"), os.W_OK) and \
            os.path.exists(os.path.join(v1, "memory.limit_in_bytes")):
        return "v1", v1
    for v2 in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        ctl = os.path.join(v2, "cgroup.subtree_control")
        if os.path.exists(ctl) and "memory" in open(ctl).read() and \
                os.path.exists(os.path.join(v2, "cgroup.controllers")):
            return "v2", v2
    return None, "no cgroup v1 memory controller nor a cgroup v2 with memory enabled"


CG_KIND, CG_ROOT = cgroup_kind()
CG_SEQ = [0]
CG_LIVE = []  # cgroups not removed yet: whatever still runs in them is ended at exit


def cg_cleanup():
    for cg in list(CG_LIVE):
        for pid in cg.read("cgroup.procs").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        cg.remove()


atexit.register(cg_cleanup)


class Cgroup:
    """A memory cgroup capped at cap bytes (swap included where the kernel counts it)."""

    def __init__(self, cap):
        CG_SEQ[0] += 1
        self.path = os.path.join(CG_ROOT, f"sniper-test-budget-{os.getpid()}-{CG_SEQ[0]}")
        os.mkdir(self.path)
        CG_LIVE.append(self)
        self.cap = cap
        if CG_KIND == "v1":
            self.write("memory.limit_in_bytes", cap)
            if os.path.exists(os.path.join(self.path, "memory.memsw.limit_in_bytes")):
                self.write("memory.memsw.limit_in_bytes", cap)
        else:
            self.write("memory.max", cap)
            if os.path.exists(os.path.join(self.path, "memory.swap.max")):
                self.write("memory.swap.max", 0)

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def read(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                return f.read()
        except OSError:
            return ""

    def join(self):
        """In the child before exec: moves it into the cgroup."""
        self.write("cgroup.procs", os.getpid())

    def peak(self):
        """The most memory the cgroup held (page cache counted), bytes; -1 when unknown."""
        text = self.read("memory.max_usage_in_bytes" if CG_KIND == "v1" else "memory.peak")
        return int(text) if text.strip().isdigit() else -1

    def oom_kills(self):
        name, key = ("memory.oom_control", "oom_kill") if CG_KIND == "v1" else \
            ("memory.events", "oom_kill")
        m = re.search(rf"^{key} (\d+)", self.read(name), re.M)
        return int(m.group(1)) if m else 0

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        if self in CG_LIVE:
            CG_LIVE.remove(self)


def start(args, cg):
    """sniperd with args (in cgroup cg when not None); stderr to a file. Returns (process, log)."""
    return http_daemon.popen_logged([SNIPERD, "--threads", "2", *args],
                                    os.path.join(TMP, f"sniperd-{time.time_ns()}.err"),
                                    env=dict(os.environ, HOME=TMP),
                                    preexec_fn=cg.join if cg else None)


def run_to_end(args, cap):
    """Runs sniperd with args to its end (in a cgroup capped at cap when there is one). Returns
    (exit status, stderr, cgroup peak or None, OOM kills or None)."""
    cg = Cgroup(cap) if CG_KIND else None
    p, log = start(args, cg)
    try:
        rc = p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    log.seek(0)
    peak = cg.peak() if cg else None
    kills = cg.oom_kills() if cg else None
    if cg:
        cg.remove()
    return rc, log.read(), peak, kills


class CgDaemon(http_daemon.Daemon):
    """http_daemon.Daemon started inside a cgroup capped at cap (when there is one)."""

    def __init__(self, args, cap):
        self.cg = Cgroup(cap) if CG_KIND else None
        self.p, self.log = start(["--port", "0", *args], self.cg)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.port is None:
            self.log.seek(0)
            m = re.search(r"listening on http://[^:]+:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
            elif self.p.poll() is not None:
                break
            else:
                time.sleep(0.05)
        while self.port and time.time() < deadline and self.p.poll() is None:
            try:
                if self.request("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)

    def status(self, key):
        """A /proc/PID/status figure in bytes (VmRSS, VmHWM); -1 when gone."""
        try:
            text = open(f"/proc/{self.p.pid}/status").read()
        except OSError:
            return -1
        m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
        return int(m.group(1)) * 1024 if m else -1

    def finish(self):
        """Stops it (SIGTERM); returns (exit status, stderr, cgroup peak, OOM kills)."""
        rc, err = self.stop()
        peak = self.cg.peak() if self.cg else None
        kills = self.cg.oom_kills() if self.cg else None
        if self.cg:
            self.cg.remove()
        return rc, err, peak, kills


def check_cgroup(name, peak, kills, cap):
    if peak is None:
        return
    check(f"{name}: no OOM kill in the cgroup", kills == 0, f"oom_kill {kills}")
    check(f"{name}: the cgroup's peak under its cap", 0 < peak < cap,
          f"peak {peak / MIB:.1f} MiB, cap {cap / MIB:.0f} MiB")


def minimum(args):
    """The smallest --ram-budget sniperd -m accepts with args, in MiB: from its refusal of 1M."""
    r = subprocess.run([SNIPERD, "--port", "0", "--threads", "2", "--ram-budget", "1M", *args],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"the minimum is (\d+) MiB", r.stderr)
    return int(m.group(1)) if m else None


def ask_all(d, model, n, n_words=300):
    """n chat requests at once (one a slot), each n_words words of prompt; their statuses."""
    words = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read().split()
    got = [None] * n

    def one(i):
        text = " ".join(words[i * 50: i * 50 + n_words])
        body = {"messages": [{"role": "user", "content": text}], "max_tokens": 16,
                "temperature": 0}
        if model:
            body["model"] = model
        try:
            st, r, _ = d.request("POST", "/v1/chat/completions", body, timeout=300)
            got[i] = st if st == 200 else f"HTTP {st}: {json.dumps(r)[:300]}"
        except OSError as e:
            got[i] = str(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return got


def fits_from(err):
    """(--parallel K, (--checkpoints C, with --parallel S)) a refusal names; None where absent."""
    par = re.search(r"what fits: --parallel (\d+)", err)
    ck = re.search(r"--checkpoints (\d+) with --parallel (\d+)", err)
    return (int(par.group(1)) if par else None,
            (int(ck.group(1)), int(ck.group(2))) if ck else None)


def serve_within(name, model, args, budget_mib):
    """Started with args under the budget, it serves a request on every slot within it."""
    if ASAN:
        checks.skip(f"{name}: not started: AddressSanitizer's shadow memory is in the resident "
                    "set the budget is measured on, not in what the engine allocates")
        return
    cap = budget_mib * MIB + CAP_SLACK
    d = CgDaemon(["-m", model, "--ram-budget", f"{budget_mib}M", *args], cap)
    check(f"{name}: starts", d.port is not None and d.p.poll() is None,
          d.stop()[1][-600:] if d.port is None else "")
    if d.port is None:
        if d.cg:
            d.cg.remove()
        return
    n = int(args[args.index("--parallel") + 1])
    st = ask_all(d, None, n)
    check(f"{name}: {n} requests at once answered", st == [200] * n, f"{st}")
    hwm = d.status("VmHWM")
    rc, err, peak, kills = d.finish()
    check(f"{name}: exits 0 at SIGTERM", rc == 0, err[-600:])
    if peak is not None:
        check(f"{name}: the process's peak RSS under the budget", 0 < hwm <= budget_mib * MIB,
              f"VmHWM {hwm / MIB:.1f} MiB, budget {budget_mib} MiB")
    check_cgroup(name, peak, kills, cap)


def refused_then_fits(name, model, args, budget_mib):
    """sniperd -m with args is refused under the budget with the sizes, inside the cap; then what
    the refusal names fits and serves."""
    cap = budget_mib * MIB + CAP_SLACK
    rc, err, peak, kills = run_to_end(["-m", model, "--port", "0", "--ram-budget",
                                       f"{budget_mib}M", *args], cap)
    line = next((ln for ln in err.splitlines() if "is too small" in ln), "")
    check(f"{name}: refused with exit status 1 (not killed)", rc == 1, f"exit {rc}: {err[-600:]}")
    check(f"{name}: the refusal gives the sizes", all(
        w in line for w in ("KV caches", "buffers", "headroom", "the minimum is", " a slot)")),
        line or err[-600:])
    check_cgroup(f"{name} (refused)", peak, kills, cap)
    par, ck = fits_from(line)
    check(f"{name}: the refusal names the most slots that fit", par is not None and
          par < int(args[args.index("--parallel") + 1]), line)
    if par:
        a = list(args)
        a[a.index("--parallel") + 1] = str(par)
        serve_within(f"{name}, --parallel {par} as named", model, a, budget_mib)
    return ck


def main():
    if not CG_KIND:
        checks.skip(f"cgroup and RSS checks: {CG_ROOT}")
    q35 = http_daemon.mkmodel(BUILD, TMP, "q35.gguf", "--preset", "tiny-qwen35moe", "--types",
                              "q8_0", "--seed", "61")
    oss = http_daemon.mkmodel(BUILD, TMP, "oss.gguf", "--preset", "tiny-gpt-oss", "--types",
                              "q8_0", "--seed", "62")

    # qwen35moe: each slot holds 64 checkpoints of its recurrent state (about 9 MiB a slot at
    # this context); the budget holds about 6 slots, 16 take some 100 MiB more than the cap
    q_args = ["--ctx-size", "4096", "--checkpoints", "64"]
    one = minimum(["-m", q35, *q_args, "--parallel", "1"])
    check("qwen35moe: a budget of 1M is refused with the minimum for one slot", one is not None)
    if one:
        budget = one + 46
        ck = refused_then_fits("qwen35moe, 16 slots", q35, [*q_args, "--parallel", "16"],
                               budget)
        check("qwen35moe, 16 slots: the refusal names the most checkpoints that fit",
              ck is not None and ck[1] == 16 and 1 <= ck[0] < 64, f"{ck}")
        if ck:
            a = ["--ctx-size", "4096", "--checkpoints", str(ck[0]), "--parallel", "16"]
            serve_within(f"qwen35moe, --checkpoints {ck[0]} with 16 slots as named", q35, a,
                         budget)

    # gpt-oss: two full attention layers of 16,384 positions, 16 MiB a slot, and window rings
    o_args = ["--ctx-size", "16384"]
    one = minimum(["-m", oss, *o_args, "--parallel", "1"])
    check("gpt-oss: a budget of 1M is refused with the minimum for one slot", one is not None)
    if one:
        refused_then_fits("gpt-oss, 8 slots", oss, [*o_args, "--parallel", "8"], one + 40)

        # the one-shot CLI: a context whose KV cache alone passes the cap
        cap = (one + 40) * MIB + CAP_SLACK
        rc, err, peak, kills = run_to_end(["-m", oss, "-p", "hello", "-n", "4", "--ctx-size",
                                           "131072", "--ram-budget", f"{one + 40}M"], cap)
        check("gpt-oss one-shot, context 131072: refused with exit status 1 (not killed)",
              rc == 1 and "is too small for 1 slot of 131072 positions" in err, err[-600:])
        check_cgroup("gpt-oss one-shot, context 131072", peak, kills, cap)

    # --models-dir: the qwen35moe model does not fit with 24 slots (some 185 MiB of state), a
    # small qwen3moe one does (48 MiB of KV)
    mdir = os.path.join(TMP, "models")
    os.mkdir(mdir)
    os.rename(q35, os.path.join(mdir, "hybrid.gguf"))
    http_daemon.mkmodel(BUILD, TMP, os.path.join("models", "moe.gguf"), "--preset", "tiny",
                        "--types", "q8_0", "--seed", "63")
    args = ["--models-dir", mdir, "--ctx-size", "1024", "--checkpoints", "64", "--parallel", "24"]
    one = minimum(["-m", os.path.join(mdir, "hybrid.gguf"), "--ctx-size", "1024",
                   "--checkpoints", "64", "--parallel", "1"])
    if one is None:
        check("--models-dir: the minimum for one slot is named", False)
        return
    budget = one + 70
    cap = budget * MIB + CAP_SLACK
    d = CgDaemon([*args, "--ram-budget", f"{budget}M"], cap)
    check("--models-dir: starts", d.port is not None, d.stop()[1][-600:] if not d.port else "")
    if not d.port:
        return
    st = ask_all(d, "moe", 2, 60)
    check("--models-dir: the model that fits answers", st == [200, 200], f"{st}")
    rss = []
    for i in range(8):
        body = {"model": "hybrid", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4}
        try:
            s, r, _ = d.request("POST", "/v1/chat/completions", body, timeout=120)
            msg = json.dumps(r)
        except OSError as e:
            s, msg = None, f"no reply: {e}"
        check(f"--models-dir: the model too big for the budget is refused with the sizes ({i + 1})",
              s == 500 and "model_load_failed" in msg and "is too small for 24 slots" in msg and
              "what fits: --parallel" in msg, f"HTTP {s}: {msg[:600]}")
        rss.append(d.status("VmRSS"))
    st = ask_all(d, "moe", 2, 60)
    check("--models-dir: the daemon keeps serving after the refusals", st == [200, 200], f"{st}")
    hwm = d.status("VmHWM")
    rc, err, peak, kills = d.finish()
    check("--models-dir: exits 0 at SIGTERM", rc == 0, err[-600:])
    if peak is not None:
        # a refused load frees what it read: after the second (the allocator's arenas settled)
        # six more hold at most a few pages more (connection threads' stacks, arenas: up to 2 MiB
        # seen on a busy machine), where a model left behind adds some 2 MiB each time
        check("--models-dir: refusals after the second hold no more memory",
              0 < rss[-1] <= rss[1] + 3 * MIB, "VmRSS " + ", ".join(f"{r / MIB:.1f}" for r in rss))
        check("--models-dir: the process's peak RSS under the budget", 0 < hwm <= budget * MIB,
              f"VmHWM {hwm / MIB:.1f} MiB, budget {budget} MiB")
    check_cgroup("--models-dir", peak, kills, cap)


main()
sys.exit(checks.finish())
