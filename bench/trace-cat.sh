#!/usr/bin/env bash
# dyn-trace cat speed against gzip -cd of the same file, measured in the same run, on a gzip
# trace of request_end rows generated from the Mooncake conversation trace (goal: at most 1.5x
# the time of gzip -cd), with peak RSS at two sizes (goal: flat).
# Inputs go to $BENCH_DIR (default build/bench-data) and are never committed.
# Usage: bench/trace-cat.sh [BUILD_DIR] [MB]   (defaults: build, 100)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
mb="${2:-100}"
bin="$build/bin"
data="${BENCH_DIR:-$build/bench-data}"
mkdir -p "$data"
big="$data/request-end-${mb}mb.jsonl.gz"
small="$data/request-end-$((mb / 4))mb.jsonl.gz"
for spec in "$mb:$big" "$((mb / 4)):$small"; do
  m="${spec%%:*}" f="${spec#*:}"
  [[ -s "$f" ]] || "$root/bench/gen-request-end.sh" --mb "$m" | gzip -c >"$f"
done
printf 'input: %s (%s MB uncompressed)\n' "$big" "$(( $(gzip -cd "$big" | wc -c) / 1048576 ))"
run() {
  /usr/bin/time -f '%e %M' -o "$data/.time" bash -c "$1" >/dev/null
  read -r secs rss <"$data/.time"
  echo "$secs $rss"
}
read -r gz_s _ < <(run "gzip -cd '$big'")
read -r cat_s cat_rss < <(run "'$bin/dyn-trace' cat '$big'")
read -r _ small_rss < <(run "'$bin/dyn-trace' cat '$small'")
cmp <("$bin/dyn-trace" cat "$big") <(gzip -cd "$big") && echo "output identical to gzip -cd"
printf 'gzip -cd:        %6.2f s\n' "$gz_s"
printf 'dyn-trace cat:   %6.2f s  peak RSS %s KiB (%s KiB at 1/4 size)\n' "$cat_s" "$cat_rss" "$small_rss"
awk -v c="$cat_s" -v g="$gz_s" -v r1="$cat_rss" -v r2="$small_rss" 'BEGIN {
  printf "ratio cat / gzip -cd: %.2f (goal <= 1.5)\n", c / g
  printf "peak RSS 4x input / 1x: %.2f (goal: flat, ~1.0)\n", r1 / r2
}'
