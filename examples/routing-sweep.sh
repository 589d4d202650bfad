#!/usr/bin/env bash
# User story: script a routing experiment in bash. Sweeps router modes, session affinity and load
# levels over a Mooncake-format workload in the simulated cluster (virtual clock: seconds of wall
# time for an hour of traffic) and prints one table: prompt-cache hit rate, TTFT p50/p90 and
# throughput per setting.
# Usage: examples/routing-sweep.sh [WORKLOAD] [WORKERS] [LOADS]
#   WORKLOAD: default the bundled sessionized Mooncake slice (data/quickstart/); a workload
#             without session ids (the raw Mooncake trace, say) is first sessionized with
#             `dyn-trace sessionize` — affinity binds sessions, so without them it changes nothing.
#   WORKERS:  simulated workers (default 2)
#   LOADS:    load levels as time-compression factors of the arrivals (default "1 2 4": the same
#             requests arriving 1x, 2x and 4x as fast)
# Every run uses the same seed, so the table is reproducible.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/tools.sh" dyn-trace dyn-replay dyn-bench
workload="${1:-$here/../data/quickstart/conversation-slice.jsonl}"
workers="${2:-2}"
read -r -a loads <<<"${3:-1 2 4}"
engine=(--num-gpu-blocks-override 4096 --router-worker-kv-blocks 4096)   # 262k tokens per worker
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Sessions: affinity keeps a session on one worker, so the sweep needs session ids.
dyn-trace cat "$workload" >"$tmp/input.jsonl"
if [[ $(jq -n '[inputs | has("session_id")] | any' "$tmp/input.jsonl") != true ]]; then
  echo "routing-sweep: $(basename "$workload") has no session ids; sessionizing it with dyn-trace sessionize" \
       "(turns inferred from hash-id prefix chains) so that affinity has sessions to bind" >&2
  dyn-trace sessionize "$tmp/input.jsonl" 2>"$tmp/sessionize.log" >"$tmp/sessions.jsonl"
  sed 's/^/routing-sweep: /' "$tmp/sessionize.log" >&2
  mv "$tmp/sessions.jsonl" "$tmp/input.jsonl"
fi

printf '%-14s %-6s %5s %9s %10s %10s %10s\n' mode ttl load "hit %" "TTFT p50" "TTFT p90" "req/s"
for load in "${loads[@]}"; do
  # Load level: arrivals (timestamps) and think times (delays) divided by the factor.
  jq -c --argjson f "$load" 'if has("timestamp") then .timestamp |= (. / $f | floor) else . end
    | if has("delay") then .delay |= (. / $f | floor) else . end' \
    "$tmp/input.jsonl" >"$tmp/load.jsonl"
  for mode in round-robin least-loaded kv; do
    for ttl in off 300; do
      affinity=()
      [[ $ttl != off ]] && affinity=(--router-session-affinity-ttl-secs "$ttl")
      dyn-replay "$tmp/load.jsonl" --sim --workers "$workers" --seed 1 "${engine[@]}" \
        --router-mode "$mode" "${affinity[@]}" 2>/dev/null >"$tmp/rows.jsonl"
      dyn-bench report "$tmp/rows.jsonl" --format json >"$tmp/report.json"
      jq -r --arg mode "$mode" --arg ttl "$ttl" --arg load "${load}x" \
        '[$mode, $ttl, $load, .prompt_cache_hit_rate.avg, .time_to_first_token.p50, .time_to_first_token.p90,
          .request_throughput.avg] | @tsv' "$tmp/report.json" |
        awk -F'\t' '{printf "%-14s %-6s %5s %9.2f %10.1f %10.1f %10.4f\n", $1, $2, $3, $4, $5, $6, $7}'
    done
  done
done
