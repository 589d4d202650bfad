#!/usr/bin/env bash
# Benchmark: 1,000 concurrent agent sessions for 60 s through dyn-route serve in front of two
# dyn-mocker workers, hard affinity (TTL 300 s) and tracing on. Each client is one session whose
# conversation grows every turn. Prints the load result, the router's resident memory every 10 s
# (steady memory = no growth after warm-up) and the binding table size; exit 1 on any error.
# Usage: bench/serve-sessions.sh [BUILD_DIR] [SESSIONS] [SECONDS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
n="${2:-1000}"
secs="${3:-60}"
work="$(mktemp -d /tmp/dyn-bench-sessions.XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$work"' EXIT
for w in 0 1; do
  "$build/bin/dyn-mocker" --port 0 --port-file "$work/m$w.port" --worker-id $w --threads 2048 \
    --max-num-seqs 1024 2>"$work/m$w.err" &
  pids+=($!)
done
for w in 0 1; do for _ in $(seq 100); do [[ -s "$work/m$w.port" ]] && break; sleep 0.05; done; done
"$build/bin/dyn-route" serve --worker "http://127.0.0.1:$(cat "$work/m0.port")" \
  --worker "http://127.0.0.1:$(cat "$work/m1.port")" --port 0 --port-file "$work/r.port" --threads 2048 \
  --router-session-affinity-ttl-secs 300 --request-trace --request-trace-file-path "$work/trace" 2>"$work/r.err" &
rpid=$!
pids+=($rpid)
for _ in $(seq 100); do [[ -s "$work/r.port" ]] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/r.port")"
"$build/bench/serve_load" "$url" "$n" "$secs" --sessions >"$work/load.json" &
lpid=$!
t=0
while kill -0 $lpid 2>/dev/null; do
  sleep 10; t=$((t + 10))
  kill -0 $lpid 2>/dev/null || break
  echo "t=${t}s router rss $(awk '/VmRSS/{print $2 / 1024 " MiB"}' /proc/$rpid/status)  bindings $(curl -s "$url/v1/bindings" | jq .count)"
done
rc=0
wait $lpid || rc=$?
echo "load: $(cat "$work/load.json")"
echo "router rss at end $(awk '/VmRSS/{print $2 / 1024 " MiB"}' /proc/$rpid/status)"
curl -s "$url/metrics" | grep -E '^dyn_router_bindings_total|^dyn_worker_requests_total|^dyn_worker_errors_total'
kill -TERM $rpid; wait $rpid 2>/dev/null || true
echo "trace rows: $("$build/bin/dyn-trace" cat "$work"/trace.*.jsonl.gz | wc -l)"
exit $rc
