#!/usr/bin/env bash
# Routing speed, measured against baselines in the same run:
#  1. dyn-route decide (kv, 8 workers, 300 s affinity) over the Mooncake conversation trace vs
#     dyn-trace cat of the same file (goal: at most 1.5x the time of cat);
#  2. the routing core without JSON (route_core_bench): decisions per second (goal >= 500,000).
# Usage: bench/route-decide.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
trace="$root/../shared/data/mooncake-fast25/conversation_trace.jsonl"
bin="$build/bin"
reps=5
best() {  # best wall time of $reps runs of "$@", output discarded, in seconds
  local b=999
  for _ in $(seq $reps); do
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null
    e=$(date +%s.%N)
    b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{print ($1 < b) ? $1 : b}')
  done
  echo "$b"
}
cat_s=$(best "$bin/dyn-trace" cat "$trace")
dec_s=$(best "$bin/dyn-route" decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300 "$trace")
rows=$("$bin/dyn-route" decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300 "$trace" | wc -l)
printf 'rows routed: %s\n' "$rows"
printf 'dyn-trace cat:    %.3f s (best of %d)\n' "$cat_s" "$reps"
printf 'dyn-route decide: %.3f s (best of %d)\n' "$dec_s" "$reps"
ratio=$(echo "$dec_s / $cat_s" | bc -l)
printf 'ratio decide/cat: %.2f (goal <= 1.5)\n' "$ratio"
"$build/bench/route_core_bench" "$trace" 5 8
