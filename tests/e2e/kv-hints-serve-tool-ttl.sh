# Shows that dyn-route serve --kv-policy tool-ttl keeps a turn's blocks across the tool call that
# ends it (SPEC 6.4), as --sim does (kv-hints-sim-tool-ttl): session a's turn ends in a tool call
# (dyn-mocker's scripted reply, finish_reason tool_calls); while the tool runs, two other
# sessions need dyn-mocker's 10-block pool, and without the policy LRU evicts a's blocks (the
# oldest), so a's next turn finds nothing cached. With it, the router learns of the tool call from
# the response and sends kv.retain of a's blocks (TTL 4x the default expected wait of 30 s) to the
# worker's POST /v1/kv_hints; the worker pins them (4 blocks: its cap, 40 % of 10) and a's next
# turn finds 64 tokens cached. With --kv-policy-tool-max-wait-s under the expected wait, nothing
# is pinned and the turn ends as without hints.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_hints_serve.sh"
tool_call_turns
turn() {  # turn URL: session a's turn (the same prompt each time); prints cached tokens and finish reason
  curl -s "$1/v1/chat/completions" -H 'content-type: application/json' -H 'x-dynamo-session-id: a' \
    -d "{\"model\":\"mock-model\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"$ask\"}]}" |
    jq -r '"prompt tokens \(.usage.prompt_tokens), output \(.usage.completion_tokens), cached tokens \(.usage.prompt_tokens_details.cached_tokens), finish \(.choices[0].finish_reason)"'
}
mocker_extra=(--replies replies.jsonl)
for policy in none tool-ttl tool-ttl-too-long; do
  case $policy in
    none) flags=() ;;
    tool-ttl) flags=(--kv-policy tool-ttl) ;;
    tool-ttl-too-long) flags=(--kv-policy tool-ttl --kv-policy-tool-max-wait-s 10) ;;
  esac
  start_pair "$policy" ${flags[@]+"${flags[@]}"} || exit 1
  echo "a, turn 1: $(turn "$r_url")"
  [[ $policy != tool-ttl ]] || wait_outcomes "$r_url" 1 || exit 1
  send "$r_url" f "$F1" >/dev/null
  send "$r_url" g "$F2" >/dev/null
  echo "a, turn 2: $(turn "$r_url")"
  curl -s "$r_url/metrics" | grep -E '^dyn_kv_policy_tool_waits_not_pinned_total'
  end_pair "$policy"
done
