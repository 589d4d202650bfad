#!/usr/bin/env bash
# Benchmark: highest sustained request rate of dyn-replay (closed-loop concurrency, streaming,
# every SSE event parsed and stamped, one request_end row per request) against a dyn-mocker with
# (almost) zero delays, next to wrk on the same endpoint with the same body and connection count.
# Prints both rates and the ratio; goal >= 0.5x wrk. Exit 1 when missed.
# Usage: bench/replay-throughput.sh [BUILD_DIR] [CONNECTIONS] [SECONDS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
conns="${2:-64}"
secs="${3:-5}"
work="$(mktemp -d /tmp/dyn-bench-tput.XXXXXX)"
"$bin/dyn-mocker" --port 0 --port-file "$work/port" --speedup-ratio 1000000 2>"$work/mocker.err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/port")"
# The same request for both: 64 prompt tokens, 8 streamed output tokens.
prompt=$(head -c 256 /dev/zero | tr '\0' 'a')
body="{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":8,\"max_completion_tokens\":8,\"min_tokens\":8,\"ignore_eos\":true}"
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
LUA
wrk -t2 -c"$conns" -d"${secs}s" -s "$work/post.lua" "$url/v1/chat/completions" >"$work/wrk.out"
wrk_rate=$(awk '/Requests\/sec/ { print $2 }' "$work/wrk.out")
wrk_err=$(awk '/Non-2xx|Socket errors/ { print }' "$work/wrk.out")
# dyn-replay: enough rows for the same duration, closed loop at the same concurrency.
n=$(awk -v r="$wrk_rate" -v s="$secs" 'BEGIN { printf "%d", r * s * 1.2 + 1000 }')
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "{\"text_input\":\"%s\",\"output_length\":8}\n", substr(sprintf("%0256d", 0), 1, 256) }' |
  tr '0' 'a' >"$work/w.jsonl"
"$bin/dyn-replay" "$work/w.jsonl" --url "$url" --model m --concurrency "$conns" --ignore-eos --no-progress \
  --benchmark-duration "$secs" >"$work/rows.jsonl" 2>"$work/replay.err"
tail -2 "$work/replay.err"
read -r ok errs chunks rate < <(jq -s -r '
  (map(select(.dyn.status == "ok"))) as $ok |
  (($ok | map(.request.request_received_ms) | min) as $a | ($ok | map(.event_time_unix_ms) | max) as $b |
  [($ok | length), (map(select(.dyn.status != "ok")) | length), ($ok | map(.dyn.inter_chunk_ms | length + 1) | add),
   (($ok | length) * 1000 / ($b - $a))]) | @tsv' "$work/rows.jsonl")
echo "wrk:        $wrk_rate req/s over $conns connections ${wrk_err:+($wrk_err)}"
echo "dyn-replay: $rate req/s over $conns connections ($ok ok, $errs errors, $chunks content chunks parsed)"
awk -v a="$rate" -v b="$wrk_rate" -v e="$errs" 'BEGIN {
  r = a / b; printf "ratio dyn-replay/wrk: %.2f (goal >= 0.5): %s\n", r, (r >= 0.5 && e == 0) ? "met" : "MISSED"
  exit (r >= 0.5 && e == 0) ? 0 : 1 }'
