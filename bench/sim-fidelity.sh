#!/usr/bin/env bash
# Benchmark: fidelity of the simulator against the live engine. The same small workload (40 rows
# of the Mooncake conversation trace, re-timed 400 ms apart, outputs capped at 40 tokens) runs
# through one live dyn-mocker (speedup 2) driven by dyn-replay's own live client (streaming
# /v1/completions, fixed schedule, ignore_eos, SPEC 4.3 synthetic prompts: each hash id = exactly
# 512 tokens of its own text, so live blocks align with the simulator's) and through
# dyn-replay --sim --workers 1 with the same engine flags. Prints mean TTFT, mean latency and total
# cached tokens of both and their differences; each line ends in PASS or MISS (goals: within 3 %,
# identical cached tokens).
# Usage: bench/sim-fidelity.sh [BUILD_DIR]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
work="$(mktemp -d /tmp/dyn-bench-fid.XXXXXX)"
speed=2
{ gzip -dc "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" 2>/dev/null || true; } | head -40 \
  | jq -c --argjson n 0 '. as $r | {timestamp: 0, input_length, output_length: ([.output_length, 40] | min), hash_ids}' \
  | awk '{ sub(/"timestamp":0/, "\"timestamp\":" (NR - 1) * 400); print }' > "$work/w.jsonl"
"$bin/dyn-mocker" --port 0 --port-file "$work/port" --speedup-ratio $speed 2>"$work/mocker.err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
"$bin/dyn-replay" "$work/w.jsonl" -u "http://127.0.0.1:$(cat "$work/port")" --endpoint-type completions --streaming \
  --ignore-eos --fixed-schedule -m m > "$work/live.jsonl" 2>"$work/live.err" || { cat "$work/live.err" >&2; exit 1; }
"$bin/dyn-replay" "$work/w.jsonl" --sim --workers 1 --speedup-ratio $speed > "$work/sim.jsonl" 2>/dev/null
summ='[.[] | select(.event_type == "request_end")] | {n: length, ok: (map(select(.dyn.status == "ok")) | length),
  ttft: (map(.request.ttft_ms) | add / length), lat: (map(.request.total_time_ms) | add / length),
  cached: (map(.request.cached_tokens) | add)}'
jq -s -c "$summ" "$work/live.jsonl" > "$work/live.sum"
jq -s -c "$summ" "$work/sim.jsonl" > "$work/sim.sum"
jq -rn --slurpfile l "$work/live.sum" --slurpfile s "$work/sim.sum" '$l[0] as $l | $s[0] as $s |
  def pct(a; b): (a - b) / b * 100;
  def mark(d): if (d | fabs) <= 3 then "PASS" else "MISS" end;
  "requests live \($l.n) (\($l.ok) ok), sim \($s.n) (\($s.ok) ok), speedup 2",
  "mean TTFT     live \($l.ttft*100|round/100) ms  sim \($s.ttft*100|round/100) ms  diff \((pct($l.ttft; $s.ttft)*100|round)/100) % (goal within 3 %): \(mark(pct($l.ttft; $s.ttft)))",
  "mean latency  live \($l.lat*100|round/100) ms  sim \($s.lat*100|round/100) ms  diff \((pct($l.lat; $s.lat)*100|round)/100) % (goal within 3 %): \(mark(pct($l.lat; $s.lat)))",
  "cached tokens live \($l.cached)  sim \($s.cached) (goal identical): \(if $l.cached == $s.cached and $l.n == 40 and $l.ok == 40 then "PASS" else "MISS" end)"'
