#!/usr/bin/env bash
# User story: script a routing experiment in bash. Sweeps router modes and session-affinity
# settings over a Mooncake trace in the simulated cluster (virtual clock, seconds of wall time for
# an hour of traffic) and prints one table: prompt-cache hit rate, TTFT p50/p90 and throughput.
# Usage: examples/routing-sweep.sh [WORKLOAD] [WORKERS]
#   default WORKLOAD: the bundled sessionized Mooncake slice; WORKERS: 2
# Every run uses the same seed, so the table is reproducible.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PATH="$here/../build/bin:$PATH"
workload="${1:-$here/../data/quickstart/conversation-slice.jsonl}"
workers="${2:-2}"
engine=(--num-gpu-blocks-override 4096 --router-worker-kv-blocks 4096)   # 262k tokens per worker
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

printf '%-14s %-6s %9s %10s %10s %10s\n' mode ttl "hit %" "TTFT p50" "TTFT p90" "req/s"
for mode in round-robin least-loaded kv; do
  for ttl in off 300; do
    affinity=()
    [[ $ttl != off ]] && affinity=(--router-session-affinity-ttl-secs "$ttl")
    dyn-replay "$workload" --sim --workers "$workers" --seed 1 "${engine[@]}" \
      --router-mode "$mode" "${affinity[@]}" 2>/dev/null >"$tmp/rows.jsonl"
    dyn-bench report "$tmp/rows.jsonl" --format json >"$tmp/report.json"
    jq -r --arg mode "$mode" --arg ttl "$ttl" \
      '[$mode, $ttl, .prompt_cache_hit_rate.avg, .time_to_first_token.p50, .time_to_first_token.p90,
        .request_throughput.avg] | @tsv' "$tmp/report.json" |
      awk -F'\t' '{printf "%-14s %-6s %9.2f %10.1f %10.1f %10.4f\n", $1, $2, $3, $4, $5, $6}'
  done
done
