#!/usr/bin/env bash
# Long fuzzing runs (issue 11): each libFuzzer target in turn, one process (one job) at a time,
# until it has run N executions or S seconds, whichever comes first (default 10,000,000 or 1800 s).
# Prints one line per target: executions, duration, crashes (crash/leak/timeout/oom artifacts),
# peak RSS, corpus size. The corpus grows across runs in $DYN_FUZZ_BUILD/fuzz-long/<target>/corpus;
# findings are left there as crash-*, leak-*, timeout-*, oom-* with the log next to them.
# Usage: bench/fuzz-long.sh [--execs N] [--seconds S] [--max-len B] [TARGET...]
#   TARGET: sse headers jsonl workload request_end render kv_events worker_url kv_hints (default: all). Exit 1 when
#   anything was found. The KV event decoder's 10-minute run: bench/fuzz-long.sh --seconds 600 kv_events
# Env: DYN_FUZZ_BUILD (default ./build-fuzz; configured and built with clang when missing);
#   DYN_FUZZ_TIMEOUT: seconds one input may take before it counts as a timeout (default 10; raise it
#   on a loaded machine, where a starved process can stall that long on an ordinary input).
set -euo pipefail
[[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/lib/llvm-14/bin/llvm-symbolizer ]] &&
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DYN_FUZZ_BUILD:-$root/build-fuzz}"
execs=10000000 secs=1800 max_len=4096
targets=()
while (($#)); do
  case "$1" in
    --execs) execs="$2"; shift 2 ;;
    --seconds) secs="$2"; shift 2 ;;
    --max-len) max_len="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(sse headers jsonl workload request_end render kv_events worker_url kv_hints)

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DDYN_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
cmake --build "$build" -j2 --target dyn_fuzz >/dev/null

found=0
printf '%-12s %12s %10s %8s %10s %8s %10s\n' target executions seconds crashes peak_rss_mb corpus exec_per_s
for t in "${targets[@]}"; do
  work="$build/fuzz-long/$t"
  mkdir -p "$work/corpus" "$work/seeds"
  rm -rf "$work/seeds"/*
  "$root/fuzz/make-corpus.sh" "$t" "$work/seeds" 2>/dev/null
  dict=()
  [[ -f "$root/fuzz/$t.dict" ]] && dict=(-dict="$root/fuzz/$t.dict")
  before=$(find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  start=$(date +%s.%N)
  rc=0
  (cd "$work" && "$build/fuzz/fuzz_$t" "${dict[@]}" -runs="$execs" -max_total_time="$secs" -max_len="$max_len" \
      -timeout="${DYN_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$work/" \
      corpus seeds >"$work/run.log" 2>&1) || rc=$?
  end=$(date +%s.%N)
  after=$(find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  n=$(awk '/stat::number_of_executed_units/ {print $2}' "$work/run.log" | tail -1)
  rss=$(awk '/stat::peak_rss_mb/ {print $2}' "$work/run.log" | tail -1)
  dur=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.0f", b - a}')
  crashes=$((after - before))
  ((rc != 0 && crashes == 0)) && crashes=1  # a failure libFuzzer left no artifact for
  ((crashes)) && found=1
  printf '%-12s %12s %10s %8s %10s %8s %10s\n' "$t" "${n:-?}" "$dur" "$crashes" "${rss:-?}" \
    "$(find "$work/corpus" -type f | wc -l)" "$(awk -v n="${n:-0}" -v d="$dur" 'BEGIN {printf "%.0f", (d > 0 ? n / d : 0)}')"
  ((crashes)) && grep -E 'ERROR|SUMMARY|fuzz check failed|runtime error' "$work/run.log" | head -5 | sed 's/^/  /'
done
exit "$found"
