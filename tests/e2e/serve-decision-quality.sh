# Shows that dyn-route serve's decision quality counters move as crafted cases say, in /metrics and
# in request_end's dyn fields: a session binding that keeps a turn on its worker while another
# eligible worker holds more of its prompt is an affinity-forced non-max-overlap pick (and the
# client's pin that put that prompt there a pinned one); a worker loaded with long streams loses a
# prompt it holds to an idle one (load-forced); and after a worker restarts, until its new
# publisher's first KV event batch tells the router, the router predicts cached tokens the restarted
# engine no longer has: predicted > delivered, counted as a stale index.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
metric() {  # metric NAME [LABEL]: the value of one sample of r's /metrics
  curl -s "$1/metrics" | awk -v n="$2" -v l="$3" '$1 == n || (l != "" && index($1, n "{") == 1 && index($1, l)) {print $2; exit}'
}
msg() { echo "[{\"role\":\"user\",\"content\":\"$1 $(printf 'lorem ipsum dolor %.0s' $(seq 12))\"}]"; }
send() {  # send URL MESSAGES [HEADER...]: one chat completion; prints the worker that served it
  local url=$1 m=$2; shift 2
  local h=() hd
  for hd in "$@"; do h+=(-H "$hd"); done
  curl -sS -D hdr.txt -o /dev/null "${h[@]}" -H 'content-type: application/json' "$url/v1/chat/completions" \
    -d "{\"model\":\"m\",\"max_tokens\":1,\"messages\":$m}"
  tr -d '\r' <hdr.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}'
}
end_row() { jq -c --arg id "$2" 'select(.event_type == "request_end" and .request.x_request_id == $id) |
  {predicted: .dyn.predicted_cached_tokens, delivered: .request.cached_tokens, stale: .dyn.stale_cached_tokens,
   avoidable: (.dyn.avoidable_prefill_tokens > 0), kv_optimal: .dyn.kv_optimal, cause: .dyn.non_max_cause}' "$1"; }

start_mocker w0 --block-size 16 --speedup-ratio 1
start_mocker w1 --block-size 16 --speedup-ratio 1
ws=(--worker "$w0_url" --worker "$w1_url" --router-mode kv --kv-cache-block-size 16 --health-timeout-ms 10000)

echo "== affinity: a bound turn stays on its worker while the other holds more of its prompt"
start_router a "${ws[@]}" --router-session-affinity-ttl-secs 60 --request-trace --request-trace-file-path a.jsonl \
  --request-trace-file-format jsonl
m1=$(msg affinity); m2=$(grow "$m1" 1)
x=$(send "$a_url" "$m1" "x-dynamo-session-id: s1" "x-request-id: turn1")
y=$((1 - x))
send "$a_url" "$m2" "x-dynamo-worker-instance-id: $y" "x-request-id: pinned" >/dev/null
echo "turn 2 on its bound worker: $([[ $(send "$a_url" "$m2" "x-dynamo-session-id: s1" "x-request-id: turn2") == "$x" ]] && echo yes)"
for c in affinity pinned load tie admission policy; do
  echo "non-max $c: $(metric "$a_url" dyn_router_non_max_overlap_selections_total "cause=\"$c\"")"
done
echo "kv-optimal $(metric "$a_url" dyn_router_kv_optimal_decisions_total) of 3"
stop "$a_pid"
for id in turn1 pinned turn2; do echo "$id $(end_row a.jsonl $id | jq -c '{avoidable, kv_optimal, cause}')"; done

echo "== load: a worker busy with long streams loses a prompt it holds"
start_router b "${ws[@]}" --request-trace --request-trace-file-path b.jsonl --request-trace-file-format jsonl
p=$(msg load)
x=$(send "$b_url" "$p" "x-request-id: first")
y=$((1 - x))
long=$(msg "$(printf 'long stream %.0s' $(seq 30))")
pids=()
for i in 1 2 3; do
  curl -sS -o /dev/null -m 20 -H "x-dynamo-worker-instance-id: $x" -H 'content-type: application/json' \
    "$b_url/v1/chat/completions" -d "{\"model\":\"m\",\"max_tokens\":400,\"stream\":true,\"messages\":$long}" &
  pids+=($!)
done
for _ in $(seq 100); do [[ "$(curl -s "$b_url/metrics" | awk -v w="worker=\"$x\"" 'index($1, "dyn_worker_in_flight{") == 1 && index($1, w) {print $2}')" == 3 ]] && break; sleep 0.05; done
echo "again on the idle worker: $([[ $(send "$b_url" "$p" "x-request-id: again") == "$y" ]] && echo yes)"
echo "non-max load: $(metric "$b_url" dyn_router_non_max_overlap_selections_total 'cause="load"')"
kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
stop "$b_pid"
echo "again $(end_row b.jsonl again | jq -c '{avoidable, kv_optimal, cause}')"

echo "== stale index: a worker restarts with an empty cache; the router still predicts its blocks"
# The restarted worker keeps its HTTP and KV event addresses, so they are fixed ports: free ones
# picked here, tried again with others if another process took one meanwhile.
w2_up() {  # w2_up LOG: starts the worker on the chosen ports; true once it answers /health
  dyn-mocker --port "$port" --block-size 16 --speedup-ratio 1 --kv-events-endpoint "tcp://127.0.0.1:$pub" \
    --kv-events-replay-endpoint "tcp://127.0.0.1:$rep" >"$1" 2>&1 &
  w2_pid=$!; _dyn_pids+=("$w2_pid")
  for _ in $(seq 200); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/health" && return 0
    kill -0 "$w2_pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
for _ in 1 2 3 4 5; do
  read -r port pub rep < <(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
  w2_up w2.log && break
done
w2_url="http://127.0.0.1:$port"
start_mocker w3 --block-size 16 --speedup-ratio 1 --kv-events-endpoint 'tcp://127.0.0.1:*' \
  --kv-events-replay-endpoint 'tcp://127.0.0.1:*'
w3_ev="$(curl -s "$w3_url/health" | jq -r '.kv_events_endpoint + "," + .kv_events_replay_endpoint')"
start_router c --worker "$w2_url" --worker "$w3_url" --router-mode kv --kv-cache-block-size 16 --health-timeout-ms 10000 \
  --health-interval-ms 600000 --router-kv-events --worker-kv-events "$w2_url=tcp://127.0.0.1:$pub,tcp://127.0.0.1:$rep" \
  --worker-kv-events "$w3_url=$w3_ev" --request-trace --request-trace-file-path c.jsonl --request-trace-file-format jsonl
sleep 0.5  # the subscriptions connect
q=$(msg stale)
send "$c_url" "$q" "x-dynamo-worker-instance-id: 0" "x-request-id: warm" >/dev/null
for _ in $(seq 200); do [[ "$(metric "$c_url" dyn_router_index_blocks 'worker="0"')" -gt 0 ]] && break; sleep 0.05; done
echo "worker 0 holds blocks in the index: $([[ "$(metric "$c_url" dyn_router_index_blocks 'worker="0"')" -gt 0 ]] && echo yes)"
stop "$w2_pid"
w2_up w2b.log || echo "the worker did not come back on its addresses"
echo "after the restart, to worker $(send "$c_url" "$q" "x-request-id: stale")"
echo "stale over-predicted requests: $(metric "$c_url" dyn_router_stale_overpredicted_requests_total)"
echo "stale tokens > 0: $([[ "$(metric "$c_url" dyn_router_stale_overpredicted_tokens_total)" -gt 0 ]] && echo yes)"
echo "usage requests: $(metric "$c_url" dyn_router_usage_requests_total)"
stop "$c_pid"
echo "warm $(end_row c.jsonl warm | jq -c '{stale}')"
end_row c.jsonl stale | jq -c '{delivered, stale_is_predicted: (.stale == .predicted), predicted_positive: (.predicted > 0)}'
