#!/usr/bin/env bash
# Routing speed of dyn-route decide against its own routing core (issue 54, restated from issue 17:
# the earlier goal against `dyn-trace cat` was dominated by process start and is withdrawn).
# Input: the Mooncake conversation trace sessionized (dyn-trace sessionize) and repeated 16x
# (copies shifted past the previous one's end, sessions renamed per copy): 192,496 rows.
#  1. decide (kv, 8 workers, 300 s affinity) rows per CPU-second, whole process (read JSONL, route,
#     write route_decision JSONL; user + sys time), against route_core_bench's decisions per
#     CPU-second of its routing loop on the same rows (pre-parsed, no JSON, the same router, load
#     accounting and end estimates). CPU time, not wall: on a shared machine preemption stretches
#     wall time by whatever else runs, CPU time only by cache pressure. Runs alternate (core,
#     decide, core, ...) so load hits both alike; medians of RUNS. Wall-clock rates are printed too.
#     Goal: decide >= 0.5x the core (JSON in and out costs no more than routing does).
#  2. Outputs, not only counts: decide's chosen worker for every row equals the core's, and two
#     decide runs are byte-identical.
#  3. Memory stays flat with input length: decide's peak RSS on 16x / 1x at most 1.25 (issue 17).
# Ends with one verdict line: PASS, or MISS naming each goal missed (exit 1).
# Usage: bench/route-decide.sh [BUILD_DIR] [RUNS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
runs="${2:-7}"
bin="$build/bin"
tmp="$(mktemp -d /tmp/dyn-bench-decide.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
gzip -dcf "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" >"$tmp/trace.jsonl"
"$bin/dyn-trace" sessionize "$tmp/trace.jsonl" >"$tmp/s1.jsonl" 2>/dev/null
span=$(tail -1 "$tmp/s1.jsonl" | sed -n 's/.*"timestamp":\([0-9]*\).*/\1/p')
for c in $(seq 0 15); do
  awk -v off=$((c * (span + 1000))) -v c="$c" '{
    if (match($0, /"timestamp":[0-9]+/)) $0 = substr($0, 1, RSTART + 11) (substr($0, RSTART + 12, RLENGTH - 12) + off) substr($0, RSTART + RLENGTH)
    gsub(/"session_id":"/, "\"session_id\":\"c" c "-"); print }' "$tmp/s1.jsonl"
done >"$tmp/s16.jsonl"
rows=$(wc -l <"$tmp/s16.jsonl")
decide=("$bin/dyn-route" decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300)

median() {  # median of the numbers in file $1
  sort -g "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# decide_once IN OUT: one decide run; appends "wall_s peak_kib cpu_s" to $tmp/time.
decide_once() {
  local TIMEFORMAT='%3R %3U %3S' t
  t=$( { time /usr/bin/time -f '%M' -o "$tmp/rss" "${decide[@]}" "$1" >"$2" 2>"$tmp/err"; } 2>&1 ) \
    || { cat "$tmp/err" >&2; exit 1; }
  set -- $t
  echo "$1 $(cat "$tmp/rss") $(awk -v u="$2" -v s="$3" 'BEGIN { print u + s }')" >>"$tmp/time"
}

: >"$tmp/core"; : >"$tmp/core.wall"; : >"$tmp/dec"; : >"$tmp/dec.wall"; : >"$tmp/time"
for i in $(seq "$runs"); do
  choices=/dev/null; [[ $i == 1 ]] && choices="$tmp/core.choices"
  "$build/bench/route_core_bench" "$tmp/s16.jsonl" 1 8 "$choices" >"$tmp/core.out"
  sed -n 's/^decisions per CPU-second \([0-9]*\).*/\1/p' "$tmp/core.out" >>"$tmp/core"
  sed -n 's/^decisions\/s \([0-9]*\).*/\1/p' "$tmp/core.out" >>"$tmp/core.wall"
  decide_once "$tmp/s16.jsonl" /dev/null  # rendered and written; a file's page cache is not decide's cost
  tail -1 "$tmp/time" | awk -v r="$rows" '{ printf "%.0f\n", r / $3 }' >>"$tmp/dec"
  tail -1 "$tmp/time" | awk -v r="$rows" '{ printf "%.0f\n", r / $1 }' >>"$tmp/dec.wall"
done
core=$(median "$tmp/core"); dec=$(median "$tmp/dec")
ratio=$(awk -v a="$dec" -v b="$core" 'BEGIN { printf "%.3f", a / b }')
printf 'rows %s (sessionized Mooncake x16), %s alternating runs\n' "$rows" "$runs"
printf 'route core: %s decisions per CPU-second (median; runs %s); wall %s/s\n' "$core" \
  "$(sort -g "$tmp/core" | tr '\n' ' ')" "$(median "$tmp/core.wall")"
printf 'decide:     %s rows per CPU-second (median, whole process; runs %s); wall %s/s\n' "$dec" \
  "$(sort -g "$tmp/dec" | tr '\n' ' ')" "$(median "$tmp/dec.wall")"
printf 'decide / core: %s (goal >= 0.5)\n' "$ratio"

# Outputs: the workers chosen, row by row, and decide against itself (two untimed runs).
"${decide[@]}" "$tmp/s16.jsonl" >"$tmp/out.1" 2>/dev/null
"${decide[@]}" "$tmp/s16.jsonl" >"$tmp/out.2" 2>/dev/null
sed -n 's/.*"decode_worker_id":\([0-9]*\).*/\1/p' "$tmp/out.1" >"$tmp/dec.choices"
same_choices=no; cmp -s "$tmp/core.choices" "$tmp/dec.choices" && same_choices=yes
same_bytes=no; cmp -s "$tmp/out.1" "$tmp/out.2" && same_bytes=yes
printf 'workers chosen equal the core'\''s on every row: %s (%s rows written); decide runs byte-identical: %s\n' \
  "$same_choices" "$(wc -l <"$tmp/out.1")" "$same_bytes"

# Memory at 1x and 16x.
: >"$tmp/time"
decide_once "$tmp/s1.jsonl" /dev/null
decide_once "$tmp/s16.jsonl" /dev/null
m1=$(sed -n 1p "$tmp/time" | cut -d' ' -f2); m16=$(sed -n 2p "$tmp/time" | cut -d' ' -f2)
mr=$(awk -v a="$m16" -v b="$m1" 'BEGIN { printf "%.2f", a / b }')
printf 'peak RSS: 1x %s KiB, 16x %s KiB, ratio %s (goal <= 1.25)\n' "$m1" "$m16" "$mr"

miss=()
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.5) }' || miss+=("decide/core $ratio < 0.5")
[[ $same_choices == yes ]] || miss+=("decide's workers differ from the core's")
[[ $same_bytes == yes ]] || miss+=("decide output not byte-identical across runs")
awk -v r="$mr" 'BEGIN { exit !(r <= 1.25) }' || miss+=("peak RSS 16x/1x $mr > 1.25")
if [[ ${#miss[@]} -eq 0 ]]; then echo PASS; else echo "MISS $(IFS=';'; echo "${miss[*]}")"; exit 1; fi
