# Shows that dyn-route serve sees a client hang up while its request waits before any worker has
# it (issue 51.4): queued behind --max-concurrent-requests 1 (a request holds the slot for 4.5 s),
# held by program admission (--admission thunderagent, a program too big for the worker: it would
# wait for the 30 s resume timeout), and waiting for its session's first dispatch (a sibling turn
# whose worker sends no headers for 4.5 s; the holders' clients give up then, so a loaded machine's
# slow curl start leaves them time). Each waiting client gives up after 0.8 s: its row says
# cancelled with the wait it had, ending long before the hold would have (under 2 s from its
# arrival); the queue's depth, its deferred count and its dispatch slots are back to 0, admission
# holds no request for it, it never reached the worker, and the next request is served.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/client-hangup/script.json"
body() { printf '{"model":"m","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"%s"}]}' "$1"; }
gauge() { curl -sS "$1/metrics" | awk -v n="$2" 'index($1, n) == 1 {s += $2} END {print s + 0}'; }
# send URL ID CONTENT SECONDS [HEADER]: a streamed chat that gives up after SECONDS; prints its status.
send() {
  local h=(-H 'content-type: application/json' -H "x-request-id: $2")
  [[ -n ${5:-} ]] && h+=(-H "$5")
  curl -sS -N -o /dev/null -m "$4" -w '%{http_code}' "${h[@]}" "$1/v1/chat/completions" -d "$(body "$3")" 2>/dev/null
  echo
}
# until_gauge URL NAME VALUE: waits (at most 5 s) until the gauge reads VALUE.
until_gauge() {
  for _ in $(seq 1 100); do [[ $(gauge "$1" "$2") == "$3" ]] && return 0; sleep 0.05; done
  echo "$2 never read $3 (it reads $(gauge "$1" "$2"))"
}
rows() {  # rows TRACE: each request's row, by request id; its waits, when it had them, as about 0.8 s or not
  jq -c 'def about(x): if x == null then null else (x >= 600 and x < 2000) end;
    {id: .request.x_request_id, status: .dyn.status,
     ended_within_2s: (.event_time_unix_ms - .request.request_received_ms < 2000),
     router_queue_about_800ms: about(.dyn.router_queue_ms), pause_about_800ms: about(.dyn.pause_ms)}' "$1" | sort
}
reached_worker() { grep -c "\"$1\"" w.requests.jsonl; }

echo "== queued behind --max-concurrent-requests 1"
start_router a --worker "$w_url" --max-concurrent-requests 1 \
  --request-trace --request-trace-file-path "$PWD/a.jsonl" --request-trace-file-format jsonl
send "$a_url" holder long-prefill 4.5 >/dev/null &
holder=$!
until_gauge "$a_url" dyn_router_dispatch_slots_in_use 1
send "$a_url" gives-up queued-a 0.8 >/dev/null &
gives_up=$!
until_gauge "$a_url" dyn_router_queue_pending_requests 1
wait "$gives_up"
until_gauge "$a_url" dyn_router_queue_pending_requests 0
wait "$holder"
until_gauge "$a_url" dyn_router_dispatch_slots_in_use 0
echo "next request: $(send "$a_url" next stays 5)"
echo "queue pending $(gauge "$a_url" dyn_router_queue_pending_requests), slots $(gauge "$a_url" dyn_router_dispatch_slots_in_use), in flight $(gauge "$a_url" dyn_frontend_in_flight_requests)"
stop "$a_pid"
rows a.jsonl
echo "the queued request reached the worker: $(reached_worker queued-a) times"

echo "== held by program admission"
start_router b --worker "$w_url" --kv-cache-block-size 16 \
  --admission thunderagent --admission-kv-blocks 64 --admission-buffer-tokens 16 \
  --scheduler-interval-seconds 0.1 --resume-timeout-seconds 30 \
  --request-trace --request-trace-file-path "$PWD/b.jsonl" --request-trace-file-format jsonl
big=$(printf 'queued-b %.0s' $(seq 1 600))  # about 1,350 tokens: more than the worker's 1,024
send "$b_url" too-big "$big" 0.8 'x-dynamo-session-id: agent-big' >/dev/null
until_gauge "$b_url" dyn_router_queue_deferred_requests 0
curl -sS "$b_url/v1/programs" | jq -c '.programs[] | {program_id, state, waiting_requests}'
echo "next request: $(send "$b_url" small stays 5 'x-dynamo-session-id: agent-small')"
stop "$b_pid"
rows b.jsonl
echo "the deferred request reached the worker: $(jq -s '[.[] | select(.body_bytes > 4096)] | length' w.requests.jsonl) times"

echo "== waiting for its session's first dispatch"
start_router c --worker "$w_url" --router-session-affinity-ttl-secs 60 \
  --request-trace --request-trace-file-path "$PWD/c.jsonl" --request-trace-file-format jsonl
send "$c_url" first-turn long-prefill 4.5 'x-dynamo-session-id: s' >/dev/null &
first=$!
until_gauge "$c_url" dyn_frontend_in_flight_requests 1
send "$c_url" sibling queued-c 0.8 'x-dynamo-session-id: s' >/dev/null &
sibling=$!
until_gauge "$c_url" dyn_router_binding_waits_total 1
wait "$sibling"
until_gauge "$c_url" dyn_frontend_in_flight_requests 1
wait "$first"
echo "next turn: $(send "$c_url" next-turn stays 5 'x-dynamo-session-id: s')"
stop "$c_pid"
rows c.jsonl
echo "the waiting turn reached the worker: $(reached_worker queued-c) times"
