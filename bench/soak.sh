#!/usr/bin/env bash
# Soak: DYN_SOAK_SESSIONS (1,000) concurrent agent sessions for DYN_SOAK_SECS (600) through
# dyn-route serve (kv routing, hard session affinity, TTL 300 s, request tracing on) over
# DYN_SOAK_WORKERS (4) dyn-mocker workers, driven by bench/serve_load (one session per client,
# its conversation growing every turn). Samples the router's resident memory over the run and
# prints requests, errors, RSS first/peak/last and growth, then runs `dyn-bind check` on the
# router's trace. Exit 0 only when errors = 0, memory is flat (last / post-warm-up sample <=
# DYN_SOAK_MAX_GROWTH, default 1.25; off = not judged), every request has its request_end row and the check passes.
# Usage: bench/soak.sh [BUILD_DIR]        (e.g. DYN_SOAK_SECS=10 bench/soak.sh for a smoke run)
#   DYN_SOAK_SAMPLE_SECS  RSS sampling interval (default: SECS/30, at least 1)
#   DYN_SOAK_WARMUP_SECS  samples before this are warm-up (default: SECS/5)
#   DYN_SOAK_KEEP=1       keep the work folder (trace, logs) and print its path
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-${DYN_BUILD:-$root/build}}"
n="${DYN_SOAK_SESSIONS:-1000}"
secs="${DYN_SOAK_SECS:-600}"
nw="${DYN_SOAK_WORKERS:-4}"
every="${DYN_SOAK_SAMPLE_SECS:-$(( secs / 30 > 1 ? secs / 30 : 1 ))}"
warmup="${DYN_SOAK_WARMUP_SECS:-$(( secs / 5 ))}"
max_growth="${DYN_SOAK_MAX_GROWTH:-1.25}"
work="$(mktemp -d /tmp/dyn-soak.XXXXXX)"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [[ "${DYN_SOAK_KEEP:-0}" == 1 ]]; then echo "soak: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
wait_port() { for _ in $(seq 400); do [[ -s "$1" ]] && return 0; sleep 0.05; done; echo "soak: no $1" >&2; exit 4; }
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$1/status" 2>/dev/null; }

workers=()
for ((w = 0; w < nw; w++)); do
  "$build/bin/dyn-mocker" --port 0 --port-file "$work/m$w.port" --worker-id "$w" --threads $((n + 64)) \
    --max-num-seqs "$n" 2>"$work/m$w.err" &
  pids+=($!)
done
for ((w = 0; w < nw; w++)); do wait_port "$work/m$w.port"; workers+=(--worker "http://127.0.0.1:$(cat "$work/m$w.port")"); done
"$build/bin/dyn-route" serve "${workers[@]}" --port 0 --port-file "$work/r.port" --threads $((n + 64)) \
  --router-mode kv --router-session-affinity-mode hard --router-session-affinity-ttl-secs 300 \
  --request-trace --request-trace-file-path "$work/trace" 2>"$work/r.err" &
rpid=$!
pids+=($rpid)
wait_port "$work/r.port"
url="http://127.0.0.1:$(cat "$work/r.port")"
echo "soak: $n sessions, $secs s, $nw workers, router pid $rpid, sampling RSS every $every s" >&2

"$build/bench/serve_load" "$url" "$n" "$secs" --sessions >"$work/load.json" 2>"$work/load.err" &
lpid=$!
samples=()   # "t kib"
t0=$SECONDS
while kill -0 $lpid 2>/dev/null; do
  sleep "$every"
  kill -0 $lpid 2>/dev/null || break
  kib=$(rss_kib $rpid)
  [[ -z "$kib" ]] && { echo "soak: the router died" >&2; break; }
  samples+=("$((SECONDS - t0)) $kib")
  echo "soak: t=$((SECONDS - t0))s router rss $((kib / 1024)) MiB" >&2
done
load_rc=0
wait $lpid || load_rc=$?
end_kib=$(rss_kib $rpid)
bindings=$(curl -s "$url/v1/bindings" | jq .count 2>/dev/null)
# SIGTERM flushes the trace (request_end rows of every finished request).
kill -TERM $rpid
wait $rpid
router_rc=$?
load="$(cat "$work/load.json")"
requests=$(jq .requests_ok <<<"$load" 2>/dev/null || echo 0)
errors=$(jq .errors <<<"$load" 2>/dev/null || echo -1)
"$build/bin/dyn-trace" cat "$work"/trace.*.jsonl.gz 2>"$work/cat.err" | jq -c 'select(.event_type == "request_end")' >"$work/ends.jsonl"
ends=$(wc -l <"$work/ends.jsonl")
ok_ends=$(jq -c 'select(.dyn.status == "ok")' "$work/ends.jsonl" | wc -l)
"$build/bin/dyn-bind" check --ttl-secs 300 "$work/ends.jsonl" >"$work/violations.jsonl" 2>"$work/check.err"
check_rc=$?

# RSS: first sample, first sample after warm-up (the baseline of the growth ratio), peak, last.
first=-1 base=-1 peak=0 last=-1
for s in "${samples[@]}"; do
  read -r t k <<<"$s"
  ((first < 0)) && first=$k
  ((base < 0 && t >= warmup)) && base=$k
  ((k > peak)) && peak=$k
  last=$k
done
((base < 0)) && base=$last
growth=$(awk -v a="$last" -v b="$base" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
# off: not judged (sanitizer builds, whose allocators keep freed memory in quarantine by design).
if [[ $max_growth == off ]]; then
  flat="not judged"
else
  flat=$(awk -v g="$growth" -v m="$max_growth" 'BEGIN { print (g > 0 && g <= m) ? "yes" : "no" }')
fi
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
echo "load: $load"
echo "requests: $requests  errors: $errors  request_end rows: $ends ($ok_ends ok)  bindings at end: $bindings"
echo "router rss MiB: first $(mib "$first")  after warm-up $(mib "$base")  peak $(mib "$peak")  last $(mib "$last")  growth $growth (flat: $flat, limit $max_growth)  samples ${#samples[@]}"
echo "router exit on SIGTERM: $router_rc"
echo "dyn-bind check: $([[ $check_rc == 0 ]] && echo pass || echo "FAIL (exit $check_rc, $(wc -l <"$work/violations.jsonl") violations)")"
rc=0
[[ $load_rc == 0 && "$errors" == 0 ]] || { echo "soak: FAIL: load client errors" >&2; head -5 "$work/load.err" >&2; rc=1; }
[[ "$requests" -gt 0 && "$ok_ends" -ge "$requests" ]] || { echo "soak: FAIL: $requests ok requests but $ok_ends ok request_end rows" >&2; rc=1; }
[[ $flat != no ]] || { echo "soak: FAIL: router memory grew" >&2; rc=1; }
[[ $check_rc == 0 ]] || { echo "soak: FAIL: dyn-bind check" >&2; head -5 "$work/violations.jsonl" "$work/check.err" >&2; rc=1; }
[[ $router_rc == 0 ]] || { echo "soak: FAIL: router exit $router_rc" >&2; tail -5 "$work/r.err" >&2; rc=1; }
exit $rc
