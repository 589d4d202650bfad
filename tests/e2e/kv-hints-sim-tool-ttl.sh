# Shows that dyn-replay --sim --kv-policy tool-ttl keeps a turn's blocks across the tool call that
# ends it (SPEC 6.4): session a's first turn ends in a tool call (its next row has tool_wait_ms
# 5000); while the tool runs, two other sessions need the 12-block pool, and without a hint LRU
# evicts a's blocks (the oldest). With the policy the lease (TTL: 4x the default expected wait of
# 30 s) keeps them and a's next turn finds its 256-token prefix cached; with an expected wait of
# 0.2 s the lease ends before the pressure and the blocks go as without hints.
cat >wl.jsonl <<'ROWS'
{"timestamp":0,"session_id":"a","request_id":"a:0","input_length":256,"output_length":1,"hash_ids":[1,2,3,4]}
{"timestamp":100,"session_id":"a","request_id":"a:1","wait_for":["a:0"],"tool_wait_ms":5000,"input_length":320,"output_length":1,"hash_ids":[1,2,3,4,5]}
{"timestamp":1000,"session_id":"f1","request_id":"f1:0","input_length":384,"output_length":1,"hash_ids":[11,12,13,14,15,16]}
{"timestamp":2000,"session_id":"f2","request_id":"f2:0","input_length":384,"output_length":1,"hash_ids":[21,22,23,24,25,26]}
ROWS
# shellcheck source=helpers/sim_cached.sh
source "$DYN_ROOT/tests/e2e/helpers/sim_cached.sh"
echo "== no hints"
sim_cached none
echo "== tool-ttl"
sim_cached tool --kv-policy tool-ttl
echo "== tool-ttl, expected wait 0.2 s (the 0.8 s lease ends before the pressure)"
sim_cached short --kv-policy tool-ttl --kv-policy-tool-default-wait-s 0.2
echo "== tool-ttl, expected wait over --kv-policy-tool-max-wait-s (not pinned)"
sim_cached long --kv-policy tool-ttl --kv-policy-tool-max-wait-s 10
echo "== a policy's setting without the policy"
expect_status 2 dyn-replay wl.jsonl --sim --block-size 64 --kv-cache-block-size 64 --kv-policy-tool-max-wait-s 10 \
  -o x.jsonl 2>err
grep -o 'kv-policy-tool-max-wait-s needs.*' err
