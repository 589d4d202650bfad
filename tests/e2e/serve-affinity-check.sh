# Shows that the public affinity check of SPEC 2.5 passes through dyn-route serve with two
# dyn-mocker workers: a six-turn session spreads round-robin over both workers without the TTL,
# and with --router-session-affinity-ttl-secs 300 every turn lands on one worker while the cached
# tokens reported by the worker grow after the first turn. The trace is written (gzip segments)
# by the router; old segments are cleared between runs.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
run() {
  rm -f tr.*.jsonl.gz
  start_mocker w0 --worker-id 0
  start_mocker w1 --worker-id 1
  start_router r --worker "$w0_url" --worker "$w1_url" --request-trace --request-trace-file-path "$PWD/tr" "$@"
  local msgs='[{"role":"system","content":"You are a careful assistant. Answer briefly and precisely, always."},{"role":"user","content":"Plan a six step refactor of the router module, one step per turn."}]'
  for t in 1 2 3 4 5 6; do
    chat "$r_url" '{"x-session-id":"sess-1"}' "$msgs" 4 >/dev/null
    msgs=$(grow "$msgs" "$t")
  done
  stop "$r_pid"; stop "$w0_pid"; stop "$w1_pid"
  dyn-trace cat tr.*.jsonl.gz >rows.jsonl
  jq -r '[.agent_context.session_id, .request.worker.decode_worker_id, .request.cached_tokens, .dyn.binding] | @tsv' rows.jsonl
  jq -s -r '"workers used: \(map(.request.worker.decode_worker_id) | unique | length)",
            "cached tokens in all: \(map(.request.cached_tokens) | add)",
            "cached grows after turn 1: \([.[1:][] | .request.cached_tokens] as $c | [range(1; $c|length)] | all(. as $i | $c[$i] > $c[$i-1]))"' rows.jsonl
  # The router asked the worker for usage on the client's behalf; the client never sees it.
  grep -c '"usage"' body.txt || true
}
echo "== without TTL (round-robin)"
run
echo "== with --router-session-affinity-ttl-secs 300"
run --router-session-affinity-ttl-secs 300
