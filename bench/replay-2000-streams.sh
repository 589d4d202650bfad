#!/usr/bin/env bash
# Benchmark: dyn-replay holds 2,000 streams in flight at once (closed loop, --concurrency 2000,
# all dispatched at t=0) against one dyn-mocker, without errors. Prints the peak number of
# overlapping streams computed from the rows (request start .. response end), errors, and the
# client's CPU time. Exit 1 unless every request succeeded and the peak reached the target.
# Usage: bench/replay-2000-streams.sh [BUILD_DIR] [STREAMS] [OUTPUT_TOKENS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
n="${2:-2000}"
osl="${3:-40}"
work="$(mktemp -d /tmp/dyn-bench-streams.XXXXXX)"
"$bin/dyn-mocker" --port 0 --port-file "$work/port" --threads $((n + 64)) --max-num-seqs "$n" \
  --speedup-ratio 2 2>"$work/mocker.err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
awk -v n="$n" -v o="$osl" 'BEGIN { for (i = 0; i < n; i++) printf "{\"input_length\":128,\"output_length\":%d,\"hash_ids\":[%d]}\n", o, i }' >"$work/w.jsonl"
start=$(date +%s.%N)
/usr/bin/time -f "%U %S %M" -o "$work/time" "$bin/dyn-replay" "$work/w.jsonl" --url "http://127.0.0.1:$(cat "$work/port")" \
  --model m --concurrency "$n" --ignore-eos --no-progress >"$work/rows.jsonl" 2>"$work/replay.err" ||
  { cat "$work/replay.err"; exit 1; }
end=$(date +%s.%N)
tail -2 "$work/replay.err"
# Peak overlap: +1 at each request start, -1 at each end (ends first at equal times).
peak=$(jq -r '"\(.request.request_received_ms) 1\n\(.event_time_unix_ms) -1"' "$work/rows.jsonl" | sort -k1,1n -k2,2n |
  awk '{ c += $2; if (c > m) m = c } END { print m }')
errs=$(jq -s 'map(select(.dyn.status != "ok")) | length' "$work/rows.jsonl")
rows=$(wc -l <"$work/rows.jsonl")
read -r user sys rss <"$work/time"
awk -v n="$n" -v rows="$rows" -v p="$peak" -v e="$errs" -v s="$start" -v t="$end" -v u="$user" -v y="$sys" -v r="$rss" 'BEGIN {
  printf "streams %d  rows %d  errors %d  peak in flight %d  wall %.1f s  client cpu %.1f s  client max rss %.0f MiB\n", n, rows, e, p, t - s, u + y, r / 1024
  ok = (rows == n && e == 0 && p >= n)
  printf "goal %d streams in flight without errors: %s\n", n, ok ? "met" : "MISSED"
  exit ok ? 0 : 1 }'
