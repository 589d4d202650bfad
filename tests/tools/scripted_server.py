#!/usr/bin/env python3
"""A scripted HTTP/1.1 worker for e2e tests: answers each request as a case's script.json says.

    scripted_server.py SCRIPT.json --port-file F [--port 0] [--log REQUESTS.jsonl]

script.json (the shared cases' format): {"routes": [{"match": {"path", "body_contains"?}, "status",
"reason"?, "headers": [[name, value], ...], "framing": "chunked" | "length",
"stall_before_headers_ms"?, "watch_close"?, "segments": [{"data", "sleep_ms"?}, ...]}, ...]}. The first route whose
path equals the request's path (query string ignored) and whose body_contains occurs in the body
(as sent, or printed as compact JSON) answers. `sleep_ms` is waited before its segment is written;
each segment is written (and, when chunked, framed) on its own. GET /health answers 200 (the router's health poll) unless a route
says otherwise; anything unmatched gets 404 with a JSON body. A route with "watch_close": true
watches its connection while it waits (the stall, each sleep): when the client closes it, the
answer stops there and the log gets {"client_closed": target, "after_ms": ms since the request was
read, "at": "headers" or the segment index} (what an engine that aborts a request on disconnect
sees). A top-level "requests_per_connection": N answers N requests on a connection and then, at
the next request's head, closes it without a word, logged {"dropped": target} (a server whose
keep-alive cap or idle timeout races the client's next request on a kept connection).

The bytes are written by hand, not by an HTTP library, so the response framing is exactly what the
script says (the tests check what a proxy makes of it). Every request is logged as one JSON line
to --log: method, target, the header lines as received (names as sent), the body length the
framing announced, the bytes actually read, and the body when it is JSON-parseable and short.
Listens on 127.0.0.1 only; stops on SIGTERM/SIGINT.
"""
import argparse
import json
import select
import signal
import socket
import socketserver
import sys
import threading
import time

LOG_LOCK = threading.Lock()


def read_line(f):
    line = f.readline(65537)
    if not line:
        return None
    return line.decode("latin-1").rstrip("\r\n")


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.answered = 0
        while True:
            try:
                if not self.one():
                    return
            except (ConnectionError, socket.timeout, OSError):
                return

    def one(self):
        f = self.rfile
        line = read_line(f)
        while line == "":  # tolerate stray CRLF between requests (RFC 9112 2.2)
            line = read_line(f)
        if line is None:
            return False
        parts = line.split(" ")
        if len(parts) != 3:
            self.log({"bad_request_line": line[:200]})
            return False
        method, target, _ = parts
        cap = self.server.script.get("requests_per_connection")
        if cap is not None and self.answered >= cap:
            self.log({"dropped": target})
            return False
        self.answered += 1
        headers = []
        while True:
            h = read_line(f)
            if h is None:
                return False
            if h == "":
                break
            name, _, value = h.partition(":")
            headers.append([name, value.strip()])
        lower = [(k.lower(), v) for k, v in headers]
        te = [v for k, v in lower if k == "transfer-encoding"]
        cls = [v for k, v in lower if k == "content-length"]
        body = b""
        announced = None
        if te and "chunked" in te[-1].lower():
            while True:
                size_line = read_line(f)
                size = int(size_line.split(";")[0], 16)
                if size == 0:
                    while read_line(f) not in ("", None):
                        pass
                    break
                body += f.read(size)
                f.readline()
        elif cls:
            announced = int(cls[0])
            self.connection.settimeout(2)
            body = f.read(announced)
            self.connection.settimeout(None)
        entry = {"method": method, "target": target, "headers": headers,
                 "content_length": announced, "body_bytes": len(body)}
        if len(body) < 4096:
            try:
                entry["body"] = json.loads(body.decode("utf-8"))
            except ValueError:
                pass
        else:
            try:
                entry["body_include_usage"] = json.loads(body.decode("utf-8")).get(
                    "stream_options", {}).get("include_usage")
                entry["body_json"] = True
            except ValueError:
                entry["body_json"] = False
        self.log(entry)
        path = target.split("?")[0]
        text = body.decode("utf-8", "replace")
        # body_contains is matched against the compact JSON form too: a proxy forwards the
        # client's bytes ('"stream": true'), the scripts spell members compactly.
        try:
            text += "\n" + json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
        except ValueError:
            pass
        route = None
        for r in self.server.script["routes"]:
            m = r["match"]
            if m.get("path") not in (None, path):
                continue
            if "method" in m and m["method"] != method:
                continue
            if "body_contains" in m and m["body_contains"] not in text:
                continue
            route = r
            break
        if route is None and method in ("GET", "HEAD") and path == "/health":
            route = {"status": 200, "headers": [["Content-Type", "application/json"]],
                     "framing": "length", "segments": [{"data": "{\"status\":\"ok\"}"}]}
        if route is None:
            route = {"status": 404, "headers": [["Content-Type", "application/json"]],
                     "framing": "length",
                     "segments": [{"data": json.dumps({"error": {"message": "no route for " + path,
                                                                 "type": "not_found"}})}]}
        close = any(k == "connection" and "close" in v.lower() for k, v in lower)
        self.read_at = time.monotonic()
        self.target = target
        return self.answer(route, method, close)

    def wait(self, ms, watch, at):
        """Sleeps ms; with watch, False as soon as the client closed the connection (logged)."""
        end = time.monotonic() + ms / 1000.0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return True
            if not watch:
                time.sleep(left)
                continue
            ready, _, _ = select.select([self.connection], [], [], min(left, 0.01))
            if not ready:
                continue
            try:
                peek = self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                peek = b""
            if peek:  # the next request pipelined: not a close
                time.sleep(min(left, 0.01))
                continue
            self.log({"client_closed": self.target, "at": at,
                      "after_ms": round((time.monotonic() - self.read_at) * 1000)})
            return False

    def answer(self, r, method, close):
        watch = r.get("watch_close", False)
        stall = r.get("stall_before_headers_ms", 0)
        if stall and not self.wait(stall, watch, "headers"):
            return False
        status = r["status"]
        reason = r.get("reason", {200: "OK", 404: "Not Found"}.get(status, "Status"))
        out = ["HTTP/1.1 %d %s" % (status, reason)]
        for k, v in r.get("headers", []):
            out.append("%s: %s" % (k, v))
        chunked = r.get("framing") == "chunked"
        segs = [(s["data"].encode("utf-8"), s.get("sleep_ms", 0)) for s in r["segments"]]
        if chunked:
            out.append("Transfer-Encoding: chunked")
        else:
            out.append("Content-Length: %d" % sum(len(d) for d, _ in segs))
        if close:
            out.append("Connection: close")
        w = self.wfile
        w.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
        w.flush()
        if method == "HEAD":
            return not close
        for i, (data, sleep_ms) in enumerate(segs):
            if sleep_ms and not self.wait(sleep_ms, watch, i):
                return False
            if chunked:
                w.write(b"%x\r\n" % len(data) + data + b"\r\n")
            else:
                w.write(data)
            w.flush()
        if chunked:
            w.write(b"0\r\n\r\n")
            w.flush()
        return not close

    def log(self, entry):
        if not self.server.log_path:
            return
        with LOG_LOCK, open(self.server.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    ap.add_argument("--log")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", a.port), Handler)
    with open(a.script) as f:
        srv.script = json.load(f)
    srv.log_path = a.log
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(a.port_file + ".tmp", a.port_file)
    try:
        srv.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()
