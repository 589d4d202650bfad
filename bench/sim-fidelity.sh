#!/usr/bin/env bash
# Benchmark: fidelity of the simulator against the live engine, at two load levels. The same small
# workload (40 rows of the Mooncake conversation trace, outputs capped at 40 tokens) re-timed GAP
# ms apart (400: mostly one request at a time; 100: requests overlap, batch and queue) runs
# through one live dyn-mocker (speedup 2) driven by dyn-replay's own live client (streaming
# /v1/completions, fixed schedule, ignore_eos, SPEC 4.3 synthetic prompts: each hash id = exactly
# 512 tokens of its own text, so live blocks align with the simulator's) and through
# dyn-replay --sim --workers 1 with the same engine flags. Prints, per load level, mean TTFT, mean
# latency and total cached tokens of both and their differences; each line ends in PASS or MISS
# (goals: within 3 %, identical cached tokens). Exits 1 on a MISS.
# Usage: bench/sim-fidelity.sh [BUILD_DIR] [GAPS]   (GAPS default "400 100")
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
read -r -a gaps <<<"${2:-400 100}"
work="$(mktemp -d /tmp/dyn-bench-fid.XXXXXX)"
speed=2
"$bin/dyn-mocker" --port 0 --port-file "$work/port" --speedup-ratio $speed 2>"$work/mocker.err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
summ='[.[] | select(.event_type == "request_end")] | {n: length, ok: (map(select(.dyn.status == "ok")) | length),
  ttft: (map(.request.ttft_ms) | add / length), lat: (map(.request.total_time_ms) | add / length),
  cached: (map(.request.cached_tokens) | add)}'
miss=0
for gap in "${gaps[@]}"; do
  { gzip -dc "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" 2>/dev/null || true; } | head -40 \
    | jq -c '{timestamp: 0, input_length, output_length: ([.output_length, 40] | min), hash_ids}' \
    | awk -v gap="$gap" '{ sub(/"timestamp":0/, "\"timestamp\":" (NR - 1) * gap); print }' > "$work/w.jsonl"
  # Each level starts from an empty cache: a fresh mocker would cost a start-up, so the workload's
  # ids are shifted per level instead (no block of one level is cached for the next).
  jq -c --argjson off "$((gap * 1000000))" '.hash_ids |= map(. + $off)' "$work/w.jsonl" > "$work/w2.jsonl"
  "$bin/dyn-replay" "$work/w2.jsonl" -u "http://127.0.0.1:$(cat "$work/port")" --endpoint-type completions \
    --streaming --ignore-eos --fixed-schedule -m m > "$work/live.jsonl" 2>"$work/live.err" \
    || { cat "$work/live.err" >&2; exit 1; }
  "$bin/dyn-replay" "$work/w2.jsonl" --sim --workers 1 --speedup-ratio $speed > "$work/sim.jsonl" 2>/dev/null
  jq -s -c "$summ" "$work/live.jsonl" > "$work/live.sum"
  jq -s -c "$summ" "$work/sim.jsonl" > "$work/sim.sum"
  jq -rn --arg gap "$gap" --slurpfile l "$work/live.sum" --slurpfile s "$work/sim.sum" '$l[0] as $l | $s[0] as $s |
    def pct(a; b): (a - b) / b * 100;
    def mark(d): if (d | fabs) <= 3 then "PASS" else "MISS" end;
    "rows \($gap) ms apart: requests live \($l.n) (\($l.ok) ok), sim \($s.n) (\($s.ok) ok), speedup 2",
    "  mean TTFT     live \($l.ttft*100|round/100) ms  sim \($s.ttft*100|round/100) ms  diff \((pct($l.ttft; $s.ttft)*100|round)/100) % (goal within 3 %): \(mark(pct($l.ttft; $s.ttft)))",
    "  mean latency  live \($l.lat*100|round/100) ms  sim \($s.lat*100|round/100) ms  diff \((pct($l.lat; $s.lat)*100|round)/100) % (goal within 3 %): \(mark(pct($l.lat; $s.lat)))",
    "  cached tokens live \($l.cached)  sim \($s.cached) (goal identical): \(if $l.cached == $s.cached and $l.n == 40 and $l.ok == 40 then "PASS" else "MISS" end)"' \
    | tee -a "$work/table"
done
! grep -q MISS "$work/table"
