# Shows that --reference gives the hit-rate yardsticks of issue 18: the simulated run's requests,
# with their timing and engine blocks, through one KV cache of the whole cluster's blocks under
# LRU (pooled) and Belady's MIN. On agent sessions whose contexts outgrow the cluster, kv routing
# with session affinity comes close to the pooled cache, round-robin falls far short of it, and
# no run passes Belady. dyn-bench report computes the same yardsticks from the rows alone, and
# misuse is a usage error.
set -u
dyn-trace generate --seed 2 --sessions 16 --session-rate 4 --block-size 64 --turns-min 4 --turns-max 8 \
  --tool-output-tokens 2000 --tool-gap-ms 4000 --subagent-probability 0.2 --wait-for > w.jsonl
sim() {
  dyn-replay --sim w.jsonl --block-size 64 --kv-cache-block-size 64 --workers 4 --num-gpu-blocks-override 256 \
    --reference pooled --reference belady --summary "$1.summary.json" "${@:2}" > "$1.jsonl" 2> "$1.err"
}
sim aff --router-mode kv --router-session-affinity-ttl-secs 600 --router-session-affinity-mode hard
sim rr --router-mode round-robin
sed -n 's/.*reference caches (one pool of \([0-9]*\) KV blocks.*/pool: \1 blocks/p' aff.err
for run in aff rr; do
  jq -c --arg run "$run" '.summary.references | {run: $run, of_pooled_at_least_0_85: (.pooled.run_ratio >= 0.85),
    of_pooled_below_0_7: (.pooled.run_ratio < 0.7), belady_at_least_pooled: (.belady.hit_pct >= .pooled.hit_pct),
    run_at_most_belady: (.belady.run_ratio <= 1)}' "$run.summary.json"
done
# dyn-bench from the rows alone gives the same yardsticks within a point (row times are whole
# milliseconds, which can reorder a start and an end less than one apart).
dyn-bench report aff.jsonl --reference pooled --reference belady --reference-kv-blocks 1024 --format json \
  > bench.json
jq -s -c '.[0].summary as $s | .[1] as $b | {pooled_close: (($b.pooled_cache_hit_rate.avg - $s.references.pooled.hit_pct)
    | fabs < 1), belady_close: (($b.belady_cache_hit_rate.avg - $s.references.belady.hit_pct) | fabs < 1),
    of_pooled_close: (($b.hit_rate_vs_pooled.avg - $s.references.pooled.run_ratio) | fabs < 0.02)}' \
  aff.summary.json bench.json
# Under admission a request waits before any worker holds its blocks (dyn.pause_ms in its row):
# dyn-bench's caches hold them from dispatch, as the simulator's do (from arrival its Belady
# figure was 6 points low).
sim adm --router-mode kv --router-session-affinity-ttl-secs 600 --router-session-affinity-mode hard \
  --admission thunderagent
dyn-bench report adm.jsonl --reference pooled --reference belady --reference-kv-blocks 1024 --format json \
  > bench-adm.json
jq -s -c '.[0].summary as $s | .[1] as $b | {paused_requests: (.[2] > 0),
    pooled_close: (($b.pooled_cache_hit_rate.avg - $s.references.pooled.hit_pct) | fabs < 1),
    belady_close: (($b.belady_cache_hit_rate.avg - $s.references.belady.hit_pct) | fabs < 1)}' \
  adm.summary.json bench-adm.json <(jq -s 'map(select(.dyn.pause_ms > 0)) | length' adm.jsonl)
# Misuse: an unknown policy, --reference on a live run, dyn-bench without the cache size.
expect_status 2 dyn-replay --sim w.jsonl --block-size 64 --reference lru >/dev/null 2>&1
expect_status 2 dyn-replay w.jsonl --url http://127.0.0.1:9 --block-size 64 --reference pooled >/dev/null 2>&1
expect_status 2 dyn-bench report aff.jsonl --reference pooled >/dev/null 2>&1
expect_status 2 dyn-bench report aff.jsonl --reference-kv-blocks 1024 >/dev/null 2>&1
