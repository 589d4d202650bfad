#!/usr/bin/env bash
# Benchmark: the whole Mooncake conversation trace (12,031 requests, ~1 h of traffic) through the
# simulated cluster, 8 workers, KV-aware routing with session affinity (TTL 300 s). Prints, as the
# median of RUNS runs: simulated requests per wall second and simulated/wall time against the goals
# (12,000 req/s; 3,600x), with the same figures per CPU second (user+sys; the wall figure includes
# waiting for a shared CPU). Then linearity and memory: the trace repeated 4x and 16x (each copy
# shifted past the previous one's end) must keep the per-request wall time within 1.25x of 1x, and
# peak RSS must stay bounded by the cluster (16x / 1x at most 1.5). The sessionized trace (where
# affinity acts) is reported beside it. Each goal line ends in PASS or MISS.
# Usage: bench/sim-mooncake.sh [BUILD_DIR] [RUNS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
runs="${2:-5}"
bin="$build/bin"
out="$(mktemp -d /tmp/dyn-bench-sim.XXXXXX)"
trap 'rm -rf "$out"' EXIT
trace="$out/conversation_trace.jsonl"  # plain JSONL: the copies below are made with awk
gzip -dcf "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" >"$trace"
sim=("$bin/dyn-replay" --sim --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300)

# once FILE: one simulated run of FILE; appends "wall cpu rss_kib simulated_s rows" to $out/runs.
once() {
  /usr/bin/time -f '%e %U %S %M' -o "$out/time" "${sim[@]}" "$1" >"$out/rows.jsonl" 2>"$out/err" \
    || { cat "$out/err" >&2; exit 1; }
  local simulated rows
  simulated=$(sed -n 's/.*workers: \([0-9.]*\) s simulated.*/\1/p' "$out/err")
  rows=$(wc -l <"$out/rows.jsonl")
  awk -v s="$simulated" -v n="$rows" '{ printf "%s %.3f %s %s %s\n", $1, $2 + $3, $4, s, n }' "$out/time" >>"$out/runs"
}
median() {  # median of column $2 of file $1
  sort -g -k"$2,$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
verdict() { awk -v v="$1" -v g="$2" -v op="$3" 'BEGIN { ok = (op == "le") ? v <= g : v >= g; print ok ? "PASS" : "MISS" }'; }
copies() {  # copies FILE K: K copies of FILE, each shifted in time past the previous one's end
  local span
  span=$(tail -1 "$1" | sed -n 's/.*"timestamp": *\([0-9]*\).*/\1/p')
  for c in $(seq 0 $(($2 - 1))); do
    awk -v off=$((c * (span + 1000))) -v c="$c" '{
      if (match($0, /"timestamp": *[0-9]+/)) {
        head = substr($0, 1, RSTART - 1); m = substr($0, RSTART, RLENGTH); tail = substr($0, RSTART + RLENGTH)
        n = m; sub(/^"timestamp": */, "", n); sub(/[0-9]+$/, "", m); $0 = head m (n + off) tail
      }
      gsub(/"session_id": *"/, "&c" c "-"); print }' "$1"
  done
}

: >"$out/runs"
for _ in $(seq "$runs"); do once "$trace"; done
cp "$out/runs" "$out/runs.1"
wall=$(median "$out/runs" 1); cpu=$(median "$out/runs" 2); rss1=$(median "$out/runs" 3)
simulated=$(median "$out/runs" 4); rows=$(median "$out/runs" 5)
cat "$out/err"
awk -v rows="$rows" -v wall="$wall" -v cpu="$cpu" -v sim="$simulated" -v n="$runs" 'BEGIN {
  printf "rows %d  simulated %.1f s  wall %.3f s  cpu %.3f s (medians of %d runs)\n", rows, sim, wall, cpu, n
  v = rows / wall / 12000; printf "requests per wall second: %.0f (goal 12000, ratio %.2f): %s\n", rows / wall, v, (v >= 1) ? "PASS" : "MISS"
  v = sim / wall / 3600;   printf "simulated / wall time:    %.0fx (goal 3600x, ratio %.2f): %s\n", sim / wall, v, (v >= 1) ? "PASS" : "MISS"
  printf "per CPU second (user+sys): %.0f req/s (ratio %.2f), %.0fx real time (ratio %.2f)\n", rows / cpu, rows / cpu / 12000, sim / cpu, sim / cpu / 3600
}'
per1=$(awk -v w="$wall" -v r="$rows" 'BEGIN { print w / r }')
cper1=$(awk -v w="$cpu" -v r="$rows" 'BEGIN { print w / r }')
for k in 4 16; do
  copies "$trace" "$k" >"$out/trace.${k}x.jsonl"
  : >"$out/runs"
  for _ in $(seq $(( runs > 3 ? 3 : runs ))); do once "$out/trace.${k}x.jsonl"; done
  w=$(median "$out/runs" 1); r=$(median "$out/runs" 5); m=$(median "$out/runs" 3); c=$(median "$out/runs" 2)
  rm -f "$out/trace.${k}x.jsonl"
  lin=$(awk -v w="$w" -v r="$r" -v p="$per1" 'BEGIN { printf "%.2f", (w / r) / p }')
  clin=$(awk -v w="$c" -v r="$r" -v p="$cper1" 'BEGIN { printf "%.2f", (w / r) / p }')
  printf '%2dx: %d rows, wall %.3f s (%.0f req/s), CPU %.3f s, peak RSS %s KiB; per-request time vs 1x %s wall, %s CPU (goal <= 1.25, linear): %s\n' \
    "$k" "$r" "$w" "$(awk -v w="$w" -v r="$r" 'BEGIN { print r / w }')" "$c" "$m" "$lin" "$clin" "$(verdict "$lin" 1.25 le)"
  [[ $k == 16 ]] && rss16="$m"
done
rr=$(awk -v a="$rss16" -v b="$rss1" 'BEGIN { printf "%.2f", a / b }')
printf 'peak RSS 16x / 1x: %s KiB / %s KiB = %s (goal <= 1.5, bounded by the cluster): %s\n' "$rss16" "$rss1" "$rr" "$(verdict "$rr" 1.5 le)"
"$bin/dyn-trace" sessionize "$trace" >"$out/sessions.jsonl" 2>/dev/null
: >"$out/runs"
once "$out/sessions.jsonl"
printf 'sessionized trace (affinity acts): %s' "$(cat "$out/err")"
echo
