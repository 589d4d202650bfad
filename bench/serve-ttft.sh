#!/usr/bin/env bash
# Benchmark: TTFT and throughput through dyn-route serve (tracing on) against the same dyn-mocker
# reached directly, at 256 concurrent streaming clients. Prints both runs and the router's cost:
# added p50 TTFT (goal <= 0.2 ms) and throughput ratio (goal >= 0.7x direct); exit 1 on a miss.
# Baselines are measured in the same run. Usage: bench/serve-ttft.sh [BUILD_DIR] [CLIENTS] [SECONDS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
n="${2:-256}"
secs="${3:-10}"
work="$(mktemp -d /tmp/dyn-bench-serve.XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$work"' EXIT
"$build/bin/dyn-mocker" --port 0 --port-file "$work/m.port" 2>"$work/m.err" &
pids+=($!)
for _ in $(seq 100); do [[ -s "$work/m.port" ]] && break; sleep 0.05; done
"$build/bin/dyn-route" serve --worker "http://127.0.0.1:$(cat "$work/m.port")" --port 0 --port-file "$work/r.port" \
  --request-trace --request-trace-file-path "$work/trace" 2>"$work/r.err" &
pids+=($!)
for _ in $(seq 100); do [[ -s "$work/r.port" ]] && break; sleep 0.05; done
load="$build/bench/serve_load"
"$load" "http://127.0.0.1:$(cat "$work/m.port")" 32 2 >/dev/null || true  # warm up both paths
"$load" "http://127.0.0.1:$(cat "$work/r.port")" 32 2 >/dev/null || true
direct=$("$load" "http://127.0.0.1:$(cat "$work/m.port")" "$n" "$secs" || true)
routed=$("$load" "http://127.0.0.1:$(cat "$work/r.port")" "$n" "$secs" || true)
echo "direct: $direct"
echo "routed: $routed"
jq -n -r --argjson d "$direct" --argjson r "$routed" '
  ($r.ttft_p50_ms - $d.ttft_p50_ms) as $add | ($r.requests_per_s / $d.requests_per_s) as $ratio |
  "added TTFT p50: \($add * 1000 | round / 1000) ms (goal <= 0.2)  p99: \(($r.ttft_p99_ms - $d.ttft_p99_ms) * 1000 | round / 1000) ms",
  "throughput: \($ratio * 1000 | round / 1000)x direct (goal >= 0.7)  errors: direct \($d.errors), routed \($r.errors)",
  (if $add <= 0.2 and $ratio >= 0.7 and $d.errors == 0 and $r.errors == 0 then "PASS" else "MISS" end)' | tee "$work/verdict"
grep -qx PASS "$work/verdict"
