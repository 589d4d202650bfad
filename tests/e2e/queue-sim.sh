# Shows the router queue in the simulator (SPEC 3.4): dyn-replay --sim with one engine and
# --active-requests-threshold 1 holds every request that arrives while another runs, in the queue
# of dyn-route serve. Behind a long first request, a subagent's turn arrives, then its root
# session's (a person waits on it): with the policy file's session defaults (roots one tier above
# their subagents) the root's turn goes first; without thresholds nothing waits. With
# --queue-size 1 the requests that find the queue full get 429, with a time limit shorter than the
# first request the waiting ones get 503; rows carry the code, the reason and dyn.router_queue_ms.
printf '%s\n' \
  '{"timestamp":0,"session_id":"first","input_length":512,"output_length":200,"hash_ids":[1,2,3,4,5,6,7,8]}' \
  '{"timestamp":5,"session_id":"lead:sub","parent_session_id":"lead","input_length":128,"output_length":4,"hash_ids":[10,11]}' \
  '{"timestamp":6,"session_id":"lead","input_length":128,"output_length":4,"hash_ids":[20,21]}' \
  '{"timestamp":7,"session_id":"other","input_length":128,"output_length":4,"hash_ids":[30,31],"priority":3}' >wl.jsonl
printf '%s\n' '{"policy_classes":[{"name":"default","queue_policy":"fcfs"}],"session_defaults":{"strict_priority":1}}' >prio.json
show() {  # show LABEL FLAGS...: requests in completion order with status, code, wait and priority source
  local label=$1; shift
  expect_status 0 dyn-replay --sim --workers 1 --block-size 64 "$@" wl.jsonl >out.jsonl 2>/dev/null
  echo "$label:"
  jq -r '[.agent_context.session_id, .dyn.status, (.dyn.error.code // "-"), (.dyn.error.type // "-"),
          (if .dyn.router_queue_ms then (.dyn.router_queue_ms | round | tostring) + " ms" else "-" end),
          (.dyn.priority_source // "-"), (.agent_context.strict_priority // "-")] | join(" ")' out.jsonl
}
show "no threshold" --router-policy-config prio.json
show "fcfs queue" --active-requests-threshold 1
show "tiers" --active-requests-threshold 1 --router-policy-config prio.json
show "full" --active-requests-threshold 1 --queue-size 1
show "timeout" --active-requests-threshold 1 --queue-timeout-secs 0.05
echo "== queue flags need --sim"
expect_status 2 dyn-replay wl.jsonl --url http://127.0.0.1:9 --queue-size 3 2>&1 | grep -c -- --queue-size
