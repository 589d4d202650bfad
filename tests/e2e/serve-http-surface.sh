# Shows the HTTP surface of dyn-route serve and dyn-trace capture (issue 21.10): Anthropic's
# /v1/messages/count_tokens and /v1/models are proxied; HEAD / and OPTIONS are answered;
# an absolute-form request target (a client using the router as its HTTP proxy) is served and
# forwarded in origin form; a JSON body sent with a form content type (curl -d without -H) gets a
# clear 415, small or over 8 KB (cpp-httplib's own form reader answered a false 413 there);
# multipart too; every error status has a JSON body.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
cat >worker.json <<'JSON'
{"routes": [
 {"match": {"path": "/v1/messages/count_tokens"}, "status": 200, "headers": [["Content-Type", "application/json"]],
  "framing": "length", "segments": [{"data": "{\"input_tokens\": 12}"}]},
 {"match": {"path": "/v1/models"}, "status": 200, "headers": [["Content-Type", "application/json"]],
  "framing": "length", "segments": [{"data": "{\"object\": \"list\", \"data\": [{\"id\": \"m\", \"object\": \"model\"}]}"}]},
 {"match": {"path": "/v1/chat/completions"}, "status": 200, "headers": [["Content-Type", "application/json"]],
  "framing": "length", "segments": [{"data": "{\"id\": \"c\", \"object\": \"chat.completion\", \"model\": \"m\", \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", \"content\": \"ok\"}, \"finish_reason\": \"stop\"}], \"usage\": {\"prompt_tokens\": 5, \"completion_tokens\": 1}}"}]}
]}
JSON
start_scripted w worker.json
start_router r --worker "$w_url"
start_capture cap --upstream "$w_url"
code() { curl -sS -o body.txt -w '%{http_code}' "$@"; }
body_kind() { if jq -e '.error.message | length > 0' body.txt >/dev/null 2>&1; then echo "JSON error body"; elif [[ -s body.txt ]]; then echo "body $(head -c 60 body.txt)"; else echo "no body"; fi; }
big=$(python3 -c 'import json; print(json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 9000}]}))')
for front in r cap; do
  url="${front}_url"; u=${!url}
  echo "== $front"
  echo "count_tokens: $(code -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' "$u/v1/messages/count_tokens" -d '{"model":"m","messages":[{"role":"user","content":"hi"}]}') $(cat body.txt)"
  echo "GET /v1/models: $(code "$u/v1/models") $(jq -r '.data[0].id' body.txt)"
  echo "HEAD /: $(curl -sS -o /dev/null -I -w '%{http_code}' "$u/")"
  echo "GET /: $(code "$u/") $(jq -r .service body.txt)"
  echo "OPTIONS: $(curl -sS -o /dev/null -D h.txt -w '%{http_code}' -X OPTIONS "$u/v1/chat/completions") $(tr -d '\r' <h.txt | grep -i '^allow:')"
  port=${u##*:}
  abs=$(printf 'POST http://127.0.0.1:%s/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Type: application/json\r\nContent-Length: 58\r\nConnection: close\r\n\r\n{"model":"m","messages":[{"role":"user","content":"abs"}]}' "$port" "$port" |
        python3 -c 'import socket, sys; d = sys.stdin.buffer.read(); s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(d); r = b""
while True:
    c = s.recv(65536)
    if not c: break
    r += c
print(r.split(b"\r\n")[0].decode())' "$port")
  echo "absolute-form target: $abs; the worker saw $(jq -r 'select(.body.messages[0].content == "abs") | .target' w.requests.jsonl | tail -1)"
  echo "form content type, small JSON body: $(code "$u/v1/chat/completions" -d '{"model":"m","messages":[{"role":"user","content":"hi"}]}') $(jq -r .error.message body.txt)"
  echo "form content type, 9 KB JSON body: $(code "$u/v1/chat/completions" -d "$big") $(body_kind)"
  echo "multipart: $(code "$u/v1/chat/completions" -F 'a=b') $(body_kind)"
  echo "JSON content type, 9 KB: $(code -H 'content-type: application/json' "$u/v1/chat/completions" -d "$big") $(jq -r '.choices[0].message.content' body.txt)"
  echo "unknown route: $(code "$u/v2/nothing") $(body_kind)"
  echo "bad JSON: $(code -H 'content-type: application/json' "$u/v1/chat/completions" -d '{oops') $(body_kind)"
done
echo "== body limit"
start_router small --worker "$w_url" --max-request-bytes 1000
echo "over --max-request-bytes: $(code -H 'content-type: application/json' "$small_url/v1/chat/completions" -d "$big") $(jq -r .error.message body.txt)"
