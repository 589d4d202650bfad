#!/usr/bin/env bash
# The main job on an embedded default: installs what is missing, builds, starts two dyn-mocker
# workers behind dyn-route serve (tracing on) and replays the bundled agent-session workload (a
# sessionized slice of the real Mooncake conversation trace, data/quickstart/) three times, side by
# side — round-robin, kv routing, kv routing + hard session affinity (TTL 300 s) — each on its own
# fresh workers and router. Then it checks affinity on each router trace (dyn-bind check), compares the runs
# (dyn-bench), prints one table and writes report.html. Every process it starts is stopped at the
# end, also on Ctrl-C.
# Usage: scripts/quickstart.sh [OUT_DIR]   (default: ./quickstart-out)
# Env: DYN_QUICKSTART_SPEEDUP (default 100: the hour-long slice and the engine run 100x faster),
#      DYN_QUICKSTART_SESSIONS (replay only the first N sessions; the tests use it),
#      DYN_SETUP_SKIP=1 (do not run scripts/setup.sh: the build exists already).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Only the five tools this job runs are built (not the test suite: scripts/test.sh builds that).
tools=(dyn-mocker dyn-route dyn-replay dyn-bind dyn-bench)
[[ "${DYN_SETUP_SKIP:-}" == 1 ]] || "$root/scripts/setup.sh" "${tools[@]}"
bin="$root/build/bin"
out="${1:-$PWD/quickstart-out}"
workload="$root/data/quickstart/conversation-slice.jsonl"
speedup="${DYN_QUICKSTART_SPEEDUP:-100}"
block_size=64
kv_blocks=4096   # 262,144 tokens per worker: the slice's working set is ~650,000 tokens
rm -rf "$out" && mkdir -p "$out"
if [[ -n "${DYN_QUICKSTART_SESSIONS:-}" ]]; then
  jq -c -s --argjson n "$DYN_QUICKSTART_SESSIONS" \
    '(map(.session_id) | reduce .[] as $s ([]; if index([$s]) then . else . + [$s] end) | .[0:$n]) as $keep
     | .[] | select(.session_id as $s | $keep | index([$s]))' "$workload" >"$out/workload.jsonl"
  workload="$out/workload.jsonl"
fi

wait_port() {  # wait_port FILE -> prints the port once the server wrote it
  for _ in $(seq 1 200); do
    [[ -s "$1" ]] && { cat "$1"; return 0; }
    sleep 0.05
  done
  echo "quickstart: error: no port in $1 after 10 s" >&2
  return 4
}

echo "mock engine settings: 2 workers, block size $block_size, $kv_blocks KV blocks each" \
     "($((block_size * kv_blocks)) tokens; the slice's working set is ~650,000 tokens), speedup ${speedup}x"
echo "workload: $(wc -l <"$workload") requests in $(jq -r .session_id "$workload" | sort -u | wc -l) sessions ($workload)"

stop() {  # stop PID...: SIGTERM to each, then wait for all
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

run() {  # run NAME ROUTER_FLAGS... : one setup on its own two workers and router, in a subshell
  local name="$1"; shift
  local dir="$out/$name"
  mkdir -p "$dir"
  local pids=() urls=() port
  # SIGTERM flushes the router's trace; every process of this run stops when it ends or is stopped
  trap 'stop "${pids[@]}"' EXIT
  trap 'exit 143' TERM INT
  for w in 0 1; do
    "$bin/dyn-mocker" --port 0 --port-file "$dir/worker$w.port" --worker-id "$w" --block-size "$block_size" \
      --num-gpu-blocks-override "$kv_blocks" --speedup-ratio "$speedup" 2>"$dir/worker$w.log" &
    pids+=($!)
  done
  for w in 0 1; do urls+=(--worker "http://127.0.0.1:$(wait_port "$dir/worker$w.port")"); done
  "$bin/dyn-route" serve "${urls[@]}" --port 0 --port-file "$dir/router.port" \
    --kv-cache-block-size "$block_size" --router-worker-kv-blocks "$kv_blocks" \
    --request-trace --request-trace-file-path "$dir/trace" "$@" 2>"$dir/router.log" &
  pids+=($!)
  port=$(wait_port "$dir/router.port")
  echo "== $name: dyn-route serve $* (port $port)"
  # In the background and waited for, so that a stop signal is handled at once.
  "$bin/dyn-replay" "$workload" --url "http://127.0.0.1:$port" --streaming --speedup "$speedup" \
    --no-progress -o "$dir/rows.jsonl" --summary "$dir/summary.json" 2>"$dir/replay.log" &
  wait $! || { tail -5 "$dir/replay.log" >&2; return 4; }
  stop "${pids[@]}"
  pids=()
  set +e
  "$bin/dyn-bind" check --ttl-secs 300 "$dir"/trace.*.jsonl.gz >"$dir/violations.jsonl" 2>"$dir/bind.log"
  set -e
  "$bin/dyn-bench" report "$dir/rows.jsonl" --format json >"$dir/report.json"
}

# The three setups run side by side, each on its own fresh workers (cold caches) and router: the
# replays follow the workload's clock, so together they take the wall time of one.
runs=()
trap 'stop "${runs[@]}"' EXIT
trap 'echo "quickstart: interrupted" >&2; exit 130' INT TERM
(run round-robin --router-mode round-robin) &
runs+=($!)
(run kv --router-mode kv) &
runs+=($!)
(run kv-affinity --router-mode kv --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard) &
runs+=($!)
failed=0
for p in "${runs[@]}"; do wait "$p" || failed=1; done
runs=()
((failed == 0)) || { echo "quickstart: a run failed (its replay.log and router.log are in $out)" >&2; exit 4; }

echo
printf '%-12s %9s %11s %11s %10s %12s %10s\n' run "hit %" "TTFT p50" "TTFT p90" "req/s" "out tok/s" violations
for name in round-robin kv kv-affinity; do
  r="$out/$name/report.json"
  printf '%-12s %9.2f %11.2f %11.2f %10.3f %12.1f %10d\n' "$name" \
    "$(jq -r '.prompt_cache_hit_rate.avg // .prompt_cache_hit_pct // 0' "$r")" \
    "$(jq -r '.time_to_first_token.p50' "$r")" "$(jq -r '.time_to_first_token.p90' "$r")" \
    "$(jq -r '.request_throughput.avg' "$r")" "$(jq -r '.output_token_throughput.avg' "$r")" \
    "$(grep -c . "$out/$name/violations.jsonl" || true)"
done
echo "(times in ms and throughput per second of the ${speedup}x-compressed run; the affinity TTL and"
echo " dyn-bind's --ttl-secs count compressed seconds, so 300 s covers $((300 * speedup)) s of the original trace)"
echo
"$bin/dyn-bench" compare "$out/round-robin/rows.jsonl" "$out/kv-affinity/rows.jsonl" \
  --label-a round-robin --label-b kv-affinity --format table
"$bin/dyn-bench" plot "$out"/{round-robin,kv,kv-affinity}/rows.jsonl --label round-robin --label kv \
  --label kv-affinity --title "quickstart: three routing setups on the same workload" -o "$out/report.html"
echo "report: $out/report.html"
