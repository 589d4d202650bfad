#!/usr/bin/env bash
# Benchmark (issue 54): dyn-replay --sim at 8, 100 and 1,000 workers under the same offered load per
# worker: the Mooncake conversation trace (data/mooncake-fast25, 12,031 requests in ~1 h, no
# sessions) is the load of 8 workers, so W workers replay W/8 copies of it overlaid in time
# (bench/workload_copies.sh: each copy with its own hash ids, the same timestamps; 12.5 copies at
# 100 workers, the half copy being every other row; 125 copies, 1,503,875 requests, at 1,000).
# Each run: kv routing with session affinity (TTL 300 s, as bench/sim-mooncake.sh), rows piped to
# a hash and a line count (the rows are compared across runs of a size, and counted against the
# input), --summary for the configured KV state.
# Figures per size (median of RUNS runs, user + sys CPU and peak RSS from getrusage via
# /usr/bin/time on dyn-replay alone): requests per CPU-second, CPU-seconds including reading and
# parsing the input (both of the simulator's passes over it) and writing the rows; peak RSS.
# "Configured KV state" = workers x KV blocks per worker (16,384) x the bytes dyn itself keeps per
# block, as the simulator reports it (--summary kv_state): an engine pool's slab entry and two
# table cells, and the router prefix index's holder entry, LRU record and two map cells. Not the
# GPUs' KV bytes. "Requests in flight" = the most requests the streamed run held at once
# (--summary held_peak) x an estimate per request: its row and hash ids, and its engine block
# hashes three times (the router's copy, the engine's, the routing scratch) at the trace's mean
# prompt. Goals: 1,000 workers >= 30,000 requests per CPU-second and peak RSS <= 1.5 x (configured
# KV state + requests in flight); 8 workers >= 20,000 requests per CPU-second.
# KV_EVENTS=1 routes on the engines' KV events (--router-kv-events, Dynamo's default) instead of
# the approximate index (dyn's default without events, the verdict's): an exact index of what each
# engine holds, fed per engine step.
# SCALE=F (0 < F <= 1) replays only the first F of the trace's rows at every size (a quicker check
# of the script; the verdict is SCALE=1, the issue's size). RUNS=N runs per size (default 1).
# Usage: [SCALE=1] [RUNS=1] [KV_EVENTS=0] bench/sim-scale.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bin="$build/bin"
scale="${SCALE:-1}"
runs="${RUNS:-1}"
events=()
[[ ${KV_EVENTS:-0} == 0 ]] || events=(--router-kv-events)
out="$(mktemp -d /tmp/dyn-bench-simscale.XXXXXX)"
trap 'rm -rf "$out"' EXIT
source "$root/bench/workload_copies.sh"  # copies FILE N
gzip -dc "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" >"$out/all.jsonl"
total=$(wc -l <"$out/all.jsonl")
keep=$(awk -v n="$total" -v f="$scale" 'BEGIN { k = int(n * f + 0.5); print (k < 1) ? 1 : (k > n ? n : k) }')
head -n "$keep" "$out/all.jsonl" >"$out/trace.jsonl"
# Per request held: struct and row (~1 KiB), hash ids (8 B each) and 3 copies of its 64-token blocks.
per_req=$(jq -s 'map(1024 + 8 * (.hash_ids | length) + 3 * 8 * (.input_length / 64 | floor)) | add / length | floor' \
  "$out/trace.jsonl")
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# size WORKERS COPIES: prints "workers rows req_per_cpu_s cpu_s rss_kib kv_bytes inflight_bytes"
size() {
  local w=$1 n=$2 in="$out/in.jsonl"
  copies "$out/trace.jsonl" "$n" >"$in"
  local rows
  rows=$(wc -l <"$in")
  : >"$out/cpu"
  : >"$out/rss"
  : >"$out/sha"
  for _ in $(seq "$runs"); do
    /usr/bin/time -f '%U %S %M' -o "$out/time" "$bin/dyn-replay" --sim --workers "$w" --router-mode kv \
      --router-session-affinity-ttl-secs 300 ${events[@]+"${events[@]}"} --summary "$out/summary.json" "$in" 2>"$out/err" \
      | tee >(sha256sum >>"$out/sha") | wc -l >"$out/n" || { cat "$out/err" >&2; exit 1; }
    wait
    [[ $(cat "$out/n") == "$rows" ]] || { echo "$w workers: $(cat "$out/n") rows for $rows requests" >&2; exit 1; }
    jq -e '.summary.errors == 0' "$out/summary.json" >/dev/null || { echo "$w workers: errors" >&2; exit 1; }
    awk '{ print $1 + $2 }' "$out/time" >>"$out/cpu"
    awk '{ print $3 }' "$out/time" >>"$out/rss"
  done
  [[ $(sort -u "$out/sha" | wc -l) == 1 ]] || { echo "$w workers: the rows differ between runs" >&2; exit 1; }
  local cpu rss kv held
  cpu=$(median <"$out/cpu")
  rss=$(median <"$out/rss")
  kv=$(jq '.summary.kv_state.bytes' "$out/summary.json")
  held=$(jq '.summary.held_peak // 0' "$out/summary.json")
  grep -o 'simulated [0-9]* requests.*' "$out/err" | sed "s/^/  $w workers: /" >&2
  awk -v w="$w" -v r="$rows" -v c="$cpu" -v m="$rss" -v kv="$kv" -v f="$((held * per_req))" \
    'BEGIN { if (c < 0.01) c = 0.01; printf "%d %d %.0f %.2f %d %d %d\n", w, r, r / c, c, m, kv, f }'
  rm -f "$in"
}

printf 'SCALE %s: %d of the trace'"'"'s %d rows per copy; %d run(s) per size; estimate %d B per request held; %s\n' \
  "$scale" "$keep" "$total" "$runs" "$per_req" "${events[*]:-approximate index}"
printf '%8s %10s %12s %9s %12s %14s %13s\n' workers requests 'req/CPU-s' 'CPU s' 'peak RSS MB' 'KV state MB' 'in flight MB'
for spec in 8:1 100:12.5 1000:125; do
  size "${spec%%:*}" "${spec#*:}" >>"$out/table"
  tail -1 "$out/table" | awk '{ printf "%8d %10d %12d %9.2f %12.1f %14.1f %13.1f\n", $1, $2, $3, $4, $5 / 1024, $6 / 1048576, $7 / 1048576 }'
done
verdicts=$(awk '
  $1 == 8    { ok = $3 >= 20000; printf "8 workers: %d req/CPU-s (goal >= 20000): %s\n", $3, ok ? "PASS" : "MISS"; if (!ok) miss = miss " 8-workers-req/CPU-s" }
  $1 == 1000 { ok = $3 >= 30000; printf "1000 workers: %d req/CPU-s (goal >= 30000): %s\n", $3, ok ? "PASS" : "MISS"; if (!ok) miss = miss " 1000-workers-req/CPU-s"
               lim = 1.5 * ($6 + $7) / 1048576; ok = $5 / 1024 <= lim
               printf "1000 workers: peak RSS %.1f MB (goal <= 1.5 x (KV state %.1f MB + in flight %.1f MB) = %.1f MB): %s\n", $5 / 1024, $6 / 1048576, $7 / 1048576, lim, ok ? "PASS" : "MISS"
               if (!ok) miss = miss " 1000-workers-memory" }
  END { print (miss == "") ? "PASS" : "MISS" miss }' "$out/table")
echo "$verdicts"
[[ $scale == 1 ]] || echo "(SCALE=$scale: not the verdict size)"
[[ $(tail -1 <<<"$verdicts") == PASS ]]
