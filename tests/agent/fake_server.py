#!/usr/bin/env python3
"""A fake OpenAI-compatible server and search stub for the agent's tests (tests/agent.sh).

Usage: fake_server.py --port-file F --rules R.json --log L.jsonl [--api-key KEY]

It listens on 127.0.0.1 on a free port (written to the port file once listening) and serves:
  POST /v1/chat/completions   scripted by the rules file (below), whole or streamed over SSE
  GET  /v1/models             fake-a, fake-b
  GET  /v1/stats              {"fake": true, "requests": N}
  /v1/context/...             save/load/list/delete/upload/download kept in memory (issue 5 shapes)
  GET  /html/?q=...           a page shaped like DuckDuckGo's HTML results
  GET  /search?q=...&format=json   a SearXNG-style JSON answer (its second result: /page/1)
  GET  /page/1                a small HTML page with a script and a style to be left out
Every request is appended to the log as one JSON line {method, path, query, body, auth}.

Rules: {"rules": [{"system": str, "user": str, "any": str, "stream": bool,
                   "reply": str, "mode": "ok"|"malformed"|"nodone", "status": int,
                   "delay": seconds, "chunk_delay": seconds}], "default": str}
The first rule whose conditions all hold answers: "system" must be in the first message's
content, "user" in the last message's, "any" in some message's, "stream" equal the request's.
"""
import argparse
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
CONTEXTS = {}
COUNT = [0]


def log(entry):
    with LOCK:
        COUNT[0] += 1
        with open(ARGS.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def load_rules():
    with open(ARGS.rules) as f:
        return json.load(f)


def pick(rules, body):
    msgs = body.get("messages") or []
    first = (msgs[0].get("content") or "") if msgs else ""
    last = (msgs[-1].get("content") or "") if msgs else ""
    every = [m.get("content") or "" for m in msgs]
    for r in rules.get("rules", []):
        if "system" in r and r["system"] not in first:
            continue
        if "user" in r and r["user"] not in last:
            continue
        if "any" in r and not any(r["any"] in c for c in every):
            continue
        if "stream" in r and bool(r["stream"]) != bool(body.get("stream")):
            continue
        return r
    return {"reply": rules.get("default", "Hello from the fake model.")}


def count_tokens(text):
    return max(1, len(text.split()))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, message, typ="invalid_request_error"):
        self.send_json(status, {"error": {"message": message, "type": typ,
                                          "param": None, "code": None}})

    def handle_any(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        log({"method": method, "path": url.path, "query": query, "body": body,
             "auth": self.headers.get("Authorization")})
        if url.path.startswith("/v1/") and ARGS.api_key:
            if self.headers.get("Authorization") != "Bearer " + ARGS.api_key:
                return self.error(401, "invalid api key", "authentication_error")
        route = (method, url.path)
        if route == ("POST", "/v1/chat/completions"):
            return self.chat(body or {})
        if route == ("GET", "/v1/models"):
            return self.send_json(200, {"object": "list", "data": [
                {"id": "fake-a", "object": "model"}, {"id": "fake-b", "object": "model"}]})
        if route == ("GET", "/v1/stats"):
            return self.send_json(200, {"fake": True, "requests": COUNT[0]})
        if url.path.startswith("/v1/context"):
            return self.context(method, url.path, body or {})
        if route == ("GET", "/html/"):
            return self.ddg(query.get("q", [""])[0])
        if route == ("GET", "/search"):
            return self.searxng(query.get("q", [""])[0])
        if route == ("GET", "/page/1"):
            return self.page()
        return self.error(404, "no route " + url.path)

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")

    # ---- chat completions ----
    def chat(self, body):
        rule = pick(load_rules(), body)
        time.sleep(rule.get("delay", 0))
        if "status" in rule:
            return self.error(rule["status"], rule.get("reply", "scripted failure"))
        reply = rule.get("reply", "")
        prompt_tokens = sum(count_tokens(m.get("content") or "") for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": count_tokens(reply),
                 "total_tokens": prompt_tokens + count_tokens(reply)}
        base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": body.get("model")}
        if not body.get("stream"):
            return self.send_json(200, dict(base, object="chat.completion", choices=[{
                "index": 0, "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop"}], usage=usage))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def event(obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        def chunk(delta, finish=None):
            event(dict(base, object="chat.completion.chunk", choices=[{
                "index": 0, "delta": delta, "finish_reason": finish}]))

        try:
            chunk({"role": "assistant"})
            words = reply.split(" ")
            mode = rule.get("mode", "ok")
            for i, w in enumerate(words):
                chunk({"content": w + (" " if i + 1 < len(words) else "")})
                time.sleep(rule.get("chunk_delay", 0))
                if mode == "malformed" and i == 1:
                    self.wfile.write(b"data: {\"choices\": [this is not json\n\n")
                    return
            if mode == "nodone":
                return
            chunk({}, "stop")
            if (body.get("stream_options") or {}).get("include_usage"):
                event(dict(base, object="chat.completion.chunk", choices=[], usage=usage))
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    # ---- contexts ----
    def context(self, method, path, body):
        name = body.get("name")
        if method == "GET" and path in ("/v1/context", "/v1/context/list"):
            return self.send_json(200, {"contexts": [
                {"name": k, "bytes": v["bytes"], "created": "2026-01-01T00:00:00Z",
                 "location": v["location"]} for k, v in sorted(CONTEXTS.items())]})
        if method == "DELETE" and path.startswith("/v1/context/"):
            k = path[len("/v1/context/"):]
            if CONTEXTS.pop(k, None) is None:
                return self.error(404, "no context " + k)
            return self.send_json(200, {"deleted": k})
        if method != "POST":
            return self.error(405, "method not allowed")
        verb = path[len("/v1/context/"):]
        if verb == "save":
            msgs = body.get("messages") or []
            tokens = sum(count_tokens(m.get("content") or "") for m in msgs)
            CONTEXTS[name] = {"messages": msgs, "tokens": tokens, "bytes": 1000 * tokens,
                              "location": "local"}
            return self.send_json(200, {"name": name, "tokens": tokens, "bytes": 1000 * tokens,
                                        "ms": 12.5})
        if name not in CONTEXTS:
            return self.error(404, "no context named " + str(name))
        c = CONTEXTS[name]
        if verb == "upload":
            c["location"] = "local+remote"
            return self.send_json(200, {"name": name, "bytes": c["bytes"], "ms": 3.0})
        if verb in ("load", "download"):
            return self.send_json(200, {"name": name, "tokens": c["tokens"], "ms": 0.8,
                                        "metadata": {"messages": c["messages"]}})
        return self.error(404, "no route " + path)

    # ---- search stubs ----
    def ddg(self, q):
        page = """<!DOCTYPE html><html><head><title>%s at DuckDuckGo</title></head><body>
<div class="serp__results"><div id="links" class="results">
<div class="result results_links results_links_deep web-result">
 <div class="links_main links_deep result__body">
  <h2 class="result__title"><a rel="nofollow" class="result__a"
   href="//duckduckgo.com/l/?uddg=https%%3A%%2F%%2Fexample.com%%2Fparis%%2Dweather%%3Fd%%3D1&amp;rut=abc">
   Paris <b>weather</b> today</a></h2>
  <a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%%3A%%2F%%2Fexample.com">Sunny,
   <b>21</b> degrees &amp; light wind.</a>
 </div></div>
<div class="result results_links results_links_deep web-result">
 <div class="links_main links_deep result__body">
  <h2 class="result__title"><a rel="nofollow" class="result__a"
   href="https://weather.example.org/fr/paris">Forecast for %s</a></h2>
  <a class="result__snippet">Ten-day forecast.</a>
 </div></div>
</div></div></body></html>""" % (q, q)
        data = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def searxng(self, q):
        here = "http://127.0.0.1:%d/page/1" % self.server.server_address[1]
        self.send_json(200, {"query": q, "results": [
            {"title": "SearX result for " + q, "url": "http://127.0.0.1:1/a",
             "content": "The first result."},
            {"title": "Second", "url": here, "content": "Another."}]})

    def page(self):
        data = (b"<html><head><title>T</title><style>body{color:red}</style></head><body>"
                b"<script>var secret = 1;</script><h1>Page   heading</h1><p>The page body "
                b"text.</p></body></html>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--rules", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--api-key")
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
