# Shows case 32 (vllm-project/router#215): two scripted workers behind dyn-route serve. 3 clients
# pin worker 0 (x-dynamo-worker-instance-id: 0) and give up after 0.4 s while the router still
# waits for its headers (held 1.5 s); 3 more give up after 0.6 s mid-stream. While the first 3
# wait, they are worker 0's load in /metrics. Once worker 0 is done, every aborted request has
# ended its load exactly once (in-flight gauges 0, 6 cancelled rows), and least-loaded routing of
# sequential requests still gives worker 0 its share.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
c="$DYN_ROOT/tests/fixtures/cases/32-load-release-client-cancel"
start_scripted w0 "$c/script.json"
start_scripted w1 "$c/script.json"
start_router r --worker "$w0_url" --worker "$w1_url" --router-mode least-loaded \
  --request-trace --request-trace-file-path "$PWD/r.jsonl" --request-trace-file-format jsonl
gauge() {  # gauge NAME [LABEL-PREFIX]: the value of the /metrics sample NAME{LABEL-PREFIX...}
  curl -sS "$r_url/metrics" | awk -v n="$1$2" '$1 == n || index($1, n) == 1 {print $2}'
}
body() { printf '{"model":"m","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"%s"}]}' "$1"; }
send() {  # send SECONDS KIND: one streamed request pinned to worker 0, abandoned after SECONDS
  curl -sS -N -o /dev/null -m "$1" -H 'content-type: application/json' -H 'x-dynamo-worker-instance-id: 0' \
    "$r_url/v1/chat/completions" -d "$(body "$2")" 2>/dev/null
}
clients=()
for i in 1 2 3; do send 0.4 stall-headers & clients+=($!); done
# Until their clients give up (0.4 s) they are worker 0's load; the router then cancels them at
# once, without waiting for worker 0's headers (issue 51.4).
for i in $(seq 1 20); do
  n=$(gauge dyn_worker_in_flight '{worker="0",')
  [[ $n == 3 ]] && break
  sleep 0.05
done
echo "while 3 wait for worker 0's headers: worker 0 in flight $n"
wait "${clients[@]}"
clients=()
for i in 1 2 3; do send 0.6 slow-stream & clients+=($!); done
wait "${clients[@]}"
# Worker 0's stalled streams would run until about 1.5 s + 2.4 s after they started.
for i in $(seq 1 100); do
  [[ $(gauge dyn_frontend_in_flight_requests) == 0 ]] && break
  sleep 0.1
done
echo "after worker 0 finished: in flight worker 0 $(gauge dyn_worker_in_flight '{worker="0",'), worker 1 $(gauge dyn_worker_in_flight '{worker="1",'), frontend $(gauge dyn_frontend_in_flight_requests)"
# Ties are broken at random: with no leaked load worker 0 gets about half of 16 sequential
# requests (none at all with probability 2^-16); with a leaked count it would get none.
for i in $(seq 1 16); do
  curl -sS -o /dev/null -D h.txt -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$(body "short $i")"
  tr -d '\r' <h.txt | awk -F': ' 'tolower($1) == "x-dyn-worker" {print $2}'
done >placed.txt
echo "least-loaded placed on worker 0 at least once out of $(wc -l <placed.txt): $(grep -qx 0 placed.txt && echo yes || echo no)"
stop "$r_pid"
echo "cancelled rows: $(jq -s 'map(select(.dyn.status == "cancelled")) | length' r.jsonl)"
echo "ok rows: $(jq -s 'map(select(.dyn.status == "ok")) | length' r.jsonl)"
