#!/usr/bin/env bash
# Routing speed and memory, measured against baselines in the same run:
#  1. dyn-route decide (kv, 8 workers, 300 s affinity) vs dyn-trace cat of the same file, on the
#     raw Mooncake conversation trace AND on its sessionized form (dyn-trace sessionize; the raw
#     trace has no session ids, so affinity only acts on the sessionized one). Runs are paired and
#     alternate (cat, decide, cat, decide, ...) so load on a shared machine hits both alike; the
#     figure is median(decide) / median(cat) of wall time (goal: at most 1.5), with the same
#     ratio of CPU time (user+sys) beside it;
#  2. peak RSS of decide on the sessionized trace at 1x, 4x and 16x its length (copies shifted in
#     time, sessions renamed per copy; goal: flat, 16x / 1x at most 1.25);
#  3. the routing core without JSON (route_core_bench, sessions on): decisions per second, the
#     median of its passes (goal >= 500,000).
# Each line prints its ratio and PASS or MISS. Usage: bench/route-decide.sh [BUILD_DIR] [RUNS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
runs="${2:-7}"
bin="$build/bin"
tmp="$(mktemp -d /tmp/dyn-bench-decide.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
# Plain JSONL (the repository keeps it gzipped), so neither side pays for decompression.
trace="$tmp/conversation_trace.jsonl"
gzip -dcf "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" >"$trace"
"$bin/dyn-trace" sessionize "$trace" >"$tmp/sessions.jsonl" 2>/dev/null
decide=("$bin/dyn-route" decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300)

# once FILE CMD...: one run, output discarded; prints "wall cpu maxrss_kib". GNU time's %e, %U
# and %S step by 10 ms, a third of a whole `dyn-trace cat` of this trace: wall and CPU come from
# bash's `time` (the child's rusage, 1 ms steps), peak RSS from GNU time's %M.
once() {
  local out="$1"; shift
  local TIMEFORMAT='%3R %3U %3S' t
  t=$( { time /usr/bin/time -f '%M' -o "$tmp/time" "$@" >/dev/null 2>"$tmp/err"; } 2>&1 ) \
    || { cat "$tmp/err" >&2; exit 1; }
  awk -v t="$t" '{ split(t, a, " "); printf "%.3f %.3f %s\n", a[1], a[2] + a[3], $1 }' "$tmp/time" >>"$out"
}
median() {  # median of column $2 of file $1
  sort -g -k"$2,$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
verdict() {  # verdict VALUE GOAL le|ge
  awk -v v="$1" -v g="$2" -v op="$3" 'BEGIN { ok = (op == "le") ? v <= g : v >= g; print ok ? "PASS" : "MISS" }'
}

for name in raw sessions; do
  f="$trace"; [[ $name == sessions ]] && f="$tmp/sessions.jsonl"
  : >"$tmp/cat.$name"; : >"$tmp/dec.$name"
  for _ in $(seq "$runs"); do
    once "$tmp/cat.$name" "$bin/dyn-trace" cat "$f"
    once "$tmp/dec.$name" "${decide[@]}" "$f"
  done
  rows=$("${decide[@]}" "$f" 2>/dev/null | wc -l)
  binds=$("${decide[@]}" "$f" 2>/dev/null | grep -c '"binding":"hit"' || true)
  cw=$(median "$tmp/cat.$name" 1); dw=$(median "$tmp/dec.$name" 1)
  cc=$(median "$tmp/cat.$name" 2); dc=$(median "$tmp/dec.$name" 2)
  r=$(awk -v a="$dw" -v b="$cw" 'BEGIN { printf "%.2f", a / b }')
  rc=$(awk -v a="$dc" -v b="$cc" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  printf '%-8s rows %s (affinity hits %s): cat %.3f s, decide %.3f s (medians of %d paired runs); CPU %.3f / %.3f s\n' \
    "$name" "$rows" "$binds" "$cw" "$dw" "$runs" "$cc" "$dc"
  printf '%-8s ratio decide/cat: %s wall, %s CPU (goal <= 1.5): %s\n' "$name" "$r" "$rc" "$(verdict "$r" 1.5 le)"
done

# Memory at 1x, 4x, 16x: copies of the sessionized trace, each shifted past the previous one's end.
span=$(tail -1 "$tmp/sessions.jsonl" | sed -n 's/.*"timestamp":\([0-9]*\).*/\1/p')
for k in 4 16; do
  for c in $(seq 0 $((k - 1))); do
    awk -v off=$(( c * (span + 1000) )) -v c="$c" '{
      if (match($0, /"timestamp":[0-9]+/)) $0 = substr($0, 1, RSTART + 11) (substr($0, RSTART + 12, RLENGTH - 12) + off) substr($0, RSTART + RLENGTH)
      gsub(/"session_id":"/, "\"session_id\":\"c" c "-"); print }' "$tmp/sessions.jsonl"
  done >"$tmp/sessions.${k}x.jsonl"
done
for k in 1 4 16; do
  f="$tmp/sessions.jsonl"; [[ $k == 1 ]] || f="$tmp/sessions.${k}x.jsonl"
  : >"$tmp/mem.$k"
  once "$tmp/mem.$k" "${decide[@]}" "$f"
  printf 'decide on %2dx (%6d rows): %.3f s wall, peak RSS %s KiB\n' "$k" "$(wc -l <"$f")" \
    "$(median "$tmp/mem.$k" 1)" "$(median "$tmp/mem.$k" 3)"
done
m1=$(median "$tmp/mem.1" 3); m16=$(median "$tmp/mem.16" 3)
rm=$(awk -v a="$m16" -v b="$m1" 'BEGIN { printf "%.2f", a / b }')
printf 'peak RSS 16x / 1x: %s (goal <= 1.25, flat): %s\n' "$rm" "$(verdict "$rm" 1.25 le)"

"$build/bench/route_core_bench" "$tmp/sessions.jsonl" 9 8 | tee "$tmp/core"
dps=$(sed -n 's/^decisions\/s \([0-9]*\).*/\1/p' "$tmp/core")
printf 'route core: %s decisions/s median, ratio to goal %.2f: %s\n' "$dps" \
  "$(awk -v d="$dps" 'BEGIN { print d / 500000 }')" "$(verdict "$dps" 500000 ge)"
