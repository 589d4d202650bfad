# Shows that a request whose worker fails before the first byte (a 503, a 429 with Retry-After, a
# refused connection) is retried on another worker after a backoff and the client gets the other
# worker's answer; the row counts the retry (dyn.retries) and names the failed attempt
# (dyn.attempts: worker, stage, error, status, circuit); a 400 from the worker passes through
# untouched, never retried; --disable-retries gives the client the 503 as the worker sent it;
# /metrics counts the retries per worker.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted s0 "$DYN_ROOT/tests/fixtures/fleet/worker-503.json"
start_mocker w1 --worker-id 1
start_router r --worker "$s0_url" --worker "$w1_url" --router-mode round-robin --retry-initial-backoff-ms 20 \
  --request-trace --request-trace-file-path "$PWD/tr" --request-trace-file-format jsonl
ask() {  # ask URL TEXT: status and worker of one non-streamed chat request
  curl -sS -D h.txt -o a.json "$1/v1/chat/completions" -H 'content-type: application/json' \
    -d "{\"model\":\"mock-model\",\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"$2\"}]}"
  echo "$2: $(head -1 h.txt | awk '{print $2}') worker $(tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}') $(jq -c '.error.message // .choices[0].finish_reason' a.json)"
}
ask "$r_url" "hello"           # round robin: worker 0 first, which answers 503
ask "$r_url" "again"           # worker 1 directly (round robin)
ask "$r_url" "bad-request"     # worker 0: a 400 passes through
ask "$r_url" "more"            # worker 1
ask "$r_url" "overloaded"      # worker 0: 429 with Retry-After, another worker exists
curl -sS "$r_url/metrics" | grep -E '^dyn_(frontend_retries|worker_retried)_total' | sed 's/url="[^"]*"/url=U/'
stop "$r_pid"
jq -c '[.request.worker.decode_worker_id, .dyn.status, (.dyn.retries // 0), (.dyn.attempts // [])]' tr
start_router q --worker "$s0_url" --worker "$w1_url" --router-mode round-robin --disable-retries
ask "$q_url" "hello"
stop "$q_pid"
# A worker that refuses connections: retried elsewhere (and marked down).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_router c --worker "http://127.0.0.1:$port" --worker "$w1_url" --router-mode round-robin \
  --retry-initial-backoff-ms 20 --request-trace --request-trace-file-path "$PWD/tc" --request-trace-file-format jsonl
ask "$c_url" "hello"
stop "$c_pid"
jq -c '[.request.worker.decode_worker_id, .dyn.status, .dyn.retries, [.dyn.attempts[] | [.worker, .stage, .error]]]' tc
