# Stand-in for an engine's OpenAI-compatible POST /tokenize (vLLM/SGLang shape) with one token per
# character (id = code point), so its counts differ from the 4-byte convention: a prompt is
# tokenized as is, chat messages as "role:content\n" each (a minimal chat template). Each request
# is logged to tok.log (path + sorted body keys); the port is written to tok.port once listening.
import http.server, json, os
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with open("tok.log", "a") as f:
            f.write(self.path + " " + json.dumps(sorted(body)) + "\n")
        text = body["prompt"] if "prompt" in body else "".join(m["role"] + ":" + m["content"] + "\n" for m in body["messages"])
        out = json.dumps({"count": len(text), "max_model_len": 100000, "tokens": [ord(c) for c in text]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open("tok.port.tmp", "w").write(str(s.server_address[1]))
os.rename("tok.port.tmp", "tok.port")
s.serve_forever()
