# Shows the security defaults of dyn-route serve and dyn-trace capture: admin endpoints answer
# loopback clients on the main port, or with --admin-port only on a separate loopback listener
# (the main port then answers them 404 and /health there omits worker URLs); --max-concurrent-
# requests with --queue-size 0 (nobody waits) answers 429 with Retry-After; and no prompt, response text or credential planted in
# chat, Anthropic and Responses requests (streamed, plain, malformed) is ever written to a trace
# file or to stderr.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
printf '%s\n' '{"text":"reply with SECRET-REPLY-5e6f inside"}' >replies.jsonl
start_mocker w0 --worker-id 0 --replies replies.jsonl --speedup-ratio 0.5
# No scripted replies here: a stream then runs to max_tokens (4,000 tokens take ~45 s at this
# speed), so the two streams surely hold both slots when the third request arrives. (With w0's
# one-line reply they ended after a few tokens, and under load before the third request.)
start_mocker w1 --worker-id 0 --speedup-ratio 0.5
echo "== admin on a separate port"
start_router r --worker "$w1_url" --admin-port 0 --admin-port-file admin.port --max-concurrent-requests 2 \
  --queue-size 0
admin_url="http://127.0.0.1:$(cat admin.port)"
for p in /v1/bindings /v1/programs /metrics; do
  echo "$p: main $(curl -sS -o /dev/null -w '%{http_code}' "$r_url$p"), admin $(curl -sS -o /dev/null -w '%{http_code}' "$admin_url$p")"
done
echo "/health keys: main $(curl -sS "$r_url/health" | jq -c keys), admin $(curl -sS "$admin_url/health" | jq -c keys)"
echo "== --max-concurrent-requests 2"
long='{"model":"mock-model","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"long"}]}'
curl -sS -N -o s1.txt -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$long" &
c1=$!
curl -sS -N -o s2.txt -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$long" &
c2=$!
for i in $(seq 1 100); do [[ -s s1.txt && -s s2.txt ]] && break; sleep 0.05; done
curl -sS -D h3.txt -o s3.txt -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$long"
echo "third request: $(head -1 h3.txt | awk '{print $2}') $(jq -r '.error.type' s3.txt), Retry-After: $(tr -d '\r' <h3.txt | awk -F': ' 'tolower($1)=="retry-after"{print $2}')"
kill "$c1" "$c2"; wait "$c1" "$c2" 2>/dev/null
stop "$r_pid"
echo "== no secrets in traces or logs"
mkdir traces
start_router r --worker "$w0_url" --router-session-affinity-ttl-secs 60 --request-trace \
  --request-trace-file-path "$PWD/traces/serve"
dyn-trace capture --upstream "$w0_url" --port 0 --port-file cap.port --request-trace-file-path "$PWD/traces/cap" 2>cap.log &
cap_pid=$!; _dyn_pids+=("$cap_pid")
wait_file cap.port
cap_url="http://127.0.0.1:$(cat cap.port)"
secret_headers=(-H 'authorization: Bearer sk-SECRET-AUTH-9c1d' -H 'x-api-key: SECRET-XAPI-2b8e'
                -H 'x-session-id: sess-1' -H 'content-type: application/json')
for url in "$r_url" "$cap_url"; do
  curl -sS -N "${secret_headers[@]}" "$url/v1/chat/completions" \
    -d '{"model":"mock-model","stream":true,"max_tokens":12,"messages":[{"role":"user","content":"SECRET-PROMPT-7f3a"}]}' >>out.txt
  curl -sS "${secret_headers[@]}" "$url/v1/chat/completions" \
    -d '{"model":"mock-model","max_tokens":12,"messages":[{"role":"user","content":"SECRET-PROMPT-7f3a"}]}' >>out.txt
  curl -sS -N "${secret_headers[@]}" "$url/v1/messages" \
    -d '{"model":"mock-model","stream":true,"max_tokens":12,"messages":[{"role":"user","content":"SECRET-PROMPT-7f3a"}]}' >>out.txt
  curl -sS -N "${secret_headers[@]}" "$url/v1/responses" \
    -d '{"model":"mock-model","stream":true,"max_output_tokens":12,"input":"SECRET-PROMPT-7f3a"}' >>out.txt
  curl -sS "${secret_headers[@]}" "$url/v1/chat/completions" -d '{"messages":[{"content":"SECRET-PROMPT-7f3a"' >>out.txt
done
echo "reply secret reached the client: $(grep -c SECRET-REPLY out.txt | awk '{print ($1 > 0) ? "yes" : "no"}')"
stop "$r_pid"; stop "$cap_pid"
echo "trace rows: $(dyn-trace cat traces/* | wc -l)"
# An API key starts a word with sk- (the run configuration beside a trace names flags such as
# --router-disk-ttl-secs, whose "disk-" is no key).
echo "secrets in trace files: $(zcat -f traces/* | grep -c -e SECRET -e '\bsk-')"
echo "secrets in stderr logs: $(cat r.log cap.log | grep -c -e SECRET -e '\bsk-')"
