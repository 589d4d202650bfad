# sim_cached NAME FLAGS... (kv-hints-sim-* tests): replays wl.jsonl with --sim on one worker of 12
# 64-token blocks and prints each request's cached tokens and the hints the policies sent.
sim_cached() {
  dyn-replay wl.jsonl --sim --block-size 64 --kv-cache-block-size 64 --num-gpu-blocks-override 12 "${@:2}" \
    --summary "$1.json" -o "$1.jsonl" 2>/dev/null
  jq -s -c 'sort_by(.request.request_id) | map({(.request.request_id): .request.cached_tokens}) | add' "$1.jsonl"
  jq -c '.summary.kv_policy // {}' "$1.json"
}
