#!/usr/bin/env bash
# Routing speed, measured against baselines in the same run:
#  1. dyn-route decide (kv, 8 workers, 300 s affinity) over the Mooncake conversation trace vs
#     dyn-trace cat of the same file (goal: at most 1.5x the time of cat), as best wall time and
#     as CPU time (user+sys over all runs, from bash `times`: steadier on a shared machine);
#  2. the routing core without JSON (route_core_bench): decisions per second (goal >= 500,000).
# Usage: bench/route-decide.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
trace="$root/data/mooncake-fast25/conversation_trace.jsonl.gz"
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
cpu() {  # user+sys CPU seconds of $reps runs of "$@" (children's times), output discarded
  local t
  t=$( ( for _ in $(seq $reps); do "$@" >/dev/null; done; times ) | tail -1)
  echo "$t" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2] } print s }'
}
decide=("$bin/dyn-route" decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300 "$trace")
cat_s=$(best "$bin/dyn-trace" cat "$trace")
dec_s=$(best "${decide[@]}")
cat_cpu=$(cpu "$bin/dyn-trace" cat "$trace")
dec_cpu=$(cpu "${decide[@]}")
rows=$("${decide[@]}" | wc -l)
printf 'rows routed: %s\n' "$rows"
printf 'dyn-trace cat:    %.3f s (best of %d)\n' "$cat_s" "$reps"
printf 'dyn-route decide: %.3f s (best of %d)\n' "$dec_s" "$reps"
ratio=$(echo "$dec_s / $cat_s" | bc -l)
printf 'ratio decide/cat: %.2f (goal <= 1.5)\n' "$ratio"
printf 'CPU time (user+sys, %d runs): cat %.3f s, decide %.3f s, ratio %.2f (goal <= 1.5)\n' "$reps" "$cat_cpu" "$dec_cpu" \
  "$(echo "$dec_cpu / $cat_cpu" | bc -l)"
"$build/bench/route_core_bench" "$trace" 5 8
