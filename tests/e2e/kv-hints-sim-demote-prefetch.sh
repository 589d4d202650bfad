# Shows that dyn-replay --sim --kv-policy demote-prefetch (SPEC 6.4, with KV tiers) moves a turn
# that ends in a tool call to G2 at its completion and fetches it back (kv.prefetch) before the
# session's predicted return: session a's first turn ends in a tool call (its next row has
# tool_wait_ms 5000); while the tool runs, two other sessions fill the 12-block G1. Without hints
# (the same G1 + G2) LRU evicts a's blocks to G2 and a's next turn onboards its 256-token prefix
# from G2 (cached on tier g2). With the policy and an expected wait of 4 s the prefetch lands
# before the return, which finds all 256 tokens on G1 (nothing onboarded, a shorter TTFT). With the
# default expected wait (30 s) the session is back first: no prefetch is sent and the return
# onboards from G2 itself. An expected wait under 4 one-way copies of the blocks demotes nothing.
# Without tiers, or with tool-ttl, the policy is a usage error.
cat >wl.jsonl <<'ROWS'
{"timestamp":0,"session_id":"a","request_id":"a:0","input_length":256,"output_length":1,"hash_ids":[1,2,3,4]}
{"timestamp":100,"session_id":"a","request_id":"a:1","wait_for":["a:0"],"tool_wait_ms":5000,"input_length":320,"output_length":1,"hash_ids":[1,2,3,4,5]}
{"timestamp":1000,"session_id":"f1","request_id":"f1:0","input_length":384,"output_length":1,"hash_ids":[11,12,13,14,15,16]}
{"timestamp":2000,"session_id":"f2","request_id":"f2:0","input_length":384,"output_length":1,"hash_ids":[21,22,23,24,25,26]}
ROWS
# tiered NAME FLAGS...: one worker of 12 G1 blocks and 24 G2 blocks (8 MiB blocks); prints a:1's
# cached tokens by tier and TTFT, then the hints the policy sent.
tiered() {
  dyn-replay wl.jsonl --sim --block-size 64 --kv-cache-block-size 64 --num-gpu-blocks-override 12 \
    --num-g2-blocks 24 --kv-bytes-per-token 131072 "${@:2}" --summary "$1.json" -o "$1.jsonl" 2>/dev/null
  jq -c 'select(.request.request_id == "a:1") | {cached: .request.cached_tokens,
    by_tier: .dyn.cached_tokens_by_tier, ttft_ms: (.request.ttft_ms * 10 | round / 10)}' "$1.jsonl"
  jq -c '.summary.kv_policy // {}' "$1.json"
}
echo "== no hints, G1 + G2"
tiered none
echo "== demote-prefetch, expected wait 4 s (the prefetch lands before the return at 5 s)"
tiered dp --kv-policy demote-prefetch --kv-policy-tool-default-wait-s 4
echo "== demote-prefetch, expected wait 30 s (back before the prefetch: none sent)"
tiered late --kv-policy demote-prefetch
echo "== demote-prefetch, expected wait 5 ms (under 4 copies of its 32 MiB: kept on G1, as without hints)"
tiered short --kv-policy demote-prefetch --kv-policy-tool-default-wait-s 0.005
echo "== demote-prefetch without tiers"
expect_status 2 dyn-replay wl.jsonl --sim --block-size 64 --kv-cache-block-size 64 --kv-policy demote-prefetch \
  -o x.jsonl 2>err
grep -o 'demote-prefetch needs.*' err
echo "== demote-prefetch with tool-ttl"
expect_status 2 dyn-replay wl.jsonl --sim --block-size 64 --kv-cache-block-size 64 --num-g2-blocks 24 \
  --kv-bytes-per-token 131072 --kv-policy tool-ttl,demote-prefetch -o x.jsonl 2>err
grep -o 'tool-ttl and demote-prefetch.*' err
