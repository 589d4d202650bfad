# Shows that the servers exit promptly on SIGTERM (issue 50): dyn-route serve, dyn-trace capture
# and dyn-mocker within 1 s when idle — also right after traffic, when the router still holds
# keep-alive connections to its workers (these once held its exit for the workers' 5 s keep-alive)
# — and a router with a stream in flight within its drain deadline (--drain-timeout-secs 2): it
# waits for the stream, cuts it at the deadline, and exits.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
ms() { echo $(($(date +%s%N) / 1000000)); }
chat() {  # chat URL MAX_TOKENS: one streamed chat completion (keeps the upstream connection alive)
  curl -sS -N -o /dev/null -H 'content-type: application/json' "$1/v1/chat/completions" \
    -d "{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":$2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
}
# exit_ms PID: SIGTERM, then sets took (ms until the process has exited) and rc (its status).
# Not in a command substitution: only this shell can wait for its children.
exit_ms() {
  local t0
  t0=$(ms)
  kill -TERM "$1"
  wait "$1"
  rc=$?
  took=$(($(ms) - t0))
}
within() {  # within NAME PID LIMIT_MS
  exit_ms "$2"
  echo "$1: exit status $rc, within $3 ms: $([[ $took -le $3 ]] && echo yes || echo "no ($took ms)")"
}
start_mocker w0 --worker-id 0 --speedup-ratio 100
start_mocker w1 --worker-id 1 --speedup-ratio 100

start_router idle --worker "$w0_url" --worker "$w1_url" --request-trace --request-trace-file-path "$PWD/idle"
within "router, no traffic" "$idle_pid" 1000

start_router r --worker "$w0_url" --worker "$w1_url" --request-trace --request-trace-file-path "$PWD/r"
for i in 1 2 3 4 5 6; do chat "$r_url" 4; done
within "router, idle after 6 requests" "$r_pid" 1000
echo "router trace rows: $(dyn-trace cat r.*.jsonl.gz | grep -c request_end)"

_start_server cap 2 dyn-trace capture --upstream "$w0_url" --request-trace-file-path "$PWD/cap"
for i in 1 2 3; do chat "$cap_url" 4; done
within "capture, idle after 3 requests" "$cap_pid" 1000

# A stream of 2,000 tokens at 20 ms per token (speedup 1) lasts far longer than the drain deadline.
start_mocker slow --worker-id 2 --speedup-ratio 1
start_router busy --worker "$slow_url" --drain-timeout-secs 2 --request-trace --request-trace-file-path "$PWD/busy"
chat "$busy_url" 2000 2>/dev/null &
client=$!
for i in $(seq 1 100); do
  [[ $(curl -s "$busy_url/metrics" | awk '/^dyn_frontend_in_flight_requests /{print $2}') == 1 ]] && break
  sleep 0.05
done
exit_ms "$busy_pid"
wait "$client"
echo "router, one stream in flight: exit status $rc, after the 2 s drain deadline: $([[ $took -ge 1900 ]] && echo yes || echo "no ($took ms)"), within 3 s: $([[ $took -le 3000 ]] && echo yes || echo "no ($took ms)")"
echo "the cut stream's row: $(dyn-trace cat busy.*.jsonl.gz | jq -r 'select(.event_type == "request_end") | .dyn.status')"

within "dyn-mocker, idle after traffic" "$w0_pid" 1000
