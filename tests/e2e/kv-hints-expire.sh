# Shows that a KV hint's pin is a lease that expires: request A's 4 blocks, retained for 2 s
# (X-Dynamo-Retention-TTL-Ms: 2000), survive pressure that comes at once (A again: 64 cached
# tokens), but after the TTL has run out the same pressure evicts them (0 cached) and /metrics
# shows no lease and no pinned block left. A session's last turn (x-dynamo-session-final) ends
# its lease before the TTL.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
blocks() { printf "$1%.0s" $(seq $((64 * $2))); }
A=$(blocks a 4) B=$(blocks b 4) C=$(blocks c 6)
send() { curl -s "$1/v1/completions" "${@:3}" -d "{\"prompt\":\"$2\",\"max_tokens\":1}" | jq -c '.usage.prompt_tokens_details.cached_tokens'; }
gauges() {
  curl -s "$1/metrics" | grep -E '^dyn_mocker_kv_(hint_leases|pinned_blocks)[{]' | sed 's/{[^}]*}//' | tr '\n' ' '
  echo
}
for wait_s in 0 2.5 final; do
  start_mocker m --block-size 16 --num-gpu-blocks-override 10 --speedup-ratio 50 || exit 1
  send "$m_url" "$A" -H 'X-Dynamo-Retention-TTL-Ms: 2000' -H 'x-dynamo-session-id: s-a' >/dev/null
  if [[ $wait_s == final ]]; then
    send "$m_url" "$A" -H 'x-dynamo-session-id: s-a' -H 'x-dynamo-session-final: true' >/dev/null
  else
    sleep "$wait_s"
  fi
  echo "pressure after $wait_s: $(gauges "$m_url")"
  send "$m_url" "$B" >/dev/null
  send "$m_url" "$C" >/dev/null
  echo "A again: cached tokens $(send "$m_url" "$A")"
  _dyn_kill "$m_pid"
  expect_status 0 wait "$m_pid"
done
