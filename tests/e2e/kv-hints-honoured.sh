# Shows that dyn-mocker honours KV hints: a prefix cached by request A is evicted by the pressure
# of two later requests (4 + 6 blocks through a 10-block pool) without a hint (A again: 0 cached
# tokens), and survives it (64 of 64 cached) when A's blocks are retained by each form Dynamo
# uses: the X-Dynamo-Retention-TTL-Ms header on A, a KvHint in A's body (nvext.kv_hint, kv.retain
# of the current request at its completion), and POST /v1/kv_hints naming A's session. The
# leases show in /metrics (one accepted kv.retain, 4 pinned blocks, cap 40 % of 10 = 4).
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
blocks() { printf "$1%.0s" $(seq $((64 * $2))); }  # N blocks of 16 four-byte tokens
A=$(blocks a 4) B=$(blocks b 4) C=$(blocks c 6)
send() {  # send URL PROMPT [BODY-EXTRA [CURL-ARGS...]]: prints cached tokens
  curl -s "$1/v1/completions" -H 'x-dynamo-session-id: s-a' "${@:4}" \
    -d "{\"prompt\":\"$2\",\"max_tokens\":1${3:-}}" | jq -c '.usage.prompt_tokens_details.cached_tokens'
}
kv_retain_current='"nvext":{"kv_hint":{"protocol_version":"0.1","message_id":"m1","actions":[{"action_id":"r1",
  "action_type":"kv.retain","action_version":"1.0","payload":{"priority":1,"ttl_seconds":60,
  "include_current_request":true,"execute_at":"request_completion"}}]}}'
for form in none header nvext endpoint; do
  start_mocker m --block-size 16 --num-gpu-blocks-override 10 --speedup-ratio 50 || exit 1
  case $form in
    none | endpoint) send "$m_url" "$A" >/dev/null ;;
    header) send "$m_url" "$A" "" -H 'X-Dynamo-Retention-TTL-Ms: 60000' >/dev/null ;;
    nvext) send "$m_url" "$A" ",$(echo "$kv_retain_current" | tr -d '\n')" >/dev/null ;;
  esac
  if [[ $form == endpoint ]]; then
    curl -s "$m_url/v1/kv_hints" -d '{"protocol_version":"0.1","message_id":"m2","actions":[{"action_id":"r2",
      "action_type":"kv.retain","action_version":"1.0","payload":{"session_id":"s-a","ttl_seconds":60}}]}' | jq -c .
  fi
  curl -s "$m_url/v1/completions" -d "{\"prompt\":\"$B\",\"max_tokens\":1}" >/dev/null
  curl -s "$m_url/v1/completions" -d "{\"prompt\":\"$C\",\"max_tokens\":1}" >/dev/null
  echo "$form: A again, cached tokens $(send "$m_url" "$A")"
  if [[ $form == header ]]; then
    curl -s "$m_url/metrics" | grep -E '^dyn_mocker_kv_(hint_actions_total.*kv.retain.*accepted|hint_leases|pinned_blocks)' \
      | sed 's/{[^}]*model="mock-model",*/{/'
  fi
  _dyn_kill "$m_pid"
  expect_status 0 wait "$m_pid"
done
