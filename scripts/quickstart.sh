#!/usr/bin/env bash
# The main job on an embedded default: installs what is missing, builds the six tools (with their
# man pages and shell completions), then replays the bundled agent-session workload (a sessionized
# slice of the real Mooncake conversation trace, data/quickstart/) through dyn-route serve over two
# dyn-mocker workers four times, one run after another so that no run's timing disturbs another's:
# round-robin, kv routing, kv routing + hard session affinity, kv routing + soft session affinity.
# Each run has fresh workers (cold caches) and its own router with tracing on. Then it checks
# affinity on each router trace (dyn-bind check), prints one table and what affinity bought and
# cost, compares hard and soft affinity (dyn-bench compare) and writes report.html. Every process
# it starts is stopped at the end, and at once on Ctrl-C (exit 130).
# Usage: scripts/quickstart.sh [OUT_DIR]   (default: ./quickstart-out)
# Env: DYN_QUICKSTART_SPEEDUP (default 150: the 57-minute slice and the engine run 150x faster,
#      about 23 s a run), DYN_QUICKSTART_SESSIONS (replay only the first N sessions; the tests use
#      it), DYN_SETUP_SKIP=1 (do not run scripts/setup.sh: the build exists already).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The six tools, each with its <tool>_docs target: the man page and the bash/zsh/fish completions
# in build/generated/ (not the test suite: scripts/test.sh builds that).
targets=()
for t in dyn-mocker dyn-route dyn-replay dyn-bind dyn-bench dyn-trace; do targets+=("$t" "${t}_docs"); done
[[ "${DYN_SETUP_SKIP:-}" == 1 ]] || "$root/scripts/setup.sh" "${targets[@]}"
bin="$root/build/bin"
out="${1:-$PWD/quickstart-out}"
workload="$root/data/quickstart/conversation-slice.jsonl"
speedup="${DYN_QUICKSTART_SPEEDUP:-150}"
block_size=64
kv_blocks=4096      # 262,144 tokens per worker: the slice's working set is ~650,000 tokens
soft_busy=8192      # soft affinity: a worker with more prefill tokens in flight is busy
started=$SECONDS
rm -rf "$out" && mkdir -p "$out"
if [[ -n "${DYN_QUICKSTART_SESSIONS:-}" ]]; then
  jq -c -s --argjson n "$DYN_QUICKSTART_SESSIONS" \
    '(map(.session_id) | reduce .[] as $s ([]; if index([$s]) then . else . + [$s] end) | .[0:$n]) as $keep
     | .[] | select(.session_id as $s | $keep | index([$s]))' "$workload" >"$out/workload.jsonl"
  workload="$out/workload.jsonl"
fi

# The processes of the run in progress (workers, router, replay). Background jobs of a script
# ignore SIGINT, so Ctrl-C reaches this shell alone: its trap stops them all at once, and nothing
# is left behind to finish on its own.
current=()
stop() {  # stop PID...: SIGTERM to each, then wait for all
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}
interrupted() {
  trap - INT TERM
  stop "${current[@]}"
  current=()
  echo "quickstart: interrupted; every process it started is stopped (partial results in $out)" >&2
  exit 130
}
trap interrupted INT TERM
trap 'stop "${current[@]}"' EXIT

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
echo "four set-ups, one after another (each on fresh workers and its own router):"

run() {  # run NAME WHY ROUTER_FLAGS... : one set-up on its own two workers and router
  local name="$1" why="$2"; shift 2
  local dir="$out/$name" urls=() port
  mkdir -p "$dir"
  echo
  echo "== $name: $why"
  for w in 0 1; do
    "$bin/dyn-mocker" --port 0 --port-file "$dir/worker$w.port" --worker-id "$w" --block-size "$block_size" \
      --num-gpu-blocks-override "$kv_blocks" --speedup-ratio "$speedup" 2>"$dir/worker$w.log" &
    current+=($!)
  done
  for w in 0 1; do urls+=(--worker "http://127.0.0.1:$(wait_port "$dir/worker$w.port")"); done
  # --drain-timeout-secs 1: after the replay nothing is in flight; on Ctrl-C nothing is waited for long.
  "$bin/dyn-route" serve "${urls[@]}" --port 0 --port-file "$dir/router.port" --drain-timeout-secs 1 \
    --kv-cache-block-size "$block_size" --router-worker-kv-blocks "$kv_blocks" \
    --request-trace --request-trace-file-path "$dir/trace" "$@" 2>"$dir/router.log" &
  current+=($!)
  port=$(wait_port "$dir/router.port")
  echo "   dyn-route serve $*"
  # In the background and waited for, so that a stop signal is handled at once.
  "$bin/dyn-replay" "$workload" --url "http://127.0.0.1:$port" --streaming --speedup "$speedup" \
    --no-progress -o "$dir/rows.jsonl" --summary "$dir/summary.json" 2>"$dir/replay.log" &
  current+=($!)
  if ! wait $!; then
    tail -5 "$dir/replay.log" >&2
    echo "quickstart: the $name replay failed (its replay.log and router.log are in $dir)" >&2
    exit 4
  fi
  stop "${current[@]}"  # SIGTERM flushes the router's trace
  current=()
  # A router with affinity recorded its TTL and mode (trace.run-config.json): dyn-bind check reads
  # them. The others are checked against what 300 s of hard affinity would have allowed.
  local check=()
  [[ " $* " == *" --router-session-affinity-ttl-secs "* ]] || check=(--ttl-secs 300 --mode hard)
  set +e
  "$bin/dyn-bind" check "${check[@]}" "$dir"/trace.*.jsonl.gz >"$dir/violations.jsonl" 2>"$dir/bind.log"
  set -e
  "$bin/dyn-bench" report "$dir/rows.jsonl" --format json >"$dir/report.json"
}

run round-robin "the baseline: requests alternate between the workers, blind to what each has cached." \
  --router-mode round-robin
run kv "KV-aware routing sends each request to the worker that holds most of its prefix, but a session can still move between turns and prefill its context again." \
  --router-mode kv
run kv-affinity "hard session affinity pins each session to one worker (300 s idle TTL): more prefix-cache hits and no moves, at the risk of queueing behind a busy worker." \
  --router-mode kv --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard
run kv-soft-affinity "soft affinity keeps a session on its worker unless that worker has more than $soft_busy prefill tokens in flight, then lets KV routing move it: the hits without the queue." \
  --router-mode kv --router-session-affinity-ttl-secs 300 --router-session-affinity-mode soft \
  --active-prefill-tokens-threshold "$soft_busy"

runs=(round-robin kv kv-affinity kv-soft-affinity)
fig() { jq -r "$2" "$out/$1/report.json"; }  # fig RUN JQ: one figure of a run's report
hit='.prompt_cache_hit_rate.avg // .prompt_cache_hit_pct // 0'
p90='.time_to_first_token.p90'
violations() { grep -c . "$out/$1/violations.jsonl" || true; }
echo
printf '%-17s %7s %9s %9s %8s %10s %10s\n' run "hit %" "TTFT p50" "TTFT p90" "req/s" "out tok/s" violations
for name in "${runs[@]}"; do
  printf '%-17s %7.2f %9.2f %9.2f %8.3f %10.1f %10d\n' "$name" "$(fig "$name" "$hit")" \
    "$(fig "$name" '.time_to_first_token.p50')" "$(fig "$name" "$p90")" "$(fig "$name" '.request_throughput.avg')" \
    "$(fig "$name" '.output_token_throughput.avg')" "$(violations "$name")"
done
echo "(times in ms at the client and throughput per second of the ${speedup}x-compressed run; TTL and"
echo " dyn-bind's TTL count compressed seconds, so 300 s covers $((300 * speedup)) s of the original trace;"
echo " violations: a session that moved within the TTL, counted for 300 s of hard affinity where the run had none)"
soft_moves=$(grep -o '[0-9]* busy (' "$out/kv-soft-affinity/bind.log" | grep -o '^[0-9]*' || echo 0)
echo
awk -v kh="$(fig kv "$hit")" -v ah="$(fig kv-affinity "$hit")" -v sh="$(fig kv-soft-affinity "$hit")" \
    -v kp="$(fig kv "$p90")" -v ap="$(fig kv-affinity "$p90")" -v sp="$(fig kv-soft-affinity "$p90")" \
    -v kvv="$(violations kv)" -v sm="$soft_moves" 'BEGIN {
  printf "What hard affinity buys (kv-affinity against kv): prompt-cache hit rate %.1f %% -> %.1f %%, sessions moved within the TTL %d -> 0.\n", kh, ah, kvv
  if (ap > kp) printf "What it costs: TTFT p90 %.1f -> %.1f ms: a pinned session waits behind its busy worker instead of going to the idle one.\n", kp, ap
  else printf "What it can cost: a pinned session waits behind its busy worker (TTFT p90 %.1f -> %.1f ms this time: no cost showed in the tail of this run).\n", kp, ap
  printf "Soft affinity answers that: hit rate %.1f %%, TTFT p90 %.1f ms; ", sh, sp
  if (sm > 0) printf "it moved a session %d times, each time off a busy worker.\n", sm
  else printf "no worker was busy enough for it to move a session.\n"
}'
echo
echo "Hard against soft affinity, the main rows of dyn-bench compare. Each set-up ran once, so a difference"
echo "is only indicative (marked in parentheses); for a verdict repeat each set-up and compare the runs:"
echo "dyn-bench compare A1 A2 A3 --vs B1 B2 B3 (mean and spread; a side is marked better only beyond the spread)."
"$bin/dyn-bench" compare "$out/kv-affinity/rows.jsonl" "$out/kv-soft-affinity/rows.jsonl" \
  --label-a kv-affinity --label-b kv-soft-affinity --format table >"$out/compare.txt"
grep -E '^(A:|B:|Metric|---|Time to First Token|Request Latency .* p90|Prompt Cache Hit Rate|Request Throughput|better:|  )' \
  "$out/compare.txt" || true
echo "(all rows: $out/compare.txt)"
rows=()
for name in "${runs[@]}"; do rows+=("$out/$name/rows.jsonl"); done
"$bin/dyn-bench" plot "${rows[@]}" --label round-robin --label kv --label kv-affinity \
  --label kv-soft-affinity --title "quickstart: four routing set-ups on the same workload" -o "$out/report.html"
echo
echo "report: $out/report.html"
echo "quickstart: the runs and the report took $((SECONDS - started)) s"
