#!/usr/bin/env bash
# Benchmark: what the shared binding store (--router-binding-store, Redis) adds to TTFT. One
# dyn-route serve with hard affinity (TTL 300 s) over two dyn-mocker workers, at 256 concurrent
# streaming clients, run twice in the same invocation: with its in-process table only (baseline)
# and with the table shared in a fresh local redis-server. Two loads each:
#   sessions: each client is one agent session whose conversation grows every turn (after its first
#             turn a hit, served from the replica's copy without a round trip);
#   new:      every request opens a new session (a Redis read and an atomic claim, two round trips).
# Prints added TTFT p50/p99 (store - baseline) per load, and PASS when every added p50 <= 1 ms,
# every added p99 <= 5 ms and no request failed; else MISS (exit 1). Redis runs on this machine,
# so the round trip is a loopback one: add your network's RTT per read for a remote Redis.
# Usage: bench/serve-binding-store.sh [BUILD_DIR] [CLIENTS] [SECONDS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
n="${2:-256}"
secs="${3:-10}"
work="$(mktemp -d /tmp/dyn-bench-store.XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$work"' EXIT
waitport() { for _ in $(seq 200); do [[ -s "$1" ]] && return 0; sleep 0.05; done; echo "no port in $1" >&2; exit 2; }
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do [[ $(redis-cli -p "$rport" ping 2>/dev/null) == PONG ]] && break; sleep 0.05; done
for w in 0 1; do
  "$build/bin/dyn-mocker" --port 0 --port-file "$work/m$w.port" --worker-id $w --threads 1024 \
    --max-num-seqs 1024 2>"$work/m$w.err" &
  pids+=($!)
  waitport "$work/m$w.port"
done
workers=(--worker "http://127.0.0.1:$(cat "$work/m0.port")" --worker "http://127.0.0.1:$(cat "$work/m1.port")")
start_router() {  # NAME [ARGS...]: sets $NAME to the router's URL
  "$build/bin/dyn-route" serve "${workers[@]}" --port 0 --port-file "$work/$1.port" --threads 1024 \
    --router-session-affinity-ttl-secs 300 --router-max-bindings 1000000 "${@:2}" 2>"$work/$1.err" &
  pids+=($!)
  waitport "$work/$1.port"
  printf -v "$1" 'http://127.0.0.1:%s' "$(cat "$work/$1.port")"
}
start_router base
start_router shared --router-binding-store "redis://127.0.0.1:$rport"
load="$build/bench/serve_load"
"$load" "$base" 32 2 --sessions >/dev/null || true  # warm up both routers
"$load" "$shared" 32 2 --sessions >/dev/null || true
results=()
for kind in sessions new; do
  args=(--sessions)
  [[ $kind == new ]] && args=(--unique-sessions 100000000)
  b=$("$load" "$base" "$n" "$secs" "${args[@]}" || true)
  s=$("$load" "$shared" "$n" "$secs" "${args[@]}" || true)
  echo "$kind baseline: $b"
  echo "$kind store:    $s"
  results+=("$(jq -n -c --arg k "$kind" --argjson b "$b" --argjson s "$s" \
    '{kind: $k, p50: ($s.ttft_p50_ms - $b.ttft_p50_ms), p99: ($s.ttft_p99_ms - $b.ttft_p99_ms),
      errors: ($b.errors + $s.errors + ($b.rejected_503 // 0) + ($s.rejected_503 // 0))}')")
done
curl -s "$shared/metrics" | grep -E '^dyn_router_binding_store_(reads|cached|claims|conflicts|errors|outages|local_only)_total' || true
# A store call slower than its 1 s timeout (a starved machine) counts as an outage: say so.
grep -h 'binding store' "$work/shared.err" || true
printf '%s\n' "${results[@]}" | jq -s -r '
  (.[] | "\(.kind): added TTFT p50 \(.p50 * 1000 | round / 1000) ms (goal <= 1)  p99 \(.p99 * 1000 | round / 1000) ms (goal <= 5)  errors \(.errors)"),
  (if all(.[]; .p50 <= 1 and .p99 <= 5 and .errors == 0) then "PASS" else "MISS" end)' | tee "$work/verdict"
grep -qx PASS "$work/verdict"
