# Shows a request's priority carried from its headers, its body and its session into the router
# queue's order and the trace (SPEC 3.4): with --max-concurrent-requests 1 and a stream holding the
# slot, four requests wait: bg (says nothing), lead (x-dynamo-request-priority: 30), deep (body
# nvext.agent_hints {priority 5, strict_priority 2}, beside a malformed priority header, which is
# ignored) and sub (a subagent of deep, saying nothing: it inherits tier 1 and priority 5). Once the
# slot frees they are served by tier, then priority (fcfs: 30 s earlier), then arrival: deep, sub,
# lead, bg; their rows carry agent_context.priority / strict_priority and dyn.priority_source.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w --speedup-ratio 0.5
start_router r --worker "$w_url" --max-concurrent-requests 1 \
  --request-trace --request-trace-file-path "$PWD/tr.jsonl" --request-trace-file-format jsonl
long='{"model":"mock-model","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"long"}]}'
short='{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"short"}]}'
hinted='{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"short"}],"nvext":{"agent_hints":{"priority":5,"strict_priority":2}}}'
pending() { curl -sS "$r_url/metrics" | awk 'index($1, "dyn_router_queue_pending_requests") == 1 {s += $2} END {print s + 0}'; }
send() {  # send NAME BODY HEADER...: in the background, then waits until it is queued
  local name=$1 body=$2 want=$(( $(pending) + 1 )); shift 2
  local h=() x; for x in "$@"; do h+=(-H "$x"); done
  curl -sS -o "$name.txt" -w '%{http_code}\n' -H 'content-type: application/json' -H "x-request-id: $name" "${h[@]}" \
    "$r_url/v1/chat/completions" -d "$body" >"$name.code" &
  pids+=($!)
  for i in $(seq 1 200); do [[ $(pending) -ge $want ]] && break; sleep 0.05; done
}
pids=()
curl -sS -N -o s.txt -H 'content-type: application/json' -H 'x-request-id: holder' "$r_url/v1/chat/completions" -d "$long" &
s=$!
for i in $(seq 1 200); do [[ -s s.txt ]] && break; sleep 0.05; done
send bg "$short" 'x-dynamo-session-id: bg-1'
send lead "$short" 'x-dynamo-session-id: lead-1' 'x-dynamo-request-priority: 30'
send deep "$hinted" 'x-dynamo-session-id: lead-2' 'x-dynamo-request-priority: high'
send sub "$short" 'x-dynamo-session-id: lead-2:sub' 'x-dynamo-parent-session-id: lead-2'
echo "waiting: $(pending)"
kill "$s"; wait "$s" 2>/dev/null
wait "${pids[@]}"
for n in bg lead deep sub; do echo "$n: $(cat $n.code)"; done
stop "$r_pid"
echo "== rows in the order they ended"
jq -c 'select(.request.x_request_id != "holder") | {id: .request.x_request_id, priority: .agent_context.priority,
  strict_priority: .agent_context.strict_priority, source: .dyn.priority_source, class: .dyn.policy_class,
  queued: (.dyn.router_queue_ms > 0), depth: .request.queue_depth}' tr.jsonl
