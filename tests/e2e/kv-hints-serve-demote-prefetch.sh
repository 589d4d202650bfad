# Shows that dyn-route serve --kv-policy demote-prefetch (SPEC 6.4, workers with KV tiers) moves a
# turn that ends in a tool call to G2 and fetches it back to G1 before the session's predicted
# return, as --sim does (kv-hints-sim-demote-prefetch): session a's turn ends in a tool call
# (dyn-mocker's scripted reply, finish_reason tool_calls); the router learns it from the response
# and sends kv.demote of a's 4 blocks to the worker's POST /v1/kv_hints, then, with an expected
# wait of 2 s, a kv.prefetch of them 2 s - 2C later. Meanwhile two other sessions fill the
# 10-block G1. Without hints (the same G1 + G2) LRU offloads a's blocks and its next turn onboards
# them from G2 (cached on tier g2); with the policy they are back on G1 when it arrives (cached on
# tier g1), and both its rows name the hints. With the default expected wait (30 s) a is back
# first: the planned prefetch is cancelled and the turn onboards from G2 itself. An expected wait
# under 4 one-way copies (a slow link) demotes nothing. Without --kv-bytes-per-token, or with
# tool-ttl, the policy is a usage error.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_hints_serve.sh"
tool_call_turns
turn() {  # turn URL: session a's turn (the same prompt each time); prints cached tokens by tier and finish
  curl -s "$1/v1/chat/completions" -H 'content-type: application/json' -H 'x-dynamo-session-id: a' \
    -d "{\"model\":\"mock-model\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"$ask\"}]}" |
    jq -c '{cached: .usage.prompt_tokens_details.cached_tokens, by_tier: .usage.dyn.cached_tokens_by_tier,
      finish: .choices[0].finish_reason}'
}
mocker_extra=(--replies replies.jsonl --num-g2-blocks 20 --kv-bytes-per-token 1024)
copy=(--kv-bytes-per-token 1024 --speedup-ratio 50)
for policy in none demote-prefetch back-first slow-link; do
  case $policy in
    none) flags=() ;;
    demote-prefetch) flags=(--kv-policy demote-prefetch "${copy[@]}" --kv-policy-tool-default-wait-s 2) ;;
    back-first) flags=(--kv-policy demote-prefetch "${copy[@]}") ;;
    slow-link) flags=(--kv-policy demote-prefetch "${copy[@]}" --bandwidth-g2-to-g1-gbps 0.0000001) ;;
  esac
  start_pair "$policy" ${flags[@]+"${flags[@]}"} || exit 1
  echo "a, turn 1: $(turn "$r_url")"
  [[ $policy == none || $policy == slow-link ]] || wait_outcomes "$r_url" 1 || exit 1
  send "$r_url" f "$F1" >/dev/null
  send "$r_url" g "$F2" >/dev/null
  [[ $policy != demote-prefetch ]] || wait_outcomes "$r_url" 2 || exit 1
  echo "a, turn 2: $(turn "$r_url")"
  curl -s "$r_url/metrics" | grep -E '^dyn_kv_policy_(tool_waits_not_demoted|prefetches_cancelled)_total'
  end_pair "$policy"
done
echo "== usage errors"
for bad in "--kv-policy demote-prefetch" "--kv-policy demote-prefetch,tool-ttl --kv-bytes-per-token 1024" \
  "--kv-policy tool-ttl --kv-bytes-per-token 1024"; do
  # shellcheck disable=SC2086
  dyn-route serve --worker http://127.0.0.1:9 $bad 2>&1 | tail -1
  echo "exit ${PIPESTATUS[0]}"
done
