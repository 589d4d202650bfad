# Shows parent groups and soft affinity through dyn-route serve (SPEC 2.3, 2.4): a parent session
# with two subagents (x-dynamo-parent-session-id) under hard affinity: the subagents share one
# binding (the parent group) and one worker while the parent keeps its own binding; GET
# /v1/bindings lists both. Then soft mode with the kv policy: a session's turns stay on its worker.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0
start_mocker w1 --worker-id 1
start_mocker w2 --worker-id 2
start_router r --worker "$w0_url" --worker "$w1_url" --worker "$w2_url" --router-session-affinity-ttl-secs 300
m='[{"role":"user","content":"Investigate the failing build and report back."}]'
echo "parent:     $(chat "$r_url" '{"x-dynamo-session-id":"run-7:planner"}' "$m")"
for t in 1 2 3; do
  echo "subagent A: $(chat "$r_url" '{"x-dynamo-session-id":"run-7:a","x-dynamo-parent-session-id":"run-7:planner"}' "$m")"
  echo "subagent B: $(chat "$r_url" '{"x-dynamo-session-id":"run-7:b","x-dynamo-parent-session-id":"run-7:planner"}' "$m")"
done
echo "parent:     $(chat "$r_url" '{"x-dynamo-session-id":"run-7:planner"}' "$m")"
curl -sS "$r_url/v1/bindings" | jq -c '.count, (.bindings[] | {kind, key, parent_session_id, worker, state, active_leases})'
stop "$r_pid"

echo "== soft mode, kv policy"
start_router s --worker "$w0_url" --worker "$w1_url" --worker "$w2_url" --router-mode kv \
  --router-session-affinity-ttl-secs 300 --router-session-affinity-mode soft
m='[{"role":"user","content":"Summarize the design document in three bullet points for the team."}]'
for t in 1 2 3 4; do
  echo "turn $t: $(chat "$s_url" '{"x-session-id":"soft-1"}' "$m")"
  m=$(grow "$m" "$t")
done
curl -sS "$s_url/v1/bindings" | jq -c '.affinity, (.bindings[] | {key, worker, version})'
