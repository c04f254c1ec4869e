#!/usr/bin/env python3
"""A stand-in for the Hugging Face hub, for tests/hub.sh: the routes `sniper pull` uses, served
from a directory ROOT/USER/REPO/FILE of real files.

  GET /api/models/USER/REPO?blobs=true  {"id", "siblings": [{"rfilename", "size",
                                         "lfs": {"sha256", "size", "pointerSize"}}]}
  GET /USER/REPO/resolve/main/FILE      302 to /cdn/USER/REPO/FILE (as the hub sends to its CDN)
  GET /cdn/USER/REPO/FILE               the bytes, honouring "Range: bytes=N-" with 206

Test knobs: a repo whose USER is "gated" answers 401 without "Authorization: Bearer secret"; a
repo named "badsum" lists wrong sha256s; POST /_control {"cut_after": N} makes the next file
download send N bytes of its body and drop the connection. Every file request is logged to
ROOT/../requests.log as "PATH RANGE" lines. Prints the port on stdout once listening."""
import hashlib
import http.server
import json
import os
import sys
import threading
import urllib.parse

ROOT = os.path.abspath(sys.argv[1])
LOG = os.path.join(os.path.dirname(ROOT), "requests.log")
TOKEN = "secret"
state = {"cut_after": None}
lock = threading.Lock()


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def authorized(self, user):
        return user != "gated" or self.headers.get("Authorization") == "Bearer " + TOKEN

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        with lock:
            state.update(body)
        self.send_json(200, state)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        if parts[:2] == ["api", "models"] and len(parts) == 4:
            return self.model_info(parts[2], parts[3])
        if len(parts) >= 5 and parts[2:4] == ["resolve", "main"]:
            if not self.authorized(parts[0]):
                return self.send_json(401, {"error": "Access to this repo is restricted"})
            self.send_response(302)
            self.send_header("Location", "/cdn/" + "/".join(
                urllib.parse.quote(p) for p in parts[:2] + parts[4:]))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if parts[:1] == ["cdn"] and len(parts) >= 4:
            return self.file(os.path.join(ROOT, *parts[1:]))
        return self.send_json(404, {"error": "not found"})

    def model_info(self, user, repo):
        d = os.path.join(ROOT, user, repo)
        if not os.path.isdir(d):
            return self.send_json(404, {"error": "Repository not found"})
        if not self.authorized(user):
            return self.send_json(401, {"error": "Access to this repo is restricted"})
        sib = []
        for dirpath, _, files in sorted(os.walk(d)):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                size = os.path.getsize(path)
                sha = "0" * 64 if repo == "badsum" else sha256_of(path)
                sib.append({"rfilename": os.path.relpath(path, d), "size": size,
                            "lfs": {"sha256": sha, "size": size, "pointerSize": 134}})
        sib.append({"rfilename": "README.md", "size": 10})
        return self.send_json(200, {"id": user + "/" + repo, "siblings": sib})

    def file(self, path):
        if not os.path.isfile(path):
            return self.send_json(404, {"error": "Entry not found"})
        size = os.path.getsize(path)
        rng = self.headers.get("Range", "")
        with open(LOG, "a") as log:
            log.write("%s %s\n" % (os.path.relpath(path, ROOT), rng or "-"))
        start = 0
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
        with lock:
            cut, state["cut_after"] = state["cut_after"], None
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            left = size - start if cut is None else min(cut, size - start)
            while left > 0:
                chunk = f.read(min(left, 1 << 16))
                self.wfile.write(chunk)
                left -= len(chunk)
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
        return None


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
