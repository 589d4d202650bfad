#!/usr/bin/env bash
# Benchmark: the whole Mooncake conversation trace (12,031 requests, ~1 h of traffic) through the
# simulated cluster, 8 workers, KV-aware routing. Prints simulated requests per wall second and
# simulated/wall time against the goals (12,000 req/s; 3,600x), plus CPU time (the wall figure
# includes waiting for a shared CPU). Usage: bench/sim-mooncake.sh [BUILD_DIR]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
trace="$root/data/mooncake-fast25/conversation_trace.jsonl.gz"
out="$(mktemp -d /tmp/dyn-bench-sim.XXXXXX)"
trap 'rm -rf "$out"' EXIT
/usr/bin/time -f '%e %U %S' -o "$out/time" "$bin/dyn-replay" "$trace" --sim --workers 8 --router-mode kv \
  > "$out/rows.jsonl" 2> "$out/err"
cat "$out/err"
read -r wall user sys < "$out/time"
rows=$(wc -l < "$out/rows.jsonl")
sim_s=$(jq -s '(map(.event_time_unix_ms) | max) - (map(.request.request_received_ms) | min) | . / 1000' "$out/rows.jsonl")
awk -v rows="$rows" -v wall="$wall" -v cpu="$(echo "$user + $sys" | bc)" -v sim="$sim_s" 'BEGIN {
  printf "rows %d  simulated %.1f s  wall %.2f s  cpu %.2f s\n", rows, sim, wall, cpu
  printf "requests per wall second: %.0f (goal 12000, ratio %.2f)\n", rows / wall, rows / wall / 12000
  printf "simulated / wall time:    %.0fx (goal 3600x, ratio %.2f)\n", sim / wall, sim / wall / 3600
  printf "per CPU second (user+sys): %.0f req/s (ratio %.2f), %.0fx real time (ratio %.2f)\n", rows / cpu, rows / cpu / 12000, sim / cpu, sim / cpu / 3600
}'
