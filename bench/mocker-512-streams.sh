#!/usr/bin/env bash
# Benchmark: dyn-mocker under 512 concurrent streaming chat clients (curl). Every stream must end
# with [DONE] and carry 64 content chunks; prints errors and token throughput.
# Usage: bench/mocker-512-streams.sh [BUILD_DIR] [CLIENTS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
n="${2:-512}"
work="$(mktemp -d /tmp/dyn-bench-mocker.XXXXXX)"
"$bin/dyn-mocker" --port 0 --port-file "$work/port" --speedup-ratio 1 2>"$work/mocker.err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/port")/v1/chat/completions"
start=$(date +%s.%N)
seq "$n" | xargs -P "$n" -I{} sh -c "curl -sN --max-time 120 '$url' -d '{\"model\":\"m\",\"stream\":true,\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"client {} says hello to the mock engine\"}]}' > '$work/s.{}' 2>/dev/null || true"
end=$(date +%s.%N)
ok=0; bad=0; chunks=0
for i in $(seq "$n"); do
  c=$(grep -c '"content":"[^"]' "$work/s.$i" || true)
  if tail -c 20 "$work/s.$i" | grep -q 'data: \[DONE\]' && [[ $c == 64 ]]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
  chunks=$((chunks + c))
done
awk -v n="$n" -v ok="$ok" -v bad="$bad" -v tok="$chunks" -v s="$start" -v e="$end" 'BEGIN {
  d = e - s
  printf "clients %d  complete %d  errors %d  wall %.2f s\n", n, ok, bad, d
  printf "output tokens %d  throughput %.0f tokens/s  %.1f requests/s\n", tok, tok / d, ok / d
}'
[[ $bad == 0 ]]
