# Shows the router queue's 503 with Retry-After (SPEC 3.4) and its reasons kept apart: two workers
# with --active-requests-threshold 1 and --queue-timeout-secs 1. With a stream on worker 0, a
# request pinned to worker 0 (x-dynamo-worker-instance-id) waits in that worker's lane and gets 503
# pinned_worker_overloaded after 1 s, while an unpinned request sent meanwhile goes to worker 1 at
# once; with both workers busy an unpinned request gets 503 all_workers_overloaded. The trace rows
# carry the reason, the wait (dyn.router_queue_ms) and the queue depth met.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0 --speedup-ratio 0.5
start_mocker w1 --worker-id 1 --speedup-ratio 0.5
start_router r --worker "$w0_url" --worker "$w1_url" --active-requests-threshold 1 --queue-timeout-secs 1 \
  --request-trace --request-trace-file-path "$PWD/tr.jsonl" --request-trace-file-format jsonl
long='{"model":"mock-model","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"long"}]}'
short='{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"short"}]}'
post() {  # post NAME BODY [HEADER...]: status, error type, Retry-After, worker
  local name=$1 body=$2; shift 2
  local h=() x; for x in "$@"; do h+=(-H "$x"); done
  curl -sS -D "$name.h" -o "$name.txt" -H 'content-type: application/json' -H "x-request-id: $name" "${h[@]}" \
    "$r_url/v1/chat/completions" -d "$body"
  printf '%s: %s %s, Retry-After: %s, worker: %s\n' "$name" "$(head -1 "$name.h" | awk '{print $2}')" \
    "$(jq -r '.error.type // "ok"' "$name.txt")" \
    "$(tr -d '\r' <"$name.h" | awk -F': ' 'tolower($1)=="retry-after"{print $2}')" \
    "$(tr -d '\r' <"$name.h" | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}')"
}
stream() {  # stream NAME WORKER: a long stream pinned to WORKER, left running
  curl -sS -N -o "$1.txt" -H 'content-type: application/json' -H "x-dynamo-worker-instance-id: $2" \
    "$r_url/v1/chat/completions" -d "$long" &
  for i in $(seq 1 200); do [[ -s $1.txt ]] && break; sleep 0.05; done
}
stream s0 0
s0=$!
post pinned "$short" 'x-dynamo-worker-instance-id: 0' >pinned.out &
p=$!
for i in $(seq 1 200); do
  [[ $(curl -sS "$r_url/metrics" | awk 'index($1, "dyn_router_queue_pending_requests") == 1 {s += $2} END {print s + 0}') == 1 ]] && break
  sleep 0.05
done
post unpinned "$short"
wait "$p"; cat pinned.out
stream s1 1
s1=$!
post all-busy "$short"
kill "$s0" "$s1"; wait "$s0" "$s1" 2>/dev/null
curl -sS "$r_url/metrics" | grep -E '^dyn_router_queue_rejected_total'
stop "$r_pid"
jq -c 'select(.request.x_request_id != null) | {id: .request.x_request_id, status: .dyn.status,
  error: .dyn.error.type, waited_1s: ((.dyn.router_queue_ms // 0) >= 1000), queue_depth: .request.queue_depth}' tr.jsonl |
  sort
