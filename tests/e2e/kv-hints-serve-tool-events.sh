# Shows that harness tool events feed dyn-route serve's tool-ttl policy (issue 49, SPEC 6.4): the
# harness knows a tool runs even when the response does not say one was called. Session a's reply
# here ends plainly (finish length), so from the response alone tool-ttl pins nothing and LRU
# evicts a's blocks while two other sessions fill dyn-mocker's 10-block pool. With an independent
# Python publisher (python3-zmq, python3-msgpack) PUSHing a tool_start for a to the router's PULL
# socket, the router sends kv.retain of a's blocks to the worker's POST /v1/kv_hints; the worker
# pins them and a's next turn finds 64 tokens cached. A tool_end then ends the wait (its length
# feeds the expected wait); with --kv-policy-tool-max-wait-s under the expected wait the
# tool_start pins nothing and says so. With --kv-policy demote-prefetch (and a G2 on the worker)
# the tool_start demotes a's blocks instead, and their prefetch, planned for the expected wait
# (2 s) less two copies, brings them back to G1 before a's next turn (cached on tier g1).
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_hints_serve.sh"
pub="/usr/bin/python3 $DYN_ROOT/tests/e2e/helpers/tool_events.py"
F1=$(blocks f 4) F2=$(blocks g 6) A=$(blocks a 4)
ev() {  # ev TYPE CALL N: one harness event of session a's Bash call CALL, the router's Nth
  jq -nc --arg t "$1" --arg c "$2" '{schema: "dynamo.request.trace.v1", event_type: $t,
    event_time_unix_ms: 1000, session_id: "a", tool: {tool_call_id: $c, tool_class: "Bash"}}' | $pub send "$ep"
  # The event is taken on the receiver's thread: wait until the router has it.
  for _ in $(seq 1 100); do
    [[ $(curl -s "$r_url/v1/tool_events" | jq '.counters.accepted') == "$3" ]] && return 0
    sleep 0.05
  done
  echo "the router did not take event $3" >&2
  return 1
}
tiers() {  # tiers URL: session a's turn; prints its cached tokens by tier
  curl -s "$1/v1/completions" -H 'content-type: application/json' -H 'x-dynamo-session-id: a' -d "{\"prompt\":\"$A\",\"max_tokens\":1}" |
    jq -c '.usage.dyn.cached_tokens_by_tier'
}
for run in no-events events events-too-long events-demote-prefetch; do
  flags=(--kv-policy tool-ttl --tool-events-endpoint tcp://127.0.0.1:0)
  [[ $run != events-too-long ]] || flags+=(--kv-policy-tool-max-wait-s 10)
  mocker_extra=()
  if [[ $run == events-demote-prefetch ]]; then
    mocker_extra=(--num-g2-blocks 20 --kv-bytes-per-token 1024)
    flags=(--kv-policy demote-prefetch --kv-bytes-per-token 1024 --speedup-ratio 50
      --kv-policy-tool-default-wait-s 2 --tool-events-endpoint tcp://127.0.0.1:0)
  fi
  start_pair "$run" "${flags[@]}" || exit 1
  ep=$(curl -s "$r_url/v1/tool_events" | jq -r .endpoint)
  echo "a, turn 1: cached $(send "$r_url" a "$A")"
  if [[ $run != no-events ]]; then
    ev tool_start c1 1 || exit 1
    [[ $run == events-too-long ]] || wait_outcomes "$r_url" 1 || exit 1
  fi
  send "$r_url" f "$F1" >/dev/null
  send "$r_url" g "$F2" >/dev/null
  [[ $run == no-events ]] || ev tool_end c1 2 || exit 1
  if [[ $run == events-demote-prefetch ]]; then
    wait_outcomes "$r_url" 2 || exit 1
    echo "a, turn 2: cached by tier $(tiers "$r_url")"
  else
    echo "a, turn 2: cached $(send "$r_url" a "$A")"
  fi
  curl -s "$r_url/v1/tool_events" | jq -c '.sessions[] | {session_id, status}'
  curl -s "$r_url/metrics" | grep -E '^dyn_kv_policy_tool_waits_not_pinned_total'
  end_pair "$run"
done
