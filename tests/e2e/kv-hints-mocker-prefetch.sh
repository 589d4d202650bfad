# Shows that dyn-mocker honours kv.demote and kv.prefetch on POST /v1/kv_hints with KV tiers (SPEC
# 8.6): request A of session s-a caches 4 blocks; a demote naming the session moves them to G2
# and a prefetch naming it brings them back to G1 before A's next turn, which finds all 64
# tokens on G1. Demoted again without a prefetch, A finds them on G2 (64 tokens, onboarded). A
# prefetch of blocks no tier holds is rejected with why, and so is one without tiers.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
A=$(printf 'a%.0s' $(seq 256))  # 4 blocks of 16 four-byte tokens
send() {  # send URL: A in session s-a; prints its cached tokens by tier
  curl -s "$1/v1/completions" -H 'x-dynamo-session-id: s-a' -d "{\"prompt\":\"$A\",\"max_tokens\":1}" |
    jq -c '{cached: .usage.prompt_tokens_details.cached_tokens, by_tier: .usage.dyn.cached_tokens_by_tier}'
}
hint() {  # hint URL ACTION PAYLOAD: one action on the control endpoint; prints its outcome
  curl -s "$1/v1/kv_hints" -d "{\"protocol_version\":\"0.1\",\"message_id\":\"m\",\"actions\":[{\"action_id\":\"a\",
    \"action_type\":\"$2\",\"action_version\":\"1.0\",\"payload\":$3}]}" |
    jq -c '.results[] | {action_type, outcome, blocks, reason}'
}
start_mocker m --block-size 16 --num-gpu-blocks-override 10 --num-g2-blocks 20 --kv-bytes-per-token 1024 \
  --speedup-ratio 50 || exit 1
send "$m_url" >/dev/null
echo "== demote, prefetch at once (the copy down has landed by then), then A again"
hint "$m_url" kv.demote '{"session_id":"s-a"}'
hint "$m_url" kv.prefetch '{"session_id":"s-a"}'
send "$m_url"
echo "== demote, then A again"
hint "$m_url" kv.demote '{"session_id":"s-a"}'
send "$m_url"
echo "== a prefetch of blocks on no tier"
hint "$m_url" kv.prefetch '{"block_hashes":["12345"]}'
curl -s "$m_url/metrics" | grep -E '^dyn_mocker_kv_hint_actions_total.*kv.(prefetch|demote)' |
  sed 's/{[^}]*model="mock-model",*/{/'
_dyn_kill "$m_pid"
expect_status 0 wait "$m_pid"
echo "== without tiers"
start_mocker f --block-size 16 --num-gpu-blocks-override 10 --speedup-ratio 50 || exit 1
hint "$f_url" kv.prefetch '{"session_id":"s-a"}'
_dyn_kill "$f_pid"
expect_status 0 wait "$f_pid"
