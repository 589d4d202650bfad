# Shows that a KV tier given by halves is a usage error whose message names the missing flag
# (SPEC 8.7; Dynamo's mocker silently runs without offload instead), in dyn-mocker and in
# dyn-replay --sim alike, and that --kv-bytes-per-token alone is refused (it sizes nothing).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
for args in "--num-g2-blocks 64" "--num-g3-blocks 64" "--num-g4-blocks 64 --kv-bytes-per-token 131072" \
  "--num-g3-blocks 64 --kv-bytes-per-token 131072" "--offload-batch-size 8" "--bandwidth-g2-to-g1-gbps 32" \
  "--kv-bytes-per-token 131072"; do
  echo "== dyn-mocker $args"
  # shellcheck disable=SC2086
  expect_status 2 dyn-mocker $args 2>&1 | head -1
done
echo "== dyn-replay --sim --num-g2-blocks 64"
expect_status 2 dyn-replay --sim --num-g2-blocks 64 /dev/null 2>&1 | head -1
echo "== a whole configuration starts (G2 with its bytes per token)"
start_mocker w --num-g2-blocks 64 --kv-bytes-per-token 131072 && echo "started"
curl -s "$w_url/metrics" | grep -c '^dyn_mocker_kv_tier_blocks_capacity'
stop "$w_pid"
