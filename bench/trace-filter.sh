#!/usr/bin/env bash
# dyn-trace filter speed and memory, against baselines measured in the same run, on a gzip trace of
# request_end rows generated from the Mooncake conversation trace (bench/gen-request-end.sh):
#  1. filter --event request_end --where 'request.cached_tokens>30000' (a selective condition:
#     about 2.5 % of the rows) vs gzip -cd | jq -c 'select(...)' with the same meaning (goal: at
#     least 10x faster); the selected rows themselves must equal jq's (both normalized by
#     jq -cS, compared byte for byte), not just their number;
#  2. the same filter vs gzip -cd > /dev/null                (goal: at most 1.5x its time);
#  3. peak RSS of the filter at two file sizes               (goal: flat as the file grows).
# Inputs go to $BENCH_DIR (default build/bench-data) and are never committed.
# Each figure is the median of RUNS (default 3) interleaved rounds.
# Usage: [RUNS=N] bench/trace-filter.sh [BUILD_DIR] [MB]   (defaults: build, 200)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
mb="${2:-200}"
bin="$build/bin"
data="${BENCH_DIR:-$build/bench-data}"
mkdir -p "$data"
big="$data/request-end-${mb}mb.jsonl.gz"
small="$data/request-end-$((mb / 4))mb.jsonl.gz"
for spec in "$mb:$big" "$((mb / 4)):$small"; do
  m="${spec%%:*}" f="${spec#*:}"
  [[ -s "$f" ]] || "$root/bench/gen-request-end.sh" --mb "$m" | gzip -c >"$f"
done
printf 'input: %s (%s MB uncompressed, %s MB gzip)\n' "$big" \
  "$(( $(gzip -cd "$big" | wc -c) / 1048576 ))" "$(( $(stat -c %s "$big") / 1048576 ))"
# run NAME CMD...: wall seconds and peak RSS (KiB) of one run, output discarded.
run() {
  /usr/bin/time -f '%e %M' -o "$data/.time" bash -c "$1" >/dev/null
  read -r secs rss <"$data/.time"
  echo "$secs $rss"
}
where='request.cached_tokens>30000'
jqprog='select(.event_type=="request_end" and (.request.cached_tokens|type)=="number" and .request.cached_tokens>30000)'
# RUNS rounds, interleaved (gzip, filter, small filter, jq, gzip, ...) so load on a shared machine
# hits every side alike; each figure is the median of its rounds.
runs="${RUNS:-3}"
: >"$data/.runs"
for _ in $(seq "$runs"); do
  echo "gz $(run "gzip -cd '$big' >/dev/null")" >>"$data/.runs"
  echo "dyn $(run "'$bin/dyn-trace' filter --event request_end --where '$where' '$big'")" >>"$data/.runs"
  echo "small $(run "'$bin/dyn-trace' filter --event request_end --where '$where' '$small'")" >>"$data/.runs"
  echo "jq $(run "gzip -cd '$big' | jq -c '$jqprog'")" >>"$data/.runs"
done
# median NAME COLUMN: the median of that column over NAME's rounds (column 2 seconds, 3 RSS KiB).
median() {
  awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$data/.runs" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
gz_s=$(median gz 2) dyn_s=$(median dyn 2) dyn_rss=$(median dyn 3)
dyn_small_s=$(median small 2) dyn_small_rss=$(median small 3) jq_s=$(median jq 2)
rm -f "$data/.runs"
"$bin/dyn-trace" filter --event request_end --where "$where" "$big" | jq -cS . >"$data/.ours"
gzip -cd "$big" | jq -cS "$jqprog" >"$data/.theirs"
total=$(gzip -cd "$big" | wc -l)
ours=$(wc -l <"$data/.ours")
theirs=$(wc -l <"$data/.theirs")
same=MISS
cmp -s "$data/.ours" "$data/.theirs" && same=PASS
rm -f "$data/.ours" "$data/.theirs"
printf 'rows selected: dyn-trace %s, jq %s of %s (%.2f %%); selected rows identical to jq'"'"'s: %s\n' \
  "$ours" "$theirs" "$total" "$(echo "100 * $ours / $total" | bc -l)" "$same"
printf 'medians of %s interleaved rounds:\n' "$runs"
printf 'gzip -cd > /dev/null:     %6.2f s\n' "$gz_s"
printf 'dyn-trace filter:         %6.2f s  peak RSS %s KiB\n' "$dyn_s" "$dyn_rss"
printf 'gzip -cd | jq select:     %6.2f s\n' "$jq_s"
printf 'filter on %s MB:          %6.2f s  peak RSS %s KiB\n' "$((mb / 4))" "$dyn_small_s" "$dyn_small_rss"
awk -v d="$dyn_s" -v j="$jq_s" -v g="$gz_s" -v r1="$dyn_rss" -v r2="$dyn_small_rss" 'BEGIN {
  v = j / d;  printf "speedup over jq:          %6.1fx (goal >= 10): %s\n", v, (v >= 10) ? "PASS" : "MISS"
  v = d / g;  printf "ratio filter / gzip -cd:  %6.2f  (goal <= 1.5): %s\n", v, (v <= 1.5) ? "PASS" : "MISS"
  v = r1 / r2; printf "peak RSS 4x input / 1x:   %6.2f  (goal: flat, <= 1.25): %s\n", v, (v <= 1.25) ? "PASS" : "MISS"
}'
[[ $same == PASS ]] || { echo "selected rows differ from jq's" >&2; exit 1; }
