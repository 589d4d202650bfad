# Stand-in for an engine's OpenAI-compatible POST /tokenize (vLLM/SGLang shape) with one token per
# character (id = code point), so its counts differ from the 4-byte convention: a prompt is
# tokenized as is, chat messages through a minimal chat template: "tools:JSON\n" (compact, keys sorted) when tools are
# given, "kwargs:JSON\n" for chat_template_kwargs, then "role:content\n" per message (text parts
# joined, each tool call as "call:NAME ARGUMENTS"). Each request is logged to tok.log (path +
# sorted body keys) and, whole, to tok.bodies.jsonl; the port is written to tok.port once
# listening. A file tok.mode switches how it answers: "slow" (after 3 s), "prompt-only" (422 for
# chat messages, as SGLang's /tokenize), "shape" (no "tokens" array).
import http.server, json, os, time
def content_text(c):
    if isinstance(c, str) or c is None:
        return c or ""
    return "".join(p.get("text", "") for p in c if isinstance(p, dict))
def template(body):
    out = ""
    if body.get("tools"):
        out += "tools:" + json.dumps(body["tools"], sort_keys=True, separators=(",", ":")) + "\n"
    if body.get("chat_template_kwargs"):
        out += "kwargs:" + json.dumps(body["chat_template_kwargs"], sort_keys=True, separators=(",", ":")) + "\n"
    for m in body["messages"]:
        out += m["role"] + ":" + content_text(m.get("content"))
        for c in m.get("tool_calls") or []:
            out += "call:" + c["function"]["name"] + " " + c["function"]["arguments"]
        out += "\n"
    return out
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with open("tok.log", "a") as f:
            f.write(self.path + " " + json.dumps(sorted(body)) + "\n")
        with open("tok.bodies.jsonl", "a") as f:
            f.write(json.dumps(body) + "\n")
        mode = open("tok.mode").read().strip() if os.path.exists("tok.mode") else ""
        if mode == "slow":
            time.sleep(3)
        status = 200
        if mode == "prompt-only" and "prompt" not in body:
            status, out = 422, {"detail": [{"loc": ["body", "prompt"], "msg": "Field required"}]}
        else:
            text = body["prompt"] if "prompt" in body else template(body)
            out = {"count": len(text), "max_model_len": 100000, "tokens": [ord(c) for c in text]}
            if mode == "shape":
                out = {"ids": out["tokens"]}
        out = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
open("tok.port.tmp", "w").write(str(s.server_address[1]))
os.rename("tok.port.tmp", "tok.port")
s.serve_forever()
