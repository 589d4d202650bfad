# Shows that dyn-replay --sim feeds its event-fed router (--router-kv-events) each engine event with
# its medium (SPEC 3.2, 8.7): with a G2 host tier the router sees host blocks apart from GPU ones,
# so tier credit (host weight 0.75) places first turns differently from GPU-only credit (weights 0)
# and serves more from G2. Were every event labelled GPU, the weights could change nothing.
wl="$DYN_ROOT/data/quickstart/conversation-slice.jsonl"
run() {  # run NAME FLAGS...: the ok rows' totals and each request's worker
  dyn-replay "$wl" --sim --workers 2 --num-gpu-blocks-override 1271 --kv-bytes-per-token 131072 \
    --num-g2-blocks 2542 --router-mode kv --router-kv-events --router-session-affinity-ttl-secs 300 \
    "${@:2}" -o "$1.jsonl" 2>/dev/null
  jq -s -c '[.[] | select(.dyn.status == "ok")] | {rows: length,
      uncached: (map(.request.input_tokens - .request.cached_tokens) | add),
      g2: (map(.dyn.cached_tokens_by_tier.g2 // 0) | add)}' "$1.jsonl"
}
echo "== tier credit (default weights)"
run on
echo "== GPU-only credit (weights 0)"
run off --host-cache-hit-weight 0 --disk-cache-hit-weight 0
echo "== requests placed on another worker"
jq -s -c '[.[] | {(.request.request_id): .request.worker.decode_worker_id}] | add' on.jsonl >on.w
jq -s -c '[.[] | {(.request.request_id): .request.worker.decode_worker_id}] | add' off.jsonl >off.w
jq -n -c --slurpfile a on.w --slurpfile b off.w '[$a[0] | keys[] as $k | select($a[0][$k] != $b[0][$k])] | {moved: length, some: (length > 0)} + {unplaced: ($a[0] | map(select(. == null)) | length)}'
