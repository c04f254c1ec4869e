#!/usr/bin/env python3
"""Drives `sniper top ARGS...` in a pseudo-terminal for tests/agent.sh: the live view (alternate
screen, frames redrawn from the top-left corner), then KEY (q, or \\x03 for Ctrl-C) ends it with
status 0, the terminal's mode restored and the screen and cursor given back.
Usage: pty_top.py KEY SNIPER ARGS...   Prints "ok NAME" or "not ok NAME: why" per step."""
import os
import pty
import select
import sys
import termios
import time

key = sys.argv[1].encode().decode("unicode_escape").encode()
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
before = termios.tcgetattr(fd)
buf = b""


def read_until(pred, seconds):
    global buf
    end = time.time() + seconds
    while not pred() and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            if not data:
                return
            buf += data


def step(name, good, why=""):
    print(("ok " if good else "not ok ") + name + ("" if good else ": " + why))
    sys.stdout.flush()


read_until(lambda: buf.count(b"\x1b[H") >= 2, 5)  # two frames: it refreshes
during = termios.tcgetattr(fd)
step("%r run: live view in the alternate screen, two frames from the top-left corner" % key,
     buf.startswith(b"\x1b[?1049h\x1b[?25l") and buf.count(b"\x1b[H") >= 2 and b"q quits" in buf,
     repr(buf[:300]))
step("%r run: keys without Enter or echo while it runs" % key,
     not (during[3] & termios.ICANON) and not (during[3] & termios.ECHO), str(during[3]))
os.write(fd, key)
read_until(lambda: buf.endswith(b"\x1b[?25h\x1b[?1049l"), 5)
after = termios.tcgetattr(fd)
status = None
for _ in range(50):
    wpid, st = os.waitpid(pid, os.WNOHANG)
    if wpid:
        status = os.waitstatus_to_exitcode(st)
        break
    time.sleep(0.1)
step("%r ends it with status 0" % key, status == 0, "status %r" % status)
step("%r gives back the screen and the cursor" % key, buf.endswith(b"\x1b[?25h\x1b[?1049l"),
     repr(buf[-80:]))
step("%r restores the terminal's mode" % key, after[3] == before[3], "%r != %r" % (after[3], before[3]))
