# Shows that dyn-mocker refuses KV hints it cannot honour and says why, and keeps serving:
# POST /v1/kv_hints answers 400 naming the problem for malformed JSON, a message that is not a
# KvHint v0.1 (a missing field, another protocol version, a payload that is not an object); a
# well-formed message gets 200 with one outcome per action: a lease over the pinned cap (30 % of
# 10 blocks = 3) is clipped root first, the next one rejected as the cap is full, a retain without
# a TTL or of blocks that are not cached rejected, kv.fetch rejected (no peer transfer here), and
# an unknown action passed through untouched. A malformed retention header or nvext.kv_hint on an
# API request is a 400 too. /metrics counts each action by type and outcome.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker m --block-size 16 --num-gpu-blocks-override 10 --kv-hint-max-pinned-fraction 0.3 \
  --kv-hint-max-ttl-s 120 --speedup-ratio 50 || exit 1
post() {  # post BODY: status line, then the body
  curl -s -o body -w '%{http_code}\n' "$m_url/v1/kv_hints" -d "$1"
  jq -c . body
}
echo "== malformed"
post '{not json'
post '{"message_id":"m","actions":[]}'
post '{"protocol_version":"1.0","message_id":"m","actions":[]}'
post '{"protocol_version":"0.1","message_id":"m","actions":[{"action_type":"kv.retain","action_version":"1.0","payload":[]}]}'
echo "== outcomes"
a=$(printf 'a%.0s' $(seq 256))
b=$(printf 'b%.0s' $(seq 128))
curl -s "$m_url/v1/completions" -H 'x-dynamo-session-id: s-a' -d "{\"prompt\":\"$a\",\"max_tokens\":1}" >/dev/null
curl -s "$m_url/v1/completions" -H 'x-dynamo-session-id: s-b' -d "{\"prompt\":\"$b\",\"max_tokens\":1}" >/dev/null
post '{"protocol_version":"0.1","message_id":"m","actions":[
  {"action_id":"clip","action_type":"kv.retain","action_version":"1.0","payload":{"session_id":"s-a","ttl_seconds":600}},
  {"action_id":"full","action_type":"kv.retain","action_version":"1.0","payload":{"session_id":"s-b","ttl_seconds":10}},
  {"action_id":"nottl","action_type":"kv.retain","action_version":"1.0","payload":{"session_id":"s-b"}},
  {"action_id":"absent","action_type":"kv.retain","action_version":"1.0","payload":{"block_hashes":["42"],"ttl_seconds":10}},
  {"action_id":"fetch","action_type":"kv.fetch","action_version":"1.0",
   "payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}},
  {"action_id":"later","action_type":"kv.future_action","action_version":"7.3","payload":{"nested":{"on":true}}}]}' \
  | sed 's/},{/},\n{/g'
echo "== on API requests"
curl -s -o body -w '%{http_code}\n' "$m_url/v1/completions" -H 'X-Dynamo-Retention-TTL-Ms: soon' -d '{"prompt":"hi"}'
jq -c .error.message body
curl -s -o body -w '%{http_code}\n' "$m_url/v1/completions" -d '{"prompt":"hi","nvext":{"kv_hint":{"message_id":"m"}}}'
jq -c .error.message body
echo "== still serving; metrics"
curl -s "$m_url/v1/completions" -d '{"prompt":"hi","max_tokens":1}' | jq -c .usage.completion_tokens
curl -s "$m_url/metrics" | grep -E '^dyn_mocker_kv_(hint_actions_total|hint_malformed_total|pinned_blocks)' \
  | grep -v '} 0$' | sed 's/{[^}]*model="mock-model",*/{/'
_dyn_kill "$m_pid"
expect_status 0 wait "$m_pid"
