# Shows case 12: 12 prompts of 300 tokens (zero full 512-token blocks) spread 6/6 over two workers
# by load, whatever the overlap weight, and every decision row shows request_blocks=0.
t="$DYN_CASES/12-short-prompts-zero-blocks/trace.jsonl"
for w in 1.0 0.01; do
  echo "== weight $w"
  dyn-route decide --workers 2 --router-mode kv --kv-overlap-score-weight "$w" "$t" >out.jsonl
  jq -r '.request.worker.decode_worker_id' out.jsonl | sort | uniq -c | sed 's/^ *//'
  jq -r '.dyn.request_blocks' out.jsonl | sort -u
done
