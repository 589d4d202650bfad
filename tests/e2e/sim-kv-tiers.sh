# Shows that dyn-replay --sim with a G2 host tier (SPEC 8.7) serves from host memory part of what a
# GPU-only cluster recomputes: over the bundled workload (152 requests, 32 sessions) on 2 workers
# whose GPU KV is a quarter of the working set (1,271 blocks of 64 tokens each, 10,168 blocks of
# distinct prompt), G2 twice the GPU's re-prefills fewer tokens, every cached token is counted on
# the tier it came from (g1 + g2 = cached_tokens), and onboarding shows in TTFT without undoing
# the gain at the median.
wl="$DYN_ROOT/data/quickstart/conversation-slice.jsonl"
run() {  # run NAME FLAGS...: the ok rows' totals
  dyn-replay "$wl" --sim --workers 2 --num-gpu-blocks-override 1271 --router-mode kv \
    --router-session-affinity-ttl-secs 300 "${@:2}" -o "$1.jsonl" 2>/dev/null
  jq -s -c '[.[] | select(.dyn.status == "ok")] | {rows: length,
      input: (map(.request.input_tokens) | add), cached: (map(.request.cached_tokens) | add),
      g1: (map(.dyn.cached_tokens_by_tier.g1 // 0) | add), g2: (map(.dyn.cached_tokens_by_tier.g2 // 0) | add),
      ttft_p50: (map(.request.ttft_ms) | sort | .[length / 2 | floor] | . * 10 | round / 10)}
    | . + {reprefilled: (.input - .cached)}' "$1.jsonl"
}
echo "== G1 only"
run g1 | tee g1.json
echo "== G1 + G2 (2,542 blocks per worker, 128 KiB per token: 8 MiB a block at 14 GB/s)"
run g2 --num-g2-blocks 2542 --kv-bytes-per-token 131072 | tee g2.json
jq -s -r '"re-prefilled G1+G2 / G1: \(.[1].reprefilled / .[0].reprefilled * 100 | round) %",
  "tiers add up: \(.[1].g1 + .[1].g2 == .[1].cached)",
  "median TTFT lower with G2: \(.[1].ttft_p50 < .[0].ttft_p50)"' g1.json g2.json
