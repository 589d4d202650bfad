# Shows case 11: with router and input at 64-token blocks, q3 and q4 follow q1 and q2 with 4 blocks
# (256 tokens, 100 %) of overlap; with the router at 32 a warning names both sizes and the rows are
# re-blocked, so the overlap is 8 blocks of 32 (still 256 tokens), never a silent 0.
c="$DYN_CASES/11-router-worker-block-size"
jq -c '{request_id, timestamp, input_length, output_length,
        hash_ids: (if .prefix_group == "A" then [1,2,3,4] else [5,6,7,8] end)}' "$c/requests.jsonl" >rows.jsonl
show() { jq -r '[.request.request_id, .request.worker.decode_worker_id, .request.cached_tokens, .request.kv_hit_rate, .dyn.request_blocks, ([.dyn.explain.workers[].overlap_blocks] | map(tostring) | join("/"))] | @tsv'; }
echo "== router 64, input 64"
dyn-route decide --workers 2 --router-mode kv --block-size 64 --explain rows.jsonl 2>err64.txt | show
echo "stderr lines: $(wc -l <err64.txt)"
echo "== router 32, input 64"
dyn-route decide --workers 2 --router-mode kv --block-size 64 --kv-cache-block-size 32 --explain rows.jsonl 2>err32.txt | show
cat err32.txt
echo "== env DYN_ROUTER_KV_CACHE_BLOCK_SIZE=32 does the same"
DYN_ROUTER_KV_CACHE_BLOCK_SIZE=32 dyn-route decide --workers 2 --router-mode kv --block-size 64 rows.jsonl 2>&1 >/dev/null | grep -c 'differs from'
