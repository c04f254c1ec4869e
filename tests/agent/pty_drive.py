#!/usr/bin/env python3
"""Drives `sniper ARGS...` in a pseudo-terminal for tests/agent.sh: libedit's prompt, Ctrl-C during
a streamed answer (cancelled, the session goes on), Ctrl-C at the prompt, a y answer, history recall
with the up arrow, Ctrl-D to leave. Prints "ok NAME" or "not ok NAME" per step; the request texts
match the rules tests/agent.sh gives the fake server."""
import os
import pty
import re
import select
import sys
import time

buf = b""
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])


def read_for(seconds):
    global buf
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], max(0.0, end - time.time()))
        if not r:
            break
        try:
            data = os.read(fd, 4096)
        except OSError:
            return False
        if not data:
            return False
        buf += data
    return True


def expect(pattern, seconds=5):
    """Waits until pattern (bytes regex) appears after the current mark; moves the mark past it."""
    global buf
    end = time.time() + seconds
    while True:
        m = re.search(pattern, buf)
        if m:
            buf = buf[m.end():]
            return True
        if time.time() >= end or not read_for(min(0.1, end - time.time())):
            m = re.search(pattern, buf)
            if m:
                buf = buf[m.end():]
            return bool(m)


def step(name, good):
    print(("ok " if good else "not ok ") + name + ("" if good else ": got %r" % buf[-400:]))
    sys.stdout.flush()


def send(b):
    os.write(fd, b)


step("banner and prompt", expect(rb"sniper - talking to.*\n> ", 10))
send(b"long story\r")
got_start = expect(rb"w3 ")
send(b"\x03")
step("Ctrl-C cancels a streamed answer", got_start and expect(rb"\[cancelled\]"))
seen_end = b"END" in buf
step("the cancelled answer stopped", not seen_end)
step("prompt again after Ctrl-C", expect(rb"> "))
send(b"hello\r")
step("the next request is answered", expect(rb"Hello from the fake model"))
expect(rb"> ")
send(b"\x03")
time.sleep(0.2)
send(b"hello again\r")
step("Ctrl-C at the prompt does not end the session", expect(rb"Hello from the fake model"))
expect(rb"> ")
send(b"make marker please\r")
step("the command prompt on a terminal", expect(rb"run it\? \[y/n/a\] "))
send(b"y\r")
step("y runs it and the model summarises", expect(rb"Summary: the command ran"))
expect(rb"> ")
send(b"\x1b[A\r")
step("up arrow recalls the last request (libedit history)", expect(rb"run it\? \[y/n/a\] "))
send(b"n\r")
step("n declines", expect(rb"\[not run\]"))
expect(rb"> ")
send(b"\x04")
deadline = time.time() + 5
status = None
while time.time() < deadline:
    read_for(0.1)
    wpid, st = os.waitpid(pid, os.WNOHANG)
    if wpid == pid:
        status = st
        break
step("Ctrl-D leaves with status 0", status is not None and os.WIFEXITED(status)
     and os.WEXITSTATUS(status) == 0)
if status is None:
    os.kill(pid, 9)
