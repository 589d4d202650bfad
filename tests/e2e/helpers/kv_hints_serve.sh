# Helpers of the kv-hints-serve-* tests (sourced, not a test; after servers.sh): prompts of whole
# KV blocks, one completion through the router, the router's hint counters and trace rows.

# blocks CHAR N: a prompt of N 16-token blocks (SPEC 4.2: 4 bytes a token).
blocks() { printf "$1%.0s" $(seq $((64 * $2))); }

# tool_call_turns: for the tests of a tool wait: replies.jsonl (dyn-mocker answers "list the files"
# with a Bash tool call), session a's prompt ask (that request and 4 blocks), and F1 and F2, the
# prompts (4 and 6 blocks) of two sessions that fill a 10-block pool while a's tool runs.
tool_call_turns() {
  echo '{"match": "list the files", "tool_call": {"name": "Bash", "arguments": {"command": "ls"}}}' >replies.jsonl
  ask="list the files $(blocks q 4)" F1=$(blocks f 4) F2=$(blocks g 6)
}

# send URL SESSION PROMPT [CURL-ARGS...]: one completion of session SESSION (and the body members
# in $body_extra, ",..." when set); prints its cached tokens.
send() {
  curl -s "$1/v1/completions" -H 'content-type: application/json' -H "x-dynamo-session-id: $2" "${@:4}" \
    -d "{\"prompt\":\"$3\",\"max_tokens\":1${body_extra:-}}" | jq -c '.usage.prompt_tokens_details.cached_tokens'
}

# wait_outcomes URL N: waits (up to 10 s) until the router at URL counts N hints the workers
# answered (POST /v1/kv_hints is sent off the request path).
wait_outcomes() {
  local i
  for i in $(seq 1 200); do
    (($(curl -s "$1/metrics" | awk '/^dyn_kv_policy_hints_total/ && !/outcome="forwarded"/ {n += $2} END {print n + 0}') >= $2)) &&
      return 0
    sleep 0.05
  done
  echo "timed out waiting for $2 hint outcomes" >&2
  return 1
}

# hint_metrics ROUTER_URL MOCKER_URL: what the router sent and what the worker did with it (its
# nonzero counters).
hint_metrics() {
  curl -s "$1/metrics" | grep -E '^dyn_kv_policy_hints_total'
  curl -s "$2/metrics" | grep -E '^dyn_mocker_kv_hint_actions_total' | grep -v ' 0$' | sed 's/{[^}]*model="mock-model",*/{/'
}

# hint_rows TRACE: the trace rows that carry dyn.kv_hints (session, hints).
hint_rows() {
  jq -c 'select(.event_type == "request_end" and .dyn.kv_hints != null)
    | {session: .agent_context.session_id, kv_hints: .dyn.kv_hints}' "$1"
}

# start_pair TAG [ROUTER-FLAGS...]: dyn-mocker m (16-token blocks, a 10-block pool, and the
# arguments in the array mocker_extra when set) and dyn-route serve r over it, tracing into
# trace-TAG; prints "== TAG".
start_pair() {
  start_mocker m --block-size 16 --num-gpu-blocks-override 10 --speedup-ratio 50 ${mocker_extra[@]+"${mocker_extra[@]}"} ||
    return 1
  start_router r --worker "$m_url" --kv-cache-block-size 16 --request-trace --request-trace-file-format jsonl \
    --request-trace-file-path "$PWD/trace-$1" "${@:2}" || return 1
  echo "== $1"
}

# end_pair TAG: the hints counted by both servers, both stopped, then the trace rows with hints.
end_pair() {
  hint_metrics "$r_url" "$m_url"
  stop "$r_pid"
  stop "$m_pid"
  hint_rows "trace-$1"
}
