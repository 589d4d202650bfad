# Shows that every kind of bad HTTP input to dyn-route serve and dyn-trace capture gets a clear
# OpenAI-style error with the right status while the proxy keeps serving: an 8 KiB+ header (400),
# a raw CR in a header value and a header line without a colon (400: malformed, nothing reaches
# the worker or the trace), a body over --max-request-bytes and over the 32 MiB default (413),
# non-UTF-8 JSON and header values (400), nesting deeper than 128 levels (400, no stack overflow),
# an empty body (400); unknown fields pass through to the worker untouched. Percent-encoded CR/LF
# ("%0d%0a") is plain text in HTTP: it stays those six characters in one header value, as nginx
# keeps it (the session id below), and no header is injected.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0
start_router r --worker "$w0_url" --max-request-bytes 4096 --router-session-affinity-ttl-secs 60 \
  --request-trace --request-trace-file-path "$PWD/tr" --request-trace-file-format jsonl
good='{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}'
# post NAME CURL-ARGS...: prints NAME, the status and the error's type and message.
post() {
  local name=$1; shift
  local code
  code=$(curl -sS -o resp.json -w '%{http_code}' -H 'content-type: application/json' "$@")
  echo "$name: $code $(jq -r 'if .error then "\(.error.type): \(.error.message)" else "ok" end' resp.json 2>/dev/null || echo '(not JSON)')"
}
# raw NAME BYTES: sends BYTES as a whole HTTP request and prints the status line and error.
raw() {
  exec 3<>"/dev/tcp/127.0.0.1/$(cat r.port)"
  printf "$2" >&3
  local out; out=$(cat <&3); exec 3>&-
  echo "$1: $(head -1 <<<"$out" | tr -d '\r') $(tail -1 <<<"$out" | jq -r 'if .error then "\(.error.type): \(.error.message)" else "ok" end' 2>/dev/null)"
}
big=$(head -c 9000 /dev/zero | tr '\0' a)
post "header over 8 KiB" -H "x-big: $big" "$r_url/v1/chat/completions" -d "$good"
post "percent-encoded CRLF in a header" -H 'x-session-id: a%0d%0ax-injected: yes' "$r_url/v1/chat/completions" -d "$good"
raw "raw CR in a header" 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-note: a\rx-injected: yes\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}'
raw "header line without a colon" "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-no-colon-here\r\ncontent-type: application/json\r\nContent-Length: ${#good}\r\nConnection: close\r\n\r\n$good"
head -c 5000 /dev/zero | tr '\0' ' ' >pad.txt
jq -c --rawfile p pad.txt '.messages[0].content = $p' <<<"$good" >big.json
post "body over --max-request-bytes 4096" "$r_url/v1/chat/completions" --data-binary @big.json
printf '{"model":"mock-model","messages":[{"role":"user","content":"\xff\xfe"}]}' >latin.json
post "non-UTF-8 body" "$r_url/v1/chat/completions" --data-binary @latin.json
post "non-UTF-8 session header" -H $'x-session-id: ab\xff\xfe' "$r_url/v1/chat/completions" -d "$good"
head -c 1000 /dev/zero | tr '\0' '[' >deep.json
post "1000-deep nesting" "$r_url/v1/chat/completions" --data-binary @deep.json
post "empty body" "$r_url/v1/chat/completions" --data-binary ''
post "unknown fields" "$r_url/v1/chat/completions" -d "$(jq -c '. + {"x_vendor_knob": {"a": [1, 2]}, "zz": null}' <<<"$good")"
echo "bindings still readable: $(curl -sS -o /dev/null -w '%{http_code}' "$r_url/v1/bindings")"
post "good request after all that" "$r_url/v1/chat/completions" -d "$good"
echo "requests that reached the worker: $(curl -sS "$w0_url/metrics" | awk '/^dyn_mocker_requests_total/{print $2}')"
stop "$r_pid"
echo "trace rows (status, error code):"
jq -r '[.dyn.status, (.dyn.error.code // "-"), (.agent_context.session_id // "-")] | @tsv' tr
echo "raw CR or LF inside a trace row: $(grep -c $'\r' tr)"
echo "== the 32 MiB default, and dyn-trace capture"
dyn-trace capture --upstream "$w0_url" --port 0 --port-file cap.port --request-trace-file-path "$PWD/cap" 2>cap.log &
cap_pid=$!; _dyn_pids+=("$cap_pid")
wait_file cap.port
cap_url="http://127.0.0.1:$(cat cap.port)"
head -c $((33 * 1024 * 1024)) /dev/zero | tr '\0' ' ' >huge.json
post "33 MiB body" "$cap_url/v1/chat/completions" --data-binary @huge.json
post "percent-encoded CRLF through capture" -H 'authorization: Bearer a%0d%0ax-injected: yes' "$cap_url/v1/chat/completions" -d "$good"
post "good request through capture" "$cap_url/v1/chat/completions" -d "$good"
stop "$cap_pid"
echo "capture rows: $(dyn-trace cat cap.*.jsonl.gz | wc -l)"
